"""OTEL_DIARY_CONVENTIONS: built-in profiles, validated mapping files, and a mapping that
makes foreign attribute names produce the very diary the default names do."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator

from otel_diary import (
    GENAI,
    ORCHESTRATOR,
    ConventionsError,
    Diary,
    DiarySpanProcessor,
    Settings,
    load_conventions,
)
from otel_diary.conventions import (
    EVERY_TASK_MARKER,
    OPENINFERENCE,
    Conventions,
    marking_profile,
)
from otel_diary.testing import InMemorySink

MAPPING_TOML = """\
extends = "orchestrator"

[attributes]
task_id = "acme.job.key"
title = "acme.job.summary"
agent = "acme.worker"
route = "acme.lane"
escalations = "acme.retries"
build_attempts = "acme.build.tries"
model = ["acme.llm.model"]
input_tokens = "acme.llm.tokens_in"
output_tokens = "acme.llm.tokens_out"
"""

MAPPING_YAML = """\
extends: orchestrator
attributes:
  task_id: acme.job.key
  title: acme.job.summary
  agent: acme.worker
  route: acme.lane
  escalations: acme.retries
  build_attempts: acme.build.tries
  model: [acme.llm.model]
  input_tokens: acme.llm.tokens_in
  output_tokens: acme.llm.tokens_out
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_builtin_profiles_by_name() -> None:
    """`orchestrator` and `genai` (any case) name the built-in profiles."""
    assert load_conventions("orchestrator") is ORCHESTRATOR
    assert load_conventions(" GenAI ") is GENAI
    assert GENAI.task_marker == "gen_ai.operation.name"
    assert GENAI.task_marker_values == frozenset({"invoke_agent", "invoke_workflow",
                                                  "invoke_swarm", "invoke_graph"})
    assert GENAI.recover_on_child_errors


def test_toml_and_yaml_files_agree(tmp_path: Path) -> None:
    """The same mapping in TOML and in YAML gives the same conventions."""
    from_toml = load_conventions(write(tmp_path, "c.toml", MAPPING_TOML))
    from_yaml = load_conventions(str(write(tmp_path, "c.yaml", MAPPING_YAML)))
    assert from_toml == from_yaml
    assert from_toml.title == ("acme.job.summary",)
    assert from_toml.trigger == ORCHESTRATOR.trigger  # untouched facts keep the profile's


def test_a_renamed_task_id_marks_task_spans(tmp_path: Path) -> None:
    """Renaming the task id moves the task marker with it unless `task.marker` says otherwise."""
    renamed = load_conventions(write(tmp_path, "a.toml", MAPPING_TOML))
    assert renamed.task_marker == "acme.job.key"
    assert renamed.is_task({"acme.job.key": "J-1"})
    assert not renamed.is_task({"orchestrator.task.id": "T-1"})
    explicit = load_conventions(write(tmp_path, "b.toml", MAPPING_TOML +
                                      '[task]\nmarker = "acme.kind"\n'
                                      'marker_values = ["job"]\n'))
    assert explicit.is_task({"acme.kind": "job"})
    assert not explicit.is_task({"acme.kind": "step", "acme.job.key": "J-1"})


def test_a_file_may_extend_the_genai_profile(tmp_path: Path) -> None:
    """`extends = "genai"` keeps the GenAI task marker while renaming the agent."""
    conventions = load_conventions(write(tmp_path, "g.yaml",
                                         "extends: genai\nattributes:\n  agent: my.agent\n"))
    assert conventions.task_marker == GENAI.task_marker
    assert conventions.agent == ("my.agent",)
    assert conventions.recover_on_child_errors


@pytest.mark.parametrize(("text", "key"), [
    ('colour = "blue"\n', "'colour'"),
    ('[attributes]\ntask_ident = "x"\n', "'task_ident'"),
    ('[task]\nmarkers = "x"\n', "'markers'"),
    ('[attributes]\ntitle = 3\n', "attributes.title"),
    ('[attributes]\ntitle = ["ok", ""]\n', "attributes.title"),
    ('[task]\nrecover_on_child_errors = "yes"\n', "task.recover_on_child_errors"),
    ('extends = "jaeger"\n', "extends"),
    ('attributes = "x"\n', "attributes"),
    ('[attributes]\ntask_id = []\n', "task.marker"),
])
def test_a_bad_file_is_an_error_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    """Unknown keys and wrong types raise ConventionsError (a ValueError) naming the key."""
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(ConventionsError, match=key.replace(".", r"\.")) as caught:
        load_conventions(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(("name", "text", "message"), [
    ("c.ini", "x = 1\n", "ends in .toml"),
    ("c.toml", "this is = = not toml\n", "cannot be read"),
    ("c.yaml", "a: [unclosed\n", "cannot be read"),
])
def test_an_unreadable_file_is_an_error(tmp_path: Path, name: str, text: str,
                                        message: str) -> None:
    """A file of another kind or with broken syntax is a ConventionsError saying so."""
    with pytest.raises(ConventionsError, match=message):
        load_conventions(write(tmp_path, name, text))


def test_neither_profile_nor_file_names_the_profiles() -> None:
    """A value that is neither a profile nor a file lists the built-in profiles."""
    with pytest.raises(ConventionsError, match="orchestrator, genai"):
        load_conventions("/nonexistent/conventions.toml")


def test_environment_selects_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_DIARY_CONVENTIONS=genai gives a processor the GenAI conventions."""
    monkeypatch.setenv("OTEL_DIARY_CONVENTIONS", "genai")
    assert Settings().conventions == "genai"
    assert DiarySpanProcessor().conventions is GENAI
    assert DiarySpanProcessor(conventions="orchestrator").conventions is ORCHESTRATOR


def test_bad_environment_value_warns_and_falls_back(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A bad mapping named in the environment is logged with its key and the default used."""
    monkeypatch.setenv("OTEL_DIARY_CONVENTIONS", str(write(tmp_path, "b.toml", "oops = 1\n")))
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        processor = DiarySpanProcessor()
    assert processor.conventions is ORCHESTRATOR
    assert "OTEL_DIARY_CONVENTIONS" in caplog.text and "'oops'" in caplog.text


def test_bad_argument_raises(tmp_path: Path) -> None:
    """A bad conventions argument in code raises ValueError."""
    with pytest.raises(ValueError, match="no built-in profile"):
        DiarySpanProcessor(conventions="no-such-profile")
    with pytest.raises(ValueError, match="'oops'"):
        Settings(conventions=str(write(tmp_path, "b.yaml", "oops: 1\n")))


class CountingIds(IdGenerator):
    """Deterministic ids, so two providers give their spans the same ids."""

    def __init__(self) -> None:
        self.next_id = 0

    def generate_span_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def generate_trace_id(self) -> int:
        self.next_id += 1
        return 0xABC << 64 | self.next_id


def diaries_for(names: Mapping[str, str], conventions: str | None) -> list[Diary]:
    """Two tasks (one recovered) with an LLM child each, attributes named by ``names``."""
    sink = InMemorySink()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                              id_generator=CountingIds(), shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], conventions=conventions)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("tests")
    start = 1_790_000_000_000_000_000
    for number, (retries, tries) in enumerate([(0, 1), (2, 3)], start=1):
        task = tracer.start_span(f"task {number}", start_time=start, attributes={
            names["task_id"]: f"T-{number}", names["title"]: f"Task number {number}",
            names["agent"]: "coder", names["route"]: "paid_model",
            names["escalations"]: retries, names["build_attempts"]: tries})
        with trace.use_span(task, end_on_exit=False):
            chat = tracer.start_span("llm", start_time=start + 1_000_000, attributes={
                names["model"]: "claude-sonnet", names["input_tokens"]: 100 * number,
                names["output_tokens"]: 7})
            chat.end(end_time=start + 900_000_000)
        task.end(end_time=start + 1_234_000_000)
        start += 10_000_000_000
    assert processor.force_flush(10_000)
    provider.shutdown()
    return sink.diaries


DEFAULT_NAMES = {"task_id": "orchestrator.task.id", "title": "orchestrator.task.title",
                 "agent": "orchestrator.agent.name", "route": "orchestrator.route",
                 "escalations": "orchestrator.escalation_count",
                 "build_attempts": "orchestrator.build_verify.attempts",
                 "model": "gen_ai.request.model", "input_tokens": "gen_ai.usage.input_tokens",
                 "output_tokens": "gen_ai.usage.output_tokens"}
ACME_NAMES = {"task_id": "acme.job.key", "title": "acme.job.summary", "agent": "acme.worker",
              "route": "acme.lane", "escalations": "acme.retries",
              "build_attempts": "acme.build.tries", "model": "acme.llm.model",
              "input_tokens": "acme.llm.tokens_in", "output_tokens": "acme.llm.tokens_out"}


def test_a_mapping_file_gives_foreign_names_the_default_diary(tmp_path: Path) -> None:
    """Spans with entirely different attribute names produce the same diaries as the default."""
    expected = diaries_for(DEFAULT_NAMES, None)
    mapped = diaries_for(ACME_NAMES, str(write(tmp_path, "acme.toml", MAPPING_TOML)))
    assert [d.outcome for d in expected] == ["completed", "recovered"]
    assert "Route: paid_model via claude-sonnet. Tokens: 107." in expected[0].body
    assert [d.content for d in mapped] == [d.content for d in expected]
    assert [d.path for d in mapped] == [d.path for d in expected]
    unmapped = diaries_for(ACME_NAMES, None)
    assert unmapped == []  # without the mapping these spans mark no task


def test_a_new_marker_does_not_keep_the_base_profiles_marker_values(tmp_path: Path) -> None:
    """`extends = "genai"` with its own `[task] marker` starts without genai's marker values:
    any value of the new marker marks a task span (it used to match nothing, silently)."""
    conventions = load_conventions(write(tmp_path, "m.toml", 'extends = "genai"\n'
                                         '[task]\nmarker = "acme.job"\n'))
    assert conventions.task_marker == "acme.job"
    assert conventions.task_marker_values is None
    assert conventions.is_task({"acme.job": "nightly-report"})
    kept = load_conventions(write(tmp_path, "k.toml", 'extends = "genai"\n[task]\n'
                                  'marker = "acme.job"\nmarker_values = ["run"]\n'))
    assert kept.task_marker_values == frozenset({"run"})


def test_empty_marker_values_are_an_error(tmp_path: Path) -> None:
    """`marker_values = []` would match no span: it is an error naming the key."""
    with pytest.raises(ConventionsError, match=r"task\.marker_values is empty"):
        load_conventions(write(tmp_path, "e.toml", '[task]\nmarker_values = []\n'))


def test_a_bad_environment_value_is_reported_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Every mechanism that reads the environment (hook, exporter, instrumentor) builds its
    settings again; a bad value is still one warning, naming the key."""
    monkeypatch.setenv("OTEL_DIARY_CONVENTIONS", str(write(tmp_path, "twice.toml", "x = 1\n")))
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        Settings()
        Settings()
        DiarySpanProcessor()
    warnings = [r for r in caplog.records if "OTEL_DIARY_CONVENTIONS" in r.getMessage()]
    assert len(warnings) == 1 and "'x'" in warnings[0].getMessage()


# -- auto: the profile of each run, told from its spans ----------------------------------


def orchestrator_run(tracer: trace.Tracer, start: int) -> None:
    """A recovered orchestrator run: a stderr tail, a failed tool call, a sub-agent span and
    an LLM call under a plain step (what an orchestrator's traces hold)."""
    task = tracer.start_span("task", start_time=start, attributes={
        "orchestrator.task.id": "T-9", "orchestrator.task.title": "Fix the build",
        "orchestrator.agent.name": "coder", "orchestrator.escalation_count": 1,
        "orchestrator.build_verify.attempts": 2,
        "orchestrator.build_verify.stderr_tail": "error TS2345: bad argument"})
    with trace.use_span(task, end_on_exit=False):
        step = tracer.start_span("step", start_time=start + 1)
        with trace.use_span(step, end_on_exit=False):
            agent = tracer.start_span("invoke_agent helper", start_time=start + 2, attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"})
            with trace.use_span(agent, end_on_exit=False):
                chat = tracer.start_span("chat", start_time=start + 3, attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1",
                    "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 2})
                chat.end(end_time=start + 4)
            agent.end(end_time=start + 5)
            tool = tracer.start_span("execute_tool", start_time=start + 6, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep",
                "error.type": "TimeoutError"})
            tool.set_status(trace.Status(trace.StatusCode.ERROR, "grep timed out"))
            tool.end(end_time=start + 7)
        step.end(end_time=start + 8)
    task.end(end_time=start + 1_000_000_000)


def genai_run(tracer: trace.Tracer, start: int) -> None:
    """A GenAI agent run with a failed then repeated tool call."""
    task = tracer.start_span("invoke_agent researcher", start_time=start, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher",
        "gen_ai.conversation.id": "conv-9"})
    with trace.use_span(task, end_on_exit=False):
        for n, failed in enumerate((True, False)):
            tool = tracer.start_span("execute_tool lookup", start_time=start + 1 + n,
                                     attributes={"gen_ai.operation.name": "execute_tool",
                                                 "gen_ai.tool.name": "lookup"})
            if failed:
                tool.set_status(trace.Status(trace.StatusCode.ERROR, "lookup timed out"))
            tool.end(end_time=start + 2 + n)
        chat = tracer.start_span("chat", start_time=start + 5, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x",
            "gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 7})
        chat.end(end_time=start + 6)
    task.end(end_time=start + 2_000_000_000)


def openinference_run(tracer: trace.Tracer, start: int) -> None:
    """An OpenInference CHAIN run over an AGENT node, an LLM call and a tool call that
    fails once."""
    task = tracer.start_span("LangGraph", start_time=start, attributes={
        "openinference.span.kind": "CHAIN", "session.id": "s-9",
        "input.value": "What changed?"})
    with trace.use_span(task, end_on_exit=False):
        node = tracer.start_span("agent", start_time=start + 1, attributes={
            "openinference.span.kind": "AGENT", "agent.name": "researcher"})
        with trace.use_span(node, end_on_exit=False):
            llm = tracer.start_span("ChatOpenAI", start_time=start + 2, attributes={
                "openinference.span.kind": "LLM", "llm.model_name": "gpt-y",
                "llm.token_count.prompt": 30, "llm.token_count.completion": 5})
            llm.end(end_time=start + 3)
        node.end(end_time=start + 4)
        for n, failed in enumerate((True, False)):
            tool = tracer.start_span("lookup", start_time=start + 5 + n, attributes={
                "openinference.span.kind": "TOOL", "tool.name": "lookup"})
            if failed:
                tool.record_exception(TimeoutError("lookup timed out"))
                tool.set_status(trace.Status(trace.StatusCode.ERROR, "lookup timed out"))
            tool.end(end_time=start + 6 + n)
    task.end(end_time=start + 3_000_000_000)


def diaries_of(run: object, conventions: str) -> list[Diary]:
    sink = InMemorySink()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                              id_generator=CountingIds(), shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, sinks=[sink], conventions=conventions)
    provider.add_span_processor(processor)
    run(provider.get_tracer("tests"), 1_790_000_000_000_000_000)  # type: ignore[operator]
    assert processor.force_flush(10_000)
    provider.shutdown()
    return sink.diaries


@pytest.mark.parametrize(("run", "profile"), [
    (orchestrator_run, "orchestrator"), (genai_run, "genai"),
    (openinference_run, "openinference")])
def test_auto_writes_the_diary_of_each_runs_own_profile(run: object, profile: str) -> None:
    """Under ``auto`` each run gives, byte for byte, the diary its own profile gives: an
    orchestrator run's (sub-agent span and all) among them."""
    expected = diaries_of(run, profile)
    assert len(expected) == 1 and expected[0].outcome == "recovered"
    assert [d.content for d in diaries_of(run, "auto")] == [expected[0].content]


def test_auto_is_not_a_base_for_a_mapping_file(tmp_path: Path) -> None:
    """A mapping file cannot extend ``auto`` (it tells profiles apart, it renames nothing)."""
    with pytest.raises(ConventionsError, match="extends must be one of orchestrator"):
        load_conventions(write(tmp_path, "a.toml", 'extends = "auto"\n'))


def test_the_readme_lists_every_fact_a_mapping_may_rename() -> None:
    """The README's list of facts is the one a mapping file is checked against."""
    from otel_diary.conventions import FACTS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    listed = readme.split("The facts are ", 1)[1].split("`[task]`", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) == set(FACTS)


@pytest.mark.parametrize(("attributes", "current", "named"), [
    ({"orchestrator.task.id": "T-1"}, GENAI, "orchestrator"),
    ({"orchestrator.task.id": "T-1"}, ORCHESTRATOR, None),
    ({"openinference.span.kind": "AGENT"}, ORCHESTRATOR, "openinference"),
    ({"gen_ai.operation.name": "invoke_agent"}, OPENINFERENCE, "genai"),
    ({"gen_ai.operation.name": "chat"}, ORCHESTRATOR, None),  # a call, not a run
    ({"traceloop.span.kind": "workflow"}, GENAI, "auto"),
    ({"http.route": "/health"}, ORCHESTRATOR, None),
])
def test_the_profile_that_marks_a_span_a_task_is_named(
        attributes: dict[str, object], current: Conventions, named: str | None) -> None:
    """``marking_profile``: the built-in profile under which a span the profile in use
    does not take for a task would be one (the hint a trace's root span gives)."""
    assert marking_profile(attributes, current) == named
    if named is not None:  # the processor asks only of root spans with a marker
        assert not EVERY_TASK_MARKER.isdisjoint(attributes)
