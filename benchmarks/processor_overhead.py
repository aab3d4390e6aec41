"""What DiarySpanProcessor costs an app, next to no processor and the SDK's own processor.

Workload: many traces of a root span with 30 child spans. Two shapes:

  sparse  one trace in fifty is an orchestrator task, every child of it an LLM call with
          token usage (the other traces are plain request traces)
  dense   every trace is such a task

Modes, each in a fresh subprocess:

  (a) no processor
  (b) BatchSpanProcessor with an exporter that does nothing
  (c) DiarySpanProcessor writing diaries to a temporary folder (index and Related on)

Every run first ends one task trace and flushes (the processor builds its pipeline with
its first diary, once in a process's life); what is measured comes after it. Reports, for
the sparse shape, the wall-clock ratio (b)/(a) and (c)/(a) (median of several runs; these
machines are noisy) and, for both shapes under ``valgrind --tool=callgrind``, the
instruction-count ratio (x_N - x_0) / (a_N - a_0) of the whole process (app thread and
workers), where x_0 is the same mode's start-up and first trace (0 traces after it):
repeatable whatever else the machine does. Finally the cost per diary of the pipeline
alone (folder sink, index, Related), for a completed run, for a recovered run that
also updates its lesson, and for the runs ``serve`` writes under ``sustained_serve.py``'s
load (ten tasks again and again, models, tokens and tool calls, after enough of them
that Related's candidate lists are full; see ``serve_runs``): CPU milliseconds, user and
system (the kernel's share, mostly creating files, depends on where the temporary folder
is: ``TMPDIR`` chooses), and instructions under callgrind (N diaries minus none, both
runs building the same N + warm records, so that only the pipeline's work is counted),
handled one at a time and in a batch as the workers deliver them (``Pipeline.batch``:
one index transaction and one write per lesson for up to 64 diaries).

    python benchmarks/processor_overhead.py [--traces 2000] [--callgrind-traces 200]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHILDREN = 30
TASK_EVERY = {"sparse": 50, "dense": 1}


def workload(mode: str, traces: int, root: str, every: int) -> float:
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

    def emit(n: int, is_task: bool) -> None:
        attributes: dict[str, str | int] = {"http.route": "/orders", "http.method": "GET"}
        if is_task:
            attributes = {
                "orchestrator.task.id": f"T-{n}",
                "orchestrator.task.title": "Add pagination to the orders API",
                "orchestrator.agent.name": "coder",
                "orchestrator.route": "paid_model",
                "orchestrator.file_operations": 3,
                "orchestrator.build_verify.attempts": 1 + (n // every) % 2,
            }
        with tracer.start_as_current_span("root", attributes=attributes):
            for child in range(CHILDREN):
                if is_task:
                    with tracer.start_as_current_span("chat", attributes={
                            "gen_ai.operation.name": "chat",
                            "gen_ai.request.model": "anthropic/claude-sonnet-4-7",
                            "gen_ai.usage.input_tokens": 1200,
                            "gen_ai.usage.output_tokens": 300}):
                        pass
                else:
                    with tracer.start_as_current_span("step", attributes={"step": child}):
                        pass

    # One task trace first, in every mode and every run (0 traces too): the processor
    # builds its pipeline with its first diary, once in a process's life, and the
    # measured traces are those that come after it.
    emit(-1, True)
    provider.force_flush()
    start = time.perf_counter()
    for n in range(traces):
        emit(n, n % every == 0)
    provider.force_flush()
    elapsed = time.perf_counter() - start
    provider.shutdown()
    return elapsed


def child(mode: str, traces: int, shape: str, built: int) -> None:
    root = tempfile.mkdtemp(prefix="otel-diary-bench-")
    every = TASK_EVERY[shape]
    try:
        if mode in "defgh":  # the pipeline alone: (d, f) completed runs, (e, g) recovered,
            # (h) the runs sustained_serve.py sends
            print(diary_workload(traces, mode if mode == "h" else mode in "eg", root,
                                 batched=mode in "fgh", built=built))
            return
        elapsed = workload(mode, traces, root, every)
        if mode == "c" and traces:
            written = len(list(Path(root, "diaries", "agents").rglob("*.md")))
            expected = (traces + every - 1) // every + 1  # and the warm-up's
            if written != expected:
                raise SystemExit(f"mode c wrote {written} diaries, expected {expected}")
        print(f"{elapsed:.6f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_child(mode: str, traces: int, shape: str = "sparse", prefix: Sequence[str] = (),
              built: int | None = None) -> subprocess.CompletedProcess[str]:
    command = [*prefix, sys.executable, __file__, "--child", mode, "--traces", str(traces),
               "--shape", shape, "--built", str(traces if built is None else built)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"benchmark child failed: {' '.join(command)}\n{done.stderr}")
    return done


def instructions(mode: str, traces: int, shape: str = "sparse",
                 built: int | None = None) -> int:
    done = run_child(mode, traces, shape, ["valgrind", "--tool=callgrind",
                                           "--callgrind-out-file=/dev/null"], built)
    match = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if match is None:
        raise SystemExit("could not read callgrind's instruction count:\n" + done.stderr[-2000:])
    return int(match.group(1))


def task_records(count: int, recovered: bool) -> list[Any]:
    """Root task spans as plain data: recovered runs (escalations, a failed build whose
    stderr names an error code, so each diary also updates that error's lesson), or
    completed runs (no error, no lesson)."""
    from otel_diary import SpanRecord

    failure: dict[str, object] = {
        "orchestrator.escalation_count": 2, "orchestrator.build_verify.attempts": 3,
        "orchestrator.build_verify.stderr_tail": "error TS2345: bad\n" * 30}
    return [SpanRecord(
        trace_id=0x1000 + n, span_id=0x2000 + n, name="task", start_ns=0,
        end_ns=1_764_460_800_000_000_000 + n * 1_000_000_000, attributes={
            "orchestrator.task.id": f"T-{n}", "orchestrator.agent.name": "coder",
            "orchestrator.task.title": "Tighten types in the orders API",
            "orchestrator.route": "paid_model", "gen_ai.request.model": "m",
            "orchestrator.tokens": 5132, "orchestrator.build_verify.attempts": 1,
            **(failure if recovered else {})})
        for n in range(count)]


def serve_runs(count: int) -> list[Any]:
    """The task runs ``serve`` writes under ``sustained_serve.py``'s load, as its receiver
    and assembly hand them on: requests of ten ~52-span traces of ten tasks (models,
    tokens, tool calls, now and then a failed one) read by the receiver's reader and
    assembled, with fresh trace and task span ids (the same every run). Each request's
    runs end a second after the request before's, as live runs do: ``sustained_serve.py``'s clients
    send one request's bytes again and again, timestamps included, so there every run of
    a task ends at the same instant, and the trigger's candidate list holds only the last
    task's runs (the others' lookups read it from the index each time)."""
    import random
    from dataclasses import replace

    from receiver_throughput import make_template  # beside this file

    from otel_diary import ORCHESTRATOR
    from otel_diary.assembly.grace import TraceStore
    from otel_diary.receiver.decode import decode

    template, trace_ids = make_template()
    ids = random.Random(1)
    store = TraceStore(ORCHESTRATOR, grace=0)
    ready: list[Any] = []
    while len(ready) < count:
        body = template
        for trace_id in trace_ids:
            body = body.replace(trace_id, ids.randbytes(16))
        store.add(decode(body, "application/x-protobuf", ORCHESTRATOR), 0.0)
        later = len(ready) // len(trace_ids) * 1_000_000_000
        ready.extend((replace(record, span_id=ids.getrandbits(64),
                              start_ns=record.start_ns + later,
                              end_ns=record.end_ns + later), summary)
                     for record, summary in store.drain())
    return ready[:count]


WARM_DIARIES = 5
"""Diaries written before measuring (the index and the lesson exist by then)."""
SERVE_WARM = 700
"""``serve``'s runs written before measuring: every task's and the trigger's candidate
lists for Related are full by then, as in a receiver that has run a while."""


def handle_all(pipeline: Any, records: Sequence[Any], batched: bool) -> None:
    """Hand ``records`` to ``pipeline``, alone or in batches of ``MAX_BATCH`` diaries with
    one index commit each. At full speed a batch fills before it times out, and the index
    commits once or twice in it; the time limits are lifted so that the same holds under
    callgrind, which runs some fifty times slower: the instructions counted are then
    those of full batches whatever else the machine is doing (with the limits, how many
    diaries a batch or a commit took varied with the machine's load)."""
    from otel_diary import ChildSummary
    from otel_diary.index import writing
    from otel_diary.pipeline import core

    core.MAX_BATCH_S = writing.HOLD_S = 3600.0
    with pipeline.batch() if batched else contextlib.nullcontext():
        for record in records:
            pipeline.handle(record if isinstance(record, tuple) else (record, ChildSummary()))


def pipeline_records(runs: bool | str, built: int) -> tuple[list[Any], int]:
    """The runs to write: completed (``runs`` false), recovered (true) or ``serve``'s
    (``"h"``), the warm-up's first and then ``built`` more; and how many warm up."""
    warm = SERVE_WARM if runs == "h" else WARM_DIARIES
    records = serve_runs(warm + built) if runs == "h" else task_records(warm + built, bool(runs))
    return records, warm


def diary_workload(count: int, runs: bool | str, root: str, batched: bool,
                   built: int) -> int:
    """Build the records of :func:`pipeline_records` (``built`` after the warm-up's), then
    write the warm-up's and ``count`` more diaries through the pipeline ``Settings``
    describe (folder sink, index, Related); returns the diaries written."""
    from otel_diary import ORCHESTRATOR, Settings
    from otel_diary.wiring import build_pipeline

    records, warm = pipeline_records(runs, max(built, count))
    pipeline = build_pipeline(Settings(enabled=True, dir=root), ORCHESTRATOR)
    handle_all(pipeline, records[:warm], batched)
    handle_all(pipeline, records[warm:warm + count], batched)
    pipeline.close()
    return pipeline.stats.diaries


def cpu() -> tuple[float, float]:
    """This process's user and system CPU seconds so far (every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def cpu_per_diary(count: int, runs: bool | str,
                  batched: bool) -> tuple[tuple[float, float], tuple[float, float]]:
    """CPU ms per diary, user and system, for the pipeline alone (the runs of
    :func:`diary_workload`), and for just writing the same bytes. The system share is
    mostly the kernel creating files, which varies with the file system and even with the
    folder (on some ext4 volumes a folder's first new file costs tens of microseconds, on
    others a millisecond): the write alone shows what it is in this folder."""
    from otel_diary import ORCHESTRATOR, Settings
    from otel_diary.sinks.base import atomic_write
    from otel_diary.wiring import build_pipeline

    def per_diary(start: tuple[float, float]) -> tuple[float, float]:
        end = cpu()
        return ((end[0] - start[0]) * 1000 / count, (end[1] - start[1]) * 1000 / count)

    with tempfile.TemporaryDirectory() as root:
        records, warm = pipeline_records(runs, count)
        pipeline = build_pipeline(Settings(enabled=True, dir=root), ORCHESTRATOR)
        handle_all(pipeline, records[:warm], batched)
        start = cpu()
        handle_all(pipeline, records[warm:], batched)
        pipeline_ms = per_diary(start)
        pipeline.close()
        if pipeline.stats.diaries != len(records):
            raise SystemExit("the pipeline did not write every diary")
        contents = [p.read_bytes() for p in Path(root, "diaries", "agents").rglob("*.md")]
        start = cpu()
        for n, data in enumerate(contents[:count]):
            atomic_write(Path(root) / f"plain-{n}.md", data)
        write_ms = per_diary(start)
    return pipeline_ms, write_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--callgrind-traces", type=int, default=200)
    parser.add_argument("--diaries", type=int, default=500)
    parser.add_argument("--callgrind-diaries", type=int, default=50)
    parser.add_argument("--shape", choices=TASK_EVERY, default="sparse",
                        help=argparse.SUPPRESS)
    parser.add_argument("--child", choices="abcdefgh", help=argparse.SUPPRESS)
    parser.add_argument("--built", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.traces, args.shape,
              args.traces if args.built is None else args.built)
        return

    spans = args.traces * (CHILDREN + 1)
    if args.repeats > 0:
        print(f"wall clock, sparse shape: {args.traces} traces x {CHILDREN + 1} spans = "
              f"{spans} spans, one trace in {TASK_EVERY['sparse']} a task")
        times: dict[str, list[float]] = {"a": [], "b": [], "c": []}
        for _ in range(args.repeats):
            for mode in "abc":  # interleaved, so drift hits every mode alike
                times[mode].append(float(run_child(mode, args.traces).stdout))
        median = {mode: statistics.median(values) for mode, values in times.items()}
        for mode, label in LABELS.items():
            per_span = median[mode] / spans * 1e6
            print(f"  ({mode}) {label:27s} median {median[mode]:.3f}s  {per_span:.2f} us/span"
                  f"  ratio to (a) {median[mode] / median['a']:.3f}")

    valgrind = shutil.which("valgrind") is not None
    if valgrind and args.callgrind_traces > 0:
        n = args.callgrind_traces
        for shape, every in TASK_EVERY.items():
            counts = {mode: (instructions(mode, n, shape), instructions(mode, 0, shape))
                      for mode in "abc"}
            base = counts["a"][0] - counts["a"][1]
            print(f"instructions (callgrind), whole process, {shape} shape (one trace in "
                  f"{every} a task, usage on each of its children), {n} traces minus "
                  "start-up and the first trace:")
            for mode, label in LABELS.items():
                net = counts[mode][0] - counts[mode][1]
                print(f"  ({mode}) {label:27s} {net:>14,d}  {net / (n * (CHILDREN + 1)):,.0f}"
                      f"/span  ratio to (a) {net / base:.4f}")
    elif not valgrind:
        print("instructions: skipped (needs valgrind: apt-get install valgrind)")

    kinds = {"d": "completed run, no lesson, one at a time",
             "f": "completed run, no lesson, in a batch",
             "e": "recovered run, lesson updated, one at a time",
             "g": "recovered run, lesson updated, in a batch",
             "h": f"serve's runs (sustained_serve.py), in a batch, after {SERVE_WARM}"}
    for mode, kind in kinds.items() if args.diaries > 0 else ():
        runs = "h" if mode == "h" else mode in "eg"
        (user, system), (write_user, write_system) = cpu_per_diary(
            args.diaries, runs, batched=mode in "fgh")
        print(f"CPU per diary ({kind}; stub reflection, folder sink, index, Related): "
              f"{user + system:.3f} ms (user {user:.3f}, system {system:.3f}); atomic "
              f"write of the same bytes alone: {write_user + write_system:.3f} ms (user "
              f"{write_user:.3f}, system {write_system:.3f}); ratio "
              f"{(user + system) / (write_user + write_system):.2f}")
        if valgrind and args.callgrind_diaries > 0:
            n = args.callgrind_diaries
            net = instructions(mode, n, built=n) - instructions(mode, 0, built=n)
            print(f"  instructions per diary (callgrind, {args.callgrind_diaries} diaries "
                  f"minus none): {net / args.callgrind_diaries:,.0f}")


LABELS = {"a": "no processor", "b": "BatchSpanProcessor(no-op)", "c": "DiarySpanProcessor"}


if __name__ == "__main__":
    main()
