"""Lessons as the read side finds them: their files under ``<root>/diaries/lessons``.

A lesson gathers the diaries of one error signature (see :mod:`otel_diary.index.lessons`);
the readers find lessons by id, by signature, by words, and by the diaries they gather.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Protocol

from otel_diary.index.documents import MAX_DOCUMENT_BYTES
from otel_diary.index.query import fts_terms
from otel_diary.pipeline import KB_FOLDER, LESSON_ROOT
from otel_diary.pipeline.redact import redact
from otel_diary.pipeline.render import parse_front_matter, split_front_matter
from otel_diary.text import cut, inside, one_line, read_text

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


def _lesson_files(folder: Path, base: Path) -> list[tuple[str, os.stat_result]]:
    """The ``*.md`` files of ``folder`` (not its subfolders), sorted by name, with their
    ``stat``: none when ``folder`` leads out of ``base``, the knowledge base's folder
    (resolved), and a symbolic link only when it leads to a lesson-sized file inside."""
    if not inside(folder, base):
        return []
    found: list[tuple[str, os.stat_result]] = []
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(".md"):
            continue
        try:
            if entry.is_symlink() and not inside(Path(entry.path), base, strict=True):
                continue
            stat = entry.stat()
        except OSError:
            continue
        if S_ISREG(stat.st_mode) and stat.st_size <= MAX_DOCUMENT_BYTES:
            found.append((entry.name, stat))
    found.sort(key=lambda item: item[0])
    return found


def shown_snippet(snippet: str, body: str) -> str:
    """A full-text ``snippet`` of ``body`` (matches between ``\\x02`` and ``\\x03``) fit to
    show: matches in ``**``, or, when the lines it was cut from hold a secret, those lines
    redacted, unmarked. A lesson an older otel-diary grew may hold a key the redactor has
    learnt since; cut inside the key, or with a match marked inside it, the snippet alone
    no longer shows the redactor a key, and part of it would be shown. Only the lines
    found are redacted: every lesson's words, at each search, would cost more than the
    search."""
    plain = snippet.replace("\x02", "").replace("\x03", "")
    core = plain.strip("…")
    at = body.find(core)
    if at < 0:  # never seen: the lesson's start instead, far from where it is cut
        return cut(redact(body[:2 * _AROUND]), len(plain) + 40)
    start = max(body.rfind("\n", 0, at) + 1, at - _AROUND)
    end = body.find("\n", at + len(core))
    end = min(len(body) if end < 0 else end, at + len(core) + _AROUND)
    lines = body[start:end]
    shown = redact(lines)
    if shown == lines:
        return snippet.replace("\x02", "**").replace("\x03", "**")
    # From about where the snippet started (redaction moved it by a few characters).
    begin = shown.rfind(" ", 0, max(at - start - len(lines) + len(shown), 0)) + 1
    return ("…" if begin else "") + cut(shown[begin:], len(plain) + 40)


_AROUND = 1024
"""Characters read around a snippet, at most, to the lines it was cut from: longer than
any key the redactor knows."""


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
        """Path -> text of every lesson-sized file, rereading those that changed.

        Lessons are written flat in their folder: one directory read and one ``stat`` per
        file when nothing changed (a reader asks on every search)."""
        texts: dict[str, tuple[tuple[int, int], str]] = {}
        prefix = f"{LESSON_ROOT}/"
        for name, stat in _lesson_files(self._folder, self._base):
            path = prefix + name
            stamp = (stat.st_mtime_ns, stat.st_size)
            known = self._texts.get(path)
            if known is None or known[0] != stamp:
                try:
                    known = (stamp, read_text(self._folder / name, "replace", within=self._base,
                                              max_bytes=MAX_DOCUMENT_BYTES))
                except OSError:
                    continue
                self._parsed.pop(path, None)
                self._searchable = None
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

    def _table(self, texts: dict[str, str]) -> sqlite3.Connection:
        """The full-text table of ``texts`` (the lessons' title, markdown and front matter),
        built on first use and again when a lesson changed; rowid: ``_searchable`` index."""
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
        return self._db

    def gathering(self, diaries: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]:
        """The lessons gathering any of ``diaries`` (ids), each with the first of them it
        gathers, in the order of ``diaries``: found by their front matter's words."""
        phrases = [terms[0] for terms in map(fts_terms, diaries) if len(terms) == 1]
        if not phrases:
            return []
        order: dict[str, int] = {}
        for n, ident in enumerate(diaries):
            order.setdefault(ident, n)
        firsts: list[tuple[int, KnownLesson]] = []
        with self._lock:
            texts = self._refresh()
            if not texts:
                return []
            db, paths = self._table(texts), self._searchable or []
            for (row,) in db.execute("SELECT rowid FROM lessons WHERE lessons MATCH ?",
                                     (f"meta : ({' OR '.join(phrases)})",)):
                lesson = self._parse(paths[row])
                if lesson is not None and not order.keys().isdisjoint(lesson.evidence):
                    firsts.append((min(order[i] for i in lesson.evidence if i in order),
                                   lesson))
        firsts.sort(key=lambda pair: pair[0])
        found: dict[str, tuple[KnownLesson, str]] = {}
        for n, lesson in firsts:
            found.setdefault(lesson.id, (lesson, diaries[n]))
        return list(found.values())[:limit]

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[KnownLesson, str]]:
        """Lessons with every term (the index's tokenizer and stemming), best first, each
        with a snippet."""
        if not terms:
            return []
        with self._lock:
            texts = self._refresh()
            if not texts:
                return []
            db, paths = self._table(texts), self._searchable or []
            rows = db.execute(
                "SELECT rowid, snippet(lessons, 1, char(2), char(3), '…', 16) FROM lessons "
                "WHERE lessons MATCH ? ORDER BY bm25(lessons, 10.0, 1.0, 1.0) LIMIT ?",
                (" AND ".join(terms), 2 * limit)).fetchall()
            found: list[tuple[KnownLesson, str]] = []
            seen: set[str] = set()
            for row, snippet in rows:
                lesson = self._parse(paths[row])
                if lesson is not None and lesson.id not in seen:
                    seen.add(lesson.id)
                    shown = shown_snippet(str(snippet), split_front_matter(texts[paths[row]])[1])
                    found.append((lesson, " ".join(shown.split())))
        return found[:limit]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
