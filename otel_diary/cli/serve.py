"""``otel-diary serve``: an OTLP receiver (HTTP and gRPC) feeding the diary pipeline.

Settings come from the environment (``OTEL_DIARY_SERVE_*``); flags override them. On
SIGTERM or SIGINT the listeners stop taking requests, finish those in flight, and every
task span still waiting is decided and written before the process exits.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otel_diary import wiring
from otel_diary.conventions import load_conventions
from otel_diary.settings import SERVE_TOKEN, Settings, check_serve_token

if TYPE_CHECKING:
    from otel_diary.receiver.service import Service

logger = logging.getLogger("otel_diary")

_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--host", "serve_host", str, "address to listen on (OTEL_DIARY_SERVE_HOST; 127.0.0.1)"),
    ("--http-port", "serve_http_port", int,
     "OTLP/HTTP port, 0 for none (OTEL_DIARY_SERVE_HTTP_PORT; 4318)"),
    ("--grpc-port", "serve_grpc_port", int,
     "OTLP/gRPC port, 0 for none (OTEL_DIARY_SERVE_GRPC_PORT; 4317)"),
    ("--dir", "dir", Path, "knowledge-base root the diaries go under (OTEL_DIARY_DIR)"),
    ("--store", "store_url", str,
     "a shared store, postgresql://…, the diaries go to (OTEL_DIARY_STORE_URL; none)"),
    ("--token", "serve_token", str,
     "require this bearer token or x-api-key (OTEL_DIARY_SERVE_TOKEN; none)"),
    ("--tls-cert", "serve_tls_cert_file", Path,
     "serve TLS alone with this certificate, PEM (OTEL_DIARY_SERVE_TLS_CERT_FILE; none)"),
    ("--tls-key", "serve_tls_key_file", Path,
     "the certificate's private key, PEM (OTEL_DIARY_SERVE_TLS_KEY_FILE; none)"),
    ("--grace", "serve_grace_s", float,
     "seconds to wait for late child spans of a task (OTEL_DIARY_SERVE_GRACE_S; 10)"),
    ("--trace-timeout", "serve_trace_timeout_s", float,
     "seconds before a trace without a root task is forgotten "
     "(OTEL_DIARY_SERVE_TRACE_TIMEOUT_S; 300)"),
    ("--max-body-bytes", "serve_max_body_bytes", int,
     "largest OTLP/HTTP body after decompression (OTEL_DIARY_SERVE_MAX_BODY_BYTES; 20 MiB)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, field_name, kind, help_text in _FLAGS:
        metavar = {str: "TEXT", int: "N", float: "SECONDS", Path: "DIR"}[kind]
        if flag.startswith("--tls-"):
            metavar = "FILE"
        elif flag in ("--host", "--token"):
            metavar = flag[2:].upper()
        elif flag == "--store":
            metavar = "URL"
        parser.add_argument(flag, dest=field_name, type=kind, default=None, metavar=metavar,
                            help=help_text)
    parser.add_argument("--log-format", choices=("json", "text"), default="json",
                        help="structured JSON log lines (default) or plain text, on stderr")


def settings_from(args: argparse.Namespace, names: Sequence[str]) -> Settings:
    """Settings from the environment with every flag given on the command line on top."""
    overrides: dict[str, Any] = {}
    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


def run(args: argparse.Namespace) -> int:
    from otel_diary.cli.common import SERVE_MODULES, missing_extra
    from otel_diary.cli.logs import configure

    missing = missing_extra("serve", SERVE_MODULES)
    if missing is not None:
        return missing

    stop_logs = configure(args.log_format, bool(getattr(args, "verbose", False)))
    try:
        return _serve(args)
    finally:
        stop_logs()


def _serve(args: argparse.Namespace) -> int:
    problem = _token_problem(args)
    if problem is not None:
        print(f"otel-diary serve: {problem}", file=sys.stderr)
        return 2
    try:
        settings = settings_from(args, [field for _, field, _, _ in _FLAGS])
    except ValueError as exc:
        said = str(exc)  # "serve_grace_s: must be …": named as the user gave it, "--grace"
        flag = next((flag for flag, field, _, _ in _FLAGS if said.startswith(f"{field}: ")),
                    None)
        if flag is not None:
            said = flag + said[said.index(":"):]
        print(f"otel-diary serve: {said}", file=sys.stderr)
        return 2
    if not settings.serve_http_port and not settings.serve_grpc_port:
        print("otel-diary serve: both ports are 0; nothing to listen on", file=sys.stderr)
        return 2
    problem = _tls_problem(settings)
    if problem is not None:
        print(f"otel-diary serve: {problem}", file=sys.stderr)
        return 2
    from otel_diary.assembly.journal import JournalError

    try:
        service = service_from(settings)
    except JournalError as exc:
        print(f"otel-diary serve: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(service.run())


def _token_problem(args: argparse.Namespace) -> str | None:
    """Why the token given (by ``--token``, else the environment) is unusable, if it is.

    Checked here and not left to the settings, which drop a bad environment value with a
    warning: for the token that would mean starting without authentication.
    """
    flag = getattr(args, "serve_token", None)
    value, what = ((flag, "--token") if flag is not None
                   else (os.environ.get(SERVE_TOKEN), SERVE_TOKEN))
    if value is None:
        return None
    try:
        check_serve_token(value, what)
    except ValueError as exc:
        return str(exc)
    return None


def _tls_problem(settings: Settings) -> str | None:
    """Why the TLS certificate and key configured cannot be served, if they cannot: one
    without the other, a file not read, a key that is not the certificate's or is
    encrypted (asked for a passphrase, OpenSSL would wait for one on the terminal)."""
    cert, key = settings.serve_tls_cert_file, settings.serve_tls_key_file
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        return ("--tls-cert and --tls-key go together (OTEL_DIARY_SERVE_TLS_CERT_FILE, "
                "OTEL_DIARY_SERVE_TLS_KEY_FILE)")
    for what, path in (("certificate", cert), ("key", key)):
        try:
            with path.open("rb"):
                pass
        except OSError as exc:
            return f"cannot read the TLS {what} {path}: {exc.strerror or exc}"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key, password=lambda: b"")
    except (ssl.SSLError, OSError) as exc:
        return f"cannot use the TLS certificate {cert} with the key {key}: {exc}"
    return None


def service_from(settings: Settings) -> Service:
    """The receivers, assembly and pipeline ``settings`` describe (they need the ``serve``
    extra: imported here, once :func:`run` has checked that it is installed)."""
    from otel_diary.assembly.journal import Journal
    from otel_diary.receiver.admission import Collector
    from otel_diary.receiver.grpc import TraceService
    from otel_diary.receiver.http import OtlpHttpApp
    from otel_diary.receiver.service import ServeConfig, Service

    conventions = load_conventions(settings.conventions)
    path = settings.journal_path
    journal = Journal(path, max_bytes=settings.journal_max_bytes) if path else None
    # As many diaries are written at once as model calls may be in flight. Without a
    # model, writing a diary is CPU: more threads would only take turns at the interpreter
    # lock and the index, and one writes them back to back in batches.
    workers = settings.reflection_concurrency if settings.reflection_url else 1
    pipeline = wiring.build_pipeline(settings, conventions, prepare=True)
    collector = Collector(wiring.trace_store(settings, conventions), pipeline,
                          journal=journal, workers=workers,
                          max_pending=settings.serve_max_pending)
    token = settings.serve_token.get_secret_value() if settings.serve_token else None
    config = ServeConfig(
        host=settings.serve_host, http_port=settings.serve_http_port,
        grpc_port=settings.serve_grpc_port,
        shutdown_timeout_s=settings.shutdown_timeout_ms / 1000,
        folder=str(settings.root), destinations=wiring.describe_sinks(pipeline.sinks),
        grace_s=settings.serve_grace_s,
        journal=str(path) if path else "", conventions=settings.conventions,
        auth=settings.serve_token is not None,
        header_timeout_s=settings.serve_header_timeout_s,
        body_timeout_s=settings.serve_body_timeout_s,
        max_header_bytes=settings.serve_max_header_bytes,
        max_connections=settings.serve_max_connections,
        idle_timeout_s=settings.serve_idle_timeout_s,
        grpc_max_message_bytes=settings.serve_grpc_max_message_bytes,
        tls_cert_file=str(settings.serve_tls_cert_file or ""),
        tls_key_file=str(settings.serve_tls_key_file or ""))
    return Service(collector,
                   OtlpHttpApp(collector, conventions, token=token,
                               max_body_bytes=settings.serve_max_body_bytes),
                   TraceService(collector, conventions, token=token,
                                inflight_bytes=2 * settings.serve_grpc_max_message_bytes,
                                read_timeout_s=settings.serve_body_timeout_s,
                                max_concurrent_rpcs=settings.serve_grpc_max_concurrent_rpcs),
                   config)
