"""The index stages of the pipeline (Related, a run's lesson) when the store behind them
is away."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otel_diary import ORCHESTRATOR, ChildSummary, Settings
from otel_diary.wiring import build_pipeline
from tests.support.kb import TS_STDERR, task_record
from tests.support.postgres import free_port


def test_a_store_away_is_one_line_with_its_reason(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Diaries are still written while the store cannot be reached; the lookups that
    failed say why in one line each, not a traceback, and the password in no line."""
    url = f"postgresql://diary:s3cret-pw@127.0.0.1:{free_port()}/kb"
    settings = Settings(enabled=True, store_url=url, spool_dir=tmp_path / "spool",
                        store_timeout_s=0.5, shutdown_timeout_ms=500)
    pipeline = build_pipeline(settings, ORCHESTRATOR)
    try:
        with caplog.at_level(logging.DEBUG, logger="otel_diary"):
            diaries = [pipeline.handle((task_record(n, f"T-{n}", stderr=TS_STDERR),
                                        ChildSummary())) for n in range(3)]
    finally:
        pipeline.close()
    assert all(diary is not None for diary in diaries)
    lookups = [record for record in caplog.records
               if record.levelno >= logging.WARNING and "could not look up" in record.message]
    assert len(lookups) == 2  # Related, and the run's lesson
    for record in lookups:
        assert record.exc_info is None
        assert "cannot reach the store at postgresql://127.0.0.1:" in record.message
    assert not any("s3cret-pw" in record.getMessage() for record in caplog.records)
