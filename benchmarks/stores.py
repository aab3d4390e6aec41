"""The two stores side by side: the folder + SQLite index and PostgreSQL, on one corpus.

For each size (10,000 and 100,000 diaries by default) both stores are filled with the
same synthetic diaries (``benchmarks/index.py``'s generator; the fill is not measured),
then each is measured on the same work:

  * per-diary write, as delivery does it: the document, its index entry and its lesson
    (folder: the file, the SQLite row, the lesson file; PostgreSQL: one row set per
    diary and the lesson row, over a loopback connection),
  * the Related lookup the pipeline runs before rendering each diary,
  * search (median, p99) over ``index.py``'s query mix.

It starts a throwaway PostgreSQL server (``initdb``/``pg_ctl`` on a free port, as the
tests do). Figures are medians and p99s in milliseconds, with the PostgreSQL/SQLite ratio.

    python benchmarks/stores.py [--sizes 10000,100000] [--samples 300]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, for the server

from index import QUERIES, make_run, p, words

from otel_diary import TaskRun, render
from otel_diary.index.base import DiaryStore
from otel_diary.index.documents import Entry, entry_from_parts
from otel_diary.index.folder import FolderStore
from otel_diary.index.lessons import Sighting, sighting
from otel_diary.index.postgres import PostgresStore
from otel_diary.index.stages import IndexRelatedFinder
from otel_diary.index.store import DiaryIndex
from tests.support.postgres import PostgresCluster

Item = tuple[Entry, str, tuple[str, Sighting] | None, TaskRun]


def corpus(count: int, seed: int) -> list[Item]:
    """``count`` rendered diaries: entry, text, lesson sighting, run."""
    rng = random.Random(seed)
    vocab = words(rng, 3000)
    items: list[Item] = []
    for n in range(count):
        run, _ = make_run(n, rng)
        learned = " ".join(" ".join(rng.choices(vocab, k=rng.randint(8, 16))).capitalize() + "."
                           for _ in range(4))
        diary = render(run, learned)
        path = diary.alternate_path
        items.append((entry_from_parts(path, diary.front_matter, diary.content), diary.content,
                      sighting(path, diary.front_matter, diary.content), run))
    return items


def timed(samples: int, work: Callable[[int], object]) -> list[float]:
    out = []
    for n in range(samples):
        began = time.perf_counter()
        work(n)
        out.append(time.perf_counter() - began)
    return out


def measure(store: DiaryStore, fresh: Sequence[Item], runs: Sequence[TaskRun],
            samples: int) -> dict[str, list[float]]:
    """The three measurements on one filled store."""

    def write(n: int) -> None:
        entry, content, found, _ = fresh[n]
        store.add_diary(entry, content)
        if found is not None:
            store.add_lesson(*found)

    finder = IndexRelatedFinder(store)
    mix = [QUERIES[n % len(QUERIES)] for n in range(samples)]

    def search(n: int) -> None:
        query, filters = mix[n]
        store.search(query, agent=filters.get("agent"), outcome=filters.get("outcome"),
                     since=filters.get("since"))

    return {"per-diary write (document, index, lesson)": timed(len(fresh), write),
            "Related lookup for a recovered run": timed(samples, lambda n: finder(runs[n])),
            "search, query mix": timed(samples, search)}


def fill_sqlite(root: Path, items: Sequence[Item]) -> float:
    began = time.perf_counter()
    with DiaryIndex(root) as index:
        for entry, _, _, _ in items:
            index.add(entry)
    return time.perf_counter() - began


def fill_postgres(url: str, items: Sequence[Item]) -> float:
    began = time.perf_counter()
    with PostgresStore(url, timeout_s=120) as store:
        for start in range(0, len(items), 1000):
            store.add_diaries([(entry, content) for entry, content, _, _ in
                               items[start:start + 1000]])
        with store._db.connection() as conn:  # what autovacuum does after a bulk load
            conn.execute("ANALYZE otel_diary.diaries")
            conn.execute("ANALYZE otel_diary.signatures")
    return time.perf_counter() - began


def line(label: str, sqlite: Sequence[float], postgres: Sequence[float]) -> None:
    ms = 1000.0
    print(f"  {label:<42} SQLite median {statistics.median(sqlite) * ms:8.3f} p99 "
          f"{p(sqlite, 0.99) * ms:8.3f} | PostgreSQL median {statistics.median(postgres) * ms:8.3f}"
          f" p99 {p(postgres, 0.99) * ms:8.3f} ms | ratio "
          f"{statistics.median(postgres) / statistics.median(sqlite):5.1f}x")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    with PostgresCluster() as cluster, tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for size in sizes:
            began = time.perf_counter()
            items = corpus(size + args.samples, seed=size)
            filled, fresh = items[:size], items[size:]
            rng = random.Random(3)
            recovered = [item[3] for item in filled if item[3].outcome == "recovered"]
            runs = rng.choices(recovered, k=args.samples)
            print(f"{size:,} diaries (rendered in {time.perf_counter() - began:.1f} s)")
            root = Path(tmp) / f"kb-{size}"
            url = cluster.new_database()
            print(f"  fill (not measured below): SQLite {fill_sqlite(root, filled):.1f} s, "
                  f"PostgreSQL {fill_postgres(url, filled):.1f} s")
            with FolderStore(root) as folder, PostgresStore(url) as shared:
                on_sqlite = measure(folder, fresh, runs, args.samples)
                on_postgres = measure(shared, fresh, runs, args.samples)
            for label, samples in on_sqlite.items():
                line(label, samples, on_postgres[label])
            print()


if __name__ == "__main__":
    main()
