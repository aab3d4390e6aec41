"""DiarySpanProcessor with a real TracerProvider: what gets a diary, and staying harmless."""

from __future__ import annotations

import contextvars
import gc
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AnyValue

from otel_diary import Conventions, Diary, DiarySpanProcessor, install
from otel_diary.testing import InMemorySink
from tests.conftest import Harness
from tests.support.forking import in_forked_child, needs_fork
from tests.support.kb import Broken
from tests.support.loopback import wait_until
from tests.support.otlp_build import NESTED_RUN, Tree
from tests.support.raw_http import RawServer

TASK = {"orchestrator.task.id": "T-1", "orchestrator.task.title": "Fix the build",
        "orchestrator.agent.name": "coder"}


def run_task(h: Harness, extra: dict[str, Any] | None = None,
             status: Status | None = None) -> None:
    with h.tracer.start_as_current_span("task", attributes={**TASK, **(extra or {})}) as span:
        with h.tracer.start_as_current_span("chat", attributes={
                "gen_ai.request.model": "m-1", "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 5}):
            pass
        if status is not None:
            span.set_status(status)


def test_completed_run_writes_one_completed_diary(harness: Harness) -> None:
    """A successful task span with no recovery signal becomes one `completed` diary."""
    run_task(harness, {"orchestrator.build_verify.attempts": 1})
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.outcome == "completed"
    assert "outcome:completed" in diary.tags and "task:T-1" in diary.tags
    assert "Tokens: 15." in diary.body and "via" not in diary.body
    assert "## Error encountered" not in diary.body


def test_a_deeply_nested_attribute_is_weighed_and_written(harness: Harness) -> None:
    """An attribute nested 700 mappings deep (the SDK takes it) is weighed without
    recursion: the run is queued and its diary written, not lost to a RecursionError."""
    deep: object = "leaf"
    for _ in range(700):
        deep = {"k": deep}
    run_task(harness, {"app.deep": deep})
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.outcome == "completed" and harness.processor.stats.pipeline_errors == 0


@pytest.mark.parametrize("signal", [
    {"orchestrator.escalation_count": 2},
    {"orchestrator.build_verify.attempts": 3},
    {"orchestrator.repair_no_files": True},
])
def test_each_recovery_signal_marks_the_run_recovered(harness: Harness,
                                                      signal: dict[str, Any]) -> None:
    """Escalations, several build attempts and a no-op repair each make a run `recovered`."""
    run_task(harness, signal)
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.outcome == "recovered"
    assert "## Error encountered" in diary.body and "## How it was recovered" in diary.body


def test_error_status_writes_nothing(harness: Harness) -> None:
    """A task span that ended with status ERROR is a failed run: no diary."""
    run_task(harness, status=Status(StatusCode.ERROR, "boom"))
    harness.flush()
    assert harness.sink.diaries == []
    assert harness.processor.stats.failed_runs == 1


def test_failed_build_verify_writes_nothing(harness: Harness) -> None:
    """`orchestrator.build_verify.passed=false` is a failed run even with status OK."""
    run_task(harness, {"orchestrator.build_verify.passed": False})
    harness.flush()
    assert harness.sink.diaries == []
    assert harness.processor.stats.failed_runs == 1


def test_nested_task_spans_write_one_diary_for_the_outer(harness: Harness) -> None:
    """A task span inside a task span is part of the outer run: one diary, the outer's."""
    with harness.tracer.start_as_current_span("outer", attributes=TASK):
        with harness.tracer.start_as_current_span(
                "inner", attributes={**TASK, "orchestrator.task.id": "T-inner"}):
            pass
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.task_id == "T-1"


def test_task_under_a_non_task_local_parent_is_a_root(harness: Harness) -> None:
    """A task span whose in-process parent is not a task span gets its diary once that
    parent ends."""
    with harness.tracer.start_as_current_span("http.request"):
        with harness.tracer.start_as_current_span("task", attributes=TASK):
            pass
        harness.flush()
        assert harness.sink.diaries == []
    harness.flush()
    assert [d.task_id for d in harness.sink.diaries] == ["T-1"]


def test_task_under_plain_spans_waits_for_the_local_root(harness: Harness) -> None:
    """A task span under plain spans is a root only if no task span sits further up: it is
    decided when the local root ends (the plain span it waited on is not enough)."""
    with harness.tracer.start_as_current_span("session"):
        with harness.tracer.start_as_current_span("request"):
            with harness.tracer.start_as_current_span("task", attributes=TASK):
                pass
        harness.flush()
        assert harness.sink.diaries == []  # "session" could still be a task span
    harness.flush()
    assert [d.task_id for d in harness.sink.diaries] == ["T-1"]
    assert not harness.processor._awaited


def test_task_under_a_plain_span_under_a_task_belongs_to_the_outer_run(
        harness: Harness) -> None:
    """task > step > task is one run: one diary, for the outer task, with the inner task's
    model and tokens."""
    with harness.tracer.start_as_current_span("outer", attributes=TASK):
        with harness.tracer.start_as_current_span("step"):
            with harness.tracer.start_as_current_span("inner", attributes={
                    **TASK, "orchestrator.task.id": "T-inner",
                    "gen_ai.request.model": "m-inner"}):
                with harness.tracer.start_as_current_span("chat", attributes={
                        "gen_ai.request.model": "m-inner", "gen_ai.usage.input_tokens": 30,
                        "gen_ai.usage.output_tokens": 12}):
                    pass
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.task_id == "T-1"
    assert diary.front_matter["model"] == "m-inner" and diary.front_matter["tokens"] == 42
    assert not harness.processor._awaited


def test_two_runs_in_one_trace_each_take_what_their_steps_contributed(
        harness: Harness) -> None:
    """A request span holding two task runs, each with a chat call under a plain step:
    each diary has its own run's model and tokens, however deep the call sits."""
    with harness.tracer.start_as_current_span("POST /ask"):
        for number, tokens in ((1, 10), (2, 20)):
            with harness.tracer.start_as_current_span("run", attributes={
                    **TASK, "orchestrator.task.id": f"T-{number}"}):
                with harness.tracer.start_as_current_span("step"):
                    with harness.tracer.start_as_current_span("plan"):
                        with harness.tracer.start_as_current_span("chat", attributes={
                                "gen_ai.request.model": f"m-{number}",
                                "gen_ai.usage.input_tokens": tokens,
                                "gen_ai.usage.output_tokens": 1}):
                            pass
    harness.flush()
    facts = sorted((d.task_id, d.front_matter.get("model"), d.front_matter.get("tokens"))
                   for d in harness.sink.diaries)
    assert facts == [("T-1", "m-1", 11), ("T-2", "m-2", 21)]
    assert not harness.processor._awaited


def test_spans_ending_after_their_parents_do_not_stop_later_runs_counting() -> None:
    """Parents that end before their child (so nothing ever takes their mark off) are
    forgotten oldest first: past a queue's worth of them, runs still take what their
    steps contributed."""
    harness = Harness(queue_size=64)
    tracer = harness.tracer
    try:
        for _ in range(100):
            with tracer.start_as_current_span("request"):
                with tracer.start_as_current_span("step") as step:
                    chat = tracer.start_span("chat", attributes={
                        "gen_ai.request.model": "m-0", "gen_ai.usage.input_tokens": 1})
                step.end()
                chat.end()  # after its parent: its mark on "step" is never taken off
        harness.flush()
        assert len(harness.processor._awaited) <= 64
        with tracer.start_as_current_span("run", attributes=TASK):
            with tracer.start_as_current_span("step"):
                with tracer.start_as_current_span("chat", attributes={
                        "gen_ai.request.model": "m-1", "gen_ai.usage.input_tokens": 10,
                        "gen_ai.usage.output_tokens": 1}):
                    pass
        with tracer.start_as_current_span("POST /ask"):
            for number in (2, 3):
                with tracer.start_as_current_span("run", attributes={
                        **TASK, "orchestrator.task.id": f"T-{number}"}):
                    with tracer.start_as_current_span("step"):
                        with tracer.start_as_current_span("chat", attributes={
                                "gen_ai.request.model": f"m-{number}",
                                "gen_ai.usage.input_tokens": number}):
                            pass
        harness.flush()
        facts = sorted((d.task_id, d.front_matter.get("model")) for d in harness.sink.diaries)
        assert facts == [("T-1", "m-1"), ("T-2", "m-2"), ("T-3", "m-3")]
    finally:
        harness.provider.shutdown()


def test_a_failed_call_without_attributes_counts_for_its_run_under_a_step() -> None:
    """A failed span that carries nothing but its status, under a plain step, makes its
    own run recovered when a request span holds two runs (GenAI profile)."""
    harness = Harness(conventions="genai")
    tracer = harness.tracer
    try:
        with tracer.start_as_current_span("POST /ask"):
            for number, fails in ((1, True), (2, False)):
                with tracer.start_as_current_span("invoke_agent", attributes={
                        "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.conversation.id": f"c-{number}"}):
                    with tracer.start_as_current_span("step"):
                        with tracer.start_as_current_span("fetch") as call:
                            if fails:
                                call.set_status(Status(StatusCode.ERROR, "fetch failed"))
        harness.flush()
        outcomes = {d.task_id: d.outcome for d in harness.sink.diaries}
        assert outcomes == {"c-1": "recovered", "c-2": "completed"}
    finally:
        harness.provider.shutdown()


def run_tree(tracer: trace.Tracer, tree: Tree) -> None:
    name, attributes, failed, under = tree
    with tracer.start_as_current_span(name, attributes=dict(attributes),
                                      record_exception=False,
                                      set_status_on_exception=False) as span:
        for item in under:
            run_tree(tracer, item)
        if failed:
            span.set_status(Status(StatusCode.ERROR, f"{name} failed"))


def test_usage_and_failures_above_others_count_once() -> None:
    """A span reporting usage over spans that report theirs adds only what it reports
    beyond them, and a failed span over a failed one is one failure, task spans between
    them included (the run ``serve`` reads the same way: tests/assembly/test_grace.py)."""
    harness = Harness(conventions="genai")
    try:
        run_tree(harness.tracer, NESTED_RUN)
        harness.flush()
        [diary] = harness.sink.diaries
    finally:
        harness.provider.shutdown()
    assert (diary.task_id, diary.outcome) == ("c-1", "recovered")
    assert diary.front_matter["tokens"] == 500 + 100
    assert "3 failed call(s)" in diary.body


def test_a_failure_above_one_got_past_is_another() -> None:
    """A failed span above a failed one is the same failure going up, unless a span under
    it succeeded after that failure: then it failed for a reason of its own (as ``serve``
    reads it: tests/assembly/test_grace.py)."""
    harness = Harness(conventions="genai")
    tracer = harness.tracer
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}

    def at(ms: int) -> int:
        return 1_790_000_000_000_000_000 + ms * 1_000_000

    try:
        task = tracer.start_span("invoke_agent", start_time=at(0), attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "c-1"})
        step = tracer.start_span("step", trace.set_span_in_context(task), start_time=at(1))
        for end, failed in ((3, True), (5, False)):
            call = tracer.start_span("execute_tool", trace.set_span_in_context(step),
                                     start_time=at(end - 1), attributes=tool)
            if failed:
                call.set_status(Status(StatusCode.ERROR, "search failed"))
            call.end(at(end))
        step.set_status(Status(StatusCode.ERROR, "step timed out"))
        step.end(at(60))
        task.end(at(61))
        harness.flush()
        [diary] = harness.sink.diaries
    finally:
        harness.provider.shutdown()
    assert "2 failed call(s)" in diary.body


def test_task_ending_after_its_parent_task_writes_no_second_diary(harness: Harness) -> None:
    """Work started by a task that ends after the task belongs to that task's run."""
    outer = harness.tracer.start_span("outer", attributes=TASK)
    inner = harness.tracer.start_span(
        "inner", context=trace.set_span_in_context(outer),
        attributes={**TASK, "orchestrator.task.id": "T-late"})
    outer.end()
    inner.end()
    harness.flush()
    harness.provider.shutdown()  # would release a waiting task span as a root
    assert [d.task_id for d in harness.sink.diaries] == ["T-1"]
    assert not harness.processor._awaited


def _in_background(work: Callable[[], None]) -> Callable[[], None]:
    """Start ``work`` on a thread in the current context, held until the returned call
    lets it run and waits for it (a request handler that starts a task and answers)."""
    go = threading.Event()

    def held() -> None:
        go.wait(10)
        work()
    thread = threading.Thread(target=contextvars.copy_context().run, args=(held,))
    thread.start()

    def finish() -> None:
        go.set()
        thread.join(10)
    return finish


def test_a_task_started_in_the_background_is_written_once_it_ends(harness: Harness) -> None:
    """A task span started in the background by a request that answered before it ended
    (its parent, and the trace's local root, ended first) is written at the next flush
    with what its children contributed, not after the pending timeout."""
    with harness.tracer.start_as_current_span("POST /runs"):
        with harness.tracer.start_as_current_span("enqueue"):
            finish = _in_background(lambda: run_task(harness))
    finish()
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.task_id == "T-1"
    assert diary.front_matter["model"] == "m-1" and diary.front_matter["tokens"] == 15
    assert not harness.processor._parent_ended


def test_a_background_task_under_an_open_parent_still_waits(harness: Harness) -> None:
    """A task span whose parent is still open when it ends waits for it, as before: the
    parent could be a task span, and then the inner one is not a root."""
    with harness.tracer.start_as_current_span("outer", attributes={
            **TASK, "orchestrator.task.id": "T-outer"}):
        finish = _in_background(lambda: run_task(harness))
        finish()
        harness.flush()
        assert harness.sink.diaries == []
    harness.flush()
    assert [d.task_id for d in harness.sink.diaries] == ["T-outer"]


def test_task_under_a_remote_parent_is_a_root(harness: Harness) -> None:
    """A task span continuing a remote trace is a local root and gets a diary at once."""
    remote = trace.SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True,
                               trace_flags=trace.TraceFlags(1))
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    with harness.tracer.start_as_current_span("task", context=ctx, attributes=TASK):
        pass
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.trace_id == f"{0xABC:032x}"


def test_non_task_spans_write_nothing(harness: Harness) -> None:
    """Spans without the task marker, however many, produce no diary."""
    for _ in range(20):
        with harness.tracer.start_as_current_span("root"):
            with harness.tracer.start_as_current_span("chat", attributes={
                    "gen_ai.usage.input_tokens": 3}):
                pass
    harness.flush()
    assert harness.sink.diaries == []
    assert harness.processor.stats.tasks == 0


def test_disabled_starts_no_thread_and_writes_no_file(tmp_path: Path) -> None:
    """With KB_DIARIES_ENABLED unset the processor starts no thread and writes nothing."""
    before = {t.ident for t in threading.enumerate()}
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(dir=tmp_path)
    provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("task", attributes=TASK):
        pass
    assert processor.force_flush()
    provider.shutdown()
    assert not processor.enabled
    assert {t.ident for t in threading.enumerate()} - before == set()
    assert not any(tmp_path.iterdir())
    assert processor.stats.dropped_spans == 0


OFF_APP = """
import sys
from opentelemetry.sdk.trace import TracerProvider
import otel_diary
from otel_diary.sources.autoinstrument import DiaryInstrumentor, post_instrument
provider = TracerProvider(shutdown_on_exit=False)
assert not otel_diary.install(provider).enabled
post_instrument()
DiaryInstrumentor().instrument(tracer_provider=provider)
with provider.get_tracer("t").start_as_current_span("task", attributes={TASK!r}):
    pass
print(",".join(name for name in ("pydantic", "yaml", "sqlite3", "httpx", "otel_diary.wiring",
                                 "otel_diary.settings", "otel_diary.pipeline.core")
               if name in sys.modules))
"""


def test_diaries_off_load_nothing_more(tmp_path: Path) -> None:
    """With KB_DIARIES_ENABLED unset, install(), the opentelemetry-instrument hook and the
    instrumentor load no settings, pipeline, YAML, SQLite or HTTP client: an app pays for
    the SDK alone."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("KB_DIARIES_", "OTEL_DIARY_"))}
    result = subprocess.run([sys.executable, "-c", OFF_APP.format(TASK=TASK)], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


ON_APP = """
import sys
from opentelemetry.sdk.trace import TracerProvider
import otel_diary
HEAVY = ("pydantic", "pydantic_settings", "yaml", "sqlite3", "httpx",
         "otel_diary.pipeline.core", "otel_diary.pipeline.redact", "otel_diary.index.lessons")
provider = TracerProvider(shutdown_on_exit=False)
assert otel_diary.install(provider, enabled=True, dir={root!r}).enabled
print(",".join(name for name in HEAVY if name in sys.modules))
with provider.get_tracer("t").start_as_current_span("task", attributes={TASK!r}):
    pass
assert provider.force_flush()
print(",".join(name for name in HEAVY if name in sys.modules))
provider.shutdown()
"""


def test_diaries_on_load_the_pipeline_with_the_first_diary(tmp_path: Path) -> None:
    """With diaries on, install() loads the settings and the span intake; redaction,
    rendering, the index and the lessons (YAML, SQLite) load with the first diary, and
    pydantic and the HTTP client not at all."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("KB_DIARIES_", "OTEL_DIARY_"))}
    code = ON_APP.format(root=str(tmp_path / "kb"), TASK=TASK)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    at_install, after_diary = result.stdout.split("\n")[:2]
    assert at_install == ""
    assert after_diary.split(",") == ["yaml", "sqlite3", "otel_diary.pipeline.core",
                                      "otel_diary.pipeline.redact", "otel_diary.index.lessons"]
    assert len(list((tmp_path / "kb" / "diaries").rglob("*.md"))) == 1


@pytest.mark.parametrize("name", [str.upper, str.lower])
def test_enabled_by_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                name: Callable[[str], str]) -> None:
    """KB_DIARIES_ENABLED=1 and OTEL_DIARY_DIR are enough to get a diary file, their names
    in any case, as every setting's."""
    monkeypatch.setenv(name("KB_DIARIES_ENABLED"), "1")
    monkeypatch.setenv(name("OTEL_DIARY_DIR"), str(tmp_path))
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor()
    provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("task", attributes=TASK):
        pass
    provider.shutdown()
    files = list((tmp_path / "diaries" / "agents" / "coder").glob("*.md"))
    assert len(files) == 1 and files[0].name.endswith("-T-1.md")


class RaisingSink:
    def write(self, diary: Diary) -> str:
        raise OSError("disk on fire")

    def close(self) -> None:
        raise RuntimeError("close failed too")


AGENT_RUN = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}


@pytest.mark.parametrize(("conventions", "hint"), [
    ("orchestrator", "genai"), ("openinference", "genai"), ("genai", None), ("auto", None)])
def test_a_root_span_that_is_a_task_under_another_profile_says_which_once(
        conventions: str, hint: str | None, caplog: pytest.LogCaptureFixture) -> None:
    """Runs whose root span is a task under another built-in profile than the one in use
    (an agent framework's ``invoke_agent`` under the default) write nothing: a warning
    says so once, naming the profile to set; plain traces, and runs read, say nothing."""
    h = Harness(conventions=conventions)
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        for n in range(3):
            with h.tracer.start_as_current_span("GET /health", attributes={"n": n}):
                pass
            with h.tracer.start_as_current_span("invoke_agent researcher",
                                                attributes=AGENT_RUN):
                pass
        h.flush()
        h.provider.shutdown()
    said = [r.getMessage() for r in caplog.records if "OTEL_DIARY_CONVENTIONS" in r.getMessage()]
    assert said == ([] if hint is None else [
        f"otel-diary: a trace's root span marks a task under the `{hint}` profile, not "
        f"under the one in use, so no diary is written for such runs: set "
        f"OTEL_DIARY_CONVENTIONS={hint} (see the README's \"Agent frameworks\")"])
    assert len(h.sink.diaries) == (0 if hint else 3)


def test_raising_sink_never_reaches_the_app(caplog: pytest.LogCaptureFixture) -> None:
    """A sink that raises: the app's span ends normally; the error is logged once and
    counted at each try (flushing says the diaries are not written; shutdown tries them
    once more and says they are lost)."""
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[RaisingSink()])
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        for _ in range(3):
            with tracer.start_as_current_span("task", attributes=TASK):
                pass
        assert not processor.force_flush()
        provider.shutdown()
    assert processor.stats.sink_errors == 6
    assert processor.stats.diaries == 0
    assert sum("disk on fire" in r.exc_text for r in caplog.records if r.exc_text) == 1
    assert "stopped with 3 diaries no sink could write" in caplog.text


def test_a_diary_no_sink_could_write_is_written_once_the_sink_works_again() -> None:
    """In process too, a diary no sink could write (a full disk) waits and is tried again
    a second later, then twice as long after each failed try; once the sink works it is
    written, with no restart."""
    sink = Broken()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], schedule_delay_ms=10)
    provider.add_span_processor(processor)
    try:
        with provider.get_tracer("t").start_as_current_span("task", attributes=TASK):
            pass
        deadline = time.monotonic() + 30
        while sink.tries < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sink.tries >= 2 and not sink.diaries  # the next try is two seconds away
        sink.broken = False
        assert [d.task_id for d in sink.wait_for(1, timeout=30)] == ["T-1"]
        assert processor.force_flush()
    finally:
        provider.shutdown()
    assert (processor.stats.sink_errors, processor.stats.diaries) == (sink.tries - 1, 1)


def test_at_shutdown_a_diary_no_sink_could_write_is_tried_once_more() -> None:
    """Shutdown tries the waiting diaries once more: one whose sink works by then is
    written."""
    sink = Broken()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink])
    provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("task", attributes=TASK):
        pass
    assert not processor.force_flush()
    sink.broken = False
    provider.shutdown()
    assert [d.task_id for d in sink.diaries] == ["T-1"]


class ExitingSink:
    """Raises SystemExit, then KeyboardInterrupt, then writes nothing more."""

    def __init__(self) -> None:
        self.raised = 0

    def write(self, diary: Diary) -> str:
        self.raised += 1
        if self.raised == 1:
            raise SystemExit(3)
        if self.raised == 2:
            raise KeyboardInterrupt
        return "ok"

    def close(self) -> None:
        pass


def test_a_sink_calling_exit_does_not_stop_the_pipeline(
        caplog: pytest.LogCaptureFixture) -> None:
    """SystemExit or KeyboardInterrupt from a sink is logged and counted; the worker goes on."""
    kept = InMemorySink()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[ExitingSink(), kept])
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.ERROR, logger="otel_diary"):
        for n in range(4):
            with tracer.start_as_current_span("task", attributes={
                    **TASK, "orchestrator.task.id": f"T-{n}"}):
                pass
            assert processor.force_flush()
        provider.shutdown()
    assert [diary.task_id for diary in kept.diaries] == ["T-0", "T-1", "T-2", "T-3"]
    assert processor.stats.sink_errors == 2
    assert any("ExitingSink" in r.getMessage() for r in caplog.records)


class BlockingSink:
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.written: list[Diary] = []

    def write(self, diary: Diary) -> str:
        self.entered.set()
        self.release.wait(30)
        self.written.append(diary)
        return "blocked"

    def close(self) -> None:
        pass


def test_blocking_sink_does_not_block_span_end() -> None:
    """While a sink is stuck, the app's `span.end()` still returns (the sink runs elsewhere)."""
    sink = BlockingSink()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], schedule_delay_ms=10)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("task", attributes=TASK):
        pass
    assert sink.entered.wait(10)
    for n in range(5):  # the sink is still blocked while these spans end
        with tracer.start_as_current_span("task", attributes={**TASK, "x": n}):
            pass
    assert not sink.release.is_set() and sink.written == []
    sink.release.set()
    assert processor.force_flush(10_000)
    provider.shutdown()
    assert len(sink.written) == 6


def test_shutdown_twice_is_a_no_op(harness: Harness) -> None:
    """A second shutdown returns quietly; spans after shutdown are ignored."""
    run_task(harness)
    harness.provider.shutdown()
    harness.processor.shutdown()
    with harness.tracer.start_as_current_span("task", attributes=TASK):
        pass
    assert len(harness.sink.diaries) == 1
    assert harness.processor.force_flush()
    assert harness.processor.stats.dropped_spans == 0


HOLD: dict[str, AnyValue] = {"test.hold": True, "orchestrator.task.id": "held"}
"""A task span's attributes, for `WorkerHoldingConventions` (the worker reads a task span
whole, but only some fields of a span that marks no task and did not fail)."""


@dataclass(frozen=True)
class WorkerHoldingConventions(Conventions):
    """The default conventions, except that reading a task span marked `test.hold` (see
    `HOLD`) holds the worker thread until `release` is set (the app thread never reads
    it)."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def is_task(self, attributes: object) -> bool:
        if "test.hold" in attributes:  # type: ignore[operator]
            self.entered.set()
            self.release.wait(30)
        return super().is_task(attributes)


def test_full_queue_drops_counts_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    """Over the queue bound spans are dropped, counted and logged once, never blocking."""
    conventions = WorkerHoldingConventions()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[InMemorySink()], queue_size=4,
                                   schedule_delay_ms=10, conventions=conventions)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("hold", attributes=HOLD):
        pass
    assert conventions.entered.wait(10)  # the worker is held: nothing leaves the queue
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        for _ in range(10):
            with tracer.start_as_current_span("other"):
                pass
    assert processor.stats.dropped_spans == 6
    assert sum("queue is full" in r.getMessage() for r in caplog.records) == 1
    conventions.release.set()
    provider.shutdown()


def test_a_queued_span_that_marks_no_task_and_did_not_fail_is_not_kept() -> None:
    """Of a queued span that is no task and did not fail, the worker reads a few fields,
    which the queue keeps instead of the span: the ended span is let go when the SDK is
    done with it (kept, queued spans outlived the garbage collector's young generations),
    and what it contributed still reaches its task's diary."""
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    ended: dict[str, weakref.ref[ReadableSpan]] = {}

    class Watch(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended[span.name] = weakref.ref(span)

    conventions = WorkerHoldingConventions()
    sink = InMemorySink()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], schedule_delay_ms=10,
                                   conventions=conventions)
    provider.add_span_processor(Watch())
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("hold", attributes=HOLD):
        pass
    assert conventions.entered.wait(10)  # the worker is held: nothing leaves the queue
    with tracer.start_as_current_span("task", attributes=TASK):
        with tracer.start_as_current_span("chat", attributes={
                "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 5}) as chat:
            chat.add_event("captured", {"text": "x" * 1000})  # not read: not kept either
    del chat
    gc.collect()
    assert ended["chat"]() is None  # queued, and let go
    assert ended["task"]() is not None  # a task span is read whole: kept
    conventions.release.set()
    assert processor.force_flush()
    provider.shutdown()
    [diary] = [d for d in sink.diaries if d.task_id == "T-1"]
    assert "Tokens: 12." in diary.body


def test_slow_delivery_never_stalls_span_intake() -> None:
    """While a sink is stuck, spans keep flowing through assembly; task runs beyond the
    delivery backlog are dropped and counted instead of blocking anything."""
    sink = BlockingSink()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], queue_size=1024,
                                   schedule_delay_ms=10)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    for n in range(201):
        with tracer.start_as_current_span("task", attributes={**TASK, "n": n}):
            with tracer.start_as_current_span("chat", attributes={
                    "gen_ai.usage.input_tokens": 1}):
                pass
    assert sink.entered.wait(10)  # the delivery thread is stuck in the sink
    deadline = time.monotonic() + 20
    while processor.stats.dropped_tasks == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # the worker assembles while the delivery thread is stuck
    assert sink.written == []
    assert processor.stats.dropped_spans == 0 and processor.stats.dropped_tasks > 0
    sink.release.set()
    provider.shutdown()
    assert len(sink.written) + processor.stats.dropped_tasks == 201


@pytest.mark.parametrize("sequence", [False, True], ids=["string", "sequence"])
def test_queues_are_bounded_in_bytes(caplog: pytest.LogCaptureFixture, sequence: bool) -> None:
    """Task spans with large attributes are held up to the byte bound, not the count bound:
    while a sink is stuck, 21 task runs with a 1 MiB stderr tail each under an 8 MiB bound
    keep at most 8 of them; the rest are dropped, counted and logged. A list attribute
    (which the SDK keeps as a tuple) counts its strings too."""
    sink = BlockingSink()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], schedule_delay_ms=10,
                                   queue_max_bytes=8 * 2**20)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")

    def run(n: int) -> None:
        tail = f"run {n}: " + "e" * 2**20  # a fresh string per run, as an app makes them
        big: dict[str, str | list[str]] = (
            {"app.files": [tail[i:i + 2**16] for i in range(0, len(tail), 2**16)]}
            if sequence else {"orchestrator.build_verify.stderr_tail": tail})
        with tracer.start_as_current_span("task", attributes={
                **TASK, "orchestrator.task.id": f"T-{n}", **big}):
            pass

    run(0)
    assert sink.entered.wait(10)  # delivery is stuck in the sink, holding that run
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        for n in range(1, 21):
            run(n)
        assert processor.force_flush(100) is False  # the sink still holds delivery
    dropped = processor.stats.dropped_spans + processor.stats.dropped_tasks
    sink.release.set()
    provider.shutdown()
    assert dropped >= 13
    assert len(sink.written) + dropped == 21
    assert any("OTEL_DIARY_QUEUE_MAX_BYTES" in r.getMessage() for r in caplog.records)


def test_task_spans_waiting_under_an_open_root_are_bounded_in_bytes(
        caplog: pytest.LogCaptureFixture) -> None:
    """Task spans under a session span that stays open wait for it, within the byte
    bound: 40 of 100 KB each under a 1 MB bound evict the session's trace, whose waiting
    tasks are written without its verdict (counted and logged) or, past the bound of runs
    waiting for delivery, dropped and counted; none is kept past the bound."""
    h = Harness(queue_max_bytes=2**20)
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        with h.tracer.start_as_current_span("session"):
            for n in range(40):
                with h.tracer.start_as_current_span("task", attributes={
                        **TASK, "orchestrator.task.id": f"T-{n}",
                        "orchestrator.build_verify.stderr_tail": f"{n} " + "e" * 100_000}):
                    pass
                h.flush()  # paced: the queue's own bound is not what is tested
            held = h.processor._assembler.held_bytes
            written = len(h.sink.diaries)
        h.flush()
    h.provider.shutdown()
    assert held <= 2**20
    assert written >= 30 and h.processor.stats.traces_evicted >= 1
    assert len(h.sink.diaries) + h.processor.stats.dropped_tasks == 40
    assert any("evicted" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def _multiprocessing_task(tracer: trace.Tracer) -> None:
    with tracer.start_as_current_span("task", attributes={
            **TASK, "orchestrator.task.id": "MP-CHILD"}):
        pass


@needs_fork
def test_a_multiprocessing_child_writes_its_diaries_before_it_ends(tmp_path: Path) -> None:
    """A process multiprocessing forks ends with os._exit, which runs no atexit hook: its
    diaries are written all the same."""
    import multiprocessing

    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path, index=False,
                                   schedule_delay_ms=60_000)
    provider.add_span_processor(processor)
    child = multiprocessing.get_context("fork").Process(
        target=_multiprocessing_task, args=(provider.get_tracer("t"),))
    child.start()
    child.join(60)
    provider.shutdown()
    assert child.exitcode == 0
    assert [p.name[-12:] for p in tmp_path.rglob("*.md")] == ["-MP-CHILD.md"]


def test_forked_child_gets_its_own_worker(tmp_path: Path) -> None:
    """A child process forked after set-up (a prefork server) still writes diaries."""
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path, index=False)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 only if its diary was written
        code = 1
        try:
            with tracer.start_as_current_span("task", attributes={
                    **TASK, "orchestrator.task.id": "FORKED"}):
                pass
            processor.force_flush(10_000)
            code = 0 if processor.stats.diaries == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    provider.shutdown()
    assert os.waitstatus_to_exitcode(status) == 0
    assert [p.name[-10:] for p in tmp_path.rglob("*.md")] == ["-FORKED.md"]


def test_bad_attribute_types_still_give_a_safe_diary(harness: Harness) -> None:
    """Wrong attribute types are coerced or left out, never crash and never print None."""
    run_task(harness, {"orchestrator.escalation_count": "two",
                       "orchestrator.build_verify.attempts": "3",
                       "orchestrator.tokens": [1, 2],
                       "orchestrator.route": ["a", "b"],
                       "orchestrator.task.title": "x" * 10_000,
                       "orchestrator.agent.name": "../../etc"})
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.outcome == "recovered"  # attempts "3" is read as 3
    assert "None" not in diary.body
    assert diary.path.startswith("diaries/agents/etc/")
    assert len(diary.title) <= 200


def test_bool_and_nan_values_are_no_names(harness: Harness) -> None:
    """A bool agent name and a NaN model are left out: no folder ``True/`` (the service
    name stands in, as for a missing name), no model ``nan``; a number still reads as
    text."""
    with harness.tracer.start_as_current_span("task", attributes={
            **TASK, "orchestrator.agent.name": True, "orchestrator.task.id": 42,
            "gen_ai.request.model": float("nan")}):
        pass
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.path.startswith("diaries/agents/svc/")
    assert diary.task_id == "42"
    assert "nan" not in diary.body.lower().split() and "model" not in diary.front_matter


def test_install_attaches_once() -> None:
    """install() on the same provider twice attaches one processor and returns it."""
    provider = TracerProvider(shutdown_on_exit=False)
    first = install(provider, enabled=True, dir="/nonexistent-never-written")
    second = install(provider)
    assert first is not None and first is second
    provider.shutdown()


def test_install_on_a_proxy_provider_returns_none() -> None:
    """Without an SDK provider install() logs and returns None instead of raising."""
    assert install(trace.ProxyTracerProvider()) is None  # type: ignore[arg-type]


def test_bad_argument_raises_value_error() -> None:
    """A bad argument in code is a programming error: ValueError naming the field."""
    with pytest.raises(ValueError, match="queue_size"):
        DiarySpanProcessor(enabled=True, queue_size=0)


def test_spans_without_sdk_internals_are_read_through_the_public_api(harness: Harness) -> None:
    """A ReadableSpan built by hand (no SDK internals) still becomes a diary."""
    from opentelemetry.sdk.trace import ReadableSpan

    context = trace.SpanContext(trace_id=7, span_id=8, is_remote=False)
    child = ReadableSpan(name="chat", context=trace.SpanContext(7, 9, False),
                         parent=context, attributes={"gen_ai.usage.input_tokens": 4},
                         start_time=1, end_time=2)
    task = ReadableSpan(name="task", context=context, attributes=TASK, start_time=1,
                        end_time=2_000_001)
    harness.processor.on_end(child)
    harness.processor.on_end(task)
    harness.serve.exported.export([child, task])  # ended by hand, not by the provider
    harness.flush()
    [diary] = harness.sink.diaries
    assert diary.trace_id == f"{7:032x}" and "Tokens: 4." in diary.body


def test_flush_at_interpreter_exit(tmp_path: Path) -> None:
    """A process that never calls shutdown still writes its diary: the SDK's atexit does."""
    script = textwrap.dedent("""
        from opentelemetry.sdk.trace import TracerProvider
        from otel_diary import DiarySpanProcessor
        provider = TracerProvider()
        provider.add_span_processor(DiarySpanProcessor(schedule_delay_ms=60_000))
        tracer = provider.get_tracer("t")
        with tracer.start_as_current_span("task", attributes={
                "orchestrator.task.id": "EXIT-1", "orchestrator.agent.name": "a"}):
            pass
    """)
    env = {"KB_DIARIES_ENABLED": "1", "OTEL_DIARY_DIR": str(tmp_path), "PATH": "/usr/bin"}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=60,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "diaries" / "agents" / "a").glob("*-EXIT-1.md"))) == 1


def for_diaries(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A get_tracer call for otel-diary's own diary.write spans."""
    return bool(kwargs.get("instrumenting_module_name", args[0] if args else "") == "otel_diary")


class RefusingProvider(TracerProvider):
    """A provider refusing otel-diary a tracer: its diary.write spans cannot be set up."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        if for_diaries(args, kwargs):
            raise RuntimeError("no tracers today")
        return super().get_tracer(*args, **kwargs)


class SlowProvider(TracerProvider):
    """A provider slow to hand otel-diary a tracer: building the pipeline takes a while."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        if for_diaries(args, kwargs):
            time.sleep(1.0)
        return super().get_tracer(*args, **kwargs)


def run_one(provider: TracerProvider, task_id: str) -> None:
    with provider.get_tracer("t").start_as_current_span(
            "task", attributes={**TASK, "orchestrator.task.id": task_id}):
        pass


def test_a_pipeline_that_cannot_be_built_is_logged_once_and_its_runs_dropped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The first diary builds the pipeline; when that fails the error is logged once and
    counted, the waiting task runs are dropped (counted) instead of kept and retried, and
    the app never sees it."""
    provider = RefusingProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path, tracer_provider=provider)
    provider.add_span_processor(processor)
    with caplog.at_level(logging.ERROR, logger="otel_diary"):
        run_one(provider, "T-1")
        assert processor.force_flush(10_000)
        run_one(provider, "T-2")
        assert processor.force_flush(10_000)
    provider.shutdown()
    assert [r.getMessage() for r in caplog.records] == [
        "otel-diary could not build its pipeline; no diary will be written"]
    assert processor.stats.pipeline_errors == 1
    assert processor.stats.dropped_tasks == 2
    assert processor.pipeline is None
    assert not list(tmp_path.rglob("*.md"))


def test_shutdown_before_the_first_diary_builds_nothing(tmp_path: Path) -> None:
    """With no diary before shutdown only the sinks were made, and they are closed; the
    pipeline is not built afterwards either."""
    class ClosingSink(InMemorySink):
        closed = 0

        def close(self) -> None:
            self.closed += 1

    sink = ClosingSink()
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], tracer_provider=provider)
    provider.add_span_processor(processor)
    provider.shutdown()
    assert sink.closed == 1
    assert processor.pipeline is None


@needs_fork
def test_a_child_forked_while_the_pipeline_is_built_builds_its_own(tmp_path: Path) -> None:
    """A process forked while its worker builds the pipeline (its first diary) gets a
    processor that builds one of its own and writes its diaries."""
    provider = SlowProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path, tracer_provider=provider)
    provider.add_span_processor(processor)
    run_one(provider, "T-parent")
    assert wait_until(processor._pipeline_lock.locked, timeout=10)  # being built now

    def child_writes_its_diary() -> bool:
        run_one(provider, "T-child")
        return processor.force_flush(30_000) and any(tmp_path.rglob("*-T-child.md"))

    assert in_forked_child(child_writes_its_diary) == 0
    assert processor.force_flush(30_000)
    provider.shutdown()
    assert len(list(tmp_path.rglob("*-T-parent.md"))) == 1


@needs_fork
def test_a_fork_while_the_pipeline_is_built_waits_for_the_build(tmp_path: Path) -> None:
    """A fork that comes while the worker builds the pipeline waits for it: forked
    midway, the child would inherit the import locks the build holds, and hang."""
    provider = SlowProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path, tracer_provider=provider)
    provider.add_span_processor(processor)
    run_one(provider, "T-parent")
    assert wait_until(processor._pipeline_lock.locked, timeout=10)  # being built now
    assert in_forked_child(lambda: processor._pipeline is not None) == 0
    provider.shutdown()


def test_shutdown_waits_for_a_pipeline_build_no_longer_than_its_timeout(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A shutdown that comes while the pipeline is built (1 s here) gives up at its
    timeout, said so, rather than waiting on the build; the build then closes what it
    made."""
    provider = SlowProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path, tracer_provider=provider,
                                   shutdown_timeout_ms=100)
    provider.add_span_processor(processor)
    run_one(provider, "T-slow")
    assert wait_until(processor._pipeline_lock.locked, timeout=10)
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        provider.shutdown()
    assert any("timed out while its pipeline was built" in r.getMessage()
               for r in caplog.records)
    assert wait_until(lambda: not processor._pipeline_lock.locked(), timeout=10)
    assert processor._pipeline is None


def test_a_run_waiting_on_a_stalled_model_at_shutdown_is_written_with_the_stub(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The reflection model stalls (its answer comes a byte at a time, 30 s allowed): in
    the last part of the shutdown's budget its call is cut short and the run is written
    with the stub reflection, not left unwritten."""
    model = RawServer(b"", trickled=b"H" * 20_000)
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path, index=False,
                                   reflection_url=model.url + "/v1", reflection_timeout_s=30,
                                   shutdown_timeout_ms=4000)
    provider.add_span_processor(processor)
    run_one(provider, "T-stalled")
    assert wait_until(lambda: bool(model.request), timeout=10)  # the model is being asked
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        provider.shutdown()
    written = list(tmp_path.glob("diaries/agents/*/*T-stalled.md"))
    assert len(written) == 1
    assert "## What was learned" in written[0].read_text()
    assert processor.stats.diaries == 1
    assert any("cut short by the shutdown" in r.getMessage() for r in caplog.records)
