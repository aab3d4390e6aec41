"""The ``serve`` process: OTLP/HTTP and OTLP/gRPC receivers, the collector, the pipeline.

:class:`Service` starts the listeners, and on :meth:`Service.stop` (SIGTERM, SIGINT) stops
taking requests, lets those in flight finish, then decides every waiting task span and
writes its diary before :meth:`Service.run` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Iterator
from typing import Any

import uvicorn

from otel_diary.assembly.grace import Collector, TraceStore
from otel_diary.pipeline.core import build_pipeline
from otel_diary.profiles import load_conventions
from otel_diary.receiver.grpc import TraceService, grpc_server
from otel_diary.receiver.http import OtlpHttpApp
from otel_diary.settings import Settings

logger = logging.getLogger("otel_diary")

GC_THRESHOLDS = (50_000, 20, 100)
"""The garbage collector's thresholds while serving (Python's defaults: 700, 10, 10)."""


def listening_on(settings: Settings) -> list[str]:
    """Where the receivers listen, for people: ``http://127.0.0.1:4318 (OTLP/HTTP)``, ..."""
    host = f"[{settings.serve_host}]" if ":" in settings.serve_host else settings.serve_host
    addresses = []
    if settings.serve_http_port:
        addresses.append(f"http://{host}:{settings.serve_http_port} (OTLP/HTTP)")
    if settings.serve_grpc_port:
        addresses.append(f"{host}:{settings.serve_grpc_port} (OTLP/gRPC)")
    return addresses


class Service:
    """The receivers, the collector and the pipeline of one ``serve`` process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        conventions = load_conventions(settings.conventions)
        pipeline = build_pipeline(settings, conventions)
        store = TraceStore(
            conventions,
            grace=settings.serve_grace_s,
            trace_timeout=settings.serve_trace_timeout_s,
            max_traces=settings.serve_max_traces,
            max_spans=settings.serve_max_spans,
            max_bytes=settings.serve_max_bytes,
        )
        self.collector = Collector(store, pipeline)
        token = settings.serve_token.get_secret_value() if settings.serve_token else None
        self.http_app = OtlpHttpApp(self.collector, conventions, token=token,
                                    max_body_bytes=settings.serve_max_body_bytes)
        self.grpc_service = TraceService(self.collector, conventions, token=token)
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM and SIGINT do)."""
        self._stop.set()

    async def run(self) -> int:
        """Serve until stopped; returns the process exit code."""
        settings = self.settings
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self.stop)
        grpc = None
        http: _Server | None = None
        http_task: asyncio.Task[None] | None = None
        shutdown_s = settings.shutdown_timeout_ms / 1000
        code = 0
        try:
            if settings.serve_grpc_port:
                try:
                    grpc, _ = grpc_server(self.grpc_service, settings.serve_host,
                                          settings.serve_grpc_port)
                except (OSError, RuntimeError) as exc:
                    address = f"{settings.serve_host}:{settings.serve_grpc_port}"
                    logger.error("cannot listen for OTLP/gRPC on %s: %s", address, exc,
                                 extra={"fields": {"address": address, "error": str(exc)}})
                    return 1
            if settings.serve_http_port:
                config = uvicorn.Config(
                    self.http_app, host=settings.serve_host, port=settings.serve_http_port,
                    http="httptools", lifespan="off", log_config=None, access_log=False,
                    server_header=False,
                    timeout_graceful_shutdown=max(int(shutdown_s), 1),
                )
                http = _Server(config)
                http_task = asyncio.create_task(http.serve())
                while not http.started and not http_task.done():
                    await asyncio.sleep(0.01)
                if http_task.done():
                    address = f"{settings.serve_host}:{settings.serve_http_port}"
                    logger.error("cannot listen for OTLP/HTTP on %s", address,
                                 extra={"fields": {"address": address}})
                    return 1
            # Said only once every listener accepts connections: a client may start now.
            fields = {"event": "serve.started", "host": settings.serve_host,
                      "http_port": settings.serve_http_port or None,
                      "grpc_port": settings.serve_grpc_port or None,
                      "dir": str(settings.root), "grace_s": settings.serve_grace_s,
                      "auth": settings.serve_token is not None}
            logger.info("otel-diary serve is listening on %s; diaries go to %s",
                        " and ".join(listening_on(settings)), settings.root,
                        extra={"fields": fields})
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
        store = self.collector.store
        stats = self.collector.pipeline.stats
        logger.info("otel-diary serve stopped: %d diaries written, %d failed runs skipped",
                    stats.diaries, stats.failed_runs, extra={"fields": {
            "event": "serve.stopped", "drained": drained, "spans_accepted": store.accepted,
            "root_tasks": store.root_tasks, "diaries_written": stats.diaries,
            "failed_runs": stats.failed_runs, "rootless_traces": store.rootless_expired}})


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the service owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        pass
