"""Masked templates of error lines: tool output in, one stable line out.

The first error line of a build or test output, with what varies between two runs of the
same error masked as ``<*>``: quoted text, paths and file names, line and column numbers,
hex, versions, identifiers. Codes (``TS2345``), exception names and exit statuses stay.
A pure function of its input, so every process and every run agree on it.
"""

from __future__ import annotations

import re

MAX_TEMPLATE = 160
"""Longest template kept, in characters."""
MAX_TOKENS = 24
"""Most words of an error line a template keeps."""
MAX_LINES = 200
"""Lines of output looked at for the first error line."""
MASK = "<*>"

_ERROR_LINE = re.compile(
    r"error|err!|fatal|fail|exception|panic|undefined|undeclared|not found|cannot|could not|"
    r"conflict|killed|denied|not used|non-zero|exit code|segmentation|refused|timed out|"
    r"invalid|no such|unable|missing|traceback", re.IGNORECASE)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1\s*$", re.MULTILINE | re.DOTALL)
_QUOTED = re.compile("'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`'\n]{0,200}[`']"
                     "|\u2018[^\u2019\n]{0,200}\u2019|\u201c[^\u201d\n]{0,200}\u201d")
_CODE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{1,4}\d{3,5}(?![A-Za-z0-9])")
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z][A-Za-z0-9]*(?:Error|Exception|Failure|Fault|Warning)$")
_STATUS_WORD = re.compile(r"(?:code|status|signal|exit|error)[:=]?$", re.IGNORECASE)
_SMALL_NUMBER = re.compile(r"\d{1,3}[.,;)]?$")
_VARIABLE = re.compile(r"\d|[/\\_@=#$%~]|[a-z][A-Z]|\w\.\w|\[REDACTED")
_PUNCT = "()[]{},;:.!?"
_TRAILING_NAME = re.compile(r"^(.*\S:) ([A-Za-z_][\w.]*)$")
_CALL = re.compile(r"^[A-Za-z_$][\w.$:]*\(")
"""A name called: ``parseConfig()``, ``handler(x)``."""
_NAMING_WORD = re.compile(
    r"(?:project|module|package|crate|target|function|method|class|variable|symbol|"
    r"file|host|service|container|image|table|column|field|key|branch|job|step)$",
    re.IGNORECASE)
"""Words after which a word ending a clause is a name: "on project shop-orders:"."""


def stderr_block(text: str) -> str:
    """The first fenced block of ``text`` (a diary's stderr tail), or ``""``."""
    match = _FENCE.search(text)
    return match.group(2) if match else ""


def first_error_line(text: str) -> str:
    """The first line of ``text`` that reads as an error (a Python traceback's exception
    line, not its header), joined with the next one when it only introduces it; or ``""``."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")[:MAX_LINES]
    in_traceback = False
    for number, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if _TRACEBACK.match(line):
            in_traceback = True
            continue
        if in_traceback:
            if line[:1].isspace():
                continue  # the frames: "  File ...", their source lines
            in_traceback = False
            return stripped
        if not _ERROR_LINE.search(stripped):
            continue
        if stripped.endswith(":"):
            following = next((other.strip() for other in lines[number + 1:] if other.strip()),
                             "")
            return f"{stripped} {following}".strip()
        return stripped
    return ""


def _mask_token(token: str, previous: str, last: bool) -> str:
    core = token.strip(_PUNCT)
    if not core or core == MASK:
        return token
    if _CODE.search(core) or _EXCEPTION.match(core):
        return token
    if _STATUS_WORD.match(previous) and _SMALL_NUMBER.match(token):
        return token  # an exit status names the error: "exit code 137" is not "exit code 1"
    if _VARIABLE.search(core) or core.isdigit() or _CALL.match(token):
        return MASK
    if _NAMING_WORD.match(previous) and (last or token[-1] in ":,;") \
            and not token.startswith(("(", "[")):
        return MASK  # "on project shop-orders:"
    return token


def mask(line: str) -> str:
    """``line`` with its variable parts as ``<*>`` and its spacing collapsed."""
    line = _QUOTED.sub(MASK, line)
    tokens = line.split()[:MAX_TOKENS]
    out: list[str] = []
    for number, token in enumerate(tokens):
        out.append(_mask_token(token, out[-1] if out else "", number == len(tokens) - 1))
    text = " ".join(out)
    trailing = _TRAILING_NAME.match(text)
    if trailing:  # "undefined: parseConfig", "declared and not used: x"
        text = f"{trailing.group(1)} {MASK}"
    # "<*>:<*>:<*>:", "<*>, <*>, <*>" and "<*> <*>" say no more than one mask.
    text = re.sub(r"<\*>(?:[\s,:;()\[\]]*<\*>)+", MASK, text)
    return text[:MAX_TEMPLATE].strip()


def error_template(text: str) -> str:
    """The masked template of the first error line of ``text``; ``""`` when there is none
    or nothing but masks is left of it."""
    line = first_error_line(text)
    if not line:
        return ""
    template = mask(line)
    if not re.search(r"[A-Za-z]{2,}", template.replace(MASK, "")):
        return ""
    return template
