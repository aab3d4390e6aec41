"""``otel-diary context``: a short digest of what earlier runs learned, for session start.

Prints the lessons and diaries relevant to ``--task`` and to an error (``--error-file`` or
standard input when it is not a terminal), with ids and paths; prints nothing and exits 0
when nothing is relevant or there is no knowledge base. A client hook's JSON event on
standard input is not an error: its ``prompt``, if any, is the task. Never writes to the
knowledge base.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from otel_diary.cli.common import (
    add_store_argument,
    fail,
    has_knowledge_base,
    knowledge_base_of,
    root_of,
    store_of,
)
from otel_diary.errors import DiaryError
from otel_diary.readers.context import DEFAULT_LIMIT, DEFAULT_MAX_CHARS, digest, relevant
from otel_diary.readers.knowledge import (
    MAX_ERROR_CHARS,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
)


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number from {low} to {high}")
        return value
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", default="", help="what the agent is about to do")
    parser.add_argument("--error-file", metavar="FILE",
                        help="an error or stderr tail to match ('-': standard input; default: "
                             "standard input when it is not a terminal)")
    parser.add_argument("--agent", help="match the task against this agent's diaries only "
                                        "(error matches and lessons come from every agent)")
    parser.add_argument("--limit", type=_bounded(1, MAX_LIMIT), default=DEFAULT_LIMIT,
                        help=f"at most this many documents ({DEFAULT_LIMIT})")
    parser.add_argument("--max-chars", type=_bounded(200, 100_000), default=DEFAULT_MAX_CHARS,
                        help=f"at most this many characters ({DEFAULT_MAX_CHARS})")
    parser.add_argument("--dir", help="knowledge-base root (default: OTEL_DIARY_DIR or "
                                      "~/.local/share/otel-diary)")
    add_store_argument(parser)


MAX_INPUT_CHARS = 16 * MAX_ERROR_CHARS
"""Most of the standard input (or ``--error-file``) read: a hook's JSON, with a long
prompt, is read whole; error text keeps its last ``MAX_ERROR_CHARS``."""


def _input_text(args: argparse.Namespace) -> str:
    if args.error_file is None and (sys.stdin is None or sys.stdin.isatty()):
        return ""
    if args.error_file in (None, "-"):
        return sys.stdin.read(MAX_INPUT_CHARS)
    with open(args.error_file, encoding="utf-8", errors="replace") as file:
        return file.read(MAX_INPUT_CHARS)


def _hook_input(text: str) -> dict[str, object] | None:
    """The JSON object a client hook (Claude Code's) writes to a hook's standard input, if
    ``text`` is one: it carries ``hook_event_name`` and, for a prompt, the ``prompt``."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        event = json.loads(text)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "hook_event_name" in event else None


def run(args: argparse.Namespace) -> int:
    try:
        text = _input_text(args)
    except OSError as exc:
        where = "standard input" if args.error_file in (None, "-") else args.error_file
        return fail("context", f"cannot read {where}: {exc.strerror or exc}", 2)
    task = args.task
    error = text[-MAX_ERROR_CHARS:]
    event = _hook_input(text)
    if event is not None:
        prompt = event.get("prompt")
        error = ""
        if not task.strip() and isinstance(prompt, str):
            task = prompt[:MAX_QUERY_CHARS]
    root = root_of(args)
    url = store_of(args)
    if not (task.strip() or error.strip()) or not (url or has_knowledge_base(root)):
        return 0
    kb = knowledge_base_of("context", root, url)
    if kb is None:
        return 2
    with kb:
        try:
            signatures, found = relevant(kb, task=task, error=error, agent=args.agent,
                                         limit=args.limit)
        except DiaryError as exc:
            return fail("context", str(exc), 1)
    sys.stdout.write(digest(kb.root, signatures, found, args.max_chars))
    return 0
