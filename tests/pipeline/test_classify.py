"""Classification on plain data: root task spans, success, and the structural outcome."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from otel_diary import ORCHESTRATOR, ChildSummary, SpanRecord, classify
from otel_diary.conventions import AUTO, GENAI, OPENINFERENCE
from otel_diary.record import as_bool, as_int


def record(**attributes: Any) -> SpanRecord:
    return SpanRecord(trace_id=1, span_id=2, name="span-name", start_ns=1_000_000,
                      end_ns=9_000_000, attributes={"orchestrator.task.id": "T", **attributes},
                      resource={"service.name": "svc"})


def test_failed_status_is_none() -> None:
    """An ERROR status is a failed run, whatever the attributes say."""
    failed = SpanRecord(trace_id=1, span_id=2, name="n", start_ns=0, end_ns=1, is_error=True,
                        attributes={"orchestrator.task.id": "T"})
    assert classify(failed, None, ORCHESTRATOR) is None


@pytest.mark.parametrize("passed", [False, "false", 0])
def test_build_verify_false_is_none(passed: object) -> None:
    """`build_verify.passed` false (as bool, string or 0) is a failed run."""
    assert classify(record(**{"orchestrator.build_verify.passed": passed}), None,
                    ORCHESTRATOR) is None


def test_fallbacks_fill_missing_facts() -> None:
    """Title falls back to the span name, agent to service.name, latency to the span time."""
    run = classify(record(), None, ORCHESTRATOR)
    assert run is not None
    assert (run.title, run.agent, run.latency_ms) == ("span-name", "svc", 8)
    assert run.tokens is None and run.outcome == "completed"


@pytest.mark.parametrize("service", ["unknown_service", "unknown_service:python"])
def test_without_a_service_name_an_openinference_root_names_the_agent(service: str) -> None:
    """Under OpenInference, the SDK's stand-in service name (no OTEL_SERVICE_NAME) gives
    way to the task span's name, the graph's or agent's (LangGraph's ``name=``); other
    conventions' span names are a task's or an operation's, and do not name agents."""
    unnamed = SpanRecord(trace_id=1, span_id=2, name="qa", start_ns=0, end_ns=1,
                         attributes={"orchestrator.task.id": "T",
                                     "openinference.span.kind": "CHAIN"},
                         resource={"service.name": service})
    for conventions, agent in ((OPENINFERENCE, "qa"), (AUTO, service), (ORCHESTRATOR, service)):
        run = classify(unnamed, None, conventions)
        assert run is not None and run.agent == agent
    named = replace(unnamed, resource={"service.name": "billing"})
    assert (run := classify(named, None, OPENINFERENCE)) is not None and run.agent == "billing"


@pytest.mark.parametrize(("span_name", "agent"), [
    ("builder.run", "builder"),
    ("orders-crew.kickoff", "orders-crew"),
    ("Crew_4f375699-582e-480f-82e3-53e65498209f.kickoff", "Crew"),
    ("WorkflowBuilder-4F375699-582E-480F-82E3-53E65498209F", "WorkflowBuilder"),
    ("4f375699-582e-480f-82e3-53e65498209f", "4f375699-582e-480f-82e3-53e65498209f"),
    ("run.kickoff.run", "run.kickoff"),
])
def test_a_root_s_name_names_its_agent_without_its_call_or_generated_id(
        span_name: str, agent: str) -> None:
    """Of the name that names the agent: the call (smolagents' ``.run``, a CrewAI crew's
    ``.kickoff``) is left out, and so is the UUID that ends an unnamed object's name
    (another each run); a name that is only a UUID stays."""
    unnamed = SpanRecord(trace_id=1, span_id=2, name=span_name, start_ns=0, end_ns=1,
                         attributes={"openinference.span.kind": "CHAIN"},
                         resource={"service.name": "unknown_service"})
    assert (run := classify(unnamed, None, OPENINFERENCE)) is not None and run.agent == agent


def test_tokens_from_own_usage_then_children() -> None:
    """Tokens: the task's own total, else its gen_ai usage, else the children's sum."""
    children = ChildSummary()
    children.add({"gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3,
                  "gen_ai.response.model": "child-model"}, False, ORCHESTRATOR)
    own_total = classify(record(**{"orchestrator.tokens": 99}), children, ORCHESTRATOR)
    own_usage = classify(record(**{"gen_ai.usage.input_tokens": 4}), children, ORCHESTRATOR)
    from_children = classify(record(), children, ORCHESTRATOR)
    assert own_total is not None and own_total.tokens == 99
    assert own_usage is not None and own_usage.tokens == 4
    assert from_children is not None and from_children.tokens == 10
    assert from_children.model == "child-model"


def test_a_task_span_whose_usage_is_that_of_a_response_under_it_takes_the_childrens() -> None:
    """A task span's own usage with the id of a response under it is that call's (OpenLIT
    puts a LangGraph run's last call on its span): the children's sum is the run's. With
    another id, or none, its own usage stands."""
    children = ChildSummary()
    for n in (1, 2, 3):
        children.add({"gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 7,
                      "gen_ai.response.id": f"chatcmpl-{n}"}, False, GENAI)
    run = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.usage.input_tokens": 11,
           "gen_ai.usage.output_tokens": 7}
    last = classify(record(**run, **{"gen_ai.response.id": "chatcmpl-3"}), children, GENAI)
    other = classify(record(**run, **{"gen_ai.response.id": "chatcmpl-9"}), children, GENAI)
    unhashable = classify(record(**run, **{"gen_ai.response.id": ["chatcmpl-3"]}), children,
                          GENAI)
    assert last is not None and last.tokens == 3 * 18
    assert other is not None and other.tokens == 18
    assert unhashable is not None and unhashable.tokens == 18


def test_child_failures_do_not_recover_orchestrator_runs() -> None:
    """With the orchestrator conventions a failed child span is not a recovery signal."""
    children = ChildSummary()
    children.add({"error.type": "Timeout"}, True, ORCHESTRATOR)
    run = classify(record(), children, ORCHESTRATOR)
    assert run is not None and run.outcome == "completed" and run.failed_children == 0


@pytest.mark.parametrize(("value", "expected"), [
    (3, 3), ("3", 3), (3.0, 3), (True, None), ("x", None), ("9" * 40, None),
    (float("inf"), None), (None, None), ([1], None),
])
def test_as_int_is_lenient_but_not_wrong(value: object, expected: int | None) -> None:
    """Integers come from ints, integral floats and numeric strings; nothing else guesses."""
    assert as_int(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), ("false", False), ("1", True), (0, False), ("maybe", None), (None, None),
])
def test_as_bool(value: object, expected: bool | None) -> None:
    """Booleans come from bools, conventional strings and integers."""
    assert as_bool(value) == expected
