"""Reflection: ``TaskRun`` -> the "What was learned" paragraph.

A :class:`Reflector` may call a language model; :class:`StubReflector` is the
deterministic, fact-based default and the fallback whenever a reflector fails.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from otel_diary.pipeline.classify import TaskRun
from otel_diary.text import cut, one_line

MAX_LEARNED = 800
"""Longest "What was learned" paragraph, in characters."""
_ERROR_LINE = re.compile(r"\b(error|exception|failed|fatal)\b", re.IGNORECASE)


@runtime_checkable
class Reflector(Protocol):
    """Writes 3 to 5 sentences of insight about a run (at most 800 characters)."""

    def reflect(self, run: TaskRun) -> str: ...


def first_error_line(stderr: str | None) -> str | None:
    """The first line of ``stderr`` that reads like an error, else its last non-empty line."""
    if not stderr:
        return None
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if _ERROR_LINE.search(line):
            return line
    return lines[-1] if lines else None


class StubReflector:
    """A deterministic reflection built from the run's facts: no model, no I/O."""

    def reflect(self, run: TaskRun) -> str:
        how = _how(run)
        sentences: list[str] = []
        if run.outcome == "completed":
            first = f"{how} handled this task without escalation"
            if run.build_attempts == 1:
                first += " and the build passed on the first verification"
            sentences.append(first + ".")
        else:
            sentences.append(f"{how} did not get this task right on the first try.")
            line = first_error_line(run.stderr_tail)
            if line:
                quoted = one_line(line, 160).rstrip(".")
                sentences.append(f'The build failure began with "{quoted}".')
            elif run.child_error_types:
                kinds = ", ".join(run.child_error_types[:3])
                sentences.append(f"The failed calls raised {one_line(kinds, 160)}.")
            steps = []
            if run.escalations:
                steps.append(f"escalated {run.escalations} time(s)")
            if run.build_attempts and run.build_attempts > 1:
                steps.append(f"needed {run.build_attempts} build attempts")
            if run.failed_children:
                steps.append(f"retried after {run.failed_children} failed call(s)")
            if steps:
                sentences.append("Recovery " + " and ".join(steps) +
                                 ", so budget time and tokens for retries on similar tasks.")
            if run.repair_no_files:
                sentences.append("A repair attempt changed no files: when a fix is a no-op, "
                                 "change the approach instead of retrying it.")
        cost = []
        if run.tokens is not None:
            cost.append(f"{run.tokens} tokens")
        cost.append(f"{run.latency_ms / 1000:.1f}s")
        if run.file_operations is not None:
            cost.append(f"{run.file_operations} file operation(s)")
        sentences.append(f"It took {', '.join(cost)}, a baseline for estimating similar tasks.")
        if run.outcome == "completed":
            sentences.append("Try the same route and model first on tasks like this one.")
        else:
            sentences.append("Check for this failure early on tasks like this one.")
        return cut(" ".join(sentences[:5]), MAX_LEARNED)


def _how(run: TaskRun) -> str:
    if run.route and run.model:
        return f"The {one_line(run.route, 60)} route with {one_line(run.model, 80)}"
    if run.route:
        return f"The {one_line(run.route, 60)} route"
    if run.model:
        return f"{one_line(run.model, 80)}"
    return "The agent"
