"""``otel-diary show --trace TRACE_ID`` or ``--id kh-…``: print the diary of a trace or an id.

An id is accepted with or without its ``kh-`` prefix; a lesson's id prints the lesson (the
ids ``search`` and ``context`` list are both kinds).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from otel_diary.cli.common import (
    add_common_arguments,
    add_store_argument,
    fail,
    has_knowledge_base,
    knowledge_base_of,
    open_store_of,
    print_json,
    root_of,
    store_of,
)
from otel_diary.errors import DiaryError, IndexUnavailable
from otel_diary.index.documents import redacted, redacted_document
from otel_diary.index.query import Hit
from otel_diary.index.store import DiaryIndex
from otel_diary.pipeline import DIARY_ROOT
from otel_diary.pipeline.redact import redact
from otel_diary.pipeline.render import parse_front_matter, split_front_matter
from otel_diary.text import read_text

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
ID_PREFIX = "kh-"
"""What every diary id starts with (see :func:`otel_diary.pipeline.render.diary_id`)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--trace", metavar="TRACE_ID",
                       help="the trace id (32 hex digits) whose diaries to print")
    which.add_argument("--id", metavar="ID",
                       help="the diary or lesson id to print (kh-…; the kh- may be left "
                       "out)")
    add_common_arguments(parser)
    add_store_argument(parser)


Shown = tuple[str, str, str, str]
"""A document to print: its id, its path in the knowledge base, where it was read, its text."""


def _from_store(url: str, trace: bool, wanted: str) -> tuple[list[Shown], str] | int:
    """The diaries of the trace or id ``wanted`` in the store at ``url`` (none: an empty
    list), and where they were looked for; an exit status when they cannot be read."""
    store = open_store_of("show", url)
    if store is None:
        return 2
    with store:
        try:
            if trace:
                hits = store.by_trace(wanted)
            else:
                found = store.by_id(wanted)
                hits = [found] if found is not None else []
            return [(hit.id, hit.path, hit.path, store.document(hit.path) or "")
                    for hit in hits], f"in {store.where}"
        except IndexUnavailable as exc:
            return fail("show", str(exc), 1)


def _from_folder(root: Path, trace: bool, wanted: str) -> tuple[list[Shown], str] | int:
    """The diaries of the trace or id ``wanted`` under ``root`` (none: an empty list), and
    where they were looked for; an exit status when they cannot be read."""
    hits: list[Hit] = []
    if has_knowledge_base(root):
        with DiaryIndex(root) as index:
            try:
                if trace:
                    hits = index.by_trace(wanted)
                else:
                    found = index.by_id(wanted)
                    hits = [found] if found is not None else []
            except IndexUnavailable as exc:
                return fail("show", str(exc), 1)
    documents: list[Shown] = []
    folder = (root / DIARY_ROOT).resolve()
    for hit in hits:
        file = root / hit.path
        try:
            if not file.resolve().is_relative_to(folder):
                raise OSError(0, "outside the diary folder")
            content = read_text(file, within=folder)
        except OSError as exc:
            return fail("show", f"diary {hit.id} is indexed at {file} but cannot be read "
                                f"({exc.strerror}); run `otel-diary reindex`", 1)
        documents.append((hit.id, hit.path, str(file), content))
    return documents, f"under {root}"


def _lesson(root: Path, url: str | None, wanted: str) -> list[Shown]:
    """The lesson whose id is ``wanted``, if there is one (else an empty list)."""
    kb = knowledge_base_of("show", root, url) if url or has_knowledge_base(root) else None
    if kb is None:
        return []
    with kb:
        try:
            found = kb.fetch(wanted)
        except DiaryError:
            return []
    if found.kind != "lesson":
        return []
    return [(found.id, found.path, found.path if url else str(root / found.path),
             found.content)]


def run(args: argparse.Namespace) -> int:
    root = root_of(args)
    trace = args.trace is not None
    if not trace:
        wanted = args.id.strip().lower()
        if not wanted.startswith(ID_PREFIX):
            wanted = ID_PREFIX + wanted
    else:
        wanted = args.trace.strip().lower().removeprefix("0x")
        if not _TRACE_ID.fullmatch(wanted):
            return fail("show", f"{args.trace!r} is not a trace id (32 hex digits)", 2)
    url = store_of(args)
    found = _from_store(url, trace, wanted) if url else _from_folder(root, trace, wanted)
    if isinstance(found, int):
        return found
    documents, where = found
    if not documents and not trace:
        documents = _lesson(root, url, wanted)
    if not documents:  # an id as it was typed: the redactor tells a key by its case
        return fail("show", f"no diary {'for trace' if trace else 'or lesson for id'} "
                            f"{wanted if trace else args.id.strip()} {where}", 1)
    return _print(args, documents)


def _print(args: argparse.Namespace, documents: list[Shown]) -> int:
    shown = [(ident, path, file, *_redacted(content))
             for ident, path, file, content in documents]
    if args.json:
        print_json({"diaries": [{"id": ident, "path": path, "file": file,
                                 "front_matter": redacted(front),
                                 "body": split_front_matter(text)[1]}
                                for ident, path, file, front, text in shown]})
        return 0
    sys.stdout.write("\n".join(text for *_, text in shown))
    return 0


def _redacted(content: str) -> tuple[dict[str, Any], str]:
    """A document's front matter (none: ``{}``) and its text, redacted as the index
    keeps it (see :func:`redacted_document`)."""
    try:
        front = parse_front_matter(content)
    except ValueError:
        return {}, redact(content)
    return front, redacted_document(front, content)[1]
