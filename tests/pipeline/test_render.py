"""Rendering: the diary format to the letter (golden files) and safety on any input."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary import ORCHESTRATOR, FolderSink, SpanRecord, StubReflector, classify, render
from otel_diary.index.documents import sections
from otel_diary.pipeline.classify import Recovery, TaskRun
from otel_diary.pipeline.render import (
    _PRINTABLE,
    fence,
    front_matter,
    parse_front_matter,
    slug,
    tail,
)

GOLDEN = Path(__file__).resolve().parents[1] / "support" / "golden"
END_NS = 1_764_460_800_123_000_000  # 2025-11-30T00:00:00.123Z

COMPLETED = TaskRun(
    trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736, span_id=0x00F067AA0BA902B7,
    task_id="T-101", title="Add pagination to the orders API", agent="coder",
    outcome="completed", end_ns=END_NS, latency_ms=8421, trigger="issue",
    route="paid_model", model="anthropic/claude-sonnet-4-7", tokens=5132,
    file_operations=3, build_attempts=1, related=("kh-0123456789abcdef0123",),
)
RECOVERED = TaskRun(
    trace_id=0x5CE0E9A56015FEC5AADFA328AE398115, span_id=0x7A085853722DC6D2,
    task_id="T-102", title="Tighten types in the orders API", agent="coder",
    outcome="recovered", end_ns=END_NS, latency_ms=23355, route="paid_model",
    model="anthropic/claude-sonnet-4-7", tokens=14500, file_operations=5, build_attempts=3,
    escalations=2, workflow="wf-7",
    stderr_tail="src/orders/api.ts(42,17): error TS2345: Argument of type 'string' is not "
                "assignable to parameter of type 'OrderId'.\n```\nFound 1 error.\n",
)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_completed_diary_matches_golden_file() -> None:
    """A completed run renders exactly as the golden file (front matter and body)."""
    diary = render(COMPLETED, StubReflector().reflect(COMPLETED), COMPLETED.related)
    check_golden("completed.md", diary.content)
    assert diary.path == "diaries/agents/coder/2025-11-30-T-101.md"


def test_recovered_diary_matches_golden_file() -> None:
    """A recovered run renders its error, recovery and a fenced stderr tail as golden."""
    diary = render(RECOVERED, StubReflector().reflect(RECOVERED))
    check_golden("recovered.md", diary.content)


def test_a_run_that_recorded_nothing_of_how_it_ran_says_so() -> None:
    """No model, tokens, latency or tool call: the section says so, and claims no 0 ms."""
    bare = TaskRun(trace_id=1, span_id=2, task_id="T-1", title="t", agent="a",
                   outcome="completed", end_ns=END_NS, latency_ms=None)
    diary = render(bare, "x")
    assert sections(diary.body)["What was done"] == (
        "Its span recorded no model, tokens, latency or tool calls.")
    assert "latency_ms" not in parse_front_matter(diary.content)


def test_stub_reflection_of_a_failed_call_blames_the_call_not_the_agent() -> None:
    """A run recovered only from failed calls (a server error the client retried) reads as
    calls that failed and were got past, not as an agent that got the task wrong; an
    unnamed failure adds no placeholder to the error list."""
    run = replace(RECOVERED, escalations=0, build_attempts=None, stderr_tail=None,
                  failed_children=2, child_error_types=("openai.InternalServerError", "error"))
    diary = render(run, StubReflector().reflect(run))
    found = sections(diary.body)
    assert {heading: found[heading] for heading in (
        "Error encountered", "How it was recovered", "What was learned")} == {
        "Error encountered": "2 failed call(s) (openai.InternalServerError)",
        "How it was recovered": "The agent went on after the failed call(s), and the run "
                                "ended successfully.",
        "What was learned": "2 call(s) under this task failed (openai.InternalServerError); "
                            "the agent got past them and completed the task.",
    }


def test_a_run_past_a_failed_tool_call_says_how_in_both_sections() -> None:
    """Of a run whose failed tool call was followed by one that succeeded, "How it was
    recovered" and the stub's "What was learned" say so, not that the agent got past."""
    run = replace(RECOVERED, escalations=0, build_attempts=None, stderr_tail=None,
                  failed_children=1, child_error_types=("TimeoutError",),
                  recoveries=(Recovery("tool", "lookup", True),))
    found = sections(render(run, StubReflector().reflect(run)).body)
    assert found["How it was recovered"] == (
        "A call to the lookup tool failed; a later one succeeded.")
    assert found["What was learned"] == (
        "1 call(s) under this task failed (TimeoutError); a later call to the lookup tool "
        "succeeded, and the agent completed the task.")


@pytest.mark.parametrize(("succeeded_with", "learned"), [
    ('{"id": 42}', "a later call to the lookup tool given `{\"id\": 42}` instead of "
                   "`{\"id\": \"42\"}` succeeded"),
    ('{"id": "42"}', "the same call to the lookup tool succeeded when made again"),
    (None, "a later call to the lookup tool succeeded"),
], ids=["other input", "same input", "not captured"])
def test_what_a_failed_tool_call_was_given_says_what_got_past_it(
        succeeded_with: str | None, learned: str) -> None:
    """With its calls' arguments, the stub's "What was learned" says what input the call
    that got past the failure was given, or that the same input worked when made again;
    "How it was recovered" stays the lesson's rule, whatever the input."""
    run = replace(RECOVERED, escalations=0, build_attempts=None, stderr_tail=None,
                  failed_children=1, child_error_types=("TypeError",),
                  recoveries=(Recovery("tool", "lookup", True, None, '{"id": "42"}',
                                       succeeded_with),))
    found = sections(render(run, StubReflector().reflect(run)).body)
    assert found["How it was recovered"] == (
        "A call to the lookup tool failed; a later one succeeded.")
    assert found["What was learned"] == (
        f"1 call(s) under this task failed (TypeError); {learned}, and the agent completed "
        "the task.")


@pytest.mark.parametrize(("changes", "recovered"), [
    ({}, "After 2 escalation(s), the build passed on attempt 3 (route paid_model, model "
         "anthropic/claude-sonnet-4-7)."),
    ({"build_attempts": 1, "route": None},
     "After 2 escalation(s), the run succeeded (model anthropic/claude-sonnet-4-7)."),
    ({"route": None, "model": None}, "After 2 escalation(s), the build passed on attempt 3."),
    ({"escalations": 0}, "The build passed on attempt 3."),  # repaired where it ran
])
def test_an_escalated_run_says_where_it_was_escalated_to(changes: dict[str, object],
                                                         recovered: str) -> None:
    """The route and model an escalated run ended on are what got it past its error: the
    sentence names them, so that the error's lesson counts which one worked."""
    run = replace(RECOVERED, **changes)  # type: ignore[arg-type]
    assert sections(render(run, "x").body)["How it was recovered"] == recovered


@pytest.mark.parametrize("run", [COMPLETED, RECOVERED], ids=["completed", "recovered"])
def test_stub_reflection_repeats_no_figure_and_no_stock_advice(run: TaskRun) -> None:
    """What was learned repeats no token count, latency or file count, and no sentence
    that every diary would carry."""
    learned = StubReflector().reflect(run)
    assert run.latency_ms is not None
    for figure in (str(run.tokens), f"{run.latency_ms / 1000:.1f}s", "file operation"):
        assert figure not in learned
    for stock in ("first try", "baseline", "tasks like this one", "budget time"):
        assert stock not in learned


@pytest.mark.parametrize(("tail", "quoted"), [
    ("Traceback (most recent call last):\n  File \"app/main.py\", line 11, in <module>\n"
     "    import requests\nModuleNotFoundError: No module named 'requests'\n"
     "make: *** [Makefile:59: build] Error 2\n", "ModuleNotFoundError: No module named 'requests'"),
    ("./cmd/main.go:88:14: undefined: cfg\nFAIL\tshop/cmd [build failed]\n",
     "./cmd/main.go:88:14: undefined: cfg"),
    ("/usr/bin/ld: main.o: in function `main':\nmain.c:(.text+0x1f): undefined reference to "
     "`ctx'\ncollect2: error: ld returned 1 exit status\n",
     "main.c:(.text+0x1f): undefined reference to `ctx'"),
    ("compiling...\nall done, exit 3\n", "all done, exit 3"),
], ids=["python", "go", "ld", "no error line"])
def test_stub_reflection_quotes_the_error_its_lesson_lists(tail: str, quoted: str) -> None:
    """What was learned quotes the first line that reads as an error, as the lesson of the
    run's error lists it (a traceback's exception, not the make line after it), else the
    last line."""
    learned = StubReflector().reflect(replace(RECOVERED, stderr_tail=tail))
    assert learned.startswith(f'The build failed with "{quoted}".')


def test_missing_facts_are_left_out() -> None:
    """A run with no route, model, tokens or counts prints no sentence about them."""
    bare = TaskRun(trace_id=1, span_id=2, task_id="t", title="t", agent="a",
                   outcome="completed", end_ns=END_NS, latency_ms=5)
    diary = render(bare, StubReflector().reflect(bare))
    done = diary.body.split("## What was done\n")[1].split("\n\n")[0]
    assert done == "Latency: 5ms."
    assert "None" not in diary.content and "route" not in diary.front_matter


def test_stderr_fence_survives_backticks() -> None:
    """A stderr tail containing ``` cannot close the fence around it."""
    block = "a\n````\nb ``` c"
    fenced = fence(block)
    assert fenced.startswith("`````text\n") and fenced.endswith("\n`````")


def test_stderr_tail_is_capped() -> None:
    """A huge stderr keeps only its last lines, within the character cap."""
    kept = tail("\n".join(f"line {n}" for n in range(10_000)))
    assert kept.splitlines()[-1] == "line 9999" and len(kept.splitlines()) == 40


def test_slug_blocks_traversal_and_separators() -> None:
    """Names become safe single path components, never `.`, `..` or with separators."""
    for name in ["..", ".", "../../etc/passwd", "a/b\\c", "", "\x00", "日本語", "-" * 500]:
        safe = slug(name)
        assert safe not in ("", ".", "..") and "/" not in safe and "\\" not in safe
        assert len(safe) <= 80


WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{n}" for n in range(10)),
                    *(f"LPT{n}" for n in range(10))}


@pytest.mark.parametrize("name", ["CON", "nul", "AUX", "COM1", "LPT9", "con.txt", "Nul.tar.gz",
                                  "prn", " aux ", "lpt1.", "CON/"])
def test_slug_never_makes_a_name_windows_reserves(name: str) -> None:
    """Agent and task names Windows refuses as a file or folder name are made usable."""
    safe = slug(name)
    assert safe.split(".")[0].upper() not in WINDOWS_RESERVED
    assert safe.lstrip("_").lower() == name.strip(" ./").lower()


@pytest.mark.parametrize("name", ["coder", "console", "nullable", "auxiliary", "com10",
                                  "LPT", "con-artist", "CONX.txt", "my.con"])
def test_slug_keeps_names_that_only_look_reserved(name: str) -> None:
    """Ordinary names, even ones starting like a reserved name, are kept as they are."""
    assert slug(name) == name


attribute_values = st.one_of(
    st.text(), st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(),
    st.lists(st.text(max_size=20), max_size=5), st.lists(st.integers(), max_size=5),
    st.binary(max_size=20),
)
fact_names = st.sampled_from([
    "orchestrator.task.id", "orchestrator.task.title", "orchestrator.agent.name",
    "orchestrator.route", "gen_ai.request.model", "orchestrator.tokens",
    "orchestrator.latency_ms", "orchestrator.file_operations",
    "orchestrator.build_verify.attempts", "orchestrator.build_verify.passed",
    "orchestrator.build_verify.stderr_tail", "orchestrator.escalation_count",
    "orchestrator.repair_no_files", "orchestrator.related", "orchestrator.task.trigger",
    "orchestrator.workflow.id",
])


@settings(max_examples=300, deadline=None)
@given(
    attributes=st.dictionaries(st.one_of(fact_names, st.text(max_size=30)), attribute_values,
                               max_size=12),
    task_id=st.text(min_size=1),
    agent=st.text(),
    name=st.text(),
    trace_id=st.integers(1, 2**128 - 1),
    span_id=st.integers(1, 2**64 - 1),
    end_ns=st.integers(0, 2**63 - 1),
)
def test_any_span_renders_safely(tmp_path_factory: object, attributes: dict[str, object],
                                 task_id: str, agent: str, name: str, trace_id: int,
                                 span_id: int, end_ns: int) -> None:
    """For arbitrary attributes, rendering never raises, the file stays inside the diary
    folder, and the front matter parses back to the same id, tags and trace id."""
    attributes = {**attributes, "orchestrator.task.id": task_id,
                  "orchestrator.agent.name": agent}
    record = SpanRecord(trace_id=trace_id, span_id=span_id, name=name, start_ns=0,
                        end_ns=end_ns, attributes=attributes)
    run = classify(record, None, ORCHESTRATOR)
    if run is None:
        return
    diary = render(run, StubReflector().reflect(run), run.related)
    root = Path(str(tmp_path_factory.mktemp("kb")))  # type: ignore[attr-defined]
    target = FolderSink(root).target(diary)
    assert target.resolve().is_relative_to((root / "diaries" / "agents").resolve())
    assert target.parent.parent == (root / "diaries" / "agents").resolve()
    front = parse_front_matter(diary.content)
    assert front["id"] == diary.id
    assert front["tags"] == list(diary.tags)
    assert front["trace_id"] == f"{trace_id:032x}"
    assert front["source_type"] == "diary"


HOSTILE = st.sampled_from([
    "", " ", "yes", "No", "ON", "off", "true", "False", "null", "Null", "~", "123", "-7",
    "+1", "0o17", "0x1F", "1_000", "1e3", "-.5", ".inf", ".NaN", "2025-11-30",
    "2025-11-30T00:00:00.123Z", "<<", "=", "- a", "-", "-a", "? q", "?", ":", ": x", "a: b",
    "a:", "a:b", "a #b", "a#b", "#x", "'q'", "it's", '"d"', "---", "--- x", "...", "x...",
    " lead", "trail ", "two  spaces", "x\ny", "x\n", "\nx", "x\r", "tab\there", "\u2028",
    "x\u2029y", "\ufeff", "\x85", "\xa0", "é", "日本語", "emoji \U0001f600", "\x00", "\x7f",
    "[a]", "{b}", "a, b", "&anchor", "*alias", "!tag", "|", ">", "%", "@", "`", "https://h/p?q=1#f",
])
strings = st.one_of(HOSTILE, st.text(max_size=12),
                    st.builds("".join, st.lists(HOSTILE, min_size=1, max_size=3)))
scalars = st.one_of(strings, st.integers(-(2**70), 2**70), st.booleans(), st.none())
keys = st.one_of(st.sampled_from(["id", "title", "tags", "runs", "evidence", "newest"]),
                 strings)
string_lists = st.one_of(st.lists(strings, max_size=4), st.lists(scalars, max_size=4))
entries = st.dictionaries(keys, st.one_of(scalars, string_lists), max_size=4)
documents = st.dictionaries(
    keys, st.one_of(scalars, string_lists, st.lists(entries, max_size=3),
                    st.lists(st.one_of(entries, scalars), max_size=3)), max_size=8)


@settings(max_examples=2000, deadline=None)
@given(document=documents)
def test_front_matter_is_what_yaml_writes_and_reads_back(document: dict[str, object]) -> None:
    """Front matter (diaries' and lessons') is byte for byte what PyYAML writes for the
    same values, hostile strings included (quotes, colons, line breaks, unicode, leading
    dashes, 'yes'/'no'/'null', numbers as strings), and parses back to those values."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = front_matter(document)
    assert text == yaml.dump(document, Dumper=dumper, sort_keys=False, allow_unicode=True,
                             width=2**31 - 1, default_flow_style=False)
    assert yaml.safe_load(text) == document


class _Text(str):
    """A string subclass: PyYAML's safe dumper refuses it."""


@pytest.mark.parametrize("document", [
    {None: "x"}, {"k": [{None: 1}]}, {"k" * 129: "v"}, {"漢" * 43: "v"}, {"k" * 33: "v"},
    {"ids": ["ok", _Text("ok")]}, {_Text("ok"): 1}, {"k": [{"ok": _Text("ok")}]},
], ids=["null key", "null key in a list", "long key", "long in bytes", "33 characters",
        "subclass item", "subclass key", "subclass value"])
def test_front_matter_writes_or_refuses_what_yaml_does(document: dict[object, object]) -> None:
    """Keys that are not strings, keys libyaml writes in the explicit ``? key`` form and
    string subclasses come out as yaml.dump writes them, or are refused as it refuses
    them, whatever was written before (short strings are remembered)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    front_matter({"ok": "ok", "ids": ["ok"]})  # "ok" is remembered from here on
    try:
        expected = yaml.dump(document, Dumper=dumper, sort_keys=False, allow_unicode=True,
                             width=2**31 - 1, default_flow_style=False)
    except yaml.YAMLError as exc:
        with pytest.raises(type(exc)):
            front_matter(document)  # type: ignore[arg-type]
    else:
        assert front_matter(document) == expected  # type: ignore[arg-type]


@given(end_ns=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(0, 4 * 10**18)))
def test_utc_stamp_is_the_iso_form_strftime_writes(end_ns: int) -> None:
    """The created stamp and date of any end time are what strftime writes for it."""
    from datetime import datetime, timezone

    from otel_diary.text import utc_stamp

    seconds, nanos = divmod(max(end_ns, 0), 1_000_000_000)
    try:
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        moment = datetime(9999, 12, 31, tzinfo=timezone.utc)
    assert utc_stamp(end_ns) == (
        moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1_000_000:03d}Z",
        moment.strftime("%Y-%m-%d"))


def matched_code_points(pattern: re.Pattern[str]) -> bytes:
    """For every code point, 1 where ``pattern`` matches it (over one string of them all)."""
    marks = bytearray(0x110000)
    for match in pattern.finditer("".join(map(chr, range(0x110000)))):
        marks[match.start():match.end()] = b"\1" * (match.end() - match.start())
    return bytes(marks)


def test_printable_is_exactly_the_ranges_libyaml_writes_as_they_are() -> None:
    """The renderer's plain-line class, written as the complement it is, holds printable
    ASCII and U+00A0 to U+FFFD without surrogates, the line and paragraph separators and
    the byte-order mark: checked on every code point."""
    expected = bytes(
        (0x20 <= c <= 0x7E or 0xA0 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD)
        and c not in (0x2028, 0x2029, 0xFEFF) for c in range(0x110000))
    assert matched_code_points(_PRINTABLE) == expected


@pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])
def test_front_matter_that_is_not_yaml_is_told_without_its_text(
        loader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error says what is wrong and on which line of the document, never the text
    around it (PyYAML's own message quotes it, and it may hold a secret)."""
    monkeypatch.setattr(yaml, "CSafeLoader", getattr(yaml, loader), raising=False)
    secret = "sk-proj-SECRETSECRETSECRET0123456789"
    for content, where in ((f"---\nid: kh-1\nkey: [{secret}\n---\n", "at line 4, column 1"),
                           (f'---\nkey: "{secret}\\q"\n---\n', "at line 2, column ")):
        with pytest.raises(ValueError, match=r"^front matter is not YAML: ") as raised:
            parse_front_matter(content)
        assert where in str(raised.value) and "SECRET" not in str(raised.value)


def test_a_long_string_named_many_times_by_aliases_is_refused() -> None:
    """One long string named a thousand times is a thousand strings for whoever walks,
    redacts or writes the front matter out: refused, as aliases nesting into many values
    are. The same strings written out in full are read."""
    long = "A" * 20_000
    named = f"---\nid: kh-1\npad: &x \"{long}\"\nmany: [{', '.join(['*x'] * 200)}]\n---\n"
    with pytest.raises(ValueError, match="more values than its text"):
        parse_front_matter(named)
    written = f"---\nid: kh-1\nmany: [{', '.join([long] * 20)}]\ntitle: {long}\n---\n"
    assert parse_front_matter(written)["many"] == [long] * 20
