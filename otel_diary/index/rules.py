"""A lesson's rules: what worked against its error, voted for by the runs that met it.

A run votes for the rule its diary's "How it was recovered" states. Runs that got past
the error the same way vote for one rule whatever their figures, and the rule keeps the
range each figure was seen in: "After 2 escalation(s), the build passed on attempt 3" and
"After 1 escalation(s), the build passed on attempt 2" make "After 1-2 escalation(s), the
build passed on attempt 2-3". A number inside a name (gpt-4o, llama3.1-8b) is no figure.
A model's rule operations (``ADD``, ``AGREE``, ``EDIT``, ``REMOVE``) apply to the same list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from otel_diary.text import clean, one_line

MAX_RULES = 10
MAX_RULE_CHARS = 300
MAX_RULE_EVIDENCE = 20
_FIGURE = re.compile(r"(?<![\w.-])(\d{1,30})(?:-(\d{1,30}))?(?!\w|[.-]\w)")
"""A count or a range of counts (``3``, ``1-2``), not the digits of a name or a version."""


@dataclass
class Rule:
    """One thing that worked, with how many runs voted for it and which."""

    text: str
    votes: int = 1
    evidence: list[str] = field(default_factory=list)


@functools.lru_cache(maxsize=1024)  # a lesson's rules are compared with every new run
def figure_key(text: str) -> str:
    """``text`` with each figure or range of figures as ``N``: what runs vote on."""
    return _FIGURE.sub("N", text)


def widen(kept: str, seen: str) -> str:
    """``kept`` with the range of each figure widened to take in ``seen``'s figure in the
    same place; ``kept`` unchanged when their figures do not line up."""
    figures = _FIGURE.findall(seen)
    parts = _FIGURE.split(kept)  # text, then (low, high or None, text) for each figure
    if 3 * len(figures) + 1 != len(parts):
        return kept
    out = [parts[0]]
    for place, (low, high) in enumerate(figures):
        was_low, was_high = parts[3 * place + 1], parts[3 * place + 2]
        low_n = min(int(low), int(was_low))
        high_n = max(int(high or low), int(was_high or was_low))
        out += (str(low_n) if low_n == high_n else f"{low_n}-{high_n}", parts[3 * place + 3])
    return "".join(out)


def vote(rules: list[Rule], text: str, evidence: str, *, votes: int = 1) -> None:
    """One more vote for the rule ``text`` (added when new, while there is room)."""
    text = one_line(clean(text), MAX_RULE_CHARS)
    if not text:
        return
    for rule in rules:
        if rule.text == text:
            rule.votes += votes
            if evidence not in rule.evidence:
                rule.evidence = [*rule.evidence, evidence][-MAX_RULE_EVIDENCE:]
            return
    if len(rules) >= MAX_RULES:
        weakest = min(rules, key=lambda rule: rule.votes)
        if weakest.votes > 1:
            return
        rules.remove(weakest)
    rules.append(Rule(text, votes, [evidence]))


def tally(rules: list[Rule], recovery: str, evidence: str) -> None:
    """A run's vote for the rule its ``recovery`` states, figures read as ranges."""
    text = one_line(clean(recovery), MAX_RULE_CHARS)
    key = figure_key(text)
    same = next((rule for rule in rules if figure_key(rule.text) == key), None)
    if same is not None:
        wider = widen(same.text, text)
        same.text = wider if len(wider) <= MAX_RULE_CHARS else same.text
        text = same.text
    vote(rules, text, evidence)


def apply_operations(rules: list[Rule], operations: Sequence[tuple[str, str, str]],
                     evidence: str) -> None:
    """ExpeL-style rule operations: ``ADD`` a rule, ``AGREE`` with one (a vote), ``EDIT``
    one (its new text keeps its votes, plus one), ``REMOVE`` one (a vote less; gone at
    zero). An operation names a rule by its text (or, when the rule's figures have widened
    since, by its text's figures as ranges); one naming a rule no longer there is skipped."""
    for op, old, new in operations:
        existing = next((rule for rule in rules if rule.text == old), None) or next(
            (rule for rule in rules if figure_key(rule.text) == figure_key(old)), None)
        if op == "ADD":
            vote(rules, new, evidence)
        elif existing is None:
            continue
        elif op == "AGREE":
            vote(rules, existing.text, evidence)
        elif op == "EDIT" and one_line(new, MAX_RULE_CHARS):
            existing.text = one_line(clean(new), MAX_RULE_CHARS)
            existing.votes += 1
            if evidence not in existing.evidence:
                existing.evidence = [*existing.evidence, evidence][-MAX_RULE_EVIDENCE:]
        elif op == "REMOVE":
            existing.votes -= 1
            if existing.votes <= 0:
                rules.remove(existing)
