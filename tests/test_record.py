"""as_text and redact_tail: a value made one line is redacted again, and a huge one only
around what is kept, with no fragment of a secret the cut crosses let out."""

from __future__ import annotations

import json

import pytest

from otel_diary.pipeline.redact import redact
from otel_diary.record import (
    EXCEPTION_MESSAGE,
    EXCEPTION_TYPE,
    HANDED_BACK,
    MAX_ERROR_TEXT,
    MAX_REPORTED,
    MAX_RESULT,
    REDACT_WINDOW,
    as_text,
    handed_back,
    redact_tail,
    reported,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("db password:\nhunter2", "db password: [REDACTED:password]"),
    ("Authorization: Bearer\nabcdef123456", "Authorization: Bearer [REDACTED:bearer]"),
    ("deploy password:\u00a0hunter2", "deploy password: [REDACTED:password]"),
])
def test_a_one_line_value_is_redacted_once_flattened_too(text: str, expected: str) -> None:
    """``as_text`` joins lines: a key and its value it brings together are redacted (a
    title, task id or agent name of one line is what becomes a file name)."""
    assert as_text(text, 512, redact) == expected


class _Recording:
    """The redactor, recording the length of each text it is given."""

    def __init__(self) -> None:
        self.lengths: list[int] = []

    def __call__(self, text: str) -> str:
        self.lengths.append(len(text))
        return redact(text)


def test_a_huge_value_is_redacted_only_around_what_is_kept() -> None:
    """A 10 MB title or stderr tail is redacted in a window a little longer than what is
    kept, not whole: the worker would hold the interpreter lock for half a second."""
    huge = "word " * 2_000_000
    recording = _Recording()
    assert as_text(huge, 512, recording) == huge[:512]
    assert redact_tail(huge, 65_536, recording) == huge[-65_536:]
    assert max(recording.lengths) <= 65_536 + REDACT_WINDOW


_JWT = "eyJ" + "a" * 1480 + "." + "b" * 1480 + "." + "c" * 30
"""A token of 2,995 characters that redaction turns into a marker of 14."""
_TOKEN = "ghp_" + "Zq7" * 12
"""A GitHub token: recognised whole, not as its first 20 characters."""


def _shrinking(length: int, *, padded_after: bool = False) -> str:
    """Text of ``length`` characters, most of it tokens redaction shrinks to markers."""
    tokens = " ".join([_JWT] * ((length - 1) // (len(_JWT) + 1)))
    pad = "p" * (length - len(tokens) - 1)
    return tokens + " " + pad if padded_after else pad + " " + tokens


@pytest.mark.parametrize("into", [4, 20, 30])
def test_a_secret_crossing_the_head_window_is_not_let_out(into: int) -> None:
    """The window's end falls ``into`` characters into a token after text that redaction
    shrinks: the token's start, too short to be recognised, is not moved into what is
    kept."""
    value = _shrinking(512 + REDACT_WINDOW - into - 1) + " " + _TOKEN + " " + "tail " * 9_000
    assert "Zq7Zq7" not in (as_text(value, 512, redact) or "")


@pytest.mark.parametrize("into", [4, 20, 30])
def test_a_secret_crossing_the_tail_window_is_not_let_out(into: int) -> None:
    """The same at the start of a stderr tail's window, before text redaction shrinks."""
    keep = 4_096
    tail = " " + _shrinking(keep + REDACT_WINDOW - (len(_TOKEN) - into) - 1,
                            padded_after=True)
    value = "head " * 9_000 + _TOKEN + tail
    assert "Zq7Zq7" not in redact_tail(value, keep, redact)


def handed(**fields: object) -> str:
    """A tool call's result as Google ADK's ReflectAndRetryToolPlugin records it."""
    return json.dumps({"response_type": HANDED_BACK, **fields})


def test_a_result_that_handed_an_error_back_tells_the_error() -> None:
    """A result that hands the call's error back to the model gives its type and message
    (the message cut like any other); one with neither gives no details, but is one."""
    assert handed_back(handed(error_type="RuntimeError", error_details="TS2345: boom",
                              retry_count=1, reflection_guidance="Try again.")) == {
        EXCEPTION_TYPE: "RuntimeError", EXCEPTION_MESSAGE: "TS2345: boom"}
    long = handed_back(handed(error_type="E", error_details="x" * (MAX_ERROR_TEXT + 9)))
    assert long is not None and long[EXCEPTION_MESSAGE] == "x" * MAX_ERROR_TEXT
    assert handed_back(handed(error_type=3, error_details=" ")) == {}


@pytest.mark.parametrize("result", [
    json.dumps({"status": "error", "error_message": "No weather for 'Paris'."}),
    json.dumps({"status": "error"}, separators=(",", ":")),
    json.dumps({"city": "Paris", "status": "error", "stderr": "TS2345"}),
    json.dumps({"status": "error", "response_type": "OTHER " + HANDED_BACK}),
])
def test_a_result_that_says_its_call_failed_is_a_failed_call(result: str) -> None:
    """A result whose status is ``error`` (Google ADK's function tools report a failure
    so) is a failed call with no details: :func:`reported` reads what it says."""
    assert handed_back(result) == {}


@pytest.mark.parametrize("result", [
    json.dumps({"result": "built"}),
    json.dumps({"result": HANDED_BACK}),
    json.dumps({"response_type": "OTHER", "error_type": "E"}),
    json.dumps({"padding": "p" * 300, "response_type": HANDED_BACK}),
    json.dumps({"response_type": HANDED_BACK, "error_details": "x" * MAX_RESULT}),
    json.dumps({"status": "success", "report": "The status is error-free."}),
    json.dumps({"status": "Error"}), json.dumps({"state": {"status": "error"}}),
    json.dumps({"status": "error", "code": 2})[:-1],
    json.dumps({"padding": "p" * 300, "status": "error"}),
    json.dumps({"status": "error", "error_message": "x" * MAX_RESULT}),
    json.dumps([{"status": "error"}]),
    '{"response_type": "' + HANDED_BACK + '", "error_type": ',
    json.dumps([{"response_type": HANDED_BACK}]),
    HANDED_BACK, "", None, 7,
])
def test_any_other_result_is_a_call_that_succeeded(result: object) -> None:
    """A result that only mentions the marker, another response type, a status that is not
    ``error``, one too long to read or marked past its start, malformed JSON or no JSON
    object is no handed-back error."""
    assert handed_back(result) is None


@pytest.mark.parametrize(("result", "said"), [
    (json.dumps({"status": "error", "stderr": "error TS2345: boom\n", "exit_code": 2}),
     ("error TS2345: boom\n", "error TS2345: boom\n")),
    (json.dumps({"status": "error", "stdout": "FAILED test_a.py::test_b", "exit_code": 1}),
     ("FAILED test_a.py::test_b", "FAILED test_a.py::test_b")),
    (json.dumps({"status": "error", "stdout": "ran", "stderr": "boom", "exit_code": 1}),
     ("boom", "boom")),
    (json.dumps({"status": "error", "error": "Command timed out after 300s.",
                 "stdout": "building"}), ("Command timed out after 300s.", "building")),
    (json.dumps({"status": "error", "error_message": "No such city."}),
     ("No such city.", None)),
    (json.dumps({"error": {"code": 404, "message": "no such repo"}}), ("no such repo", None)),
    (json.dumps({"status": "error", "exit_code": 137, "stderr": " "}), ("exit code 137", None)),
    (json.dumps({"content": [{"type": "text", "text": "no such issue"},
                             {"type": "image", "data": "…"}, {"type": "text", "text": "#7"}],
                 "isError": True}), ("no such issue\n#7", None)),
    (json.dumps({"content": [{"type": "text", "text": "denied"}], "is_error": True}),
     ("denied", None)),
    ("Permission denied: /etc/shadow", ("Permission denied: /etc/shadow", None)),
    (json.dumps({"status": "error", "stdout": '"\t' * 15_000, "stderr": '"\t' * 14_999 + "E"}),
     ('"\t' * 14_999 + "E",) * 2),  # the most ADK's shell tool returns, escaped
    (json.dumps("quota exceeded"), ("quota exceeded", None)),
])
def test_a_failed_calls_result_tells_what_went_wrong(result: str,
                                                     said: tuple[str | None, ...]) -> None:
    """The result of a failed call gives its error message, else what an MCP result says,
    else its command's output (stderr first), else the exit code; and that output."""
    assert reported(result) == said


@pytest.mark.parametrize("result", [
    json.dumps({"status": "error"}),
    json.dumps({"content": [{"type": "text", "text": "fine"}], "isError": False}),
    json.dumps({"content": [{"type": "text", "text": "fine"}], "isError": 1}),
    json.dumps({"content": "denied", "isError": True}),
    json.dumps({"exit_code": "2"}),
    json.dumps({"error": {"code": 404, "message": " "}}),
    json.dumps([{"error": "x"}]),
    json.dumps({"error": "x" * MAX_REPORTED}),
    '{"error": "cut', "[1,", "null", "42", " ", "", None, 7,
])
def test_a_result_that_says_nothing_of_an_error_tells_nothing(result: object) -> None:
    """A result with no message, output or exit code, one too long to read, malformed
    JSON, or no text gives nothing."""
    assert reported(result) == (None, None)
