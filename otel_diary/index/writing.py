"""Writing to the SQLite index: one transaction at a time in a process, taken in turn, and
a thread's held transaction that many entries share.

Usage::

    writer = Writer(busy_timeout_s=10.0)
    with writer.entry(conn):        # one transaction, or a savepoint in the held one
        conn.execute("INSERT ...")
    writer.hold()                   # until release(): entries share a transaction
    writer.release()                # commits; how many entries were lost
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from otel_diary.index.schema import write

HOLD_S = 0.05
"""Longest a held transaction stays open: other processes writing to the index wait for
it (SQLite's write lock), and readers see its entries only once it commits."""


@dataclass
class _Held:
    """A thread's held transaction."""

    conn: sqlite3.Connection | None = None
    since: float = 0.0
    entries: int = 0
    """Written since the last commit."""
    lost: int = 0
    """Written, then rolled back with their transaction."""


class Writer:
    """The write side of one index: a turn per transaction (threads that wait are served
    before a holding thread goes on), each thread's held transaction."""

    def __init__(self, busy_timeout_s: float) -> None:
        self._busy_timeout_s = busy_timeout_s
        self.renew()

    def renew(self) -> None:
        """Forget every thread's state (in a forked child: the threads are gone)."""
        self._turn = threading.Lock()
        """Held by the thread writing: one transaction at a time in this process."""
        self._lock = threading.Lock()
        self._waiting = 0
        """Threads waiting for the turn (a held transaction commits early for them)."""
        self._local = threading.local()

    @contextlib.contextmanager
    def entry(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Write one entry: in its own transaction, or in this thread's held one (as a
        savepoint: an entry that fails is rolled back alone)."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            self._take_turn()
            try:
                with write(conn):
                    yield
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
            held.conn, held.since = conn, time.monotonic()
        conn.execute("SAVEPOINT entry")
        try:
            yield
        except BaseException:
            if conn.in_transaction:  # the others stay
                conn.execute("ROLLBACK TO entry")
                conn.execute("RELEASE entry")
            else:  # SQLite rolled the whole transaction back
                held.lost += held.entries
                held.entries = 0
                self._end(held)
            raise
        conn.execute("RELEASE entry")
        held.entries += 1
        if self._waiting or time.monotonic() - held.since >= HOLD_S:
            self._commit(held)  # let another writer in; the next entry begins anew

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
            else:  # SQLite rolled it back
                held.lost += held.entries
            held.entries = 0
        except sqlite3.Error:
            held.lost += held.entries
            held.entries = 0
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
