"""The shared store: diaries and lessons in one PostgreSQL database, for many replicas.

Tables live in the ``otel_diary`` schema: ``diaries`` holds each whole document (front
matter and body) with a weighted ``tsvector`` (GIN) for full-text search, ``signatures``
its error signatures (exact lookup), ``lessons`` one row per error signature (its state as
JSON and its document); :mod:`otel_diary.index.pgschema` creates and migrates them.
Writes are idempotent (one row per diary id, kept under a path no other run's diary
holds); a lesson update holds a transaction-scoped advisory lock on its signature, so
concurrent writers lose no run, and counts each diary once (``lesson_runs``). Every
statement has a timeout; the URL's password is never shown (messages name the host). A
forked child opens connections of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

import psycopg
import psycopg.errors
from psycopg.types.json import Jsonb

from otel_diary.errors import IndexUnavailable, SearchError
from otel_diary.index.documents import MAX_DOCUMENT_BYTES, MAX_SIGNATURES, Entry, path_choices
from otel_diary.index.lessons import (
    Lesson,
    Sighting,
    lesson_id,
    lesson_path,
)
from otel_diary.index.pgpool import Connections
from otel_diary.index.pgschema import (
    CONFIG,
    DIARY_VECTOR,
    LESSON_VECTOR,
    SCHEMA,
    SCHEMA_VERSION,
    diary_words,
    lesson_of,
    lesson_state,
    lesson_words,
    migrate,
    schema_version,
    words,
)
from otel_diary.index.query import Hit, SearchResult, agent_folder, any_terms, fts_terms
from otel_diary.index.related import CANDIDATES, WEIGHTS
from otel_diary.index.rules import apply_operations
from otel_diary.index.store import RANKED
from otel_diary.pipeline import DIARY_ROOT
from otel_diary.pipeline.core import MAX_RELATED
from otel_diary.text import one_line

logger = logging.getLogger("otel_diary")

_WEIGHTS = "{0.1, 0.1, 0.3, 1.0}"
"""ts_rank weights of D, C (body), B (meta), A (title): SQLite's bm25 10 / 3 / 1."""
_HIT = ("d.id, d.path, d.title, d.agent, d.task, d.outcome, d.task_trigger, d.created, "
        "d.trace_id, d.span_id, d.summary")


def tsquery(terms: Sequence[str], operator: str) -> str:
    """FTS terms (``"a phrase"``, ``"prefix"*``) as a ``to_tsquery`` text: phrases with
    ``<->``, prefixes with ``:*``, joined by ``operator`` (``&`` or ``|``)."""
    parts: list[str] = []
    for term in terms:
        prefix = term.endswith("*")
        found = words(term.rstrip("*")).split()  # as the diaries' words were split
        if not found:
            continue
        if prefix:
            found[-1] += ":*"
        parts.append("(" + " <-> ".join(found) + ")")
    return f" {operator} ".join(parts)


class PostgresStore:
    """Diaries and lessons in the PostgreSQL database at ``url``; safe to share between
    threads. Connections come from a small pool opened on first use; the schema is created
    or migrated then (``migrate=False`` only checks it).

    Usage::

        store = PostgresStore("postgresql://diary@db.internal/kb")
        store.search("TS2345").hits
        store.close()
    """

    def __init__(self, url: str, *, timeout_s: float = 5.0, max_connections: int = 4,
                 migrate: bool = True) -> None:
        self._db = Connections(url, timeout_s=timeout_s, max_connections=max_connections,
                               prepare=self._prepare)
        self.where = self._db.where
        self.timeout_s = timeout_s
        self._migrate = migrate
    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        if self._migrate:
            migrate(conn)
        else:
            version = schema_version(conn)
            if version != SCHEMA_VERSION:
                raise IndexUnavailable(f"the store at {self.where} has schema version "
                                       f"{version}, not {SCHEMA_VERSION}; run "
                                       "`otel-diary store migrate`")

    def migrate(self) -> tuple[int, int]:
        """Create or migrate the schema now; the versions before and after."""
        with self._db.connection(prepare=False, watch=False) as conn:
            found = migrate(conn)
        self._db.ready = True
        return found, SCHEMA_VERSION

    def close(self) -> None:
        self._db.close()

    def interrupt(self) -> None:
        """Calls waiting for a connection fail now (a shutdown near its end must not wait
        on a store that does not answer); the next call opens a new pool."""
        self._db.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- diaries -----------------------------------------------------------------------

    def add_diary(self, entry: Entry, content: str) -> str:
        return self.add_diaries([(entry, content)])[0]

    def add_diaries(self, diaries: Sequence[tuple[Entry, str]]) -> list[str]:
        """:meth:`add_diary` for each of ``diaries``, in one transaction (imports); the
        paths they were kept under."""
        rows: list[dict[str, Any]] = []
        for entry, content in diaries:
            if len(content) > MAX_DOCUMENT_BYTES:
                raise ValueError(f"diary {entry.id} is larger than a diary can be")
            parts = entry.path.split("/")
            if (len(parts) < 4 or "/".join(parts[:2]) != DIARY_ROOT or "\\" in entry.path
                    or not set(parts).isdisjoint(("", ".", ".."))):
                raise ValueError(f"diary path {entry.path!r} leaves the diary folder")
            rows.append({**asdict(entry), "content": content,
                         "body_start": len(content) - len(entry.body) + 1,
                         **diary_words(entry),
                         "signatures": list(dict.fromkeys(entry.signatures))[:MAX_SIGNATURES]})
        if not rows:
            return []
        try:
            # An import's batch takes as long as its rows do: only a single diary's call
            # (delivery's) is bounded by the watchdog; an import can be interrupted.
            with self._db.connection(watch=len(rows) == 1) as conn, conn.transaction(), \
                    conn.cursor() as cursor:
                _place(cursor, rows)
                cursor.executemany(
                    f"INSERT INTO {SCHEMA}.diaries (id, path, title, agent, task, outcome, "
                    "task_trigger, workflow, trace_id, span_id, created, summary, content, "
                    "body_start, search) VALUES (%(id)s, %(path)s, %(title)s, %(agent)s, "
                    "%(task)s, %(outcome)s, %(trigger)s, %(workflow)s, %(trace_id)s, "
                    "%(span_id)s, %(created)s, %(summary)s, %(content)s, %(body_start)s, "
                    f"{DIARY_VECTOR}) ON CONFLICT (id) DO UPDATE SET path = EXCLUDED.path, "
                    "title = EXCLUDED.title, agent = EXCLUDED.agent, task = EXCLUDED.task, "
                    "outcome = EXCLUDED.outcome, task_trigger = EXCLUDED.task_trigger, "
                    "workflow = EXCLUDED.workflow, trace_id = EXCLUDED.trace_id, "
                    "span_id = EXCLUDED.span_id, created = EXCLUDED.created, "
                    "summary = EXCLUDED.summary, content = EXCLUDED.content, "
                    "body_start = EXCLUDED.body_start, search = EXCLUDED.search, "
                    "stored_at = now()", rows)
                cursor.executemany(f"DELETE FROM {SCHEMA}.signatures WHERE diary = %(id)s",
                                   rows)
                cursor.executemany(f"INSERT INTO {SCHEMA}.signatures (signature, diary, "
                                   "created) SELECT unnest(%(signatures)s::text[]), %(id)s, "
                                   "%(created)s",
                                   [row for row in rows if row["signatures"]])
        except psycopg.IntegrityError:  # another writer took a path at the same moment
            raise IndexUnavailable(f"the store at {self.where} was given another diary at "
                                   "the same path at the same moment; try again") from None
        except (psycopg.DataError, ValueError) as exc:
            reason = self._db.clean(str(exc)) if isinstance(exc, psycopg.Error) else str(exc)
            raise ValueError(f"the store refused diary {rows[0]['id']}"
                             f"{'' if len(rows) == 1 else ' or another of its batch'}: "
                             f"{reason}") from None
        return [row["path"] for row in rows]

    def search(self, query: str = "", *, agent: str | None = None,
               outcome: str | None = None, task: str | None = None,
               since: str | None = None, limit: int = 10, raw: bool = False) -> SearchResult:
        """As :meth:`DiaryIndex.search`; ``raw`` reads ``query`` as ``to_tsquery`` syntax."""
        filters: list[str] = []
        params: dict[str, Any] = {"limit": max(1, min(int(limit), 1000))}
        if agent is not None:  # its name or its folder, in any case
            filters.append("(lower(d.agent) = lower(%(agent)s) OR d.path ILIKE %(folder)s)")
            params.update(agent=agent, folder=agent_folder(agent))
        if outcome is not None:
            filters.append("d.outcome = %(outcome)s")
            params["outcome"] = outcome
        if task is not None:
            filters.append("d.task = %(task)s")  # as written: its index finds it at once
            params["task"] = task
        if since is not None:
            filters.append("d.created >= %(since)s")
            params["since"] = since
        query = query.encode("utf-8", "replace").decode("utf-8").replace("\x00", " ")
        if raw:
            if not query.strip():
                raise SearchError("a tsquery is needed with --fts")
            try:
                return SearchResult(self._match(query, filters, params), "all", (query,))
            except psycopg.errors.SyntaxError as exc:
                raise SearchError(f"invalid tsquery {query!r}: "
                                  f"{self._db.clean(str(exc))}") from None
        terms = fts_terms(query)
        if not terms:
            if query.strip():
                raise SearchError(f"the query {query!r} has no words to search for")
            where = f"WHERE {' AND '.join(filters)}" if filters else ""
            with self._db.connection() as conn:
                rows = conn.execute(f"SELECT {_HIT} FROM {SCHEMA}.diaries AS d {where} "
                                    "ORDER BY d.created DESC, d.id LIMIT %(limit)s",
                                    params).fetchall()
            return SearchResult([Hit(*row) for row in rows], "recent")
        hits = self._match(tsquery(terms, "&"), filters, params)
        if hits or len(terms) == 1:
            return SearchResult(hits, "all", tuple(terms))
        return SearchResult(self._match(tsquery(any_terms(terms), "|"), filters, params),
                            "any", tuple(terms))

    def _match(self, expression: str, filters: list[str], params: dict[str, Any]) -> list[Hit]:
        where = " AND ".join(["d.search @@ q.q", *filters])
        # As the SQLite index does, only the newest RANKED matches are ranked (ts_rank
        # reads a whole tsvector), and headlines are made only for the hits kept.
        sql = (f"WITH q AS (SELECT to_tsquery('{CONFIG}', %(q)s) AS q), recent AS ("
               f"SELECT d.id FROM {SCHEMA}.diaries AS d, q WHERE {where} "
               f"ORDER BY d.created DESC, d.id LIMIT {RANKED}), top AS ("
               f"SELECT {_HIT}, d.content, d.body_start, ts_rank('{_WEIGHTS}', d.search, "
               f"q.q, 1) AS score FROM {SCHEMA}.diaries AS d JOIN recent USING (id), q "
               "ORDER BY score DESC, d.created DESC, d.id LIMIT %(limit)s) "
               "SELECT top.id, top.path, top.title, top.agent, top.task, top.outcome, "
               "top.task_trigger, top.created, top.trace_id, top.span_id, top.summary, "
               f"top.score, ts_headline('{CONFIG}', left(substr(top.content, top.body_start), "
               "65536), q.q, 'StartSel=**, StopSel=**, MaxWords=16, MinWords=6') "
               "FROM top, q ORDER BY top.score DESC, top.created DESC, top.id")
        with self._db.connection() as conn:
            rows = conn.execute(sql, {**params, "q": expression}).fetchall()
        return [replace(Hit(*row[:11]), score=float(row[11]),
                        snippet=" ".join(str(row[12]).split())) for row in rows]

    def _lookup(self, column: str, value: str) -> list[Hit]:
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT {_HIT} FROM {SCHEMA}.diaries AS d "
                                f"WHERE d.{column} = %s ORDER BY d.created, d.path",
                                (value,)).fetchall()
        return [Hit(*row) for row in rows]

    def by_trace(self, trace_id: str) -> list[Hit]:
        return self._lookup("trace_id", trace_id.strip().lower())

    def by_id(self, ident: str) -> Hit | None:
        found = self._lookup("id", ident.strip())
        return found[0] if found else None

    def by_ids(self, idents: Sequence[str]) -> list[Hit]:
        """The diaries of ``idents`` held, in that order, in one query."""
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT {_HIT} FROM {SCHEMA}.diaries AS d "
                                "WHERE d.id = ANY(%s)", (list(idents),)).fetchall()
        found = {row[0]: Hit(*row) for row in rows}
        return [found[ident] for ident in idents if ident in found]

    def shared_signatures(self, idents: Sequence[str],
                          signatures: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``idents``, the ``signatures`` its diary met (in their order)."""
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT diary, signature FROM {SCHEMA}.signatures "
                                "WHERE diary = ANY(%s) AND signature = ANY(%s)",
                                (list(idents), list(signatures))).fetchall()
        met: dict[str, set[str]] = {}
        for ident, signature in rows:
            met.setdefault(ident, set()).add(signature)
        return {ident: [s for s in signatures if s in met.get(ident, ())] for ident in idents}

    def count(self) -> int:
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.diaries").fetchone()
        return int(row[0]) if row else 0

    def related(self, *, exclude: str, task: str | None, trigger: str | None,
                signatures: Sequence[str], before: str, limit: int = MAX_RELATED) -> list[str]:
        """As :meth:`DiaryIndex.related`: shared signature 3, task 2, trigger 1."""
        scores: dict[str, float] = {}
        created: dict[str, str] = {}
        common = "d.id <> %(exclude)s AND d.created <= %(before)s"
        args = {"exclude": exclude, "before": before, "n": CANDIDATES, "task": task,
                "trigger": trigger, "signatures": list(dict.fromkeys(signatures))[:MAX_SIGNATURES]}
        queries: list[tuple[str, float]] = []
        if task:
            queries.append((f"SELECT d.id, d.created, 1::bigint FROM {SCHEMA}.diaries AS d WHERE "
                            f"d.task = %(task)s AND {common} ORDER BY d.created DESC "
                            "LIMIT %(n)s", WEIGHTS["task"]))
        if args["signatures"]:
            # As the SQLite index: the newest diaries of each signature are the candidates
            # (bounded work), each scored by every wanted signature it has.
            queries.append((f"SELECT d.id, d.created, (SELECT count(*) FROM {SCHEMA}.signatures "
                            "AS s WHERE s.diary = d.id AND s.signature = ANY(%(signatures)s)) "
                            f"AS shared FROM {SCHEMA}.diaries AS d WHERE d.id IN (SELECT c.diary "
                            "FROM unnest(%(signatures)s::text[]) AS w (signature) CROSS JOIN "
                            f"LATERAL (SELECT s.diary FROM {SCHEMA}.signatures AS s WHERE "
                            "s.signature = w.signature AND s.created <= %(before)s ORDER BY "
                            f"s.created DESC LIMIT %(n)s + 1) AS c) AND {common} ORDER BY "
                            "shared DESC, d.created DESC LIMIT %(n)s", WEIGHTS["signature"]))
        if trigger:
            queries.append((f"SELECT d.id, d.created, 1::bigint FROM {SCHEMA}.diaries AS d "
                            f"WHERE d.task_trigger = %(trigger)s AND {common} "
                            "ORDER BY d.created DESC LIMIT %(n)s", WEIGHTS["trigger"]))
        if not queries:
            return []
        # One round trip: each part tagged with its weight.
        sql = " UNION ALL ".join(f"(SELECT {weight}::float8, * FROM ({part}) AS p{n})"
                                 for n, (part, weight) in enumerate(queries))
        with self._db.connection() as conn:
            for weight, ident, stamp, count in conn.execute(sql, args):
                scores[ident] = scores.get(ident, 0.0) + weight * count
                created[ident] = stamp
        ranked = sorted(scores)  # stable sorts: best score, then newest, then id
        ranked.sort(key=created.__getitem__, reverse=True)
        ranked.sort(key=scores.__getitem__, reverse=True)
        return ranked[:limit]

    def document(self, path: str) -> str | None:
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT content FROM {SCHEMA}.diaries WHERE path = %s "
                               f"UNION ALL SELECT content FROM {SCHEMA}.lessons "
                               "WHERE path = %s LIMIT 1", (path, path)).fetchone()
        return str(row[0]) if row else None

    def paths(self) -> dict[str, str]:
        """The path of every diary held, by id (for imports)."""
        with self._db.connection() as conn:
            return {str(ident): str(path) for ident, path in
                    conn.execute(f"SELECT id, path FROM {SCHEMA}.diaries")}

    # -- lessons -----------------------------------------------------------------------

    def lesson(self, signature: str) -> Lesson:
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT state FROM {SCHEMA}.lessons WHERE signature = %s",
                               (signature,)).fetchone()
        return lesson_of(signature, row[0] if row else None)

    def add_lesson(self, signature: str, seen: Sighting,
                   operations: Sequence[tuple[str, str, str]] = ()) -> Lesson:
        with self._db.connection() as conn, conn.transaction():
            # Held to the end of the transaction: one writer per lesson, even a new one.
            # Waited for less long than a statement may take, so a writer stalled while
            # holding it fails this lesson (LockNotAvailable), not the whole store.
            conn.execute("SELECT set_config('lock_timeout', %s, true), "
                         "pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"{int(self.timeout_s * 800)}ms", f"lesson:{signature}"))
            row = conn.execute(f"SELECT state FROM {SCHEMA}.lessons WHERE signature = %s",
                               (signature,)).fetchone()
            lesson = lesson_of(signature, row[0] if row else None)
            already = conn.execute(f"INSERT INTO {SCHEMA}.lesson_runs (signature, diary) "
                                   "VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                   (signature, seen.id)).rowcount == 0
            if already or not lesson.add(seen):
                return lesson
            apply_operations(lesson.rules, operations, seen.id)
            content = lesson.as_document()  # sorts the rules: state after it
            title = f"Lesson: {one_line(signature, 180)}"
            conn.execute(
                f"INSERT INTO {SCHEMA}.lessons (signature, id, path, title, last_seen, state, "
                "content, search) VALUES (%(signature)s, %(id)s, %(path)s, %(title)s, "
                f"%(last_seen)s, %(state)s, %(content)s, {LESSON_VECTOR}) "
                "ON CONFLICT (signature) DO UPDATE SET last_seen = EXCLUDED.last_seen, "
                "state = EXCLUDED.state, content = EXCLUDED.content, search = EXCLUDED.search",
                {"signature": signature, "id": lesson_id(signature),
                 "path": lesson_path(signature), "title": title, "last_seen": lesson.last_seen,
                 "state": Jsonb(lesson_state(lesson)), "content": content,
                 **lesson_words(title, content)})
        return lesson

    def lists_others(self, signature: str, ident: str) -> bool:
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT state -> 'evidence' FROM {SCHEMA}.lessons "
                               "WHERE signature = %s", (signature,)).fetchone()
        return row is not None and any(other != ident for other in row[0] or [])

    def lessons(self) -> list[Lesson]:
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT signature, state FROM {SCHEMA}.lessons "
                                "ORDER BY last_seen DESC, signature").fetchall()
        return [lesson_of(signature, state) for signature, state in rows]

    def lesson_rows(self, *, ident: str | None = None, signatures: Sequence[str] = (),
                    terms: Sequence[str] = (), gathering: Sequence[str] = (),
                    limit: int = 10) -> list[tuple[str, ...]]:
        """Lessons as ``(id, path, title, signature, last_seen, top rule, snippet)``: by
        ``ident``, ``signatures`` (newest first), ``terms`` (best first; snippet of the body)
        or the diaries they gather, ids in ``gathering`` (in the order of the first of them
        each gathers, which stands for the snippet)."""
        head = "SELECT id, path, title, signature, last_seen, state #>> '{rules,0,text}'"
        with self._db.connection() as conn:
            if gathering:
                rows = conn.execute(  # the lesson's own signature, among the diary's
                    "SELECT id, path, title, signature, last_seen, rule, diary FROM ("
                    "SELECT DISTINCT ON (l.id) l.id, l.path, l.title, l.signature, "
                    "l.last_seen, l.state #>> '{rules,0,text}' AS rule, s.diary, "
                    f"array_position(%s, s.diary) AS n FROM {SCHEMA}.signatures AS s "
                    f"JOIN {SCHEMA}.lessons AS l ON l.signature = s.signature "
                    f"JOIN {SCHEMA}.lesson_runs AS r ON r.signature = s.signature "
                    "AND r.diary = s.diary WHERE s.diary = ANY(%s) ORDER BY l.id, n) AS g "
                    "ORDER BY n LIMIT %s", (list(gathering), list(gathering), limit)).fetchall()
            elif ident is not None:
                rows = conn.execute(f"{head}, '' FROM {SCHEMA}.lessons WHERE id = %s",
                                    (ident,)).fetchall()
            elif signatures:
                rows = conn.execute(f"{head}, '' FROM {SCHEMA}.lessons WHERE signature = "
                                    "ANY(%s) ORDER BY last_seen DESC LIMIT %s",
                                    (list(signatures), limit)).fetchall()
            elif terms:
                rows = conn.execute(
                    f"WITH q AS (SELECT to_tsquery('{CONFIG}', %s) AS q) {head}, "
                    f"ts_headline('{CONFIG}', substr(content, strpos(substr(content, 4), "
                    "E'\\n---\\n') + 8), q.q, 'StartSel=**, StopSel=**, "
                    f"MaxWords=16, MinWords=6') FROM {SCHEMA}.lessons, q WHERE search @@ q.q "
                    f"ORDER BY ts_rank('{_WEIGHTS}', search, q.q, 1) DESC, last_seen DESC "
                    "LIMIT %s", (tsquery(terms, "&"), limit)).fetchall()
            else:
                rows = []
        return [tuple("" if value is None else str(value) for value in row) for row in rows]


def _place(cursor: psycopg.Cursor[Any], rows: list[dict[str, Any]]) -> None:
    """Give each row to keep a path no other diary holds (see :func:`path_choices`): two
    replicas, or two imported folders, may each have had a run's diary at one path."""
    choices = [path_choices(row["path"], row["id"], row["span_id"]) for row in rows]
    cursor.execute(f"SELECT path, id FROM {SCHEMA}.diaries WHERE path = ANY(%s)",
                   ([path for paths in choices for path in paths],))
    owners: dict[str, str] = dict(cursor.fetchall())
    for row, paths in zip(rows, choices, strict=True):
        row["path"] = next((path for path in paths
                            if owners.get(path, row["id"]) == row["id"]), paths[-1])
        owners[row["path"]] = row["id"]
