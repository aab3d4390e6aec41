"""``otel-diary lessons [--signature S]``: the lessons of a knowledge base, newest first.

One lesson per error signature (``code:TS2345``, ``exception:KeyError``, ``template:…``);
``--signature`` shows only the lesson of one, whole; given without its kind (``TS2345``,
``KeyError``), it is read as an error's text is. Exits 0 when lessons are listed, 1 when
there are none (or none for that signature).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from otel_diary.cli.common import (
    add_common_arguments,
    add_store_argument,
    fail,
    open_store_of,
    print_json,
    root_of,
    store_of,
)
from otel_diary.errors import IndexUnavailable
from otel_diary.index.base import DiaryStore
from otel_diary.index.documents import error_signatures, redacted
from otel_diary.index.folder import FolderStore
from otel_diary.index.lessons import Lesson, lesson_path
from otel_diary.pipeline.redact import redact


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--signature", metavar="S",
                        help="only the lesson of this signature, e.g. code:TS2345 (or TS2345)")
    add_common_arguments(parser)
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    root = root_of(args)
    url = store_of(args)
    store: DiaryStore = FolderStore(root)
    if url:
        opened = open_store_of("lessons", url)
        if opened is None:
            return 2
        store, root = opened, Path()
    try:
        with contextlib.closing(store):
            lessons = _lesson_of(store, args.signature) if args.signature else store.lessons()
    except IndexUnavailable as exc:
        return fail("lessons", str(exc), 1)
    lessons = [lesson for lesson in lessons if lesson.runs]
    if args.json:
        print_json({"count": len(lessons), "lessons": [
            {"id": lesson.id, "signature": lesson.signature, "runs": lesson.runs,
             "recovered": lesson.recovered, "first_seen": lesson.first_seen,
             "last_seen": lesson.last_seen, "agents": lesson.agents,
             "evidence": lesson.evidence, "seen": redacted(lesson.seen),
             "rules": [{"text": redact(r.text), "votes": r.votes, "evidence": r.evidence}
                       for r in lesson.rules],
             "file": str(root / lesson_path(lesson.signature))} for lesson in lessons]})
        return 0 if lessons else 1
    if not lessons:
        wanted = f" for {args.signature}" if args.signature else ""
        return fail("lessons", f"no lessons{wanted} in {store.where} yet", 1)
    if args.signature:
        print(redact(lessons[0].as_document()), end="")
        return 0
    for lesson in lessons:
        print(f"{lesson.id}  {lesson.runs} run(s)  {lesson.last_seen[:10]}  {lesson.signature}")
        if lesson.seen:
            print(f"    Seen: {redact(lesson.seen[0])}")
        if lesson.rules:
            best = lesson.rules[0]
            print(f"    What worked: {redact(best.text)} ({best.votes} vote(s))")
        print(f"    {root / lesson_path(lesson.signature)}")
    return 0


def _lesson_of(store: DiaryStore, asked: str) -> list[Lesson]:
    """The lesson of the signature ``asked``, in a list; one given without its kind
    (``TS2345``, ``KeyError``) is read as an error's text, for the signatures it has."""
    candidates = [asked] if ":" in asked else [asked, *error_signatures(asked)]
    lessons = [store.lesson(signature) for signature in candidates]
    return [next((lesson for lesson in lessons if lesson.runs), lessons[0])]
