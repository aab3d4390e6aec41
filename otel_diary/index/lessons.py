"""Lessons: one document per error signature, grown from every diary that met the error.

``<root>/diaries/lessons/<signature-slug>.md`` holds its whole state in its front matter
(counts, agents, evidence ids, voted rules, the newest diaries), so a lesson is updated
from its own file and rebuilt from the diaries (``reindex``). Each update holds an
exclusive lock on ``<slug>.lock`` beside it and replaces the file by an atomic rename:
processes sharing one folder lose no run. Every list is bounded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from otel_diary.counters import Counters, LogOnce
from otel_diary.errors import UnsafePathError
from otel_diary.index.documents import (
    Entry,
    primary_signature,
    section_signatures,
    sections,
)
from otel_diary.index.rules import (
    MAX_RULE_CHARS,
    MAX_RULES,
    Rule,
    apply_operations,
    tally,
)
from otel_diary.index.templates import first_error_line, stderr_block
from otel_diary.pipeline import DIARY_ROOT, KB_FOLDER, LESSON_ROOT
from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.redact import redact
from otel_diary.pipeline.render import (
    Diary,
    code,
    front_matter,
    parse_front_matter,
    slug,
    split_front_matter,
)
from otel_diary.sinks.base import atomic_write
from otel_diary.sinks.folder import relative_location
from otel_diary.text import (
    NOFOLLOW,
    inside,
    knowledge_files,
    one_line,
    read_text,
    sha256_hex,
)

_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: updates within one process only
    fcntl = None  # type: ignore[assignment]

MAX_EVIDENCE = 200
"""Most diary ids a lesson lists as evidence (the newest kept; ``runs`` counts all)."""
MAX_SEEN = 5
"""Distinct first error lines kept, as they were seen."""
MAX_LINE = 300
"""Longest error line a lesson keeps, in characters."""
MAX_NEWEST = 5
NEWEST_KEYS = ("id", "title", "created", "path", "learned")
"""What a lesson keeps of each of its newest diaries, in the order its file lists them."""
MAX_AGENTS = 20
MAX_CACHED = 256
"""Lessons a process keeps parsed in memory."""
logger = logging.getLogger("otel_diary")

Reviser = Callable[[Sequence[str], TaskRun], Sequence[tuple[str, str, str]]]
"""Given a lesson's rules and a new run, the rule operations to apply (a model's)."""
Publisher = Callable[[str, str, str, str], object]
"""Sends a lesson elsewhere: ``(id, path, content, title)`` (the hub sink's ``write_lesson``)."""


def lesson_id(signature: str) -> str:
    """The stable id of the lesson for ``signature``."""
    return "kh-" + sha256_hex(f"lesson:{signature}")[:20]


def lesson_slug(signature: str) -> str:
    """The file name (without ``.md``) of the lesson for ``signature``: readable, unique."""
    kind, _, rest = signature.partition(":")
    readable = slug(f"{kind}-{rest}")[:60].rstrip("-._")
    if kind in ("code", "exception") and readable == slug(f"{kind}-{rest}"):
        return readable
    return f"{readable}-{sha256_hex(signature)[:8]}"


def lesson_path(signature: str) -> str:
    """Where the lesson for ``signature`` is, relative to the root."""
    return f"{LESSON_ROOT}/{lesson_slug(signature)}.md"


@dataclass(frozen=True)
class Sighting:
    """What one diary tells its lesson."""

    id: str
    path: str
    title: str
    agent: str
    created: str
    recovered: bool
    error_line: str
    recovery: str
    learned: str


Held = tuple[Sighting, tuple[tuple[str, str, str], ...]]
"""A sighting kept for a lesson until its batch is released, with its rule operations."""


def sighting(path: str, front: Mapping[str, Any], content: str,
             redactor: Callable[[str], str] | None = None) -> tuple[str, Sighting] | None:
    """The lesson signature of a diary and what it tells the lesson; ``None`` when the
    diary met no recognisable error. A rebuild and an import pass a ``redactor``: an
    older otel-diary, or another tool, may have left a key in the diary they read."""
    clean = redactor or str
    body = split_front_matter(content)[1]
    parts = sections(body)
    error = parts.get("Error encountered", "")
    signature = primary_signature(section_signatures(error))
    if signature is None:
        return None
    created = front.get("created")
    return signature, Sighting(
        id=one_line(str(front.get("id", "")), 100), path=path,
        title=one_line(clean(str(front.get("title", ""))), 200),
        agent=one_line(str(front.get("agent", "")), 200),
        created=one_line(str(created if created is not None else ""), 40),
        recovered=front.get("outcome") == "recovered",
        error_line=one_line(clean(first_error_line(stderr_block(error) or error)), MAX_LINE),
        recovery=one_line(clean(parts.get("How it was recovered", "")), MAX_RULE_CHARS),
        learned=one_line(clean(parts.get("What was learned", "")), 400),
    )


def entry_diary(entry: Entry) -> tuple[str, Mapping[str, Any], str]:
    """What :func:`sighting` reads of a diary (path, front matter, text), from its index
    entry: a rebuild reads the folder once. (An unquoted date in a hand-edited front
    matter reads in ISO form here, as the index keeps it.)"""
    return entry.path, {"id": entry.id, "title": entry.title, "agent": entry.agent,
                        "created": entry.created, "outcome": entry.outcome}, entry.body


@dataclass
class Lesson:
    """The state of one lesson, as its front matter keeps it."""

    signature: str
    runs: int = 0
    recovered: int = 0
    first_seen: str = ""
    last_seen: str = ""
    agents: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    newest: list[dict[str, str]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return lesson_id(self.signature)

    def copy(self) -> Lesson:
        """A copy that shares nothing mutable with this one."""
        return replace(self, agents=list(self.agents), evidence=list(self.evidence),
                       seen=list(self.seen),
                       rules=[Rule(r.text, r.votes, list(r.evidence)) for r in self.rules],
                       newest=[dict(item) for item in self.newest])

    def add(self, seen: Sighting) -> bool:
        """Count one diary in; ``False`` (nothing changes) when it is already counted."""
        if seen.id in self.evidence:
            return False
        self.runs += 1
        self.recovered += seen.recovered
        self.first_seen = min(filter(None, (self.first_seen, seen.created)), default="")
        self.last_seen = max(self.last_seen, seen.created)
        if seen.agent and seen.agent not in self.agents:
            self.agents = [*self.agents, seen.agent][-MAX_AGENTS:]
        self.evidence = [*self.evidence, seen.id][-MAX_EVIDENCE:]
        if seen.error_line and seen.error_line not in self.seen and len(self.seen) < MAX_SEEN:
            self.seen.append(seen.error_line)
        if seen.recovery:
            tally(self.rules, seen.recovery, seen.id)
            self.rank_rules()  # after each vote, as each update writes them
        newest = [{"id": seen.id, "title": seen.title, "created": seen.created,
                   "path": seen.path, "learned": seen.learned}, *self.newest]
        newest.sort(key=lambda item: item.get("created", ""), reverse=True)  # then cut:
        self.newest = newest[:MAX_NEWEST]  # one counted late is not among the newest
        return True

    def rank_rules(self) -> None:
        """Most voted first (ties keep their order): the order the file keeps them in."""
        self.rules.sort(key=lambda rule: -rule.votes)

    def as_document(self) -> str:
        """The lesson file: front matter with its whole state, then a readable body."""
        self.rank_rules()
        title = f"Lesson: {one_line(self.signature, 180)}"
        front: dict[str, Any] = {
            "id": self.id, "source_type": "lesson", "title": title,
            "signature": self.signature, "runs": self.runs, "recovered": self.recovered,
            "first_seen": self.first_seen, "last_seen": self.last_seen,
            "updated": self.last_seen, "agents": self.agents, "evidence": self.evidence,
            "seen": self.seen,
            "rules": [{"text": r.text, "votes": r.votes, "evidence": r.evidence}
                      for r in self.rules],
            "newest": [{key: item[key] for key in NEWEST_KEYS if key in item} | item
                       for item in self.newest],  # one order, whatever kept the state
        }
        lines = [f"# {title}", "",
                 f"Met in {self.runs} run(s) by {len(self.agents)} agent(s), "
                 f"{self.recovered} recovered; first {self.first_seen or '?'}, "
                 f"last {self.last_seen or '?'}.", "", "## The error as seen"]
        lines += [f"- {code(line, MAX_LINE)}" for line in self.seen] or ["- (no line)"]
        lines += ["", "## What worked"]
        lines += [f"- {rule.text} ({rule.votes} vote(s); {', '.join(rule.evidence[-5:])})"
                  for rule in self.rules] or ["_Nothing recorded yet._"]
        lines += ["", "## Newest diaries"]
        for item in self.newest:
            lines.append(f"- {item.get('id', '')} ({item.get('created', '')[:10]}) "
                         f"{item.get('title', '')}: {item.get('path', '')}")
            if item.get("learned"):
                lines.append(f"  {item['learned']}")
        return f"---\n{front_matter(front)}---\n\n" + "\n".join(lines) + "\n"


def lesson_from_document(content: str) -> Lesson:
    """The state of a lesson from its file; ``ValueError`` when it is not a lesson."""
    front = parse_front_matter(content)
    signature = front.get("signature")
    if front.get("source_type") != "lesson" or not isinstance(signature, str):
        raise ValueError("not a lesson")

    def strings(key: str, limit: int) -> list[str]:
        value = front.get(key)
        return [str(item) for item in value][-limit:] if isinstance(value, list) else []

    def number(key: str) -> int:
        value = front.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    rules: list[Rule] = []
    for item in front.get("rules") or []:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            votes = item.get("votes")
            rules.append(Rule(item["text"], votes if isinstance(votes, int) else 1,
                              [str(e) for e in item.get("evidence") or []]))
    newest = [{str(k): str(v) for k, v in item.items()} for item in front.get("newest") or []
              if isinstance(item, dict)]
    return Lesson(signature=signature, runs=number("runs"), recovered=number("recovered"),
                  first_seen=str(front.get("first_seen") or ""),
                  last_seen=str(front.get("last_seen") or ""),
                  agents=strings("agents", MAX_AGENTS),
                  evidence=strings("evidence", MAX_EVIDENCE), seen=strings("seen", MAX_SEEN),
                  rules=rules[:MAX_RULES], newest=newest[:MAX_NEWEST])


class LessonBook:
    """The lessons under ``<root>/diaries/lessons``; safe for threads and processes.

    Usage::

        book = LessonBook(root)
        lesson = book.add(signature, sighting)   # locked read, update, atomic replace
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.folder = self.root / LESSON_ROOT
        self._cache: dict[str, tuple[str, Lesson]] = {}
        """Signature -> (file text, state): the lessons this process last read or wrote,
        so that a file unchanged since is not parsed again."""
        self._cache_lock = threading.Lock()
        self._local = threading.local()
        """``held``: this thread's sightings kept for :meth:`release`, by signature."""
        self._base = (self.root / KB_FOLDER).resolve()
        """The knowledge base's folder: lessons stay in it."""
        self._checked = False
        """The lessons' folder was found where it belongs once (then: not a link)."""

    def path(self, signature: str) -> Path:
        return self.root / lesson_path(signature)

    def _folder_ok(self) -> bool:
        """Whether the lessons folder is where it belongs, not a symbolic link leading
        elsewhere: a link planted in a shared folder must not make this read, create or
        touch files outside it."""
        if os.path.islink(self.folder) or (
                not self._checked and self.folder.resolve() != self._base / "lessons"):
            return False
        self._checked = True
        return True

    def _text(self, signature: str) -> str:
        """The lesson's file; ``OSError`` also for a link, or a folder out of place."""
        if not self._folder_ok():
            raise OSError(f"the lessons folder {self.folder} leads out of the knowledge base")
        return read_text(self.path(signature), follow=False, within=self._base)

    def lists_others(self, signature: str, ident: str) -> bool:
        """True when the lesson for ``signature`` counts a run other than diary ``ident``
        (cheap: the file is parsed only when it names ``ident``)."""
        held: dict[str, list[Held]] | None = getattr(self._local, "held", None)
        if held and any(seen.id != ident for seen, _ in held.get(signature, ())):
            return True
        try:
            text = self._text(signature)
        except OSError:
            return False
        if ident not in text:
            return "source_type: lesson" in text
        return any(other != ident for other in self.read(signature).evidence)

    def read(self, signature: str) -> Lesson:
        """The lesson for ``signature`` as its file says (a new one when there is none
        or the file is not a lesson)."""
        try:
            text = self._text(signature)
        except OSError:  # none, or a symbolic link (replaced when the lesson is written)
            return Lesson(signature)
        with self._cache_lock:
            cached = self._cache.get(signature)
        if cached is not None and cached[0] == text:
            return cached[1].copy()
        try:
            lesson = lesson_from_document(text)
        except (ValueError, TypeError, AttributeError):
            return Lesson(signature)
        if lesson.signature != signature:
            return Lesson(signature)
        self._remember(signature, text, lesson)
        return lesson.copy()

    def _remember(self, signature: str, text: str, lesson: Lesson) -> None:
        with self._cache_lock:
            self._cache.pop(signature, None)
            self._cache[signature] = (text, lesson.copy())
            while len(self._cache) > MAX_CACHED:
                del self._cache[next(iter(self._cache))]

    def all(self) -> list[Lesson]:
        """Every lesson in the folder, the most recently met first."""
        found: list[Lesson] = []
        for file in knowledge_files(self.folder, self._base, recursive=False):
            try:
                found.append(lesson_from_document(read_text(file, within=self._base)))
            except (OSError, ValueError, TypeError, AttributeError):
                continue
        found.sort(key=lambda lesson: lesson.last_seen, reverse=True)
        return found

    @contextlib.contextmanager
    def locked(self, signature: str) -> Iterator[None]:
        """Hold the lesson's lock (one writer at a time, across processes); never through a
        symbolic link, nor in a folder that is not where it belongs (``UnsafePathError``)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self._folder_ok():
            raise UnsafePathError(f"the lessons folder {self.folder} leads out of "
                                  "the knowledge base")
        lock = self.folder / f".{lesson_slug(signature)}.lock"
        if os.path.islink(lock):  # one planted after this look: O_NOFOLLOW refuses it
            raise UnsafePathError(f"the lock {lock} is a symbolic link")
        fd = os.open(lock, _LOCK_FLAGS, 0o666)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed
            yield
        finally:
            os.close(fd)

    def add(self, signature: str, seen: Sighting,
            operations: Sequence[tuple[str, str, str]] = ()) -> Lesson:
        """Count ``seen`` into the lesson for ``signature`` and apply the rule
        ``operations`` (``(op, old rule text, new text)``); the lesson as written."""
        return self._count(signature, [(seen, tuple(operations))])

    def hold(self) -> None:
        """Until :meth:`release`, this thread may :meth:`keep` sightings; each lesson is
        then read, updated and written once for all of them (the same bytes as one
        update each). :meth:`lists_others` counts them meanwhile."""
        self._local.held = {}

    def keep(self, signature: str, seen: Sighting,
             operations: Sequence[tuple[str, str, str]] = ()) -> bool:
        """:meth:`add` at :meth:`release`: ``False`` (nothing kept) when this thread does
        not hold its sightings."""
        held: dict[str, list[Held]] | None = getattr(self._local, "held", None)
        if held is None:
            return False
        held.setdefault(signature, []).append((seen, tuple(operations)))
        return True

    def release(self) -> tuple[list[Lesson], list[Exception]]:
        """Count in the sightings held since :meth:`hold`: the lessons as written, and
        why others could not be (every lesson is tried)."""
        held: dict[str, list[Held]] | None = getattr(self._local, "held", None)
        self._local.held = None
        written: list[Lesson] = []
        failures: list[Exception] = []
        for signature, sightings in (held or {}).items():
            try:
                written.append(self._count(signature, sightings))
            except Exception as exc:
                failures.append(exc)
        return written, failures

    def _count(self, signature: str, sightings: Sequence[Held]) -> Lesson:
        with self.locked(signature):
            lesson = self.read(signature)
            changed = False
            for seen, operations in sightings:
                if lesson.add(seen):
                    apply_operations(lesson.rules, operations, seen.id)
                    lesson.rank_rules()  # as writing it does
                    changed = True
            if changed:
                self.write(lesson)
            return lesson

    def write(self, lesson: Lesson) -> Path:
        """Replace the lesson's file atomically (callers hold its lock)."""
        target = self.path(lesson.signature)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = lesson.as_document()
        atomic_write(target, text.encode("utf-8"))
        self._remember(lesson.signature, text, lesson)
        return target

    def rebuild(self, diaries: Sequence[tuple[str, Mapping[str, Any], str]]) -> int:
        """Replace every lesson with what ``diaries`` (path, front matter, text) say,
        oldest first; how many lessons there are now. Diaries the app writes meanwhile are
        kept (found among a lesson's newest). Rules a model voted are lost: the diaries
        keep no record of them."""
        gathered: dict[str, Lesson] = {}
        ordered = sorted(diaries, key=lambda item: (str(item[1].get("created", "")), item[0]))
        for path, front, content in ordered:
            found = sighting(path, front, content, redact)
            if found is not None:
                signature, seen = found
                gathered.setdefault(signature, Lesson(signature)).add(seen)
        kept = {self.path(signature).name for signature in gathered}
        for signature, lesson in gathered.items():
            with self.locked(signature):
                self._catch_up(lesson, self.read(signature))
                self.write(lesson)
        for file in knowledge_files(self.folder, self._base, recursive=False):
            if file.name in kept:
                continue
            try:
                stale = lesson_from_document(read_text(file, within=self._base))
            except (OSError, ValueError, TypeError, AttributeError):
                continue  # not a lesson: someone's own notes
            with self.locked(stale.signature):
                fresh = Lesson(stale.signature)
                if self._catch_up(fresh, self.read(stale.signature)):
                    self.write(fresh)
                    kept.add(file.name)
                else:
                    with contextlib.suppress(OSError):
                        file.unlink()
        return len(kept)

    def _catch_up(self, lesson: Lesson, current: Lesson) -> bool:
        """Count into ``lesson`` the diaries ``current`` (the file now) lists among its
        newest that still exist but ``lesson`` lacks: written while a rebuild scanned."""
        added = False
        for item in reversed(current.newest):
            ident, path = item.get("id", ""), item.get("path", "")
            if not ident or ident in lesson.evidence or not path.startswith(DIARY_ROOT + "/"):
                continue
            try:
                if not inside(self.root / path, self._base):
                    continue  # "diaries/agents/../../x", or a link leading out
                content = read_text(self.root / path, within=self._base)
                found = sighting(path, parse_front_matter(content), content, redact)
            except (OSError, ValueError, TypeError):
                continue
            if found is not None and found[0] == lesson.signature:
                added = lesson.add(found[1]) or added
        return added


class LessonListener:
    """A pipeline listener: counts each diary into its error's lesson. Never raises.

    With a ``reviser`` (the reflection model) the lesson's rules are revised first, out
    of the lock; with a ``publisher`` (the hub) the updated lesson is sent on.
    """

    def __init__(self, book: LessonBook, *, reviser: Reviser | None = None,
                 publisher: Publisher | None = None, stats: Counters | None = None) -> None:
        self.book = book
        self.reviser = reviser
        self.publisher = publisher
        self._stats = stats
        self._log_once = LogOnce()
        self._root = str(book.root.resolve())

    def _path(self, diary: Diary, locations: Sequence[str]) -> str:
        for location in locations:
            relative = relative_location(self._root, location)
            if relative is not None:
                return relative
        return diary.path

    def __call__(self, diary: Diary, run: TaskRun, locations: Sequence[str]) -> None:
        try:
            found = sighting(self._path(diary, locations), diary.front_matter, diary.content)
            if found is None:
                return
            signature, seen = found
            operations: Sequence[tuple[str, str, str]] = ()
            if self.reviser is not None:
                current = self.book.read(signature)
                if seen.id not in current.evidence:
                    try:
                        operations = self.reviser([rule.text for rule in current.rules], run)
                    except Exception:
                        self._log_once("revise", "otel-diary could not revise lesson %s",
                                       current.id)
            if self.book.keep(signature, seen, operations):
                return
            lesson = self.book.add(signature, seen, operations)
        except Exception:
            if self._stats is not None:
                self._stats.add("index_errors")
            self._log_once("lesson", "otel-diary could not update the lesson of diary %s; "
                           "`otel-diary reindex` rebuilds lessons", diary.id)
            return
        self._publish(lesson)

    def hold(self) -> None:
        if self.reviser is None:  # a reviser reads each lesson as the previous run left it
            self.book.hold()

    def release(self) -> None:
        lessons, failures = self.book.release()
        for lesson in lessons:
            self._publish(lesson)
        if failures:
            if self._stats is not None:
                self._stats.add("index_errors", amount=len(failures))
            self._log_once("lesson", "otel-diary could not update %d lesson(s) of a batch "
                           "of diaries; `otel-diary reindex` rebuilds lessons",
                           len(failures), exc=failures[0])

    def _publish(self, lesson: Lesson) -> None:
        if self.publisher is not None:
            try:
                self.publisher(lesson.id, lesson_path(lesson.signature), lesson.as_document(),
                               f"Lesson: {one_line(lesson.signature, 180)}")
            except Exception:
                self._log_once("publish", "otel-diary could not queue lesson %s for the hub",
                               lesson.id)
