"""The digest ``otel-diary context`` prints at an agent's session start.

Given the task in hand and, when there is one, the error being faced, a few lines of
markdown naming the most relevant lessons and diaries (ids and paths), or nothing at all
when the knowledge base holds nothing relevant. Only the knowledge base's answers are used:
lessons and diaries sharing the error's signatures, then diaries matching the task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from otel_diary.index.query import STOP_WORDS
from otel_diary.readers.knowledge import MAX_ERROR_CHARS, MAX_QUERY_CHARS, Found, KnowledgeBase

DEFAULT_LIMIT = 5
DEFAULT_MAX_CHARS = 2_000
_WORD = re.compile(r"[^\W_]{3,}")
_HEADING = re.compile(r"(?:^|\s)#{1,6}\s")
_COMMON = STOP_WORDS | frozenset({
    "add", "all", "also", "any", "been", "being", "fix", "here", "just", "make", "may",
    "might", "must", "new", "not", "onto", "please", "run", "shall", "task", "than",
    "those", "use", "very",
})
"""Words that say nothing of a task: the stop words, and what every task asks for."""


def _words(text: str) -> list[str]:
    """The words of ``text`` that say something (three letters or more, not common ones)."""
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(text)
                              if word.lower() not in _COMMON))


def _stem(word: str) -> str:
    return word[:5]


def _covers(found: Found, words: list[str]) -> bool:
    """True when at least half of ``words`` (roughly stemmed) occur in the document's title,
    task, or snippet: a diary matching one word of ten is not worth a reader's time."""
    have = {_stem(word) for word in _words(f"{found.title} {found.task} {found.snippet}")}
    shared = sum(1 for word in words if _stem(word) in have)
    return shared * 2 >= len(words)


def relevant(kb: KnowledgeBase, *, task: str = "", error: str = "", agent: str | None = None,
             limit: int = DEFAULT_LIMIT) -> tuple[list[str], list[Found]]:
    """The error's signatures and the documents worth showing, best first."""
    signatures: list[str] = []
    chosen: dict[str, Found] = {}
    error = error[-MAX_ERROR_CHARS:]
    if error.strip():
        answer = kb.lessons(error, limit=limit)
        signatures = answer.signatures
        for found in answer.results:
            chosen.setdefault(found.id, found)
    words = _words(task)[:32]
    if words and len(chosen) < limit:
        query = " ".join(words)[:MAX_QUERY_CHARS]
        answer_ = kb.search(query, agent=agent, limit=limit)
        kept = {found.id for found in answer_.results
                if answer_.match == "all" or _covers(found, words)}
        for found in answer_.results:  # a lesson listed for a diary kept is kept with it
            if found.id in kept or not kept.isdisjoint(found.matched):
                chosen.setdefault(found.id, found)
    return signatures, list(chosen.values())[:limit]


def _entry(found: Found, root: Path) -> str:
    if found.kind == "lesson":
        head = f"- **Lesson** `{found.id}`: {found.title}"
    else:
        what = ", ".join(part for part in (found.outcome, found.created[:10], found.agent,
                                           found.task) if part)
        head = f"- `{found.id}` ({what}): {found.title}"
    lines = [head, f"  {root / found.path}"]
    learned = found.learned.strip()
    if learned:  # what was learned says more than where the words matched
        label = "What worked" if found.kind == "lesson" else "Learned"
        lines.append(f"  {label}: {learned[:300]}")
    else:
        snippet = _HEADING.sub(" ", found.snippet).strip()
        if snippet:
            lines.append(f"  {snippet[:300]}")
    return "\n".join(lines)


def digest(root: Path, signatures: Iterable[str], found: list[Found],
           max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The markdown digest: a heading, the signatures, one entry per document while they
    fit in ``max_chars`` (one that does not fit whole without what it learned, else without
    its path too); empty when there is nothing to show. When not even one fits, the closing
    hint goes first."""
    if not found:
        return ""
    head = ["## Earlier runs (otel-diary knowledge base)"]
    shown = ", ".join(f"`{signature}`" for signature in signatures)
    if shown:
        head.append(f"Error signatures: {shown}")
    foot = "Read one in full with `otel-diary show --id <id>` or the kb_fetch tool."
    for budget, end in ((max_chars - len(foot) - 3, f"\n\n{foot}\n"), (max_chars - 1, "\n")):
        text = "\n".join(head)
        entries = 0
        for one in found:
            lines = _entry(one, root).split("\n")  # its title, path, what it learned
            entry = next((shorter for shorter in ("\n".join(lines[:n]) for n in (3, 2, 1))
                          if len(text) + 1 + len(shorter) <= budget), None)
            if entry is None:
                break
            text += "\n" + entry
            entries += 1
        if entries:
            return text + end
    return ""
