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

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from typing import Any

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from otel_diary.errors import IndexUnavailable, SearchError
from otel_diary.index.documents import MAX_SIGNATURES, Entry, path_choices
from otel_diary.index.lessons import (
    Lesson,
    Rule,
    Sighting,
    apply_operations,
    lesson_id,
    lesson_path,
)
from otel_diary.index.pgschema import SCHEMA, SCHEMA_VERSION, migrate, schema_version
from otel_diary.index.query import Hit, SearchResult, fts_terms
from otel_diary.index.related import CANDIDATES, WEIGHTS
from otel_diary.index.store import RANKED
from otel_diary.pipeline.core import MAX_RELATED
from otel_diary.pipeline.redact import display_url, redact, without
from otel_diary.runner import renew_after_fork
from otel_diary.text import one_line

logger = logging.getLogger("otel_diary")
# The pool logs each failed connection attempt; the store reports the reason itself, once
# per failure and with the host only, so the pool's own lines would just repeat it.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

MAX_VECTOR_CHARS = 256 * 1024
"""Body text searched per diary: a tsvector holds at most 1 MB."""
MAX_DOCUMENT_BYTES = 1024 * 1024
_DOWN_S = 10.0
"""After a failed connection or a statement that timed out, calls fail at once for this
long: while the database is away or stalled, the worker waits for it once per period, not
once per diary."""
_WEIGHTS = "{0.1, 0.1, 0.3, 1.0}"
"""ts_rank weights of D, C (body), B (meta), A (title): SQLite's bm25 10 / 3 / 1."""
_HIT = ("d.id, d.path, d.title, d.agent, d.task, d.outcome, d.task_trigger, d.created, "
        "d.trace_id, d.span_id, d.summary")
_VECTOR = ("setweight(to_tsvector('english', %(title)s), 'A') || "
           "setweight(to_tsvector('english', %(meta)s), 'B') || "
           "setweight(to_tsvector('english', %(body)s), 'C')")

def tsquery(terms: Sequence[str], operator: str) -> str:
    """FTS terms (``"a phrase"``, ``"prefix"*``) as a ``to_tsquery`` text: phrases with
    ``<->``, prefixes with ``:*``, joined by ``operator`` (``&`` or ``|``)."""
    parts: list[str] = []
    for term in terms:
        prefix = term.endswith("*")
        words = term.rstrip("*").strip('"').split()
        if not words:
            continue
        if prefix:
            words[-1] += ":*"
        parts.append("(" + " <-> ".join(words) + ")")
    return f" {operator} ".join(parts)


def lesson_state(lesson: Lesson) -> dict[str, Any]:
    """A lesson's state as JSON keeps it."""
    return asdict(lesson)


def lesson_of(signature: str, state: dict[str, Any] | None) -> Lesson:
    """The lesson a stored state describes (a new one for ``None``)."""
    if not state:
        return Lesson(signature)
    rules = [Rule(str(r["text"]), int(r["votes"]), [str(e) for e in r["evidence"]])
             for r in state.get("rules", [])]
    return Lesson(signature=signature, runs=int(state["runs"]),
                  recovered=int(state["recovered"]), first_seen=str(state["first_seen"]),
                  last_seen=str(state["last_seen"]), agents=list(state["agents"]),
                  evidence=list(state["evidence"]), seen=list(state["seen"]), rules=rules,
                  newest=[dict(item) for item in state["newest"]])


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
        if timeout_s <= 0 or max_connections <= 0:
            raise ValueError("the store's timeout and pool size must be positive")
        if url.partition("://")[0].lower() not in ("postgresql", "postgres"):
            raise ValueError("expected a postgresql:// URL")  # never echoed: may hold a secret
        self.where = display_url(url)
        try:
            self._password = str(conninfo_to_dict(url).get("password") or "")
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"not a PostgreSQL URL: {self.where}") from exc
        self._url = url
        self.timeout_s = timeout_s
        self._migrate = migrate
        statement_ms = int(timeout_s * 1000)
        self._kwargs: dict[str, Any] = {
            "autocommit": True, "connect_timeout": max(1, round(timeout_s)),
            "application_name": "otel-diary",
            "options": f"-c statement_timeout={statement_ms} -c lock_timeout={statement_ms} "
                       "-c idle_in_transaction_session_timeout=60000"}
        self._max_connections = max_connections
        self._connections: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
        self._abandoned: list[object] = []
        self._pool = self._new_pool()
        self._lock = threading.Lock()
        self._opened = False
        self._ready = False
        self._down_until = 0.0
        self._down_reason = ""
        renew_after_fork(self)

    # -- connections -------------------------------------------------------------------

    def _new_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        return ConnectionPool(self._url, kwargs=self._kwargs, min_size=0,
                              max_size=self._max_connections, open=False,
                              timeout=self.timeout_s, reconnect_timeout=self.timeout_s,
                              configure=self._connections.add, name="otel-diary-store")

    def _after_fork_in_child(self) -> None:
        """A forked child opens a pool of its own. The parent's connections are neither
        used nor closed here: closing one (or the child ending) would send the server a
        Terminate message on the parent's socket and end its session. So each inherited
        socket is replaced, in this process only, by ``/dev/null``."""
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for conn in list(self._connections):
                with contextlib.suppress(psycopg.Error):  # a lost one has no socket
                    os.dup2(null, conn.pgconn.socket)
        finally:
            os.close(null)
        self._abandoned.append(self._pool)  # its worker threads are the parent's
        self._connections = weakref.WeakSet()
        self._lock = threading.Lock()
        self._pool = self._new_pool()
        self._opened = False

    def _clean(self, text: str) -> str:
        """An error message fit to show: redacted, never the password, then cut to one
        line (a cut first could leave part of the password)."""
        return one_line(redact(without(text, self._password)), 500)

    def _unreachable(self, exc: BaseException) -> IndexUnavailable:
        if isinstance(exc, PoolTimeout):
            try:  # the pool only says it waited: one direct attempt tells why
                psycopg.connect(self._url, **self._kwargs).close()
                reason = f"no free connection within {self.timeout_s:g}s"
            except psycopg.Error as direct:
                reason = str(direct)
        else:
            reason = str(exc)
        self._down_until = time.monotonic() + _DOWN_S
        self._down_reason = f"cannot reach the store at {self.where}: {self._clean(reason)}"
        return IndexUnavailable(self._down_reason)

    @contextlib.contextmanager
    def _connection(self, *, prepare: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection to a database with the current schema (unless not
        ``prepare``)."""
        if time.monotonic() < self._down_until:
            raise IndexUnavailable(self._down_reason)
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        try:
            with self._pool.connection() as conn:
                if prepare and not self._ready:
                    self._prepare(conn)
                yield conn
        except (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if isinstance(exc, psycopg.errors.QueryCanceled):
                # A store this slow is treated as away for a while: the pipeline goes on
                # without it (Related, lessons) instead of waiting on it for every diary.
                self._down_until = time.monotonic() + _DOWN_S
                self._down_reason = (f"the store at {self.where} did not answer within "
                                     f"{self.timeout_s:g}s")
                raise IndexUnavailable(self._down_reason) from None
            raise self._unreachable(exc) from None
        except psycopg.errors.UndefinedTable as exc:
            self._ready = False  # dropped under us: made again on the next call
            raise IndexUnavailable(f"the store at {self.where} has no otel-diary schema "
                                   f"({self._clean(str(exc))})") from None

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        if self._migrate:
            migrate(conn)
        else:
            version = schema_version(conn)
            if version != SCHEMA_VERSION:
                raise IndexUnavailable(f"the store at {self.where} has schema version "
                                       f"{version}, not {SCHEMA_VERSION}; run "
                                       "`otel-diary store migrate`")
        self._ready = True

    def migrate(self) -> tuple[int, int]:
        """Create or migrate the schema now; the versions before and after."""
        with self._connection(prepare=False) as conn:
            found = migrate(conn)
        self._ready = True
        return found, SCHEMA_VERSION

    def close(self) -> None:
        with self._lock:
            if self._opened:  # a store used again after close opens a new pool
                self._pool.close()
                self._pool = self._new_pool()
                self._opened = False

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
            rows.append({**asdict(entry), "content": content,
                         "body_start": len(content) - len(entry.body) + 1,
                         "body": entry.body[:MAX_VECTOR_CHARS],
                         "signatures": list(dict.fromkeys(entry.signatures))[:MAX_SIGNATURES]})
        if not rows:
            return []
        try:
            with self._connection() as conn, conn.transaction(), conn.cursor() as cursor:
                _place(cursor, rows)
                cursor.executemany(
                    f"INSERT INTO {SCHEMA}.diaries (id, path, title, agent, task, outcome, "
                    "task_trigger, workflow, trace_id, span_id, created, summary, content, "
                    "body_start, search) VALUES (%(id)s, %(path)s, %(title)s, %(agent)s, "
                    "%(task)s, %(outcome)s, %(trigger)s, %(workflow)s, %(trace_id)s, "
                    "%(span_id)s, %(created)s, %(summary)s, %(content)s, %(body_start)s, "
                    f"{_VECTOR}) ON CONFLICT (id) DO UPDATE SET path = EXCLUDED.path, "
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
        except psycopg.DataError as exc:
            raise ValueError(f"the store refused diary {rows[0]['id']}"
                             f"{'' if len(rows) == 1 else ' or another of its batch'}: "
                             f"{self._clean(str(exc))}") from None
        return [row["path"] for row in rows]

    def search(self, query: str = "", *, agent: str | None = None,
               outcome: str | None = None, task: str | None = None,
               since: str | None = None, limit: int = 10, raw: bool = False) -> SearchResult:
        """As :meth:`DiaryIndex.search`; ``raw`` reads ``query`` as ``to_tsquery`` syntax."""
        filters: list[str] = []
        params: dict[str, Any] = {"limit": max(1, min(int(limit), 1000))}
        for column, value in (("agent", agent), ("outcome", outcome), ("task", task)):
            if value is not None:
                filters.append(f"d.{column} = %({column})s")
                params[column] = value
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
                                  f"{self._clean(str(exc))}") from None
        terms = fts_terms(query)
        if not terms:
            if query.strip():
                raise SearchError(f"the query {query!r} has no words to search for")
            where = f"WHERE {' AND '.join(filters)}" if filters else ""
            with self._connection() as conn:
                rows = conn.execute(f"SELECT {_HIT} FROM {SCHEMA}.diaries AS d {where} "
                                    "ORDER BY d.created DESC, d.id LIMIT %(limit)s",
                                    params).fetchall()
            return SearchResult([Hit(*row) for row in rows], "recent")
        hits = self._match(tsquery(terms, "&"), filters, params)
        if hits or len(terms) == 1:
            return SearchResult(hits, "all", tuple(terms))
        return SearchResult(self._match(tsquery(terms, "|"), filters, params), "any",
                            tuple(terms))

    def _match(self, expression: str, filters: list[str], params: dict[str, Any]) -> list[Hit]:
        where = " AND ".join(["d.search @@ q.q", *filters])
        # As the SQLite index does, only the newest RANKED matches are ranked (ts_rank
        # reads a whole tsvector), and headlines are made only for the hits kept.
        sql = (f"WITH q AS (SELECT to_tsquery('english', %(q)s) AS q), recent AS ("
               f"SELECT d.id FROM {SCHEMA}.diaries AS d, q WHERE {where} "
               f"ORDER BY d.created DESC, d.id LIMIT {RANKED}), top AS ("
               f"SELECT {_HIT}, d.content, d.body_start, ts_rank('{_WEIGHTS}', d.search, "
               f"q.q, 1) AS score FROM {SCHEMA}.diaries AS d JOIN recent USING (id), q "
               "ORDER BY score DESC, d.created DESC, d.id LIMIT %(limit)s) "
               "SELECT top.id, top.path, top.title, top.agent, top.task, top.outcome, "
               "top.task_trigger, top.created, top.trace_id, top.span_id, top.summary, "
               "top.score, ts_headline('english', left(substr(top.content, top.body_start), "
               "65536), q.q, 'StartSel=**, StopSel=**, MaxWords=16, MinWords=6') "
               "FROM top, q ORDER BY top.score DESC, top.created DESC, top.id")
        with self._connection() as conn:
            rows = conn.execute(sql, {**params, "q": expression}).fetchall()
        return [replace(Hit(*row[:11]), score=float(row[11]),
                        snippet=" ".join(str(row[12]).split())) for row in rows]

    def _lookup(self, column: str, value: str) -> list[Hit]:
        with self._connection() as conn:
            rows = conn.execute(f"SELECT {_HIT} FROM {SCHEMA}.diaries AS d "
                                f"WHERE d.{column} = %s ORDER BY d.created, d.path",
                                (value,)).fetchall()
        return [Hit(*row) for row in rows]

    def by_trace(self, trace_id: str) -> list[Hit]:
        return self._lookup("trace_id", trace_id.strip().lower())

    def by_id(self, ident: str) -> Hit | None:
        found = self._lookup("id", ident.strip())
        return found[0] if found else None

    def count(self) -> int:
        with self._connection() as conn:
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
        with self._connection() as conn:
            for weight, ident, stamp, count in conn.execute(sql, args):
                scores[ident] = scores.get(ident, 0.0) + weight * count
                created[ident] = stamp
        ranked = sorted(scores)  # stable sorts: best score, then newest, then id
        ranked.sort(key=created.__getitem__, reverse=True)
        ranked.sort(key=scores.__getitem__, reverse=True)
        return ranked[:limit]

    def document(self, path: str) -> str | None:
        with self._connection() as conn:
            row = conn.execute(f"SELECT content FROM {SCHEMA}.diaries WHERE path = %s "
                               f"UNION ALL SELECT content FROM {SCHEMA}.lessons "
                               "WHERE path = %s LIMIT 1", (path, path)).fetchone()
        return str(row[0]) if row else None

    def paths(self) -> dict[str, str]:
        """The path of every diary held, by id (for imports)."""
        with self._connection() as conn:
            return {str(ident): str(path) for ident, path in
                    conn.execute(f"SELECT id, path FROM {SCHEMA}.diaries")}

    # -- lessons -----------------------------------------------------------------------

    def lesson(self, signature: str) -> Lesson:
        with self._connection() as conn:
            row = conn.execute(f"SELECT state FROM {SCHEMA}.lessons WHERE signature = %s",
                               (signature,)).fetchone()
        return lesson_of(signature, row[0] if row else None)

    def add_lesson(self, signature: str, seen: Sighting,
                   operations: Sequence[tuple[str, str, str]] = ()) -> Lesson:
        with self._connection() as conn, conn.transaction():
            # Held to the end of the transaction: one writer per lesson, even a new one.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"lesson:{signature}",))
            row = conn.execute(f"SELECT state FROM {SCHEMA}.lessons WHERE signature = %s",
                               (signature,)).fetchone()
            lesson = lesson_of(signature, row[0] if row else None)
            already = conn.execute(f"INSERT INTO {SCHEMA}.lesson_runs (signature, diary) "
                                   "VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                   (signature, seen.id)).rowcount == 0
            if already or not lesson.add(seen):
                return lesson
            apply_operations(lesson, operations, seen.id)
            content = lesson.as_document()  # sorts the rules: state after it
            title = f"Lesson: {one_line(signature, 180)}"
            conn.execute(
                f"INSERT INTO {SCHEMA}.lessons (signature, id, path, title, last_seen, state, "
                "content, search) VALUES (%(signature)s, %(id)s, %(path)s, %(title)s, "
                "%(last_seen)s, %(state)s, %(content)s, "
                "setweight(to_tsvector('english', %(title)s), 'A') || "
                "setweight(to_tsvector('english', %(content)s), 'C')) "
                "ON CONFLICT (signature) DO UPDATE SET last_seen = EXCLUDED.last_seen, "
                "state = EXCLUDED.state, content = EXCLUDED.content, search = EXCLUDED.search",
                {"signature": signature, "id": lesson_id(signature),
                 "path": lesson_path(signature), "title": title, "last_seen": lesson.last_seen,
                 "state": Jsonb(lesson_state(lesson)), "content": content})
        return lesson

    def lists_others(self, signature: str, ident: str) -> bool:
        with self._connection() as conn:
            row = conn.execute(f"SELECT state -> 'evidence' FROM {SCHEMA}.lessons "
                               "WHERE signature = %s", (signature,)).fetchone()
        return row is not None and any(other != ident for other in row[0] or [])

    def lessons(self) -> list[Lesson]:
        with self._connection() as conn:
            rows = conn.execute(f"SELECT signature, state FROM {SCHEMA}.lessons "
                                "ORDER BY last_seen DESC, signature").fetchall()
        return [lesson_of(signature, state) for signature, state in rows]

    def lesson_rows(self, *, ident: str | None = None, signatures: Sequence[str] = (),
                    terms: Sequence[str] = (), limit: int = 10) -> list[tuple[str, ...]]:
        """Lessons as ``(id, path, title, signature, last_seen, top rule, snippet)``: by
        ``ident``, ``signatures`` (newest first) or ``terms`` (best first; snippet of the body)."""
        head = "SELECT id, path, title, signature, last_seen, state #>> '{rules,0,text}'"
        with self._connection() as conn:
            if ident is not None:
                rows = conn.execute(f"{head}, '' FROM {SCHEMA}.lessons WHERE id = %s",
                                    (ident,)).fetchall()
            elif signatures:
                rows = conn.execute(f"{head}, '' FROM {SCHEMA}.lessons WHERE signature = "
                                    "ANY(%s) ORDER BY last_seen DESC LIMIT %s",
                                    (list(signatures), limit)).fetchall()
            elif terms:
                rows = conn.execute(
                    f"WITH q AS (SELECT to_tsquery('english', %s) AS q) {head}, "
                    "ts_headline('english', substr(content, strpos(substr(content, 4), "
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
