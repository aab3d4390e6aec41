"""Instructions the receive path costs per span: decoding and assembly, without HTTP.

Runs itself under ``valgrind --tool=callgrind`` twice, with N requests and with none (the
same start-up and payload generation), and prints the difference per span: a figure that
stays put however busy the machine is, for comparing two versions of the receiver. Then
the same with the write-ahead journal on (a file on disk; the journal's writer thread and
SQLite counted too, the requests committed before the run ends), and the ratio of the two.

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


def workload(requests: int, made: int, journaled: bool) -> int:
    """Make ``made`` fresh requests, then decode and assemble five of them to warm up and
    ``requests`` more; returns the spans taken (both runs make as many requests)."""
    import tempfile

    from otel_diary.assembly.grace import TraceStore
    from otel_diary.assembly.journal import Journal
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
    with tempfile.TemporaryDirectory(prefix="otel-diary-journal-") as folder:
        journal = Journal(Path(folder) / "journal.sqlite3") if journaled else None
        collector = Collector(store, Pipeline(ORCHESTRATOR, []), journal=journal,
                              start=False)
        if journal is not None:
            journal.start()
        durable = None
        for body in bodies:
            _, durable = collector.offer(decode(body, PROTOBUF, ORCHESTRATOR))
        if durable is not None:
            durable.result()  # commits are in order: every request is committed
        if journal is not None:
            journal.close()
    return store.accepted


def instructions(requests: int, made: int, journaled: bool) -> tuple[int, int]:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child", str(requests), "--requests", str(made),
         *(["--journal"] if journaled else [])],
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit("could not read callgrind's count:\n" + done.stderr[-2000:])
    return int(found.group(1)), int(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--journal", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(workload(args.child, args.requests, args.journal))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    per_span = {}
    for journaled in (False, True):
        base, warm = instructions(0, args.requests, journaled)
        total, spans = instructions(args.requests, args.requests, journaled)
        per_span[journaled] = (total - base) / (spans - warm)
        what = "decode + assembly + journal" if journaled else "decode + assembly"
        print(f"receive path ({what}), {args.requests} requests, {spans - warm:,} spans: "
              f"{total - base:,} instructions, {per_span[journaled]:,.0f} per span "
              f"(start-up alone {base:,})")
    print(f"journal cost: {per_span[True] / per_span[False]:.2f}x the instructions per span "
          f"of the receive path without it")


if __name__ == "__main__":
    main()
