"""Classify a root task span: ``SpanRecord`` + its children's summary -> ``TaskRun | None``.

A failed run yields ``None`` (nothing is written). A successful run is *recovered* on a
structural signal only (escalations, several build attempts, a no-op repair, or failed
child spans where the conventions say so), otherwise *completed*.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from otel_diary.conventions import Conventions
from otel_diary.record import SpanRecord

Outcome = Literal["completed", "recovered"]

MAX_TEXT = 4096
"""Longest single-line fact kept (titles, names, ids); longer values are cut."""
MAX_STDERR = 64 * 1024
"""Longest stderr tail kept before rendering caps it further."""
MAX_LIST = 16


UNNAMED_ERROR = "error"
"""The error type recorded for a failed span that names none."""


@dataclass
class ChildSummary:
    """What the spans under a task contributed: token sums, models, failures, tool calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    has_tokens: bool = False
    models: list[str] = field(default_factory=list)
    error_types: list[str] = field(default_factory=list)
    failed_spans: int = 0
    tool_calls: int = 0
    spans: int = 0

    def add(self, attributes: Mapping[str, object], is_error: bool,
            conventions: Conventions) -> None:
        """Fold one child span's attributes into the summary."""
        self.spans += 1
        tokens_in = as_int(first(attributes, conventions.input_tokens))
        tokens_out = as_int(first(attributes, conventions.output_tokens))
        if tokens_in is not None and tokens_in >= 0:
            self.input_tokens += tokens_in
            self.has_tokens = True
        if tokens_out is not None and tokens_out >= 0:
            self.output_tokens += tokens_out
            self.has_tokens = True
        model = as_text(first(attributes, conventions.model))
        if model and model not in self.models and len(self.models) < MAX_LIST:
            self.models.append(model)
        if as_text(first(attributes, conventions.operation)) == conventions.tool_operation:
            self.tool_calls += 1
        if is_error:
            self.failed_spans += 1
            error_type = error_name(first(attributes, conventions.error_type)) or UNNAMED_ERROR
            if error_type not in self.error_types and len(self.error_types) < MAX_LIST:
                self.error_types.append(error_type)

    def merge(self, other: ChildSummary) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.has_tokens = self.has_tokens or other.has_tokens
        for model in other.models:
            if model not in self.models and len(self.models) < MAX_LIST:
                self.models.append(model)
        for error_type in other.error_types:
            if error_type not in self.error_types and len(self.error_types) < MAX_LIST:
                self.error_types.append(error_type)
        self.failed_spans += other.failed_spans
        self.tool_calls += other.tool_calls
        self.spans += other.spans


@dataclass(frozen=True)
class TaskRun:
    """A successful task run with every fact the diary may state (``None``: unknown)."""

    trace_id: int
    span_id: int
    task_id: str
    title: str
    agent: str
    outcome: Outcome
    end_ns: int
    latency_ms: int
    trigger: str | None = None
    workflow: str | None = None
    route: str | None = None
    model: str | None = None
    models: tuple[str, ...] = ()
    tokens: int | None = None
    file_operations: int | None = None
    build_attempts: int | None = None
    escalations: int = 0
    repair_no_files: bool = False
    stderr_tail: str | None = None
    related: tuple[str, ...] = ()
    failed_children: int = 0
    child_error_types: tuple[str, ...] = ()
    tool_calls: int = 0

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"

    @property
    def span_id_hex(self) -> str:
        return f"{self.span_id:016x}"


def first(attributes: Mapping[str, object], names: tuple[str, ...]) -> object:
    """The value of the first of ``names`` present in ``attributes``, else ``None``."""
    for name in names:
        value = attributes.get(name)
        if value is not None:
            return value
    return None


def as_text(value: object, limit: int = MAX_TEXT) -> str | None:
    """A single-line string of at most ``limit`` characters, or ``None`` for nothing."""
    if value is None or isinstance(value, (bytes, bytearray)):
        return None
    if not isinstance(value, str):
        if isinstance(value, (list, tuple)):
            return None
        value = str(value)
    text = " ".join(value.split())
    return text[:limit] or None


def error_name(value: object) -> str | None:
    """An ``error.type`` as text; a stringified class (``<class 'a.B'>``) becomes ``a.B``."""
    text = as_text(value, 256)
    if text and text.startswith("<class '") and text.endswith("'>"):
        return text[8:-2] or None
    return text


def as_int(value: object) -> int | None:
    """An integer from an int, an integral float or a numeric string; bools are not ints."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 32:
            return None
        try:
            return int(text)
        except ValueError:
            return None
    return None


def as_bool(value: object) -> bool | None:
    """A bool from a bool or a conventional string (``"true"``/``"false"``, ``"1"``/``"0"``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
    if isinstance(value, int):
        return value != 0
    return None


def as_list(value: object) -> tuple[str, ...]:
    """Strings from a string list (or one string), each single-line, at most ``MAX_LIST``."""
    if isinstance(value, str):
        items: list[object] = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return ()
    texts = (as_text(item, 256) for item in items[:MAX_LIST])
    return tuple(dict.fromkeys(text for text in texts if text))


def succeeded(record: SpanRecord, conventions: Conventions) -> bool:
    """Status is not ERROR and the build-verify flag is not false."""
    if record.is_error:
        return False
    return as_bool(first(record.attributes, conventions.build_passed)) is not False


def classify(record: SpanRecord, children: ChildSummary | None,
             conventions: Conventions) -> TaskRun | None:
    """The run a root task span describes, or ``None`` when it failed."""
    if not succeeded(record, conventions):
        return None
    attrs = record.attributes
    children = children or ChildSummary()
    conv = conventions

    escalations = max(as_int(first(attrs, conv.escalations)) or 0, 0)
    attempts = as_int(first(attrs, conv.build_attempts))
    if attempts is not None and attempts < 0:
        attempts = None
    repair_no_files = as_bool(first(attrs, conv.repair_no_files)) is True
    recovered = escalations > 0 or (attempts or 0) > 1 or repair_no_files
    if conv.recover_on_child_errors and children.failed_spans > 0:
        recovered = True

    tokens = as_int(first(attrs, conv.tokens))
    if tokens is None or tokens < 0:
        own_in = as_int(first(attrs, conv.input_tokens))
        own_out = as_int(first(attrs, conv.output_tokens))
        if own_in is not None or own_out is not None:
            tokens = max(own_in or 0, 0) + max(own_out or 0, 0)
        elif children.has_tokens:
            tokens = children.input_tokens + children.output_tokens
        else:
            tokens = None

    latency = as_int(first(attrs, conv.latency_ms))
    if latency is None or latency < 0:
        latency = max(record.end_ns - record.start_ns, 0) // 1_000_000

    file_ops = as_int(first(attrs, conv.file_operations))
    model = as_text(first(attrs, conv.model), 256)
    models = tuple(children.models)
    if model is None and models:
        model = models[0]

    agent = (as_text(first(attrs, conv.agent), 256)
             or as_text(first(record.resource, conv.agent_resource), 256)
             or "unknown")
    stderr = first(attrs, conv.stderr_tail)
    stderr_tail = stderr[-MAX_STDERR:] if isinstance(stderr, str) and stderr.strip() else None

    return TaskRun(
        trace_id=record.trace_id,
        span_id=record.span_id,
        task_id=as_text(first(attrs, conv.task_id), 256) or record.span_id_hex,
        title=as_text(first(attrs, conv.title), 512) or as_text(record.name, 512) or "task",
        agent=agent,
        outcome="recovered" if recovered else "completed",
        end_ns=record.end_ns,
        latency_ms=latency,
        trigger=as_text(first(attrs, conv.trigger), 256),
        workflow=as_text(first(attrs, conv.workflow), 256),
        route=as_text(first(attrs, conv.route), 256),
        model=model,
        models=models,
        tokens=tokens,
        file_operations=file_ops if file_ops is None or file_ops >= 0 else None,
        build_attempts=attempts,
        escalations=escalations,
        repair_no_files=repair_no_files,
        stderr_tail=stderr_tail,
        related=as_list(first(attrs, conv.related)),
        failed_children=children.failed_spans if conv.recover_on_child_errors else 0,
        child_error_types=tuple(children.error_types) if conv.recover_on_child_errors else (),
        tool_calls=children.tool_calls,
    )
