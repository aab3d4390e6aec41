"""Diaries delivered to PostgreSQL through the spool: a store that is down or refuses the
password holds nothing up, loses nothing and duplicates nothing; replicas migrate once."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from otel_diary import ORCHESTRATOR, ChildSummary, Settings
from otel_diary.index.postgres import PostgresStore
from otel_diary.sinks.store import StoreSink
from otel_diary.wiring import build_pipeline
from tests.index.test_store_contract import render
from tests.support.kb import TS_STDERR, task_record
from tests.support.loopback import wait_until
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[PostgresCluster]:
    """A server of this module's own: these tests stop and start it."""
    with PostgresCluster() as cluster:
        yield cluster


def sink_for(url: str, spool: Path) -> StoreSink:
    return StoreSink(PostgresStore(url, timeout_s=2.0), spool_dir=spool, timeout_s=2.0,
                     initial_backoff_s=0.05, max_backoff_s=0.3, poll_s=0.1)


def test_diaries_wait_in_the_spool_while_the_store_is_down(
        own_cluster: PostgresCluster, tmp_path: Path) -> None:
    """With the server stopped mid-run, diaries are spooled (writes return, retries are
    counted) and all arrive once it is back: N delivered, none lost, none twice."""
    url = own_cluster.new_database()
    sink = sink_for(url, tmp_path / "spool")
    diaries = [render(task_record(n, f"T-{n}", stderr=TS_STDERR if n % 2 else None))
               for n in range(30)]
    try:
        for diary in diaries[:10]:
            sink.write(diary)
        assert sink.flush(30)
        own_cluster.stop()
        try:
            for diary in diaries[10:]:
                assert sink.write(diary).startswith("hub:")
            assert not sink.flush(1.0)
            assert len(sink.spool) == 20
            assert wait_until(lambda: sink.stats.retries >= 1, timeout=30)  # tried, failed
        finally:
            own_cluster.start()
        assert sink.flush(60)
        assert sink.stats.spooled == 30
        assert sink.stats.delivered == 30
    finally:
        sink.close()
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, count(*) FROM otel_diary.diaries GROUP BY id").fetchall()
    assert sorted(ident for ident, _ in rows) == sorted(d.id for d in diaries)
    assert {count for _, count in rows} == {1}
    with PostgresStore(url) as store:
        assert store.lesson("code:TS2345").runs == 15


def test_a_wrong_password_names_the_host_not_the_password(
        own_cluster: PostgresCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A wrong password keeps the diary spooled and logs why, naming the host and port;
    neither the wrong password nor the right one is in any log line."""
    own_cluster.new_database()
    wrong = "Wr0ng-Pa55word-xyz"
    sink = sink_for(own_cluster.url("db_1", password=wrong), tmp_path / "spool")
    try:
        with caplog.at_level(logging.DEBUG):
            sink.write(render(task_record(1, "T-1")))
            assert not sink.flush(3.0)
    finally:
        sink.close()
    assert sink.stats.delivered == 0
    assert len(sink.spool) == 1
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert f"127.0.0.1:{own_cluster.port}" in text
    assert "password authentication failed" in text
    assert wrong not in text
    assert own_cluster.password not in text


def test_the_pipeline_writes_to_the_store_and_relates_from_it(
        postgres_url: str, tmp_path: Path) -> None:
    """With OTEL_DIARY_STORE_URL the pipeline delivers each diary to the store, and a later
    run of the same error lists the earlier diary and its lesson in "Related"."""
    settings = Settings(enabled=True, store_url=postgres_url, spool_dir=tmp_path / "spool",
                        retry_initial_backoff_s=0.05)
    pipeline = build_pipeline(settings, ORCHESTRATOR)
    try:
        first = pipeline.handle((task_record(1, "T-1", stderr=TS_STDERR), ChildSummary()))
        sink = pipeline.sinks[0]
        assert isinstance(sink, StoreSink)
        assert sink.flush(30)
        second = pipeline.handle((task_record(2, "T-2", stderr=TS_STDERR), ChildSummary()))
        assert sink.flush(30)
    finally:
        pipeline.close()
    assert first is not None and second is not None
    assert not (tmp_path / "kb").exists()
    with PostgresStore(postgres_url) as store:
        assert store.count() == 2
        lesson = store.lesson("code:TS2345")
    assert lesson.runs == 2
    assert list(second.related[:2]) == [lesson.id, first.id]


def test_the_url_password_is_never_shown() -> None:
    """A store names its database by host, port and name only; a connection string that
    is not a URL is refused without being echoed."""
    store = PostgresStore("postgresql://diary:hunter2@db.example:5432/kb?sslmode=require")
    assert store.where == "postgresql://db.example:5432/kb"
    store.close()
    with pytest.raises(ValueError) as refused:
        PostgresStore("host=db.example password=hunter2")
    assert "hunter2" not in str(refused.value)


def test_a_stalled_store_is_waited_for_once_not_per_diary(
        postgres_url: str, tmp_path: Path) -> None:
    """With the store's tables locked by another session, the first Related lookup waits
    out the timeout; the store is then taken as away, so the next diaries are written at
    once (no Related from it), spooled for the store, and delivered once it is free."""
    settings = Settings(enabled=True, store_url=postgres_url, spool_dir=tmp_path / "spool",
                        retry_initial_backoff_s=0.05, store_timeout_s=1.0)
    pipeline = build_pipeline(settings, ORCHESTRATOR)
    sink = pipeline.sinks[0]
    assert isinstance(sink, StoreSink)
    store = sink._client.store
    try:
        pipeline.handle((task_record(0, "T-0", stderr=TS_STDERR), ChildSummary()))
        assert sink.flush(30)
        with psycopg.connect(postgres_url) as locker:
            locker.execute("LOCK TABLE otel_diary.diaries, otel_diary.signatures "
                           "IN ACCESS EXCLUSIVE MODE")
            diaries = [pipeline.handle((task_record(n, f"T-{n}", stderr=TS_STDERR),
                                        ChildSummary())) for n in range(1, 6)]
            assert all(diary is not None and diary.related == () for diary in diaries)
            assert store._db.down_reason.endswith("did not answer within 1s")
            locker.rollback()
        assert sink.flush(60)
    finally:
        pipeline.close()
    with PostgresStore(postgres_url) as fresh:
        assert fresh.count() == 6
