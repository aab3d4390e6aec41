"""otel-diary: turn AI agents' OpenTelemetry traces into diaries and lessons.

Every root task span that ends successfully becomes a short markdown document that the
next agent can find. Attach it in one line::

    import otel_diary
    otel_diary.install()          # the global TracerProvider; KB_DIARIES_ENABLED=1
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_diary.version import __version__ as __version__

if TYPE_CHECKING:
    from otel_diary.assembly.inprocess import TraceAssembler
    from otel_diary.assembly.summary import ChildSummary
    from otel_diary.conventions import GENAI, ORCHESTRATOR, Conventions, load_conventions
    from otel_diary.errors import ConventionsError, DiaryError, SpoolFullError, UnsafePathError
    from otel_diary.pipeline.classify import TaskRun, classify
    from otel_diary.pipeline.core import Pipeline
    from otel_diary.pipeline.llm import LLMReflector
    from otel_diary.pipeline.redact import SecretRedactor
    from otel_diary.pipeline.reflect import Reflector, StubReflector
    from otel_diary.pipeline.render import Diary, render
    from otel_diary.pipeline.stats import Stats
    from otel_diary.record import SpanRecord
    from otel_diary.settings import Settings
    from otel_diary.sinks.base import Sink
    from otel_diary.sinks.folder import FolderSink
    from otel_diary.sinks.hub.sink import HubSink
    from otel_diary.sources.attach import install
    from otel_diary.sources.exporter import DiarySpanExporter
    from otel_diary.sources.processor import DiarySpanProcessor

_EXPORTS = {
    "ChildSummary": "otel_diary.assembly.summary",
    "Conventions": "otel_diary.conventions",
    "ConventionsError": "otel_diary.errors",
    "Diary": "otel_diary.pipeline.render",
    "DiaryError": "otel_diary.errors",
    "DiarySpanExporter": "otel_diary.sources.exporter",
    "DiarySpanProcessor": "otel_diary.sources.processor",
    "FolderSink": "otel_diary.sinks.folder",
    "GENAI": "otel_diary.conventions",
    "HubSink": "otel_diary.sinks.hub.sink",
    "LLMReflector": "otel_diary.pipeline.llm",
    "ORCHESTRATOR": "otel_diary.conventions",
    "Pipeline": "otel_diary.pipeline.core",
    "Reflector": "otel_diary.pipeline.reflect",
    "SecretRedactor": "otel_diary.pipeline.redact",
    "Settings": "otel_diary.settings",
    "Sink": "otel_diary.sinks.base",
    "SpanRecord": "otel_diary.record",
    "SpoolFullError": "otel_diary.errors",
    "Stats": "otel_diary.pipeline.stats",
    "StubReflector": "otel_diary.pipeline.reflect",
    "TaskRun": "otel_diary.pipeline.classify",
    "TraceAssembler": "otel_diary.assembly.inprocess",
    "UnsafePathError": "otel_diary.errors",
    "classify": "otel_diary.pipeline.classify",
    "install": "otel_diary.sources.attach",
    "load_conventions": "otel_diary.conventions",
    "render": "otel_diary.pipeline.render",
}
"""Public name -> the module that defines it, imported on first use: importing the package
(as every process under ``opentelemetry-instrument`` does) costs little until a name is read."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_diary' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "GENAI",
    "ORCHESTRATOR",
    "ChildSummary",
    "Conventions",
    "ConventionsError",
    "Diary",
    "DiaryError",
    "DiarySpanExporter",
    "DiarySpanProcessor",
    "FolderSink",
    "HubSink",
    "LLMReflector",
    "Pipeline",
    "Reflector",
    "SecretRedactor",
    "Settings",
    "Sink",
    "SpanRecord",
    "SpoolFullError",
    "Stats",
    "StubReflector",
    "TaskRun",
    "TraceAssembler",
    "UnsafePathError",
    "classify",
    "install",
    "load_conventions",
    "render",
]
