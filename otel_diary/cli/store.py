"""``otel-diary store migrate`` and ``otel-diary store import --dir DIR``: the shared store.

``migrate`` creates or upgrades the store's schema (replicas starting at once wait for
each other). ``import`` copies the diaries of a folder knowledge base into the store,
oldest first, growing their lessons, with what the redactor finds in them taken out;
diaries already there are skipped, so it may be run again. Both use ``--store URL`` or
``OTEL_DIARY_STORE_URL``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from otel_diary.cli.common import add_store_argument, fail, open_store_of, print_skipped
from otel_diary.errors import IndexUnavailable
from otel_diary.index.documents import Entry, entry_from_parts, redacted_document, scan_diaries
from otel_diary.index.lessons import Sighting, sighting
from otel_diary.pipeline.redact import redact
from otel_diary.settings import Settings

if TYPE_CHECKING:
    from otel_diary.index.postgres import PostgresStore

PROGRESS_EVERY = 500


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    migrate = actions.add_parser("migrate", help="create or upgrade the store's schema")
    add_store_argument(migrate)
    copy = actions.add_parser("import", help="copy a folder knowledge base into the store")
    copy.add_argument("--dir", required=True, help="the knowledge-base root to copy")
    add_store_argument(copy)


def run(args: argparse.Namespace) -> int:
    env = Settings().store_url
    url = args.store or (env.get_secret_value() if env is not None else None)
    if not url:
        return fail("store", "no store: pass --store postgresql://… or set "
                             "OTEL_DIARY_STORE_URL", 2)
    store = open_store_of("store", url, migrate=True)
    if store is None:
        return 2
    try:
        with store:
            if args.action == "migrate":
                before, after = store.migrate()
                print(f"store {store.where}: schema version {after}"
                      + (f" (was {before})" if before != after else " (current)"))
                return 0
            return _import(store, Path(args.dir))
    except IndexUnavailable as exc:
        return fail("store", str(exc), 1)


def _import(store: PostgresStore, root: Path) -> int:
    if not root.is_dir():
        return fail("store", f"no knowledge base at {root}", 2)
    told = print_skipped("store")
    unreadable = 0

    def skipped_file(path: str, why: str) -> None:
        nonlocal unreadable
        unreadable += 1
        told(path, why)

    diaries = scan_diaries(root, skipped_file)
    diaries.sort(key=lambda item: (str(item[1].get("created", "")), item[0]))
    present = store.paths()
    added = skipped = 0
    batch: list[tuple[Entry, str, tuple[str, Sighting] | None, str | None]] = []
    """(entry, text, lesson sighting, path kept under: None until kept), oldest first."""

    def flush() -> int:
        """Keep the new diaries of ``batch`` (one transaction), then count every one of
        them into its lesson, oldest first: a lesson counts a run once, so the runs of
        diaries an interrupted import kept are counted now."""
        new = [n for n, item in enumerate(batch) if item[3] is None]
        try:
            for n, path in zip(new, store.add_diaries([batch[n][:2] for n in new]),
                               strict=True):
                batch[n] = (*batch[n][:3], path)
        except ValueError as exc:
            print(f"otel-diary store: a batch was refused ({exc}); importing it one by one",
                  file=sys.stderr)
            for n in new:
                try:
                    batch[n] = (*batch[n][:3], store.add_diary(*batch[n][:2]))
                except ValueError as one:
                    print(f"otel-diary store: skipped {batch[n][0].path}: {one}",
                          file=sys.stderr)
        done = 0
        for n, (_, _, found, kept) in enumerate(batch):
            if kept is None:
                continue  # refused
            done += n in new
            if found is not None:
                store.add_lesson(found[0], replace(found[1], path=kept))
        batch.clear()
        return done

    seen: set[str] = set()
    for n, (path, front, content) in enumerate(diaries, 1):
        front, content = redacted_document(front, content)  # the store is shared
        try:
            entry = entry_from_parts(path, front, content)
        except ValueError as exc:
            told(path, str(exc))
            continue
        if entry.id in seen:  # a second copy of one diary in the folder
            skipped += 1
            continue
        seen.add(entry.id)
        kept = present.get(entry.id)
        skipped += kept is not None
        batch.append((entry, content, sighting(path, front, content, redact), kept))
        if len(batch) >= PROGRESS_EVERY:
            added += flush()
        if n % PROGRESS_EVERY == 0:
            print(f"otel-diary store: {n}/{len(diaries)} diaries read", file=sys.stderr)
    added += flush()
    refused = len(diaries) + unreadable - added - skipped  # unreadable, or by the store
    print(f"imported {added} diaries from {root} into {store.where} "
          f"({skipped} already there, {refused} refused)")
    return 0
