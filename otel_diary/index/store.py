"""The local knowledge index: diary documents in -> full-text search, lookups, related ids.

An embedded SQLite database with FTS5 beside the diary folder (``<root>/index.sqlite3``).
The folder is the source of truth: the index is updated as each diary is written and is
rebuilt from the folder on demand (``otel-diary reindex``) or when it is missing. WAL mode,
one connection per thread and one short transaction per diary, so the worker writing and
a reader searching do not wait on each other. A forked child opens its own connections
and leaves the inherited ones alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from otel_diary.fork import renew_after_fork
from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.render import (
    DIARY_ROOT,
    Diary,
    diary_id,
    error_encountered,
    one_line,
    parse_front_matter,
)
from otel_diary.sinks.folder import DiaryError, FolderSink, log_unwritable, unwritable

if TYPE_CHECKING:
    from otel_diary.pipeline.core import Pipeline, Stats

logger = logging.getLogger("otel_diary")

INDEX_FILE = "index.sqlite3"
"""The index's file name under the knowledge-base root."""
SCHEMA_VERSION = 1
MAX_SIGNATURES = 32
MAX_QUERY_TERMS = 32
MAX_DOCUMENT_BYTES = 1024 * 1024
"""Files in the diary folder larger than this are not diaries and are not indexed."""
MAX_RELATED = 5
_CANDIDATES = 50

Match = Literal["all", "any", "recent"]
"""How a search matched: every word, any word (when no diary had every word), or no words
to match (the newest diaries)."""


class IndexUnavailable(DiaryError):
    """The index database cannot be opened or read (missing folder, damage, locking)."""


class SearchError(DiaryError):
    """A search the index cannot run, with a message meant for the person who typed it."""


# -- error signatures ----------------------------------------------------------------------

_CODE = re.compile(r"(?<![\w.-])([A-Z]{1,4}\d{3,5})(?![\w-])")
"""Compiler and linter codes: TS2345, CS0103, C2065, E0308, F401."""
_EXCEPTION = re.compile(
    r"(?<![\w.])(?:[A-Za-z_]\w*\.)*([A-Z][A-Za-z0-9]*?(?:Error|Exception|Failure|Fault))\b")
"""Exception class names, qualified or not: ValueError, java.lang.NullPointerException."""
_PYTEST_ID = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py::[^\s]+)")
"""pytest node ids: tests/test_x.py::test_y, tests/test_x.py::TestX::test_y[case]."""
_FAIL_LINE = re.compile(r"(?:^|\s)(?:---\s+)?(?:FAIL|FAILED|ERROR)(?::|\s)\s*([^\s(]+)",
                        re.MULTILINE)
"""``FAIL: test_name``, ``--- FAIL: TestName``, ``FAILED path::test``, ``FAIL src/x.test.ts``."""
_TESTLIKE = re.compile(r"test|spec|::", re.IGNORECASE)


def error_signatures(text: str) -> tuple[str, ...]:
    """What identifies an error in ``text``: ``code:…``, ``exception:…`` and ``test:…`` keys.

    Two diaries sharing a key met the same error, whatever else their output says.
    """
    found: dict[str, None] = {}
    for match in _CODE.finditer(text):
        found[f"code:{match.group(1)}"] = None
    for match in _EXCEPTION.finditer(text):
        found[f"exception:{match.group(1)}"] = None
    for match in _PYTEST_ID.finditer(text):
        found[f"test:{match.group(1).rstrip(':,.;')}"] = None
    for match in _FAIL_LINE.finditer(text):
        name = match.group(1).rstrip(":,.;")
        if _TESTLIKE.search(name):
            found[f"test:{name}"] = None
    return tuple(found)[:MAX_SIGNATURES]


def run_signatures(run: TaskRun) -> tuple[str, ...]:
    """The error signatures of a run, read from what its diary's "Error encountered" says."""
    if run.outcome != "recovered":
        return ()
    return error_signatures(error_encountered(run))


# -- documents -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One diary as the index keeps it; built from the document text alone."""

    id: str
    path: str
    title: str
    agent: str
    task: str
    outcome: str
    trigger: str | None
    workflow: str | None
    trace_id: str
    span_id: str
    created: str
    body: str
    meta: str
    summary: str
    signatures: tuple[str, ...]


def sections(body: str) -> dict[str, str]:
    """The ``## `` sections of a diary body by heading; headings inside fences don't count."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    fence = ""
    for line in body.split("\n"):
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped == fence[0] * len(stripped):
                fence = ""
        else:
            opening = re.match(r"(`{3,}|~{3,})", line)
            if opening:
                fence = opening.group(1)
            elif line.startswith("## "):
                current = found.setdefault(line[3:].strip(), [])
                continue
        if current is not None:
            current.append(line)
    return {heading: "\n".join(lines).strip() for heading, lines in found.items()}


def _text(value: object) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, datetime):
        value = value.isoformat()
    text = one_line(str(value), 2000)
    return text or None


def entry_from_document(path: str, content: str) -> Entry:
    """The index entry of the diary document ``content`` stored at ``path`` (relative).

    Raises ``ValueError`` when ``content`` is not a diary.
    """
    return entry_from_parts(path, parse_front_matter(content), content)


def entry_from_parts(path: str, front: Mapping[str, Any], content: str) -> Entry:
    """The index entry of a diary from its front matter (as parsed) and its document text.

    A freshly rendered diary passes its own ``front_matter``: no YAML is parsed again.
    """
    ident = _text(front.get("id"))
    if ident is None:
        raise ValueError("document has no id")
    if front.get("source_type", "diary") != "diary":
        raise ValueError("document is not a diary")
    body = content[content.find("\n---\n", 3) + 5:].lstrip("\n")
    parts = sections(body)
    tags = front.get("tags")
    tag_list = [str(tag) for tag in tags] if isinstance(tags, list) else []
    fields = {key: _text(front.get(key)) for key in (
        "title", "agent", "task", "outcome", "trigger", "workflow", "trace_id", "span_id",
        "created", "route", "model")}
    meta = " ".join(text for text in [*tag_list, *fields.values()] if text)
    return Entry(
        id=ident,
        path=path,
        title=fields["title"] or "",
        agent=fields["agent"] or "",
        task=fields["task"] or "",
        outcome=fields["outcome"] or "",
        trigger=fields["trigger"],
        workflow=fields["workflow"],
        trace_id=(fields["trace_id"] or "").lower(),
        span_id=(fields["span_id"] or "").lower(),
        created=fields["created"] or "",
        body=body,
        meta=meta,
        summary=one_line(parts.get("What was learned", ""), 300),
        signatures=error_signatures(parts.get("Error encountered", "")),
    )


# -- queries -------------------------------------------------------------------------------

_QUERY_PART = re.compile(r'"([^"]*)"?|([^\s"]+)')
_WORD = re.compile(r"\w+")
_SEPARATORS = re.compile(r"[()\[\]{}<>,;!?'`]+")
_HAS_ALNUM = re.compile(r"[^\W_]")
_QUERY_ERRORS = ("fts5", "syntax error", "no such column", "unterminated", "special query")


def _quoted(words: Sequence[str]) -> str:
    return '"' + " ".join(words) + '"'


def fts_terms(query: str) -> list[str]:
    """``query`` as FTS5 terms that can never be a syntax error.

    Words are matched as words; ``"a phrase"`` as a phrase; ``word*`` as a prefix. FTS5
    operators (``AND``, ``OR``, ``NOT``, ``NEAR``, ``:``, ``^``, parentheses) are plain text.
    """
    terms: list[str] = []
    for match in _QUERY_PART.finditer(query):
        phrase, bare = match.group(1), match.group(2)
        # Inside a bare token, words joined by "." "/" ":" "-" stay a phrase (a file, a
        # test id); brackets and sentence punctuation separate words.
        pieces = [phrase] if phrase is not None else _SEPARATORS.split(bare)
        for piece in pieces:
            words = [w for w in _WORD.findall(piece) if _HAS_ALNUM.search(w)]
            if not words:
                continue
            term = _quoted(words)
            if phrase is None and len(words) == 1 and piece.endswith("*"):
                term += "*"
            if term not in terms:
                terms.append(term)
            if len(terms) >= MAX_QUERY_TERMS:
                return terms
    return terms


@dataclass(frozen=True)
class Hit:
    """One indexed diary, with its rank and a snippet when it came from a search."""

    id: str
    path: str
    title: str
    agent: str
    task: str
    outcome: str
    trigger: str | None
    created: str
    trace_id: str
    span_id: str
    summary: str
    score: float = 0.0
    snippet: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


@dataclass(frozen=True)
class SearchResult:
    """Ranked hits, best first, and how the query matched them."""

    hits: list[Hit]
    match: Match
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild found in the folder."""

    indexed: int
    skipped: int


_HIT_COLUMNS = ("d.id, d.path, d.title, d.agent, d.task, d.outcome, d.task_trigger, d.created, "
                "d.trace_id, d.span_id, d.summary")

_SCHEMA = (
    """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE diaries (
        doc INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        path TEXT NOT NULL,
        title TEXT NOT NULL,
        agent TEXT NOT NULL,
        task TEXT NOT NULL,
        outcome TEXT NOT NULL,
        task_trigger TEXT,
        workflow TEXT,
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        created TEXT NOT NULL,
        summary TEXT NOT NULL
    )""",
    "CREATE INDEX diaries_path ON diaries (path)",
    "CREATE INDEX diaries_trace ON diaries (trace_id)",
    "CREATE INDEX diaries_task ON diaries (task, created)",
    "CREATE INDEX diaries_trigger ON diaries (task_trigger, created)",
    "CREATE INDEX diaries_created ON diaries (created)",
    """CREATE TABLE signatures (
        signature TEXT NOT NULL,
        doc INTEGER NOT NULL,
        PRIMARY KEY (signature, doc)
    ) WITHOUT ROWID""",
    "CREATE INDEX signatures_doc ON signatures (doc)",
    """CREATE VIRTUAL TABLE diaries_fts USING fts5 (
        title, body, meta, tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
)
_TABLES = ("diaries_fts", "signatures", "diaries", "meta")


def created_stamp(end_ns: int) -> str:
    """``end_ns`` in the diaries' ``created`` format (UTC, milliseconds), for comparisons."""
    seconds, nanos = divmod(max(end_ns, 0), 1_000_000_000)
    try:
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        moment = datetime(9999, 12, 31, tzinfo=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1_000_000:03d}Z"


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _busy(exc: sqlite3.OperationalError) -> bool:
    """True for SQLite's "database is locked" / "busy": another connection is writing."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


@contextlib.contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once so that it never fails half-way on a lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class DiaryIndex:
    """The full-text index of the diaries under ``root``; safe to share between threads.

    Usage::

        index = DiaryIndex(root)
        for hit in index.search("TS2345", outcome="recovered").hits:
            print(hit.title, hit.path)
        index.close()
    """

    def __init__(self, root: str | os.PathLike[str], *,
                 path: str | os.PathLike[str] | None = None,
                 busy_timeout_s: float = 10.0) -> None:
        self.root = Path(root)
        self.path = Path(path) if path is not None else self.root / INDEX_FILE
        self.folder = self.root / DIARY_ROOT
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._abandoned: list[sqlite3.Connection] = []
        renew_after_fork(self)

    def _after_fork_in_child(self) -> None:
        """SQLite connections must not cross a fork: the child opens its own. The inherited
        ones are kept (never used, never closed: closing could end the parent's WAL)."""
        self._abandoned.extend(self._connections)
        self._connections = []
        self._local = threading.local()
        self._lock = threading.Lock()

    # -- connections -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection to the database file at ``path`` now, ready to use."""
        state: tuple[sqlite3.Connection, tuple[int, int] | None] | None = getattr(
            self._local, "state", None)
        if state is not None:
            conn, identity = state
            if identity is not None and identity == _identity(self.path):
                return conn
            # The file was deleted or replaced (reindex after damage). Closing the old
            # connection would make SQLite delete "<path>-wal" by name, which now belongs
            # to the new file; it is left open instead (one per replacement).
            with self._lock:
                self._connections.remove(conn)
                self._abandoned.append(conn)
            self._local.state = None
        conn = self._open()
        self._local.state = (conn, _identity(self.path))
        with self._lock:
            self._connections.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                # Left behind by a deleted database; a new one must not replay them.
                for suffix in ("-wal", "-shm", "-journal"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{suffix}")
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s,
                                   isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise IndexUnavailable(f"cannot open the index {self.path}: {exc}") from exc
        # Switching to WAL needs a moment alone with the file: while another connection
        # creates the database SQLite answers "locked" at once, without waiting. Retry.
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._ensure_schema(conn)
                return conn
            except sqlite3.OperationalError as exc:
                if _busy(exc) and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                conn.close()
                raise IndexUnavailable(f"the index {self.path} is unreadable ({exc}); "
                                       "run `otel-diary reindex`") from exc
            except sqlite3.Error as exc:
                conn.close()
                raise IndexUnavailable(f"the index {self.path} is unreadable ({exc}); "
                                       "run `otel-diary reindex`") from exc

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        with _write(conn):
            if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                return
            for table in _TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _ready(self) -> sqlite3.Connection:
        """A connection to an index that holds the folder: a new database is filled first."""
        conn = self._connection()
        filled: object = getattr(self._local, "filled", None)
        if filled is conn:
            return conn
        if conn.execute("SELECT 1 FROM meta WHERE key = 'filled'").fetchone() is None:
            entries, _ = self.scan()
            with _write(conn):
                if conn.execute("SELECT 1 FROM meta WHERE key = 'filled'").fetchone() is None:
                    self._replace_all(conn, entries)
        self._local.filled = conn
        return conn

    def close(self) -> None:
        """Close every connection this index opened (in any thread)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()

    def __enter__(self) -> DiaryIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------

    def scan(self) -> tuple[list[Entry], int]:
        """Every diary in the folder (sorted by path, first of a duplicate id wins), and how
        many files were skipped as not being diaries."""
        entries: list[Entry] = []
        seen: set[str] = set()
        skipped = 0
        if not self.folder.is_dir():
            return entries, skipped
        for file in sorted(self.folder.rglob("*.md")):
            try:
                if not file.is_file() or file.stat().st_size > MAX_DOCUMENT_BYTES:
                    skipped += 1
                    continue
                content = file.read_text(encoding="utf-8", errors="replace")
                entry = entry_from_document(file.relative_to(self.root).as_posix(), content)
            except (OSError, ValueError, TypeError):
                skipped += 1
                continue
            if entry.id in seen:
                skipped += 1
                continue
            seen.add(entry.id)
            entries.append(entry)
        return entries, skipped

    def add(self, entry: Entry) -> None:
        """Index (or re-index) one diary; it replaces any entry with its id or its path."""
        try:
            conn = self._ready()
            with _write(conn):
                stale = conn.execute("SELECT doc FROM diaries WHERE id = ? OR path = ?",
                                     (entry.id, entry.path)).fetchall()
                for (doc,) in stale:
                    self._delete(conn, doc)
                self._insert(conn, entry)
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot write to the index {self.path}: {exc}") from exc

    def add_document(self, path: str, content: str) -> Entry:
        """Index the diary ``content`` stored at ``path`` (relative to the root)."""
        entry = entry_from_document(path, content)
        self.add(entry)
        return entry

    def rebuild(self) -> RebuildReport:
        """Replace the index with what the folder holds; a damaged database is recreated."""
        entries, skipped = self.scan()
        try:
            conn = self._connection()
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            with _write(conn):
                self._replace_all(conn, entries)
        except (IndexUnavailable, sqlite3.DatabaseError) as exc:
            logger.warning("otel-diary: recreating the damaged index %s (%s)", self.path, exc)
            self._discard()
            try:
                conn = self._connection()
                with _write(conn):
                    self._replace_all(conn, entries)
            except sqlite3.Error as again:
                raise IndexUnavailable(f"cannot rebuild the index {self.path}: {again}") \
                    from again
        self._local.filled = conn
        return RebuildReport(indexed=len(entries), skipped=skipped)

    def _discard(self) -> None:
        """Delete the database files (after damage); other processes reconnect by themselves."""
        state = getattr(self._local, "state", None)
        if state is not None:
            with self._lock:
                if state[0] in self._connections:
                    self._connections.remove(state[0])
            with contextlib.suppress(sqlite3.Error):
                state[0].close()
            self._local.state = None
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    @staticmethod
    def _replace_all(conn: sqlite3.Connection, entries: Sequence[Entry]) -> None:
        for table in _TABLES:
            conn.execute(f"DELETE FROM {table}")
        for entry in entries:
            DiaryIndex._insert(conn, entry)
        conn.execute("INSERT INTO meta (key, value) VALUES ('filled', '1')")

    @staticmethod
    def _delete(conn: sqlite3.Connection, doc: int) -> None:
        conn.execute("DELETE FROM diaries WHERE doc = ?", (doc,))
        conn.execute("DELETE FROM diaries_fts WHERE rowid = ?", (doc,))
        conn.execute("DELETE FROM signatures WHERE doc = ?", (doc,))

    @staticmethod
    def _insert(conn: sqlite3.Connection, entry: Entry) -> None:
        cursor = conn.execute(
            "INSERT INTO diaries (id, path, title, agent, task, outcome, task_trigger, "
            "workflow, trace_id, span_id, created, summary) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry.id, entry.path, entry.title, entry.agent, entry.task, entry.outcome,
             entry.trigger, entry.workflow, entry.trace_id, entry.span_id, entry.created,
             entry.summary))
        doc = cursor.lastrowid
        conn.execute("INSERT INTO diaries_fts (rowid, title, body, meta) VALUES (?, ?, ?, ?)",
                     (doc, entry.title, entry.body, entry.meta))
        conn.executemany("INSERT OR IGNORE INTO signatures (signature, doc) VALUES (?, ?)",
                         [(signature, doc) for signature in entry.signatures])

    # -- reading -----------------------------------------------------------------------

    def search(self, query: str = "", *, agent: str | None = None,
               outcome: str | None = None, task: str | None = None,
               since: str | None = None, limit: int = 10, raw: bool = False) -> SearchResult:
        """Diaries matching ``query`` and every filter, best first.

        Every word must match; when no diary has them all, diaries with any of them are
        ranked instead (``match == "any"``). With no words, the newest diaries matching the
        filters. ``raw`` passes ``query`` to FTS5 as written (syntax errors raise
        :class:`SearchError`). ``since`` is a ``created`` timestamp (UTC ISO 8601).
        """
        filters: list[str] = []
        params: list[object] = []
        for column, value in (("agent", agent), ("outcome", outcome), ("task", task)):
            if value is not None:
                filters.append(f"d.{column} = ?")
                params.append(value)
        if since is not None:
            filters.append("d.created >= ?")
            params.append(since)
        limit = max(1, min(int(limit), 1000))
        query = query.encode("utf-8", "replace").decode("utf-8").replace("\x00", " ")
        try:
            conn = self._ready()
            if raw:
                if not query.strip():
                    raise SearchError("an FTS5 query is needed with --fts")
                return SearchResult(self._match(conn, query, filters, params, limit), "all",
                                    (query,))
            terms = fts_terms(query)
            if not terms:
                if query.strip():
                    raise SearchError(f"the query {query!r} has no words to search for")
                return SearchResult(self._recent(conn, filters, params, limit), "recent")
            hits = self._match(conn, " AND ".join(terms), filters, params, limit)
            if hits or len(terms) == 1:
                return SearchResult(hits, "all", tuple(terms))
            return SearchResult(self._match(conn, " OR ".join(terms), filters, params, limit),
                                "any", tuple(terms))
        except sqlite3.OperationalError as exc:
            if raw and any(sign in str(exc) for sign in _QUERY_ERRORS):
                raise SearchError(f"invalid FTS5 query {query!r}: {exc}") from None
            raise IndexUnavailable(f"cannot read the index {self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot read the index {self.path} ({exc}); "
                                   "run `otel-diary reindex`") from exc

    @staticmethod
    def _match(conn: sqlite3.Connection, expression: str, filters: list[str],
               params: list[object], limit: int) -> list[Hit]:
        where = " AND ".join(["diaries_fts MATCH ?", *filters])
        # Snippets only for the hits kept: SQLite would make one for every match before
        # sorting. One read transaction, so both statements see the same index.
        conn.execute("BEGIN")
        try:
            rows = conn.execute(
                f"SELECT d.doc, {_HIT_COLUMNS}, bm25(diaries_fts, 10.0, 1.0, 3.0) AS score "
                "FROM diaries_fts JOIN diaries AS d ON d.doc = diaries_fts.rowid "
                f"WHERE {where} ORDER BY score, d.created DESC, d.id LIMIT ?",
                (expression, *params, limit)).fetchall()
            docs = [row[0] for row in rows]
            snippets = dict(conn.execute(
                "SELECT rowid, snippet(diaries_fts, -1, '**', '**', '…', 16) FROM diaries_fts "
                f"WHERE diaries_fts MATCH ? AND rowid IN ({', '.join('?' * len(docs))})",
                (expression, *docs)).fetchall()) if docs else {}
        finally:
            conn.execute("COMMIT")
        return [replace(Hit(*row[1:12]), score=-float(row[12]),
                        snippet=" ".join(str(snippets.get(row[0], "")).split()))
                for row in rows]

    @staticmethod
    def _recent(conn: sqlite3.Connection, filters: list[str], params: list[object],
                limit: int) -> list[Hit]:
        where = f"WHERE {' AND '.join(filters)}" if filters else ""
        rows = conn.execute(f"SELECT {_HIT_COLUMNS} FROM diaries AS d {where} "
                            "ORDER BY d.created DESC, d.id LIMIT ?",
                            (*params, limit)).fetchall()
        return [Hit(*row) for row in rows]

    def _lookup(self, column: str, value: str) -> list[Hit]:
        try:
            rows = self._ready().execute(
                f"SELECT {_HIT_COLUMNS} FROM diaries AS d WHERE d.{column} = ? "
                "ORDER BY d.created, d.path", (value,)).fetchall()
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot read the index {self.path} ({exc}); "
                                   "run `otel-diary reindex`") from exc
        return [Hit(*row) for row in rows]

    def by_trace(self, trace_id: str) -> list[Hit]:
        """The diaries written for task spans of one trace (32 hex digits), oldest first."""
        return self._lookup("trace_id", trace_id.strip().lower())

    def by_id(self, ident: str) -> Hit | None:
        """The diary with this id, if indexed."""
        found = self._lookup("id", ident.strip())
        return found[0] if found else None

    def count(self) -> int:
        """How many diaries are indexed."""
        try:
            return int(self._ready().execute("SELECT count(*) FROM diaries").fetchone()[0])
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot read the index {self.path}: {exc}") from exc

    def related(self, *, exclude: str, task: str | None, trigger: str | None,
                signatures: Sequence[str], before: str, limit: int = MAX_RELATED) -> list[str]:
        """Ids of up to ``limit`` diaries created no later than ``before`` that share an error
        signature, the task or the trigger (weighed in that order), newest first."""
        conn = self._ready()
        scores: dict[str, float] = {}
        created: dict[str, str] = {}

        def gather(sql: str, args: Sequence[object], weight: float) -> None:
            for ident, stamp, count in conn.execute(sql, (*args, exclude, before, _CANDIDATES)):
                scores[ident] = scores.get(ident, 0.0) + weight * count
                created[ident] = stamp

        common = "d.id != ? AND d.created <= ?"
        if task:
            gather("SELECT d.id, d.created, 1 FROM diaries AS d WHERE d.task = ? AND "
                   f"{common} ORDER BY d.created DESC LIMIT ?", (task,), 2.0)
        wanted = list(dict.fromkeys(signatures))[:MAX_SIGNATURES]
        if wanted:
            marks = ", ".join("?" * len(wanted))
            gather("SELECT d.id, d.created, count(*) FROM signatures AS s "
                   "JOIN diaries AS d ON d.doc = s.doc "
                   f"WHERE s.signature IN ({marks}) AND {common} GROUP BY d.doc "
                   "ORDER BY count(*) DESC, d.created DESC LIMIT ?", wanted, 3.0)
        if trigger:
            gather("SELECT d.id, d.created, 1 FROM diaries AS d WHERE d.task_trigger = ? AND "
                   f"{common} ORDER BY d.created DESC LIMIT ?", (trigger,), 1.0)
        ranked = sorted(scores)  # stable sorts: best score, then newest, then id
        ranked.sort(key=created.__getitem__, reverse=True)
        ranked.sort(key=scores.__getitem__, reverse=True)
        return ranked[:limit]


# -- pipeline stages -----------------------------------------------------------------------

class _Failures:
    """Counts index failures in ``stats.index_errors``; logs the first with its traceback,
    unless the folder itself cannot be written: that is one line, once (with the sink's)."""

    def __init__(self, stats: Stats | None, root: Path) -> None:
        self._stats = stats
        self._root = root
        self._logged = False

    def __call__(self, message: str, *args: object) -> None:
        if self._stats is not None:
            self._stats.index_errors += 1
        folder = unwritable(self._root) if isinstance(sys.exc_info()[1], IndexUnavailable) \
            else None
        if folder is not None:
            log_unwritable(folder)
        elif self._logged:
            logger.debug(message, *args, exc_info=True)
        else:
            self._logged = True
            logger.exception(message + " (further index errors are logged at debug)", *args)


class IndexListener:
    """A pipeline listener: indexes each diary the folder sink wrote. Never raises."""

    def __init__(self, index: DiaryIndex, folder: FolderSink, stats: Stats | None = None) -> None:
        self.index = index
        self._root = folder.root.resolve()
        self._failed = _Failures(stats, index.root)

    def __call__(self, diary: Diary, run: TaskRun, locations: Sequence[str]) -> None:
        try:
            for location in locations:
                path = Path(location)
                if path.is_absolute() and path.is_relative_to(self._root):
                    self.index.add(entry_from_parts(path.relative_to(self._root).as_posix(),
                                                    diary.front_matter, diary.content))
                    return
        except Exception:
            self._failed("otel-diary could not index diary %s; `otel-diary reindex` adds it",
                         diary.id)

    def close(self) -> None:
        self.index.close()


class IndexRelatedFinder:
    """A pipeline related-finder: earlier diaries sharing a run's task, trigger or error."""

    def __init__(self, index: DiaryIndex, stats: Stats | None = None,
                 limit: int = MAX_RELATED) -> None:
        self.index = index
        self.limit = limit
        self._failed = _Failures(stats, index.root)

    def __call__(self, run: TaskRun) -> list[str]:
        try:
            return self.index.related(
                exclude=diary_id(run.trace_id, run.span_id),
                task=one_line(run.task_id, 200) or run.span_id_hex,
                trigger=one_line(run.trigger, 200) if run.trigger else None,
                signatures=run_signatures(run),
                before=created_stamp(run.end_ns),
                limit=self.limit,
            )
        except Exception:
            self._failed("otel-diary could not look up related diaries for %s",
                         diary_id(run.trace_id, run.span_id))
            return []


def attach_index(pipeline: Pipeline) -> DiaryIndex | None:
    """Keep an index beside the pipeline's folder sink and fill "Related" from it.

    Does nothing when the pipeline has no :class:`FolderSink`. The database is opened (and,
    when new, filled from the folder) by the worker on the first diary, not here.
    """
    folder = next((sink for sink in pipeline.sinks if isinstance(sink, FolderSink)), None)
    if folder is None:
        return None
    index = DiaryIndex(folder.root)
    pipeline.listeners.append(IndexListener(index, folder, pipeline.stats))
    if pipeline.related_finder is None:
        pipeline.related_finder = IndexRelatedFinder(index, pipeline.stats)
    return index
