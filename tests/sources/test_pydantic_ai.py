"""Pydantic AI's own OpenTelemetry spans (GenAI conventions) with the `genai` profile,
against the local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_diary.pipeline.render import parse_front_matter
from tests.sources.test_genai import GenAIHarness
from tests.sources.test_openinference import readme_snippet
from tests.support.build_run import MODEL
from tests.support.loopback import ChatServer, ToolCall, serve_asgi

pytest.importorskip("pydantic_ai", reason="pydantic-ai 2 needs Python 3.11 or later")

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


class Harness(GenAIHarness):
    """The `genai` harness, with Pydantic AI's models."""

    @contextmanager
    def model(self, script: list[str | int | ToolCall]) -> Iterator[OpenAIChatModel]:
        """A model on a local server answering ``script``, with Pydantic AI's
        instrumentation on this provider meanwhile."""
        with serve_asgi(ChatServer(script=script, model=MODEL)) as url:
            Agent.instrument_all(InstrumentationSettings(tracer_provider=self.provider))
            try:
                yield OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url + "/v1",
                                                                      api_key="test-key"))
            finally:
                Agent.instrument_all(False)


@pytest.fixture
def harness() -> Iterator[Harness]:
    made = Harness()
    yield made
    made.provider.shutdown()
    made.serve.check(made.sink.diaries)


async def streamed(agent: Agent[None, str], question: str) -> str:
    async with agent.run_stream(question) as result:
        return await result.get_output()


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_an_agent_run_is_one_diary(harness: Harness, stream: bool) -> None:
    """A Pydantic AI agent run with a tool the model calls twice (the first call asks for a
    retry) is one recovered diary: the agent's name, the model, the summed tokens, the tool
    by name, the error class, the question as title and the final answer; the same when
    the run streams its answer."""
    lookups: list[str] = []
    lookup_call = ToolCall("lookup", '{"term": "release"}')
    with harness.model([lookup_call, lookup_call, "The release moved. Details follow."]) \
            as model:
        agent = Agent(model, name="researcher")

        @agent.tool_plain  # type: ignore[untyped-decorator, unused-ignore]  # (3.10: no stubs)
        def lookup(term: str) -> str:
            """Look a term up."""
            lookups.append(term)
            if len(lookups) == 1:
                raise ModelRetry("lookup timed out, try again")
            return f"notes about {term}"

        answer = (asyncio.run(streamed(agent, "What changed?")) if stream
                  else agent.run_sync("What changed?").output)
        assert answer == "The release moved. Details follow."
    [diary] = harness.diaries()
    front = parse_front_matter(diary.content)
    assert (diary.agent, front["model"], front["tokens"]) == ("researcher", MODEL, 3 * 18)
    assert diary.title == "What changed?"
    assert ("Made 2 tool call(s): lookup (2). The call to the lookup tool that failed was "
            'given `{"term":"release"}`; the one that succeeded was given the same.'
            in diary.body)  # a retry with the same input worked
    assert 'The final answer began: "The release moved."' in diary.body
    # The tool call that asked for a retry is a failed span with an exception event.
    assert diary.outcome == "recovered"
    assert "1 failed call(s) (pydantic_ai.exceptions.ToolRetryError)" in diary.body
    assert ("First error: pydantic_ai.exceptions.ToolRetryError: lookup timed out, try again"
            in diary.body)


def test_an_agent_that_answered_after_its_delegate_failed_is_recovered(
        harness: Harness) -> None:
    """A lead agent whose tool delegates to another agent, which fails (its tool raised),
    catches the failure and answers itself: one recovered diary, the lead's. The failed
    agent's run is not the run's end: the lead's own model call went on after it."""
    with harness.model([ToolCall("delegate", '{"question": "release?"}'),
                        ToolCall("lookup", '{"term": "release"}'), "The release moved."]) \
            as model:
        searcher, lead = Agent(model, name="searcher"), Agent(model, name="lead")

        @searcher.tool_plain  # type: ignore[untyped-decorator, unused-ignore]  # (3.10: no stubs)
        def lookup(term: str) -> str:
            """Look a term up."""
            raise RuntimeError("search index offline")

        @lead.tool_plain  # type: ignore[untyped-decorator, unused-ignore]
        async def delegate(question: str) -> str:
            """Ask the searcher."""
            try:
                return (await searcher.run(question)).output
            except RuntimeError as exc:
                return f"the searcher failed: {exc}"

        assert lead.run_sync("What changed?").output == "The release moved."
    [diary] = harness.diaries()
    assert (diary.agent, diary.outcome, diary.title) == ("lead", "recovered", "What changed?")
    assert "First error: RuntimeError: search index offline" in diary.body


def test_the_readme_snippet_gives_one_diary(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Pydantic AI lines, run as written on an app's provider, give the run
    its diary in the folder."""
    import otel_diary

    monkeypatch.setenv("KB_DIARIES_ENABLED", "1")
    monkeypatch.setenv("OTEL_DIARY_DIR", str(tmp_path))
    provider = TracerProvider(shutdown_on_exit=False)
    exec(readme_snippet("Pydantic AI"), {"provider": provider, "otel_diary": otel_diary})
    try:
        with serve_asgi(ChatServer(script=["It moved."], model=MODEL)) as url:
            model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url + "/v1",
                                                                    api_key="test-key"))
            Agent(model, name="researcher").run_sync("What changed?")
    finally:
        Agent.instrument_all(False)
    assert provider.force_flush(10_000)
    provider.shutdown()
    [path] = (tmp_path / "diaries" / "agents" / "researcher").glob("*.md")
    assert parse_front_matter(path.read_text())["title"] == "What changed?"
