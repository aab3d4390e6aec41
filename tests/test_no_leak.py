"""Nothing secret leaves the process, and the process never traces its own traffic."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from hypothesis import given, settings
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_diary import (
    GENAI,
    ORCHESTRATOR,
    ChildSummary,
    Diary,
    DiarySpanProcessor,
    Settings,
    SpanRecord,
    classify,
)
from otel_diary.cli import main
from otel_diary.conventions import OPENINFERENCE
from otel_diary.index.pgschema import SCHEMA
from otel_diary.index.postgres import PostgresStore
from otel_diary.pipeline.llm import LLMReflector
from otel_diary.sinks.hub.sink import HubSink
from otel_diary.wiring import build_pipeline
from tests.support.kb import TS_STDERR
from tests.support.knowledge import build_knowledge_base
from tests.support.loopback import ChatServer, HubServer, serve_asgi, wait_until
from tests.support.mcp_client import SERVER as MCP_SERVER
from tests.support.mcp_client import stdio_session
from tests.support.secret_strategies import Drawn, any_secret

END_NS = 1_785_000_000_000_000_000


def strings(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON document."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_no_generated_secret_reaches_the_file_the_hub_or_the_model(tmp_path: Path) -> None:
    """Secrets in a task's title, stderr tail and model answer reach no file, hub or model."""
    chat, hub = ChatServer(), HubServer()
    counter = itertools.count(1)
    seen: dict[str, list[str]] = {}
    with serve_asgi(chat) as chat_url, serve_asgi(hub) as hub_url:
        pipeline = build_pipeline(Settings(
            dir=tmp_path / "kb", index=False, hub_url=hub_url, spool_dir=tmp_path / "spool",
            reflection_url=chat_url + "/v1", reflection_calls_per_minute=10_000,
            retry_initial_backoff_s=0.01), ORCHESTRATOR)
        sink = pipeline.sinks[-1]
        assert isinstance(sink, HubSink)

        @settings(max_examples=60, deadline=None)
        @given(any_secret)
        def check(drawn: Drawn) -> None:
            text, secrets = drawn
            n = next(counter)
            chat.script = [f"Insight about {text} to remember."]
            ids = random.Random(n)  # ids that share no digit run with a simple secret
            record = SpanRecord(
                trace_id=ids.getrandbits(128) | 1, span_id=ids.getrandbits(64) | 1,
                name="task", start_ns=END_NS - 8_421_000_000, end_ns=END_NS, attributes={
                    "orchestrator.task.id": f"T-{n}", "orchestrator.agent.name": "coder",
                    "orchestrator.task.title": f"Deploy with {text}",
                    "orchestrator.escalation_count": 1,
                    "orchestrator.build_verify.stderr_tail": f"step 1\n{text}\nstep 2 failed"})
            diary = pipeline.handle((record, ChildSummary()))
            assert diary is not None
            file_text = next((tmp_path / "kb").rglob(f"*T-{n}.md")).read_text("utf-8")
            assert wait_until(lambda: diary.id in hub.documents)
            hub_body = hub.documents[diary.id]
            model_request = chat.requests[-1].json()
            assert "[REDACTED:" in file_text
            for secret in secrets:
                assert secret not in file_text
                assert not any(secret in s for s in strings(hub_body))
                assert not any(secret in s for s in strings(model_request))
            seen[diary.id] = secrets

        check()
        assert sink.flush(30)
        pipeline.close()
    assert len(hub.documents) == len(list((tmp_path / "kb").rglob("*.md"))) > 0
    for request in hub.posts():  # every body the hub received, retries included
        delivered = list(strings(request.json()))
        for secret in seen[request.headers["idempotency-key"]]:
            assert not any(secret in s for s in delivered)


def test_secrets_in_failed_tools_and_models_names_reach_no_file_or_model(
        tmp_path: Path) -> None:
    """The names of the tools and models whose calls failed, which "How it was recovered"
    and the model's facts give, are redacted too, and so is what the tool was given."""
    chat = ChatServer()
    tool_secret, model_secret = "sk-" + "T" * 40, "ghp_" + "M" * 36
    given_secret = "xoxb-" + "1" * 12 + "-" + "G" * 24
    with serve_asgi(chat) as chat_url:
        pipeline = build_pipeline(Settings(dir=tmp_path / "kb", index=False,
                                           reflection_url=chat_url + "/v1"), GENAI)
        children = ChildSummary(failed_spans=2, error_types={"TimeoutError": 0},
                                tool_outcomes={f"deploy {tool_secret}": [10, 20]},
                                tool_inputs={f"deploy {tool_secret}": [
                                    f'{{"token": "{given_secret}"}}', '{"dry_run": true}']},
                                model_outcomes={model_secret: [30, -1], "small": [-1, 40]})
        record = SpanRecord(trace_id=7, span_id=9, name="invoke_agent", start_ns=END_NS - 10**9,
                            end_ns=END_NS, attributes={"gen_ai.operation.name": "invoke_agent"})
        diary = pipeline.handle((record, children))
        pipeline.close()
    assert diary is not None
    recovered = diary.body.split("## How it was recovered\n", 1)[1].split("\n\n", 1)[0]
    assert recovered == (
        "A call to the deploy [REDACTED:api_key] tool failed; a later one succeeded. "
        "After a call to [REDACTED:github_token] failed, the agent went on with small.")
    done = diary.body.split("## What was done\n", 1)[1].split("\n\n", 1)[0]
    assert ("The call to the deploy [REDACTED:api_key] tool that failed was given "
            '`{"token": "[REDACTED:slack_token]"}`; the one that succeeded, '
            '`{"dry_run": true}`.') in done
    sent = "\n".join(strings(chat.requests[-1].json()))
    assert "[REDACTED:github_token]" in sent and "[REDACTED:slack_token]" in sent
    for secret in (tool_secret, model_secret, given_secret):
        assert secret not in next((tmp_path / "kb").rglob("*.md")).read_text("utf-8")
        assert secret not in sent


def test_secrets_in_a_model_calls_messages_reach_no_file_or_model(tmp_path: Path) -> None:
    """A title and an answer taken from a model call's flattened messages (what titles a
    LlamaIndex run) are redacted as any other, in the file and in the model's prompt."""
    chat = ChatServer()
    asked_secret, answered_secret = "sk-" + "Q" * 40, "ghp_" + "A" * 36
    with serve_asgi(chat) as chat_url:
        pipeline = build_pipeline(Settings(dir=tmp_path / "kb", index=False,
                                           reflection_url=chat_url + "/v1"), OPENINFERENCE)
        children = ChildSummary(asked=f"Deploy with {asked_secret}",
                                answered=f"Deployed with {answered_secret}. Done.")
        record = SpanRecord(trace_id=7, span_id=9, name="FunctionAgent.run",
                            start_ns=END_NS - 10**9, end_ns=END_NS,
                            attributes={"openinference.span.kind": "CHAIN"})
        diary = pipeline.handle((record, children))
        pipeline.close()
    assert diary is not None and diary.title == "Deploy with [REDACTED:api_key]"
    written = next((tmp_path / "kb").rglob("*.md")).read_text("utf-8")
    sent = "\n".join(strings(chat.requests[-1].json()))
    assert "[REDACTED:api_key]" in sent and "[REDACTED:github_token]" in sent
    for secret in (asked_secret, answered_secret):
        assert secret not in written and secret not in sent


def test_a_secret_in_a_crews_first_task_reaches_no_file_or_model(tmp_path: Path) -> None:
    """A title taken from a CrewAI crew's output (its first task) is redacted as any
    other, in the file and in the model's prompt."""
    chat = ChatServer()
    secret = "sk-" + "C" * 40
    output = json.dumps({"raw": "Done.", "tasks_output": [
        {"description": f"Deploy with {secret}", "raw": "Done."}]})
    with serve_asgi(chat) as chat_url:
        pipeline = build_pipeline(Settings(dir=tmp_path / "kb", index=False,
                                           reflection_url=chat_url + "/v1"), OPENINFERENCE)
        record = SpanRecord(trace_id=7, span_id=9, name="Crew_1.kickoff",
                            start_ns=END_NS - 10**9, end_ns=END_NS,
                            attributes={"openinference.span.kind": "CHAIN",
                                        "output.value": output})
        diary = pipeline.handle((record, ChildSummary()))
        pipeline.close()
    assert diary is not None and diary.title == "Deploy with [REDACTED:api_key]"
    written = next((tmp_path / "kb").rglob("*.md")).read_text("utf-8")
    sent = "\n".join(strings(chat.requests[-1].json()))
    assert "[REDACTED:api_key]" in sent
    assert secret not in written and secret not in sent


def test_delivering_diaries_creates_no_spans_with_httpx_instrumented(tmp_path: Path) -> None:
    """With the httpx instrumentation on, the hub and model calls of otel-diary make no span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chat, hub = ChatServer(), HubServer()
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with serve_asgi(chat) as chat_url, serve_asgi(hub) as hub_url:
            processor = DiarySpanProcessor(
                enabled=True, dir=tmp_path / "kb", hub_url=hub_url, index=False,
                spool_dir=tmp_path / "spool", reflection_url=chat_url + "/v1")
            provider.add_span_processor(processor)
            tracer = provider.get_tracer("app")
            for n in range(3):
                with tracer.start_as_current_span("task", attributes={
                        "orchestrator.task.id": f"T-{n}", "orchestrator.agent.name": "a"}):
                    pass
            assert processor.force_flush(10_000)
            assert wait_until(lambda: len(hub.acknowledged) == 3)
            processor.shutdown()
            assert len(chat.requests) == 3
            app_spans = {span.name for span in exporter.get_finished_spans()}
            httpx.get(hub_url + "/health")  # the app's own call is traced, as it should be
    finally:
        instrumentor.uninstrument()
    client_spans = [s for s in exporter.get_finished_spans() if s.name not in app_spans]
    assert app_spans == {"task"}
    [control] = client_spans
    assert hub_url + "/health" in dict(control.attributes or {}).values()
    assert len(list((tmp_path / "kb").rglob("*.md"))) == 3


def test_a_model_call_from_any_thread_creates_no_span(tmp_path: Path) -> None:
    """Called from a thread that never suppressed instrumentation, the model call is untraced."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with serve_asgi(ChatServer()) as chat_url:
            reflector = LLMReflector(chat_url + "/v1")
            run = classify(SpanRecord(1, 2, "task", 0, 1, attributes={
                "orchestrator.task.id": "T-1"}), ChildSummary(), ORCHESTRATOR)
            assert run is not None
            assert reflector.reflect(run) == "A useful insight."
            httpx.get(chat_url + "/health")
    finally:
        instrumentor.uninstrument()
    assert [span.name for span in exporter.get_finished_spans()] == ["GET"]


OLD_KEY = "gsk_" + "q7Rk2Vx9" * 6 + "Zp4W"
"""A Groq key, of a kind the redactor did not always know: a diary written before then
holds it whole."""


def plant_old_key(root: Path, diary: Diary) -> None:
    """Puts :data:`OLD_KEY` where a diary written before its rule would have it: the title,
    the heading, the build's error line, what was learned."""
    file = root / diary.path
    text = file.read_text(encoding="utf-8")
    for place in ("Tighten types in orders", "error TS2345: Argument",
                  "Narrow optional strings"):
        assert place in text
        text = text.replace(place, f"{place} {OLD_KEY}")
    file.write_text(text, encoding="utf-8")


async def _mcp_answers(command: list[str], diary: str, lesson: str) -> list[str]:
    """What the MCP tools and the resource answer about the planted diary (and lesson)."""
    async with stdio_session(command) as session:
        answers = [await session.call_tool("kb_search", {"query": "tighten types orders"}),
                   await session.call_tool("kb_search", {"query": OLD_KEY}),
                   await session.call_tool("kb_search", {"query": "gsk"}),
                   await session.call_tool("kb_lessons", {"error": TS_STDERR}),
                   await session.call_tool("kb_fetch", {"id": diary}),
                   await session.call_tool("kb_fetch", {"id": f"kh-{OLD_KEY}"}),
                   await session.call_tool("kb_fetch", {"id": lesson})]
        texts = [json.dumps(answer.model_dump(mode="json")) for answer in answers]
        resource = await session.read_resource(f"diary://{diary}")
        texts.append(json.dumps(resource.model_dump(mode="json")))
    return texts


@pytest.mark.parametrize("where", ["folder", "store"])
def test_a_key_in_a_document_written_before_its_rule_reaches_no_reader(
        where: str, tmp_path: Path, request: pytest.FixtureRequest,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A diary holding a key the redactor now knows, as an older otel-diary or another
    tool left it, and the lesson grown from it: no reader gives the key back, whatever
    was asked."""
    root = tmp_path / "kb"
    diary = build_knowledge_base(root)["types"]
    plant_old_key(root, diary)
    if where == "folder":
        assert main(["reindex", "--dir", str(root)]) == 0  # the lesson is grown again
        source = ["--dir", str(root)]
        grown = (root / "diaries" / "lessons" / "code-TS2345.md").read_text(encoding="utf-8")
    else:
        url = request.getfixturevalue("postgres_url")
        assert main(["store", "import", "--dir", str(root), "--store", url]) == 0
        source = ["--store", url]
        with PostgresStore(url, max_connections=1) as store:
            grown = store.lesson("code:TS2345").as_document()
        with psycopg.connect(url) as conn:  # the store is shared: what it keeps is redacted
            [(kept,)] = conn.execute(f"SELECT content FROM {SCHEMA}.diaries WHERE id = %s",
                                     (diary.id,)).fetchall()
        assert OLD_KEY[:12] not in kept and kept.count("[REDACTED:groq_api_key]") == 4
    # the lesson grown from the diary holds what it tells, not its key
    assert "error TS2345: Argument [REDACTED:groq_api_key]" in grown
    assert OLD_KEY[:12] not in grown
    capsys.readouterr()
    assert main(["lessons", "--json", *source]) == 0
    [lesson] = [lesson for lesson in json.loads(capsys.readouterr().out)["lessons"]
                if lesson["signature"] == "code:TS2345"]
    asked = [["search", "tighten types orders"], ["search", "--json", "types"],
             ["search", OLD_KEY], ["search", "gsk"], ["search", OLD_KEY[4:]],
             ["show", "--id", diary.id], ["show", "--json", "--id", diary.id],
             ["show", "--trace", diary.trace_id], ["show", "--id", lesson["id"]],
             ["show", "--id", OLD_KEY], ["lessons"], ["lessons", "--signature", "TS2345"],
             ["context", "--task", "tighten the types of orders"]]
    outputs: list[str] = []
    for argv in asked:
        main([*argv, *source])
        captured = capsys.readouterr()
        outputs += [captured.out, captured.err]
    error = tmp_path / "error.txt"
    error.write_text(TS_STDERR, encoding="utf-8")
    main(["context", "--error-file", str(error), *source])
    outputs.append(capsys.readouterr().out)
    outputs += anyio.run(_mcp_answers, [*MCP_SERVER, *source], diary.id, lesson["id"])

    assert [output for output in outputs if OLD_KEY[:12].lower() in output.lower()
            or OLD_KEY[4:16].lower() in output.lower()] == []
    assert OLD_KEY in (root / diary.path).read_text(encoding="utf-8")  # the file as it was
    marked = "".join(outputs)
    # the readers found and printed the documents, with the key's place marked
    assert marked.count("[REDACTED:groq_api_key]") >= 20, marked
    assert "Tighten types in orders" in marked and diary.id in marked
