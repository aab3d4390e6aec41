"""ChildSummary.add: each role is read by the first of its names present, as the
conventions list them, whatever the values' types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary.conventions import PROFILES, Conventions
from otel_diary.record import MAX_TEXT, ChildSummary, as_int, as_text, first

CONVENTIONS = sorted(PROFILES.values(), key=lambda conventions: conventions.task_marker)
NAMES = sorted({name for conventions in CONVENTIONS for name in conventions.child_keys})
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**20), st.floats(allow_nan=True),
    st.sampled_from(["execute_tool", " execute_tool\n", "execute\ttool", "chat", "tool",
                     "7", " 12 ", "", "  ", "<class 'a.B'>", "EXECUTE_TOOL", "é",
                     "x" * (MAX_TEXT + 5), "execute_tool " + "y" * MAX_TEXT]),
    st.text(max_size=20), st.binary(max_size=4),
    st.lists(st.sampled_from(["execute_tool", "m"]), max_size=2).map(tuple),
    st.lists(st.sampled_from(["execute_tool", "m"]), max_size=2))


def expected(spans: Sequence[Mapping[str, object]], conventions: Conventions) -> dict[str, object]:
    """What the spans add up to, each role read with ``first`` and ``as_text``."""
    tokens_in = tokens_out = calls = 0
    models: list[str] = []
    tools: dict[str, int] = {}
    for attributes in spans:
        for name, count in ((conventions.input_tokens, 0), (conventions.output_tokens, 1)):
            value = as_int(first(attributes, name))
            if value is not None and value >= 0:
                tokens_in, tokens_out = ((tokens_in + value, tokens_out) if count == 0
                                         else (tokens_in, tokens_out + value))
        model = as_text(first(attributes, conventions.model))
        if model and model not in models:
            models.append(model)
        tool = as_text(first(attributes, conventions.tool_name), 256)
        operation = as_text(first(attributes, conventions.operation))
        if (operation in conventions.tool_operations if conventions.operation
                else tool is not None):
            calls += 1
            if tool:
                tools[tool] = tools.get(tool, 0) + 1
    return {"input_tokens": tokens_in, "output_tokens": tokens_out, "models": models,
            "tool_calls": calls, "tools": tools}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CONVENTIONS),
       st.lists(st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=6), max_size=5))
def test_each_role_is_read_by_its_first_name_present(
        conventions: Conventions, spans: list[dict[str, object]]) -> None:
    summary = ChildSummary()
    for attributes in spans:
        summary.add(attributes, False, conventions)
    assert summary.spans == len(spans)
    assert {key: getattr(summary, key) for key in expected(spans, conventions)} == \
        expected(spans, conventions)


def test_an_operation_is_read_as_single_line_text() -> None:
    """An operation is compared once made single-line: whitespace around it counts, a word
    that is not a tool operation never does, nor does a value that is not text."""
    conventions = PROFILES["genai"]
    summary = ChildSummary()
    for operation in ("execute_tool", " execute_tool\n", "chat", "Execute", ("execute_tool",),
                      ["execute_tool"], b"execute_tool", 7):
        summary.add({"gen_ai.operation.name": operation, "gen_ai.tool.name": "grep"}, False,
                    conventions)
    assert (summary.tool_calls, summary.tools) == (2, {"grep": 2})


def test_an_operation_name_is_compared_as_single_line_text_too() -> None:
    """A configured operation with inner whitespace is matched as the reader folds it, so
    the raw value never matches it (as ``as_text`` has always read it)."""
    conventions = Conventions(tool_operation="run  tool")
    summary = ChildSummary()
    summary.add({"gen_ai.operation.name": "run  tool"}, False, conventions)
    summary.add({"gen_ai.operation.name": "x" * (MAX_TEXT + 1)}, False,
                Conventions(tool_operation="x" * (MAX_TEXT + 1)))
    assert summary.tool_calls == 0
