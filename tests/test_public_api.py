"""The public surface is deliberate: a change to it shows up here."""

from __future__ import annotations

import otel_diary
import otel_diary.testing


def test_all_is_pinned() -> None:
    """`otel_diary.__all__` lists exactly the public names."""
    assert sorted(otel_diary.__all__) == sorted([
        "ORCHESTRATOR", "ChildSummary", "Conventions", "Diary", "DiaryError",
        "DiarySpanProcessor", "GENAI", "ConventionsError", "DiarySpanExporter",
        "load_conventions", "FolderSink", "Pipeline", "Reflector", "Settings", "Sink",
        "SpanRecord", "Stats", "StubReflector", "TaskRun", "TraceAssembler",
        "UnsafePathError", "classify", "install", "render",
        "HubSink", "LLMReflector", "SecretRedactor", "SpoolFullError",
    ])
    for name in otel_diary.__all__:
        assert hasattr(otel_diary, name)


def test_testing_module_surface() -> None:
    """`otel_diary.testing` ships the in-memory sink."""
    assert otel_diary.testing.__all__ == ["InMemorySink"]
