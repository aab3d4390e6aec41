"""The PostgreSQL store's schema: its tables, versioned, and migrating them.

Tables live in the ``otel_diary`` schema (see :mod:`otel_diary.index.postgres`); the
version is kept in ``otel_diary.meta``. otel-diary creates or migrates the schema under an
advisory lock, so replicas starting at once migrate once, and refuses a newer one.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from otel_diary.errors import IndexUnavailable
from otel_diary.index.documents import (
    Entry,
    entry_from_document,
    entry_from_parts,
    redacted,
    redacted_document,
)
from otel_diary.index.lessons import Lesson
from otel_diary.index.rules import Rule
from otel_diary.pipeline.render import parse_front_matter

logger = logging.getLogger("otel_diary")

SCHEMA = "otel_diary"
MIGRATE_LOCK = 0x6F74_6C64_6961_7279 & 0x7FFF_FFFF_FFFF_FFFF
"""The advisory lock key held while the schema is created or migrated."""
CONFIG = f"{SCHEMA}.words"
"""The text search configuration: English stems of every word, stop words too, as the
folder index's porter tokenizer keeps them (``the`` or ``not`` found nothing)."""
MAX_SEARCHED_BYTES = 256 * 1024
"""Body text, and front matter text, searched per diary, in UTF-8 bytes: a tsvector holds
at most 1 MB."""
DIARY_VECTOR = (f"setweight(to_tsvector('{CONFIG}', %(title_words)s), 'A') || "
                f"setweight(to_tsvector('{CONFIG}', %(meta_words)s), 'B') || "
                f"setweight(to_tsvector('{CONFIG}', %(body_words)s), 'C')")
LESSON_VECTOR = (f"setweight(to_tsvector('{CONFIG}', %(title_words)s), 'A') || "
                 f"setweight(to_tsvector('{CONFIG}', %(content_words)s), 'C')")

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> str:
    """The words of ``text`` as the folder index's tokenizer (unicode61, diacritics
    removed) splits it, joined by spaces. PostgreSQL's parser alone keeps a path, a host,
    a version or an e-mail address whole, so ``api.ts`` found nothing in ``src/api.ts``."""
    if not text.isascii():
        text = "".join(char for char in unicodedata.normalize("NFKD", text)
                       if not unicodedata.combining(char))
    return " ".join(_WORD.findall(text))


def diary_words(entry: Entry) -> dict[str, str]:
    """The texts :data:`DIARY_VECTOR` reads for ``entry``; of the front matter and the
    body, the first :data:`MAX_SEARCHED_BYTES` bytes of each."""
    return {"title_words": words(entry.title), "meta_words": words(_searched(entry.meta)),
            "body_words": words(_searched(entry.body))}


def _searched(text: str) -> str:
    if len(text) <= MAX_SEARCHED_BYTES // 4:  # short enough whatever its characters
        return text
    return text.encode(errors="replace")[:MAX_SEARCHED_BYTES].decode(errors="ignore")


def lesson_words(title: str, content: str) -> dict[str, str]:
    """The texts :data:`LESSON_VECTOR` reads."""
    return {"title_words": words(title), "content_words": words(content)}


def _diary_batches(conn: psycopg.Connection[Any]) -> Iterator[list[tuple[str, str, str]]]:
    """The store's diaries as ``(id, path, content)``, 500 at a time, in id order."""
    last = ""
    while rows := conn.execute(f"SELECT id, path, content FROM {SCHEMA}.diaries "
                               "WHERE id > %s ORDER BY id LIMIT 500", (last,)).fetchall():
        last = rows[-1][0]
        yield rows


def _search_words(conn: psycopg.Connection[Any]) -> None:
    """Version 3: the configuration, and every search vector made again from words."""
    conn.execute(f"CREATE TEXT SEARCH DICTIONARY {SCHEMA}.english_stem "
                 "(TEMPLATE = pg_catalog.snowball, LANGUAGE = english)")
    conn.execute(f"CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = pg_catalog.english)")
    conn.execute(f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING "
                 f"REPLACE pg_catalog.english_stem WITH {SCHEMA}.english_stem")
    for rows in _diary_batches(conn):
        found = []
        for ident, path, content in rows:
            try:
                entry = entry_from_document(path, content)
            except (ValueError, TypeError, KeyError):
                continue  # kept as it was found
            found.append({"id": ident, **diary_words(entry)})
        with conn.cursor() as cursor:
            cursor.executemany(f"UPDATE {SCHEMA}.diaries SET search = {DIARY_VECTOR} "
                               "WHERE id = %(id)s", found)
    lessons = conn.execute(f"SELECT signature, title, content FROM {SCHEMA}.lessons"
                           ).fetchall()
    with conn.cursor() as cursor:
        cursor.executemany(f"UPDATE {SCHEMA}.lessons SET search = {LESSON_VECTOR} "
                           "WHERE signature = %(signature)s",
                           [{"signature": signature, **lesson_words(title, content)}
                            for signature, title, content in lessons])


def _redacted_words(conn: psycopg.Connection[Any]) -> None:
    """Version 4: what an import of an older otel-diary kept of a diary, or counted into
    a lesson, with the secrets the redactor knows taken out (see ``redacted_document``):
    the diary's text, title, summary and search vector, the lesson's state, text and
    search vector. Rows holding none are left as they are."""
    for rows in _diary_batches(conn):
        found = []
        for ident, path, content in rows:
            try:
                front, text = redacted_document(parse_front_matter(content), content)
                entry = entry_from_parts(path, front, text) if text != content else None
            except (ValueError, TypeError, KeyError):
                continue  # kept as it was found
            if entry is not None:
                found.append({"id": ident, "title": entry.title, "summary": entry.summary,
                              "content": text, "body_start": len(text) - len(entry.body) + 1,
                              **diary_words(entry)})
        with conn.cursor() as cursor:
            cursor.executemany(f"UPDATE {SCHEMA}.diaries SET title = %(title)s, "
                               "summary = %(summary)s, content = %(content)s, "
                               f"body_start = %(body_start)s, search = {DIARY_VECTOR} "
                               "WHERE id = %(id)s", found)
    changed = []
    for signature, title, state in conn.execute(
            f"SELECT signature, title, state FROM {SCHEMA}.lessons").fetchall():
        if (clean := redacted(state)) != state:
            content = lesson_of(signature, clean).as_document()
            changed.append({"signature": signature, "state": Jsonb(clean), "content": content,
                            **lesson_words(title, content)})
    with conn.cursor() as cursor:
        cursor.executemany(f"UPDATE {SCHEMA}.lessons SET state = %(state)s, content = "
                           f"%(content)s, search = {LESSON_VECTOR} "
                           "WHERE signature = %(signature)s", changed)


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


_MIGRATIONS: tuple[tuple[str | Callable[[psycopg.Connection[Any]], None], ...], ...] = (
    (
        f"""CREATE TABLE {SCHEMA}.diaries (
            id text PRIMARY KEY,
            path text NOT NULL UNIQUE,
            title text NOT NULL,
            agent text NOT NULL,
            task text NOT NULL,
            outcome text NOT NULL,
            task_trigger text,
            workflow text,
            trace_id text NOT NULL,
            span_id text NOT NULL,
            created text NOT NULL,
            summary text NOT NULL,
            content text NOT NULL,
            body_start integer NOT NULL,
            search tsvector NOT NULL,
            stored_at timestamptz NOT NULL DEFAULT now()
        )""",
        f"CREATE INDEX diaries_search ON {SCHEMA}.diaries USING gin (search)",
        f"CREATE INDEX diaries_trace ON {SCHEMA}.diaries (trace_id)",
        f"CREATE INDEX diaries_task ON {SCHEMA}.diaries (task, created)",
        f"CREATE INDEX diaries_trigger ON {SCHEMA}.diaries (task_trigger, created)",
        f"CREATE INDEX diaries_created ON {SCHEMA}.diaries (created)",
        f"""CREATE TABLE {SCHEMA}.signatures (
            signature text NOT NULL,
            diary text NOT NULL REFERENCES {SCHEMA}.diaries (id) ON DELETE CASCADE,
            created text NOT NULL,
            PRIMARY KEY (signature, diary)
        )""",
        f"CREATE INDEX signatures_diary ON {SCHEMA}.signatures (diary)",
        f"CREATE INDEX signatures_newest ON {SCHEMA}.signatures (signature, created)",
        f"""CREATE TABLE {SCHEMA}.lessons (
            signature text PRIMARY KEY,
            id text NOT NULL UNIQUE,
            path text NOT NULL,
            title text NOT NULL,
            last_seen text NOT NULL,
            state jsonb NOT NULL,
            content text NOT NULL,
            search tsvector NOT NULL
        )""",
        f"CREATE INDEX lessons_search ON {SCHEMA}.lessons USING gin (search)",
        f"CREATE INDEX lessons_path ON {SCHEMA}.lessons (path)",
    ),
    (  # 2: every run a lesson counted, so a run is counted once however often it comes
        f"""CREATE TABLE {SCHEMA}.lesson_runs (
            signature text NOT NULL,
            diary text NOT NULL,
            PRIMARY KEY (signature, diary)
        )""",
        # Every stored diary was counted into its lesson (evidence lists the newest 200).
        f"INSERT INTO {SCHEMA}.lesson_runs SELECT s.signature, s.diary "
        f"FROM {SCHEMA}.signatures AS s JOIN {SCHEMA}.lessons AS l "
        "ON l.signature = s.signature ON CONFLICT DO NOTHING",
        f"INSERT INTO {SCHEMA}.lesson_runs SELECT signature, "
        f"jsonb_array_elements_text(state -> 'evidence') FROM {SCHEMA}.lessons "
        "ON CONFLICT DO NOTHING",
    ),
    (_search_words,),  # 3: searched by words, as the folder index splits them
    (_redacted_words,),  # 4: no secret an older import kept
)
SCHEMA_VERSION = len(_MIGRATIONS)



def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version the database holds (0: none yet)."""
    row = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.meta",)).fetchone()
    if row is None or row[0] is None:
        return 0
    found = conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'"
                         ).fetchone()
    return int(found[0]) if found else 0


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION` under the migration lock; the version
    found. Replicas starting at once wait for each other; a newer schema is refused."""
    with conn.transaction():
        # Another replica may be migrating: wait for its lock as long as it may take.
        conn.execute("SET LOCAL statement_timeout = '5min'")
        conn.execute("SET LOCAL lock_timeout = '5min'")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        found = schema_version(conn)
        if found > SCHEMA_VERSION:
            raise IndexUnavailable(f"the store's schema version {found} is newer than this "
                                   f"otel-diary's ({SCHEMA_VERSION}); upgrade otel-diary")
        if found < SCHEMA_VERSION:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.meta "
                         "(key text PRIMARY KEY, value text NOT NULL)")
            for statements in _MIGRATIONS[found:]:
                for statement in statements:
                    if callable(statement):
                        statement(conn)
                    else:
                        conn.execute(statement)
            conn.execute(f"INSERT INTO {SCHEMA}.meta (key, value) VALUES "
                         "('schema_version', %s) ON CONFLICT (key) DO UPDATE "
                         "SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
            logger.info("otel-diary: store schema migrated from version %d to %d",
                        found, SCHEMA_VERSION)
    return found
