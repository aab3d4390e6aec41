"""Reflection: ``TaskRun`` -> the "What was learned" paragraph.

A :class:`Reflector` may call a language model; :class:`StubReflector` is the
deterministic, fact-based default and the fallback whenever a reflector fails.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from otel_diary.index.templates import first_error_line
from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.render import called, code, named_errors
from otel_diary.text import cut, one_line

MAX_LEARNED = 800
"""Longest "What was learned" paragraph, in characters."""


@runtime_checkable
class Reflector(Protocol):
    """Writes 3 to 5 sentences of insight about a run (at most 800 characters)."""

    def reflect(self, run: TaskRun) -> str: ...


def failed_line(stderr: str | None) -> str | None:
    """The first line of ``stderr`` that reads as an error, as the lessons and templates
    read it (a Python traceback's exception line), else its last non-empty line."""
    if not stderr:
        return None
    found = first_error_line(stderr)
    if found:
        return found
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else None


class StubReflector:
    """A deterministic paragraph built from the run's facts: no model, no I/O.

    It states what the facts show and nothing more: for a recovered run, what failed and
    what it took to get past it; for a completed one, that nothing needed recovery.
    Figures already under "What was done" are not repeated, and no stock advice is added:
    the same words in every diary would only blur search.
    """

    def reflect(self, run: TaskRun) -> str:
        how = _how(run)
        sentences: list[str] = []
        if run.outcome == "completed":
            first = f"{how} completed this task with no recovery needed"
            if run.build_attempts == 1:
                first += ": the build passed its first verification"
            sentences.append(first + ".")
        else:
            sentences.extend(_what_failed(run))
            if run.repair_no_files:
                sentences.append("A repair attempt changed no files: when a fix is a no-op, "
                                 "change the approach instead of retrying it.")
        if run.answer:
            sentences.append(f'The final answer began: "{one_line(run.answer, 200)}"')
        return cut(" ".join(sentences), MAX_LEARNED)


def _what_failed(run: TaskRun) -> list[str]:
    """What went wrong first in a recovered run and what got it past that, as sentences."""
    sentences: list[str] = []
    line = (None if run.stderr_is_stacktrace or run.stderr_is_output  # a call's: said below
            else failed_line(run.stderr_tail))
    attempts = run.build_attempts or 0
    if line:
        quoted = one_line(line, 160).rstrip(".")
        sentences.append(f'The build failed with "{quoted}".' if attempts > 1
                         else f'The build reported "{quoted}".')
    how = []
    if run.escalations:
        how.append(f"{run.escalations} escalation(s)")
    if attempts > 1:
        how.append(f"{attempts} build attempts")
    if how:
        after = " and ".join(how)
        sentences.append(f"{_how(run)} got past it after {after}." if line
                         else f"{_how(run)} completed this task after {after}.")
    if run.failed_children:
        kinds = named_errors(run)[:3]
        named = f" ({one_line(', '.join(kinds), 160)})" if kinds else ""
        sentences.append(f"{run.failed_children} call(s) under this task failed{named}; "
                         f"{_past(run)}.")
        if run.child_error:
            sentences.append(f'The first failure read "{one_line(run.child_error, 200)}".')
    if not sentences and not run.repair_no_files:
        sentences.append(f"{_how(run)} needed recovery to complete this task.")
    return sentences


def _past(run: TaskRun) -> str:
    """How the agent got past its first failed tool or model call, as far as spans tell."""
    if not run.recoveries:
        return "the agent got past them and completed the task"
    first = run.recoveries[0]
    if first.again and first.failed_with and first.succeeded_with == first.failed_with:
        return (f"the same call to {called(first)} succeeded when made again, and the agent "
                "completed the task")
    if first.again and first.failed_with and first.succeeded_with:
        return (f"a later call to {called(first)} given {code(first.succeeded_with, 100)} "
                f"instead of {code(first.failed_with, 100)} succeeded, and the agent completed "
                "the task")
    if first.again:
        return f"a later call to {called(first)} succeeded, and the agent completed the task"
    if first.instead:
        return f"the agent went on with {one_line(first.instead, 80)} and completed the task"
    return f"the agent went on without {called(first)} and completed the task"


def _how(run: TaskRun) -> str:
    if run.route and run.model:
        return f"The {one_line(run.route, 60)} route with {one_line(run.model, 80)}"
    if run.route:
        return f"The {one_line(run.route, 60)} route"
    if run.model:
        return f"{one_line(run.model, 80)}"
    return "The agent"
