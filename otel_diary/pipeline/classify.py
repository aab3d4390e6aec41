"""Classify a root task span: ``SpanRecord`` + its children's summary -> ``TaskRun | None``.

A failed run yields ``None`` (nothing is written). A successful run is *recovered* on a
structural signal only (escalations, several build attempts, a no-op repair, or failed
child spans where the conventions say so), otherwise *completed*.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal, NamedTuple

from otel_diary.assembly.summary import MAX_LIST, ChildSummary, in_order, response_key
from otel_diary.conventions import Conventions
from otel_diary.pipeline.content import (
    call_arguments,
    final_answer,
    first_sentence,
    first_task,
    user_message,
)
from otel_diary.record import SpanRecord, as_bool, as_int, as_text, first, redact_tail

Outcome = Literal["completed", "recovered"]

MAX_STDERR = 64 * 1024
"""Longest stderr tail kept before rendering caps it further (taken from redacted text)."""
MAX_QUESTION = 160
"""Longest title taken from a run's first user message (cut after redaction)."""
MAX_ANSWER = 300
"""Longest first sentence of a final answer kept (cut after redaction)."""
MAX_CHILD_ERROR = 300
"""Longest first error of a failed call kept (class and message, cut after redaction)."""
MAX_ARGUMENTS = 200
"""Characters of what a tool call was given that a diary quotes."""
MAX_RECOVERIES = 3
"""Failed tools and models a diary tells how the run got past, the first to fail first."""
_RUN_SUFFIXES = (".run", ".kickoff")
"""What follows an agent's name in a span name that names it (smolagents' ``builder.run``,
a CrewAI crew's ``research.kickoff``)."""
_GENERATED_ID = re.compile(
    r"[_-][0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
"""A UUID an unnamed object's name ends with (an unnamed crew is ``Crew_<uuid>``): another
each run, no name."""


class Recovery(NamedTuple):
    """A tool or a model a failed call of the run was made to, and what came after it."""

    kind: Literal["tool", "model"]
    name: str
    again: bool
    """A call to it that ended after its first failed one succeeded (made again, or one
    running beside it: spans tell when calls ended, not why)."""
    instead: str | None = None
    """Of a model not called again: the model whose call succeeded last after it failed."""
    failed_with: str | None = None
    """Of a tool, when its calls' arguments were captured: what its first failed call was
    given (redacted, one line)."""
    succeeded_with: str | None = None
    """The same of its last call that succeeded, when it was called again with success."""


def recoveries(children: ChildSummary,
               text: Callable[[object, int], str | None]) -> tuple[Recovery, ...]:
    """How the run got past its failed tool and model calls, as far as their spans tell:
    whether each was called again with success, or (a model) another took over; with what
    a tool's calls were given, made one line by ``text``."""
    models = children.model_outcomes
    found: list[tuple[int, str, str, Recovery]] = []
    kinds: tuple[tuple[Literal["tool", "model"], dict[str, list[int]]], ...] = (
        ("tool", children.tool_outcomes), ("model", models))
    for kind, outcomes in kinds:
        for name, (failed, succeeded) in outcomes.items():
            if failed < 0:
                continue
            again = succeeded > failed or (succeeded == failed > 0)  # clocks may be coarse
            instead = None
            if kind == "model" and not again:
                later = [(ends[1], other) for other, ends in models.items()
                         if other != name and ends[1] > failed]
                instead = max(later)[1] if later else None
            given = children.tool_inputs.get(name) if kind == "tool" else None
            failed_with, succeeded_with = given or (None, None)
            found.append((failed, kind, name, Recovery(
                kind, name, again, instead, text(call_arguments(failed_with), MAX_ARGUMENTS),
                text(call_arguments(succeeded_with), MAX_ARGUMENTS) if again else None)))
    found.sort(key=lambda item: item[:3])
    return tuple(item[3] for item in found[:MAX_RECOVERIES])


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
    latency_ms: int | None
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
    tools: tuple[tuple[str, int], ...] = ()
    """Tool calls by tool name, most called first (when the spans name their tools)."""
    recoveries: tuple[Recovery, ...] = ()
    answer: str | None = None
    """The first sentence of the run's final answer, when content was captured (redacted)."""
    child_error: str | None = None
    """The first failed call's error class and short message (redacted, one line)."""
    stderr_is_stacktrace: bool = False
    """Whether ``stderr_tail`` is the end of a failed call's stack trace (the span had none)."""
    stderr_is_output: bool = False
    """Whether it is the end of what a failed call's result reported of the command it
    ran (its stderr, else its stdout; see :func:`otel_diary.record.reported`)."""

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"

    @property
    def span_id_hex(self) -> str:
        return f"{self.span_id:016x}"


WITHHELD = "<REDACTED>"
"""What an instrumentation puts in place of content it was told not to record (Claude
Code's ``user_prompt`` without ``OTEL_LOG_USER_PROMPTS=1``): no title."""


def _named(span_name: str) -> str:
    """The agent a task span's name names: ``builder.run`` -> ``builder``, an unnamed
    crew's ``Crew_<uuid>.kickoff`` -> ``Crew``."""
    for suffix in _RUN_SUFFIXES:
        if span_name.endswith(suffix):
            span_name = span_name[:-len(suffix)]
            break
    return _GENERATED_ID.sub("", span_name)


def _not_withheld(title: str | None) -> str | None:
    return None if title == WITHHELD else title


def as_list(value: object,
            redact: Callable[[str], str] | None = None) -> tuple[str, ...]:
    """Strings from a string list (or one string), each single-line, at most ``MAX_LIST``
    (each redacted first with ``redact``, as in :func:`as_text`)."""
    if isinstance(value, str):
        items: list[object] = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return ()
    texts = (as_text(item, 256, redact) for item in items[:MAX_LIST])
    return tuple(dict.fromkeys(text for text in texts if text))


def succeeded(record: SpanRecord, conventions: Conventions) -> bool:
    """Status is not ERROR and the build-verify flag is not false."""
    if record.is_error:
        return False
    return as_bool(first(record.attributes, conventions.build_passed)) is not False


def classify(record: SpanRecord, children: ChildSummary | None,
             conventions: Conventions,
             redact: Callable[[str], str] | None = None) -> TaskRun | None:
    """The run a root task span describes, or ``None`` when it failed.

    With ``redact``, every free-text fact of the span is redacted whole before it is cut
    to its length, so no cut can leave a fragment of a secret behind.
    """
    attrs = record.attributes
    conv = conventions.profile_for(attrs)  # itself, but for auto
    if not succeeded(record, conv):
        return None
    children = children or ChildSummary()
    if conv.recover_on_child_errors and children.last_run_failed \
            and children.last_ok_ns <= children.last_run_end_ns:
        return None  # the agent that ran last under it failed, and nothing went on after
    text = partial(as_text, redact=redact)

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
        if (own_in is not None or own_out is not None) and not (
                conv.response_id
                and response_key(first(attrs, conv.response_id)) in children.responses):
            # (usage with the id of a response under it is that call's, not the run's)
            tokens = max(own_in or 0, 0) + max(own_out or 0, 0)
        elif children.has_tokens:
            tokens = children.input_tokens + children.output_tokens
        else:
            tokens = None

    # A span sent without its times (0: unset, as a broken exporter may send it) is dated
    # by its start, else by now, and its latency is unknown: not 1970, nor 0 ms, nor the
    # 56 years since 1970 when only the start is missing.
    start_ns, end_ns = record.start_ns, record.end_ns
    ended_ns = end_ns if end_ns > 0 else start_ns if start_ns > 0 else time.time_ns()
    latency = as_int(first(attrs, conv.latency_ms))
    if latency is None or latency < 0:
        latency = (end_ns - start_ns) // 1_000_000 if 0 < start_ns <= end_ns else None

    file_ops = as_int(first(attrs, conv.file_operations))
    model = text(first(attrs, conv.model), 256)
    models = tuple(in_order(children.models))
    if model is None and models:
        model = models[0]

    # Under ``auto`` the children were read under every profile's names: what the task's
    # own profile does not read is left out, so its diary is the one that profile gives.
    service = text(first(record.resource, conv.agent_resource), 256)
    if conv.agent_from_span_name and service is not None \
            and service.startswith("unknown_service"):
        # The SDK's stand-in when no service name was set: the span's own name (a LangGraph
        # graph's, an agent workflow's; smolagents names an agent's ``<agent>.run``, CrewAI
        # a crew's ``<crew>.kickoff``) says more about who did the work.
        service = text(_named(record.name), 256) or service
    agent = (text(first(attrs, conv.agent), 256)
             or next((text(name, 256) for name in in_order(children.agents)
                   if conv.child_agent), None)
             or service
             or "unknown")
    # the task span's own messages (else the first task a crew's output names), else
    # (none, or none in what it recorded: a graph's state, an agent's call arguments)
    # those of the spans under it, else a model call's
    question = ((user_message(first(attrs, conv.input_messages))
                 or first_task(first(attrs, conv.output_messages))
                 or user_message(children.first_input)) if conv.input_messages else None) \
        or (children.asked if conv.flat_input_messages else None)
    answer = first_sentence(
        ((final_answer(first(attrs, conv.output_messages))
          or final_answer(children.last_output)) if conv.output_messages else None)
        or (children.answered if conv.flat_output_messages else None))
    stderr = first(attrs, conv.stderr_tail)
    stderr_tail = None
    from_call = from_output = False  # a failed call's stack trace, or its command's output
    if not (isinstance(stderr, str) and stderr.strip()) and conv.recover_on_child_errors:
        stderr, from_call = children.stacktrace, children.stacktrace is not None
        from_output = from_call and children.stacktrace_is_output
    if isinstance(stderr, str) and stderr.strip():
        stderr_tail = (redact_tail(stderr, MAX_STDERR, redact) if redact is not None
                       else stderr[-MAX_STDERR:])
    child_error = (text(children.first_error, MAX_CHILD_ERROR)
                   if conv.recover_on_child_errors else None)

    return TaskRun(
        trace_id=record.trace_id,
        span_id=record.span_id,
        task_id=text(first(attrs, conv.task_id), 256) or record.span_id_hex,
        title=(_not_withheld(text(first(attrs, conv.title), 512)) or text(question, MAX_QUESTION)
               or text(record.name, 512) or "task"),
        agent=agent,
        outcome="recovered" if recovered else "completed",
        end_ns=ended_ns,
        latency_ms=latency,
        trigger=text(first(attrs, conv.trigger), 256),
        workflow=text(first(attrs, conv.workflow), 256),
        route=text(first(attrs, conv.route), 256),
        model=model,
        models=models,
        tokens=tokens,
        file_operations=file_ops if file_ops is None or file_ops >= 0 else None,
        build_attempts=attempts,
        escalations=escalations,
        repair_no_files=repair_no_files,
        stderr_tail=stderr_tail,
        related=as_list(first(attrs, conv.related), redact),
        failed_children=children.failed_spans if conv.recover_on_child_errors else 0,
        child_error_types=(tuple(in_order(children.error_types))
                           if conv.recover_on_child_errors else ()),
        tool_calls=children.tool_calls,
        tools=(tuple(sorted(children.tools.items(), key=lambda item: (-item[1], item[0])))
               if conv.tool_name else ()),
        recoveries=recoveries(children, text) if conv.recover_on_child_errors else (),
        answer=text(answer, MAX_ANSWER),
        child_error=child_error,
        stderr_is_stacktrace=from_call and not from_output and stderr_tail is not None,
        stderr_is_output=from_output and stderr_tail is not None,
    )
