"""Shared fixtures: a real TracerProvider wired to a DiarySpanProcessor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from opentelemetry import context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_diary import DiarySpanProcessor
from otel_diary.testing import InMemorySink
from tests.support.loopback import hub  # noqa: F401  (fixture)
from tests.support.postgres import postgres_cluster, postgres_url  # noqa: F401  (fixtures)
from tests.support.serve_path import SameInServe

# No test fails on time: the machines that run the suite are shared and noisy, so an
# example that takes longer than Hypothesis's default deadline is no failure.
settings.register_profile("untimed", deadline=None)
settings.load_profile("untimed")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's own otel-diary environment or writes to their home."""
    import os

    for name in list(os.environ):
        if name.startswith("OTEL_DIARY_") or name in ("KB_DIARIES_ENABLED", "MOTHER_AI_URL",
                                                      "MOTHER_AI_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


@pytest.fixture(autouse=True)
def _no_span_left_current() -> Iterator[None]:
    """A test that leaves a span current (an instrumentation that never detaches its run's
    context) fails itself, and leaves the tests after it in its process a clean context:
    their spans would join that span's trace, and write no diary."""
    yield
    left = trace.get_current_span()
    if left.get_span_context().is_valid:
        context.attach(context.Context())
        pytest.fail(f"a span was left current: {getattr(left, 'name', left)!r}")


class Harness:
    """A provider, its diary processor and an in-memory sink; after each test that uses
    the fixture, ``serve`` must write the same diaries from the spans the provider ended."""

    def __init__(self, **settings: Any) -> None:
        self.sink = InMemorySink()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                                       shutdown_on_exit=False)
        self.processor = DiarySpanProcessor(sinks=[self.sink], **{"enabled": True, **settings})
        self.provider.add_span_processor(self.processor)
        self.serve = SameInServe(self.provider, str(settings.get("conventions", "orchestrator")))
        self.tracer = self.provider.get_tracer("tests")

    def flush(self) -> None:
        assert self.processor.force_flush(10_000)


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.provider.shutdown()
    h.serve.check(h.sink.diaries)
