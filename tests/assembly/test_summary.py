"""ChildSummary.add: each role is read by the first of its names present, as the
conventions list them (built-in profiles and a custom one), whatever the values' types;
every list stops at its bound."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary.assembly.summary import MAX_LIST, MAX_RESPONSES, ChildSummary
from otel_diary.conventions import CLAUDE_CODE, GENAI, ORCHESTRATOR, PROFILES, Conventions
from otel_diary.record import (
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
    HANDED_BACK,
    MAX_TEXT,
    STATUS_DESCRIPTION,
    UNNAMED_ERROR,
    as_int,
    as_text,
    error_name,
    first,
)

CUSTOM = Conventions(  # names of a user's own profile, an agent role and an empty role
    input_tokens=("app.in", "app.in2"), output_tokens=("app.out",), model=("app.model",),
    tool_name=("app.tool",), operation=(), child_agent=("app.agent", "app.agent2"),
    error_type=("app.error", "error.type"))
CONVENTIONS = [*sorted(PROFILES.values(), key=lambda conventions: conventions.task_marker),
               CUSTOM]
NAMES = sorted({name for conventions in CONVENTIONS for name in conventions.child_keys}
               | {EXCEPTION_TYPE})
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**20), st.floats(allow_nan=True),
    st.sampled_from(["execute_tool", " execute_tool\n", "execute\ttool", "chat", "tool",
                     "7", " 12 ", "-3", "", "  ", "<class 'a.B'>", "EXECUTE_TOOL", "é",
                     "x" * (MAX_TEXT + 5), "execute_tool " + "y" * MAX_TEXT,
                     "agent " * 60]),
    st.text(max_size=20), st.binary(max_size=4),
    st.lists(st.sampled_from(["execute_tool", "m"]), max_size=2).map(tuple),
    st.lists(st.sampled_from(["execute_tool", "m"]), max_size=2))


def _listed(items: list[str], item: str | None) -> None:
    if item and item not in items and len(items) < MAX_LIST:
        items.append(item)


def expected(spans: Sequence[tuple[Mapping[str, object], bool]],
             conventions: Conventions) -> dict[str, object]:
    """What the spans add up to, each role read with ``first`` and ``as_text``, each list
    capped at ``MAX_LIST`` names (a tool already counted goes on being counted)."""
    tokens = [0, 0]
    has_tokens = False
    models: list[str] = []
    agents: list[str] = []
    errors: list[str] = []
    tools: dict[str, int] = {}
    calls = failed = 0
    for attributes, is_error in spans:
        for role, names in enumerate((conventions.input_tokens, conventions.output_tokens)):
            value = as_int(first(attributes, names))
            if value is not None and value >= 0:
                tokens[role] += value
                has_tokens = True
        _listed(models, as_text(first(attributes, conventions.model)))
        _listed(agents, as_text(first(attributes, conventions.child_agent), 256))
        tool = as_text(first(attributes, conventions.tool_name), 256)
        operation = as_text(first(attributes, conventions.operation))
        if (operation in conventions.tool_operations if conventions.operation
                else tool is not None):
            calls += 1
            if tool and (tool in tools or len(tools) < MAX_LIST):
                tools[tool] = tools.get(tool, 0) + 1
        if is_error:
            failed += 1
            named = (error_name(first(attributes, conventions.error_type))
                     or error_name(attributes.get(EXCEPTION_TYPE)))
            _listed(errors, named or UNNAMED_ERROR)
    return {"input_tokens": tokens[0], "output_tokens": tokens[1], "has_tokens": has_tokens,
            "models": models, "agents": agents, "tool_calls": calls, "tools": tools,
            "failed_spans": failed, "error_types": errors}


def summarized(spans: Sequence[tuple[Mapping[str, object], bool]],
               conventions: Conventions) -> dict[str, object]:
    summary = ChildSummary()
    for attributes, is_error in spans:
        summary.add(attributes, is_error, conventions)
    assert summary.spans == len(spans)
    return {key: list(value) if isinstance(value := getattr(summary, key), dict)
            and key != "tools" else value for key in expected([], conventions)}


def spans_for(conventions: Conventions) -> st.SearchStrategy[
        tuple[Conventions, list[tuple[dict[str, object], bool]]]]:
    """Child spans with the conventions' own names mostly, other profiles' now and then."""
    own = sorted(conventions.child_keys | {EXCEPTION_TYPE})
    keys = st.one_of(st.sampled_from(own), st.sampled_from(own), st.sampled_from(NAMES))
    return st.tuples(st.just(conventions), st.lists(
        st.tuples(st.dictionaries(keys, VALUES, max_size=6), st.booleans()), max_size=5))


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(CONVENTIONS).flatmap(spans_for))
def test_each_role_is_read_by_its_first_name_present(
        case: tuple[Conventions, list[tuple[dict[str, object], bool]]]) -> None:
    conventions, spans = case
    assert summarized(spans, conventions) == expected(spans, conventions)


def _ended_spans(conventions: Conventions) -> st.SearchStrategy[
        list[tuple[dict[str, object], bool, int]]]:
    """Up to six spans (attributes, failed, end), some ending at the same instant (coarse
    clocks), with the conventions' names for every role, messages and error details."""
    names = sorted(conventions.child_keys | conventions.content_keys
                   | {EXCEPTION_TYPE, EXCEPTION_MESSAGE, EXCEPTION_STACKTRACE,
                      STATUS_DESCRIPTION})
    values: st.SearchStrategy[object] = st.one_of(
        st.sampled_from(["a", "b", "c", "execute_tool", "AGENT", "TOOL", "invoke_agent",
                         "Boom: it broke", "", '{"stderr": "Boom: it broke"}']),
        st.integers(0, 50))
    span = st.tuples(st.dictionaries(st.sampled_from(names), values, max_size=6),
                     st.booleans())
    return st.lists(st.tuples(span, st.integers(1, 4)), max_size=6).map(lambda spans: [
        (attributes, failed, end * 1000) for (attributes, failed), end in spans])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CONVENTIONS).flatmap(
    lambda conventions: st.tuples(st.just(conventions), _ended_spans(conventions),
                                  st.randoms(use_true_random=False), st.integers(0, 6))))
def test_a_summary_is_the_same_whatever_order_its_spans_come_in(
        case: tuple[Conventions, list[tuple[dict[str, object], bool, int]], Random, int],
) -> None:
    """Firsts, lasts and the order of names go by when spans ended (and at the same
    instant by their text): adding the spans in another order, or two parts of them
    merged, gives the same summary."""
    conventions, spans, shuffle, cut = case

    def summary(items: Sequence[tuple[dict[str, object], bool, int]]) -> ChildSummary:
        made = ChildSummary()
        for attributes, failed, end in items:
            made.add(attributes, failed, conventions, end)
        return made

    whole = summary(spans)
    shuffled = shuffle.sample(spans, len(spans))
    assert summary(shuffled) == whole
    later, earlier = summary(shuffled[cut:]), summary(shuffled[:cut])
    later.merge(earlier)
    assert later == whole


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(CONVENTIONS), st.integers(MAX_LIST - 2, 3 * MAX_LIST))
def test_every_list_stops_at_its_bound(conventions: Conventions, distinct: int) -> None:
    """Past ``MAX_LIST`` distinct models, agents, tools and errors the lists stop growing;
    tools already listed go on being counted, and tokens and calls are all summed."""
    spans = []
    for n in range(distinct):
        attributes: dict[str, object] = {EXCEPTION_TYPE: f"E{n}"}
        for role, value in ((conventions.model, f"m{n}"), (conventions.child_agent, f"a{n}"),
                            (conventions.tool_name, f"t{n % (MAX_LIST + 3)}"),
                            (conventions.operation, conventions.tool_operation),
                            (conventions.input_tokens, n), (conventions.output_tokens, 1)):
            if role:
                attributes[role[-1]] = value
        spans.append((attributes, n % 2 == 0))
    summary = summarized(spans, conventions)
    assert summary == expected(spans, conventions)
    assert len(summary["models"]) == min(distinct, MAX_LIST)  # type: ignore[arg-type]
    assert summary["input_tokens"] == distinct * (distinct - 1) // 2


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


def test_agent_and_tool_names_are_cut_at_256_characters() -> None:
    """Agent and tool names are kept to 256 characters, cut between words."""
    conventions = PROFILES["genai"]
    long_name = "planner " * 40  # 320 characters
    summary = ChildSummary()
    summary.add({"gen_ai.agent.name": long_name, "gen_ai.tool.name": long_name,
                 "gen_ai.operation.name": "execute_tool"}, False, conventions)
    [agent] = summary.agents
    assert agent == ("planner " * 32).strip() and list(summary.tools) == [agent]
    for name, kept in (("x" * 256 + " y", "x" * 256), ("x" * 257, None)):
        summary = ChildSummary()
        summary.add({"gen_ai.agent.name": name, "gen_ai.tool.name": name,
                     "gen_ai.operation.name": "execute_tool"}, False, conventions)
        assert (list(summary.agents), list(summary.tools)) == ([kept] if kept else [],) * 2


def test_the_first_stack_trace_is_kept() -> None:
    """Of the failed spans' stack traces, the first one recorded is kept."""
    summary = ChildSummary()
    summary.add({"exception.stacktrace": "  "}, True, PROFILES["genai"])
    for trace in ("Traceback: first", "Traceback: second"):
        summary.add({"exception.stacktrace": trace}, True, PROFILES["genai"])
    assert summary.stacktrace == "Traceback: first" and summary.failed_spans == 3


def test_a_failed_call_that_names_only_its_class_is_told_by_its_result() -> None:
    """A failed call whose span names no more than its error's class (Google ADK's
    ``TOOL_ERROR``) is told by its captured result: the first error by its message (the
    command's output when nothing else says it), the tail by that output, and so is a
    call whose span ended OK but whose result says it failed. A span that says more, or
    records a stack trace, keeps what it says."""
    result = json.dumps({"status": "error", "stderr": "error TS2345: boom", "exit_code": 2})
    told = {"error.type": "TOOL_ERROR", STATUS_DESCRIPTION: "TOOL_ERROR",
            "gen_ai.tool.call.result": result}
    summary = ChildSummary()
    summary.add(told, True, GENAI)
    assert (summary.first_error, summary.stacktrace) == ("TOOL_ERROR: error TS2345: boom",
                                                         "error TS2345: boom")
    assert summary.stacktrace_is_output
    summary = ChildSummary()
    summary.add({**told, EXCEPTION_MESSAGE: "Exit 2", EXCEPTION_STACKTRACE: "Trace"}, True,
                GENAI)
    assert (summary.first_error, summary.stacktrace) == ("TOOL_ERROR: Exit 2", "Trace")
    assert not summary.stacktrace_is_output
    summary = ChildSummary()
    summary.add({**told, "gen_ai.tool.call.result": json.dumps(
        {"status": "success", "stderr": "error TS2345: boom"})}, False, GENAI)  # no error
    summary.add(told, True, CLAUDE_CODE)  # conventions that capture no result
    assert (summary.first_error, summary.stacktrace) == ("TOOL_ERROR", None)
    summary = ChildSummary()  # a call whose span ended OK, its result saying it failed
    summary.add({"gen_ai.tool.call.result": result}, False, GENAI)
    assert (summary.failed_spans, summary.first_error) == (1, "error TS2345: boom")
    summary = ChildSummary()
    summary.add({**told, "gen_ai.tool.call.result": json.dumps(
        {"stdout": "x" * 3000 + "\nerror TS2345: boom"})}, True, GENAI)
    assert summary.stacktrace == "error TS2345: boom"  # the whole lines of its end


def test_a_stack_trace_and_an_output_alike_keep_the_stack_trace_in_any_order() -> None:
    """A stack trace and a call's output of the same text, ending at the same instant:
    the stack trace is kept, whatever order they are read or merged in."""
    traced = ({EXCEPTION_STACKTRACE: "Boom"}, True, GENAI, 1000)
    output = ({"gen_ai.tool.call.result": json.dumps({"stderr": "Boom"})}, True, GENAI, 1000)
    for spans in ((traced, output), (output, traced)):
        summary = ChildSummary()
        for span in spans:
            summary.add(*span)
        assert (summary.stacktrace, summary.stacktrace_is_output) == ("Boom", False)
        first, second = ChildSummary(), ChildSummary()
        first.add(*spans[0])
        second.add(*spans[1])
        first.merge(second)
        assert (first.stacktrace, first.stacktrace_is_output) == ("Boom", False)


def test_the_agent_run_that_ended_last_decides_whatever_the_order_read() -> None:
    """An agent that failed, then one that succeeded later, leave the task recovered, in
    whatever order they are read or merged; a failed agent run ending last fails it."""
    from otel_diary.conventions import OPENINFERENCE

    agent = {"openinference.span.kind": "AGENT", "agent.name": "researcher"}
    chain = {"openinference.span.kind": "CHAIN"}
    for order in ((1, 2), (2, 1)):
        summary = ChildSummary()
        for end in order:
            summary.add(agent, end == 1, OPENINFERENCE, end)
        summary.add(chain, False, OPENINFERENCE, 3)  # a chain around it is no agent run
        assert not summary.last_run_failed
    late_failure, earlier = ChildSummary(), ChildSummary()
    late_failure.add(agent, True, OPENINFERENCE, 5)
    earlier.add(agent, False, OPENINFERENCE, 4)
    earlier.merge(late_failure)
    assert earlier.last_run_failed


def test_what_a_tool_was_given_is_the_same_whatever_the_order_read_or_merged() -> None:
    """Of calls that ended at once, the first failed one kept is the least text and the
    last successful one the greatest, however they come in or are merged: ``serve`` reads
    spans in any order. What is kept counts toward the summary's size."""
    from itertools import permutations

    from otel_diary.conventions import GENAI

    calls = [(True, 5, '{"q": "b"}'), (True, 5, '{"q": "a"}'), (True, 6, '{"q": "c"}'),
             (False, 9, '{"q": "y"}'), (False, 9, '{"q": "z"}'), (False, 7, '{"q": "x"}')]
    kept = {"search": ['{"q": "a"}', '{"q": "z"}']}
    for order in permutations(calls):
        halves = ChildSummary(), ChildSummary()
        for n, (failed, end, arguments) in enumerate(order):
            halves[n % 2].add({"gen_ai.operation.name": "execute_tool",
                               "gen_ai.tool.name": "search",
                               "gen_ai.tool.call.arguments": arguments}, failed, GENAI, end)
        halves[0].merge(halves[1])
        assert halves[0].tool_outcomes == {"search": [5, 9]}
        assert halves[0].tool_inputs == kept, order
    whole, bare = ChildSummary(), ChildSummary()
    for failed, end, arguments in calls:
        call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        whole.add({**call, "gen_ai.tool.call.arguments": arguments}, failed, GENAI, end)
        bare.add(call, failed, GENAI, end)
    assert whole.names == bare.names + len('{"q": "a"}') + len('{"q": "z"}')


def test_flattened_messages_give_the_first_question_and_the_last_answer() -> None:
    """Of model calls' flattened messages, the first user message of the call that ended
    first and the last assistant message with text of the call that ended last are kept,
    however the calls come in or are merged; a call that answered with a tool call only
    (no text) answers nothing, and a role past the first four messages is not read."""
    from itertools import permutations

    from otel_diary.conventions import OPENINFERENCE

    def call(*messages: tuple[str, str], out: str = "") -> dict[str, object]:
        attributes: dict[str, object] = {"llm.model_name": "m"}
        for at, (role, content) in enumerate(messages):
            attributes[f"llm.input_messages.{at}.message.role"] = role
            attributes[f"llm.input_messages.{at}.message.content"] = content
        attributes["llm.output_messages.0.message.role"] = "assistant"
        if out:
            attributes["llm.output_messages.0.message.content"] = out
        return attributes

    calls = [
        (4, call(("system", "Be brief."), ("user", "Fix the build"), out="Looking.")),
        (4, call(("system", "Be brief."), ("user", "Check the build"), out="Checked.")),
        (6, call(("user", "Later"), ("assistant", "x"))),  # a tool call: no text out
        (5, call(("user", "Then"), out="Done. It passes.")),
        (3, call(("system", "s"), ("system", "s"), ("system", "s"), ("system", "s"),
                 ("user", "Past the fourth"))),
    ]
    for order in permutations(calls):
        halves = ChildSummary(), ChildSummary()
        for n, (end, attributes) in enumerate(order):
            halves[n % 2].add(attributes, False, OPENINFERENCE, end)
        halves[0].merge(halves[1])
        assert (halves[0].asked, halves[0].answered) == ("Check the build",
                                                         "Done. It passes."), order


def test_a_tool_call_whose_result_handed_its_error_back_failed() -> None:
    """A tool call whose span ended OK but whose captured result handed its error back to
    the model (Google ADK's ReflectAndRetryToolPlugin) is a failed call, with that error's
    type and message; counted once when its span failed too; under a profile that reads
    no results, and with any other result, a call that succeeded."""
    call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "build",
            "gen_ai.tool.call.result": json.dumps({
                "response_type": HANDED_BACK, "error_type": "RuntimeError",
                "error_details": "TS2345: boom", "reflection_guidance": "Try again."})}
    summary = ChildSummary()
    summary.add(call, False, GENAI, end_ns=10)
    summary.add({**call, "gen_ai.tool.call.result": '{"result": "built"}'}, False, GENAI,
                end_ns=20)
    assert (summary.tool_calls, summary.failed_spans) == (2, 1)
    assert (list(summary.error_types), summary.first_error) == (["RuntimeError"],
                                                                "RuntimeError: TS2345: boom")
    assert summary.last_ok_ns == 20 > summary.last_failure_ns == 10
    raised = ChildSummary()
    raised.add({**call, "error.type": "ToolError"}, True, GENAI, end_ns=10)
    assert (raised.failed_spans, list(raised.error_types)) == (1, ["ToolError"])
    unread = ChildSummary()
    unread.add({**call, "orchestrator.tool": "build"}, False, ORCHESTRATOR, end_ns=10)
    assert unread.failed_spans == 0 and unread.first_error is None


def test_a_tool_call_whose_execution_under_it_failed_failed() -> None:
    """A tool call whose span ended OK over a span that failed, nothing under it going on
    after (Claude Code's ``claude_code.tool`` over its failed ``claude_code.tool.execution``),
    is a failed call of that tool, given what it was; one whose failure under it was got
    past, or with nothing failed under it, succeeded."""
    def call(command: str, under: ChildSummary | None, end_ns: int) -> None:
        summary.add({"tool_name": "Bash", "full_command": command}, False, CLAUDE_CODE,
                    end_ns, under)

    def execution(failed: bool, end_ns: int, *then: int) -> ChildSummary:
        under = ChildSummary()
        under.add({"error_class": "ShellError"} if failed else {}, failed, CLAUDE_CODE,
                  end_ns)
        for later in then:  # a span under the call that went on after
            under.add({}, False, CLAUDE_CODE, later)
        return under

    summary = ChildSummary()
    call("exit 3", execution(True, 10), 11)
    call("make retry", execution(True, 20, 21), 22)
    call("echo built", execution(False, 30), 31)
    assert summary.tool_outcomes["Bash"] == [11, 31]
    assert summary.tool_inputs["Bash"] == ["exit 3", "echo built"]


def usage(tokens_in: int, tokens_out: int, response: object = None,
          run: bool = False) -> dict[str, object]:
    """A GenAI span's usage, with its response's id when given: a model call's, or with
    ``run`` an agent's run's span."""
    found: dict[str, object] = {"gen_ai.usage.input_tokens": tokens_in,
                                "gen_ai.usage.output_tokens": tokens_out,
                                "gen_ai.operation.name": "invoke_agent" if run else "chat"}
    return found if response is None else {**found, "gen_ai.response.id": response}


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 6))
def test_a_response_an_agents_span_reports_again_counts_once_whatever_the_order(
        shuffle: Random, cut: int) -> None:
    """An agent's span reporting the usage of a model call beside it, with the call's
    response id (OpenLIT's LangGraph node), does not count it again: a response counts
    the larger of what its model calls reported, summed (two calls a server gave one id,
    as Ollama may), and the most an agent's span reported with it; usage with no id counts.
    In any order, and merged from any two parts, or added up as counts."""
    spans = [usage(11, 7, "chatcmpl-1"), usage(11, 7, "chatcmpl-1", run=True),
             usage(20, 1, "chatcmpl-2"), usage(15, 3, "chatcmpl-2"),
             usage(30, 2, "chatcmpl-2", run=True), usage(5, 5), usage(2, 2, run=True)]

    def summary(items: Sequence[dict[str, object]]) -> ChildSummary:
        made = ChildSummary()
        for attributes in items:
            made.add(attributes, False, GENAI)
        return made

    shuffled = shuffle.sample(spans, len(spans))
    whole = summary(shuffled)
    assert (whole.input_tokens, whole.output_tokens) == (11 + 35 + 5 + 2, 7 + 4 + 5 + 2)
    later, earlier = summary(shuffled[cut:]), summary(shuffled[:cut])
    later.merge(earlier)
    assert later == whole
    counted = ChildSummary()
    counted.add_counts(summary(shuffled[cut:]))
    counted.add_counts(summary(shuffled[:cut]))
    assert (counted.input_tokens, counted.output_tokens) == (53, 18)


def test_a_span_over_calls_is_read_by_what_it_adds_not_by_its_id() -> None:
    """A span whose usage covers the calls under it adds what it reports beyond them,
    whatever id it gives; ids are read under conventions that name them only."""
    below = ChildSummary()
    below.add(usage(11, 7, "chatcmpl-1"), False, GENAI)
    summary = ChildSummary()
    summary.add(usage(30, 10, "chatcmpl-1", run=True), False, GENAI, below=below)
    summary.merge(below)
    assert (summary.input_tokens, summary.output_tokens) == (30, 10)
    plain = ChildSummary()
    plain.add(usage(11, 7, "chatcmpl-1"), False, ORCHESTRATOR)
    plain.add(usage(11, 7, "chatcmpl-1", run=True), False, ORCHESTRATOR)
    assert (plain.input_tokens, plain.responses) == (22, {})


@pytest.mark.parametrize("response", ["", "  ", "x" * 257, ["chatcmpl-1"], {"id": 1}, 7])
def test_a_response_id_that_is_no_id_counts_each_time(response: object) -> None:
    """An id that is empty, blank, too long, or not a scalar is no id: an agent's span
    reporting usage with it counts as well as the call (7 is read as ``"7"``, an id)."""
    summary = ChildSummary()
    summary.add(usage(11, 7, response), False, GENAI)
    summary.add(usage(11, 7, response, run=True), False, GENAI)
    assert summary.input_tokens == (11 if response == 7 else 22)


def test_response_ids_stop_at_their_bound() -> None:
    """Past ``MAX_RESPONSES`` ids a summary keeps no more: an agent's span reporting a
    response it kept counts nothing again, one it did not keep counts."""
    summary = ChildSummary()
    for n in range(MAX_RESPONSES + 3):
        summary.add(usage(1, 0, f"r-{n}"), False, GENAI)
    summary.add(usage(1, 0, "r-0", run=True), False, GENAI)
    summary.add(usage(1, 0, f"r-{MAX_RESPONSES + 1}", run=True), False, GENAI)
    assert (len(summary.responses), summary.input_tokens) == (MAX_RESPONSES,
                                                              MAX_RESPONSES + 4)
