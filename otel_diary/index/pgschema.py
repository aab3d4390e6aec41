"""The PostgreSQL store's schema: its tables, versioned, and migrating them.

Tables live in the ``otel_diary`` schema (see :mod:`otel_diary.index.postgres`); the
version is kept in ``otel_diary.meta``. otel-diary creates or migrates the schema under an
advisory lock, so replicas starting at once migrate once, and refuses a newer one.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from otel_diary.errors import IndexUnavailable

logger = logging.getLogger("otel_diary")

SCHEMA = "otel_diary"
MIGRATE_LOCK = 0x6F74_6C64_6961_7279 & 0x7FFF_FFFF_FFFF_FFFF
"""The advisory lock key held while the schema is created or migrated."""

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
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
                    conn.execute(statement)
            conn.execute(f"INSERT INTO {SCHEMA}.meta (key, value) VALUES "
                         "('schema_version', %s) ON CONFLICT (key) DO UPDATE "
                         "SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
            logger.info("otel-diary: store schema migrated from version %d to %d",
                        found, SCHEMA_VERSION)
    return found
