"""The local index on a knowledge base of 10,000 diaries, next to a naive scan of the files.

Builds a folder of synthetic diaries (rendered by the real renderer: varied titles,
agents, tasks, reflections; a third recovered with compiler, exception or test failures in
their stderr tail), then measures

  * index build from the folder (``otel-diary reindex``), and its database size,
  * re-indexing single diaries one transaction each (what the worker does per diary),
  * search latency (median, p99) over a mix of words, codes, phrases, prefixes and filters,
  * the related-diaries lookup the pipeline runs before rendering each diary,
  * the baseline: every query answered by reading all files and testing ``word in text``,
    from disk and from memory.

    python benchmarks/index.py [--diaries 10000] [--queries 400] [--scan-queries 20]
                               [--stores 10000,100000]   # then SQLite and PostgreSQL
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from otel_diary import TaskRun, render
from otel_diary.index.query import SearchResult
from otel_diary.index.store import INDEX_FILE, DiaryIndex, IndexRelatedFinder

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


def write_corpus(root: Path, count: int, seed: int = 7) -> list[TaskRun]:
    """``count`` rendered diaries under ``root`` (plain writes: setup is not measured)."""
    rng = random.Random(seed)
    vocab = words(rng, 3000)
    runs = []
    for n in range(count):
        run, _ = make_run(n, rng)
        learned = " ".join(" ".join(rng.choices(vocab, k=rng.randint(8, 16))).capitalize() + "."
                           for _ in range(4))
        diary = render(run, learned)
        path = root / diary.path.removesuffix(".md")
        path = path.with_name(f"{path.name}-{diary.span_id[:8]}.md")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(diary.content, encoding="utf-8")
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


def timed(function: Callable[[], object], repeat: int) -> list[float]:
    """Seconds per call, ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--diaries", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--scan-queries", type=int, default=20)
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--stores", metavar="SIZES",
                        help="also compare SQLite and PostgreSQL at these sizes "
                             "(10000,100000): benchmarks/stores.py")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="otel-diary-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        runs = write_corpus(root, args.diaries)
        files = sorted((root / "diaries").rglob("*.md"))
        print(f"corpus: {len(files)} diaries, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB"
              f" (written in {time.perf_counter() - started:.1f} s)\n")

        index = DiaryIndex(root)
        started = time.perf_counter()
        entries, _ = index.scan()
        scanned = time.perf_counter() - started
        started = time.perf_counter()
        built = index.rebuild()
        build = time.perf_counter() - started
        size = sum(Path(f"{root / INDEX_FILE}{suffix}").stat().st_size
                   for suffix in ("", "-wal") if Path(f"{root / INDEX_FILE}{suffix}").exists())
        print("index build (otel-diary reindex)")
        print(f"  {built.indexed} diaries in {build:.2f} s ({built.indexed / build:,.0f} diaries/s;"
              f" of which reading and parsing the files {scanned:.2f} s); database "
              f"{size / 1e6:.1f} MB\n")

        rng = random.Random(11)
        print("per-diary index update (one transaction, as the worker does)")
        picks = rng.sample(entries, min(args.updates, len(entries)))
        samples = []
        for entry in picks:
            began = time.perf_counter()
            index.add(entry)
            samples.append(time.perf_counter() - began)
        report("add one diary", samples)
        finder = IndexRelatedFinder(index)
        recovered = [run for run in runs if run.outcome == "recovered"]
        related_runs = iter(rng.choices(recovered, k=args.updates))
        report("related diaries for a recovered run",
               timed(lambda: finder(next(related_runs)), args.updates))
        print()

        print("search (DiaryIndex.search, warm connection; each query of the mix in turn)")
        mix = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
        results = {query: len(search(index, query, filters).hits) for query, filters in QUERIES}
        position = iter(mix)

        def one_search() -> None:
            query, filters = next(position)
            search(index, query, filters)

        all_samples = timed(one_search, len(mix))
        report("all queries", all_samples)
        for i, (query, filters) in enumerate(QUERIES):
            label = (query or "(no words)") + "".join(f" --{k} {v}" for k, v in filters.items())
            report(f"{label[:40]} [{results[query]} hits]", all_samples[i::len(QUERIES)])
        print()

        print("baseline: no index, every query scans all files with `in`")
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
        memory = timed(lambda: naive_matches(texts, next(memory_position)),
                       args.scan_queries * 5)
        report("files already in memory, `in`", memory)
        print(f"\nmedian search: index {statistics.median(all_samples) * 1000:.3f} ms, "
              f"scan from disk {statistics.median(disk) * 1000:.1f} ms "
              f"({statistics.median(disk) / statistics.median(all_samples):,.0f}x), "
              f"scan in memory {statistics.median(memory) * 1000:.1f} ms "
              f"({statistics.median(memory) / statistics.median(all_samples):,.0f}x)")
        index.close()


    if args.stores:
        import stores  # benchmarks/stores.py, beside this file

        print()
        stores.main(["--sizes", args.stores])


if __name__ == "__main__":
    main()
