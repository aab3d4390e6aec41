"""The write-ahead journal of what assembly holds: an acknowledged span survives a crash.

Every task span and contribution a receiver takes in is appended, one row per trace of a
request, to a SQLite database in WAL mode before the request is answered. A writer
thread commits everything appended in the last few milliseconds at once (group commit,
each commit synced to disk) and completes one future per commit, which the requests it
covers wait for: a request is acknowledged once its rows are durable, and the receiving
thread never waits on the disk. A decided task gets a small row too. The rows of a trace
are deleted once the trace is closed and its diaries written; on start, the rows left
are read back (:meth:`Journal.replay`). Bounded in bytes: past the bound, nothing more
is taken in (the receivers answer 503 and count it).

Rows hold ``marshal`` data (plain values only): the file is this process's own, locked
against a second process, and read back by the same program.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import marshal
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import chain, repeat
from pathlib import Path
from typing import IO

from otel_diary.assembly.batch import Contribution, Part
from otel_diary.counters import Counters, LogOnce
from otel_diary.errors import DiaryError
from otel_diary.record import SpanRecord
from otel_diary.runner import Runner
from otel_diary.text import NOFOLLOW

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock against a second process
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("otel_diary")

COMMIT_INTERVAL_S = 0.002
"""The shortest time between two commits: what arrives meanwhile is committed at once."""
PART = 0
DECIDED = 1
LINKS = 2
"""Row kinds: the kept spans of one trace in one request (and the parent links of its
spans there); a task span decided; the parent links of a request's spans of a trace held
from earlier requests (what tells a nested task from a root)."""
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
ROW_BYTES = 40
"""What a row costs the database besides its body (key, trace id)."""

# Rows are appended in key order and deleted by key, so writing touches few pages: no
# index by trace (its entries would land all over the file); the process keeps each open
# trace's keys in memory.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    trace_id BLOB NOT NULL,
    kind INTEGER NOT NULL,
    body BLOB NOT NULL
);
"""

Row = tuple[bytes, bytes]
"""(trace id, body) of a part, encoded off the lock."""


class JournalError(DiaryError):
    """The journal cannot be opened, or a commit failed (the request is not acknowledged)."""


class JournalStats(Counters):
    """What the journal did; read, never reset."""

    rows: int
    commits: int
    errors: int
    replayed_rows: int
    damaged: int


class _Damaged(Exception):
    """The journal's files cannot be a journal (see :func:`_damaged`)."""


def _damaged(exc: BaseException) -> bool:
    """Whether ``exc`` says the journal's files are damaged, not unreachable or in use:
    SQLite's "file is not a database" or "database disk image is malformed"."""
    if isinstance(exc, _Damaged):
        return True
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
    return isinstance(exc, sqlite3.DatabaseError) and any(
        words in str(exc) for words in ("not a database", "malformed"))


@dataclass(slots=True)
class Mark:
    """The rows of one trace (their keys) and their bytes: what a compaction deletes."""

    seqs: list[int]
    size: int

    def __add__(self, other: Mark) -> Mark:
        return Mark(self.seqs + other.seqs, self.size + other.size)


@dataclass(slots=True)
class Replayed:
    """The rows of one trace read back on start."""

    trace_id: bytes
    parts: list[Part]
    decided: bool
    """A task of it was decided before the process ended."""
    links: list[bytes] = field(default_factory=list)


def encode(parts: list[Part], links: Sequence[tuple[bytes, bytes]] = ()) -> list[Row]:
    """The rows of a request's parts, each with its trace's parent ``links`` (plain
    values, no lock needed)."""
    linked: dict[bytes, list[bytes]] = {}
    for trace_id, run in links:
        linked.setdefault(trace_id, []).append(run)
    rows = []
    for trace_id, span_ids, contributions, tasks, size in parts:
        rows.append((trace_id, marshal.dumps((
            span_ids,
            list(map(tuple, contributions)),  # marshal takes plain tuples only
            [(span_id, _record(record), task_size) for span_id, record, task_size in tasks],
            size,
            linked.pop(trace_id, [])))))  # a trace's links once, with its first part
    return rows


def _record(record: SpanRecord) -> tuple[object, ...]:
    return (record.trace_id, record.span_id, record.name, record.start_ns, record.end_ns,
            record.parent_span_id, record.parent_is_remote, record.is_error,
            record.status_message, _plain(record.attributes), _plain(record.resource))


def _plain(mapping: object) -> dict[object, object]:
    return mapping if type(mapping) is dict else dict(mapping)  # type: ignore[call-overload]


def decode(trace_id: bytes, body: bytes) -> tuple[Part, list[bytes]]:
    """A part and its trace's parent links from its row."""
    span_ids, contributions, tasks, size, links = marshal.loads(body)
    return Part(trace_id, span_ids, [Contribution(*item) for item in contributions],
                [(span_id, SpanRecord(*fields), task_size)
                 for span_id, fields, task_size in tasks], size), links


class Journal:
    """The journal file at ``path``: appended by the collector, committed by its own thread.

    Usage::

        journal = Journal(path)              # locked: one process per journal
        for trace in journal.replay(): ...   # what the last process left, before start()
        journal.start()
        durable = journal.append(encode(batch.parts))   # a Future, done once committed
        mark = journal.close_trace(trace_id)            # the trace is closed in assembly
        journal.forget(mark)                            # ... and its diaries are written
        journal.close(5.0)

    The collector calls it under its own lock, so rows keep the order of assembly.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 256 * 2**20,
                 commit_interval_s: float = COMMIT_INTERVAL_S) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.commit_interval_s = commit_interval_s
        self.stats = JournalStats()
        self.bytes = 0
        """Bytes of the rows not compacted yet (bodies and a fixed cost per row)."""
        self._lock = threading.Lock()
        self._open: dict[bytes, Mark] = {}
        """Traces with rows and open in assembly, with the keys and bytes of their rows."""
        self._inserts: list[tuple[int, bytes, int, bytes]] = []
        self._deletes: list[tuple[int]] = []
        self._future: Future[None] = Future()
        self._last_commit = 0.0
        self._closed = False
        self._log_once = LogOnce()
        self._lock_file = self._take_lock()
        try:
            try:
                self._open_database()
            except (_Damaged, sqlite3.DatabaseError) as exc:
                if not _damaged(exc):
                    raise
                self._set_aside(exc)
                self._open_database()
        except (OSError, sqlite3.Error, _Damaged) as exc:
            self._release_lock()
            raise JournalError(f"cannot open the journal {self.path}: {exc}") from exc
        self._writer = Runner("otel-diary-journal", self._commit, interval_s=1.0,
                              on_error=lambda: self.stats.add("errors"))

    def _take_lock(self) -> IO[bytes]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.with_name(self.path.name + ".lock"),
                         os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | NOFOLLOW, 0o600)
            handle = open(fd, "r+b")  # noqa: SIM115
        except OSError as exc:
            raise JournalError(f"cannot open the journal {self.path}: "
                               f"{exc.strerror or exc}") from exc
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                raise JournalError(f"the journal {self.path} is in use by another process; "
                                   "give each serve process its own") from None
        return handle

    def _open_database(self) -> None:
        """Connect, and go on from the last row number the journal holds."""
        self._conn = self._connect()
        try:
            row = self._conn.execute("SELECT max(seq) FROM entries").fetchone()
        except BaseException:
            self._conn.close()
            raise
        self._seq = int(row[0] or 0) if row else 0

    def _set_aside(self, damage: BaseException) -> None:
        """Move a damaged journal's files aside (``<name>.damaged-<UTC time>``) for
        whoever wants to recover them, and say so: the receiver starts with an empty
        journal instead of refusing to start until someone intervenes."""
        stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
        aside = f"{self.path}.damaged-{stamp}"
        number = 1
        while os.path.lexists(aside) or os.path.lexists(f"{aside}-wal"):
            number += 1  # damaged twice in a second: neither is overwritten
            aside = f"{self.path}.damaged-{stamp}-{number}"
        for suffix in ("", "-wal"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{self.path}-shm")  # what SQLite shares between processes, no data
        self.stats.add("damaged")
        logger.error("otel-diary: the journal %s is damaged (%s); moved to %s, whose spans "
                     "are not replayed (sqlite3's .recover may save them); starting with "
                     "an empty journal", self.path, damage, aside)

    def _release_lock(self) -> None:
        with contextlib.suppress(OSError):
            self._lock_file.close()

    def _connect(self) -> sqlite3.Connection:
        # Spans as they came, secrets and all: readable by this user alone, even in a
        # shared folder; never through a symbolic link. The three files are made (or an
        # older journal's made private) here; SQLite then opens them by name again, so
        # before it writes to each it is checked to have opened the file made here (one
        # swapped for a link meanwhile is refused).
        opened: dict[str, int] = {}
        try:
            for suffix in ("", "-wal", "-shm"):  # SQLite takes empty ones as new
                opened[suffix] = os.open(f"{self.path}{suffix}",
                                         os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o600)
                os.fchmod(opened[suffix], 0o600)
            if os.fstat(opened[""]).st_size == 0 and os.fstat(opened["-wal"]).st_size:
                # Not left by a crash (SQLite writes the database's first page at once):
                # the database was emptied or removed, and its log is of no use alone.
                raise _Damaged("its database file is empty but its log is not")
            # "rw": SQLite creates nothing (the file was made above, and a link planted
            # since to a path that does not exist is not followed into a new file).
            conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=rw", uri=True,
                                   isolation_level=None, check_same_thread=False)
            try:
                self._check_opened(opened[""], "")  # SQLite opens it here, writes later
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("SELECT count(*) FROM sqlite_master")  # opens the log, the
                # shared memory: a read writes to neither log nor database
                for suffix in ("-wal", "-shm"):
                    self._check_opened(opened[suffix], suffix)
                conn.execute("PRAGMA synchronous=FULL")  # each commit is on disk at return
                # A deleted row's bytes are overwritten: raw spans (secrets and all) do not
                # outlive their rows in the database's free space.
                conn.execute("PRAGMA secure_delete=ON")
                conn.executescript(_SCHEMA)
            except BaseException:
                conn.close()
                raise
        finally:
            for fd in opened.values():
                os.close(fd)
        return conn

    def _check_opened(self, ours: int, suffix: str) -> None:
        """``OSError`` unless SQLite has the file open as ``ours`` (it opened the file
        made private, not one swapped in since). Where this process's descriptors cannot
        be listed, the file at the name is checked instead."""
        made = os.fstat(ours)

        def same(fd: int) -> bool:
            with contextlib.suppress(OSError):  # closed since it was listed
                return os.path.samestat(os.fstat(fd), made)
            return False

        try:
            held = any(same(int(fd)) for fd in os.listdir("/proc/self/fd") if int(fd) != ours)
        except OSError:
            held = os.path.samestat(os.stat(f"{self.path}{suffix}", follow_symlinks=False), made)
        if not held:
            raise OSError(errno.EEXIST, "replaced while the journal was opened",
                          f"{self.path}{suffix}")

    # -- start ----------------------------------------------------------------------------

    def replay(self) -> list[Replayed]:
        """The rows left by the last process, by trace in the order they were written;
        they stay in the journal until compacted like new ones. Call before :meth:`start`.

        A journal found damaged on the way (a page only this read reaches) is set aside as
        one found damaged when opened, and nothing is replayed."""
        try:
            return self._replay()
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            self._conn.close()
            self._open.clear()
            self.bytes = 0
            self._set_aside(exc)
            self._open_database()
            return []

    def _replay(self) -> list[Replayed]:
        traces: dict[bytes, Replayed] = {}
        for seq, trace_id, kind, body in self._conn.execute(
                "SELECT seq, trace_id, kind, body FROM entries ORDER BY seq"):
            trace_id = bytes(trace_id)
            trace = traces.get(trace_id)
            if trace is None:
                trace = traces[trace_id] = Replayed(trace_id, [], False)
            size = len(body) + ROW_BYTES
            if kind == DECIDED:
                trace.decided = True
            elif kind == LINKS:
                trace.links.append(bytes(body))
            else:
                try:
                    part, links = decode(trace_id, body)
                    trace.parts.append(part)
                    trace.links.extend(links)
                except (ValueError, EOFError, TypeError):
                    self._log_once.warning("journal-row", "otel-diary skipped an unreadable "
                                           "journal row of trace %s", trace_id.hex())
            self._note(trace_id, seq, size)
            self.bytes += size
            self.stats.replayed_rows += 1
        return list(traces.values())

    def start(self) -> None:
        self._writer.start()

    # -- appending (under the collector's lock) --------------------------------------------

    def room(self, rows: list[Row]) -> bool:
        """Whether ``rows`` fit under the bound."""
        return self.bytes + sum(len(body) for _, body in rows) + ROW_BYTES * len(rows) \
            <= self.max_bytes

    def append(self, rows: list[Row], links: Sequence[Row] = ()) -> Future[None]:
        """Queue ``rows`` (parts) and ``links`` (parent links); the future is done once they
        are committed (or failed)."""
        with self._lock:
            if self._closed:
                failed: Future[None] = Future()
                failed.set_exception(JournalError("the journal is closed"))
                return failed
            inserts = self._inserts
            seq = self._seq
            opened = self._open
            added = 0
            for kind, (trace_id, body) in chain(zip(repeat(PART), rows),
                                                zip(repeat(LINKS), links)):
                seq += 1
                size = len(body) + ROW_BYTES
                inserts.append((seq, trace_id, kind, body))
                held = opened.get(trace_id)
                if held is None:
                    opened[trace_id] = Mark([seq], size)
                else:
                    held.seqs.append(seq)
                    held.size += size
                added += size
            self._seq = seq
            self.bytes += added
            future = self._future
        self._writer.wake()
        return future

    def decided(self, trace_id: bytes, span_id: int) -> None:
        """Note that a task span of ``trace_id`` was decided (replay writes it at once)."""
        with self._lock:
            if trace_id not in self._open or self._closed:
                return  # no rows: nothing to replay
            self._seq += 1
            body = span_id.to_bytes(8, "big")
            self._inserts.append((self._seq, trace_id, DECIDED, body))
            self._note(trace_id, self._seq, len(body) + ROW_BYTES)
            self.bytes += len(body) + ROW_BYTES
        self._writer.wake()

    def _note(self, trace_id: bytes, seq: int, size: int) -> None:
        held = self._open.get(trace_id)
        if held is None:
            self._open[trace_id] = Mark([seq], size)
        else:
            held.seqs.append(seq)
            held.size += size

    def close_trace(self, trace_id: bytes) -> Mark | None:
        """The trace was closed in assembly: the mark of its rows so far (``None``: none).
        Rows appended for it later belong to a new opening of the trace."""
        with self._lock:
            return self._open.pop(trace_id, None)

    def forget(self, mark: Mark) -> None:
        """Delete the rows of ``mark`` (compaction)."""
        with self._lock:
            self.bytes -= mark.size
            if self._closed:
                return
            self._deletes.extend((seq,) for seq in mark.seqs)
        self._writer.wake()

    # -- the writer thread ----------------------------------------------------------------

    def _commit(self, stopping: bool) -> float | None:
        """One group commit: everything queued since the last one, in one transaction."""
        wait = self._last_commit + self.commit_interval_s - time.monotonic()
        if wait > 0 and not stopping:
            time.sleep(wait)  # let more requests join this commit
        with self._lock:
            inserts, deletes, future = self._inserts, self._deletes, self._future
            if not inserts and not deletes:
                return None
            self._inserts, self._deletes, self._future = [], [], Future()
        conn = self._conn
        try:
            conn.execute("BEGIN")
            # Inserts first: a delete queued in this group may cover rows queued before it.
            conn.executemany("INSERT INTO entries VALUES (?, ?, ?, ?)", inserts)
            conn.executemany("DELETE FROM entries WHERE seq = ?", deletes)
            conn.execute("COMMIT")
        except Exception as exc:  # whatever it is, the requests waiting must be answered
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self.stats.add("errors")
            self._log_once("commit", "otel-diary could not commit to the journal %s",
                           self.path)
            future.set_exception(JournalError(f"journal commit failed: {exc}"))
        else:
            self.stats.add("rows", amount=len(inserts))
            self.stats.add("commits")
            future.set_result(None)
            with self._lock:
                empty = bool(deletes) and self.bytes == 0
            if empty:  # the log's old pages hold the deleted spans as they came: cut it
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._last_commit = time.monotonic()
        with self._lock:
            more = bool(self._inserts or self._deletes)
        return 0.0 if more else None

    def rows(self) -> int:
        """Rows in the database now (committed ones)."""
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def close(self, timeout_s: float = 5.0) -> None:
        """Commit what is queued, then close the file and release its lock; idempotent.
        Later appends fail, later compactions are left for the next start."""
        self._writer.stop(timeout_s)
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._commit(True)  # what came after the writer's last round
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.close()
        self._release_lock()
