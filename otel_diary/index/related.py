"""Related diaries in the local index: the diaries that share an error signature, the task
or the trigger of a run, best first.

Each diary found scores 3 for each error signature it shares, 2 for the same task and 1
for the same trigger; ties go to the newest, then to the smallest id. Only the newest
``CANDIDATES`` diaries of each signature, task and trigger are candidates: bounded work
however many diaries met a common error. Candidates are numbered rows read from covering
indexes, kept by each connection for its next lookups (:class:`Candidates`); only the few
ranked first are looked up for their ids.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right, insort
from collections.abc import Iterable, Sequence

from otel_diary.index.documents import MAX_SIGNATURES
from otel_diary.index.schema import read

CANDIDATES = 50
"""The newest diaries of each signature, task and trigger that may be related."""

WEIGHTS = {"signature": 3.0, "task": 2.0, "trigger": 1.0}

LISTS = 64
"""Candidate lists a connection keeps at most; past them, lookups read the others as if
none were kept (no list is read to be kept only to be dropped for another soon after)."""
KEPT = CANDIDATES + 16
"""Rows a list keeps at most: a lookup for a run that ended before up to 15 of the newest
diaries (runs written out of order) is still answered from it."""
_STAMP = 32
_VALUE = 200
"""Longest timestamp (ASCII) and value a kept list holds (the timestamps the renderer
writes are 24 characters): a connection's lists hold under a megabyte."""

Key = tuple[str, str]
"""A candidate list: ``("task" | "task_trigger" | "signature", value)``."""
Row = tuple[str, int]
"""A candidate: ``(created, doc)``; the newest are those with the latest ``created``, then
the largest ``doc``."""

_TABLES = {"task": "diaries", "task_trigger": "diaries", "signature": "signatures"}
_PAST_ROWIDS = 2**63
"""Greater than any row number SQLite gives."""


def keys(task: str | None, trigger: str | None, signatures: Iterable[str]) -> list[Key]:
    """The candidate lists a diary is in."""
    return [*((("task", task),) if task else ()),
            *((("task_trigger", trigger),) if trigger else ()),
            *(("signature", signature) for signature in dict.fromkeys(signatures))]


class Candidates:
    """The candidate lists of many diaries one connection has read, so that its next
    lookups need not read them again: the newest ``KEPT`` diaries of a task, trigger or
    signature, or all of them when fewer. A list is kept once a lookup has found it full
    (shorter ones cost as little to read again).

    Kept exact: a diary this connection adds goes into the lists it belongs to, and a
    diary removed or a rebuild empties them. When the write transaction that did either
    does not commit, they are emptied again: at the next transaction the connection's
    writer begins (:meth:`begin`; :meth:`commit` says it did commit) or the next lookup
    outside one (:meth:`start`). A commit of another connection (``PRAGMA data_version``)
    empties them too; while other connections write between this one's lookups, none is
    kept. Every method belongs to the thread using the connection.
    """

    def __init__(self) -> None:
        self._lists: dict[Key, list[Row]] = {}
        """Oldest row first."""
        self._whole: set[Key] = set()
        """Lists that hold every diary of their task, trigger or signature."""
        self._version = -1
        self._checked = False
        """The lookup under way has checked the version."""
        self._steady = False
        """No other connection committed since the version was checked before."""
        self._uncommitted = False
        """The connection changed the index in a write transaction not committed yet."""

    def begin(self) -> None:
        """A write transaction began (the one before may not have committed)."""
        if self._uncommitted:
            self._clear()
            self._uncommitted = False

    def commit(self) -> None:
        """The write transaction committed."""
        self._uncommitted = False

    def added(self, doc: int, created: str, lists: Iterable[Key]) -> None:
        """The connection inserted diary ``doc`` in its write transaction."""
        self._uncommitted = True
        row = (created, doc)
        for key in lists:
            rows = self._lists.get(key)
            if rows is None:
                continue
            if not _short(created):
                del self._lists[key]
                self._whole.discard(key)
                continue
            insort(rows, row)
            if len(rows) > KEPT:  # the oldest goes (this one, when older than all)
                del rows[0]
                self._whole.discard(key)

    def removed(self) -> None:
        """The connection deleted diaries (or rebuilt the index) in its write transaction."""
        self._uncommitted = True
        self._clear()

    def start(self, writing: bool) -> None:
        """A lookup begins (``writing``: inside a write transaction)."""
        if not writing and self._uncommitted:  # not known to have committed
            self._clear()
            self._uncommitted = False
        self._checked = False

    def newest(self, conn: sqlite3.Connection, key: Key, before: str, own: int | None,
               count: int) -> dict[int, str]:
        """The ``count`` newest diaries of ``key`` created no later than ``before``, other
        than ``own``: ``{doc: created}``, newest first."""
        if self._lists and not self._checked:
            self._check(conn)
        rows = self._lists.get(key)
        if rows is not None:
            found = _newest(rows, before, own, count)
            if len(found) == count or key in self._whole:
                return found
        column, value = key
        found = dict(conn.execute(
            f"SELECT doc, created FROM {_TABLES[column]} WHERE {column} = ? AND created <= ? "
            f"AND doc IS NOT ? ORDER BY created DESC, doc DESC LIMIT ?",
            (value, before, own, count)))
        if rows is None and len(found) == count and len(value) <= _VALUE and \
                len(self._lists) < LISTS:
            self._keep(conn, key)
        return found

    def _keep(self, conn: sqlite3.Connection, key: Key) -> None:
        """Read and keep the list of ``key``, unless another connection is writing."""
        if not self._checked:
            self._check(conn)
        if not self._steady:
            return
        column, value = key
        rows = conn.execute(
            f"SELECT created, doc FROM {_TABLES[column]} WHERE {column} = ? "
            f"ORDER BY created DESC, doc DESC LIMIT ?", (value, KEPT)).fetchall()
        if not all(_short(created) for created, _ in rows):
            return
        rows.reverse()
        self._lists[key] = rows
        if len(rows) < KEPT:
            self._whole.add(key)

    def _check(self, conn: sqlite3.Connection) -> None:
        """Once a lookup, in its transaction: are the lists still those of the index?"""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        self._steady = version == self._version
        if not self._steady:  # another connection committed
            self._clear()
            self._version = version
        self._checked = True

    def _clear(self) -> None:
        self._lists.clear()
        self._whole.clear()


def _short(created: str) -> bool:
    return len(created) <= _STAMP and created.isascii()


def _newest(rows: list[Row], before: str, own: int | None, count: int) -> dict[int, str]:
    """Up to ``count`` of ``rows`` (oldest first) created no later than ``before``, other
    than ``own``, newest first."""
    end = bisect_right(rows, (before, _PAST_ROWIDS))  # rows[:end] are no later than before
    found = {doc: created for created, doc in reversed(rows[max(end - count - 1, 0):end])
             if doc != own}
    if len(found) > count:  # own was not among them
        found.popitem()
    return found


def related(conn: sqlite3.Connection, candidates: Candidates, *, exclude: str,
            task: str | None, trigger: str | None, signatures: Sequence[str], before: str,
            limit: int) -> list[str]:
    """Ids of up to ``limit`` diaries other than ``exclude``, created no later than
    ``before``, that share an error signature, the task or the trigger, best first.
    ``candidates`` are ``conn``'s."""
    candidates.start(writing=conn.in_transaction)
    with read(conn):  # row numbers found by one statement name the same diaries in the next
        return _related(conn, candidates, exclude, task, trigger, signatures, before, limit)


def _related(conn: sqlite3.Connection, candidates: Candidates, exclude: str,
             task: str | None, trigger: str | None, signatures: Sequence[str], before: str,
             limit: int) -> list[str]:
    row = conn.execute("SELECT doc FROM diaries WHERE id = ?", (exclude,)).fetchone()
    own = row[0] if row else None  # "doc IS NOT NULL" excludes nothing
    scores: dict[int, float] = {}
    created: dict[int, str] = {}

    def gather(found: dict[int, str], counts: dict[int, int] | None, weight: float) -> None:
        for doc, stamp in found.items():
            scores[doc] = scores.get(doc, 0.0) + weight * (counts[doc] if counts else 1)
            created[doc] = stamp

    for column, value, weight in (("task", task, WEIGHTS["task"]),
                                  ("task_trigger", trigger, WEIGHTS["trigger"])):
        if value:
            gather(candidates.newest(conn, (column, value), before, own, CANDIDATES), None,
                   weight)
    wanted = list(dict.fromkeys(signatures))[:MAX_SIGNATURES]
    if wanted:
        gather(*_shared(conn, candidates, wanted, before, own), WEIGHTS["signature"])
    return _best(conn, scores, created, limit)


def _shared(conn: sqlite3.Connection, candidates: Candidates, wanted: Sequence[str],
            before: str, own: int | None) -> tuple[dict[int, str], dict[int, int]]:
    """The newest diaries of each signature, and how many of the ``wanted`` signatures each
    one has; the ``CANDIDATES`` most shared, then newest, are kept."""
    newest: dict[str, dict[int, str]] = {
        signature: candidates.newest(conn, ("signature", signature), before, None,
                                     CANDIDATES + 1)
        for signature in wanted}
    found: dict[int, str] = {}
    for listed in newest.values():
        found.update(listed)
    if own is not None:
        found.pop(own, None)
    counts = dict.fromkeys(found, 0)
    for listed in newest.values():
        for doc in listed:
            if doc in counts:
                counts[doc] += 1
    # A cut list does not say whether a diary as old as its last one, or older, has the
    # signature too: those diaries are looked up (a diary newer would be in the list).
    # With one signature wanted, every diary found came from its list: nothing to look up.
    cut = {signature: listed for signature, listed in newest.items()
           if len(listed) > CANDIDATES} if len(newest) > 1 else {}
    if cut:
        last = max(min(listed.values()) for listed in cut.values())
        docs = [doc for doc, stamp in found.items() if stamp <= last]
        if docs:
            for signature, doc in conn.execute(
                    f"SELECT signature, doc FROM signatures WHERE doc IN "
                    f"({', '.join('?' * len(docs))}) AND signature IN "
                    f"({', '.join('?' * len(cut))})", (*docs, *cut)):
                if doc not in cut[signature]:
                    counts[doc] += 1
    kept = sorted(found)
    kept.sort(key=found.__getitem__, reverse=True)
    kept.sort(key=counts.__getitem__, reverse=True)
    return {doc: found[doc] for doc in kept[:CANDIDATES]}, counts


def _best(conn: sqlite3.Connection, scores: dict[int, float], created: dict[int, str],
          limit: int) -> list[str]:
    """The ids of the ``limit`` best scored diaries: best score, then newest, then id.
    The diaries ranked above the last one kept are looked up, and of those tied with it
    (runs that ended together) only the ones with the smallest ids."""
    ranked = sorted(scores, key=created.__getitem__, reverse=True)
    ranked.sort(key=scores.__getitem__, reverse=True)
    if not ranked or limit <= 0:
        return []
    end = min(limit, len(ranked))
    last = (scores[ranked[end - 1]], created[ranked[end - 1]])
    start = end - 1  # the diaries from start to end tie with the last one kept
    while start and (scores[ranked[start - 1]], created[ranked[start - 1]]) == last:
        start -= 1
    while end < len(ranked) and (scores[ranked[end]], created[ranked[end]]) == last:
        end += 1
    if end <= limit:
        ids = dict(conn.execute(
            f"SELECT doc, id FROM diaries WHERE doc IN ({', '.join('?' * end)})", ranked[:end]))
    else:
        ids = dict(conn.execute(
            f"SELECT doc, id FROM diaries WHERE doc IN ({', '.join('?' * start)})",
            ranked[:start]))
        ids.update(conn.execute(
            f"SELECT doc, id FROM diaries WHERE doc IN ({', '.join('?' * (end - start))}) "
            f"ORDER BY id LIMIT ?", (*ranked[start:end], limit - start)))
    best = sorted(ids, key=ids.__getitem__)  # stable sorts: best score, then newest, then id
    best.sort(key=created.__getitem__, reverse=True)
    best.sort(key=scores.__getitem__, reverse=True)
    return [ids[doc] for doc in best]
