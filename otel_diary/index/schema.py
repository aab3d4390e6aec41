"""The index's database: its schema, how each connection is set up, and how a diary's
texts are stored.

The full-text table keeps no copy of the text: it indexes the view ``diaries_text``, which
reads each diary's body and metadata words from one compressed value of the diaries table
(with a dictionary of what diaries have in common). A rebuild loads rows first and makes
the secondary indexes after them.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import struct
import zlib
from collections.abc import Iterator

from otel_diary.index.documents import Entry

SCHEMA_VERSION = 3
"""An index of another version is dropped and rebuilt from the folder when opened (3: the
words of a diary read from its file are redacted, see ``redacted_document``)."""
CACHE_KIB = 8 * 1024
"""SQLite's page cache per connection (the file itself is read through a memory map)."""
MMAP_BYTES = 256 * 1024 * 1024
BULK_CACHE_KIB = 64 * 1024
"""Page cache while a rebuild loads the whole folder in one transaction."""
_HEADER = struct.Struct("<II")
_DICTIONARY = (
    b"outcome:completed outcome:recovered task:T-1 agent:coder trace: trigger:issue workflow: "
    b"completed recovered paid_model local_model 2026-01-01T00:00:00.000Z\n"
    b"# Fix the \n\n## What was done\nRoute: paid_model via anthropic/claude-sonnet. Tokens: "
    b"1000. Latency: 1000ms.\nApplied 1 file operation(s). Made 1 tool call(s). Build verified "
    b"in 1 attempt(s).\n\n## Error encountered\n1 escalation(s); build repaired in 2 "
    b"attempt(s); a repair attempt changed no files; 1 failed call(s)\nLast build stderr tail:"
    b"\n```text\nerror: Traceback (most recent call last):\n  File \"\", line 1, in \nError: "
    b"Exception failed FAILED tests/test_.py::test_ - AssertionError\n```\n\n"
    b"## How it was recovered\nAfter 1 escalation(s), the build passed on attempt 2. The run "
    b"succeeded after a recovery step. The agent went on after the failed call(s), and the run "
    b"ended successfully.\n\n## What was learned\nThe the a to of and in is for that with on "
    b"be this it as not are by when before after run build test tests error type file function "
    b"check\n\n## Related\n- kh-\n_No related documents._\n")
"""What diaries have in common, for compressing each one alone. Part of the schema: a
different dictionary cannot read the texts stored with this one (a new SCHEMA_VERSION)."""


def pack(body: str, meta: str, summary: str) -> bytes:
    """A diary's texts as one compressed value of the diaries table."""
    parts = [part.encode("utf-8", "surrogatepass") for part in (body, meta, summary)]
    # A small hash table (memLevel 4): a diary is a few kilobytes, and clearing the
    # default table (64 KiB) would cost more than compressing it (same size, measured).
    packer = zlib.compressobj(6, zlib.DEFLATED, 15, 4, zdict=_DICTIONARY)
    return packer.compress(_HEADER.pack(len(parts[0]), len(parts[1])) + b"".join(parts)) + \
        packer.flush()


@functools.lru_cache(maxsize=16)
def unpack(blob: bytes) -> tuple[str, str, str]:
    unpacker = zlib.decompressobj(zdict=_DICTIONARY)
    data = unpacker.decompress(blob) + unpacker.flush()
    body_end = _HEADER.size + _HEADER.unpack_from(data)[0]
    meta_end = body_end + _HEADER.unpack_from(data)[1]
    return tuple(data[start:end].decode("utf-8", "surrogatepass") for start, end in (
        (_HEADER.size, body_end), (body_end, meta_end), (meta_end, len(data))))  # type: ignore[return-value]


def diary_part(blob: bytes | None, number: int) -> str | None:
    """SQL ``diary_part(text, n)``: a diary's body (0), metadata words (1) or summary (2)."""
    return None if blob is None else unpack(blob)[number]


HIT_COLUMNS = ("d.id, d.path, d.title, d.agent, d.task, d.outcome, d.task_trigger, d.created, "
                "d.trace_id, d.span_id, diary_part(d.text, 2)")

SCHEMA = (
    """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE diaries (
        doc INTEGER PRIMARY KEY,
        id TEXT NOT NULL,
        path TEXT NOT NULL,
        title TEXT NOT NULL,
        agent TEXT NOT NULL,
        task TEXT NOT NULL,
        outcome TEXT NOT NULL,
        task_trigger TEXT,
        workflow TEXT,
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        created TEXT NOT NULL,
        text BLOB NOT NULL
    )""",
    """CREATE TABLE signatures (
        signature TEXT NOT NULL,
        created TEXT NOT NULL,
        doc INTEGER NOT NULL,
        PRIMARY KEY (signature, created, doc)
    ) WITHOUT ROWID""",
    """CREATE VIEW diaries_text (doc, title, body, meta) AS
        SELECT doc, title, diary_part(text, 0), diary_part(text, 1) FROM diaries""",
    """CREATE VIRTUAL TABLE diaries_fts USING fts5 (
        title, body, meta, content = 'diaries_text', content_rowid = 'doc',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
)
INDEXES = (
    "CREATE UNIQUE INDEX diaries_id ON diaries (id)",
    "CREATE INDEX diaries_path ON diaries (path)",
    "CREATE INDEX diaries_trace ON diaries (trace_id)",
    "CREATE INDEX diaries_task ON diaries (task, created)",
    "CREATE INDEX diaries_trigger ON diaries (task_trigger, created)",
    "CREATE INDEX diaries_created ON diaries (created)",
    "CREATE INDEX signatures_doc ON signatures (doc)",
)
"""Made after a rebuild has loaded the rows: faster than keeping them up to date, and
packed tighter."""
TABLES = ("diaries_fts", "signatures", "diaries", "meta")


INSERT_DIARY = ("INSERT INTO diaries (doc, id, path, title, agent, task, outcome, task_trigger, "
                 "workflow, trace_id, span_id, created, text) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_TEXT = "INSERT INTO diaries_fts (rowid, title, body, meta) VALUES (?, ?, ?, ?)"
INSERT_SIGNATURE = "INSERT OR IGNORE INTO signatures (signature, created, doc) VALUES (?, ?, ?)"


def diary_row(doc: int | None, entry: Entry) -> tuple[object, ...]:
    """The diaries-table row of ``entry``; ``doc`` None takes the next number."""
    return (doc, entry.id, entry.path, entry.title, entry.agent, entry.task, entry.outcome,
            entry.trigger, entry.workflow, entry.trace_id, entry.span_id, entry.created,
            pack(entry.body, entry.meta, entry.summary))


def checkpoint(conn: sqlite3.Connection) -> None:
    """After a rebuild: give the pages it freed back to the file system, copy the
    write-ahead log into the database and truncate it, so the disk does not keep a second
    copy of the index."""
    with contextlib.suppress(sqlite3.OperationalError):
        with write(conn):
            # Python's sqlite3 steps this pragma once, and each step frees one page.
            for _ in range(conn.execute("PRAGMA freelist_count").fetchone()[0]):
                conn.execute("PRAGMA incremental_vacuum(1)")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def busy(exc: sqlite3.OperationalError) -> bool:
    """True for SQLite's "database is locked" / "busy": another connection is writing."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once so that it never fails half-way on a lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextlib.contextmanager
def read(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction, so that every statement inside sees the same index (a reindex
    committed meanwhile renumbers every diary), unless this thread holds a write
    transaction open: that one already does."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        yield
    finally:
        if own and conn.in_transaction:  # SQLite ends it itself on some errors
            conn.execute("COMMIT")


def prepare(conn: sqlite3.Connection) -> None:
    """What every connection to the index needs: the function the full-text table reads
    the diaries' texts through, and its cache sizes (bounded)."""
    conn.create_function("diary_part", 2, diary_part, deterministic=True)
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
