"""A redaction rule: a family of secrets, the regular expression that finds them, and the
literals every match holds."""

from __future__ import annotations

import re
from dataclasses import dataclass

from otel_diary.pipeline.keys import MARK


class _Compiled:
    """A rule's ``pattern``: compiled on first use and kept on the rule. With no lock:
    ``functools.cached_property`` holds one lock for every rule while it compiles one (up
    to Python 3.11), and a process forked meanwhile (a server's workers) could never
    compile a rule. Two threads may compile the same rule twice; each gets the same."""

    def __get__(self, rule: Rule, owner: object = None) -> re.Pattern[str]:
        pattern = rule.__dict__["pattern"] = re.compile(rule.expression)
        return pattern


@dataclass(frozen=True)
class Rule:
    """One family of secrets and how to find it."""

    kind: str
    expression: str
    """The regular expression, compiled on first use: most texts hold none of the needles
    of most rules, and a process that redacts little compiles little."""
    needles: tuple[str, ...] = ()
    """Literals every match holds (lower-case when ``anchored``, where every match starts
    with one): a text holding none of them is not scanned."""
    keep_prefix: bool = False
    """Group 1 is context (``Bearer ``, ``://user:``) kept in front of the marker."""
    anchored: bool = False
    """Case-insensitive: tried only where a needle starts in the lower-cased text."""

    pattern = _Compiled()

    def fits(self, text: str, position: int) -> bool:
        """Whether a match may start at ``position`` of ``text``, by what comes before it
        (which a pattern cannot look back over when its length varies)."""
        return True

    def replace(self, match: re.Match[str]) -> str:
        mark = MARK.format(kind=self.kind)
        if self.keep_prefix:
            return match.group(1) + mark
        if "secret" in self.pattern.groupindex:
            start, end = match.span("secret")
            if start >= 0:
                offset = match.start()
                whole = match.group(0)
                return whole[: start - offset] + mark + whole[end - offset:]
        return mark
