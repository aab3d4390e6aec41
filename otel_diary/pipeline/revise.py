"""Lesson rules revised by a language model: current rules + a new run -> rule operations.

One short call per new diary on the reflector's client and budget (ExpeL-style): the
model sees a lesson's numbered rules and the run's facts and answers with operations,
``ADD``, ``AGREE``, ``EDIT`` or ``REMOVE``, as JSON. Anything else in the answer, and
any operation that names no rule, is ignored: a bad answer changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from otel_diary.index.rules import MAX_RULE_CHARS
from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.llm import LLMReflector, prompt
from otel_diary.text import one_line

MAX_OPERATIONS = 4
Operation = tuple[str, str, str]
"""``(op, text of the rule it names, new text)``; ``ADD`` names none, ``AGREE`` and
``REMOVE`` give no new text."""

SYSTEM_PROMPT = (
    "You maintain a short list of rules that AI coding agents read when they meet one "
    "error again. Given the current numbered rules and one new run that met the error, "
    "answer with at most 4 operations as a JSON list, nothing else: "
    '{"op": "ADD", "rule": "..."} for a new, reusable rule (one sentence), '
    '{"op": "AGREE", "n": 2} when the run confirms rule 2, '
    '{"op": "EDIT", "n": 2, "rule": "..."} to make rule 2 more precise, '
    '{"op": "REMOVE", "n": 2} when the run contradicts rule 2. Answer [] when nothing '
    "changes."
)
_JSON_LIST = re.compile(r"\[.*\]", re.DOTALL)


def revision_prompt(rules: Sequence[str], run: TaskRun) -> str:
    """The user message: the lesson's rules, numbered from 1, then the run's facts."""
    numbered = "\n".join(f"{n}. {rule}" for n, rule in enumerate(rules, start=1))
    return f"Current rules:\n{numbered or '(none yet)'}\n\nThe new run:\n{prompt(run)}"


def parse_operations(answer: str, rules: Sequence[str]) -> list[Operation]:
    """The valid operations in ``answer``; ``[]`` when it is not what was asked for."""
    match = _JSON_LIST.search(answer)
    if match is None:
        return []
    try:
        items = json.loads(match.group(0))
    except ValueError:
        return []
    if not isinstance(items, list):
        return []
    found: list[Operation] = []
    for item in items[:MAX_OPERATIONS]:
        if not isinstance(item, dict):
            continue
        op = str(item.get("op", "")).upper()
        text = item.get("rule")
        new = one_line(text, MAX_RULE_CHARS) if isinstance(text, str) else ""
        number = item.get("n")
        named = (rules[number - 1] if isinstance(number, int) and not isinstance(number, bool)
                 and 1 <= number <= len(rules) else None)
        if op == "ADD" and new:
            found.append((op, "", new))
        elif op in ("AGREE", "REMOVE") and named is not None:
            found.append((op, named, ""))
        elif op == "EDIT" and named is not None and new:
            found.append((op, named, new))
    return found


class LessonReviser:
    """Asks the reflection model how a new run changes a lesson's rules.

    Usage::

        reviser = LessonReviser(reflector)
        operations = reviser(["Pin the peer dependency."], run)
    """

    def __init__(self, reflector: LLMReflector, max_tokens: int = 200) -> None:
        self.reflector = reflector
        self.max_tokens = max_tokens

    def __call__(self, rules: Sequence[str], run: TaskRun) -> list[Operation]:
        answer = self.reflector.complete(SYSTEM_PROMPT, revision_prompt(rules, run),
                                         self.max_tokens)
        return parse_operations(answer, rules) if answer else []
