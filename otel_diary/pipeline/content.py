"""What a run was about, from the message content an instrumentation captured.

Instrumentations that capture content put a span's messages in one attribute, as JSON or
plain text: GenAI's ``gen_ai.input.messages`` (``[{"role": "user", "parts": [{"type":
"text", "content": …}]}]``), OpenInference's ``input.value`` (the messages, a LangGraph
state such as ``{"messages": [["user", …]]}``, an agent's arguments such as smolagents'
``{"task": …}``, or the input itself). :func:`user_message` finds the first user message
(else the task an agent's run was called with), :func:`final_answer` the last
assistant message, :func:`first_task` the task a CrewAI crew's output says it carried out
first, and :func:`first_sentence` cuts an answer to its first sentence.
Nothing is guessed: a value that holds no such message gives ``None``, and so does a
Python object's repr recorded as plain text.
"""

from __future__ import annotations

import json
import re

from otel_diary.record import json_value

MAX_DEPTH = 8
"""How deep in a JSON value a message is looked for."""
MAX_VALUE = 256 * 1024
"""Longest value parsed; a longer one is read as plain text only when it is not JSON."""

_USER = frozenset({"user", "human"})
_ASKED = ("task", "messages")
"""Of a call's arguments with no message in them: what an agent's run was asked
(smolagents' ``agent.run(task=…)``, a CrewAI agent's ``kickoff(messages=…)`` given text)."""
_ASSISTANT = frozenset({"assistant", "ai", "model"})
_REPR = re.compile(r"[A-Za-z_][\w.]*\((?:[A-Za-z_]\w*=|\))")
"""A Python object's repr (``StopEvent(result=…)``, ``AgentWorkflowStartEvent()``): what
an instrumentation records of a value it cannot serialize (LlamaIndex's events), no
message."""
_CALL_WRAPPER = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
"""The keys of an instrumentation's record of a Python call's arguments."""
_TOOL_START = frozenset({"input_str", "tags", "metadata", "inputs", "kwargs"})
"""The keys of an instrumentation's record of a LangChain tool's start (its callback's
arguments, traceloop's ``opentelemetry-instrumentation-langchain``)."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def user_message(value: object) -> str | None:
    """The text of the first user message in ``value``, or the value itself when it is
    plain text (not JSON)."""
    return _read(value, _USER, last=False)


def final_answer(value: object) -> str | None:
    """The text of the last assistant message in ``value``, or the value itself when it is
    plain text (not JSON)."""
    return _read(value, _ASSISTANT, last=True)


def first_task(value: object) -> str | None:
    """The description of the first task in a CrewAI crew's output, ``{"raw": …,
    "tasks_output": [{"description": …}, …]}`` (with the crew's inputs filled in, unlike
    the task list the crew's span records before its run)."""
    if not isinstance(value, str) or len(value) > MAX_VALUE or '"tasks_output"' not in value:
        return None
    data = json_value(value)
    tasks = data.get("tasks_output") if isinstance(data, dict) else None
    task = tasks[0] if isinstance(tasks, list) and tasks else None
    described = task.get("description") if isinstance(task, dict) else None
    if not isinstance(described, str):
        return None
    return described.strip() or None


def call_arguments(value: str | None) -> str | None:
    """What a tool call was given, out of the wrapper some instrumentations record a
    Python call's arguments in: ``{"kwargs": {…}}`` (LlamaIndex) or ``{"args": [],
    "sanitize_inputs_outputs": …, "kwargs": {…}}`` (smolagents) gives ``{…}``, and so does
    a LangChain tool's start, ``{"input_str": …, "tags": …, "metadata": …, "inputs": {…},
    …}`` (its ``input_str`` when it has no ``inputs``); any other value is left as it
    is."""
    if not value or not value.startswith('{"') or len(value) > MAX_VALUE:
        return value
    data = json_value(value)
    if not isinstance(data, dict):
        return value
    if "input_str" in data and data.keys() <= _TOOL_START:
        inputs, given = data.get("inputs"), data["input_str"]
        if isinstance(inputs, dict) and inputs:
            return json.dumps(inputs, ensure_ascii=False)
        return given if isinstance(given, str) else value
    if not (isinstance(data.get("kwargs"), dict) and data.keys() <= _CALL_WRAPPER
            and not data.get("args")):
        return value
    return json.dumps(data["kwargs"], ensure_ascii=False)


def first_sentence(text: str | None) -> str | None:
    """The first sentence of ``text`` (all of it when it has one sentence)."""
    if not text or not text.strip():
        return None
    return _SENTENCE.split(" ".join(text.split()), maxsplit=1)[0]


def _read(value: object, roles: frozenset[str], *, last: bool) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    stripped = value.strip()
    if stripped[0] not in "[{\"":
        return None if _REPR.match(stripped) else stripped
    if len(stripped) > MAX_VALUE:
        return None
    data = json_value(stripped)
    if data is None:  # not JSON after all (JSON's null starts with none of those)
        return stripped
    if isinstance(data, str):
        return data.strip() or None
    found = list(_messages(data, roles, 0))
    if found:
        return found[-1] if last else found[0]
    if roles is _USER and isinstance(data, dict):
        for key in _ASKED:
            asked = data.get(key)
            if isinstance(asked, str) and asked.strip():
                return asked.strip()
    return None


def _messages(data: object, roles: frozenset[str], depth: int) -> list[str]:
    """Texts of the messages in ``data`` whose role is one of ``roles``, in order."""
    if depth > MAX_DEPTH:
        return []
    found: list[str] = []
    if isinstance(data, dict):
        role = data.get("role", data.get("type"))
        if isinstance(role, str) and role.lower() in roles:
            text = _text(data.get("content", data.get("parts")), depth)
            if text:
                return [text]
        for item in data.values():
            if isinstance(item, (dict, list)):
                found.extend(_messages(item, roles, depth + 1))
    elif isinstance(data, list):
        if (len(data) == 2 and isinstance(data[0], str) and data[0].lower() in roles
                and isinstance(data[1], str)):  # a ("user", "text") pair
            return [data[1]] if data[1].strip() else []
        for item in data:
            found.extend(_messages(item, roles, depth + 1))
    return found


def _text(content: object, depth: int) -> str | None:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content.strip() or None
    if isinstance(content, list) and depth <= MAX_DEPTH:
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text":
                text = part.get("content", part.get("text"))
                if isinstance(text, str):
                    texts.append(text)
        joined = " ".join(text.strip() for text in texts if text.strip())
        return joined or None
    return None
