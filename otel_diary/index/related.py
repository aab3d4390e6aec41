"""Related diaries in the local index: the diaries that share an error signature, the task
or the trigger of a run, best first.

Each diary found scores 3 for each error signature it shares, 2 for the same task and 1
for the same trigger; ties go to the newest, then to the smallest id. Only the newest
``CANDIDATES`` diaries of each signature, task and trigger are candidates: bounded work
however many diaries met a common error. Candidates are numbered rows read from covering
indexes; only the few ranked first are looked up for their ids.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from otel_diary.index.documents import MAX_SIGNATURES
from otel_diary.index.schema import read

CANDIDATES = 50
"""The newest diaries of each signature, task and trigger that may be related."""

WEIGHTS = {"signature": 3.0, "task": 2.0, "trigger": 1.0}

_NEWEST = "created <= ? AND doc IS NOT ? ORDER BY created DESC LIMIT ?"


def related(conn: sqlite3.Connection, *, exclude: str, task: str | None,
            trigger: str | None, signatures: Sequence[str], before: str,
            limit: int) -> list[str]:
    """Ids of up to ``limit`` diaries other than ``exclude``, created no later than
    ``before``, that share an error signature, the task or the trigger, best first."""
    with read(conn):  # row numbers found by one statement name the same diaries in the next
        return _related(conn, exclude, task, trigger, signatures, before, limit)


def _related(conn: sqlite3.Connection, exclude: str, task: str | None, trigger: str | None,
             signatures: Sequence[str], before: str, limit: int) -> list[str]:
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
            gather(dict(conn.execute(f"SELECT doc, created FROM diaries WHERE {column} = ? "
                                     f"AND {_NEWEST}", (value, before, own, CANDIDATES))),
                   None, weight)
    wanted = list(dict.fromkeys(signatures))[:MAX_SIGNATURES]
    if wanted:
        gather(*_shared(conn, wanted, before, own), WEIGHTS["signature"])
    return _best(conn, scores, created, limit)


def _shared(conn: sqlite3.Connection, wanted: Sequence[str], before: str,
            own: int | None) -> tuple[dict[int, str], dict[int, int]]:
    """The newest diaries of each signature, and how many of the ``wanted`` signatures each
    one has; the ``CANDIDATES`` most shared, then newest, are kept."""
    newest: dict[str, dict[int, str]] = {
        signature: dict(conn.execute(
            "SELECT doc, created FROM signatures WHERE signature = ? AND created <= ? "
            "ORDER BY created DESC LIMIT ?", (signature, before, CANDIDATES + 1)))
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
    cut = {signature: listed for signature, listed in newest.items()
           if len(listed) > CANDIDATES}
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
