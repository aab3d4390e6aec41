"""The plain data every stage after a source works on.

Sources (the in-process processor, the OTLP receiver, replay) turn their own span types
into a :class:`SpanRecord`; nothing downstream imports OpenTelemetry or OTLP types.
Assembly folds what child spans report into a summary (:mod:`otel_diary.assembly.summary`)
and hands each root task span on with it. Attribute values are read with the coercions
here, which never trust a value's type.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Attributes = Mapping[str, object]
"""Attribute values as a source hands them over; stages coerce and never trust the type."""


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One ended span as plain data.

    Ids are integers (128-bit trace id, 64-bit span id); times are nanoseconds since the
    epoch. ``parent_is_remote`` is true when the parent lives in another process.
    """

    trace_id: int
    span_id: int
    name: str
    start_ns: int
    end_ns: int
    parent_span_id: int | None = None
    parent_is_remote: bool = False
    is_error: bool = False
    status_message: str = ""
    attributes: Attributes = field(default_factory=dict)
    resource: Attributes = field(default_factory=dict)

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"

    @property
    def span_id_hex(self) -> str:
        return f"{self.span_id:016x}"

    @property
    def is_local_root(self) -> bool:
        """True for a trace root or the first span of this process under a remote parent."""
        return self.parent_span_id is None or self.parent_is_remote


UNNAMED_ERROR = "error"
"""The error type recorded for a failed span that names none."""

EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
STATUS_DESCRIPTION = "otel.status_description"
"""How a failed span tells its error besides ``error.type``: the attributes of its first
``exception`` event, and its status description, which every source hands over as these
attributes of the span's contribution."""
ERROR_DETAILS = (EXCEPTION_TYPE, EXCEPTION_MESSAGE, EXCEPTION_STACKTRACE, STATUS_DESCRIPTION)
MAX_ERROR_TEXT = 2048
"""Longest exception message or status description, and stack trace tail, a source hands
over (a stack trace keeps its end); classification redacts it whole, then cuts it shorter."""


def error_details(exception: Mapping[str, object] | None, status: str) -> dict[str, object]:
    """The error-detail attributes of a failed span from its first ``exception`` event's
    attributes and its status description, cut to :data:`MAX_ERROR_TEXT` (empty ones left out)."""
    details: dict[str, object] = {}
    if exception:
        for key in (EXCEPTION_TYPE, EXCEPTION_MESSAGE, EXCEPTION_STACKTRACE):
            value = exception.get(key)
            if isinstance(value, str) and value.strip():
                details[key] = (value[-MAX_ERROR_TEXT:] if key == EXCEPTION_STACKTRACE
                                else value[:MAX_ERROR_TEXT])
    if status.strip():
        details[STATUS_DESCRIPTION] = status[:MAX_ERROR_TEXT]
    return details


HANDED_BACK = "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN"
"""The ``response_type`` of a tool call's result that says the call failed and its error
went back to the model, the run going on (Google ADK's ``ReflectAndRetryToolPlugin``)."""
MAX_RESULT = 64 * 1024
"""Longest tool call result read for the error it hands back."""
MAX_REPORTED = 256 * 1024
"""Longest failed tool call result read for what went wrong: Google ADK's shell tool
returns up to 30,000 characters each of a command's stdout and stderr, escaped in JSON."""


def json_value(text: str) -> object:
    """The value the JSON document ``text`` holds, else ``None`` (not JSON, or nested past
    what the parser takes); a caller bounds ``text``'s length first."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


FAILED_STATUS = ('"status": "error"', '"status":"error"')
"""What a result that says its call failed holds, as JSON (Python writes it either way),
looked for in its first 256 characters."""


def handed_back(result: object) -> dict[str, object] | None:
    """The error-detail attributes (type, message) of a failed tool call whose result
    handed its error back to the model instead of raising it (``{"response_type":
    "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN", "error_type": …, "error_details": …}``),
    none for a result that says the call failed (``{"status": "error", …}``, as Google
    ADK's function tools report a failure: :func:`reported` tells what it says), else
    ``None``: the call's span says it succeeded. Read from the first 256 characters."""
    if not (isinstance(result, str) and result.startswith("{") and len(result) <= MAX_RESULT):
        return None
    head = result[:256]
    plugin = HANDED_BACK in head
    if not (plugin or FAILED_STATUS[0] in head or FAILED_STATUS[1] in head):
        return None
    data = json_value(result)
    if not isinstance(data, dict):
        return None
    if not plugin or data.get("response_type") != HANDED_BACK:
        return {} if data.get("status") == "error" else None
    details: dict[str, object] = {}
    for key, value in ((EXCEPTION_TYPE, data.get("error_type")),
                       (EXCEPTION_MESSAGE, data.get("error_details"))):
        if isinstance(value, str) and value.strip():
            details[key] = value[:MAX_ERROR_TEXT]
    return details


def reported(result: object) -> tuple[str | None, str | None]:
    """What the captured result of a failed tool call says went wrong, for a span that
    says no more than the error's class (Google ADK's own tools return their failures as
    values, ``{"status": "error", "stderr": …, "exit_code": 2}``, an MCP tool's result
    has ``isError``, and ADK marks the span ``TOOL_ERROR`` or ``MCP_TOOL_ERROR``).

    Returns its message and the output of the command it ran (``stderr``, else
    ``stdout``), each ``None`` when it does not say. The message is the ``error`` (or
    its ``message``) or ``error_message``, else an MCP result's text, else that output,
    else the exit code; a result that is plain text is the message. Results longer than
    :data:`MAX_REPORTED` are not read."""
    if not (isinstance(result, str) and result.strip() and len(result) <= MAX_REPORTED):
        return None, None
    try:
        data: object = json.loads(result)
    except (ValueError, RecursionError):
        data = None if result.lstrip()[:1] in ("{", "[") else result  # cut, or plain text
    if isinstance(data, str):
        return _said(data), None
    if not isinstance(data, dict):
        return None, None
    error, content = data.get("error"), data.get("content")
    message = (_said(error) or _said(data.get("error_message"))
               or (_said(error.get("message")) if isinstance(error, dict) else None))
    if message is None and isinstance(content, list) and (
            data.get("isError") is True or data.get("is_error") is True):
        message = _said("\n".join(part["text"] for part in content if isinstance(part, dict)
                                  and isinstance(part.get("text"), str)))
    output = _said(data.get("stderr")) or _said(data.get("stdout"))
    code = data.get("exit_code")
    if message is None:
        message = output or (f"exit code {code}" if type(code) is int else None)
    return message, output


def _said(value: object) -> str | None:
    """``value`` when it is text that says something, else ``None``."""
    return value if isinstance(value, str) and value.strip() else None


def first(attributes: Mapping[str, object], names: tuple[str, ...]) -> object:
    """The value of the first of ``names`` present in ``attributes``, else ``None``."""
    for name in names:
        value = attributes.get(name)
        if value is not None:
            return value
    return None


MAX_TEXT = 4096
"""Longest single-line fact kept (titles, names, ids); longer values are cut."""
SECRET_MAX = 25 * 1024
"""More than the longest secret redaction takes whole (a JWT: 24,581 characters)."""
REDACT_WINDOW = 32 * 1024
"""Characters past what is kept that are redacted with it when a long text is cut, so a
secret the cut crosses is still found whole; see :func:`redact_head` and
:func:`redact_tail`. Redacting only that much keeps a 10 MB value from holding the
interpreter lock for half a second."""


def redact_head(text: str, keep: int, redact: Callable[[str], str]) -> str:
    """``redact`` applied to the start of ``text``: all of it when it is at most ``keep``
    and :data:`REDACT_WINDOW` characters, else that much, without the last
    :data:`SECRET_MAX` characters of what redaction gives (the cut may have left the
    start of a secret there, too short to be recognised)."""
    if len(text) <= keep + REDACT_WINDOW:
        return redact(text)
    done = redact(text[:keep + REDACT_WINDOW])
    return done[:len(done) - SECRET_MAX]


def redact_tail(text: str, keep: int, redact: Callable[[str], str]) -> str:
    """The last ``keep`` characters of ``text`` redacted, as :func:`redact_head` does at
    the start (the first :data:`SECRET_MAX` characters of a cut window left out)."""
    if len(text) <= keep + REDACT_WINDOW:
        return redact(text)[-keep:]
    done = redact(text[-(keep + REDACT_WINDOW):])
    return done[max(len(done) - keep, SECRET_MAX):]


def as_text(value: object, limit: int = MAX_TEXT,
            redact: Callable[[str], str] | None = None) -> str | None:
    """A single-line string of at most ``limit`` characters, or ``None`` for nothing (and
    for a bool, a NaN or an infinity, which no text field means).

    With ``redact``, the whole value is redacted before it is cut, so a cut never leaves
    part of a secret the redactor would have recognised whole, and again once flattened,
    so a key and its value split by a line break (``password:\nx``) are not joined into
    one past it. Without it, a cut that falls inside a word drops that word: what is
    redacted later then finds no fragment.
    """
    if value is None or isinstance(value, (bytes, bytearray, bool)):
        return None  # True is no name, model or title
    if not isinstance(value, str):
        if isinstance(value, (list, tuple)) or (isinstance(value, float)
                                                 and not math.isfinite(value)):
            return None
        value = str(value)
    if redact is not None:  # a secret over several lines (a PEM block) whole
        value = redact_head(value, limit, redact)
    text = " ".join(value.split())
    if redact is not None and text != value:
        text = redact(text)
    if len(text) <= limit:
        return text or None
    if redact is None and text[limit] != " ":
        return text[:limit].rpartition(" ")[0] or None
    return text[:limit]


def error_name(value: object) -> str | None:
    """An ``error.type`` as text; a stringified class (``<class 'a.B'>``) becomes ``a.B``."""
    text = as_text(value, 256)
    if text and text.startswith("<class '") and text.endswith("'>"):
        return text[8:-2] or None
    return text


def as_int(value: object) -> int | None:
    """An integer from an int, an integral float or a numeric string; bools are not ints."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 32:
            return None
        try:
            return int(text)
        except ValueError:
            return None
    return None


def as_bool(value: object) -> bool | None:
    """A bool from a bool or a conventional string (``"true"``/``"false"``, ``"1"``/``"0"``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
    if isinstance(value, int):
        return value != 0
    return None
