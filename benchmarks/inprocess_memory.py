"""Peak memory the in-process processor adds to an app that ends large task spans quickly.

Each case runs in a fresh subprocess: an app with a real ``TracerProvider`` ends
``--tasks`` recovered task spans one after another, each with a fresh stderr tail of
``--mib`` MiB, then shuts the provider down (every diary written). Printed: the peak
resident memory (``VmHWM``) above the process's memory before the first span, for the
bare app (no processor) and with ``DiarySpanProcessor`` (diaries to a temporary folder,
default settings), with the spans and task runs it dropped. With ``--baseline DIR`` (a
checkout of an earlier commit) the processor case also runs from that tree.

    python benchmarks/inprocess_memory.py [--tasks 100] [--mib 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def _memory() -> dict[str, int]:
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found


def child(case: str, tasks: int, mib: int, kb: str) -> None:
    """One case, in this process; prints a JSON line."""
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    processor = None
    if case == "processor":
        from otel_diary import DiarySpanProcessor

        processor = DiarySpanProcessor(enabled=True, dir=kb)
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    line = "src/app/module.ts(12,5): error TS2345: Argument of type 'string' is not assignable\n"
    start = _memory()["VmRSS"]
    for n in range(tasks):
        tail = f"run {n}\n" + line * (mib * 2**20 // len(line))  # a fresh string each run
        with tracer.start_as_current_span("task", attributes={
                "orchestrator.task.id": f"T-{n}", "orchestrator.build_verify.attempts": 2,
                "orchestrator.build_verify.stderr_tail": tail}):
            pass
        del tail
    provider.shutdown()
    stats = processor.stats if processor is not None else None
    print(json.dumps({"peak_above_start": _memory()["VmHWM"] - start,
                      "diaries": stats.diaries if stats else 0,
                      "dropped_spans": stats.dropped_spans if stats else 0,
                      "dropped_tasks": stats.dropped_tasks if stats else 0}))


def run(case: str, tree: Path, tasks: int, mib: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as kb:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", case, "--tasks",
             str(tasks), "--mib", str(mib), "--kb", kb],
            env={**os.environ, "PYTHONPATH": str(tree)}, cwd=kb, capture_output=True,
            text=True, check=True)
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--mib", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--child", choices=("bare", "processor"), default=None)
    parser.add_argument("--kb", default="")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.tasks, args.mib, args.kb)
        return
    here = Path(__file__).resolve().parents[1]
    print(f"{args.tasks} task spans with a {args.mib} MiB stderr tail each; peak RSS above "
          "the app's memory before the first span")
    cases = [("bare app", "bare", here), ("processor (this tree)", "processor", here)]
    if args.baseline is not None:
        cases.append(("processor (baseline)", "processor", args.baseline.resolve()))
    for name, case, tree in cases:
        result = run(case, tree, args.tasks, args.mib)
        print(f"  {name:<22}: +{result['peak_above_start'] / 2**20:6.0f} MiB  "
              f"diaries {result['diaries']}, dropped spans {result['dropped_spans']}, "
              f"dropped task runs {result['dropped_tasks']}", flush=True)


if __name__ == "__main__":
    main()
