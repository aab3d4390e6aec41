"""The local knowledge index: diary documents in -> full-text search, lookups, related ids.

An embedded SQLite database with FTS5 beside the diary folder (``<root>/index.sqlite3``).
The folder is the source of truth: the index is updated as each diary is written and is
rebuilt from the folder on demand (``otel-diary reindex``) or when it is missing. WAL mode,
one connection per thread and short write transactions (a diary, or the diaries a worker
writes back to back: ``index.writing``), so the worker writing and a reader searching do
not wait on each other. A forked child opens its own connections and leaves the
inherited ones alone.
A search ranks at most ``RANKED`` matches, the most recently indexed; Related reads the
newest diaries of each error signature (schema and storage: ``index.schema``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from otel_diary.errors import IndexUnavailable, SearchError
from otel_diary.index.documents import (
    Entry,
    Unreadable,
    entry_from_document,
    scan_entries,
    unlisted_entries,
)
from otel_diary.index.query import (
    QUERY_ERRORS,
    Hit,
    SearchResult,
    agent_folder,
    any_terms,
    fts_terms,
)
from otel_diary.index.related import Candidates, keys
from otel_diary.index.related import related as find_related
from otel_diary.index.schema import (
    BULK_CACHE_KIB,
    CACHE_KIB,
    HIT_COLUMNS,
    INDEXES,
    INSERT_DIARY,
    INSERT_SIGNATURE,
    INSERT_TEXT,
    SCHEMA,
    SCHEMA_VERSION,
    TABLES,
    busy,
    checkpoint,
    diary_row,
    prepare,
    read,
    write,
)
from otel_diary.index.writing import Writer
from otel_diary.pipeline import DIARY_ROOT
from otel_diary.pipeline.core import MAX_RELATED
from otel_diary.runner import renew_after_fork

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("otel_diary")

INDEX_FILE = "index.sqlite3"
"""The index's file name under the knowledge-base root."""
RANKED = 1000
"""Most matches a search ranks: a query matching more diaries is ranked among the most
recently indexed of them (a rebuild indexes the folder oldest first), reaching further
back when its filters leave fewer hits than asked for."""


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild found in the folder."""

    indexed: int
    skipped: int
    entries: Sequence[Entry] = ()
    """The diaries indexed (the lessons are rebuilt from them: the folder is read once)."""


_CREATING = threading.Lock()


@contextlib.contextmanager
def _creating(folder: Path) -> Iterator[None]:
    """Held while an index file may be created in ``folder``: one opener at a time, in
    this process and across processes (a lock on the folder itself), so that none
    removes the log files another has just made beside a new database."""
    with _CREATING:
        if fcntl is None:  # no folder locks here: one process at a time is on the user
            yield
            return
        handle = os.open(folder, os.O_RDONLY)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            os.close(handle)  # releases the lock


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


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
                 busy_timeout_s: float = 10.0, ranked: int = RANKED) -> None:
        self.root = Path(root)
        self.path = Path(path) if path is not None else self.root / INDEX_FILE
        self.folder = self.root / DIARY_ROOT
        self._busy_timeout_s = busy_timeout_s
        self._ranked = max(1, ranked)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._abandoned: list[sqlite3.Connection] = []
        self._writer = Writer(busy_timeout_s, began=self._began, committed=self._committed)
        renew_after_fork(self)

    def _after_fork_in_child(self) -> None:
        """SQLite connections must not cross a fork: the child opens its own. The inherited
        ones are kept (never used, never closed: closing could end the parent's WAL)."""
        self._abandoned.extend(self._connections)
        self._connections = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._writer.renew()

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
            if self.path.exists():
                conn = self._connect()
            else:
                with _creating(self.path.parent):
                    if not self.path.exists():
                        # Left behind by a deleted database; a new one must not replay
                        # them (and no other opener has made them: it would hold the lock).
                        for suffix in ("-wal", "-shm", "-journal"):
                            with contextlib.suppress(FileNotFoundError):
                                os.unlink(f"{self.path}{suffix}")
                    conn = self._connect()  # the file exists from here on
        except (OSError, sqlite3.Error) as exc:
            raise IndexUnavailable(f"cannot open the index {self.path}: {exc}") from exc
        # Switching to WAL needs a moment alone with the file: while another connection
        # creates the database SQLite answers "locked" at once, without waiting. Retry.
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                prepare(conn)
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._ensure_schema(conn)
                return conn
            except sqlite3.OperationalError as exc:
                if busy(exc) and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                conn.close()
                raise IndexUnavailable(f"the index {self.path} is unreadable ({exc}); "
                                       "run `otel-diary reindex`") from exc
            except sqlite3.Error as exc:
                conn.close()
                raise IndexUnavailable(f"the index {self.path} is unreadable ({exc}); "
                                       "run `otel-diary reindex`") from exc

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None,
                               check_same_thread=False)

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
            # Pages a rebuild frees go back to the file system (see checkpoint). The mode
            # takes effect on a VACUUM, cheap once the tables of another version are gone.
            with write(conn):
                self._drop(conn)
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            with contextlib.suppress(sqlite3.OperationalError):
                conn.execute("VACUUM")
        with write(conn):
            if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                return
            # Another version (or an empty file): start again; _ready() fills it.
            self._drop(conn)
            for statement in (*SCHEMA, *INDEXES):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @staticmethod
    def _drop(conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        for table in TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("DROP VIEW IF EXISTS diaries_text")

    def _ready(self) -> sqlite3.Connection:
        """A connection to an index that holds the folder: a new database is filled first."""
        conn = self._connection()
        filled: object = getattr(self._local, "filled", None)
        if filled is conn:
            return conn
        if conn.execute("SELECT 1 FROM meta WHERE key = 'filled'").fetchone() is None:
            entries, _ = scan_entries(self.root, self.folder)
            with write(conn):
                if conn.execute("SELECT 1 FROM meta WHERE key = 'filled'").fetchone() is None:
                    self._replace_all(conn, entries)
            checkpoint(conn)
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

    def add(self, entry: Entry) -> None:
        """Index (or re-index) one diary; it replaces any entry with its id or its path.
        Between :meth:`hold` and :meth:`release` it joins this thread's held transaction."""
        try:
            conn = self._ready()
            self._writer.write(conn, lambda conn: self._replace(conn, entry))
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot write to the index {self.path}: {exc}") from exc

    def hold(self) -> None:
        """Until :meth:`release`, this thread's :meth:`add` calls share a transaction,
        committed at least every ``writing.HOLD_S`` seconds and as soon as another thread
        of this process waits to write: far cheaper than one each. This thread's reads see
        its entries at once, others once committed."""
        try:
            self._writer.hold()
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot write to the index {self.path}: {exc}") from exc

    def release(self) -> None:
        """Commit what this thread added since :meth:`hold`; ``IndexUnavailable`` when
        some of it could not be."""
        try:
            lost = self._writer.release()
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot write to the index {self.path}: {exc}") from exc
        if lost:
            raise IndexUnavailable(f"{lost} diaries were not written to the index "
                                   f"{self.path}")

    def _replace(self, conn: sqlite3.Connection, entry: Entry) -> None:
        stale = conn.execute("SELECT doc FROM diaries WHERE id = ? OR path = ?",
                             (entry.id, entry.path)).fetchall()
        candidates = self._candidates(conn)
        if stale:
            candidates.removed()
        for (doc,) in stale:
            self._delete(conn, doc)
        doc = self._insert(conn, entry)
        candidates.added(doc, entry.created, keys(entry.task, entry.trigger, entry.signatures))

    def _candidates(self, conn: sqlite3.Connection) -> Candidates:
        """The candidate lists for Related of ``conn``, this thread's connection now."""
        kept: tuple[sqlite3.Connection, Candidates] | None = getattr(
            self._local, "candidates", None)
        if kept is None or kept[0] is not conn:
            kept = self._local.candidates = (conn, Candidates())
        return kept[1]

    def _began(self, conn: sqlite3.Connection) -> None:
        self._candidates(conn).begin()

    def _committed(self, conn: sqlite3.Connection) -> None:
        """(A held transaction may commit on the connection this thread used before the
        database file was replaced: that one has no lists.)"""
        kept = getattr(self._local, "candidates", None)
        if kept is not None and kept[0] is conn:
            kept[1].commit()

    def add_document(self, path: str, content: str) -> Entry:
        """Index the diary ``content`` stored at ``path`` (relative to the root)."""
        entry = entry_from_document(path, content)
        self.add(entry)
        return entry

    def rebuild(self, unreadable: Unreadable | None = None) -> RebuildReport:
        """Replace the index with what the folder holds (and what an app indexed since it was
        read); a damaged database is recreated. ``IndexUnavailable`` for any other error
        (a writer locking it past the busy timeout, a full disk): the database stays as is."""
        entries, refused = scan_entries(self.root, self.folder, unreadable)
        try:
            conn = self._connection()
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            with write(conn):
                entries += unlisted_entries(self.root, self.folder, entries, refused, [
                    path for (path,) in conn.execute("SELECT path FROM diaries")])
                self._replace_all(conn, entries)
            checkpoint(conn)
        except (IndexUnavailable, sqlite3.DatabaseError) as exc:
            cause = exc.__cause__ if isinstance(exc, IndexUnavailable) else exc
            if type(cause) is not sqlite3.DatabaseError:  # SQLite's "corrupt", "not a database"
                held = isinstance(cause, sqlite3.OperationalError) and busy(cause)
                raise IndexUnavailable(f"cannot rebuild the index {self.path}: " + (
                    f"another connection is writing to it ({cause})" if held
                    else f"{cause}")) from exc
            logger.warning("otel-diary: recreating the damaged index %s (%s)", self.path, exc)
            try:
                self._discard()
            except OSError as error:
                raise IndexUnavailable(f"cannot recreate the index {self.path}: "
                                       f"{error}") from error
            try:
                conn = self._connection()
                with write(conn):
                    self._replace_all(conn, entries)
                checkpoint(conn)
            except sqlite3.Error as again:
                raise IndexUnavailable(f"cannot rebuild the index {self.path}: {again}") \
                    from again
        self._local.filled = conn
        return RebuildReport(indexed=len(entries), skipped=len(refused), entries=entries)

    def _discard(self) -> None:
        """Delete the database files (after damage); other processes reconnect by themselves."""
        state = getattr(self._local, "state", None)
        if state is not None:
            with self._lock:
                if state[0] in self._connections:
                    self._connections.remove(state[0])
            with contextlib.suppress(sqlite3.Error):
                state[0].close()
            self._local.state = self._local.candidates = None
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _replace_all(self, conn: sqlite3.Connection, entries: Sequence[Entry]) -> None:
        """Load ``entries`` in place of everything indexed, oldest first, as a bulk load:
        the secondary indexes are made after the rows, and the full-text index is merged
        into one segment at the end."""
        self._candidates(conn).removed()
        conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
        try:
            for statement in INDEXES:
                conn.execute(f"DROP INDEX IF EXISTS {statement.split(' ON ')[0].split()[-1]}")
            for table in TABLES[1:]:
                conn.execute(f"DELETE FROM {table}")
            conn.execute("INSERT INTO diaries_fts (diaries_fts) VALUES ('delete-all')")
            ordered = sorted(entries, key=lambda entry: (entry.created, entry.path))
            conn.executemany(INSERT_DIARY, (diary_row(doc, entry)
                                             for doc, entry in enumerate(ordered, 1)))
            conn.executemany(INSERT_TEXT, ((doc, entry.title, entry.body, entry.meta)
                                            for doc, entry in enumerate(ordered, 1)))
            conn.executemany(INSERT_SIGNATURE, (
                (signature, entry.created, doc)
                for doc, entry in enumerate(ordered, 1) for signature in entry.signatures))
            for statement in INDEXES:
                conn.execute(statement)
            conn.execute("INSERT INTO diaries_fts (diaries_fts) VALUES ('optimize')")
            conn.execute("INSERT INTO meta (key, value) VALUES ('filled', '1')")
        finally:
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")

    @staticmethod
    def _delete(conn: sqlite3.Connection, doc: int) -> None:
        # The full-text table is told what it indexed for the diary, from the diary's row.
        conn.execute("INSERT INTO diaries_fts (diaries_fts, rowid, title, body, meta) "
                     "SELECT 'delete', doc, title, body, meta FROM diaries_text WHERE doc = ?",
                     (doc,))
        conn.execute("DELETE FROM diaries WHERE doc = ?", (doc,))
        conn.execute("DELETE FROM signatures WHERE doc = ?", (doc,))

    @staticmethod
    def _insert(conn: sqlite3.Connection, entry: Entry) -> int:
        doc = conn.execute(INSERT_DIARY, diary_row(None, entry)).lastrowid
        assert doc is not None
        conn.execute(INSERT_TEXT, (doc, entry.title, entry.body, entry.meta))
        conn.executemany(INSERT_SIGNATURE,
                         [(signature, entry.created, doc) for signature in entry.signatures])
        return doc

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
        if agent is not None:  # its name or its folder, in any case (LIKE ignores it)
            filters.append("(d.agent = ? COLLATE NOCASE OR d.path LIKE ? ESCAPE '\\')")
            params += (agent, agent_folder(agent))
        if outcome is not None:
            filters.append("d.outcome = ?")
            params.append(outcome)
        if task is not None:
            filters.append("d.task = ?")  # as written: its index finds it at once
            params.append(task)
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
            return SearchResult(self._match(conn, " OR ".join(any_terms(terms)), filters,
                                            params, limit), "any", tuple(terms))
        except sqlite3.OperationalError as exc:
            if raw and any(sign in str(exc) for sign in QUERY_ERRORS):
                raise SearchError(f"invalid FTS5 query {query!r}: {exc}") from None
            raise IndexUnavailable(f"cannot read the index {self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            raise IndexUnavailable(f"cannot read the index {self.path} ({exc}); "
                                   "run `otel-diary reindex`") from exc

    def _match(self, conn: sqlite3.Connection, expression: str, filters: list[str],
               params: list[object], limit: int) -> list[Hit]:
        where = " AND ".join(["diaries_fts MATCH ?", *filters])
        with read(conn):
            # The most recently indexed matches (``ranked`` of them), further back while
            # the filters leave fewer hits than asked for.
            window = self._ranked
            if not filters:  # one statement: the window's matches, scored and ranked
                ranked = conn.execute(
                    "SELECT d.doc, m.score FROM (SELECT rowid, bm25(diaries_fts, 10.0, 1.0, "
                    "3.0) AS score FROM diaries_fts WHERE diaries_fts MATCH ? "
                    "ORDER BY rowid DESC LIMIT ?) AS m CROSS JOIN diaries AS d ON d.doc = "
                    "m.rowid ORDER BY m.score, d.created DESC, d.id LIMIT ?",
                    (expression, window, limit)).fetchall()
            else:  # the window's bound first, so that only the matches kept are scored
                while True:
                    bound = conn.execute(
                        "SELECT rowid FROM diaries_fts WHERE diaries_fts MATCH ? "
                        "ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                        (expression, window - 1)).fetchone()
                    ranked = conn.execute(
                        "SELECT d.doc, bm25(diaries_fts, 10.0, 1.0, 3.0) AS score "
                        "FROM diaries_fts CROSS JOIN diaries AS d ON d.doc = diaries_fts.rowid "
                        f"WHERE {where} AND diaries_fts.rowid >= ? "
                        "ORDER BY score, d.created DESC, d.id LIMIT ?",
                        (expression, *params, bound[0] if bound else 0, limit)).fetchall()
                    if bound is None or len(ranked) >= limit:
                        break
                    window *= 4
            docs = [row[0] for row in ranked]
            marks = ", ".join("?" * len(docs))
            # Columns and snippets only for the hits kept. FTS5 answers ``rowid IN`` by
            # evaluating the query once per hit, which for a prefix merges every term it
            # names each time; one pass over the rowid range between the first and the last
            # hit evaluates it once. That range holds at most ``ranked`` matches when the
            # hits are among the first window's; further back, only a prefix is worth it.
            rows = {row[0]: row[1:] for row in conn.execute(
                f"SELECT d.doc, {HIT_COLUMNS} FROM diaries AS d WHERE d.doc IN ({marks})",
                docs)} if docs else {}
            snippets: dict[int, str] = {}
            if docs:
                among, bounds = (("rowid >= ? AND rowid <= ? AND +rowid", (min(docs), max(docs)))
                                 if window == self._ranked or "*" in expression
                                 else ("rowid", ()))
                snippets = dict(conn.execute(
                    "SELECT rowid, snippet(diaries_fts, -1, '**', '**', '…', 16) "
                    f"FROM diaries_fts WHERE diaries_fts MATCH ? AND {among} IN ({marks})",
                    (expression, *bounds, *docs)).fetchall())
        return [replace(Hit(*rows[doc]), score=-float(score),
                        snippet=" ".join(str(snippets.get(doc, "")).split()))
                for doc, score in ranked]

    @staticmethod
    def _recent(conn: sqlite3.Connection, filters: list[str], params: list[object],
                limit: int) -> list[Hit]:
        where = f"WHERE {' AND '.join(filters)}" if filters else ""
        rows = conn.execute(f"SELECT {HIT_COLUMNS} FROM diaries AS d {where} "
                            "ORDER BY d.created DESC, d.id LIMIT ?",
                            (*params, limit)).fetchall()
        return [Hit(*row) for row in rows]

    def _lookup(self, column: str, value: str) -> list[Hit]:
        try:
            rows = self._ready().execute(
                f"SELECT {HIT_COLUMNS} FROM diaries AS d WHERE d.{column} = ? "
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
        return find_related(conn, self._candidates(conn), exclude=exclude, task=task,
                            trigger=trigger, signatures=signatures, before=before, limit=limit)
