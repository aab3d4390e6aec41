"""The read side of a knowledge base: search, fetch and "has anyone seen this error?".

A :class:`KnowledgeBase` answers over ``<root>`` with plain data (frozen dataclasses),
for the MCP server and ``otel-diary context``. It never writes under ``<root>``: the index
is opened read-only, and when there is no index yet the diaries are scanned into a private
index in a temporary directory (rebuilt when the diary folder changes). Lessons
(``diaries/lessons/*.md``, ``source_type: lesson``) are read from their files and come
before diaries in every answer. Requests it cannot answer raise :class:`ReadError`.
"""

from __future__ import annotations

import errno
import json
import logging
import re
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from otel_diary.errors import IndexUnavailable, QuotingError, SearchError
from otel_diary.index.documents import (
    MAX_DOCUMENT_BYTES,
    entry_from_document,
    error_signatures,
    redacted,
    redacted_document,
    template_signature,
)
from otel_diary.index.query import Hit, Match, fts_terms
from otel_diary.index.schema import SCHEMA_VERSION, prepare
from otel_diary.index.store import INDEX_FILE, DiaryIndex
from otel_diary.index.templates import first_error_line
from otel_diary.pipeline import DIARY_ROOT, KB_FOLDER
from otel_diary.pipeline.redact import redact
from otel_diary.pipeline.render import parse_front_matter, split_front_matter
from otel_diary.readers.lessons import KnownLesson, LessonFiles, LessonSource, heading, plain_text
from otel_diary.text import encodable, one_line, read_text

MAX_LIMIT = 50
MAX_QUERY_CHARS = 2_000
MAX_ERROR_CHARS = 64_000
MAX_ID_CHARS = 1_000
logger = logging.getLogger("otel_diary")
_T = TypeVar("_T")
_ERRORISH = re.compile(r"error|exception|fail|fatal|panic|traceback", re.IGNORECASE)
_PLAIN_WORD = re.compile(r"[^\W\d_]{3,}")
_GENERIC = frozenset({"error", "errors", "err", "fail", "failed", "failure", "failures",
                      "failing", "build"})
"""Words of an error line every diary of a failure has ("error", "failed", "build"): the
text match of a lesson leaves them out (``error CS0103`` is its code alone)."""

Kind = Literal["lesson", "diary"]


class ReadError(QuotingError):
    """A request the knowledge base cannot answer, with a message for whoever asked."""


@dataclass(frozen=True, kw_only=True)
class Found:
    """One lesson or diary in an answer, best first."""

    id: str
    kind: Kind
    title: str
    path: str
    outcome: str
    agent: str
    task: str
    created: str
    snippet: str
    matched: list[str] = field(default_factory=list)
    """What matched it: error signatures (``code:TS2345``), ``text``, or for a lesson listed
    for a diary a search found, that diary's id."""
    learned: str = ""
    """A diary's "What was learned", its start; a lesson's most voted rule of "What
    worked" (empty when it has none)."""


@dataclass(frozen=True, kw_only=True)
class SearchAnswer:
    """Ranked lessons and diaries for a query."""

    query: str
    match: Match | Literal["none"]
    """Every word matched, some words (no document had them all), no words given
    (``recent``: the newest), or nothing found (``none``), as ``search --json`` says."""
    results: list[Found]


@dataclass(frozen=True, kw_only=True)
class Document:
    """A whole lesson or diary document: its front matter and markdown body."""

    id: str
    kind: Kind
    path: str
    uri: str
    title: str
    front_matter: dict[str, Any]
    body: str
    content: str


@dataclass(frozen=True, kw_only=True)
class LessonsAnswer:
    """What the knowledge base knows about an error: lessons first, then diaries."""

    signatures: list[str]
    template: str = ""
    """The ``template:…`` signature of its first error line; looked up when the error has
    no precise signature (no code, exception name or failing test)."""
    first_line: str
    """The error line the full-text match used (the first line that looks like an error)."""
    results: list[Found]


def error_line(error: str) -> str:
    """The first line of ``error`` that reads as an error, as a lesson records it (a Go
    ``undefined:``, a traceback's exception); past the lines that reads, the first that
    looks like one; else its first non-blank line."""
    found = first_error_line(error)
    if found:
        return one_line(found, 500)
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    for line in lines:
        if _ERRORISH.search(line) and not line.lower().startswith("traceback"):
            return one_line(line, 500)
    return one_line(lines[0], 500) if lines else ""


def _plain_json(value: Any) -> Any:
    """Front-matter values as JSON has them (YAML dates become strings)."""
    return json.loads(json.dumps(value, default=str))


def shown_hit(hit: Hit) -> Hit:
    """``hit`` with its words redacted (see :func:`redacted`)."""
    return replace(hit, title=redact(hit.title), agent=redact(hit.agent),
                   task=redact(hit.task), summary=redact(hit.summary),
                   snippet=redact(hit.snippet))


def _bounded(text: str, limit: int, what: str) -> str:
    if len(text) > limit:
        raise ReadError(f"{what} is {len(text):,} characters long; at most {limit:,} are read")
    return encodable(text)


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ReadError(f"limit must be from 1 to {MAX_LIMIT}, not {limit}")
    return limit


def _found_lesson(lesson: KnownLesson, snippet: str = "", matched: Iterable[str] = ()) -> Found:
    return Found(id=lesson.id, kind="lesson", title=redact(lesson.title), path=lesson.path,
                 outcome="", agent="", task="", created=lesson.created,
                 snippet=redact(snippet), matched=list(matched),
                 learned=redact(lesson.worked))


def ranked_lessons(lessons: LessonSource, terms: Sequence[str], diaries: Sequence[str],
                   limit: int, since: str | None = None) -> list[Found]:
    """The lessons with every one of ``terms`` (updated ``since``), best first, then those
    gathering the diaries the search for them found (``diaries``, best first): at most
    ``limit`` of the first, and half of it of the others (one at least). No terms (the
    newest diaries listed): no lessons."""
    if not terms:
        return []
    found: dict[str, Found] = {}
    for lesson, snippet in lessons.search(terms, limit):
        if lesson.id not in found and (since is None or lesson.created >= since):
            found[lesson.id] = _found_lesson(lesson, snippet, ["text"])
    for lesson, diary in lessons.gathering(diaries, max(1, limit // 2)):
        if lesson.id not in found:  # each is built (and redacted) once
            found[lesson.id] = _found_lesson(lesson, "", [diary])
    return list(found.values())


def search_lessons(root: str | Path, query: str, limit: int = 10,
                   diaries: Sequence[str] = ()) -> list[Found]:
    """The lessons under ``root`` with every word of ``query``, then those gathering the
    diaries the search for it found (ids), best first (see :func:`ranked_lessons`)."""
    lessons = LessonFiles(Path(root))
    try:
        return ranked_lessons(lessons, fts_terms(query), diaries, limit)
    finally:
        lessons.close()


def _found_diary(hit: Hit, matched: Iterable[str] = ()) -> Found:
    hit = shown_hit(hit)
    return Found(id=hit.id, kind="diary", title=hit.title, path=hit.path, outcome=hit.outcome,
                 agent=hit.agent, task=hit.task, created=hit.created,
                 snippet=hit.snippet or hit.summary, matched=list(matched),
                 learned=hit.summary)


# -- the index, read-only ------------------------------------------------------------------

class ReadOnlyIndex(DiaryIndex):
    """A :class:`DiaryIndex` whose connections cannot write: the database is opened with
    ``mode=ro`` and ``query_only``. A database of another schema version is unavailable."""

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                   timeout=self._busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA query_only = ON")
            prepare(conn)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except (OSError, sqlite3.Error) as exc:
            raise IndexUnavailable(f"cannot open the index {self.path}: {exc}") from exc
        if version != SCHEMA_VERSION:
            conn.close()
            raise IndexUnavailable(f"the index {self.path} has schema version {version}; "
                                   "run `otel-diary reindex`")
        return conn


class _ScratchIndex:
    """A private index of the diary folder in a temporary directory, for a knowledge base
    without one; rebuilt when a diary directory changes (a file added, renamed, removed)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._tmp = Path(tempfile.mkdtemp(prefix="otel-diary-read-"))
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self.index = DiaryIndex(root, path=self._tmp / INDEX_FILE)

    def _folder_stamp(self) -> tuple[tuple[str, int], ...]:
        folder = self._root / DIARY_ROOT
        stamp: list[tuple[str, int]] = []
        for directory in [folder, *(sorted(p for p in folder.rglob("*") if p.is_dir())
                                    if folder.is_dir() else [])]:
            try:
                stamp.append((directory.as_posix(), directory.stat().st_mtime_ns))
            except OSError:
                continue
        return tuple(stamp)

    def current(self) -> DiaryIndex:
        with self._lock:
            stamp = self._folder_stamp()
            if stamp != self._stamp:
                self.index.rebuild()
                self._stamp = stamp
            return self.index

    def close(self) -> None:
        self.index.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


# -- the knowledge base --------------------------------------------------------------------

def document(asked: str, path: str, content: str) -> Document:
    """The diary or lesson ``content`` stored at ``path`` (asked for as ``asked``), its
    words redacted (see :func:`redacted` and :func:`redacted_document`)."""
    try:
        front = parse_front_matter(content)
    except ValueError:
        raise ReadError(f"{asked!r} is not a diary or lesson document") from None
    ident = plain_text(front.get("id"))
    kind = front.get("source_type", "diary")
    if not ident or kind not in ("diary", "lesson"):
        raise ReadError(f"{asked!r} is not a diary or lesson document")
    shown = redacted_document(front, content)[1]
    body = split_front_matter(shown)[1]
    return Document(id=ident, kind=kind, path=path, uri=f"diary://{ident}",
                    title=redact(plain_text(front.get("title"))) or heading(body),
                    front_matter=redacted(_plain_json(front)), body=body, content=shown)


class KnowledgeBase:
    """Read-only answers over the knowledge base at ``root``; safe to share between threads.

    Usage::

        with KnowledgeBase(root) as kb:
            for found in kb.lessons("error TS2345: Argument of type ...").results:
                print(found.kind, found.id, found.path)
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)
        """What it reads, for messages: the folder, or the store's host and database."""
        self._folder = (self.root / KB_FOLDER).resolve()
        self._lessons: LessonSource = LessonFiles(self.root)
        self._index = ReadOnlyIndex(self.root)
        self._scratch: _ScratchIndex | None = None
        self._lock = threading.Lock()
        self._warned = False

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._index.close()
        self._lessons.close()
        if self._scratch is not None:
            self._scratch.close()

    def _query(self, action: Callable[[DiaryIndex], _T]) -> _T:
        """``action`` on the app's index, or, when there is none or it cannot be read, on
        the private scan of the diary folder."""
        if (self.root / INDEX_FILE).exists():
            try:
                return action(self._index)
            except (IndexUnavailable, sqlite3.Error) as exc:
                log = logger.debug if self._warned else logger.warning
                self._warned = True
                log("otel-diary: reading the diary folder instead of the index (%s)", exc)
        with self._lock:
            if self._scratch is None:
                self._scratch = _ScratchIndex(self.root)
            scratch = self._scratch.current()
        try:
            return action(scratch)
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot search the diaries under {self.root}: {exc}") \
                from exc

    # -- search ------------------------------------------------------------------------

    def search(self, query: str = "", *, agent: str | None = None, outcome: str | None = None,
               since: str | None = None, limit: int = 10) -> SearchAnswer:
        """Lessons, then diaries, matching every word of ``query`` (or, when no document has
        them all, some of them); after the lessons with every word, those gathering the
        diaries found. Lessons are left out when ``agent`` or ``outcome`` filter."""
        query = _bounded(query, MAX_QUERY_CHARS, "the query")
        agent = None if agent is None else encodable(agent)
        since = None if since is None else encodable(since)
        limit = _limit(limit)
        try:
            result = self._query(lambda index: index.search(
                query, agent=agent, outcome=outcome, since=since, limit=limit))
        except SearchError as exc:
            raise ReadError(str(exc)) from None
        found: list[Found] = []
        if agent is None and outcome is None:
            found = ranked_lessons(self._lessons, fts_terms(query),
                                   [hit.id for hit in result.hits], limit, since)
        found += [_found_diary(hit, ["text"]) for hit in result.hits]
        return SearchAnswer(query=redact(query), match=result.match if found else "none",
                            results=found[:limit])

    # -- fetch -------------------------------------------------------------------------

    def fetch(self, ident: str) -> Document:
        """The whole document for a diary id (``kh-…``), a lesson id, or a document path
        inside ``<root>/diaries`` (relative to the root, or absolute)."""
        ident = _bounded(ident.strip(), MAX_ID_CHARS, "the id")
        if not ident or "\x00" in ident:
            raise ReadError("an id (kh-…), a lesson id or a diary path is needed")
        lesson = self._lessons.by_id(ident)
        if lesson is not None:
            return self._read(lesson.path)
        if not ident.endswith(".md"):
            hit = self._query(lambda index: index.by_id(ident))
            if hit is None:
                raise ReadError(f"no diary or lesson has the id {ident!r}")
            return self._read(hit.path)
        return self._read(ident)

    def _inside(self, path: str) -> Path:
        """``path`` resolved, refused unless it names a file under ``<root>/diaries``."""
        candidate = Path(path)
        try:
            file = (candidate if candidate.is_absolute() else self.root / candidate).resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of symbolic links
            raise ReadError(f"cannot read {path!r}: {exc}") from None
        if not file.is_relative_to(self._folder):
            raise ReadError(f"{path!r} is outside the knowledge base ({self._folder})")
        return file

    def _read(self, path: str) -> Document:
        file = self._inside(path)
        try:
            content = read_text(file, "replace", within=self._folder,
                                max_bytes=MAX_DOCUMENT_BYTES)
        except FileNotFoundError:
            raise ReadError(f"no document at {path!r} in the knowledge base") from None
        except OSError as exc:
            if exc.errno == errno.EFBIG:
                raise ReadError(f"{path!r} is larger than a diary can be") from None
            raise ReadError(f"cannot read {path!r}: {exc.strerror}") from None
        return document(path, file.relative_to(self.root.resolve()).as_posix(), content)

    # -- lessons -----------------------------------------------------------------------

    def lessons(self, error: str, *, limit: int = 10) -> LessonsAnswer:
        """What earlier runs learned about ``error`` (pasted error text or a stderr tail):
        lessons for its signatures, then lessons having every word of its first error line,
        then the lessons gathering the diaries below (filed under another signature, such as
        the exception name an earlier run's output had), diaries that met one of its
        signatures (most shared first, then newest), then diaries having every word of that
        line. An error with no precise signature is matched by the template of its first
        error line."""
        error = _bounded(error, MAX_ERROR_CHARS, "the error text")
        limit = _limit(limit)
        if not error.strip():
            raise ReadError("the error text is empty")
        error = redact(error)  # read as the diaries' tails were: redacted, then templated
        signatures = list(error_signatures(error))
        template = template_signature(error) or ""
        keys = signatures or ([template] if template else [])
        line = error_line(error)
        found: dict[str, Found] = {}
        words = " ".join(word for word in dict.fromkeys(_PLAIN_WORD.findall(line[:500]))
                         if word.lower() not in _GENERIC)
        for lesson, shared in self._lessons.by_signature(keys):
            if lesson.id not in found:  # each is built (and redacted) once
                found[lesson.id] = _found_lesson(lesson, "", shared)
        for lesson, snippet in self._lessons.search(fts_terms(words), limit):
            if lesson.id not in found:
                found[lesson.id] = _found_lesson(lesson, snippet, ["text"])
        by_signature, by_text = self._query(
            lambda index: self._error_diaries(index, keys, words, limit))
        for lesson, diary in self._lessons.gathering(
                [hit.id for hit in (*by_signature, *by_text)], max(1, limit // 2)):
            if lesson.id not in found:
                found[lesson.id] = _found_lesson(lesson, "", [diary])
        met = self._shared(by_signature, keys)
        for hit in by_signature:
            if hit.id not in found:
                found[hit.id] = _found_diary(hit, met[hit.id])
        for hit in by_text:
            if hit.id not in found:
                found[hit.id] = _found_diary(hit, ["text"])
        return LessonsAnswer(signatures=signatures, template=template, first_line=line,
                             results=list(found.values())[:limit])

    def _error_diaries(self, index: DiaryIndex, signatures: Sequence[str], words: str,
                       limit: int) -> tuple[list[Hit], list[Hit]]:
        """Diaries sharing a signature (most shared, then newest), and diaries having every
        word of the error line (digits and short words left out: they vary run to run)."""
        by_signature: list[Hit] = []
        if signatures:
            by_signature = self._by_ids(index, index.related(
                exclude="", task=None, trigger=None, signatures=signatures, before="9999",
                limit=limit))
        by_text: list[Hit] = []
        if words and len(by_signature) < limit:
            result = index.search(words, limit=limit)
            if result.match == "all":
                by_text = result.hits
        return by_signature, by_text

    @staticmethod
    def _by_ids(index: DiaryIndex, idents: Sequence[str]) -> list[Hit]:
        """The diaries of ``idents`` the index holds, in that order."""
        return [hit for hit in map(index.by_id, idents) if hit is not None]

    def _shared(self, hits: Sequence[Hit], signatures: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``hits``, the ``signatures`` its "Error encountered" has."""
        shared: dict[str, list[str]] = {}
        for hit in hits:
            try:
                file = self._inside(hit.path)
                own = entry_from_document(hit.path,
                                          read_text(file, within=self._folder)).signatures
            except (OSError, ValueError, ReadError):
                own = ()
            shared[hit.id] = [signature for signature in signatures if signature in own]
        return shared
