"""otel-diary: turn an AI-agent orchestrator's OpenTelemetry traces into diaries.

Every root task span that ends successfully becomes a short markdown document that the
next agent can find. Attach it in one line::

    import otel_diary
    otel_diary.install()          # the global TracerProvider; KB_DIARIES_ENABLED=1
"""

from otel_diary.assembly.inprocess import TraceAssembler
from otel_diary.conventions import GENAI, ORCHESTRATOR, Conventions, load_conventions
from otel_diary.errors import ConventionsError, DiaryError, SpoolFullError, UnsafePathError
from otel_diary.pipeline.classify import TaskRun, classify
from otel_diary.pipeline.core import Pipeline, Stats
from otel_diary.pipeline.llm import LLMReflector
from otel_diary.pipeline.redact import SecretRedactor
from otel_diary.pipeline.reflect import Reflector, StubReflector
from otel_diary.pipeline.render import Diary, render
from otel_diary.record import ChildSummary, SpanRecord
from otel_diary.settings import Settings
from otel_diary.sinks.base import Sink
from otel_diary.sinks.folder import FolderSink
from otel_diary.sinks.hub.sink import HubSink
from otel_diary.sources.attach import install
from otel_diary.sources.exporter import DiarySpanExporter
from otel_diary.sources.processor import DiarySpanProcessor
from otel_diary.version import __version__ as __version__

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
