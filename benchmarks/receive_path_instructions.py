"""Instructions the receive path costs per span: decoding and assembly, without HTTP.

Runs itself under ``valgrind --tool=callgrind`` twice, with N requests and with none (the
same start-up and payload generation), and prints the difference per span: a figure that
stays put however busy the machine is, for comparing two versions of the receiver.

    python benchmarks/receive_path_instructions.py [--requests 100]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def workload(requests: int, made: int) -> int:
    """Make ``made`` fresh requests, then decode and assemble five of them to warm up and
    ``requests`` more; returns the spans taken (both runs make as many requests)."""
    from otel_diary.assembly.grace import TraceStore
    from otel_diary.conventions import ORCHESTRATOR
    from otel_diary.pipeline.core import Pipeline
    from otel_diary.receiver.admission import Collector
    from otel_diary.receiver.decode import PROTOBUF, decode

    spec = importlib.util.spec_from_file_location("receiver_throughput",
                                                  HERE / "receiver_throughput.py")
    assert spec is not None and spec.loader is not None
    throughput = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(throughput)
    template, trace_ids = throughput.make_template()
    bodies = [throughput.fresh(template, trace_ids) for _ in range(made + 5)][:requests + 5]
    gc.set_threshold(50_000, 20, 100)  # as `serve` runs
    store = TraceStore(ORCHESTRATOR, grace=3600)
    collector = Collector(store, Pipeline(ORCHESTRATOR, []), start=False)
    for body in bodies:
        collector.offer(decode(body, PROTOBUF, ORCHESTRATOR))
    return store.accepted


def instructions(requests: int, made: int) -> tuple[int, int]:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child", str(requests), "--requests", str(made)],
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit("could not read callgrind's count:\n" + done.stderr[-2000:])
    return int(found.group(1)), int(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(workload(args.child, args.requests))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    base, warm = instructions(0, args.requests)
    total, spans = instructions(args.requests, args.requests)
    print(f"receive path (decode + assembly), {args.requests} requests, {spans - warm:,} spans: "
          f"{total - base:,} instructions, {(total - base) / (spans - warm):,.0f} per span "
          f"(start-up alone {base:,})")


if __name__ == "__main__":
    main()
