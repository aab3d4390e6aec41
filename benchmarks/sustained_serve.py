"""Sustained ``serve``: spans whose diaries were written per second, next to spans accepted.

Workload: twelve keep-alive clients post, for ``--seconds`` each, requests of ten fresh
~52-span task traces (the requests of ``receiver_throughput.py``: real SDK, real OTLP
encoder) over OTLP/HTTP protobuf, without pause; a 429 or 503 is counted and the client
waits 0.5 s before its next request, as an exporter backs off. ``otel-diary serve`` runs
with the folder sink, the index and Related on, the stub reflection (no model) and a
grace period of ``--grace`` seconds, in these configurations, each a fresh process in
the same run:

  - ``no journal``: ``OTEL_DIARY_JOURNAL=off`` (the baseline);
  - ``journal``: the default.

Without a model ``serve`` writes diaries from one pipeline thread (more would only take
turns at the interpreter lock), in batches. Every request repeats the first one's bytes,
timestamps included, so every run of a task ends at the same instant: harder on Related
than live runs, whose diaries ``processor_overhead.py`` measures (its serve's runs end a
second apart per request).

For each: spans accepted per second (requests answered 200 x spans per request), diaries
written per second (from ``/metrics``, over the same window) and the spans of those
task traces per second, their ratio to the spans accepted, the share of requests
refused, and ``serve``'s CPU over the window (user and system, from ``/proc``). One
thread writes the diaries, so its user time and the kernel's per diary add up; the
kernel's is mostly creating files, and depends on the file system and even the folder
(the temporary one: ``TMPDIR``).
When the project's Collector build is in the cache (``make collector``), the same clients
post to it (otlp receiver -> batch -> debug exporter) and its accepted spans/s is printed
alongside, with each configuration's written spans/s as a ratio of it.

    python benchmarks/sustained_serve.py [--seconds 30] [--clients 12] [--grace 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

CONFIGURATIONS: tuple[tuple[str, dict[str, str]], ...] = (
    ("no journal", {"OTEL_DIARY_JOURNAL": "off"}),
    ("journal", {}),
)

COLLECTOR_CONFIG = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
processors:
  batch:
exporters:
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
"""


def throughput_module() -> Any:
    """``receiver_throughput.py``, whose workload and clients this benchmark shares."""
    import receiver_throughput  # benchmarks/receiver_throughput.py, beside this file

    return receiver_throughput


def load(bench: Any, url: str, template: bytes, trace_ids: list[bytes], clients: int,
         seconds: float) -> tuple[Counter[int], float]:
    """Post fresh requests from ``clients`` threads for ``seconds``; the statuses and the
    time it took."""
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        poster = bench.Poster(url)
        try:
            while time.monotonic() < deadline:
                status = poster.post(bench.fresh(template, trace_ids))
                with lock:
                    statuses[status] += 1
                if status in (429, 503):
                    time.sleep(0.5)
        finally:
            poster.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses, time.perf_counter() - start


def collector_binary() -> Path | None:
    """The cached ``otelcol-diary`` binary, if ``make collector`` built it."""
    cache = Path(os.environ.get("OTEL_DIARY_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "otel-diary")
    found = sorted((cache / "collector").glob("*/otelcol-diary"))
    return found[-1] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--grace", type=float, default=2.0)
    args = parser.parse_args()
    bench = throughput_module()
    template, trace_ids = bench.make_template()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    sample = ExportTraceServiceRequest.FromString(template)
    per_request = sum(len(ss.spans) for rs in sample.resource_spans for ss in rs.scope_spans)
    per_trace = per_request / len(trace_ids)
    print(f"workload: {args.clients} clients, {args.seconds:.0f}s per configuration, requests "
          f"of {len(trace_ids)} task traces x {per_trace:.0f} spans; grace {args.grace}s; "
          f"folder sink, index and Related on, stub reflection")
    root = Path(tempfile.mkdtemp(prefix="otel-diary-sustained-"))  # on disk, not tmpfs
    written: dict[str, float] = {}
    try:
        for name, env in CONFIGURATIONS:
            kb = root / name.replace(" ", "").replace(",", "-")
            receiver = bench.Receiver(kb, OTEL_DIARY_SERVE_GRACE_S=str(args.grace), **env)
            try:
                before, cpu_before = receiver.metrics(), receiver.cpu()
                statuses, elapsed = load(bench, receiver.url, template, trace_ids,
                                         args.clients, args.seconds)
                after, cpu_after = receiver.metrics(), receiver.cpu()
                _, peak = receiver.rss()
            finally:
                receiver.stop(graceful=False)
            accepted = statuses[200] * per_request / elapsed
            diaries = (after["otel_diary_diaries_written_total"]
                       - before["otel_diary_diaries_written_total"]) / elapsed
            written[name] = diaries * per_trace
            requests = sum(statuses.values())
            refused = (statuses[429] + statuses[503]) / max(requests, 1)
            print(f"{name}: accepted {accepted:,.0f} spans/s; written {diaries:,.1f} diaries/s "
                  f"= {written[name]:,.0f} spans/s of their traces; written/accepted "
                  f"{written[name] / max(accepted, 1):.3f}; {refused:.0%} of {requests} "
                  f"requests refused (429/503); waiting for the pipeline at the end "
                  f"{after.get('otel_diary_pending_diaries', 0):,.0f}; peak RSS "
                  f"{peak / 2**20:.0f} MiB")
            user, system = (end - start for end, start in zip(cpu_after, cpu_before, strict=True))
            per_diary = 1000 / max(diaries * elapsed, 1)
            print(f"  serve's CPU under the load: {user / elapsed:.2f} cores user, "
                  f"{system / elapsed:.2f} system; per diary written {user * per_diary:.3f} ms "
                  f"user, {system * per_diary:.3f} ms system (receiving included)")
        baseline = written[CONFIGURATIONS[0][0]]
        for name, _ in CONFIGURATIONS[1:]:
            print(f"{name} / {CONFIGURATIONS[0][0]}: written spans/s ratio "
                  f"{written[name] / max(baseline, 1e-9):.2f}")
        binary = collector_binary()
        if binary is None:
            print("OpenTelemetry Collector: not in the cache (make collector builds it); "
                  "no comparison")
            return
        config = root / "collector.yaml"
        port = bench.free_port()
        config.write_text(COLLECTOR_CONFIG.format(port=port))
        process = subprocess.Popen([str(binary), f"--config={config}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    if bench.Poster(url).post(bench.fresh(template, trace_ids)) == 200:
                        break
                except OSError:
                    time.sleep(0.05)
            statuses, elapsed = load(bench, url, template, trace_ids, args.clients,
                                     args.seconds)
        finally:
            process.terminate()
            process.wait(30)
        collected = statuses[200] * per_request / elapsed
        print(f"OpenTelemetry Collector ({binary.parent.name}, otlp -> batch -> debug), same "
              f"clients: accepted {collected:,.0f} spans/s")
        for name, _ in CONFIGURATIONS:
            print(f"{name}: written spans/s / Collector accepted spans/s "
                  f"{written[name] / max(collected, 1):.3f} (goal >= 0.25)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
