"""The local index at 10,000 and at 100,000 diaries, next to a naive scan of the files.

Builds two folders of synthetic diaries (rendered by the real renderer: varied titles,
agents, tasks, reflections; a third recovered with compiler, exception or test failures in
their stderr tail; the small one is the first part of the large one), then measures on each

  * index build from the folder (``otel-diary reindex``), and the database's size next to
    the files' (main file after a checkpoint, plus what is left of the write-ahead log),
  * the lessons' rebuild that follows it, from the index's entries, next to its baseline:
    reading every diary's front matter from the folder again,
  * re-indexing single diaries one transaction each (what the worker does per diary),
  * search latency (median, p99) over a mix of words, codes, phrases, prefixes and filters,
  * the related-diaries lookup the pipeline runs before rendering each diary,

and prints the large figures over the small ones (the index should not slow down with the
number of diaries); the lookups of both sizes are timed in turn, one call each, so that a
busy spell of the machine slows both alike. Then the baseline on the small folder: every
query answered by reading all files and testing ``word in text``. With valgrind, the
instructions the index update costs per diary (the pipeline's listener, given the rendered
diary), as a difference of two callgrind runs that differ only in those updates.

    python benchmarks/index.py [--small 10000] [--large 100000] [--queries 400]
                               [--scan-queries 20] [--callgrind-diaries 100]
                               [--stores 10000,100000]   # then SQLite and PostgreSQL
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from otel_diary import TaskRun, render
from otel_diary.index.documents import entry_from_document, run_signatures, scan_diaries
from otel_diary.index.lessons import LessonBook, entry_diary
from otel_diary.index.query import SearchResult
from otel_diary.index.stages import IndexListener, IndexRelatedFinder
from otel_diary.index.store import INDEX_FILE, DiaryIndex
from otel_diary.pipeline.render import Diary
from otel_diary.sinks.folder import FolderSink

AGENTS = ["coder", "reviewer", "planner", "tester", "docs", "migrator", "ops", "triage"]
TRIGGERS = ["issue", "ci-red", "review", "schedule", "chat"]
VERBS = ["Add", "Fix", "Refactor", "Tighten", "Migrate", "Document", "Speed up", "Remove",
         "Rename", "Split", "Harden", "Cache"]
NOUNS = ["orders API", "billing schema", "invoice export", "login flow", "search page",
         "payment retries", "session store", "rate limiter", "audit log", "email templates",
         "feature flags", "CSV import", "webhook handler", "user settings", "report builder"]
EXCEPTIONS = ["ValueError", "KeyError", "TypeError", "NullPointerException",
              "IllegalStateException", "TimeoutError", "IntegrityError", "AssertionError"]


def words(rng: random.Random, count: int) -> list[str]:
    """A vocabulary of pronounceable made-up words (a stand-in for varied prose)."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pra", "de", "qui", "zan"]
    vocab: set[str] = set()
    while len(vocab) < count:
        vocab.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(vocab)


def make_run(n: int, rng: random.Random) -> tuple[TaskRun, str]:
    """Task run number ``n`` and its stderr kind."""
    recovered = rng.random() < 1 / 3
    stderr = None
    if recovered:
        kind = rng.randrange(3)
        if kind == 0:
            code = f"TS{rng.randint(2300, 2399)}"
            stderr = (f"> tsc --noEmit\nsrc/mod{rng.randint(1, 40)}.ts({rng.randint(1, 300)},"
                      f"{rng.randint(1, 80)}): error {code}: Argument of type 'string' is not "
                      "assignable to parameter of type 'number'.\nFound 1 error.")
        elif kind == 1:
            exc = rng.choice(EXCEPTIONS)
            stderr = (f"Traceback (most recent call last):\n  File \"app/m{rng.randint(1, 60)}"
                      f".py\", line {rng.randint(1, 400)}, in handler\n{exc}: bad input")
        else:
            stderr = (f"FAILED tests/test_m{rng.randint(1, 80)}.py::test_case_"
                      f"{rng.randint(1, 30)} - AssertionError")
    return TaskRun(
        trace_id=rng.getrandbits(128) | 1, span_id=rng.getrandbits(64) | 1,
        task_id=f"T-{rng.randint(1, 3000)}",
        title=f"{rng.choice(VERBS)} the {rng.choice(NOUNS)}",
        agent=rng.choice(AGENTS), outcome="recovered" if recovered else "completed",
        end_ns=1_780_000_000_000_000_000 + n * 60_000_000_000,
        latency_ms=rng.randint(500, 90_000), trigger=rng.choice(TRIGGERS),
        route=rng.choice(["paid_model", "local_model"]), model="model-a",
        tokens=rng.randint(500, 40_000), file_operations=rng.randint(0, 12),
        build_attempts=rng.randint(2, 4) if recovered else 1,
        escalations=rng.randint(0, 2) if recovered else 0, stderr_tail=stderr,
    ), "" if stderr is None else stderr


def corpus(count: int, seed: int = 7) -> list[tuple[TaskRun, str]]:
    """``count`` task runs and what each learned; the first ``n`` of a larger corpus are
    the corpus of ``n``."""
    rng = random.Random(seed)
    vocab = words(rng, 3000)
    runs = []
    for n in range(count):
        run, _ = make_run(n, rng)
        learned = " ".join(" ".join(rng.choices(vocab, k=rng.randint(8, 16))).capitalize() + "."
                           for _ in range(4))
        runs.append((run, learned))
    return runs


def place(root: Path, run: TaskRun, learned: str) -> tuple[Diary, Path]:
    """The diary of ``run`` written under ``root`` (a plain write: setup is not measured)."""
    diary = render(run, learned)
    path = root / diary.path.removesuffix(".md")
    path = path.with_name(f"{path.name}-{diary.span_id[:8]}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(diary.content, encoding="utf-8")
    return diary, path


def write_corpus(root: Path, count: int, seed: int = 7) -> list[TaskRun]:
    """``count`` rendered diaries under ``root``."""
    runs = []
    for run, learned in corpus(count, seed):
        place(root, run, learned)
        runs.append(run)
    return runs


QUERIES: list[tuple[str, dict[str, str]]] = [
    ("invoice", {}),
    ("TS2345", {}),
    ("NullPointerException", {}),
    ("orders API", {}),
    ('"payment retries"', {}),
    ("rate*", {}),
    ("tests/test_m12.py::test_case_3", {}),
    ("escalation", {"outcome": "recovered"}),
    ("login", {"agent": "reviewer"}),
    ("schema", {"since": "2026-06-01T00:00:00.000Z"}),
    ("budget retries similar", {}),
    ("", {"agent": "ops", "outcome": "completed"}),
]


def search(index: DiaryIndex, query: str, filters: dict[str, str]) -> SearchResult:
    return index.search(query, agent=filters.get("agent"), outcome=filters.get("outcome"),
                        since=filters.get("since"))


def timed(function: Callable[[], object], repeat: int,
          cpu: list[float] | None = None) -> list[float]:
    """Seconds per call, ``repeat`` calls; the CPU seconds of each call go to ``cpu``."""
    samples = []
    for _ in range(repeat):
        started, cpu_started = time.perf_counter(), time.thread_time()
        function()
        samples.append(time.perf_counter() - started)
        if cpu is not None:
            cpu.append(time.thread_time() - cpu_started)
    return samples


def p(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(label: str, samples: Sequence[float]) -> None:
    print(f"  {label:<46} median {statistics.median(samples) * 1000:9.3f} ms   "
          f"p99 {p(samples, 0.99) * 1000:9.3f} ms   (n={len(samples)})")


def naive_matches(texts: Sequence[str], query: str) -> int:
    needles = [word.lower() for word in query.replace('"', " ").replace("*", "").split()]
    return sum(1 for text in texts if all(needle in text for needle in needles))


def database_bytes(root: Path) -> int:
    """The index's size on disk: the main file and its write-ahead log, if any is left."""
    return sum(Path(f"{root / INDEX_FILE}{suffix}").stat().st_size
               for suffix in ("", "-wal") if Path(f"{root / INDEX_FILE}{suffix}").exists())


@dataclass
class Figures:
    """What one folder measured."""

    diaries: int = 0
    files_bytes: int = 0
    build_s: float = 0.0
    build_cpu_s: float = 0.0
    lessons_cpu_s: float = 0.0
    rescan_cpu_s: float = 0.0
    database_bytes: int = 0
    add: list[float] = field(default_factory=list)
    related: list[float] = field(default_factory=list)
    searches: list[float] = field(default_factory=list)
    related_cpu: list[float] = field(default_factory=list)
    searches_cpu: list[float] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=dict)


def build(root: Path, args: argparse.Namespace) -> tuple[Figures, DiaryIndex]:
    """Build the index of the folder at ``root`` and time its updates; the index stays open
    for the lookups timed next to the other size's."""
    figures = Figures()
    files = sorted((root / "diaries").rglob("*.md"))
    figures.diaries = len(files)
    figures.files_bytes = sum(f.stat().st_size for f in files)
    print(f"{len(files):,} diaries, {figures.files_bytes / 1e6:.1f} MB of files")
    index = DiaryIndex(root)
    started, cpu_started = time.perf_counter(), time.thread_time()
    built = index.rebuild()
    figures.build_s = time.perf_counter() - started
    figures.build_cpu_s = time.thread_time() - cpu_started
    figures.database_bytes = database_bytes(root)
    print(f"  index build (otel-diary reindex): {built.indexed:,} diaries in "
          f"{figures.build_s:.2f} s ({built.indexed / figures.build_s:,.0f} diaries/s; CPU "
          f"{figures.build_cpu_s:.2f} s); "
          f"database {figures.database_bytes / 1e6:.1f} MB "
          f"({figures.database_bytes / figures.files_bytes:.2f}x the files)")
    # The lessons, as reindex rebuilds them after the index, then as it did before:
    # reading the folder again. CPU time: the same lesson files are written both times.
    cpu_started = time.thread_time()
    lessons = LessonBook(root).rebuild([entry_diary(entry) for entry in built.entries])
    figures.lessons_cpu_s = time.thread_time() - cpu_started
    cpu_started = time.thread_time()
    LessonBook(root).rebuild(scan_diaries(root))
    figures.rescan_cpu_s = time.thread_time() - cpu_started
    print(f"  lessons rebuild: {lessons:,} lessons from the index's entries, CPU "
          f"{figures.lessons_cpu_s:.2f} s; reading the folder again instead "
          f"{figures.rescan_cpu_s:.2f} s ({figures.lessons_cpu_s / figures.rescan_cpu_s:.2f}x)")

    rng = random.Random(11)
    picks = [entry_from_document(f.relative_to(root).as_posix(), f.read_text(encoding="utf-8"))
             for f in rng.sample(files, min(args.updates, len(files)))]
    for entry in picks:
        began = time.perf_counter()
        index.add(entry)
        figures.add.append(time.perf_counter() - began)
    report("add one diary (one transaction)", figures.add)
    print()
    return figures, index


def lookups(sizes: Sequence[tuple[Figures, DiaryIndex]], runs: Sequence[Sequence[TaskRun]],
            args: argparse.Namespace) -> None:
    """Related and search on every size, one call on each in turn (the first size first
    in one round, last in the next): a busy spell of the machine slows them alike. Each
    size's Related runs are its own folder's, so that each sees as many diaries before it
    as a run of that folder does."""
    related_runs = [random.Random(11).choices([run for run in own if run.outcome == "recovered"],
                                              k=args.updates) for own in runs]
    mix = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
    for figures, index in sizes:
        figures.hits = {query: len(search(index, query, filters).hits)
                        for query, filters in QUERIES}
    finders = [IndexRelatedFinder(index) for _, index in sizes]
    for n in range(max(args.updates, len(mix))):
        order = range(len(sizes)) if n % 2 == 0 else reversed(range(len(sizes)))
        for i in order:
            figures, index = sizes[i]
            if n < args.updates:
                run = related_runs[i][n]
                figures.related += timed(partial(finders[i], run), 1, figures.related_cpu)
            if n < len(mix):
                query, filters = mix[n]
                figures.searches += timed(partial(search, index, query, filters), 1,
                                          figures.searches_cpu)
    for figures, _ in sizes:
        print(f"{figures.diaries:,} diaries")
        report("related diaries for a recovered run", figures.related)
        report("search: all queries of the mix", figures.searches)
        for i, (query, filters) in enumerate(QUERIES):
            label = (query or "(no words)") + "".join(f" --{k} {v}" for k, v in filters.items())
            report(f"  {label[:38]} [{figures.hits[query]} hits]",
                   figures.searches[i::len(QUERIES)])
        print()


def baseline(root: Path, args: argparse.Namespace, index_median: float) -> None:
    print("baseline: no index, every query scans all files with `in`")
    files = sorted((root / "diaries").rglob("*.md"))
    word_queries = [query for query, filters in QUERIES if query and not filters]
    scan_position = iter([word_queries[i % len(word_queries)]
                          for i in range(args.scan_queries)])

    def scan_disk() -> None:
        query = next(scan_position)
        naive_matches([f.read_text(encoding="utf-8").lower() for f in files], query)

    disk = timed(scan_disk, args.scan_queries)
    report("read every file, then `in`", disk)
    texts = [f.read_text(encoding="utf-8").lower() for f in files]
    memory_position = iter([word_queries[i % len(word_queries)]
                            for i in range(args.scan_queries * 5)])
    memory = timed(lambda: naive_matches(texts, next(memory_position)), args.scan_queries * 5)
    report("files already in memory, `in`", memory)
    print(f"  median search: index {index_median * 1000:.3f} ms, "
          f"scan from disk {statistics.median(disk) * 1000:.1f} ms "
          f"({statistics.median(disk) / index_median:,.0f}x), "
          f"scan in memory {statistics.median(memory) * 1000:.1f} ms "
          f"({statistics.median(memory) / index_median:,.0f}x)\n")


# -- instructions per index update (callgrind) ------------------------------------------

BASE_DIARIES = 200


def updates_child(updates: int, diaries: int) -> None:
    """Render ``diaries`` more diaries into a folder of BASE_DIARIES, then hand the first
    ``updates`` of them to the index listener as the pipeline does (both runs render as
    many and read each run's error signatures, as the pipeline's related-diary lookup does
    before rendering; only the updates differ)."""
    with tempfile.TemporaryDirectory(prefix="otel-diary-bench-") as tmp:
        root = Path(tmp)
        runs = corpus(BASE_DIARIES + diaries, seed=5)
        for run, learned in runs[:BASE_DIARIES]:
            place(root, run, learned)
        index = DiaryIndex(root)
        index.rebuild()
        listener = IndexListener(index, FolderSink(root))
        placed = [(place(root, run, learned), run) for run, learned in runs[BASE_DIARIES:]]
        for _, run in placed:
            run_signatures(run)
        for (diary, path), run in placed[:updates]:
            listener(diary, run, [str(path.resolve())])
        index.close()


def callgrind(updates: int, diaries: int) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child-updates", str(updates), "--callgrind-diaries", str(diaries)],
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit("could not read callgrind's count:\n" + done.stderr[-2000:])
    return int(found.group(1))


def ratio_line(label: str, small: Sequence[float], large: Sequence[float],
               sizes: tuple[int, int]) -> None:
    median_small, median_large = statistics.median(small), statistics.median(large)
    print(f"  {label:<22} median {median_small * 1000:8.3f} -> "
          f"{median_large * 1000:8.3f} ms ({median_large / median_small:5.2f}x)"
          f"   p99 {p(small, 0.99) * 1000:8.3f} -> {p(large, 0.99) * 1000:8.3f} ms "
          f"({p(large, 0.99) / p(small, 0.99):5.2f}x)   [{sizes[0]:,} -> {sizes[1]:,} diaries]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--scan-queries", type=int, default=20)
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--callgrind-diaries", type=int, default=100)
    parser.add_argument("--child-updates", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--stores", metavar="SIZES",
                        help="also compare SQLite and PostgreSQL at these sizes "
                             "(10000,100000): benchmarks/stores.py")
    args = parser.parse_args()
    if args.child_updates is not None:
        updates_child(args.child_updates, args.callgrind_diaries)
        return

    runs = corpus(max(args.small, args.large))
    built: list[tuple[Figures, DiaryIndex]] = []
    with tempfile.TemporaryDirectory(prefix="otel-diary-bench-") as tmp:
        for count in (args.small, args.large):
            root = Path(tmp) / str(count)
            started = time.perf_counter()
            for run, learned in runs[:count]:
                place(root, run, learned)
            print(f"folder of {count:,} diaries written in {time.perf_counter() - started:.1f} s")
            built.append(build(root, args))
        lookups(built, [[run for run, _ in runs[:count]] for count in (args.small, args.large)],
                args)
        baseline(Path(tmp) / str(args.small), args, statistics.median(built[0][0].searches))
        for _, index in built:
            index.close()
    measured = [figures for figures, _ in built]
    small, large = measured
    sizes = (small.diaries, large.diaries)
    print(f"large over small ({large.diaries / small.diaries:.0f}x the diaries; "
          "goal: p99 at most 2x; the CPU time of the calling thread is less disturbed by a "
          "busy machine than the elapsed time)")
    ratio_line("search", small.searches, large.searches, sizes)
    ratio_line("search, CPU time", small.searches_cpu, large.searches_cpu, sizes)
    ratio_line("related", small.related, large.related, sizes)
    ratio_line("related, CPU time", small.related_cpu, large.related_cpu, sizes)
    ratio_line("add one diary", small.add, large.add, sizes)
    print(f"  reindex, the index     {small.build_s:8.2f} -> {large.build_s:8.2f} s, CPU "
          f"{small.build_cpu_s:.2f} -> {large.build_cpu_s:.2f} s; with the lessons, CPU "
          f"{small.build_cpu_s + small.lessons_cpu_s:.2f} -> "
          f"{large.build_cpu_s + large.lessons_cpu_s:.2f} s "
          f"(goal: {large.diaries:,} in under 60 s)")
    for figures in measured:
        print(f"  database / files       {figures.database_bytes / 1e6:8.1f} MB / "
              f"{figures.files_bytes / 1e6:6.1f} MB = "
              f"{figures.database_bytes / figures.files_bytes:.2f}x at {figures.diaries:,} "
              "(goal: at most 1.5x)")
    if shutil.which("valgrind") and args.callgrind_diaries > 0:
        n = args.callgrind_diaries
        with_updates, without = callgrind(n, n), callgrind(0, n)
        print(f"  index update per diary {(with_updates - without) / n:,.0f} instructions "
              f"(callgrind: {n} listener calls, minus a run rendering the same diaries)")
    else:
        print("  index update per diary: skipped (needs valgrind)")
    if args.stores:
        import stores  # benchmarks/stores.py, beside this file

        print()
        stores.main(["--sizes", args.stores])


if __name__ == "__main__":
    main()
