"""Pooled connections to the PostgreSQL store, and what their failures mean.

A lost connection, a server that cannot be reached and a statement that timed out make
the store away for a while (:data:`DOWN_S`): calls fail at once, so the pipeline goes on
without it instead of waiting on it for every diary. A pool whose connections are all
busy, a lock another writer holds and other failures fail one call only. A call the
server stops answering (a stalled server or network, where the server's statement
timeout bounds nothing) is hung up on by a watchdog thread. After a lost connection the
whole pool is renewed (a restarted server ended them all), and a forked child opens a
pool of its own. Messages name the host, never the password.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import select
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import StrDumperUnknown
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from otel_diary.errors import IndexUnavailable
from otel_diary.pipeline.redact import MIN_LITERAL, redact
from otel_diary.runner import renew_after_fork
from otel_diary.text import one_line

POOL_NAME = "otel-diary-store"
"""The start of each store's pool name (``otel-diary-store-<n>``)."""
_POOL_NAMES: set[str] = set()
"""The names of the stores' pools made in this process, whose log lines are left out."""
_POOLS = itertools.count(1)
_OWN_NAME = re.compile(rf"{POOL_NAME}-[0-9]+(?![0-9A-Za-z_])")
DOWN_S = 10.0
"""After a lost connection or a statement that timed out, calls fail at once for this
long: while the database is away or stalled, the worker waits for it once per period, not
once per diary."""
_LOST = ("08", "57P", "53300", "53400")
"""SQLSTATEs of a connection ended or refused: connection exceptions, the server shutting
down or starting, too many connections. A full disk or memory fails the call alone."""


class _Connection(psycopg.Connection[Any]):
    """A connection of a store's pool."""


class _Text(StrDumperUnknown):
    """Sends text as PostgreSQL can take it: a NUL as U+FFFD and a lone surrogate as
    ``?`` (no stored text holds either), where the driver refused the whole call."""

    def dump(self, obj: str) -> bytes:
        try:
            data = obj.encode()
        except UnicodeEncodeError:
            data = obj.encode(errors="replace")
        return data.replace(b"\x00", "\ufffd".encode()) if b"\x00" in data else data


class _Failure:
    """The last time the pool could not connect, and why: the pool connects on a thread
    of its own and only tells its callers that they waited."""

    at = 0.0
    reason = ""


def _connection_class(failure: _Failure) -> type[_Connection]:
    class Connection(_Connection):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            try:
                return super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                failure.at, failure.reason = time.monotonic(), str(exc)
                raise
    return Connection


class _PoolLines(logging.Filter):
    """Leaves out psycopg_pool's lines about a store's pool (each failed attempt to
    connect, each connection dropped): the store reports a failure itself, once and with
    the host only. An app's own pools still log as they do."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(arg, _Connection) or _ours(arg) for arg in args)


def _ours(arg: object) -> bool:
    """Whether ``arg`` names a store's pool: its name, one of its threads'
    (``<name>-worker-0``) or a task of it (a repr holding the name)."""
    if type(arg) is not str:
        if not hasattr(arg, "pool"):  # a pool's maintenance task
            return False
        arg = repr(arg)
    return any(name in _POOL_NAMES for name in _OWN_NAME.findall(arg))


logging.getLogger("psycopg.pool").addFilter(_PoolLines())


def _idle_and_well(conn: psycopg.Connection[Any]) -> None:
    """Raises for a pooled connection the server ended while it sat idle (a restart, an
    ``idle_session_timeout``, a proxy's idle timeout): its socket has the server's goodbye
    to read. Closed here, the pool drops it and gives another; a healthy one costs a poll,
    not a round trip."""
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    if readable:
        conn.close()
        raise psycopg.OperationalError("the server ended the connection while it was idle")


def _lost(exc: psycopg.Error) -> bool:
    """Whether ``exc`` ended the connection (or refused one), not just a statement."""
    return exc.sqlstate is None or exc.sqlstate.startswith(_LOST)


class Connections:
    """Connections to the database at ``url`` from a pool opened on first use; safe to
    share between threads. ``prepare`` is called on the first connection (and again after
    the schema was found missing) to make or check the schema.

    Usage::

        db = Connections(url, timeout_s=5.0, max_connections=4, prepare=migrate)
        with db.connection() as conn:
            conn.execute("SELECT 1")
    """

    def __init__(self, url: str, *, timeout_s: float, max_connections: int,
                 prepare: Callable[[psycopg.Connection[Any]], object]) -> None:
        if timeout_s <= 0 or max_connections <= 0:
            raise ValueError("the store's timeout and pool size must be positive")
        if url.partition("://")[0].lower() not in ("postgresql", "postgres"):
            raise ValueError("expected a postgresql:// URL")  # never echoed: may hold a secret
        # What the URL holds as a password, and what libpq read as one (they differ when
        # libpq misreads a URL: a "/" in the password makes the user the host).
        userinfo, at, _ = url.partition("://")[2].rpartition("@")
        self._secrets: tuple[str, ...] = (userinfo.partition(":")[2],) if at else ()
        try:
            info = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            # libpq's reason, not the URL: read as a web URL, a password holding "#" or
            # "?" would be cut into the name shown.
            raise ValueError(f"not a PostgreSQL URL: {self.clean(str(exc))}") from None
        self._secrets = tuple(dict.fromkeys(secret for secret in (
            str(info.get("password") or ""), *self._secrets) if secret))
        # Named as libpq reads the URL: a password holding "#" or "?" (libpq takes it as
        # it is) would be part of a name read as a web URL.
        port = f":{info['port']}" if info.get("port") else ""
        self.where = self.clean(f"postgresql://{info.get('host') or 'localhost'}{port}/"
                                f"{info.get('dbname') or ''}")
        self._url = url
        self.timeout_s = timeout_s
        self._prepare = prepare
        statement_ms = int(timeout_s * 1000)
        self._kwargs: dict[str, Any] = {
            "autocommit": True, "connect_timeout": max(1, round(timeout_s)),
            "application_name": "otel-diary",
            "options": f"-c statement_timeout={statement_ms} -c lock_timeout={statement_ms} "
                       "-c idle_in_transaction_session_timeout=60000"}
        self._max_connections = max_connections
        self._connections: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
        self._abandoned: list[object] = []
        self._failure = _Failure()
        self._in_use = 0
        self._watch_s = 3 * timeout_s + 1.0
        """How long one call may hold a connection: a few statements, each bounded by
        the server's statement timeout."""
        self._watched: dict[int, tuple[float, psycopg.Connection[Any]]] = {}
        self._hung: set[int] = set()
        self._tokens = itertools.count(1)
        self._watcher: threading.Thread | None = None
        self._name = f"{POOL_NAME}-{next(_POOLS)}"
        _POOL_NAMES.add(self._name)
        self._forks = 0
        """Forks this process was made by since the store was (a call under way when the
        process forked counts in the parent's tally, not in the child's)."""
        self._pool = self._new_pool()
        self._lock = threading.Lock()
        self._opened = False
        self.ready = False
        self._down_until = 0.0
        self.down_reason = ""
        renew_after_fork(self)

    def _new_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        return ConnectionPool(self._url, kwargs=self._kwargs, min_size=0,
                              max_size=self._max_connections, open=False,
                              timeout=self.timeout_s, reconnect_timeout=self.timeout_s,
                              configure=self._configure, check=_idle_and_well,
                              name=self._name,
                              connection_class=_connection_class(self._failure))

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        self._connections.add(conn)
        conn.adapters.register_dumper(str, _Text)

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
        self._in_use = 0
        self._forks += 1
        self._watched = {}
        self._hung = set()
        self._watcher = None  # the parent's thread does not exist here
        self._pool = self._new_pool()
        self._opened = False

    def clean(self, text: str) -> str:
        """An error message fit to show: redacted, never the password, then cut to one
        line (a cut first could leave part of the password)."""
        for secret in self._secrets:
            text = without(text, secret)
        return one_line(redact(text), 500)

    # -- the watchdog: the server bounds each statement; a server (or a network) that
    # stops answering bounds nothing, and a call would wait on its socket for good.

    def _watch(self, conn: psycopg.Connection[Any]) -> int:
        with self._lock:
            token = next(self._tokens)
            self._watched[token] = (time.monotonic() + self._watch_s, conn)
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watching, daemon=True,
                                                 name="otel-diary-store-watchdog")
                self._watcher.start()
        return token

    def _watching(self) -> None:
        """Hang up on overdue calls while any is watched; then end (the next call watched
        starts another), so that a store no longer used, or closed, keeps no thread."""
        while True:
            time.sleep(min(1.0, self.timeout_s / 2))
            now = time.monotonic()
            with self._lock:
                if not self._watched:
                    self._watcher = None
                    return
                overdue = [(token, conn) for token, (until, conn) in self._watched.items()
                           if until < now and token not in self._hung]
                self._hung.update(token for token, _ in overdue)
            for _, conn in overdue:
                # Shut down, not closed: the call's own read ends (as if the server had
                # hung up) and the descriptor stays the connection's to close.
                with contextlib.suppress(OSError, psycopg.Error):
                    sock = socket.socket(fileno=conn.pgconn.socket)
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    finally:
                        sock.detach()

    def _away(self, reason: str) -> IndexUnavailable:
        """Calls fail at once with ``reason`` for :data:`DOWN_S` seconds."""
        self._down_until = time.monotonic() + DOWN_S
        self.down_reason = reason
        return IndexUnavailable(reason)

    def _renew(self, pool: ConnectionPool[psycopg.Connection[Any]]) -> None:
        """Close ``pool`` (after a lost connection its others are taken for lost too: a
        restarted server ended them all) unless another call did; the next call opens a
        new pool. A pool thread still connecting (to a server that does not answer) is
        not waited for: it closes what it makes once it returns, and connections still in
        use are closed as they come back."""
        with self._lock:
            if self._pool is not pool:
                return
            self._pool = self._new_pool()
            self._opened = False
        pool.close(timeout=0)

    @contextlib.contextmanager
    def connection(self, *, prepare: bool = True,
                   watch: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection to a database with the current schema (unless not
        ``prepare``). Failures raise :class:`IndexUnavailable` (see the module), a value
        over one of PostgreSQL's limits ``ValueError``. Unless not ``watch`` (a
        migration waiting for another replica's), a connection still in use after three
        statement timeouts and a second is hung up on: the server stopped answering."""
        if time.monotonic() < self._down_until:
            raise IndexUnavailable(self.down_reason)
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
            pool = self._pool
            busy = self._in_use >= self._max_connections  # each held by another call
            self._in_use += 1
            forks = self._forks
        asked = time.monotonic()
        watched = 0
        try:
            with pool.connection() as conn:
                if prepare and not self.ready:
                    self._prepare(conn)
                    self.ready = True
                if watch:
                    watched = self._watch(conn)
                yield conn
        except PoolTimeout:
            if busy and self._failure.at < asked:
                raise IndexUnavailable(f"the store at {self.where} had no free connection "
                                       f"within {self.timeout_s:g}s; try again") from None
            reason = (self._failure.reason if self._failure.at >= asked
                      else f"no connection within {self.timeout_s:g}s")
            raise self._away(f"cannot reach the store at {self.where}: "
                             f"{self.clean(reason)}") from None
        except psycopg.errors.QueryCanceled:
            # A store this slow is treated as away for a while: the pipeline goes on
            # without it (Related, lessons) instead of waiting on it for every diary.
            raise self._away(f"the store at {self.where} did not answer within "
                             f"{self.timeout_s:g}s") from None
        except psycopg.errors.LockNotAvailable:
            raise IndexUnavailable(f"the store at {self.where} gave up waiting for a lock "
                                   "another writer holds; try again") from None
        except psycopg.errors.ProgramLimitExceeded as exc:
            raise ValueError(f"over a limit of the store: {self.clean(str(exc))}") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise IndexUnavailable(
                f"the store at {self.where} refused its user: {self.clean(str(exc))}; the "
                "user needs USAGE on the otel_diary schema and SELECT (readers) or SELECT, "
                "INSERT, UPDATE and DELETE (writers) on its tables, and CREATE on the "
                "database to make the schema") from None
        except psycopg.errors.UndefinedTable as exc:
            self.ready = False  # dropped under us: made again on the next call
            raise IndexUnavailable(f"the store at {self.where} has no otel-diary schema "
                                   f"({self.clean(str(exc))})") from None
        except PoolClosed:  # closed by close() (or renewed) while this call began
            raise IndexUnavailable(f"the store at {self.where} was closed during the call; "
                                   "try again") from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if _lost(exc):
                self._renew(pool)
                reason = (f"no answer within {self._watch_s:g}s" if watched in self._hung
                          else self.clean(str(exc)))
                raise self._away(f"cannot reach the store at {self.where}: {reason}") \
                    from None
            raise IndexUnavailable(f"the store at {self.where} failed: "
                                   f"{self.clean(str(exc))}") from None
        finally:
            with self._lock:
                if forks == self._forks:
                    self._in_use -= 1
                    self._watched.pop(watched, None)
                    self._hung.discard(watched)

    def close(self) -> None:
        """Close the pooled connections (see :meth:`_renew`); used again after, it opens
        a new pool."""
        with self._lock:
            pool = self._pool if self._opened else None
        if pool is not None:
            self._renew(pool)


def without(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (the database's password) replaced by ``[REDACTED]``:
    everywhere, or for one shorter than :data:`~otel_diary.pipeline.redact.MIN_LITERAL`
    where it stands as a word (``p`` is not taken out of ``port``)."""
    if not secret:
        return text
    if len(secret) >= MIN_LITERAL:
        return text.replace(secret, "[REDACTED]")
    return re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "[REDACTED]", text)
