"""Masked templates of error lines: tool output in, one stable line out.

The first error line of a build or test output, with what varies between two runs of the
same error masked as ``<*>``: quoted text, paths and file names, line and column numbers,
hex, versions, identifiers. Codes (``TS2345``), exception names and exit statuses stay.
A runner's section rules (``=== FAILURES ===``) are no error line, and a line that gives
a verdict alone (``--- FAIL: TestParse``, ``> Task :compileJava FAILED``) yields to a
later one that says what failed. A pure function of its input, so every process and every
run agree on it.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterator

MAX_TEMPLATE = 160
"""Longest template kept, in characters."""
MAX_TOKENS = 24
"""Most words of an error line a template keeps."""
MAX_LINES = 200
"""Lines of output looked at for the first error line."""
MAX_VERDICTS = 16
"""Error lines that give a verdict alone passed over, at most, for one that says what
failed."""
MASK = "<*>"

_ERROR_LINE = re.compile(
    r"error|err!|fatal|fail|exception|panic|undefined|undeclared|not found|cannot|could not|"
    r"conflict|killed|denied|not used|non-zero|exit code|segmentation|refused|timed out|"
    r"invalid|no such|unable|missing|traceback", re.IGNORECASE)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
_WARNING = re.compile(r"warning", re.IGNORECASE)
"""A warning is no error said: a verdict line does not yield to one (pytest's
``DeprecationWarning: invalid escape sequence``)."""
_RULE = re.compile(r"^([=_-])\1\1.*\1\1\1$")
"""A section rule around a title, as test runners print them (``=== FAILURES ===``,
``___ test_total ___``, ``=== 1 failed in 0.12s ===``): no error line itself."""
VERDICT_WORDS = frozenset({
    "fail", "failed", "failure", "failures", "failing", "error", "errors", "err",
    "assertionerror", "assertionfailederror", "assert", "found", "test", "tests", "total",
    "problem", "problems", "task", "there", "was", "were"})
"""Words of a verdict and its tally, which every failure of a runner shares: what a line
says besides them names the error."""
_NUMBERED = re.compile(r"\d{1,4}\) ")
"""A runner's numbered failure (``1) Tests\\OrderTest::testTotal``), which the line
before it (``There was 1 failure:``) only counts."""
_UNITS = frozenset({"ms", "s", "sec", "secs", "seconds", "min", "m"})
"""The units of a duration after its number (``[12 ms]``): masked with it."""
_NUMBER = re.compile(r"\d{1,9}(?:\.\d{1,9})?")
_FENCE_OPEN = re.compile(r"^(`{3,}(?!`)|~{3,}(?!~))[^\n]*\n", re.MULTILINE)
_FENCE_CLOSE = re.compile(r"^(`{3,}(?!`)|~{3,}(?!~))[^\S\n]*$", re.MULTILINE)
"""Fence lines, their whole run of backticks or tildes in group 1 (a run that may not
end short of its last: backtracking through a long run went quadratic)."""
_QUOTED = re.compile("'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`'\n]{0,200}[`']"
                     "|\u2018[^\u2019\n]{0,200}\u2019|\u201c[^\u201d\n]{0,200}\u201d")
_CODE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{1,4}\d{3,5}(?![A-Za-z0-9])")
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z][A-Za-z0-9]*(?:Error|Exception|Failure|Fault|Warning)$")
_STATUS_WORD = re.compile(r"(?:code|status|signal|exit|error)[:=]?$", re.IGNORECASE)
_SMALL_NUMBER = re.compile(r"\d{1,3}[.,;)]?$")
_VARIABLE = re.compile(r"\d|[/\\_@=#$%~]|[a-z][A-Z]|\w\.\w|\w::\w|\[REDACTED")
_TASK_PATH = re.compile(r":[\w-]{1,100}(?::[\w-]{1,100})+")
"""A Gradle task in a subproject (``:app:test``)."""
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
    """The first fenced block of ``text`` (a diary's stderr tail), or ``""``.

    It opens at the first line starting with three or more backticks (or tildes) that a
    later line closes: a line of as many of them as the opening line's first ones (the
    most that any later line gives, at least three), then white space only; it ends at
    the nearest such line. Found in O(n log n): searching from each opening line that
    nothing closes took quadratic time (4 s for 64,000 characters of them)."""
    first_opener = _FENCE_OPEN.search(text)
    if first_opener is None:
        return ""
    run, after = first_opener.group(1), first_opener.end()  # the common case: the first
    closer = re.compile("^" + run + r"[^\S\n]*$", re.MULTILINE).search(text, after)
    if closer is not None:  # opening line, closed by a line of its whole run
        return text[after:closer.start()]
    closers: dict[str, tuple[list[int], list[int], list[int]]] = {}
    for match in _FENCE_CLOSE.finditer(text):  # (starts, lengths) by fence character
        run = match.group(1)
        starts, lengths, _ = closers.setdefault(run[0], ([], [], []))
        starts.append(match.start())
        lengths.append(len(run))
    for _, lengths, shortest in closers.values():  # the shortest closer from each on
        shortest.extend(lengths)
        for index in range(len(shortest) - 2, -1, -1):
            shortest[index] = min(shortest[index], shortest[index + 1])
    for opener in _FENCE_OPEN.finditer(text, first_opener.start()):
        run = opener.group(1)
        starts, lengths, shortest = closers.get(run[0], ([], [], []))
        first = bisect.bisect_left(starts, opener.end())
        if first < len(starts) and shortest[first] <= len(run):
            longest = max(length for length in lengths[first:] if length <= len(run))
            return text[opener.end():starts[lengths.index(longest, first)]]
    return ""


def first_error_line(text: str) -> str:
    """The first line of ``text`` that reads as an error and says more than a verdict, else
    the first that reads as an error (a Python traceback's exception line, not its header;
    never a section rule), joined with the next one when it only introduces it; or ``""``."""
    return _first_error(text)[0]


@functools.lru_cache(maxsize=4)
def _first_error(text: str) -> tuple[str, str]:
    """:func:`first_error_line` and its masked template, ``""`` when it gives a verdict
    alone. Remembered for the last few texts (each at most a 64 KiB tail): a run's
    reflection, lesson and template ask for the same one."""
    first = first_template = ""
    for line in itertools.islice(_error_lines(text), MAX_VERDICTS + 1):
        template = mask(line)
        says = _says_what_failed(template)
        if says and not _WARNING.search(line):
            return line, template
        if not first:
            first, first_template = line, template if says else ""
    return first, first_template


def _error_lines(text: str) -> Iterator[str]:
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
            yield stripped
            continue
        if not _ERROR_LINE.search(stripped) or _RULE.match(stripped):
            continue
        if stripped.endswith(":"):
            following = next((other.strip() for other in lines[number + 1:] if other.strip()),
                             "")
            if _RULE.match(following) or _NUMBERED.match(following):
                following = ""  # "failures:" then "---- tests::total stdout ----"
            yield f"{stripped} {following}".strip()
            continue
        yield stripped


def _says_what_failed(template: str) -> bool:
    """Whether a masked error line names the error: it holds a code (``error TS2345:
    <*>``) or a word besides a verdict's (``Syntax error``, ``Killed``; not ``FAIL <*>``,
    ``> Task <*> FAILED``, ``Found <*> errors``, ``<*> AssertionError``)."""
    if _CODE.search(template):
        return True
    words = [word.rsplit(".", 1)[-1] for word in
             (token.strip(_PUNCT + "*<>=#-").lower() for token in template.split())
             if re.search("[a-z]{2}", word)]
    return any(word not in VERDICT_WORDS for word in words) or not words


def _mask_token(token: str, previous: str, last: bool) -> str:
    core = token.strip(_PUNCT)
    if not core or core == MASK:
        return token
    if _CODE.search(core) or _EXCEPTION.match(core):
        return token
    if _STATUS_WORD.match(previous) and _SMALL_NUMBER.match(token):
        return token  # an exit status names the error: "exit code 137" is not "exit code 1"
    if _VARIABLE.search(core) or core.isdigit() or _CALL.match(token) \
            or _TASK_PATH.fullmatch(token):
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
        if number and token.strip(_PUNCT).lower() in _UNITS \
                and _NUMBER.fullmatch(tokens[number - 1].strip(_PUNCT)):
            out.append(MASK)  # a duration's unit: "[12 ms]", "after 30 seconds"
            continue
        out.append(_mask_token(token, out[-1] if out else "", number == len(tokens) - 1))
    text = " ".join(out)
    trailing = _TRAILING_NAME.match(text)
    if trailing:  # "undefined: parseConfig", "declared and not used: x"
        text = f"{trailing.group(1)} {MASK}"
    # "<*>:<*>:<*>:", "<*>, <*>, <*>" and "<*> <*>" say no more than one mask.
    text = re.sub(r"<\*>(?:[\s,:;()\[\]]*<\*>)+", MASK, text)
    return text[:MAX_TEMPLATE].strip()


def error_template(text: str) -> str:
    """The masked template of the first error line of ``text``; ``""`` when there is none,
    when it gives a verdict alone, or when nothing but masks is left of it."""
    template = _first_error(text)[1]
    return template if re.search(r"[A-Za-z]{2,}", template.replace(MASK, "")) else ""
