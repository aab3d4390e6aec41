"""Lessons as the read side finds them: their files under ``<root>/diaries/lessons``.

A lesson gathers the diaries of one error signature (see :mod:`otel_diary.index.lessons`);
the readers find lessons by id, by signature, by words, and by the diaries they gather.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from otel_diary.index.documents import MAX_DOCUMENT_BYTES
from otel_diary.pipeline.render import (
    KB_FOLDER,
    LESSON_ROOT,
    parse_front_matter,
    split_front_matter,
)
from otel_diary.text import knowledge_files, one_line, read_text

VERBATIM = re.compile(r"[A-Za-z0-9_.:/<>@+=, -]{1,60}")
"""Text YAML keeps as it is in a scalar (ASCII, too short to be folded), so a lesson file
containing it can be found without parsing the file."""


def plain_text(value: object) -> str:
    """A front-matter scalar as one line of text; empty for nothing, a list or a mapping."""
    return "" if value is None or isinstance(value, (dict, list)) else one_line(str(value), 2000)


@dataclass(frozen=True, kw_only=True)
class KnownLesson:
    """A lesson as the readers list it."""

    id: str
    path: str
    title: str
    signatures: list[str]
    created: str
    worked: str = ""
    """Its most voted rule."""
    evidence: tuple[str, ...] = ()
    """The ids of the diaries it gathers (the newest, as its file lists them)."""


class LessonSource(Protocol):
    """Where a knowledge base finds its lessons: files (:class:`LessonFiles`) or a store."""

    def by_id(self, ident: str) -> KnownLesson | None: ...

    def by_signature(self, signatures: Sequence[str]) -> list[tuple[KnownLesson, list[str]]]:
        ...

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]: ...

    def gathering(self, diaries: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]:
        ...

    def close(self) -> None: ...


def heading(markdown: str) -> str:
    """The first ``# `` heading of ``markdown``, on one line."""
    return one_line(next((line[2:] for line in markdown.splitlines()
                          if line.startswith("# ")), ""), 200)


def known_lesson(path: str, content: str) -> KnownLesson:
    """A lesson document; ``ValueError`` when ``content`` is not one."""
    front = parse_front_matter(content)
    if front.get("source_type") != "lesson" or not plain_text(front.get("id")):
        raise ValueError("not a lesson")
    body = split_front_matter(content)[1]
    signatures = [plain_text(front.get("signature"))]
    listed = front.get("signatures")
    if isinstance(listed, list):
        signatures += [plain_text(item) for item in listed]
    tags = front.get("tags")
    if isinstance(tags, list):
        signatures += [plain_text(tag).removeprefix("signature:") for tag in tags
                       if plain_text(tag).startswith("signature:")]
    title = plain_text(front.get("title")) or heading(body) or Path(path).stem
    created = plain_text(front.get("updated")) or plain_text(front.get("created"))
    rules = front.get("rules")  # the most voted first; read as `otel-diary lessons` reads them
    worked = next((rule["text"] for rule in rules if isinstance(rule, dict)
                   and isinstance(rule.get("text"), str)), "") if isinstance(rules, list) else ""
    evidence = front.get("evidence")
    return KnownLesson(id=plain_text(front["id"]), path=path, title=title,
                       signatures=list(dict.fromkeys(s for s in signatures if s)),
                       created=created, worked=one_line(worked, 300),
                       evidence=tuple(item for item in evidence if isinstance(item, str))
                       if isinstance(evidence, list) else ())


class LessonFiles:
    """The lesson documents under ``<root>/diaries/lessons``, reread when they change.

    There is one lesson per error signature, so there may be many: files are read as text
    and parsed (YAML) only when they may answer, i.e. when they contain the id or a
    signature asked for, or when the full-text search (built on first use) returns them.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        self._folder = root / LESSON_ROOT
        self._base = (root / KB_FOLDER).resolve()
        """Everything a reader may return lives under ``<root>/diaries``."""
        self._lock = threading.Lock()
        self._texts: dict[str, tuple[tuple[int, int], str]] = {}
        self._parsed: dict[str, KnownLesson | None] = {}
        self._searchable: list[str] | None = None
        """The path of each row of the full-text table; ``None`` while it is out of date."""
        self._db: sqlite3.Connection | None = None

    def _refresh(self) -> dict[str, str]:
        """Path -> text of every lesson-sized file, rereading those that changed."""
        texts: dict[str, tuple[tuple[int, int], str]] = {}
        for file in knowledge_files(self._folder, self._base):
            try:
                stat = file.stat()
                if not file.is_file() or stat.st_size > MAX_DOCUMENT_BYTES:
                    continue
                path = file.relative_to(self._root).as_posix()
                stamp = (stat.st_mtime_ns, stat.st_size)
                known = self._texts.get(path)
                if known is None or known[0] != stamp:
                    known = (stamp, read_text(file, "replace", within=self._base,
                                              max_bytes=MAX_DOCUMENT_BYTES))
                    self._parsed.pop(path, None)
                    self._searchable = None
            except OSError:
                continue
            texts[path] = known
        if texts.keys() != self._texts.keys():
            self._searchable = None
        self._texts = texts
        return {path: text for path, (_, text) in texts.items()}

    def _parse(self, path: str) -> KnownLesson | None:
        if path not in self._parsed:
            try:
                self._parsed[path] = known_lesson(path, self._texts[path][1])
            except (ValueError, TypeError):
                self._parsed[path] = None
        return self._parsed[path]

    def _containing(self, needles: Sequence[str]) -> list[KnownLesson]:
        """Lessons whose file contains one of ``needles`` (all of them when a needle has
        characters YAML might have escaped), in path order, the first of an id only."""
        texts = self._refresh()
        plain = all(VERBATIM.fullmatch(needle) for needle in needles)
        found: list[KnownLesson] = []
        seen: set[str] = set()
        for path, text in texts.items():
            if plain and not any(needle in text for needle in needles):
                continue
            lesson = self._parse(path)
            if lesson is not None and lesson.id not in seen:
                seen.add(lesson.id)
                found.append(lesson)
        return found

    def by_id(self, ident: str) -> KnownLesson | None:
        with self._lock:
            return next((lesson for lesson in self._containing([ident]) if lesson.id == ident),
                        None)

    def by_signature(self, signatures: Sequence[str]) -> list[tuple[KnownLesson, list[str]]]:
        """Lessons for any of ``signatures``: by the first signature they share, newest first."""
        if not signatures:
            return []
        order = {signature: n for n, signature in enumerate(signatures)}
        with self._lock:
            candidates = self._containing(signatures)
        found = [(lesson, [s for s in lesson.signatures if s in order]) for lesson in candidates]
        found = [(lesson, shared) for lesson, shared in found if shared]
        found.sort(key=lambda pair: pair[0].created, reverse=True)
        found.sort(key=lambda pair: min(order[s] for s in pair[1]))
        return found

    def gathering(self, diaries: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]:
        """The lessons gathering any of ``diaries`` (ids), each with the first of them it
        gathers, in the order of ``diaries``."""
        if not diaries:
            return []
        with self._lock:
            candidates = self._containing(diaries)
        order: dict[str, int] = {}
        for n, ident in enumerate(diaries):
            order.setdefault(ident, n)
        firsts = [(min(order[ident] for ident in lesson.evidence if ident in order), lesson)
                  for lesson in candidates if not order.keys().isdisjoint(lesson.evidence)]
        firsts.sort(key=lambda pair: pair[0])
        return [(lesson, diaries[n]) for n, lesson in firsts[:limit]]

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]:
        """Lessons with every term (the index's tokenizer and stemming), best first, each
        with a snippet."""
        if not terms:
            return []
        with self._lock:
            texts = self._refresh()
            if not texts:
                return []
            if self._db is None:
                self._db = sqlite3.connect(":memory:", check_same_thread=False)
                self._db.execute("CREATE VIRTUAL TABLE lessons USING fts5 (title, body, "
                                 "meta, tokenize = 'porter unicode61 remove_diacritics 2')")
            if self._searchable is None:
                paths = list(texts)
                self._db.execute("DELETE FROM lessons")
                self._db.executemany(  # snippets from the markdown, never the front matter
                    "INSERT INTO lessons (rowid, title, body, meta) VALUES (?, ?, ?, ?)",
                    [(n, heading(texts[path]), *reversed(split_front_matter(texts[path])))
                     for n, path in enumerate(paths)])
                self._searchable = paths
            rows = self._db.execute(
                "SELECT rowid, snippet(lessons, 1, '**', '**', '…', 16) FROM lessons "
                "WHERE lessons MATCH ? ORDER BY bm25(lessons, 10.0, 1.0, 1.0) LIMIT ?",
                (" AND ".join(terms), 2 * limit)).fetchall()
            found: list[tuple[KnownLesson, str]] = []
            seen: set[str] = set()
            for row, snippet in rows:
                lesson = self._parse(self._searchable[row])
                if lesson is not None and lesson.id not in seen:
                    seen.add(lesson.id)
                    found.append((lesson, " ".join(str(snippet).split())))
        return found[:limit]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
