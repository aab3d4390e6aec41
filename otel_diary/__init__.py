"""otel-diary: turn an AI-agent orchestrator's OpenTelemetry traces into diaries.

Every root task span that ends successfully becomes a short markdown document that the
next agent can find. Attach it in one line::

    import otel_diary
    otel_diary.install()          # the global TracerProvider; KB_DIARIES_ENABLED=1
"""

from ._assemble import TraceAssembler
from ._classify import ChildSummary, TaskRun, classify
from ._conventions import ORCHESTRATOR, Conventions
from ._exporter import DiarySpanExporter
from ._hub import HubSink
from ._llm import LLMReflector
from ._pipeline import Pipeline, Stats
from ._processor import DiarySpanProcessor, install
from ._profiles import GENAI, ConventionsError, load_conventions
from ._record import SpanRecord
from ._redact import SecretRedactor
from ._reflect import Reflector, StubReflector
from ._render import Diary, render
from ._settings import Settings
from ._sinks import DiaryError, FolderSink, Sink, UnsafePathError
from ._spool import SpoolFullError

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
__version__ = "0.1.0"
