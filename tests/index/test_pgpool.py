"""The PostgreSQL store's connections: forks, a busy pool, a restarted server, and the
pool's log lines."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import select
import socket
import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from otel_diary import ORCHESTRATOR, ChildSummary
from otel_diary.errors import IndexUnavailable
from otel_diary.index.pgpool import POOL_NAME, without
from otel_diary.index.postgres import PostgresStore
from otel_diary.index.stages import IndexRelatedFinder, LessonFirstFinder
from otel_diary.pipeline.core import Pipeline
from otel_diary.testing import InMemorySink
from tests.support.forking import in_forked_child, needs_fork
from tests.support.kb import TS_STDERR, task_record
from tests.support.loopback import wait_until
from tests.support.postgres import PostgresCluster, free_port


@needs_fork
def test_a_forked_child_has_connections_of_its_own(filled_store: PostgresStore) -> None:
    """Children forked from a process that used the store answer right, each on its own
    connections; closing every connection the child holds (what ending it does) leaves the
    parent's sessions as they were, so the parent goes on answering without an error."""

    def child() -> bool:
        answers = [(filled_store.count(), filled_store.by_id("kh-none"),
                    len(filled_store.search("task").hits)) for _ in range(30)]
        for found in gc.get_objects():
            if isinstance(found, psycopg.Connection):
                found.close()
        return set(answers) == {(3, None, 3)}

    try:
        assert [in_forked_child(child, limit_s=30) for _ in range(3)] == [0, 0, 0]
        assert filled_store.count() == 3
        assert len(filled_store.search("task").hits) == 3
    finally:
        filled_store.close()


def counting(store: PostgresStore, failed: list[str]) -> threading.Thread:
    """A started thread counting ``store``'s diaries; the message of the
    :class:`IndexUnavailable` it meets goes to ``failed``."""

    def call() -> None:
        try:
            store.count()
        except IndexUnavailable as exc:
            failed.append(str(exc))

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def test_a_busy_pool_fails_the_call_not_the_store(postgres_url: str) -> None:
    """With every connection of the pool held, a call fails once it waited its timeout,
    saying why; the store is not taken as away: the next call, with a connection free,
    is answered."""
    store = PostgresStore(postgres_url, timeout_s=0.5, max_connections=1)
    failed: list[str] = []
    try:
        assert store.count() == 0
        with store._db.connection():
            waiting = counting(store, failed)
            waiting.join()
        assert failed == [f"the store at {store.where} had no free connection within 0.5s; "
                          "try again"]
        assert store.count() == 0
    finally:
        store.close()


def test_a_store_with_no_call_under_way_keeps_no_watchdog(postgres_url: str) -> None:
    """The thread that hangs up on calls the server stopped answering ends once no call is
    under way, after each call: a store closed, or no longer used, kept one waking each
    second for the process's life."""
    store = PostgresStore(postgres_url, timeout_s=0.5)
    try:
        for _ in range(2):
            assert store.count() == 0
            # it ends within a second of the call (set to None as it returns)
            assert wait_until(lambda: store._db._watcher is None)
    finally:
        store.close()


def test_a_call_closed_under_it_fails_alone(postgres_url: str) -> None:
    """A call waiting for a connection when the store is closed fails, saying so; the store
    is not taken as away (it read as an outage for 10 s): the next call is answered."""
    store = PostgresStore(postgres_url, timeout_s=5.0, max_connections=1)
    failed: list[str] = []
    try:
        assert store.count() == 0
        with store._db.connection():
            waiting = counting(store, failed)
            assert wait_until(lambda: store._db._in_use == 2)
            store.close()
            waiting.join()
        assert failed == [f"the store at {store.where} was closed during the call; try again"]
        assert store.count() == 0
    finally:
        store.close()


@needs_fork
def test_a_fork_during_a_call_leaves_the_child_s_pool_its_own(postgres_url: str) -> None:
    """A process forked while one of its threads was in a call (that call's end, in the
    child, gives back nothing the child took) counts no call in use: with one connection,
    its calls are answered, and one made while another holds the connection is told the
    pool is busy, not that the store is away."""
    store = PostgresStore(postgres_url, timeout_s=0.5, max_connections=1)
    assert store.count() == 0
    with store._db.connection():
        pid = os.fork()
    if pid == 0:  # the child: os._exit, whatever happens
        code = 1
        try:
            failed: list[str] = []
            if store._db._in_use == 0 and store.count() == 0:
                with store._db.connection():
                    try:
                        store.count()
                    except IndexUnavailable as exc:
                        failed.append(str(exc))
                code = 0 if failed and "no free connection" in failed[0] else 2
        finally:
            os._exit(code)
    try:
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert store._db._in_use == 0 and store.count() == 0
    finally:
        store.close()


def test_the_pool_lines_of_an_app_are_left_as_they_are(
        caplog: pytest.LogCaptureFixture) -> None:
    """The store's own pool says nothing about each failed attempt (the store reports
    the failure once); a pool the app made logs as psycopg_pool does, even one the app
    named as the store's pools are named."""
    closed = free_port()
    url = f"postgresql://app:pw@127.0.0.1:{closed}/app"
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        with PostgresStore(url, timeout_s=0.5) as store, \
                pytest.raises(IndexUnavailable, match="cannot reach"):
            store.count()
        with ConnectionPool(url, min_size=0, max_size=1, name=POOL_NAME, timeout=0.5,
                            reconnect_timeout=0.5) as pool, pytest.raises(PoolTimeout):
            pool.getconn()
    lines = [record.getMessage() for record in caplog.records if record.name == "psycopg.pool"]
    assert any(f"'{POOL_NAME}'" in line for line in lines)  # the app's, named like ours
    assert not any(f"{POOL_NAME}-" in line for line in lines)


def test_closing_a_store_logs_nothing_about_its_pool(
        postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Closing a store does not wait for its pool's threads, which psycopg_pool would say
    of each (``couldn't stop thread 'otel-diary-store-1-worker-0'``): those lines are the
    store's too."""
    store = PostgresStore(postgres_url, timeout_s=2.0, max_connections=4)
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        for _ in range(3):
            assert store.count() == 0
            store.close()
    assert [record.getMessage() for record in caplog.records
            if record.name == "psycopg.pool"] == []


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[PostgresCluster]:
    """A server of this module's own: a test restarts it."""
    with PostgresCluster() as cluster:
        yield cluster


def test_after_a_restart_the_first_call_is_answered(own_cluster: PostgresCluster) -> None:
    """A server restarted under a full pool ended its connections: none of them is given
    out, so the first call after the restart is answered (each pooled connection was found
    lost in turn, 10 s of the store away each: 40 s with four)."""
    store = PostgresStore(own_cluster.new_database(), max_connections=3)
    try:
        assert store.count() == 0
        with store._db.connection(), store._db.connection(), store._db.connection():
            pass  # three connections in the pool
        own_cluster.stop()
        own_cluster.start()
        assert store.count() == 0
    finally:
        store.close()


def test_a_user_without_rights_on_the_schema_is_told_what_it_needs(
        filled_store: PostgresStore, postgres_url: str) -> None:
    """A user who may connect but was granted nothing on the store's schema gets what it
    needs, not a driver traceback; the store is not taken as away for the others."""
    role = "reader_" + str(abs(hash(postgres_url)) % 10_000)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'Reader-pw-1'")
    where = conninfo_to_dict(postgres_url)
    url = (f"postgresql://{role}:Reader-pw-1@{where['host']}:{where['port']}/"
           f"{where['dbname']}")
    try:
        with PostgresStore(url, migrate=False) as reader, \
                pytest.raises(IndexUnavailable, match=r"refused its user: permission denied"
                                                      r".*needs USAGE on the otel_diary"):
            reader.search("task")
        assert filled_store.count() == 3
    finally:
        filled_store.close()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize("password", ["Sec#ret-991", "Sec?ret-991", "Sec/ret-991"])
def test_a_password_libpq_takes_unencoded_is_never_shown(password: str) -> None:
    """libpq takes ``#`` or ``?`` in a password as they are; read as a web URL the store's
    name kept the start of the password, in every message. (libpq misreads a ``/`` there:
    the password is still never shown.)"""
    port = free_port()
    with PostgresStore(f"postgresql://diary:{password}@127.0.0.1:{port}/kb",
                       timeout_s=0.5) as store:
        if "/" not in password:
            assert store.where == f"postgresql://127.0.0.1:{port}/kb"
        with pytest.raises(IndexUnavailable) as failed:
            store.count()
    for shown in (store.where, str(failed.value)):
        assert "Sec" not in shown and "ret-991" not in shown


class StallingProxy:
    """Passes bytes between clients and the server until :meth:`stall`, then keeps every
    connection open and passes nothing (a server or network that stops answering)."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.stalled = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        """Stops listening and hangs up on every connection (a caller still waiting on
        one, the pool's worker opening one, gets its end)."""
        self.stalled.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self._listener.close()
        for held in self._held:
            held.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self._held += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self.stalled.is_set():
            ready, _, _ = select.select([source], [], [], 0.05)
            if ready and not self.stalled.is_set():
                data = source.recv(65536)
                if not data:
                    return
                sink.sendall(data)


def test_a_call_the_server_stops_answering_is_hung_up_on(
        own_cluster: PostgresCluster) -> None:
    """The server (or the network) stops answering in the middle of a call: the server's
    statement timeout bounds nothing then, and the call waited on its socket for good.
    The watchdog hangs up on it; the store is taken as away, saying why."""
    where = conninfo_to_dict(own_cluster.new_database())
    proxy = StallingProxy(own_cluster.port)
    store = PostgresStore(f"postgresql://postgres:{own_cluster.password}@127.0.0.1:"
                          f"{proxy.port}/{where['dbname']}", timeout_s=0.5)
    failure: list[BaseException] = []

    def call() -> None:
        try:
            store.count()
        except BaseException as exc:
            failure.append(exc)

    try:
        assert store.count() == 0
        proxy.stalled.set()
        caller = threading.Thread(target=call)
        caller.start()
        caller.join(60)  # a safety net: the call hung for good before
        assert not caller.is_alive()
        assert len(failure) == 1 and isinstance(failure[0], IndexUnavailable)
        assert "no answer within 2.5s" in str(failure[0])
        assert "no answer within 2.5s" in store._db.down_reason
    finally:
        store.close()
        proxy.close()


def test_connections_the_server_ended_while_idle_are_not_given_out(
        filled_store: PostgresStore, postgres_url: str) -> None:
    """The server ends the store's idle sessions (an idle timeout, an administrator): the
    next call gets a new connection and is answered, instead of finding a dead one and
    taking a healthy store as away."""
    dbname = conninfo_to_dict(postgres_url)["dbname"]
    try:
        with filled_store._db.connection(), filled_store._db.connection():
            pass  # two idle connections in the pool
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                "datname = %s AND application_name = 'otel-diary'", (dbname,)).fetchone()
        assert ended is not None and ended[0] == 2
        assert wait_until(lambda: _sessions(postgres_url, dbname) == 0, timeout=10)
        assert filled_store.count() == 3
        assert filled_store.search("task").hits
    finally:
        filled_store.close()


def _sessions(url: str, dbname: object) -> int:
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                            "application_name = 'otel-diary'", (dbname,)).fetchone()
    return int(row[0]) if row else 0


def test_a_url_libpq_refuses_is_named_by_its_reason_not_its_text() -> None:
    """A URL libpq cannot read is refused with libpq's reason; its text, read as a web
    URL, showed the start of a password holding ``?`` (``postgresql://diary:Sec``)."""
    with pytest.raises(ValueError, match="not a PostgreSQL URL: missing key/value") as bad:
        PostgresStore("postgresql://diary:Sec?ret=991@db.example/kb?sslmode=require&x")
    assert "Sec" not in str(bad.value)


def test_a_related_lookup_waiting_on_a_silent_store_ends_when_cut_short(
        own_cluster: PostgresCluster) -> None:
    """A shutdown near its end cuts the pipeline short: a Related lookup waiting for a
    connection to a store that does not answer ends then, and its run is written, instead
    of waiting out the store's timeout (here 60 s)."""
    where = conninfo_to_dict(own_cluster.new_database())
    proxy = StallingProxy(own_cluster.port)
    proxy.stalled.set()  # nothing passes: a connection is never made
    store = PostgresStore(f"postgresql://postgres:{own_cluster.password}@127.0.0.1:"
                          f"{proxy.port}/{where['dbname']}", timeout_s=60.0)
    sink = InMemorySink()
    pipeline = Pipeline(ORCHESTRATOR, [sink],
                        related_finder=LessonFirstFinder(store, IndexRelatedFinder(store)))
    writing = threading.Thread(target=pipeline.handle, args=(
        (task_record(1, "T-1", stderr=TS_STDERR), ChildSummary()),))
    try:
        writing.start()
        assert wait_until(lambda: store._db._in_use == 1)
        pipeline.cut_short()
        writing.join(30)
        assert not writing.is_alive()
        assert [diary.task_id for diary in sink.diaries] == ["T-1"]
    finally:
        store.close()
        proxy.close()


@pytest.mark.parametrize(("secret", "text", "expected"), [
    ("hunter22", "auth failed for hunter22x", "auth failed for [REDACTED]x"),
    ("p", "connection to port 1 failed: password=p", "connection to port 1 failed: "
                                                    "password=[REDACTED]"),
    ("ab1", "ab1:ab12 xab1", "[REDACTED]:ab12 xab1"),
    (None, "nothing to take", "nothing to take"),
])
def test_a_known_secret_is_taken_out_without_garbling_the_text(
        secret: str | None, text: str, expected: str) -> None:
    assert without(text, secret) == expected
