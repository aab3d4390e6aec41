"""The ``serve`` process: OTLP/HTTP and OTLP/gRPC receivers, the collector, the pipeline.

:class:`Service` starts the listeners, and on :meth:`Service.stop` (SIGTERM, SIGINT) stops
taking requests, lets those in flight finish, then decides every waiting task span and
writes its diary before :meth:`Service.run` returns; what the shutdown timeout leaves
unwritten stays in the journal for the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from otel_diary.receiver.admission import Collector
from otel_diary.receiver.grpc import TraceService, grpc_server
from otel_diary.receiver.guard import connection_limits, guarded_protocol
from otel_diary.receiver.http import OtlpHttpApp

logger = logging.getLogger("otel_diary")

GC_THRESHOLDS = (50_000, 20, 100)
"""The garbage collector's thresholds while serving (Python's defaults: 700, 10, 10)."""


@dataclass(frozen=True)
class ServeConfig:
    """Where a ``serve`` process listens and how long it may take to stop."""

    host: str = "127.0.0.1"
    http_port: int = 4318
    """0: no OTLP/HTTP listener."""
    grpc_port: int = 4317
    """0: no OTLP/gRPC listener."""
    shutdown_timeout_s: float = 10.0
    folder: str = ""
    """The knowledge base's root, for the start-up log line's ``dir`` field."""
    destinations: str = ""
    """Where the diaries go (the folder, a store, a hub), for the start-up log line."""
    grace_s: float = 10.0
    journal: str = ""
    """The journal file, for the start-up log line ("": none)."""
    conventions: str = "orchestrator"
    """The profile (or conventions file) spans are read under, for the start-up log line."""
    auth: bool = False
    header_timeout_s: float = 10.0
    """An HTTP request head not complete this long after it began closes the connection."""
    body_timeout_s: float = 30.0
    """An HTTP request body that stops arriving this long closes the connection."""
    max_header_bytes: int = 64 * 1024
    """A larger HTTP request head is answered 431."""
    max_connections: int = 1000
    """HTTP connections open at once; past it the longest waiting one is closed."""
    idle_timeout_s: float = 15.0
    """An HTTP connection idle between requests this long is closed."""
    grpc_max_message_bytes: int = 16 * 2**20
    """A larger gRPC request message is refused."""
    tls_cert_file: str = ""
    """The certificate both listeners present ("": no TLS), with ``tls_key_file``."""
    tls_key_file: str = ""

    def listening_on(self) -> list[str]:
        """Where the receivers listen, for people: ``http://127.0.0.1:4318 (OTLP/HTTP)``, ..."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        addresses = []
        if self.http_port:
            scheme = "https" if self.tls_cert_file else "http"
            addresses.append(f"{scheme}://{host}:{self.http_port} (OTLP/HTTP)")
        if self.grpc_port:
            over = " over TLS" if self.tls_cert_file else ""
            addresses.append(f"{host}:{self.grpc_port} (OTLP/gRPC{over})")
        return addresses

    def open_to_others(self) -> bool:
        """Whether anyone who can reach a network address of this host may send spans:
        no token, and a host other than a loopback address."""
        if self.auth or self.host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:  # a host name, "" or 0.0.0.0's kin: not known to be loopback
            return True


class Service:
    """The receivers, the collector and the pipeline of one ``serve`` process."""

    def __init__(self, collector: Collector, http_app: OtlpHttpApp,
                 grpc_service: TraceService, config: ServeConfig) -> None:
        self.collector = collector
        self.http_app = http_app
        self.grpc_service = grpc_service
        self.config = config
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM and SIGINT do)."""
        self._stop.set()

    async def run(self) -> int:
        """Serve until stopped; returns the process exit code."""
        config = self.config
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self.stop)
        grpc = None
        http: _Server | None = None
        http_task: asyncio.Task[None] | None = None
        shutdown_s = config.shutdown_timeout_s
        code = 0
        try:
            if config.grpc_port:
                try:
                    grpc, _ = grpc_server(
                        self.grpc_service, config.host, config.grpc_port,
                        max_message_bytes=config.grpc_max_message_bytes,
                        tls=(Path(config.tls_key_file).read_bytes(),
                             Path(config.tls_cert_file).read_bytes())
                        if config.tls_cert_file else None)
                except (OSError, RuntimeError) as exc:
                    address = f"{config.host}:{config.grpc_port}"
                    logger.error("cannot listen for OTLP/gRPC on %s: %s", address, exc,
                                 extra={"fields": {"address": address, "error": str(exc)}})
                    return 1
            if config.http_port:
                server_config = uvicorn.Config(
                    self.http_app, host=config.host, port=config.http_port,
                    http=guarded_protocol(header_timeout_s=config.header_timeout_s,
                                          body_timeout_s=config.body_timeout_s,
                                          max_header_bytes=config.max_header_bytes,
                                          max_connections=config.max_connections,
                                          counters=self.collector.counters),
                    timeout_keep_alive=config.idle_timeout_s,  # type: ignore[arg-type]
                    backlog=connection_limits(config.max_connections)[1],
                    ws="none",  # OTLP has no WebSocket binding; no library is loaded
                    lifespan="off", log_config=None, access_log=False,
                    server_header=False,
                    timeout_graceful_shutdown=max(int(shutdown_s), 1),
                    ssl_certfile=config.tls_cert_file or None,
                    ssl_keyfile=config.tls_key_file or None,
                )
                http = _Server(server_config)
                http_task = asyncio.create_task(http.serve())
                while not http.started and not http_task.done():
                    await asyncio.sleep(0.01)
                if http_task.done():
                    address = f"{config.host}:{config.http_port}"
                    logger.error("cannot listen for OTLP/HTTP on %s", address,
                                 extra={"fields": {"address": address}})
                    return 1
            # Said only once every listener accepts connections: a client may start now.
            fields = {"event": "serve.started", "host": config.host,
                      "http_port": config.http_port or None,
                      "grpc_port": config.grpc_port or None,
                      "dir": config.folder, "grace_s": config.grace_s, "auth": config.auth,
                      "tls": bool(config.tls_cert_file),
                      "journal": config.journal or None, "conventions": config.conventions}
            logger.info("otel-diary serve is listening on %s; diaries go to %s; spans are "
                        "read with the %s conventions (OTEL_DIARY_CONVENTIONS)",
                        " and ".join(config.listening_on()),
                        config.destinations or config.folder, config.conventions,
                        extra={"fields": fields})
            if config.open_to_others():
                logger.warning("otel-diary serve listens on %s without a token: anyone who "
                               "can reach it may send spans (set --token or "
                               "OTEL_DIARY_SERVE_TOKEN, unless the network keeps others out)",
                               config.host or "every address",
                               extra={"fields": {"event": "serve.open", "host": config.host}})
            # What start-up made lives as long as the process: keep the garbage collector's
            # passes from walking it again each time. Held traces make no reference cycles,
            # and each request allocates thousands of objects: collect less often.
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)
            waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._stop.wait())}
            if http_task is not None:
                waiters.add(http_task)
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            logger.info("otel-diary serve is stopping", extra={"fields": {
                "event": "serve.stopping"}})
        except BaseException:
            code = 1
            raise
        finally:
            await self._shut_down(http, http_task, grpc, shutdown_s)
        return code

    async def _shut_down(self, http: _Server | None, http_task: asyncio.Task[None] | None,
                         grpc: Any, shutdown_s: float) -> None:
        """Stop listening, finish requests in flight, then write every waiting diary."""
        loop = asyncio.get_running_loop()
        if http is not None:
            http.should_exit = True
        stopped = grpc.stop(shutdown_s) if grpc is not None else None
        if http_task is not None:
            with contextlib.suppress(BaseException):
                await http_task
        if stopped is not None:
            await loop.run_in_executor(None, stopped.wait, shutdown_s + 1)
        drained = await loop.run_in_executor(None, self.collector.close, shutdown_s)
        self.http_app.close()
        self.grpc_service.close()
        store = self.collector.store
        stats = self.collector.pipeline.stats
        logger.info("otel-diary serve stopped: %d diaries written, %d failed runs skipped",
                    stats.diaries, stats.failed_runs, extra={"fields": {
            "event": "serve.stopped", "drained": drained, "spans_accepted": store.accepted,
            "root_tasks": store.root_tasks, "diaries_written": stats.diaries,
            "failed_runs": stats.failed_runs, "rootless_traces": store.rootless_expired,
            "left_for_next_start": self.collector.pending_diaries}})


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the service owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        pass

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's, except that a port it cannot bind ends this task, not the process:
        uvicorn logs why and calls ``sys.exit(3)``, which skipped the service's own
        message and exit code."""
        with contextlib.suppress(SystemExit):
            await super().serve(sockets)
