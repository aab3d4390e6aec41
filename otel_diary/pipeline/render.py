"""Render a classified run into a :class:`Diary`: path, YAML front matter, markdown body.

The only module that knows markdown. Every value that came from a span is treated as
hostile: made single-line where it sits on one line, fenced where it is a block, and
made filesystem-safe where it names a file.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_diary.pipeline import DIARY_ROOT
from otel_diary.pipeline.classify import MAX_ARGUMENTS, Recovery, TaskRun
from otel_diary.record import UNNAMED_ERROR
from otel_diary.text import clean, one_line, sha256_hex, utc_stamp

MAX_SLUG = 80
MAX_TAIL_LINES = 40
MAX_TAIL_CHARS = 4000
MAX_TITLE = 200

_UNSAFE_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
_WINDOWS_RESERVED = re.compile(r"(?i)(?:CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(?:\..*)?")
"""Names Windows refuses for a file or folder, with any extension (``nul.txt`` too)."""


@dataclass(frozen=True)
class Diary:
    """A rendered diary: where it goes (``path``, relative, POSIX) and what it says."""

    id: str
    path: str
    title: str
    agent: str
    task_id: str
    outcome: str
    tags: tuple[str, ...]
    trace_id: str
    span_id: str
    created: str
    front_matter: dict[str, Any]
    body: str
    content: str
    alternate_path: str = ""
    """Where this run goes when ``path`` already holds another run's diary."""
    related: tuple[str, ...] = field(default=())


@functools.lru_cache(maxsize=256)
def diary_id(trace_id: int, span_id: int) -> str:
    """The stable id of the diary of one task span: the same span, the same id (asked for
    a few times per diary: rendering, Related, the lesson)."""
    digest = sha256_hex(f"{trace_id:032x}{span_id:016x}")
    return f"kh-{digest[:20]}"


@functools.lru_cache(maxsize=1024)
def slug(text: str) -> str:
    """A filesystem-safe name: ASCII letters, digits, ``.``, ``_``, ``-``; never ``.``/``..``,
    nor a name Windows reserves (``CON``, ``nul.txt``, ``COM1``: these get a leading ``_``),
    so a hub repository checks out everywhere."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    safe = _UNSAFE_SLUG.sub("-", ascii_text).strip("-._")
    safe = re.sub(r"-{2,}", "-", safe)[:MAX_SLUG].rstrip("-._")
    if not safe:
        # Nothing readable survived (e.g. a non-Latin name): keep it distinct anyway.
        safe = "x-" + sha256_hex(text)[:12]
    if _WINDOWS_RESERVED.fullmatch(safe):
        safe = ("_" + safe)[:MAX_SLUG].rstrip("-._")
    return safe


def fence(block: str) -> str:
    """``block`` in a backtick fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", block)), default=0) \
        if "`" in block else 0
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{block}\n{ticks}"


def tail(text: str, max_lines: int = MAX_TAIL_LINES, max_chars: int = MAX_TAIL_CHARS) -> str:
    """The last lines of ``text``, capped in lines and characters."""
    lines = clean(text.replace("\r\n", "\n").replace("\r", "\n")).rstrip().split("\n")
    kept = "\n".join(lines[-max_lines:])
    if len(kept) > max_chars:
        kept = kept[-max_chars:]
        kept = kept.split("\n", 1)[1] if "\n" in kept else kept
    return kept


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}(s)"


def what_was_done(run: TaskRun) -> str:
    first: list[str] = []
    if run.route and run.model:
        first.append(f"Route: {one_line(run.route, 120)} via {one_line(run.model, 120)}.")
    elif run.route:
        first.append(f"Route: {one_line(run.route, 120)}.")
    elif run.model:
        first.append(f"Model: {one_line(run.model, 120)}.")
    if run.tokens is not None:
        first.append(f"Tokens: {run.tokens}.")
    if run.latency_ms is not None:
        first.append(f"Latency: {run.latency_ms}ms.")
    second: list[str] = []
    if run.file_operations is not None:
        second.append(f"Applied {_plural(run.file_operations, 'file operation')}.")
    if run.tool_calls:
        named = ", ".join(f"{one_line(tool, 80)} ({count})" for tool, count in run.tools)
        second.append(f"Made {_plural(run.tool_calls, 'tool call')}"
                      + (f": {named}." if named else "."))
    others = [one_line(model, 120) for model in run.models if model != run.model]
    if others:
        second.append(f"Also used {', '.join(others)}.")
    if run.build_attempts is not None:
        second.append(f"Build verified in {_plural(run.build_attempts, 'attempt')}.")
    second += [given_to(recovery) for recovery in run.recoveries if recovery.failed_with]
    lines = [" ".join(part) for part in (first, second) if part]
    return "\n".join(lines) or "Its span recorded no model, tokens, latency or tool calls."


def named_errors(run: TaskRun) -> list[str]:
    """The error types of the run's failed calls, less the placeholder of unnamed ones."""
    return [kind for kind in run.child_error_types if kind != UNNAMED_ERROR]


def error_encountered(run: TaskRun) -> str:
    parts: list[str] = []
    if run.escalations:
        parts.append(_plural(run.escalations, "escalation"))
    if run.build_attempts is not None and run.build_attempts > 1:
        parts.append(f"build repaired in {_plural(run.build_attempts, 'attempt')}")
    if run.repair_no_files:
        parts.append("a repair attempt changed no files")
    if run.failed_children:
        kinds = ", ".join(one_line(kind, 80) for kind in named_errors(run))
        parts.append(f"{_plural(run.failed_children, 'failed call')}" +
                     (f" ({kinds})" if kinds else ""))
    text = "; ".join(parts) if parts else "The run needed recovery"
    if run.child_error:
        text += f"\nFirst error: {one_line(run.child_error, 300)}"
    if run.stderr_tail:
        text += f"\n{stderr_heading(run)}:\n" + fence(tail(run.stderr_tail))
    return text


def stderr_heading(run: TaskRun) -> str:
    """What the run's stderr tail is the end of."""
    if run.stderr_is_stacktrace:
        return "End of the failed call's stack trace"
    if run.stderr_is_output:
        return "End of the failed call's output"
    return "Last build stderr tail"


def how_it_was_recovered(run: TaskRun) -> str:
    """What got the run past its errors, as far as the span says: no stock sentence."""
    attempts = run.build_attempts or 0
    after = f"After {_plural(run.escalations, 'escalation')}, " if run.escalations else ""
    # What it was escalated to, so that a lesson's rules say which route got past the error.
    landed = ", ".join(f"{name} {one_line(value, 80)}" for name, value in
                       (("route", run.route), ("model", run.model)) if value)
    end = f" ({landed})." if after and landed else "."
    sentences: list[str] = []
    if attempts > 1:
        passed = f"the build passed on attempt {attempts}{end}"
        sentences.append(after + passed if after else passed.capitalize())
    elif after:
        sentences.append(f"{after}the run succeeded{end}")
    if run.repair_no_files:
        sentences.append("The run succeeded despite a repair attempt that changed no files.")
    if run.failed_children and not sentences:
        sentences.extend(map(got_past, run.recoveries))
        if not sentences:
            sentences.append("The agent went on after the failed call(s), and the run ended "
                             "successfully.")
    return " ".join(sentences) or "The run succeeded after a recovery step."


def called(recovery: Recovery) -> str:
    """What a failed call was made to, as a sentence names it: the tool or the model."""
    name = one_line(recovery.name, 80)
    return f"the {name} tool" if recovery.kind == "tool" else name


def code(text: str, limit: int) -> str:
    """``text`` as inline code of one line, at most ``limit`` characters inside."""
    return "`" + one_line(text, limit).replace("`", "'") + "`"


def given_to(recovery: Recovery) -> str:
    """What the failed call to a tool was given, and the call that succeeded after it."""
    told = (f"The call to {called(recovery)} that failed was given "
            f"{code(recovery.failed_with or '', MAX_ARGUMENTS)}")
    if recovery.succeeded_with == recovery.failed_with:
        told += "; the one that succeeded was given the same"
    elif recovery.succeeded_with:
        told += f"; the one that succeeded, {code(recovery.succeeded_with, MAX_ARGUMENTS)}"
    return told + "."


def got_past(recovery: Recovery) -> str:
    """One sentence on how the run got past a failed call (see :class:`Recovery`)."""
    called_to = called(recovery)
    if recovery.again:
        return f"A call to {called_to} failed; a later one succeeded."
    if recovery.instead:
        return (f"After a call to {called_to} failed, the agent went on with "
                f"{one_line(recovery.instead, 80)}.")
    return f"After a call to {called_to} failed, the agent went on without it."


def render(run: TaskRun, learned: str, related: Sequence[str] = (),
           trace_url: str | None = None) -> Diary:
    """The diary of ``run`` with ``learned`` as its "What was learned" section."""
    ident = diary_id(run.trace_id, run.span_id)
    created, date = utc_stamp(run.end_ns)
    title = one_line(run.title, MAX_TITLE) or "task"
    agent = one_line(run.agent, 200) or "unknown"
    task_id = one_line(run.task_id, 200) or run.span_id_hex
    trace_hex, span_hex = run.trace_id_hex, run.span_id_hex

    tags = [f"outcome:{run.outcome}", f"task:{task_id}", f"agent:{agent}", f"trace:{trace_hex}"]
    if run.trigger:
        tags.append(f"trigger:{one_line(run.trigger, 200)}")
    if run.workflow:
        tags.append(f"workflow:{one_line(run.workflow, 200)}")
    related_ids = tuple(dict.fromkeys(flat for flat in (one_line(r, 200) for r in related)
                                      if flat))

    front: dict[str, Any] = {
        "id": ident,
        "source_type": "diary",
        "title": title,
        "agent": agent,
        "task": task_id,
        "outcome": run.outcome,
        "tags": tags,
        "trace_id": trace_hex,
        "span_id": span_hex,
        "created": created,
    }
    optional: dict[str, Any] = {
        "trigger": run.trigger and one_line(run.trigger, 200),
        "workflow": run.workflow and one_line(run.workflow, 200),
        "route": run.route and one_line(run.route, 200),
        "model": run.model and one_line(run.model, 200),
        "tokens": run.tokens,
        "latency_ms": run.latency_ms,
        "trace_url": trace_url,
    }
    front.update({key: value for key, value in optional.items() if value is not None})
    if related_ids:
        front["related"] = list(related_ids)

    sections = [f"# {title}", "## What was done\n" + what_was_done(run)]
    if trace_url:
        sections[1] += f"\nTrace: <{one_line(trace_url, 2000)}>"
    if run.outcome == "recovered":
        sections.append("## Error encountered\n" + error_encountered(run))
        sections.append("## How it was recovered\n" + how_it_was_recovered(run))
    sections.append("## What was learned\n" + clean(learned).strip())
    related_body = "\n".join(f"- {r}" for r in related_ids) or "_No related documents._"
    sections.append("## Related\n" + related_body)
    body = "\n\n".join(sections) + "\n"

    content = f"---\n{front_matter(front)}---\n\n{body}"
    name = f"{date}-{slug(task_id)}"
    directory = f"{DIARY_ROOT}/{slug(agent)}"
    return Diary(
        id=ident, path=f"{directory}/{name}.md", title=title, agent=agent, task_id=task_id,
        outcome=run.outcome, tags=tuple(tags), trace_id=trace_hex, span_id=span_hex,
        created=created, front_matter=front, body=body, content=content,
        alternate_path=f"{directory}/{name}-{span_hex[:8]}.md", related=related_ids,
    )


_PRINTABLE = re.compile(
    "[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff\U00010000-\U0010ffff]+")
"""One line of characters libyaml writes as they are (with ``allow_unicode``): no control
character, line or paragraph separator, byte-order mark, surrogate, nor a character past
U+FFFF (libyaml escapes those)."""


@functools.cache
def implicit_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """First character -> the patterns of plain scalars that YAML reads back as something
    other than a string (``yes``, ``null``, ``12``, ``1e3``, a date...). PyYAML is loaded
    by the first diary, not by importing otel-diary."""
    from yaml.resolver import Resolver

    return Resolver.yaml_implicit_resolvers


_INDICATORS = frozenset("#,[]{}&*!|>'\"%@` ")
"""First characters that make PyYAML quote a one-line string."""


def _needs_quotes(text: str) -> bool:
    """What makes PyYAML quote a one-line string: an indicator where it starts, ``: ``,
    `` #``, a space at either end (``text`` is not empty)."""
    first = text[0]
    return (first in _INDICATORS
            or (first in "-?:" and (len(text) == 1 or text[1] == " "))
            or text.startswith(("---", "...")) or ": " in text or " #" in text
            or text.endswith((":", " ")))


_QUOTED: dict[str, str] = {}
"""Short strings already written (a lesson writes the same ids each time it is updated):
at most ``_QUOTED_MAX`` of at most ``_QUOTED_CHARS`` characters."""
_QUOTED_MAX = 4096
_QUOTED_CHARS = 64


def _scalar(value: object) -> str | None:
    """``value`` as PyYAML writes a scalar in block context, ``None`` when not sure."""
    if type(value) is str:
        text = _QUOTED.get(value)
        if text is not None:
            return text
        if not value:
            return "''"
        if not (value.isprintable() if value.isascii() else _PRINTABLE.fullmatch(value)):
            return None
        plain = not (_needs_quotes(value) or any(
            pattern.match(value) for _, pattern in implicit_resolvers().get(value[0], ())))
        text = value if plain else "'" + value.replace("'", "''") + "'"
        if len(value) <= _QUOTED_CHARS:
            if len(_QUOTED) >= _QUOTED_MAX:
                _QUOTED.clear()
            _QUOTED[value] = text
        return text
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    return None


def _strings(items: list[object]) -> list[str] | None:
    """The scalars of a list of strings (or numbers), ``None`` when it holds anything else
    or a string this does not write."""
    known = _QUOTED.get
    texts = [(known(item) or _scalar(item)) if type(item) is str else _scalar(item)
             for item in items]
    return None if None in texts else texts  # type: ignore[return-value]


def _emit(mapping: Mapping[str, object], indent: str, first: str, out: list[str]) -> bool:
    """Append the block mapping's lines to ``out`` (its first line starts with ``first``,
    the others with ``indent``); ``False`` when a value is outside what this writes."""
    lead = first
    known = _QUOTED.get
    for key, value in mapping.items():
        # A key past 128 bytes is written "? key" by libyaml: past 32 characters, PyYAML.
        if type(key) is not str or len(key) > 32 or (known(key) != key and _scalar(key) != key):
            return False
        if isinstance(value, list):
            if not value:
                out.append(f"{lead}{key}: []\n")
                lead = indent
                continue
            out.append(f"{lead}{key}:\n")
            texts = _strings(value)
            if texts is not None:  # ids, lines: one append for the list
                dash = f"{indent}- "
                out.append(dash + f"\n{dash}".join(texts) + "\n")
                lead = indent
                continue
            for item in value:
                if isinstance(item, dict):
                    if not item:
                        out.append(f"{indent}- {{}}\n")
                    elif not _emit(item, indent + "  ", indent + "- ", out):
                        return False
                    continue
                text = _scalar(item)
                if text is None:
                    return False
                out.append(f"{indent}- {text}\n")
        else:
            text = _scalar(value)
            if text is None:
                return False
            out.append(f"{lead}{key}: {text}\n")
        lead = indent
    return bool(mapping)


def front_matter(mapping: Mapping[str, object]) -> str:
    """``mapping`` in YAML, byte for byte as ``yaml.dump`` writes it (block style, keys in
    order, unicode as is, no line folding). The common values (strings, integers, lists of
    them, lists of such mappings) are written here, much faster than PyYAML's representer;
    anything else goes to PyYAML."""
    out: list[str] = []
    if _emit(mapping, "", "", out):
        return "".join(out)
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # PyYAML without libyaml: none
    return yaml.dump(dict(mapping), Dumper=dumper, sort_keys=False, allow_unicode=True,
                     width=2**31 - 1, default_flow_style=False)


def split_front_matter(content: str) -> tuple[str, str]:
    """A document's front matter text and its markdown body (all of ``content`` when it
    has no front matter)."""
    end = content.find("\n---\n", 3) if content.startswith("---\n") else -1
    if end < 0:
        return "", content
    return content[4:end], content[end + 5:].lstrip("\n")


def parse_front_matter(content: str) -> dict[str, Any]:
    """The front matter of a diary document (for tests, the index and reindexing);
    ``ValueError`` when there is none or it is not a YAML mapping."""
    if not content.startswith("---\n"):
        raise ValueError("document has no front matter")
    end = content.find("\n---\n", 3)
    if end < 0:
        raise ValueError("front matter is not closed")
    import yaml

    try:
        loaded = yaml.load(content[4:end + 1],
                           Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:  # what and where, not the text around it: it may be secret
        problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"front matter is not YAML: {one_line(str(problem), 100)}{where}"
                         if problem else "front matter is not YAML") from None
    if not isinstance(loaded, dict):
        raise ValueError("front matter is not a mapping")
    _plain_keys(loaded, 2 * end + 16)
    return loaded


_NESTED = (dict, list, tuple)  # tuples: !!omap and !!pairs give lists of them


def _plain_keys(front: dict[Any, Any], budget: int) -> None:
    """Turn the keys of ``front``'s mappings, at any depth, into strings (YAML reads
    ``2026-01-01:`` as a date, ``1:`` as a number, which JSON takes no key of), walking at
    most ``budget`` values and characters of strings, counted each time they are reached;
    ``ValueError`` past it. Aliases share one value: without a budget a few hundred bytes
    of them nest into billions of values (or into themselves), and one long string named
    a thousand times is a thousand strings for whoever walks, redacts or writes them out,
    while a text's own values and characters are fewer than its characters."""
    stack: list[dict[Any, Any] | list[Any] | tuple[Any, ...]] = [front]
    while stack:
        value = stack.pop()
        budget -= len(value) + 1 + sum(len(item) for item in (
            value.values() if type(value) is dict else value) if type(item) is str)
        if budget < 0:
            raise ValueError("front matter holds more values than its text (YAML aliases)")
        if type(value) is dict:
            if not all(type(key) is str for key in value):
                items = list(value.items())
                value.clear()
                value.update((key if type(key) is str else str(key), item)
                             for key, item in items)
            stack.extend([item for item in value.values() if type(item) in _NESTED])
        else:
            stack.extend([item for item in value if type(item) in _NESTED])
