"""``otel-diary context`` (the session-start hook) on a knowledge base of 10,000 diaries.

Builds the corpus of ``benchmarks/index.py`` (10,000 rendered diaries, a third recovered
with compiler, exception or test failures), indexes it as the app does, adds one lesson
per compiler code, then measures

  * ``otel-diary context`` as a hook runs it: a new process, an error on standard input
    and a task, printing the digest (median, p99),
  * the baseline in the same run, each call right after one of the above:
    ``otel-diary --help``, the same interpreter and command line starting and exiting
    without touching the knowledge base,
  * in-process: the digest's work alone (``relevant`` + ``digest``) next to one bare
    ``DiaryIndex.search`` of the same error line.

    python benchmarks/context.py [--diaries 10000] [--lessons 100] [--runs 30] [--calls 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from index import p, report, timed, write_corpus

from otel_diary.index.store import DiaryIndex
from otel_diary.readers.context import digest, relevant
from otel_diary.readers.knowledge import KnowledgeBase

CLI = [sys.executable, "-m", "otel_diary.cli"]
ERRORS = [
    "src/checkout/cart.ts(12,5): error TS2345: Argument of type 'string' is not assignable "
    "to parameter of type 'number'.",
    "Traceback (most recent call last):\n  File \"app/orders.py\", line 88, in handler\n"
    "KeyError: 'customer_id'",
    "FAILED tests/test_m12.py::test_case_3 - AssertionError: expected 3, got 4",
    "panic: runtime error: index out of range [5] with length 3",
]
TASKS = ["Speed up the invoice export", "Harden the payment retries", "Fix the login flow",
         "Migrate the billing schema to the new ledger"]


def write_lessons(root: Path, codes: range) -> int:
    """One lesson per TypeScript code in ``codes`` (what the lessons stage would keep)."""
    folder = root / "diaries" / "lessons"
    folder.mkdir(parents=True, exist_ok=True)
    for code in codes:
        (folder / f"code-TS{code}.md").write_text(
            f"---\nid: kl-ts{code}\nsource_type: lesson\ntitle: 'TS{code}: narrow the value "
            f"first'\nsignature: 'code:TS{code}'\nupdated: '2026-07-01T00:00:00.000Z'\n---\n\n"
            f"# TS{code}: narrow the value first\n\n## What worked\n- Narrow optional values "
            "before passing them on (votes: 3)\n", encoding="utf-8")
    return len(codes)


def hook(root: Path, n: int) -> subprocess.CompletedProcess[str]:
    """``otel-diary context`` as a SessionStart hook runs it."""
    return subprocess.run([*CLI, "context", "--dir", str(root), "--task", TASKS[n % len(TASKS)]],
                          input=ERRORS[n % len(ERRORS)], capture_output=True, text=True,
                          check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--diaries", type=int, default=10_000)
    parser.add_argument("--lessons", type=int, default=100,
                        help="lesson files (one per error signature a team has met)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="otel-diary-bench-") as tmp:
        root = Path(tmp)
        write_corpus(root, args.diaries)
        with DiaryIndex(root) as index:
            indexed = index.rebuild().indexed
        lessons = write_lessons(root, range(2300, 2300 + args.lessons))
        print(f"corpus: {indexed} diaries indexed, {lessons} lessons\n")

        sample = hook(root, 0).stdout
        print("digest for a TS2345 error and the task "
              f"{TASKS[0]!r} ({len(sample)} characters):\n")
        print("    " + sample.replace("\n", "\n    ").rstrip() + "\n")

        print("new process per call (what a SessionStart hook costs; the two interleaved)")
        context: list[float] = []
        baseline: list[float] = []
        for n in range(args.runs):
            context += timed(partial(hook, root, n), 1)
            baseline += timed(partial(subprocess.run, [*CLI, "--help"], capture_output=True,
                                      check=True), 1)
        report("otel-diary context (error + task)", context)
        report("baseline: otel-diary --help", baseline)
        print()

        print("in process, warm (the digest's work alone)")
        rng = random.Random(5)
        picks = [rng.randrange(len(ERRORS)) for _ in range(args.calls)]
        with KnowledgeBase(root) as kb, DiaryIndex(root) as bare:
            work = iter(picks)
            searches = iter(picks)

            def one_digest() -> None:
                n = next(work)
                signatures, found = relevant(kb, task=TASKS[n], error=ERRORS[n])
                digest(root, signatures, found)

            in_process = timed(one_digest, args.calls)
            search = timed(lambda: bare.search(ERRORS[next(searches)].splitlines()[-1]),
                           args.calls)
        report("relevant() + digest()", in_process)
        report("baseline: one DiaryIndex.search", search)
        extra = statistics.median(context) - statistics.median(baseline)
        print(f"\notel-diary context: median {statistics.median(context) * 1000:.0f} ms, "
              f"p99 {p(context, 0.99) * 1000:.0f} ms; process start alone "
              f"{statistics.median(baseline) * 1000:.0f} ms, so the knowledge base adds "
              f"{extra * 1000:.0f} ms")


if __name__ == "__main__":
    main()
