"""Reflection by a model against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_diary import ORCHESTRATOR, ChildSummary, Settings, SpanRecord, StubReflector, classify
from otel_diary.pipeline.core import Pipeline, redact_run
from otel_diary.pipeline.llm import EVENT_ROLE, LLMReflector, answer_text
from otel_diary.pipeline.redact import SecretRedactor
from otel_diary.pipeline.render import Diary
from otel_diary.wiring import build_pipeline
from tests.support.forking import in_forked_child, needs_fork
from tests.support.loopback import (
    ChatServer,
    Receive,
    Scope,
    Send,
    free_port,
    read_body,
    send_json,
    serve_asgi,
    wait_until,
)
from tests.support.raw_http import RawServer, head

STDERR = ("> tsc --noEmit\n"
          "src/orders/api.ts(42,17): error TS2345: Argument of type 'string | undefined'\n"
          "DATABASE_URL=postgres://app:pg-pass-9931@db:5432/orders\n"
          "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"
          "Found 1 error.")
SECRETS = ("pg-pass-9931", "AKIAIOSFODNN7EXAMPLE")


def task_record(n: int = 1, **extra: Any) -> SpanRecord:
    """A recovered task span with a stderr tail that holds two secrets."""
    return SpanRecord(
        trace_id=0x5000 + n, span_id=0x6000 + n, name="task",
        start_ns=1_785_000_000_000_000_000, end_ns=1_785_000_008_421_000_000,
        attributes={
            "orchestrator.task.id": f"T-{n}", "orchestrator.task.title": "Tighten order types",
            "orchestrator.agent.name": "coder", "orchestrator.route": "paid_model",
            "gen_ai.request.model": "claude-x", "orchestrator.tokens": 5132,
            "orchestrator.build_verify.attempts": 3, "orchestrator.escalation_count": 2,
            "orchestrator.build_verify.stderr_tail": STDERR, **extra})


@pytest.fixture
def chat() -> Iterator[tuple[ChatServer, str]]:
    server = ChatServer()
    with serve_asgi(server) as url:
        yield server, url + "/v1"


def pipeline_for(tmp_path: Path, url: str, **settings: Any) -> Pipeline:
    options: dict[str, Any] = {"dir": tmp_path, "index": False, "reflection_url": url,
                               "reflection_model": "test-model", **settings}
    return build_pipeline(Settings(**options), ORCHESTRATOR)


def learned(diary: Diary) -> str:
    """The "What was learned" section of a diary."""
    return diary.body.split("## What was learned\n", 1)[1].split("\n\n## Related", 1)[0]


def stub_for(record: SpanRecord) -> str:
    run = classify(record, ChildSummary(), ORCHESTRATOR)
    assert run is not None
    return StubReflector().reflect(redact_run(run, SecretRedactor()))


def test_request_carries_facts_redacted_tail_and_event_role(
        chat: tuple[ChatServer, str], tmp_path: Path) -> None:
    """One call per diary: facts and the redacted tail in the prompt, the role marked twice."""
    server, url = chat
    pipeline = pipeline_for(tmp_path, url, reflection_api_key="llm-key-1",
                            reflection_max_tokens=123)
    diary = pipeline.handle((task_record(), ChildSummary()))
    assert diary is not None
    [request] = server.requests
    body = request.json()
    system, user = (m["content"] for m in body["messages"])
    assert request.path == "/v1/chat/completions"
    assert request.headers["x-event-role"] == EVENT_ROLE == "diary.reflection"
    assert body["metadata"]["event_role"] == EVENT_ROLE
    assert request.headers["authorization"] == "Bearer llm-key-1"
    assert (body["model"], body["max_tokens"], body["stream"]) == ("test-model", 123, False)
    assert "non-obvious" in system and "Do not summarize" in system
    for fact in ("- task: T-1", "- outcome: recovered", "- route: paid_model",
                 "- model: claude-x", "- tokens: 5132", "- build verify attempts: 3",
                 "- escalations: 2", "- latency_ms: 8421"):
        assert fact in user
    assert "error TS2345" in user and "[REDACTED:url_credentials]" in user
    assert "[REDACTED:aws_access_key]" in user
    assert not any(secret in request.body.decode() for secret in SECRETS)
    assert learned(diary) == "A useful insight."
    assert pipeline.stats.reflection_fallbacks == 0


def test_a_long_answer_is_cut_to_800_characters(chat: tuple[ChatServer, str],
                                                tmp_path: Path) -> None:
    """A 2,000-character answer lands cut to at most 800 characters, at a sentence end."""
    server, url = chat
    answer = "".join(f"Insight number {n} is about caching the build step. " for n in range(40))
    assert len(answer) >= 2000
    server.script = [answer]
    diary = pipeline_for(tmp_path, url).handle((task_record(), ChildSummary()))
    assert diary is not None
    text = learned(diary)
    assert 0 < len(text) <= 800
    assert text.endswith("step.") and answer.startswith(text)


@pytest.mark.parametrize("step", ["", "   ", 500, 404, "hang"])
def test_empty_answer_error_or_hang_writes_the_stub(
        chat: tuple[ChatServer, str], tmp_path: Path, step: str | int) -> None:
    """An empty answer, an error status or a hang falls back to the deterministic stub."""
    server, url = chat
    server.script = [step]
    server.hang_s = 2.0
    pipeline = pipeline_for(tmp_path, url, reflection_timeout_s=0.3)
    record = task_record()
    diary = pipeline.handle((record, ChildSummary()))
    assert diary is not None
    assert len(server.requests) == 1
    assert learned(diary) == stub_for(record)
    assert pipeline.stats.reflection_fallbacks == 1


def test_a_model_trickling_its_headers_is_given_up_at_the_deadline(tmp_path: Path) -> None:
    """A model endpoint that sends its status line and headers a byte at a time (6 s of
    them) is given up at twice the timeout, and the stub written."""
    trickled = head(200, content_type="application/json", x_pad="p" * 70)
    server = RawServer(b"", trickled)
    try:
        reflector = LLMReflector(server.url + "/v1", timeout_s=0.3)
        run = classify(task_record(), ChildSummary(), ORCHESTRATOR)
        assert run is not None and reflector.reflect(run) == ""
        reflector.close()
    finally:
        server.finish()
    assert reflector.stats.get("timeouts") == 1
    assert server.trickled < len(trickled)


def test_the_calls_per_minute_budget_holds(chat: tuple[ChatServer, str],
                                           tmp_path: Path) -> None:
    """Beyond the per-minute budget no call is made: the stub is written and counted."""
    server, url = chat
    pipeline = pipeline_for(tmp_path, url, reflection_calls_per_minute=2)
    diaries = [pipeline.handle((task_record(n), ChildSummary())) for n in range(5)]
    assert len(server.requests) == 2
    texts = [learned(d) for d in diaries if d is not None]
    assert texts[:2] == ["A useful insight."] * 2
    assert texts[2:] == [stub_for(task_record(n)) for n in range(2, 5)]
    assert isinstance(pipeline.reflector, LLMReflector)
    assert pipeline.reflector.stats.over_budget == 3
    assert pipeline.stats.reflection_fallbacks == 3


def test_the_budget_window_slides(chat: tuple[ChatServer, str]) -> None:
    """A call over budget now is allowed again once the oldest call is a minute old."""
    server, url = chat
    now = [1000.0]
    reflector = LLMReflector(url, calls_per_minute=1, clock=lambda: now[0])
    run = classify(task_record(), ChildSummary(), ORCHESTRATOR)
    assert run is not None
    assert reflector.reflect(run) == "A useful insight."
    now[0] += 59.0
    assert reflector.reflect(run) == ""
    now[0] += 1.0
    assert reflector.reflect(run) == "A useful insight."
    assert len(server.requests) == 2 and reflector.stats.over_budget == 1


@pytest.mark.parametrize("limit", [1, 2])
def test_concurrency_limit_bounds_calls_in_flight(chat: tuple[ChatServer, str],
                                                  limit: int) -> None:
    """No more than ``concurrency`` calls are ever in flight at the model server."""
    server, url = chat
    server.script = ["hang"]
    server.hang_s = 0.4
    reflector = LLMReflector(url, concurrency=limit, timeout_s=3.0)
    run = classify(task_record(), ChildSummary(), ORCHESTRATOR)
    assert run is not None
    start = threading.Barrier(2)

    def call() -> None:
        start.wait()
        reflector.reflect(run)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(server.requests) == 2
    assert server.max_in_flight == limit


def test_reflection_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """OTEL_DIARY_REFLECTION_* configure the model reflector; its key stays secret."""
    monkeypatch.setenv("OTEL_DIARY_REFLECTION_URL", "http://127.0.0.1:11434/v1/")
    monkeypatch.setenv("OTEL_DIARY_REFLECTION_MODEL", "qwen3:8b")
    monkeypatch.setenv("OTEL_DIARY_REFLECTION_API_KEY", "sk-local-0000000000000000000000")
    monkeypatch.setenv("OTEL_DIARY_REFLECTION_CALLS_PER_MINUTE", "7")
    settings = Settings(dir=tmp_path, index=False)
    assert "sk-local" not in repr(settings)
    reflector = build_pipeline(settings, ORCHESTRATOR).reflector
    assert isinstance(reflector, LLMReflector)
    assert reflector.endpoint == "http://127.0.0.1:11434/v1/chat/completions"
    assert (reflector.model, reflector.calls_per_minute) == ("qwen3:8b", 7)
    assert reflector.headers()["authorization"] == "Bearer sk-local-0000000000000000000000"


def test_without_a_reflection_url_the_stub_writes(tmp_path: Path) -> None:
    """No OTEL_DIARY_REFLECTION_URL: no model, the stub writes "What was learned"."""
    pipeline = build_pipeline(Settings(dir=tmp_path, index=False), ORCHESTRATOR)
    assert isinstance(pipeline.reflector, StubReflector)


@pytest.mark.parametrize(("raw", "text"), [
    ({"choices": [{"message": {"content": " Cache  the\nbuild. "}}]}, "Cache the build."),
    ({"choices": [{"message": {"content": "<think>hmm</think>Pin the version."}}]},
     "Pin the version."),
    ({"choices": [{"message": {"content": None}}]}, ""),
    ({"choices": []}, ""),
    ({"error": "x"}, ""),
])
def test_answer_text_reads_the_assistant_message(raw: dict[str, Any], text: str) -> None:
    """The answer is the first choice's message text, without reasoning, else empty."""
    assert answer_text(json.dumps(raw).encode()) == text


async def echoing_model(scope: Scope, receive: Receive, send: Send) -> None:
    """A model gateway that refuses the call and echoes the key it was sent, as some do."""
    if scope["type"] != "http":
        return
    await read_body(receive)
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    await send_json(send, 401, {"error": {"message": "Incorrect API key provided: "
                                                     + headers.get("authorization", "")}})


def test_model_urls_and_answers_are_logged_without_secrets(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Credentials in the reflection URL and a key the model server echoes stay out of the log."""
    key = "Model-Key-1a2b3c4d"
    run = classify(task_record(), ChildSummary(), ORCHESTRATOR)
    assert run is not None
    with caplog.at_level(logging.DEBUG, logger="otel_diary"), \
            serve_asgi(echoing_model) as url:
        for base in (f"http://user:sk-proj-{'x' * 24}@127.0.0.1:{free_port()}/v1?api_key=q-7788",
                     url.replace("http://", "http://user:url-pass-4455@") + "/v1"):
            reflector = pipeline_for(tmp_path, base, reflection_api_key=key).reflector
            assert isinstance(reflector, LLMReflector)
            assert reflector.reflect(run) == ""
            reflector.close()
    assert "failed: ConnectError" in caplog.text and "answered HTTP 401" in caplog.text
    for secret in ("sk-proj-", "q-7788", "url-pass-4455", key):
        assert secret not in caplog.text


@needs_fork
def test_a_forked_child_gets_its_own_client_and_call_slots(
        chat: tuple[ChatServer, str]) -> None:
    """A child forked while the parent's only call slot is taken still calls the model."""
    server, url = chat
    server.script = ["hang", "An insight from the child."]
    server.hang_s = 2.0
    reflector = LLMReflector(url, concurrency=1, timeout_s=10.0)
    run = classify(task_record(), ChildSummary(), ORCHESTRATOR)
    assert run is not None
    parent_client = reflector._client
    busy = threading.Thread(target=reflector.reflect, args=(run,))
    busy.start()
    assert wait_until(lambda: server.in_flight == 1)

    def child() -> bool:
        fresh = reflector._client is not parent_client
        return fresh and reflector.reflect(run) == "An insight from the child."

    try:
        assert in_forked_child(child) == 0
    finally:
        busy.join(10)
    assert reflector._client is parent_client
