"""The pipeline's counters, apart from the pipeline: a processor whose diaries are off has
them too, and loads nothing more."""

from __future__ import annotations

from otel_diary.counters import Counters


class Stats(Counters):
    """Counters of what the pipeline (and the source feeding it) did; read, never reset."""

    tasks: int
    diaries: int
    failed_runs: int
    dropped_spans: int
    dropped_tasks: int
    sink_errors: int
    pipeline_errors: int
    reflection_fallbacks: int
    traces_evicted: int
    traces_expired: int
    index_errors: int
