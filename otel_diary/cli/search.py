"""``otel-diary search QUERY``: the diaries matching some words, best first, with filters.

Lessons with every word come first (unless a filter on diaries is given), then diaries.

Words are matched as words (``"a phrase"`` as a phrase, ``word*`` as a prefix); search
syntax characters in a query are plain text unless ``--fts`` asks for FTS5 syntax. Like
``grep``, it exits 0 when diaries match, 1 when none does, 2 on an error.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from otel_diary.cli.common import (
    add_common_arguments,
    add_store_argument,
    fail,
    has_knowledge_base,
    open_store_of,
    print_json,
    root_of,
    store_of,
)
from otel_diary.errors import IndexUnavailable, SearchError
from otel_diary.index.query import SearchResult, fts_terms
from otel_diary.index.store import DiaryIndex
from otel_diary.pipeline.redact import redact
from otel_diary.readers.knowledge import Found, search_lessons, shown_hit
from otel_diary.text import parse_since


def _since(text: str) -> str:
    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 1 to 1000")
    return value


EPILOG = ("Exit status, as grep's: 0 when diaries match, 1 when none does (or there are no "
          "diaries yet), 2 on an error. With --json, \"match\" says how the results matched: "
          "\"all\" (every word), \"any\" (some words: no diary had them all), \"recent\" "
          "(no words: the newest), or \"none\" when there are no results; \"lessons\" "
          "lists the lessons with every word, then those gathering the diaries found, which "
          "the exit status does not count.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("query", nargs="?", default="",
                        help='words to find ("a phrase", prefix*); none: the newest diaries')
    parser.add_argument("--agent",
                        help="only diaries of this agent (its name or its folder, any case)")
    parser.add_argument("--outcome", choices=("completed", "recovered"),
                        help="only diaries with this outcome")
    parser.add_argument("--task", help="only diaries of this task id")
    parser.add_argument("--since", type=_since, metavar="WHEN",
                        help="only diaries created since a date, a UTC time or an age (7d)")
    parser.add_argument("--limit", type=_limit, default=10, help="at most this many (10)")
    parser.add_argument("--fts", action="store_true",
                        help="read QUERY as an SQLite FTS5 query (AND, OR, NEAR, column:)")
    add_common_arguments(parser)
    add_store_argument(parser)


def lessons_for(root: Path, query: str, result: SearchResult,
                limit: int) -> list[dict[str, Any]]:
    """The lessons matching every word of ``query``, then those gathering the diaries
    found (``result``), as search results (``kind: lesson``)."""
    return [_lesson(found, str(root / found.path)) for found in search_lessons(
        root, query, limit, [hit.id for hit in result.hits])]


def _lesson(found: Found, file: str) -> dict[str, Any]:
    return {"id": found.id, "kind": "lesson", "title": found.title, "path": found.path,
            "updated": found.created, "worked": found.learned, "snippet": found.snippet,
            "matched": found.matched, "file": file}


def ranked(root: Path, index: DiaryIndex, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
    """What ``otel-diary search QUERY`` lists, unfiltered: lessons, then diaries."""
    result = index.search(query, limit=limit)
    found = lessons_for(root, query, result, limit)
    found += [{**hit.as_dict(), "kind": "diary"} for hit in result.hits]
    return found[:limit]


def _in_store(args: argparse.Namespace, url: str) -> tuple[SearchResult, list[dict[str, Any]]]:
    """The diaries and lessons the store at ``url`` has for ``args``."""
    store = open_store_of("search", url)
    if store is None:
        raise SearchError("")
    from otel_diary.readers.shared import search_store_lessons  # psycopg: the pg extra

    with store:
        result = store.search(args.query, agent=args.agent, outcome=args.outcome,
                              task=args.task, since=args.since, limit=args.limit, raw=args.fts)
        lessons: list[dict[str, Any]] = []
        if not (args.agent or args.outcome or args.task or args.since or args.fts):
            lessons = [_lesson(found, found.path) for found in search_store_lessons(
                store, fts_terms(args.query), args.limit, [hit.id for hit in result.hits])]
    return result, lessons


def run(args: argparse.Namespace) -> int:
    root = root_of(args)
    url = store_of(args)
    if url:
        try:
            result, lessons = _in_store(args, url)
        except (SearchError, IndexUnavailable) as exc:
            return fail("search", str(exc), 2) if str(exc) else 2
        return _show(args, result, lessons, Path())
    if not has_knowledge_base(root):
        result = SearchResult([], "recent")
        if not args.json:
            return fail("search", f"no diaries under {root} yet", 1)
    else:
        with DiaryIndex(root) as index:
            try:
                result = index.search(args.query, agent=args.agent, outcome=args.outcome,
                                      task=args.task, since=args.since, limit=args.limit,
                                      raw=args.fts)
            except (SearchError, IndexUnavailable) as exc:
                return fail("search", str(exc), 2)
    lessons = []
    unfiltered = not (args.agent or args.outcome or args.task or args.since or args.fts)
    if unfiltered and has_knowledge_base(root):
        lessons = lessons_for(root, args.query, result, args.limit)
    return _show(args, result, lessons, root)


def _show(args: argparse.Namespace, result: SearchResult, lessons: list[dict[str, Any]],
          root: Path) -> int:
    found = 0 if result.hits else 1  # as grep's, on the diaries: lessons come beside them
    hits = [shown_hit(hit) for hit in result.hits]
    if args.json:
        print_json({
            "query": redact(args.query),
            "match": result.match if result.hits else "none",
            "count": len(result.hits),
            "results": [{**hit.as_dict(), "file": str(root / hit.path)} for hit in hits],
            "lessons": lessons,
        })
        return found
    for lesson in lessons:
        print(f"{lesson['id']}  lesson  {str(lesson['updated'])[:10]}")
        print(f"    {lesson['title']}")
        print(f"    {lesson['file']}")
        if lesson["worked"]:
            print(f"    What worked: {lesson['worked']}")
        if lesson["snippet"]:
            print(f"    {lesson['snippet']}")
        elif lesson["matched"] != ["text"]:
            print(f"    The lesson of {', '.join(lesson['matched'])}, listed below")
        print()
    if not result.hits:
        print("No diaries match.")
        return found
    if result.match == "any":
        print("No diary has every word; these have some of them.\n")
    for hit in hits:
        print(f"{hit.id}  {hit.outcome}  {hit.created[:10]}  {hit.agent}  {hit.task}")
        print(f"    {hit.title}")
        print(f"    {root / hit.path}")
        snippet = hit.snippet or hit.summary
        if snippet:
            print(f"    {snippet}")
        print()
    return found
