"""The `genai` profile on a real TracerProvider: agent spans are tasks, their child spans
give tokens, models, tool calls and recoveries. (The run with the real OpenAI
instrumentation and client is the README's GenAI command in test_readme_adoption.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_diary import GENAI, Diary, DiarySpanProcessor
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.testing import InMemorySink
from tests.support.serve_path import SameInServe


class GenAIHarness:
    """A provider whose diary processor uses the `genai` profile (or ``profile``); after
    each test, ``serve`` must write the same diaries from the spans it ended."""

    def __init__(self, profile: str = "genai") -> None:
        self.sink = InMemorySink()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                                       shutdown_on_exit=False)
        self.processor = DiarySpanProcessor(enabled=True, sinks=[self.sink],
                                            conventions=profile)
        self.provider.add_span_processor(self.processor)
        self.serve = SameInServe(self.provider, profile)
        self.tracer: Tracer = self.provider.get_tracer("tests")

    def diaries(self) -> list[Diary]:
        assert self.processor.force_flush(10_000)
        return self.sink.diaries

    def agent(self, name: str = "researcher", **attributes: Any) -> Any:
        return self.tracer.start_as_current_span(f"invoke_agent {name}", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
            **attributes})

    def chat(self, model: str = "gpt-4o", tokens: tuple[int, int] = (10, 5),
             error: str | None = None, older_names: bool = False) -> None:
        usage = ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens") \
            if older_names else ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat",
                                      "gen_ai.request.model": model}
        if error is None:
            attributes.update(zip(usage, tokens, strict=True))
        else:
            attributes["error.type"] = error
        with self.tracer.start_as_current_span(f"chat {model}", attributes=attributes) as span:
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, error))

    def tool(self, name: str = "search", failed: bool = False, given: str | None = None) -> None:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if given is not None:
            attributes["gen_ai.tool.call.arguments"] = given
        with self.tracer.start_as_current_span(f"execute_tool {name}",
                                               attributes=attributes) as span:
            if failed:
                span.set_status(Status(StatusCode.ERROR, f"{name} failed"))


@pytest.fixture
def genai() -> Iterator[GenAIHarness]:
    harness = GenAIHarness()
    yield harness
    harness.provider.shutdown()
    harness.serve.check(harness.sink.diaries)


def test_profile_is_selected_by_name(genai: GenAIHarness) -> None:
    """`conventions="genai"` selects the GenAI profile."""
    assert genai.processor.conventions is GENAI


def test_agent_run_sums_its_children(genai: GenAIHarness) -> None:
    """An agent's diary sums its chat spans' tokens (current and older names) and counts tools."""
    with genai.agent(**{"gen_ai.conversation.id": "conv-7",
                        "gen_ai.provider.name": "openai"}):
        genai.chat(tokens=(100, 20))
        genai.tool()
        genai.tool("fetch")
        genai.chat(model="gpt-4o-mini", tokens=(30, 4), older_names=True)
    [diary] = genai.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.outcome, diary.agent, diary.task_id) == ("completed", "researcher", "conv-7")
    assert front["tokens"] == 154
    assert front["model"] == "gpt-4o"
    assert front["route"] == "openai"
    assert "Made 2 tool call(s): fetch (1), search (1). Also used gpt-4o-mini." in diary.body
    assert "## Error encountered" not in diary.body


def test_older_provider_name_and_missing_conversation(genai: GenAIHarness) -> None:
    """`gen_ai.system` stands in for the provider; without a conversation id the span id is the
    task id."""
    with genai.agent(**{"gen_ai.system": "anthropic"}) as span:
        genai.chat(model="claude")
    [diary] = genai.diaries()
    assert diary.task_id == f"{span.get_span_context().span_id:016x}"
    assert "Route: anthropic via claude." in diary.body


def test_failed_call_then_success_is_recovered(genai: GenAIHarness) -> None:
    """A successful agent run after a failed child call is `recovered`, naming the error."""
    with genai.agent():
        genai.chat(error="openai.RateLimitError")
        genai.chat(tokens=(10, 5))
    [diary] = genai.diaries()
    assert diary.outcome == "recovered"
    error_section = diary.body.split("## Error encountered\n", 1)[1].split("##", 1)[0]
    assert "1 failed call(s) (openai.RateLimitError)" in error_section
    assert recovery_section(diary) == "A call to gpt-4o failed; a later one succeeded."
    assert "Tokens: 15." in diary.body


def recovery_section(diary: Diary) -> str:
    return diary.body.split("## How it was recovered\n", 1)[1].split("\n\n", 1)[0]


def test_how_the_run_got_past_each_failed_tool_and_model_call(genai: GenAIHarness) -> None:
    """"How it was recovered" tells, of each tool and model whose call failed, the first to
    fail first, whether a call to it succeeded afterwards, or (a model) which one the run
    went on with."""
    with genai.agent():
        genai.tool("search", failed=True)
        genai.tool("search")
        genai.chat(model="big-model", error="openai.RateLimitError")
        genai.chat(model="small-model")
        genai.tool("fetch", failed=True)
    [diary] = genai.diaries()
    assert recovery_section(diary) == (
        "A call to the search tool failed; a later one succeeded. "
        "After a call to big-model failed, the agent went on with small-model. "
        "After a call to the fetch tool failed, the agent went on without it.")


def test_what_the_failed_call_and_the_last_one_that_succeeded_were_given(
        genai: GenAIHarness) -> None:
    """Of a tool whose calls' arguments were captured: "What was done" says what its first
    failed call was given and, when a later call succeeded, what the last one that did
    was given; "How it was recovered" is unchanged (a lesson's rule, the same whatever the
    arguments). A tool's call that never succeeded after it failed has its failed call's;
    a call given the same input as the failed one says so (a retry worked)."""
    with genai.agent():
        genai.tool("search", given='{"q": "ordrs"}')
        genai.tool("search", failed=True, given='{"q": "order"}')
        genai.tool("search", failed=True, given='{"q": "orders by day"}')
        genai.tool("search", given='{"q": "orders"}')
        genai.tool("search", given='{"q": "orders per day"}')
        genai.tool("fetch", failed=True, given='{"url": "/orders"}')
        genai.tool("read", failed=True, given='{"path": "a.ts"}')
        genai.tool("read", given='{"path": "a.ts"}')
    [diary] = genai.diaries()
    done = diary.body.split("## What was done\n", 1)[1].split("\n\n", 1)[0]
    assert done.endswith(
        "Made 8 tool call(s): search (5), read (2), fetch (1). "
        'The call to the search tool that failed was given `{"q": "order"}`; the one that '
        'succeeded, `{"q": "orders per day"}`. '
        'The call to the fetch tool that failed was given `{"url": "/orders"}`. '
        'The call to the read tool that failed was given `{"path": "a.ts"}`; the one that '
        "succeeded was given the same."), done
    assert recovery_section(diary) == (
        "A call to the search tool failed; a later one succeeded. "
        "After a call to the fetch tool failed, the agent went on without it. "
        "A call to the read tool failed; a later one succeeded.")


def test_arguments_too_large_to_keep_are_not_quoted(genai: GenAIHarness) -> None:
    """A failed call given more than a summary keeps of a captured value (64 KiB) has no
    arguments to quote; the one that succeeded after it is not quoted alone either."""
    with genai.agent():
        genai.tool("search", failed=True, given='{"q": "' + "x" * 70_000 + '"}')
        genai.tool("search", given='{"q": "orders"}')
    [diary] = genai.diaries()
    assert "that failed was given" not in diary.body and "x" * 100 not in diary.body
    assert recovery_section(diary) == "A call to the search tool failed; a later one succeeded."


def test_a_failed_agent_with_a_model_is_no_failed_model_call(genai: GenAIHarness) -> None:
    """A sub-agent span naming its model that failed because its tool call did is an agent
    run, not a call to the model: only the tool's failure is told."""
    with genai.agent():
        for failed in (True, False):
            with genai.tracer.start_as_current_span("invoke_agent helper", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper",
                    "gen_ai.request.model": "gpt-4o"}) as helper:
                genai.tool("search", failed=failed)
                if failed:
                    helper.set_status(Status(StatusCode.ERROR, "search failed"))
    [diary] = genai.diaries()
    assert recovery_section(diary) == "A call to the search tool failed; a later one succeeded."


def test_a_failed_call_named_by_nothing_is_got_past_in_general_words(
        genai: GenAIHarness) -> None:
    """A failed span that is neither a tool's nor a model's call, or one that succeeded
    only before it failed, gets no more than the facts allow."""
    with genai.agent():
        genai.chat(model="m")
        genai.chat(model="m", error="TimeoutError")
        with genai.tracer.start_as_current_span("step") as step:
            step.set_status(Status(StatusCode.ERROR, "step failed"))
    [diary] = genai.diaries()
    assert recovery_section(diary) == "After a call to m failed, the agent went on without it."
    with genai.agent():
        with genai.tracer.start_as_current_span("step") as step:
            step.set_status(Status(StatusCode.ERROR, "step failed"))
    [_, diary] = genai.diaries()
    assert recovery_section(diary) == ("The agent went on after the failed call(s), and the "
                                       "run ended successfully.")


def test_stringified_exception_class_is_named_plainly(genai: GenAIHarness) -> None:
    """An `error.type` recorded as ``<class 'pkg.Error'>`` is reported as ``pkg.Error``."""
    with genai.agent():
        genai.chat(error="<class 'openai.InternalServerError'>")
        genai.chat()
    [diary] = genai.diaries()
    assert "(openai.InternalServerError)" in diary.body
    assert "<class" not in diary.body


def test_failed_agent_writes_nothing(genai: GenAIHarness) -> None:
    """An agent span that ends in error writes no diary, whatever its children did."""
    with genai.agent() as span:
        genai.chat()
        span.set_status(Status(StatusCode.ERROR, "gave up"))
    assert genai.diaries() == []


def failed_span(genai: GenAIHarness, name: str, **attributes: str) -> None:
    with genai.tracer.start_as_current_span(name, attributes=attributes) as span:
        span.set_status(Status(StatusCode.ERROR, f"{name} failed"))


def failed_step(genai: GenAIHarness) -> None:
    """A step of an agent's run that failed: a span the profile marks a task."""
    failed_span(genai, "invoke_workflow turn", **{"gen_ai.operation.name": "invoke_workflow"})


def test_an_agent_run_a_step_of_which_failed_last_fails_its_task(
        genai: GenAIHarness) -> None:
    """An agent's run a step of which (a span the profile marks a task) failed with
    nothing under it going on after (an input guardrail stopping an OpenAI Agents run: its
    spans above end OK) failed, so its task did; a failed call that nothing followed, or a
    failed step something went on after, was got past."""
    with genai.agent("workflow"), genai.agent("researcher"):
        genai.chat()
        failed_step(genai)
    assert genai.diaries() == []
    with genai.agent("workflow"), genai.agent("researcher"):
        genai.chat()
        genai.tool("fetch", failed=True)
    with genai.agent("workflow"), genai.agent("researcher"):
        failed_step(genai)
        genai.chat()
    assert [diary.outcome for diary in genai.diaries()] == ["recovered", "recovered"]


def test_an_agent_that_went_on_after_its_sub_agent_failed_recovered(
        genai: GenAIHarness) -> None:
    """An agent whose sub-agent failed, and which then called its model itself and
    answered, got past the failure: the run is recovered. The same run with nothing after
    the sub-agent failed (as the OpenAI Agents SDK's workflow around a failed agent)."""
    with genai.agent("lead"):
        with genai.agent("helper") as helper:
            genai.chat()
            helper.set_status(Status(StatusCode.ERROR, "helper gave up"))
        genai.chat()
    [diary] = genai.diaries()
    assert (diary.agent, diary.outcome) == ("lead", "recovered")
    assert "1 failed call(s)" in diary.body
    with genai.agent("lead"):
        genai.chat()
        with genai.agent("helper") as helper:
            helper.set_status(Status(StatusCode.ERROR, "helper gave up"))
    assert len(genai.diaries()) == 1


def test_a_step_that_ended_ok_around_a_failure_did_not_go_on(genai: GenAIHarness) -> None:
    """A step that ended OK while a failure went up through it (OpenInference ends an
    agent's turn so around a sub-agent whose guardrail stopped it, the app gets the
    exception) is not the run going on: the run failed."""
    with genai.agent("workflow"), genai.agent("researcher"):
        genai.chat()
        with genai.tracer.start_as_current_span("invoke_workflow turn", attributes={
                "gen_ai.operation.name": "invoke_workflow"}):
            with genai.tracer.start_as_current_span("execute_tool ask", attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "ask"}) as ask:
                with genai.agent("helper"):
                    failed_step(genai)
                ask.set_status(Status(StatusCode.ERROR, "helper stopped"))
    assert genai.diaries() == []


def test_a_call_that_went_on_after_a_failure_under_it_got_past_it(
        genai: GenAIHarness) -> None:
    """A model call whose first request failed and whose client retried (a failed HTTP
    span under a chat span that ended OK) is a run that went on: recovered, one failure."""
    with genai.agent("workflow"), genai.agent("researcher"):
        with genai.tracer.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}):
            failed_span(genai, "POST")  # the client's first request: it retried
            with genai.tracer.start_as_current_span("POST"):
                pass
    [diary] = genai.diaries()
    assert diary.outcome == "recovered"
    assert "1 failed call(s)" in diary.body


def test_nested_sub_agent_belongs_to_the_outer_agent(genai: GenAIHarness) -> None:
    """A sub-agent invoked directly by its agent adds to the outer diary, not one of its own."""
    with genai.agent("planner", **{"gen_ai.conversation.id": "outer"}):
        genai.chat(tokens=(10, 1))
        with genai.agent("coder", **{"gen_ai.conversation.id": "inner"}):
            genai.chat(tokens=(20, 2))
            genai.tool()
    [diary] = genai.diaries()
    assert (diary.agent, diary.task_id) == ("planner", "outer")
    assert "Tokens: 33." in diary.body
    assert "Made 1 tool call(s): search (1)." in diary.body


def test_workflow_is_a_task_and_plain_chats_are_not(genai: GenAIHarness) -> None:
    """`invoke_workflow` spans are tasks; chat spans outside any agent write nothing."""
    genai.chat()
    with genai.tracer.start_as_current_span("invoke_workflow triage", attributes={
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "triage"}):
        genai.chat()
    [diary] = genai.diaries()
    front = parse_front_matter(diary.content)
    assert front["workflow"] == "triage"
    assert diary.title == "invoke_workflow triage"


def test_a_failure_recorded_as_an_exception_event_names_its_class(
        genai: GenAIHarness) -> None:
    """A tool span that failed the way instrumentations record it (an `exception` event and
    an ERROR status, no `error.type`) names the exception's class in "Error encountered"."""
    with genai.agent():
        try:
            with genai.tracer.start_as_current_span("execute_tool fetch", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"}):
                raise TimeoutError("the page took too long")
        except TimeoutError:
            pass
        genai.tool("fetch")
    [diary] = genai.diaries()
    error_section = diary.body.split("## Error encountered\n", 1)[1].split("\n## ", 1)[0]
    assert "1 failed call(s) (TimeoutError)" in error_section


def failing_tool(tracer: Tracer, secret: str) -> None:
    """A tool span that fails the way instrumentations record it: an ``exception`` event
    (class, message, stack trace) and an ERROR status, no ``error.type``."""
    with tracer.start_as_current_span("execute_tool lookup", record_exception=False,
                                      set_status_on_exception=False, attributes={
                                          "gen_ai.operation.name": "execute_tool"}) as span:
        try:
            raise LookupError(f"no row for key {secret} in table orders")
        except LookupError as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))


def test_a_failed_call_names_its_error_and_stack_trace(genai: GenAIHarness) -> None:
    """A child failure recorded as an exception event gives "Error encountered" its class
    and short message and the end of its stack trace, all redacted, and a signature."""
    secret = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    with genai.agent():
        failing_tool(genai.tracer, secret)
        genai.tool("lookup")
    [diary] = genai.diaries()
    section = diary.body.split("## Error encountered\n")[1].split("\n## ")[0]
    assert "1 failed call(s) (LookupError)" in section
    assert "First error: LookupError: no row for key" in section
    assert "End of the failed call's stack trace:" in section
    assert 'raise LookupError(f"no row for key {secret} in table orders")' in section
    assert secret not in diary.content
    assert 'The first failure read "LookupError: no row for key' in diary.body


def test_captured_messages_say_what_the_run_was_about(genai: GenAIHarness) -> None:
    """With content captured, the first user message (one line, redacted) is the title and
    the final answer's first sentence reaches the reflection; without it, the span name."""
    secret = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    question = [{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                {"role": "user", "parts": [{"type": "text",
                                            "content": f"Why does key {secret}\nfail?"}]}]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content":
                                               "The key expired. Rotate it."}]}]
    with genai.agent(**{"gen_ai.input.messages": json.dumps(question),
                        "gen_ai.output.messages": json.dumps(answer)}):
        genai.tool()
    with genai.agent():
        genai.tool()
    captured, bare = genai.diaries()
    assert captured.title.startswith("Why does key ") and captured.title.endswith(" fail?")
    assert secret not in captured.content and "\n" not in captured.title
    assert 'The final answer began: "The key expired."' in captured.body
    assert bare.title == "invoke_agent researcher"
    assert "final answer" not in bare.body
