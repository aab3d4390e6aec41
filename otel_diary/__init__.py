"""otel-diary: turn an AI-agent orchestrator's OpenTelemetry traces into diaries.

Every root task span that ends successfully becomes a short markdown document that the
next agent can find. Attach it in one line::

    import otel_diary
    otel_diary.install()          # the global TracerProvider; KB_DIARIES_ENABLED=1
"""

from ._assemble import TraceAssembler
from ._classify import ChildSummary, TaskRun, classify
from ._conventions import ORCHESTRATOR, Conventions
from ._pipeline import Pipeline, Stats
from ._processor import DiarySpanProcessor, install
from ._record import SpanRecord
from ._reflect import Reflector, StubReflector
from ._render import Diary, render
from ._settings import Settings
from ._sinks import DiaryError, FolderSink, Sink, UnsafePathError

__all__ = [
    "ORCHESTRATOR",
    "ChildSummary",
    "Conventions",
    "Diary",
    "DiaryError",
    "DiarySpanProcessor",
    "FolderSink",
    "Pipeline",
    "Reflector",
    "Settings",
    "Sink",
    "SpanRecord",
    "Stats",
    "StubReflector",
    "TaskRun",
    "TraceAssembler",
    "UnsafePathError",
    "classify",
    "install",
    "render",
]
__version__ = "0.1.0"
