"""Writing to the SQLite index: one transaction at a time in a process, taken in turn, and
a thread's held transaction that many entries share.

Usage::

    writer = Writer(busy_timeout_s=10.0, began=..., committed=...)
    writer.write(conn, add_entry)   # add_entry(conn): its own transaction, or the held one
    writer.hold()                   # until release(): entries share a transaction
    writer.release()                # commits; how many entries were lost

An entry that fails in a held transaction is rolled back alone: the transaction is rolled
back and the entries before it written again. (A savepoint per entry would do it too, but
makes the full-text index write a segment for every entry, at twice the cost.)
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from otel_diary.index.schema import write

HOLD_S = 0.05
"""Longest a held transaction stays open: other processes writing to the index wait for
it (SQLite's write lock), and readers see its entries only once it commits."""


@dataclass
class _Held:
    """A thread's held transaction."""

    conn: sqlite3.Connection | None = None
    since: float = 0.0
    entries: list[Callable[[sqlite3.Connection], object]] = field(default_factory=list)
    """Written since the last commit, as they were written (to write them again)."""
    lost: int = 0
    """Written, then rolled back with their transaction."""


class Writer:
    """The write side of one index: a turn per transaction (threads that wait are served
    before a holding thread goes on), each thread's held transaction."""

    def __init__(self, busy_timeout_s: float, *,
                 began: Callable[[sqlite3.Connection], object] = lambda conn: None,
                 committed: Callable[[sqlite3.Connection], object] = lambda conn: None) -> None:
        self._busy_timeout_s = busy_timeout_s
        self._began = began
        """Told when a transaction of entries begins on a connection."""
        self._committed = committed
        """Told when it commits (one rolled back is not told)."""
        self.renew()

    def renew(self) -> None:
        """Forget every thread's state (in a forked child: the threads are gone)."""
        self._turn = threading.Lock()
        """Held by the thread writing: one transaction at a time in this process."""
        self._lock = threading.Lock()
        self._waiting = 0
        """Threads waiting for the turn (a held transaction commits early for them)."""
        self._local = threading.local()

    def write(self, conn: sqlite3.Connection,
              entry: Callable[[sqlite3.Connection], object]) -> None:
        """Write one entry (``entry(conn)`` runs its statements): in its own transaction,
        or in this thread's held one, where one that fails is rolled back alone."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            self._take_turn()
            try:
                with write(conn):
                    self._began(conn)
                    entry(conn)
                self._committed(conn)
            finally:
                self._turn.release()
            return
        if held.conn is not conn or not conn.in_transaction:
            self._end(held)  # none yet, SQLite ended it, or the file was replaced
            self._take_turn()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except BaseException:
                self._turn.release()
                raise
            self._began(conn)
            held.conn, held.since = conn, time.monotonic()
        try:
            entry(conn)
        except BaseException:
            self._without_last(held, conn)
            raise
        held.entries.append(entry)
        if self._waiting or time.monotonic() - held.since >= HOLD_S:
            self._commit(held)  # let another writer in; the next entry begins anew

    def _without_last(self, held: _Held, conn: sqlite3.Connection) -> None:
        """After an entry failed half-way: the held transaction with the entries before it
        only (rolled back, then written again); all of them lost when that fails too."""
        written, held.entries = held.entries, []
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.execute("BEGIN IMMEDIATE")
            self._began(conn)
            for entry in written:
                entry(conn)
        except BaseException as exc:
            held.lost += len(written)
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            held.conn = None
            self._turn.release()
            if not isinstance(exc, Exception):
                raise
            return
        held.entries = written

    def hold(self) -> None:
        """Until :meth:`release`, this thread's entries share a transaction, committed at
        least every :data:`HOLD_S` seconds and as soon as another thread waits to write."""
        self.release()
        self._local.held = _Held()

    def release(self) -> int:
        """Commit this thread's held transaction; how many of its entries were lost
        (``sqlite3.Error`` when the commit fails)."""
        held: _Held | None = getattr(self._local, "held", None)
        self._local.held = None
        if held is None:
            return 0
        self._commit(held)
        return held.lost

    def _take_turn(self) -> None:
        """Take this process's turn to write (before SQLite's write lock); the caller
        gives it back."""
        with self._lock:
            self._waiting += 1
        try:
            if not self._turn.acquire(timeout=self._busy_timeout_s):
                raise sqlite3.OperationalError("database is locked (by this process)")
        finally:
            with self._lock:
                self._waiting -= 1

    def _commit(self, held: _Held) -> None:
        """Commit ``held``'s transaction, if one is open, and give the turn back."""
        conn = held.conn
        if conn is None:
            return
        try:
            if conn.in_transaction:
                conn.execute("COMMIT")
                self._committed(conn)
            else:  # SQLite rolled it back
                held.lost += len(held.entries)
            held.entries = []
        except sqlite3.Error:
            held.lost += len(held.entries)
            held.entries = []
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        finally:
            held.conn = None
            self._turn.release()

    def _end(self, held: _Held) -> None:
        """Give up ``held``'s transaction without raising (committed when it can be)."""
        with contextlib.suppress(sqlite3.Error):
            self._commit(held)
