"""Trace -> diary: a ``diary.write`` span, linked to the task span, for each diary written.

A pipeline listener for the in-process source. The span goes to the app's own tracer
provider, so the trace backend shows where a task's experience went. It starts a trace of
its own (a span link, not a parent, points at the task span) and carries no task attribute,
so it never becomes a task run itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.util.types import AttributeValue

from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.render import Diary

SPAN_NAME = "diary.write"
DIARY_ID = "diary.id"
DIARY_PATH = "diary.path"
"""Where the diary was written: the local file, else its path in the knowledge base."""
DIARY_OUTCOME = "diary.outcome"
DIARY_TASK_ID = "diary.task.id"
DIARY_HUB_URL = "diary.hub.url"
"""The knowledge hub location, when a sink delivered the diary to one (an HTTP URL)."""
DIARY_HUB_PATH = "diary.hub.path"
"""The diary's path in the knowledge hub, when a sink queued it for delivery (``hub:…``)."""


class DiaryWriteSpans:
    """Emits one short ``diary.write`` span per delivered diary on ``tracer_provider``."""

    def __init__(self, tracer_provider: trace.TracerProvider) -> None:
        self._tracer = tracer_provider.get_tracer("otel_diary")

    def __call__(self, diary: Diary, run: TaskRun, locations: Sequence[str]) -> None:
        attributes: dict[str, AttributeValue] = {
            DIARY_ID: diary.id,
            DIARY_OUTCOME: diary.outcome,
            DIARY_TASK_ID: diary.task_id,
            DIARY_PATH: diary.path,
        }
        for location in locations:
            if location.startswith(("http://", "https://")):
                attributes.setdefault(DIARY_HUB_URL, location)
            elif location.startswith("hub:"):
                attributes.setdefault(DIARY_HUB_PATH, location[4:])
            elif os.path.isabs(location):
                attributes[DIARY_PATH] = location
        task = SpanContext(trace_id=run.trace_id, span_id=run.span_id, is_remote=True,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))
        # An empty context: the worker has no current span, and this span must not
        # become a child of whatever an app thread might have made current.
        span = self._tracer.start_span(SPAN_NAME, context=Context(), kind=SpanKind.INTERNAL,
                                       links=[Link(task)], attributes=attributes)
        span.end()
