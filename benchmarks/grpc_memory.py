"""Peak memory of ``otel-diary serve`` under concurrent large OTLP/gRPC requests.

Starts ``serve`` (with a token) in a subprocess for each case, sends ``--calls`` concurrent
``Export`` calls of about ``--mib`` MiB each from as many client threads (a valid request:
one task span whose stderr tail attribute holds the bulk), once carrying the token and
once carrying none, and prints the server's peak resident memory (``VmHWM``) above what it
held once started, with the status codes the calls got. Cases:

  - ``default``: the settings as shipped;
  - ``large-cap``: ``OTEL_DIARY_SERVE_GRPC_MAX_MESSAGE_BYTES`` raised to take the requests,
    so the concurrency bound, not the size cap, is what limits memory;
  - ``baseline`` (with ``--baseline DIR``): the source tree in DIR (a checkout of an earlier
    commit, its C reader built) run the same way, for a before/after in one run.

    python benchmarks/grpc_memory.py [--calls 16] [--mib 60] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.loopback import free_port

TOKEN = "bench-token-0123456789"
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def payload(mib: int) -> bytes:
    """A valid request of about ``mib`` MiB: one task span with a large attribute."""
    attributes = [KeyValue(key="orchestrator.task.id", value=AnyValue(string_value="T-big")),
                  KeyValue(key="orchestrator.build_verify.stderr_tail",
                           value=AnyValue(string_value="x" * (mib * 2**20)))]
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="task",
                start_time_unix_nano=1, end_time_unix_nano=2, attributes=attributes)
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        scope_spans=[ScopeSpans(spans=[span])])])
    return request.SerializeToString()


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid``, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found


def run_case(source: Path, env: dict[str, str], body: bytes, calls: int,
             credentials: bool) -> tuple[int, int, Counter[str]]:
    """Start serve, send the calls, return (started RSS, peak RSS, status codes)."""
    http_port, grpc_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as kb:
        environment = {**os.environ, **env, "PYTHONPATH": str(source),
                       "OTEL_DIARY_SERVE_TOKEN": TOKEN}
        process = subprocess.Popen(
            [sys.executable, "-m", "otel_diary.cli", "serve", "--dir", kb,
             "--http-port", str(http_port), "--grpc-port", str(grpc_port), "--grace", "60"],
            env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=kb)
        try:
            for _ in range(400):
                try:
                    if httpx.get(f"http://127.0.0.1:{http_port}/health",
                                 timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
            else:
                raise SystemExit("serve did not start")
            time.sleep(0.5)
            started = memory(process.pid)["VmRSS"]
            codes: Counter[str] = Counter()
            lock = threading.Lock()
            metadata = (("authorization", f"Bearer {TOKEN}"),) if credentials else ()

            def call() -> None:
                with grpc.insecure_channel(f"127.0.0.1:{grpc_port}", options=[
                        ("grpc.max_send_message_length", 256 * 2**20),
                        ("grpc.max_receive_message_length", 256 * 2**20)]) as channel:
                    export: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                        METHOD)
                    try:
                        export(body, timeout=120, metadata=metadata)
                        code = "OK"
                    except grpc.RpcError as exc:
                        code = exc.code().name
                with lock:
                    codes[code] += 1

            threads = [threading.Thread(target=call) for _ in range(calls)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            time.sleep(0.5)
            peak = memory(process.pid)["VmHWM"]
        finally:
            process.kill()
            process.wait()
    return started, peak, codes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=16)
    parser.add_argument("--mib", type=int, default=60)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a source tree of an earlier commit to measure the same way")
    args = parser.parse_args()
    body = payload(args.mib)
    here = Path(__file__).resolve().parents[1]
    cases: list[tuple[str, Path, dict[str, str]]] = []
    if args.baseline is not None:
        cases.append(("baseline", args.baseline.resolve(), {}))
    cases.append(("default", here, {}))
    cases.append(("large-cap", here,
                  {"OTEL_DIARY_SERVE_GRPC_MAX_MESSAGE_BYTES": str(128 * 2**20)}))
    print(f"{args.calls} concurrent Export calls of {len(body) / 2**20:.1f} MiB each; "
          "peak RSS of serve above its RSS once started (VmHWM - VmRSS)")
    for name, source, env in cases:
        for credentials in (True, False):
            started, peak, codes = run_case(source, env, body, args.calls, credentials)
            what = "with token   " if credentials else "without token"
            statuses = ", ".join(f"{code} x{n}" for code, n in sorted(codes.items()))
            print(f"  {name:<10} {what}: +{(peak - started) / 2**20:7.0f} MiB "
                  f"(started at {started / 2**20:.0f} MiB)  [{statuses}]", flush=True)


if __name__ == "__main__":
    main()
