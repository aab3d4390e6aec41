"""What DiarySpanProcessor costs an app, next to no processor and the SDK's own processor.

Workload: many traces of a root span with ~30 child spans; one trace in fifty is an
orchestrator task (task attributes on the root, LLM child spans with token usage).
Modes, each in a fresh subprocess:

  (a) no processor
  (b) BatchSpanProcessor with an exporter that does nothing
  (c) DiarySpanProcessor writing diaries to a temporary folder

Reports the wall-clock ratio (b)/(a) and (c)/(a) (median of several runs; these machines
are noisy) and, under ``valgrind --tool=callgrind``, the instruction-count ratio
(x_N - x_0) / (a_N - a_0), where x_0 is the same mode's start-up (0 traces): repeatable
whatever else the machine does. Finally the CPU time per diary of the pipeline alone.

    python benchmarks/processor_overhead.py [--traces 2000] [--callgrind-traces 200]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

CHILDREN = 30
TASK_EVERY = 50


def workload(mode: str, traces: int, root: str) -> float:
    """Run the workload in this process; returns wall seconds including the final flush."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class NoOpExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider(shutdown_on_exit=False)
    if mode == "b":
        provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
    elif mode == "c":
        from otel_diary import DiarySpanProcessor

        provider.add_span_processor(DiarySpanProcessor(enabled=True, dir=root))
    tracer = provider.get_tracer("benchmark")
    start = time.perf_counter()
    for n in range(traces):
        is_task = n % TASK_EVERY == 0
        attributes: dict[str, str | int] = {"http.route": "/orders", "http.method": "GET"}
        if is_task:
            attributes = {
                "orchestrator.task.id": f"T-{n}",
                "orchestrator.task.title": "Add pagination to the orders API",
                "orchestrator.agent.name": "coder",
                "orchestrator.route": "paid_model",
                "orchestrator.file_operations": 3,
                "orchestrator.build_verify.attempts": 1 + (n // TASK_EVERY) % 2,
            }
        with tracer.start_as_current_span("root", attributes=attributes):
            for child in range(CHILDREN):
                if is_task and child % 5 == 0:
                    with tracer.start_as_current_span("chat", attributes={
                            "gen_ai.operation.name": "chat",
                            "gen_ai.request.model": "anthropic/claude-sonnet-4-7",
                            "gen_ai.usage.input_tokens": 1200,
                            "gen_ai.usage.output_tokens": 300}):
                        pass
                else:
                    with tracer.start_as_current_span("step", attributes={"step": child}):
                        pass
    provider.force_flush()
    elapsed = time.perf_counter() - start
    provider.shutdown()
    return elapsed


def child(mode: str, traces: int) -> None:
    root = tempfile.mkdtemp(prefix="otel-diary-bench-")
    try:
        elapsed = workload(mode, traces, root)
        if mode == "c" and traces:
            written = len(list(Path(root).rglob("*.md")))
            expected = (traces + TASK_EVERY - 1) // TASK_EVERY
            if written != expected:
                raise SystemExit(f"mode c wrote {written} diaries, expected {expected}")
        print(f"{elapsed:.6f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_child(mode: str, traces: int,
              prefix: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    command = [*prefix, sys.executable, __file__, "--child", mode, "--traces", str(traces)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"benchmark child failed: {' '.join(command)}\n{done.stderr}")
    return done


def instructions(mode: str, traces: int) -> int:
    done = run_child(mode, traces, ["valgrind", "--tool=callgrind",
                                    "--callgrind-out-file=/dev/null"])
    match = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if match is None:
        raise SystemExit("could not read callgrind's instruction count:\n" + done.stderr[-2000:])
    return int(match.group(1))


def cpu_per_diary(count: int, index: bool) -> tuple[float, float]:
    """CPU ms per diary for the pipeline alone, and for just writing the same bytes."""
    from otel_diary import ORCHESTRATOR, ChildSummary, Settings, SpanRecord
    from otel_diary.sinks.base import atomic_write
    from otel_diary.wiring import build_pipeline

    with tempfile.TemporaryDirectory() as root:
        pipeline = build_pipeline(Settings(enabled=True, dir=root, index=index), ORCHESTRATOR)
        records = [SpanRecord(
            trace_id=0x1000 + n, span_id=0x2000 + n, name="task", start_ns=0,
            end_ns=1_764_460_800_000_000_000, attributes={
                "orchestrator.task.id": f"T-{n}", "orchestrator.agent.name": "coder",
                "orchestrator.task.title": "Tighten types in the orders API",
                "orchestrator.route": "paid_model", "gen_ai.request.model": "m",
                "orchestrator.tokens": 5132, "orchestrator.escalation_count": 2,
                "orchestrator.build_verify.attempts": 3,
                "orchestrator.build_verify.stderr_tail": "error TS2345: bad\n" * 30})
            for n in range(count)]
        start = time.process_time()
        for record in records:
            pipeline.handle((record, ChildSummary()))
        pipeline_ms = (time.process_time() - start) * 1000 / count
        pipeline.close()
        if pipeline.stats.diaries != count:
            raise SystemExit("the pipeline did not write every diary")
        contents = [p.read_bytes() for p in Path(root).rglob("*.md")]
        start = time.process_time()
        for n, data in enumerate(contents):
            atomic_write(Path(root) / f"plain-{n}.md", data)
        write_ms = (time.process_time() - start) * 1000 / count
    return pipeline_ms, write_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--callgrind-traces", type=int, default=200)
    parser.add_argument("--diaries", type=int, default=500)
    parser.add_argument("--child", choices="abc")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.traces)
        return

    spans = args.traces * (CHILDREN + 1)
    print(f"workload: {args.traces} traces x {CHILDREN + 1} spans = {spans} spans, "
          f"one trace in {TASK_EVERY} a task")
    times: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    for _ in range(args.repeats):
        for mode in "abc":  # interleaved, so drift hits every mode alike
            times[mode].append(float(run_child(mode, args.traces).stdout))
    median = {mode: statistics.median(values) for mode, values in times.items()}
    for mode, label in (("a", "no processor"), ("b", "BatchSpanProcessor(no-op)"),
                        ("c", "DiarySpanProcessor")):
        per_span = median[mode] / spans * 1e6
        print(f"  ({mode}) {label:27s} median {median[mode]:.3f}s  {per_span:.2f} us/span  "
              f"ratio to (a) {median[mode] / median['a']:.3f}")

    if shutil.which("valgrind") and args.callgrind_traces > 0:
        n = args.callgrind_traces
        counts = {mode: (instructions(mode, n), instructions(mode, 0)) for mode in "abc"}
        base = counts["a"][0] - counts["a"][1]
        print(f"instructions (callgrind), {n} traces minus start-up:")
        for mode in "abc":
            net = counts[mode][0] - counts[mode][1]
            print(f"  ({mode}) {net:>14,d}  {net / (n * (CHILDREN + 1)):,.0f}/span  "
                  f"ratio to (a) {net / base:.4f}")
    else:
        print("instructions: skipped (needs valgrind: apt-get install valgrind)")

    for index in (False, True):
        pipeline_ms, write_ms = cpu_per_diary(args.diaries, index)
        print(f"CPU per diary (recovered run, stub reflection, folder sink"
              f"{' + search index' if index else ''}): {pipeline_ms:.3f} ms; atomic write of "
              f"the same bytes alone: {write_ms:.3f} ms (ratio {pipeline_ms / write_ms:.2f})")


if __name__ == "__main__":
    main()
