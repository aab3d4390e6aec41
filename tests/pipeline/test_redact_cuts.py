"""No cut of a fact (its length cap, the stderr window, a quoted line) lets part of a secret out.

Each example places a generated secret so that one of the pipeline's cuts falls at a
chosen position inside or around it, then looks at everything that leaves the process:
the diary file, the hub body and the prompt sent to the model.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_diary import ORCHESTRATOR
from otel_diary.assembly.summary import ChildSummary
from otel_diary.pipeline.classify import MAX_ANSWER, MAX_QUESTION, MAX_STDERR
from otel_diary.pipeline.core import Pipeline
from otel_diary.pipeline.llm import LLMReflector
from otel_diary.pipeline.redact import redact
from otel_diary.pipeline.render import Diary
from otel_diary.record import (
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
    MAX_ERROR_TEXT,
    MAX_TEXT,
    SpanRecord,
    error_details,
)
from otel_diary.sinks.folder import FolderSink
from otel_diary.sinks.hub.client import hub_body
from tests.support.loopback import ChatServer, serve_asgi
from tests.support.secret_strategies import FAMILIES, in_context

RESULT = "gen_ai.tool.call.result"
CONVENTIONS = replace(ORCHESTRATOR, recover_on_child_errors=True,
                      input_messages=("gen_ai.input.messages",),
                      output_messages=("gen_ai.output.messages",), tool_result=(RESULT,))
"""The default attributes, with failed child spans named in the diary and captured
messages and tool call results read (the run's question and answer, what a failed call's
result says)."""
PAD = "§"
"""Filler no secret alphabet holds, so it cannot be mistaken for part of a secret."""
SURVIVING = 8
"""This many consecutive characters of a secret in an output count as a leak."""

CUTS: dict[str, tuple[str, int]] = {
    "title": ("orchestrator.task.title", 512),
    "task": ("orchestrator.task.id", 256),
    "agent": ("orchestrator.agent.name", 256),
    "route": ("orchestrator.route", 256),
    "trigger": ("orchestrator.task.trigger", 256),
    "workflow": ("orchestrator.workflow.id", 256),
    "model": ("gen_ai.request.model", 256),
    "related": ("orchestrator.related", 256),
    "child model": ("gen_ai.request.model", MAX_TEXT),
    "child error": ("error.type", 256),
    "stderr window": ("orchestrator.build_verify.stderr_tail", MAX_STDERR),
    "quoted error line": ("orchestrator.build_verify.stderr_tail", 159),
    "child error message": (EXCEPTION_MESSAGE, MAX_ERROR_TEXT),
    "child stack trace": (EXCEPTION_STACKTRACE, MAX_ERROR_TEXT),
    "child status description": ("", MAX_ERROR_TEXT),
    "child result message": ("error", MAX_ERROR_TEXT),
    "child result output": ("stderr", MAX_ERROR_TEXT),
    "question": ("gen_ai.input.messages", MAX_QUESTION),
    "answer": ("gen_ai.output.messages", MAX_ANSWER),
}
"""Where a cut falls: the attribute that carries the value, and the length kept."""


class Captured:
    """A sink keeping the hub body of every diary it is given."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def write(self, diary: Diary) -> str:
        self.bodies.append(json.dumps(hub_body(diary), ensure_ascii=False))
        return diary.path

    def close(self) -> None:
        """Nothing to release."""


class Model:
    """A chat endpoint on loopback that answers 500, so the stub's paragraph is written."""

    def __init__(self, server: ChatServer, url: str) -> None:
        self.server = server
        self.url = url

    def __repr__(self) -> str:
        return f"Model({self.url!r})"


@pytest.fixture(scope="module")
def model() -> Iterator[Model]:
    server = ChatServer(script=[500])
    with serve_asgi(server) as url:
        yield Model(server, url + "/v1")


def _head_cut(text: str, keep: int, limit: int) -> str:
    """``text`` after filler, so that a cut at ``limit`` keeps its first ``keep`` chars."""
    pad = limit - keep
    return PAD * (pad - 1) + " " + text


def _placed(cut: str, text: str, keep: int) -> tuple[dict[str, Any], ChildSummary]:
    """Attributes (and a child summary) putting ``text`` where ``cut`` keeps ``keep``."""
    attribute, limit = CUTS[cut]
    attrs: dict[str, Any] = {"orchestrator.task.id": "T-cut", "orchestrator.agent.name": "coder",
                             "orchestrator.build_verify.attempts": 2}
    children = ChildSummary()
    if cut == "stderr window":  # the window's start falls ``keep`` characters into ``text``
        rest = MAX_STDERR - (len(text) - keep) - len(" failed\n")
        attrs[attribute] = text + " failed\n" + ((PAD * 60 + "\n") * (rest // 61 + 1))[:rest]
    elif cut == "quoted error line":
        flat = " ".join(text.split())
        attrs[attribute] = "build failed: " + _head_cut(flat, keep, limit - len("build failed: "))
    elif cut == "child stack trace":  # kept from its end: the cut keeps the last ``keep``
        trace = text + " " + PAD * (limit - keep - 1)
        children.add(error_details({EXCEPTION_TYPE: "RuntimeError",
                                    EXCEPTION_STACKTRACE: trace}, ""), True, CONVENTIONS)
    elif cut.startswith("child result"):  # a failed call's result, its span naming no more
        said = (_head_cut(text, keep, limit) if attribute == "error"  # than the class
                else text + " " + PAD * (limit - keep - 1))  # (an output: kept from its end)
        children.add({"error.type": "TOOL_ERROR", RESULT: json.dumps({attribute: said})},
                     True, CONVENTIONS)
    elif cut == "child error message":
        children.add(error_details({EXCEPTION_TYPE: "RuntimeError",
                                    attribute: _head_cut(text, keep, limit)}, ""),
                     True, CONVENTIONS)
    elif cut == "child status description":
        children.add(error_details(None, _head_cut(text, keep, limit)), True, CONVENTIONS)
    elif cut.startswith("child") or cut in ("question", "answer"):
        children.add({attribute: _head_cut(text, keep, limit)}, cut == "child error",
                     CONVENTIONS)
    elif cut == "related":
        attrs[attribute] = [_head_cut(text, keep, limit)]
    else:
        attrs[attribute] = _head_cut(text, keep, limit)
    return attrs, children


def _leaks(secret: str, outputs: list[str]) -> list[str]:
    return [secret[i:i + SURVIVING] for i in range(len(secret) - SURVIVING + 1)
            if any(secret[i:i + SURVIVING] in output for output in outputs)]


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_cut_lets_part_of_a_secret_out(family: str, data: st.DataObject,
                                          model: Model) -> None:
    """Whatever cut falls wherever in a secret, no 8 characters of it reach any output."""
    text, secrets = data.draw(in_context(FAMILIES[family]))
    cut = data.draw(st.sampled_from(sorted(CUTS)), label="cut")
    flat = " ".join(text.split())
    keep = data.draw(st.integers(0, min(len(flat), CUTS[cut][1] - 16)), label="keep")
    found = _outputs(model, *_placed(cut, text, keep))
    kept = redact(text)  # what redaction keeps by design (https://, the filler around)
    for secret in secrets:
        leaks = [leak for leak in _leaks(secret, found) if leak not in kept]
        if leaks:  # a run of characters the diary holds anyway (dates, ids) is no leak
            blank = text
            for other in secrets:
                blank = blank.replace(other, PAD * len(other))
            anyway = _outputs(model, *_placed(cut, blank, keep))
            leaks = [leak for leak in leaks if not any(leak in output for output in anyway)]
        assert not leaks, (cut, keep, secret)


def _outputs(model: Model, attrs: dict[str, Any], children: ChildSummary) -> list[str]:
    """What leaves the process for one task span: diary file, hub body, model prompt."""
    record = SpanRecord(0xC0FFEE, 0xBEEF, "task", 1_785_000_000_000_000_000,
                        1_785_000_001_000_000_000, attributes=attrs)
    hub = Captured()
    model.server.requests.clear()
    with tempfile.TemporaryDirectory() as root:
        reflector = LLMReflector(model.url, model="test-model", calls_per_minute=1_000_000,
                                 timeout_s=10)
        pipeline = Pipeline(CONVENTIONS, [FolderSink(root), hub], reflector=reflector)
        try:
            diary = pipeline.handle((record, children))
        finally:
            pipeline.close()
        assert diary is not None
        files = [path.read_text() for path in Path(root).rglob("*.md")]
    prompts = [request.json()["messages"][1]["content"] for request in model.server.requests]
    assert files and hub.bodies and prompts
    return files + hub.bodies + prompts
