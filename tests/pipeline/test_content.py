"""Captured message content: the first user message and the final answer, in the forms
GenAI and OpenInference instrumentations record them."""

from __future__ import annotations

import json

import pytest

from otel_diary.pipeline.content import (
    MAX_VALUE,
    call_arguments,
    final_answer,
    first_sentence,
    first_task,
    user_message,
)

GENAI = json.dumps([{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                    {"role": "user", "parts": [{"type": "text", "content": "Fix the build"}]}])
OPENAI = json.dumps([{"role": "user", "content": "Fix the build"},
                     {"role": "assistant", "content": "Done. It passes."}])
LANGGRAPH = json.dumps({"messages": [["user", "Fix the build"]]})
LANGCHAIN = json.dumps({"messages": [{"lc": 1, "type": "constructor", "kwargs": {
    "type": "human", "content": "Fix the build"}}]})


SMOLAGENTS = json.dumps({"task": "Fix the build", "stream": False, "reset": True})
CREWAI_AGENT = json.dumps({"messages": "Fix the build"})


@pytest.mark.parametrize("value", [GENAI, OPENAI, LANGGRAPH, LANGCHAIN, SMOLAGENTS,
                                   CREWAI_AGENT, "Fix the build"])
def test_the_first_user_message_is_found(value: str) -> None:
    """Each recorded form gives the user's words: a message, else the task an agent's run
    was called with."""
    assert user_message(value) == "Fix the build"


def test_a_message_comes_before_the_task_and_no_task_is_an_answer() -> None:
    """A user message in the arguments wins over their ``task``; a task is no answer, and
    only a task that is text is one."""
    both = json.dumps({"task": "Summarize", "messages": [["user", "Fix the build"]]})
    assert user_message(both) == "Fix the build"
    assert final_answer(SMOLAGENTS) is None and final_answer(CREWAI_AGENT) is None
    assert user_message(json.dumps({"task": {"text": "nested"}})) is None
    assert user_message(json.dumps({"input": "Fix the build"})) is None


@pytest.mark.parametrize("value", [None, 3, "", json.dumps({"messages": []}),
                                   json.dumps([{"role": "tool", "content": "x"}])])
def test_nothing_is_guessed(value: object) -> None:
    """Without a user message there is no question."""
    assert user_message(value) is None


def test_the_final_answer_is_the_last_assistant_message() -> None:
    """The answer is the last assistant message; its first sentence is kept."""
    assert final_answer(OPENAI) == "Done. It passes."
    assert first_sentence(final_answer(OPENAI)) == "Done."
    assert first_sentence("3.5 is the answer. Next") == "3.5 is the answer."


@pytest.mark.parametrize("value", [
    "StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: "
    "'assistant'>, blocks=[TextBlock(text='Done.')]))...",
    "AgentWorkflowStartEvent()", "events.Done(ok=True)"])
def test_a_python_repr_is_no_message(value: str) -> None:
    """What an instrumentation records of a value it cannot serialize (LlamaIndex's events)
    is neither a question nor an answer."""
    assert user_message(value) is None and final_answer(value) is None


@pytest.mark.parametrize("value", ["Done(ish).", "Fixed it (see the PR).", "print(x)"])
def test_plain_text_with_brackets_is_still_a_message(value: str) -> None:
    assert user_message(value) == value and final_answer(value) == value


@pytest.mark.parametrize(("value", "expected"), [
    ('{"kwargs": {"target": "orders"}}', '{"target": "orders"}'),
    ('{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"path": "é"}}',
     '{"path": "é"}'),
    ('{"args": ["x"], "kwargs": {"a": 1}}', '{"args": ["x"], "kwargs": {"a": 1}}'),
    ('{"kwargs": {"a": 1}, "other": 2}', '{"kwargs": {"a": 1}, "other": 2}'),
    ('{"kwargs": "a"}', '{"kwargs": "a"}'),
    ('{"target": "orders"}', '{"target": "orders"}'),
    ('{"kwargs": {', '{"kwargs": {'),
    ("plain", "plain"), (None, None),
    (json.dumps({"input_str": "{'term': 'é'}", "tags": ["seq:step:1"],
                 "metadata": {"langgraph_step": 2}, "inputs": {"term": "é"},
                 "kwargs": {"tool_call_id": "call-1"}}, ensure_ascii=False), '{"term": "é"}'),
    (json.dumps({"input_str": "orders", "tags": [], "metadata": {}, "inputs": None}),
     "orders"),
    ('{"input_str": 7, "tags": []}', '{"input_str": 7, "tags": []}'),
    ('{"input_str": "x", "other": 1}', '{"input_str": "x", "other": 1}'),
])
def test_call_arguments_come_out_of_a_python_calls_record(value: str | None,
                                                          expected: str | None) -> None:
    """LlamaIndex's and smolagents' record of a call's keyword arguments gives them, and a
    LangChain tool's start (traceloop) its inputs, else its input text; a call with
    positional arguments, another shape, or no JSON is left as it is."""
    assert call_arguments(value) == expected


def test_a_crews_output_names_its_first_task() -> None:
    """A CrewAI crew's output gives its first task's description (the crew's inputs filled
    in), whatever its other tasks and its answer."""
    output = json.dumps({"raw": "Done.", "tasks_output": [
        {"description": "  Plan the fix of the orders api\n", "raw": "Planned."},
        {"description": "Fix the types in the orders api", "raw": "Done."}]})
    assert first_task(output) == "Plan the fix of the orders api"


@pytest.mark.parametrize("value", [
    json.dumps({"raw": "Done.", "tasks_output": []}),
    json.dumps({"raw": "Done.", "tasks_output": [{"description": 3}]}),
    json.dumps({"raw": "Done.", "tasks_output": [{"description": "  "}]}),
    json.dumps({"raw": "Done.", "tasks_output": {"description": "a"}}),
    json.dumps([{"tasks_output": [{"description": "a"}]}]),
    '{"raw": "Done.", "tasks_output": [{"description": "a"',
    json.dumps({"raw": "x" * MAX_VALUE, "tasks_output": [{"description": "a"}]}),
    json.dumps({"messages": [{"role": "user", "content": "a"}]}),
    "tasks_output", None, 3,
])
def test_nothing_else_names_a_first_task(value: object) -> None:
    """No task list, an empty or malformed one, a value past the parsed length, or
    anything but a crew's output gives no task."""
    assert first_task(value) is None
