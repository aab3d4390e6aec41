"""Receiver throughput: spans/s through OTLP/HTTP protobuf into the pipeline, next to parsing.

Workload: traces of about 50 spans made with the real OpenTelemetry SDK (an orchestrator
task root; LLM chat spans with token usage; tool calls; HTTP client calls; internal
steps), encoded by the OTLP exporter's own encoder into requests of ten traces (520 spans, about
the 512 the SDK's BatchSpanProcessor sends at once). Every request gets fresh trace ids.

  1. rounds (5): each starts ``otel-diary serve`` afresh in a subprocess, warms it up with
     a few requests, and then times the payloads in slices of 100 requests: client
     threads post them on loopback with the standard library's ``http.client``
     (keep-alive), which costs the client about a sixth of the CPU httpx does per 100 KiB
     request, so the client side, sharing the machine, does not limit what is measured.
     A slice lasts from its first request to its last response: the receiver answers a
     request once its spans are assembled, and at the end of the round its metrics must
     count every span accepted, or the benchmark stops with an error. Its grace period
     is long enough that no diary is rendered meanwhile (rendering competes for the same
     interpreter). After each slice (and before the first), bare parsing of that slice's
     payloads with ``ExportTraceServiceRequest.FromString`` is timed (best of two
     passes). A slice's reference is the faster of the measurements right before and
     right after it, and its ratio is the receiver's rate over that. The speed of a
     shared machine drifts by half or more within seconds, so each ratio is taken between
     measurements a fraction of a second apart, and the median slice of all rounds is
     reported, with the quartiles and the range. Also reported: each round's rate and the
     receiver's own CPU time per span (both its threads), which the client threads do not
     blur. For scale, once: parsing plus reading every span's ids and attribute keys, the
     least a receiver that tells task and LLM spans from the rest does through the
     protobuf API; and the HTTP floor: an ASGI app on the same server stack (uvicorn with
     httptools, as ``serve`` runs it) that only reads each body and answers 200, posted to
     the same way.
  2. pipeline: the last round ends with SIGTERM: every task is decided and its diary
     written before the process exits, which gives the pipeline's own rate.
  3. overload: for a while, more clients post fresh traces than the receiver can take,
     with OTEL_DIARY_SERVE_MAX_SPANS=100000 and the default grace period, so both the
     assembly bound and a pipeline that falls behind are reached within the run; its
     resident memory is sampled. Reports peak RSS, the peak in each half of the run
     (bounded: the second is not above the first by much) and the status codes.

    python benchmarks/receiver_throughput.py [--rounds 5] [--requests 400] [--slice 100]
        [--clients 4] [--overload-seconds 20] [--overload-clients 12]
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from otel_diary.receiver.metrics import metric_values

PROTOBUF = {"content-type": "application/x-protobuf"}
Message = MutableMapping[str, Any]


def make_template(traces: int = 10, seed: int = 7) -> tuple[bytes, list[bytes]]:
    """One request of ten 52-span traces from the real SDK and encoder, and its trace ids."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import Status, StatusCode

    class Keep(SpanExporter):
        def __init__(self) -> None:
            self.spans: list[ReadableSpan] = []

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            self.spans.extend(spans)
            return SpanExportResult.SUCCESS

    rng = random.Random(seed)
    keep = Keep()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "orchestrator", "service.version": "2.3.1",
        "deployment.environment.name": "prod", "host.name": "worker-7"}),
        shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("orchestrator", "2.3.1")
    for n in range(traces):
        with tracer.start_as_current_span("orchestrator.task", attributes={
            "orchestrator.task.id": f"T-{n}", "orchestrator.task.title": f"Fix flaky test {n}",
            "orchestrator.task.trigger": "issue", "orchestrator.agent.name": "coder",
            "orchestrator.route": "paid_model", "gen_ai.request.model": "claude-sonnet",
            "orchestrator.file_operations": 3, "orchestrator.build_verify.attempts": 1,
            "orchestrator.build_verify.passed": True,
        }):
            for step in range(10):
                with tracer.start_as_current_span(f"agent.step {step}",
                                                  attributes={"step.index": step}):
                    with tracer.start_as_current_span("chat claude-sonnet", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
                        "gen_ai.request.model": "claude-sonnet",
                        "gen_ai.response.model": "claude-sonnet-20260101",
                        "gen_ai.usage.input_tokens": rng.randint(500, 4000),
                        "gen_ai.usage.output_tokens": rng.randint(50, 800),
                        "gen_ai.response.finish_reasons": ["stop"],
                    }):
                        with tracer.start_as_current_span("POST", attributes={
                            "http.request.method": "POST", "server.address": "api.example.com",
                            "server.port": 443, "url.full": "https://api.example.com/v1/messages",
                            "http.response.status_code": 200,
                        }):
                            pass
                    with tracer.start_as_current_span("execute_tool read_file", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                        "file.path": f"src/module_{rng.randint(1, 99)}.py",
                    }) as tool:
                        if rng.random() < 0.05:
                            tool.set_status(Status(StatusCode.ERROR, "not found"))
                    with tracer.start_as_current_span("apply_patch",
                                                      attributes={"lines": rng.randint(1, 80)}):
                        pass
            with tracer.start_as_current_span("build.verify", attributes={
                    "process.command": "npm test", "process.exit.code": 0}):
                pass
    request = encode_spans(keep.spans)
    trace_ids = list({span.context.trace_id.to_bytes(16, "big") for span in keep.spans
                      if span.context is not None})
    return request.SerializeToString(), trace_ids


def fresh(template: bytes, trace_ids: list[bytes]) -> bytes:
    """The template with new trace ids: every copy is a new set of traces."""
    body = template
    for trace_id in trace_ids:
        body = body.replace(trace_id, os.urandom(16))
    return body


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """An HTTP server in a subprocess: ``command`` with ``{port}`` in it, ready once
    ``ready_path`` answers 200."""

    def __init__(self, command: list[str], ready_path: str,
                 env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [part.format(port=self.port) for part in command], env=env,
            stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                if httpx.get(self.url + ready_path, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError(f"{command} did not start")

    def cpu(self) -> tuple[float, float]:
        """User and system CPU seconds the process has used so far (every thread)."""
        # /proc/<pid>/stat: the command may hold spaces, so count from its closing ")";
        # utime and stime are the 14th and 15th fields, in clock ticks.
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / ticks, int(fields[12]) / ticks

    def cpu_seconds(self) -> float:
        """User and system CPU time together."""
        return sum(self.cpu())

    def stop(self, graceful: bool = True) -> None:
        self.process.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
        try:
            self.process.wait(300)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Receiver(Server):
    """``otel-diary serve`` in a subprocess, HTTP only."""

    def __init__(self, root: Path, **env: str) -> None:
        super().__init__(
            [sys.executable, "-m", "otel_diary.cli", "serve", "--http-port", "{port}",
             "--grpc-port", "0"], "/health",
            {**os.environ, "OTEL_DIARY_DIR": str(root), **env})

    def metrics(self) -> dict[str, float]:
        return metric_values(httpx.get(self.url + "/metrics", timeout=10).text)

    def rss(self) -> tuple[int, int]:
        """(current, peak) resident set size in bytes."""
        fields = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        return (int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024)


async def floor_app(scope: Message, receive: Callable[[], Awaitable[Message]],
                    send: Callable[[Message], Awaitable[None]]) -> None:
    """Reads the body and answers 200 with nothing: what the HTTP stack alone costs."""
    if scope["type"] != "http":
        return
    message = await receive()
    while message.get("more_body"):
        message = await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


def floor_server() -> Server:
    """:func:`floor_app` in a subprocess, served as ``otel-diary serve`` serves OTLP/HTTP."""
    return Server([sys.executable, __file__, "--floor-port", "{port}"], "/")


class Poster:
    """A keep-alive connection posting OTLP/HTTP protobuf requests."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1",
                                                      parts.port, timeout=60)

    def post(self, body: bytes) -> int:
        """The status of posting ``body`` to /v1/traces (reconnects when closed)."""
        self._connection.request("POST", "/v1/traces", body=body, headers=PROTOBUF)
        response = self._connection.getresponse()
        response.read()
        return response.status

    def close(self) -> None:
        self._connection.close()


def post_all(url: str, bodies: list[bytes], clients: int, statuses: Counter[int],
             deadline: float | None = None) -> None:
    """Post every body (retrying 429/503 after a short pause) from ``clients`` threads."""
    lock = threading.Lock()
    todo = list(reversed(bodies))

    def client() -> None:
        poster = Poster(url)
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    body = todo.pop()
                for _ in range(1000):  # bounded retries
                    if deadline is not None and time.monotonic() > deadline:
                        return
                    status = poster.post(body)
                    with lock:
                        statuses[status] += 1
                    if status not in (429, 503):
                        break
                    time.sleep(0.05)
        finally:
            poster.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400, help="timed, per round")
    parser.add_argument("--slice", type=int, default=100,
                        help="requests per slice, each timed next to bare parsing")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--overload-seconds", type=float, default=20.0)
    parser.add_argument("--overload-clients", type=int, default=12)
    parser.add_argument("--floor-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_port:
        import uvicorn

        uvicorn.run(floor_app, host="127.0.0.1", port=args.floor_port, http="httptools",
                    lifespan="off", log_config=None, access_log=False, server_header=False)
        return

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    template, trace_ids = make_template()
    sample = ExportTraceServiceRequest.FromString(template)
    per_request = sum(len(ss.spans) for rs in sample.resource_spans for ss in rs.scope_spans)
    traces_per_request = len(trace_ids)
    bodies = [fresh(template, trace_ids) for _ in range(args.requests)]
    warm_up = [fresh(template, trace_ids) for _ in range(20)]
    total_spans = per_request * len(bodies)
    print(f"workload: {len(bodies)} requests x {per_request} spans ({traces_per_request} "
          f"traces of ~{per_request // traces_per_request} spans, one task root each), "
          f"{len(template) / 1024:.0f} KiB per request; {args.rounds} rounds")

    def bare_parse(payloads: list[bytes] = bodies, passes: int = 3) -> float:
        """Spans/s of ``FromString`` over ``payloads``: the best of ``passes``."""
        best = float("inf")
        for _ in range(passes):
            start = time.perf_counter()
            for body in payloads:
                ExportTraceServiceRequest.FromString(body)
            best = min(best, time.perf_counter() - start)
        return per_request * len(payloads) / best

    def keys_walk() -> float:
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for body in bodies:
                for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            _ = span.trace_id, span.span_id, [kv.key for kv in span.attributes]
            best = min(best, time.perf_counter() - start)
        return total_spans / best

    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="otel-diary-bench-", dir=shm))
    slices = [bodies[at:at + args.slice] for at in range(0, len(bodies), args.slice)]
    measured: list[tuple[float, float, float]] = []  # (ratio, receiver, bare) per slice
    try:
        for number in range(1, args.rounds + 1):
            last = number == args.rounds
            receiver = Receiver(root / f"kb{number}", OTEL_DIARY_SERVE_GRACE_S="600",
                                OTEL_DIARY_SHUTDOWN_TIMEOUT_MS="300000",
                                OTEL_DIARY_SERVE_MAX_SPANS=str(4 * total_spans))
            statuses: Counter[int] = Counter()
            pairs: list[tuple[float, float, float]] = []
            try:
                post_all(receiver.url, warm_up, args.clients, Counter())
                expected = total_spans + per_request * len(warm_up)
                cpu_before = receiver.cpu_seconds()
                elapsed = 0.0
                bare_before = bare_parse(slices[0], 2)
                for part in slices:
                    start = time.perf_counter()
                    post_all(receiver.url, part, args.clients, statuses)
                    took = time.perf_counter() - start
                    elapsed += took
                    bare_after = bare_parse(part, 2)
                    rate = per_request * len(part) / took
                    bare = max(bare_before, bare_after)
                    pairs.append((rate / bare, rate, bare))
                    bare_before = bare_after
                cpu = receiver.cpu_seconds() - cpu_before
                accepted = receiver.metrics().get("otel_diary_spans_accepted_total", 0)
                if accepted != expected or set(statuses) != {200}:
                    raise SystemExit(f"round {number}: {accepted:.0f} of {expected} spans "
                                     f"accepted; statuses {dict(statuses)}")
                _, peak = receiver.rss()
            finally:
                stopping = time.perf_counter()
                receiver.stop(graceful=last)
                drained = time.perf_counter() - stopping
            measured += pairs
            ratios = sorted(ratio for ratio, _, _ in pairs)
            print(f"round {number}: receiver {total_spans / elapsed:,.0f} spans/s (OTLP/HTTP "
                  f"protobuf, {args.clients} clients, every span assembled; receiver CPU "
                  f"{cpu / total_spans * 1e6:.2f} us/span), bare FromString "
                  f"{statistics.median(bare for _, _, bare in pairs):,.0f} spans/s (median "
                  f"slice); ratio per slice {' '.join(f'{r:.3f}' for r, _, _ in pairs)}: "
                  f"median {statistics.median(ratios):.3f}")
        ratio, rate, bare = sorted(measured)[len(measured) // 2]
        ratios = sorted(ratio for ratio, _, _ in measured)
        print(f"receiver (median slice): {rate:,.0f} spans/s assembled into the pipeline; "
              f"bare ExportTraceServiceRequest.FromString next to it: {bare:,.0f} spans/s")
        print(f"ratio receiver / bare parse: {ratio:.3f} (median of {len(measured)} slices in "
              f"{args.rounds} rounds; quartiles {ratios[len(ratios) // 4]:.3f} to "
              f"{ratios[3 * len(ratios) // 4]:.3f}, range {ratios[0]:.3f} to "
              f"{ratios[-1]:.3f}) (goal >= 0.25)")
        walk = keys_walk()
        print(f"parse and read every span's ids and attribute keys: {walk:,.0f} spans/s "
              f"(ratio {walk / max(bare_parse(), 1):.3f} to bare parse, measured next to it)")
        floor = floor_server()
        try:
            post_all(floor.url, warm_up, args.clients, Counter())
            cpu_before = floor.cpu_seconds()
            start = time.perf_counter()
            post_all(floor.url, bodies, args.clients, Counter())
            elapsed = time.perf_counter() - start
            cpu = floor.cpu_seconds() - cpu_before
        finally:
            floor.stop(graceful=False)
        print(f"HTTP floor (an ASGI app on the same stack that only reads the bodies): "
              f"{total_spans / elapsed:,.0f} spans/s, CPU {cpu / total_spans * 1e6:.2f} "
              f"us/span (ratio {total_spans / elapsed / max(bare_parse(), 1):.3f} to bare "
              f"parse, measured next to it)")
        tasks = traces_per_request * (len(bodies) + len(warm_up))
        written = len(list((root / f"kb{args.rounds}").rglob("*.md")))
        print(f"pipeline: {written} of {tasks} diaries written during the last round's "
              f"graceful shutdown in {drained:.2f}s ({written / drained:,.0f} diaries/s: "
              f"classify, render, index, atomic file write); receiver peak RSS "
              f"{peak / 2**20:.0f} MiB")

        if args.overload_seconds > 0:
            overload(root / "overload", template, trace_ids, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def overload(root: Path, template: bytes, trace_ids: list[bytes],
             args: argparse.Namespace) -> None:
    """Post more than the receiver can take, for a while; sample its memory."""
    receiver = Receiver(root, OTEL_DIARY_SERVE_MAX_SPANS="100000")
    statuses: Counter[int] = Counter()
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.25):
            samples.append((time.monotonic(), receiver.rss()[0]))

    sampler = threading.Thread(target=sample)
    sampler.start()
    deadline = time.monotonic() + args.overload_seconds
    bodies = iter(lambda: fresh(template, trace_ids), b"")  # fresh traces until the deadline
    lock = threading.Lock()

    def client() -> None:
        poster = Poster(receiver.url)
        try:
            while time.monotonic() < deadline:
                with lock:
                    body = next(bodies, None)
                if body is None:
                    return
                status = poster.post(body)
                with lock:
                    statuses[status] += 1
        finally:
            poster.close()

    try:
        threads = [threading.Thread(target=client) for _ in range(args.overload_clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        values = receiver.metrics()
        _, peak = receiver.rss()
    finally:
        stop.set()
        sampler.join()
        receiver.stop()
    half = samples[0][0] + (samples[-1][0] - samples[0][0]) / 2 if samples else 0
    first = max((rss for t, rss in samples if t <= half), default=0)
    second = max((rss for t, rss in samples if t > half), default=0)
    print(f"overload ({args.overload_clients} clients, {args.overload_seconds:.0f}s, "
          f"max 100000 held spans): statuses {dict(sorted(statuses.items()))}; "
          f"peak RSS {peak / 2**20:.0f} MiB"
          f" (first half {first / 2**20:.0f} MiB, second half {second / 2**20:.0f} MiB); "
          f"held spans at the end {values.get('otel_diary_held_spans', 0):,.0f}, diaries "
          f"written {values.get('otel_diary_diaries_written_total', 0):,.0f}, waiting for "
          f"the pipeline {values.get('otel_diary_pending_diaries', 0):,.0f}")


if __name__ == "__main__":
    main()
