"""A small knowledge base for index and search tests, written by the real pipeline.

Usage::

    pipeline = kb_pipeline(tmp_path)
    diary = write(pipeline, task_record(1, "T-1", stderr="error TS2345: ..."))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otel_diary import ORCHESTRATOR, ChildSummary, Diary, Pipeline, Settings, SpanRecord
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline

BASE_NS = 1_785_000_000_000_000_000  # 2026-07-25T17:20Z
TS_STDERR = ("src/orders/api.ts(42,17): error TS2345: Argument of type 'string | undefined' "
             "is not assignable to parameter of type 'string'.")
PY_STDERR = ("Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n"
             "ValueError: invalid literal for int() with base 10: 'x'\n"
             "FAILED tests/test_parse.py::test_numbers - ValueError")


def task_record(n: int, task_id: str, *, stderr: str | None = None, trigger: str | None = None,
                title: str | None = None, agent: str = "coder",
                extra: dict[str, Any] | None = None) -> SpanRecord:
    """The root span of task run number ``n`` (later ``n`` ends later); recovered with stderr."""
    attributes: dict[str, Any] = {
        "orchestrator.task.id": task_id,
        "orchestrator.task.title": title or f"Task {task_id}",
        "orchestrator.agent.name": agent,
        "orchestrator.route": "paid_model",
        "gen_ai.request.model": "model-a",
        "orchestrator.build_verify.attempts": 3 if stderr else 1,
        **(extra or {}),
    }
    if stderr is not None:
        attributes["orchestrator.build_verify.stderr_tail"] = stderr
    if trigger is not None:
        attributes["orchestrator.task.trigger"] = trigger
    end_ns = BASE_NS + n * 60_000_000_000
    return SpanRecord(trace_id=0xABC000 + n, span_id=0x100 + n, name="task",
                      start_ns=end_ns - 5_000_000_000, end_ns=end_ns, attributes=attributes)


def kb_pipeline(root: Path, **settings: Any) -> Pipeline:
    """The pipeline an enabled app gets for ``root``: folder sink, index, related finder."""
    return build_pipeline(Settings(enabled=True, dir=root, **settings), ORCHESTRATOR)


def write(pipeline: Pipeline, record: SpanRecord) -> Diary:
    """Run ``record`` through ``pipeline``; the diary it wrote."""
    diary = pipeline.handle((record, ChildSummary()))
    assert diary is not None
    return diary


def plant_unreadable(root: Path, diary: Diary) -> dict[str, str]:
    """Files in the diary folder that are no diary, by path, with the reason given."""
    folder = root / "diaries" / "agents" / "coder"
    planted = {
        "huge.md": (b"---\nid: kh-huge\n---\n" + b"x " * 600_000,
                    "larger than a document can be (1,048,576 bytes)"),
        "broken.md": (b"---\nid: [kh-1\n---\nbody\n", "front matter is not YAML: "),
        "bomb.md": (b"---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a]\n"
                    b"c: &c [*b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c]\nid: kh-b\n"
                    b"---\n", "front matter holds more values than its text"),
        "notes.md": (b"# Notes\n\nNo front matter.\n", "document has no front matter"),
        "copy.md": (diary.content.encode(), f"a second copy of {diary.id} (kept: "),
    }
    for name, (content, _) in planted.items():
        (folder / name).write_bytes(content)
    return {f"diaries/agents/coder/{name}": why for name, (_, why) in planted.items()}


class Broken(InMemorySink):
    """A sink that cannot write while ``broken`` (a full disk, a folder made read-only)."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = True
        self.tries = 0

    def write(self, diary: Diary) -> str:
        self.tries += 1
        if self.broken:
            raise OSError(28, "No space left on device")
        return super().write(diary)
