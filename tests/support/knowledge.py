"""A knowledge base for the readers' tests: diaries written by the real pipeline, a lesson.

Usage::

    diaries = build_knowledge_base(root)        # "types", "parsing", "pagination"
    write_lesson(root, "code:TS2345", "Narrow optional strings first")
    tree = snapshot(root)                       # compare later: nothing was written
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from otel_diary import ORCHESTRATOR, Diary, TaskRun
from otel_diary.settings import Settings
from otel_diary.wiring import build_pipeline
from tests.support.kb import PY_STDERR, TS_STDERR, task_record, write

NOTES = {
    "T-101": "Cursor pagination beats offsets on large tables.",
    "T-102": "Narrow optional strings before passing them to typed helpers.",
    "T-201": "Parse integers defensively from user input.",
}
NEW_TS_ERROR = ("src/billing/invoice.ts(7,3): error TS2345: Argument of type 'number | null' "
                "is not assignable to parameter of type 'number'.")
"""The same compiler error as TS_STDERR, met in another file: a new run's error."""


class Notes:
    """A reflector with a fixed insight per task, so tests can search for its words."""

    def reflect(self, run: TaskRun) -> str:
        return NOTES.get(run.task_id, "Nothing special happened.")


def build_knowledge_base(root: Path) -> dict[str, Diary]:
    """Three diaries under ``root``, indexed: "pagination", "types" (TS2345), "parsing"."""
    pipeline = build_pipeline(Settings(enabled=True, dir=root), ORCHESTRATOR, reflector=Notes())
    diaries = {
        "pagination": write(pipeline, task_record(1, "T-101", title="Add pagination to orders")),
        "types": write(pipeline, task_record(2, "T-102", stderr=TS_STDERR,
                                             title="Tighten types in orders")),
        "parsing": write(pipeline, task_record(3, "T-201", stderr=PY_STDERR, agent="reviewer",
                                               title="Harden the parser")),
    }
    pipeline.close()
    # The readers' tests write the lessons they need themselves (write_lesson).
    shutil.rmtree(root / "diaries" / "lessons", ignore_errors=True)
    return diaries


def write_lesson(root: Path, signature: str, title: str, evidence: list[str]) -> str:
    """A lesson document for ``signature`` under ``<root>/diaries/lessons/``; its id."""
    ident = "kl-" + hashlib.sha256(signature.encode()).hexdigest()[:20]
    name = signature.replace(":", "-").replace("/", "-")
    evidence_lines = "\n".join(f"- {diary_id}" for diary_id in evidence)
    content = (f"---\nid: {ident}\nsource_type: lesson\ntitle: '{title}'\n"
               f"signature: '{signature}'\nruns: {len(evidence)}\n"
               f"updated: '2026-07-26T00:00:00.000Z'\nevidence:\n{evidence_lines}\n---\n\n"
               f"# {title}\n\n"
               f"## What worked\n- {title} (votes: {len(evidence)})\n\n"
               f"## Evidence\n{evidence_lines}\n")
    path = root / "diaries" / "lessons" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return ident


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but SQLite's transient ``-wal``/``-shm`` companions, by path."""
    return {file.relative_to(root).as_posix(): file.read_bytes()
            for file in sorted(root.rglob("*"))
            if file.is_file() and not file.name.endswith(("-wal", "-shm"))}


__all__ = ["NEW_TS_ERROR", "PY_STDERR", "TS_STDERR", "build_knowledge_base", "snapshot",
           "write_lesson"]
