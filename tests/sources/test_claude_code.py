"""The `claude-code` profile on spans built to Claude Code's documented trace attributes.

Claude Code cannot run here: these spans are made on a real TracerProvider with the span
names and attribute names its monitoring documentation gives for traces (beta) --
``claude_code.interaction`` (``session.id``, ``user_prompt``, ``user_prompt_length``,
``interaction.sequence``, ``interaction.duration_ms``), ``claude_code.llm_request``
(``model``, ``gen_ai.system``, ``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
``duration_ms``) and ``claude_code.tool`` (``tool_name``, ``duration_ms``) -- not recorded
from a running Claude Code."""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from otel_diary import Diary, DiarySpanProcessor
from otel_diary.conventions import CLAUDE_CODE
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.testing import InMemorySink


def interaction(prompt: str) -> list[Diary]:
    """One prompt with two model requests and two tool calls (one failed, then run again)."""
    sink = InMemorySink()
    provider = TracerProvider(resource=Resource.create({"service.name": "claude-code"}),
                              shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], conventions="claude-code")
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("com.anthropic.claude_code.tracing")
    assert processor.conventions is CLAUDE_CODE
    with tracer.start_as_current_span("claude_code.interaction", attributes={
            "session.id": "3f1c2b7e", "user_prompt": prompt,
            "user_prompt_length": len(prompt), "interaction.sequence": 1}):
        for tokens in ((1200, 80), (1400, 60)):
            with tracer.start_as_current_span("claude_code.llm_request", attributes={
                    "model": "claude-sonnet-4-5", "gen_ai.system": "anthropic",
                    "input_tokens": tokens[0], "output_tokens": tokens[1],
                    "cache_read_tokens": 900, "duration_ms": 2100}):
                pass
            with tracer.start_as_current_span("claude_code.tool", attributes={
                    "tool_name": "Bash", "duration_ms": 800}) as tool:
                if tokens[0] == 1200:
                    tool.set_status(Status(StatusCode.ERROR, "exit code 1"))
    assert processor.force_flush(10_000)
    provider.shutdown()
    return sink.diaries


def test_an_interaction_is_one_diary_with_tokens_and_tools() -> None:
    """A prompt's interaction is one recovered diary: the prompt as title, summed bare
    tokens, tools by name."""
    prompt = "Make the failing date test pass"
    [diary] = interaction(prompt)
    front = parse_front_matter(diary.content)
    assert (diary.task_id, diary.agent, diary.title) == ("3f1c2b7e", "claude-code", prompt)
    assert (diary.outcome, front["model"], front["tokens"]) == (
        "recovered", "claude-sonnet-4-5", 1200 + 80 + 1400 + 60)
    assert "Made 2 tool call(s): Bash (2)." in diary.body
    assert "1 failed call(s)" in diary.body and "First error: exit code 1" in diary.body


def test_a_prompt_not_logged_is_no_title() -> None:
    """Without ``OTEL_LOG_USER_PROMPTS=1`` the prompt comes as ``<REDACTED>``: the diary is
    titled by the span name instead."""
    [diary] = interaction("<REDACTED>")
    assert diary.title == "claude_code.interaction"
