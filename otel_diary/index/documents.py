"""Diary documents as the index sees them: error signatures and index entries.

An entry is what the document says (front matter and ``##`` sections), so the folder stays
the source of truth and the index can always be rebuilt from it; a freshly rendered diary
gives the same entry from the values in hand, without parsing its text again. Two
diaries sharing an error signature met the same error, whatever else their output says.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from otel_diary.index.templates import error_template, first_error_line, stderr_block
from otel_diary.pipeline import DIARY_ROOT, KB_FOLDER
from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.redact import redact
from otel_diary.pipeline.render import (
    Diary,
    error_encountered,
    front_matter,
    implicit_resolvers,
    parse_front_matter,
    split_front_matter,
)
from otel_diary.text import inside, knowledge_files, one_line, read_text

logger = logging.getLogger("otel_diary")

MAX_DOCUMENT_BYTES = 1024 * 1024
"""Files in the diary folder larger than this are not diaries and are not indexed."""
Unreadable = Callable[[str, str], object]
"""Told ``(relative path, why)`` for each file in the diary folder not read as a diary."""
MAX_SIGNATURES = 32
"""Most error signatures kept per diary."""


# -- error signatures ----------------------------------------------------------------------

_CODE = re.compile(r"(?<![\w.-])([A-Z]{1,4}\d{3,5})(?![\w-])")
"""Compiler and linter codes: TS2345, CS0103, C2065, E0308, F401."""
_EXCEPTION = re.compile(
    r"(?<![\w.])(?:[A-Za-z_]\w*\.)*([A-Z][A-Za-z0-9]*?(?:Error|Exception|Failure|Fault))\b")
"""Exception class names, qualified or not: ValueError, java.lang.NullPointerException."""
_PYTEST_ID = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py::[^\s]+)")
"""pytest node ids: tests/test_x.py::test_y, tests/test_x.py::TestX::test_y[case]."""
_FAIL_LINE = re.compile(r"(?:^|\s)(?:---[ \t]+)?(?:FAIL|FAILED|ERROR)(?::|[ \t])[ \t]*([^\s(]+)",
                        re.MULTILINE)
"""``FAIL: test_name``, ``--- FAIL: TestName``, ``FAILED path::test``, ``FAIL src/x.test.ts``
(on its line: cargo's ``… FAILED`` is followed by the next test's line)."""
_RUNNER_TEST = re.compile(
    r"^[ \t]*(?:Failed[ \t]+(?P<dotnet>[\w.`+<>,]+(?:\([^)\n]{0,200}\))?)[ \t]+"
    r"\[<?[ \t]?[\d.]+[ \t]?(?:ms|s|m|h)(?:[ \t][\d.]+[ \t]?(?:ms|s|m))?\]"
    r"|\d{1,4}\)[ \t]+(?P<phpunit>[\w\\]+::\w+)"
    r"|test[ \t]+(?P<cargo>[\w:]+)[ \t]+\.\.\.[ \t]+FAILED[ \t]*$"
    r"|rspec[ \t]+(?:\./)?(?P<rspec>[\w./-]+_spec\.rb)(?::\d+|\[[\d:]+\])[ \t]+#[ \t]+"
    r"(?P<example>[^\n]{1,120})"
    r"|(?P<junit>[\w.$]+) > (?P<method>[\w$]+)(?:\([^)\n]{0,100}\))?(?:\[\d{1,4}\])? FAILED)",
    re.MULTILINE)
"""A failed test as its runner names it: dotnet test's ``Failed Ns.Class.Method [12 ms]``,
PHPUnit's ``1) Tests\\OrderTest::testTotal``, cargo test's ``test tests::total ...
FAILED``, RSpec's ``rspec ./spec/order_spec.rb:40 # Order#total …`` (by its file and
description: a line number moves), Gradle's ``AppTest > totalIsSum() FAILED``."""
_ASSERTED = re.compile(r"(?i)assert|expect\(|failure/error|\bexpected:|but was:")
"""What a failed assertion's line says (``Assert.Equal() Failure``, ``Failed asserting
that``, ``assertion `left == right` failed``, RSpec's ``Failure/Error: expect(…)``)."""
_TESTLIKE = re.compile(r"test|spec|::", re.IGNORECASE)


_PRIMARY_ORDER = ("code:", "exception:", "template:", "test:")
_ASSERTION = re.compile(r"Assertion\w*Error$")
"""``AssertionError``, JUnit's ``AssertionFailedError``: what any failed test raises."""


def error_signatures(text: str) -> tuple[str, ...]:
    """What identifies an error in ``text`` precisely: ``code:…``, ``exception:…`` and
    ``test:…`` keys (no failed assertion's exception where a failing test is named: every
    failed test raises one).

    Two diaries sharing a key met the same error, whatever else their output says.
    """
    return tuple(_precise(text))[:MAX_SIGNATURES]


def template_signature(text: str) -> str | None:
    """The ``template:…`` key of the first error line of ``text`` (of its first fenced
    block, if it has one): the error with its variable parts masked."""
    template = _template(stderr_block(text) or text, _precise(text))
    return f"template:{template}" if template else None


def _template(text: str, found: Mapping[str, None]) -> str:
    """The template of ``text``'s first error line, none where a failing test is named
    and the line is its failed assertion's (every failed test of a runner says one)."""
    template = error_template(text)
    if template and any(key.startswith("test:") for key in found) \
            and _ASSERTED.search(first_error_line(text)):
        return ""
    return template


@functools.lru_cache(maxsize=64)
def section_signatures(section: str) -> tuple[str, ...]:
    """The error signatures of a diary's "Error encountered" section: the template is
    read from its stderr tail only, never from the sentence that counts the attempts.

    Remembered for the last few sections: the related-diary lookup before rendering and
    the index update after writing ask for the same run's."""
    found = _precise(section)
    block = stderr_block(section)
    template = _template(block, found) if block else ""
    if template:
        found[f"template:{template}"] = None
    return tuple(found)[:MAX_SIGNATURES]


def primary_signature(signatures: tuple[str, ...] | list[str]) -> str | None:
    """The signature a run's lesson is filed under: a code, else an exception name, else
    the template of the first error line, else a failing test; the first of its kind."""
    for prefix in _PRIMARY_ORDER:
        for signature in signatures:
            if signature.startswith(prefix):
                return signature
    return None


def _precise(text: str) -> dict[str, None]:
    found: dict[str, None] = {}
    for match in _CODE.finditer(text):
        found[f"code:{match.group(1)}"] = None
    for match in _EXCEPTION.finditer(text):
        found[f"exception:{match.group(1)}"] = None
    for match in _PYTEST_ID.finditer(text):
        found[f"test:{match.group(1).rstrip(':,.;')}"] = None
    for match in _FAIL_LINE.finditer(text):
        name = match.group(1).rstrip(":,.;")
        if _TESTLIKE.search(name):
            found[f"test:{name}"] = None
    for match in _RUNNER_TEST.finditer(text):
        runner = match.lastgroup
        name = (f"{match['rspec']} # {match['example'].strip()}" if runner == "example"
                else f"{match['junit']}.{match['method']}" if runner == "method"
                else match[runner or 0])
        found[f"test:{name}"] = None
    if any(key.startswith("test:") for key in found):  # the test says which assertion
        found = {key: None for key in found if not _ASSERTION.search(key)}
    return found


def run_signatures(run: TaskRun) -> tuple[str, ...]:
    """The error signatures of a run, read from what its diary's "Error encountered" says."""
    if run.outcome != "recovered":
        return ()
    return _recovered_signatures(run)


@functools.lru_cache(maxsize=8)
def _recovered_signatures(run: TaskRun) -> tuple[str, ...]:
    """Asked for by the Related lookup, the lesson and the index entry of the same run."""
    return section_signatures(error_encountered(run))


# -- documents -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One diary as the index keeps it; built from the document text alone."""

    id: str
    path: str
    title: str
    agent: str
    task: str
    outcome: str
    trigger: str | None
    workflow: str | None
    trace_id: str
    span_id: str
    created: str
    body: str
    meta: str
    summary: str
    signatures: tuple[str, ...]


_FENCE_OPENING = re.compile(r"(`{3,}|~{3,})")


@functools.lru_cache(maxsize=4)
def sections(body: str) -> Mapping[str, str]:
    """The ``## `` sections of a diary body by heading; headings inside fences don't count.
    (Kept for the last few bodies: the index and the lesson read the same diary's.)"""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    fence = ""
    for line in body.split("\n"):
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped == fence[0] * len(stripped):
                fence = ""
        else:
            opening = _FENCE_OPENING.match(line) if line[:3] in ("```", "~~~") else None
            if opening:
                fence = opening.group(1)
            elif line.startswith("## "):
                current = found.setdefault(line[3:].strip(), [])
                continue
        if current is not None:
            current.append(line)
    return MappingProxyType({heading: "\n".join(lines).strip()
                             for heading, lines in found.items()})


def _text(value: object) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, datetime):
        value = value.isoformat()
    text = one_line(str(value), 2000)
    return text or None


# -- front matter, the fields an entry needs -------------------------------------------------

_ENTRY_KEYS = frozenset(("id", "source_type", "title", "agent", "task", "outcome", "tags",
                         "trigger", "workflow", "trace_id", "span_id", "created", "route",
                         "model"))
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?")
_QUOTED = re.compile(r"'((?:[^'\x00-\x1f\x7f-\x9f]|'')*)'")
_PLAIN = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`][^\x00-\x1f\x7f-\x9f]*")
_UNREADABLE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
"""What YAML reads as a line break, or refuses (never in the front matter the renderer writes)."""


def _string(text: str, typed: bool) -> str | None:
    """A scalar as the renderer writes strings (plain, or single-quoted), else ``None``;
    a plain scalar YAML reads as a number, boolean, null or date only when ``typed``."""
    quoted = _QUOTED.fullmatch(text)
    if quoted:
        return quoted.group(1).replace("''", "'")
    if not _PLAIN.fullmatch(text) or ": " in text or " #" in text or \
            text.endswith((":", " ")):
        return None
    if not typed and any(regexp.match(text) for _, regexp in implicit_resolvers().get(text[0], ())):
        return None
    return text


def _fields(content: str) -> dict[str, Any]:
    """The front matter of a diary as far as an entry reads it. The ``key: value`` lines
    and ``- item`` lists the renderer writes are read directly, anything else by YAML (the
    same answer, at a fraction of the cost for a whole folder)."""
    end = content.find("\n---\n", 3)
    if not content.startswith("---\n") or end < 0 or _UNREADABLE.search(content, 4, end):
        return parse_front_matter(content)
    found: dict[str, Any] = {}
    lines = content[4:end].split("\n")
    number = 0
    while number < len(lines):
        key_line = _KEY.fullmatch(lines[number])
        number += 1
        if key_line is None:
            return parse_front_matter(content)
        key, value = key_line.group(1), key_line.group(2)
        if value is None:  # a block list follows, or nothing (null)
            items: list[str] = []
            while number < len(lines) and lines[number].startswith("- "):
                item = _string(lines[number][2:], typed=False)
                if item is None:
                    return parse_front_matter(content)
                items.append(item)
                number += 1
            found[key] = items or None
        elif value == "[]":
            found[key] = []
        else:
            text = _string(value, typed=key not in _ENTRY_KEYS)
            if text is None:
                return parse_front_matter(content)
            found[key] = text
    return found


def path_choices(path: str, ident: str, span_id: str) -> tuple[str, ...]:
    """Where diary ``ident`` may be kept, in order, as the folder sink chooses: ``path``;
    when another run's diary holds it, the path naming the run's span; else one naming
    the diary itself, which no other diary can hold."""
    stem = path.removesuffix(".md")
    own = f"-{span_id[:8]}"
    alternate = stem if stem.endswith(own) else stem + own
    return tuple(dict.fromkeys((path, f"{alternate}.md", f"{alternate}-{ident}.md")))


def entry_from_document(path: str, content: str) -> Entry:
    """The index entry of the diary document ``content`` stored at ``path`` (relative).

    Raises ``ValueError`` when ``content`` is not a diary.
    """
    return entry_from_parts(path, _fields(content), content)


def entry_from_parts(path: str, front: Mapping[str, Any], content: str) -> Entry:
    """The index entry of the diary document ``content`` whose front matter ``front`` the
    caller has already read. Raises ``ValueError`` when it is not a diary."""
    body = split_front_matter(content)[1]
    parts = sections(body)
    return _entry(path, front, body, parts.get("What was learned", ""),
                  section_signatures(parts.get("Error encountered", "")))


def entry_from_diary(path: str, diary: Diary, run: TaskRun) -> Entry:
    """The index entry of a diary just rendered from ``run`` and stored at ``path``: the
    entry its file gives, from the values in hand (no YAML parsed, the error signatures
    the related-diary lookup already read from the run)."""
    return _entry(path, diary.front_matter, diary.body,
                  sections(diary.body).get("What was learned", ""), run_signatures(run))


def _entry(path: str, front: Mapping[str, Any], body: str, learned: str,
           signatures: tuple[str, ...]) -> Entry:
    """What the index keeps of a diary: its front matter's fields, its body, the start of
    "What was learned" and its error signatures."""
    ident = _text(front.get("id"))
    if ident is None:
        raise ValueError("document has no id")
    if front.get("source_type", "diary") != "diary":
        raise ValueError("document is not a diary")
    tags = front.get("tags")
    tag_list = [str(tag) for tag in tags] if isinstance(tags, list) else []
    fields = {key: _text(front.get(key)) for key in (
        "title", "agent", "task", "outcome", "trigger", "workflow", "trace_id", "span_id",
        "created", "route", "model")}
    meta = " ".join(text for text in [*tag_list, *fields.values()] if text)
    return Entry(
        id=ident,
        path=path,
        title=fields["title"] or "",
        agent=fields["agent"] or "",
        task=fields["task"] or "",
        outcome=fields["outcome"] or "",
        trigger=fields["trigger"],
        workflow=fields["workflow"],
        trace_id=(fields["trace_id"] or "").lower(),
        span_id=(fields["span_id"] or "").lower(),
        created=fields["created"] or "",
        body=body,
        meta=meta,
        summary=one_line(learned, 300),
        signatures=signatures,
    )


def read_entry(root: Path, path: str, base: Path) -> Entry:
    """The index entry of the diary at ``path`` (relative to ``root``), read within
    ``base``, its words redacted (see :func:`redacted_document`); ``OSError``,
    ``ValueError`` or ``TypeError`` (see :func:`why_unreadable`) when there is none."""
    content = read_text(root / path, "replace", within=base, max_bytes=MAX_DOCUMENT_BYTES)
    return entry_from_parts(path, *redacted_document(_fields(content), content))


# -- redacting what a document says ----------------------------------------------------------

def redacted(value: Any) -> Any:
    """``value`` (a string, or front matter) with every string in it redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, (list, tuple, set)):
        return [redacted(item) for item in value]
    if isinstance(value, dict):
        return {redacted(key): _redacted_item(str(key), item) for key, item in value.items()}
    return value


def _redacted_item(key: str, value: Any) -> Any:
    """The ``value`` of ``key``, redacted as the line ``key: value`` is: what names a
    secret (``password: hunter2``) is its key."""
    if not isinstance(value, str):
        return redacted(value)
    head = f"{key}: "
    line = redact(head + value)
    return line[len(head):] if line.startswith(head) else redact(value)


def redacted_document(front: Mapping[str, Any], content: str,
                      ) -> tuple[Mapping[str, Any], str]:
    """A document read from a file (its front matter ``front`` and text ``content``) with
    the secrets the redactor knows taken out, for the index and the store: a diary written
    before the redactor knew a kind of key, or put in the folder by another tool, would
    otherwise give it back in a search's snippet (cut inside it, or highlighted in part).
    The text is kept as it is when nothing in it is a secret; else its body is redacted
    and, when the front matter held one (in a value, escaped or not, or in a comment), the
    front matter is written again from the values redacted. The pipeline's own diaries
    are redacted already and do not come here."""
    head, body = split_front_matter(content)
    escaped = "\\" in head  # a double-quoted value's escapes ("\ngsk_…") hide what they spell
    if not escaped and redact(content) == content:
        return front, content
    if not head:
        return front, redact(content)
    shown_front, shown_body = redacted(front), redact(body)
    rewrite = shown_front != front or redact(head) != head  # a value, or a comment
    if not rewrite and shown_body == body:
        return front, content
    between = content[len(head) + 5:len(content) - len(body)]  # "---\n" and blank lines
    if rewrite:
        front, head = shown_front, front_matter(shown_front).removesuffix("\n")
    return front, f"---\n{head}\n{between}{shown_body}"


def scan_entries(root: Path, folder: Path, unreadable: Unreadable | None = None,
                 ) -> tuple[list[Entry], set[str]]:
    """The entry of every diary in ``folder`` under ``root`` (sorted by path, the first of
    a duplicate id kept), and the paths of the other files (each told to ``unreadable``
    with the reason)."""
    entries: list[Entry] = []
    seen: dict[str, str] = {}
    refused: set[str] = set()
    base = (root / KB_FOLDER).resolve()
    for file in knowledge_files(folder, base):
        path = file.relative_to(root).as_posix()
        try:
            entry = read_entry(root, path, base)
            why = f"a second copy of {entry.id} (kept: {seen[entry.id]})" \
                if entry.id in seen else ""
        except (OSError, ValueError, TypeError) as exc:
            why = why_unreadable(exc)
        if why:
            refused.add(path)
            if unreadable is not None:
                unreadable(path, why)
            continue
        seen[entry.id] = path
        entries.append(entry)
    return entries, refused


def unlisted_entries(root: Path, folder: Path, entries: Sequence[Entry], refused: Set[str],
                     paths: Iterable[str]) -> list[Entry]:
    """The entries of the diaries at ``paths`` (relative to ``root``, in ``folder``) that
    are neither among ``entries`` nor ``refused``, read if they are still there."""
    listed = refused | {entry.path for entry in entries}
    ids = {entry.id for entry in entries}
    base, folder = (root / KB_FOLDER).resolve(), folder.resolve()
    added: list[Entry] = []
    for path in paths:
        if path in listed or not path.endswith(".md") \
                or not inside(root / path, folder, strict=True):
            continue
        with contextlib.suppress(OSError, ValueError, TypeError):  # gone, or no diary
            entry = read_entry(root, path, base)
            if entry.id not in ids:
                ids.add(entry.id)
                added.append(entry)
    return added


def why_unreadable(exc: Exception) -> str:
    """Why a file in the diary folder is not read as a diary, in a line (no file name)."""
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return f"larger than a document can be ({MAX_DOCUMENT_BYTES:,} bytes)"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return one_line(str(exc), 200)


def scan_diaries(root: Path, unreadable: Unreadable | None = None,
                 ) -> list[tuple[str, Mapping[str, Any], str]]:
    """Every diary under ``<root>/diaries/agents``: (relative path, front matter, text);
    each file that is not one is told to ``unreadable``."""
    found: list[tuple[str, Mapping[str, Any], str]] = []
    base = (root / KB_FOLDER).resolve()
    for file in knowledge_files(root / DIARY_ROOT, base):
        path = file.relative_to(root).as_posix()
        try:
            content = read_text(file, "replace", within=base, max_bytes=MAX_DOCUMENT_BYTES)
            front = parse_front_matter(content)
        except (OSError, ValueError, TypeError) as exc:
            why = why_unreadable(exc)
        else:
            if front.get("source_type", "diary") == "diary" and front.get("id"):
                found.append((path, front, content))
                continue
            why = "document is not a diary" if front.get("id") else "document has no id"
        if unreadable is not None:
            unreadable(path, why)
    return found
