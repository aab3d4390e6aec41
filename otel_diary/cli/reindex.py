"""``otel-diary reindex``: rebuild the search index and the lessons from the diary folder.

Also recreates an index that was deleted or damaged; safe while an app writes diaries.
The diaries are the record: every lesson is rebuilt from them.
"""

from __future__ import annotations

import argparse
import time

from otel_diary.cli.common import (
    add_common_arguments,
    fail,
    print_json,
    print_skipped,
    root_of,
)
from otel_diary.errors import IndexUnavailable
from otel_diary.index.lessons import LessonBook, entry_diary
from otel_diary.index.store import DiaryIndex


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)


def run(args: argparse.Namespace) -> int:
    root = root_of(args)
    if not root.is_dir():
        return fail("reindex", f"no knowledge base at {root}", 1)
    started = time.perf_counter()
    with DiaryIndex(root) as index:
        try:
            report = index.rebuild(print_skipped("reindex"))
        except IndexUnavailable as exc:
            return fail("reindex", str(exc), 1)
        try:
            lessons = LessonBook(root).rebuild([entry_diary(entry)
                                                for entry in report.entries])
        except OSError as exc:
            return fail("reindex", f"cannot write the lessons under {root}: {exc}", 1)
        seconds = time.perf_counter() - started
        if args.json:
            print_json({"indexed": report.indexed, "skipped": report.skipped,
                        "lessons": lessons,
                        "index": str(index.path), "folder": str(index.folder),
                        "seconds": round(seconds, 3)})
            return 0
        skipped = f" ({report.skipped} other file(s) skipped)" if report.skipped else ""
        print(f"indexed {report.indexed} diaries from {index.folder} into {index.path} "
              f"in {seconds:.2f}s{skipped}; rebuilt {lessons} lesson(s)")
    return 0
