"""Search queries: what a person types -> FTS5 terms that can never be a syntax error,
and the ranked hits a search returns."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from otel_diary.pipeline import DIARY_ROOT
from otel_diary.pipeline.render import slug

logger = logging.getLogger("otel_diary")

MAX_QUERY_TERMS = 32

Match = Literal["all", "any", "recent"]
"""How a search matched: every word, any word (when no diary had every word), or no words
to match (the newest diaries)."""


# -- queries -------------------------------------------------------------------------------

_QUERY_PART = re.compile(r'"([^"]*)"?|([^\s"]+)')
_WORD = re.compile(r"\w+")
_SEPARATORS = re.compile(r"[()\[\]{}<>,;!?'`]+")
_HAS_ALNUM = re.compile(r"[^\W_]")
QUERY_ERRORS = ("fts5", "syntax error", "no such column", "unterminated", "special query")


def _quoted(words: Sequence[str]) -> str:
    return '"' + " ".join(words) + '"'


def fts_terms(query: str) -> list[str]:
    """``query`` as FTS5 terms that can never be a syntax error.

    Words are matched as words; ``"a phrase"`` as a phrase; ``word*`` as a prefix. FTS5
    operators (``AND``, ``OR``, ``NOT``, ``NEAR``, ``:``, ``^``, parentheses) are plain text.
    """
    terms: list[str] = []
    for match in _QUERY_PART.finditer(query):
        phrase, bare = match.group(1), match.group(2)
        # Inside a bare token, words joined by "." "/" ":" "-" stay a phrase (a file, a
        # test id); brackets and sentence punctuation separate words.
        pieces = [phrase] if phrase is not None else _SEPARATORS.split(bare)
        for piece in pieces:
            words = [w for w in _WORD.findall(piece) if _HAS_ALNUM.search(w)]
            if not words:
                continue
            term = _quoted(words)
            if phrase is None and len(words) == 1 and piece.endswith("*"):
                term += "*"
            if term not in terms:
                terms.append(term)
            if len(terms) >= MAX_QUERY_TERMS:
                return terms
    return terms


STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did", "do",
    "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it",
    "its", "me", "my", "of", "on", "or", "our", "should", "so", "that", "the", "their", "then",
    "there", "these", "this", "to", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "why", "will", "with", "would", "you", "your"
})
"""Words that say nothing alone: a search for some of a question's words leaves them out."""


def any_terms(terms: Sequence[str]) -> list[str]:
    """``terms`` for a search matching any of them: the stop words left out (single words
    only, not in a phrase), unless nothing else remains. In a small knowledge base a stop
    word can be rare enough to outrank the words that say what was asked."""
    kept = [term for term in terms if term.strip('"').lower() not in STOP_WORDS]
    return kept or list(terms)


# -- filters -------------------------------------------------------------------------------

def agent_folder(agent: str) -> str:
    """The ``LIKE`` pattern (escaped with a backslash) of the files in the folder the diaries of
    ``agent`` are written to: ``--agent coder-bot`` finds the diaries of "Coder Bot", in
    ``diaries/agents/Coder-Bot/``, as a person reading the folders would type it. A filter
    on an agent matches its name or its folder, in any case."""
    folder = slug(agent).replace("_", r"\_")
    return f"{DIARY_ROOT}/{folder}/%"


@dataclass(frozen=True)
class Hit:
    """One indexed diary, with its rank and a snippet when it came from a search."""

    id: str
    path: str
    title: str
    agent: str
    task: str
    outcome: str
    trigger: str | None
    created: str
    trace_id: str
    span_id: str
    summary: str
    score: float = 0.0
    snippet: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


@dataclass(frozen=True)
class SearchResult:
    """Ranked hits, best first, and how the query matched them."""

    hits: list[Hit]
    match: Match
    terms: tuple[str, ...] = ()


