"""``otel-diary demo``: a tiny orchestrator on the real SDK runs three tasks.

One completes, one recovers (escalations, a build repaired in three attempts) and one
fails. Spans carry simulated timestamps so the diaries show realistic latencies. The
diaries go to a folder of the demo's own (``./demo-kb``), emptied on each run, never to
the real knowledge base.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_diary.cli.common import fail
from otel_diary.pipeline.render import Diary
from otel_diary.sinks.folder import FolderSink
from otel_diary.sources.processor import DiarySpanProcessor

TS_STDERR = """\
> tsc --noEmit
src/orders/api.ts(42,17): error TS2345: Argument of type 'string | undefined' is not \
assignable to parameter of type 'string'.
  Type 'undefined' is not assignable to type 'string'.
src/orders/api.ts(57,3): error TS2322: Type 'number' is not assignable to type 'OrderId'.
Found 2 errors in the same file, starting at: src/orders/api.ts:42
"""


@dataclass
class _Clock:
    now_ns: int

    def advance(self, ms: int) -> int:
        self.now_ns += ms * 1_000_000
        return self.now_ns


def _llm_call(tracer: Tracer, clock: _Clock, model: str, tokens_in: int, tokens_out: int,
              ms: int) -> None:
    span = tracer.start_span("chat " + model, start_time=clock.now_ns, attributes={
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tokens_in,
        "gen_ai.usage.output_tokens": tokens_out,
    })
    span.end(end_time=clock.advance(ms))


def _build(tracer: Tracer, clock: _Clock, attempt: int, ok: bool, ms: int) -> None:
    span = tracer.start_span("build.verify", start_time=clock.now_ns,
                             attributes={"build.attempt": attempt})
    if not ok:
        span.set_status(Status(StatusCode.ERROR, "tsc exited 2"))
    span.end(end_time=clock.advance(ms))


def run_task(tracer: Tracer, clock: _Clock, *, task_id: str, title: str, route: str,
             model: str, llm_calls: list[tuple[int, int, int]], builds: list[bool],
             escalations: int = 0, file_operations: int = 0, stderr: str | None = None,
             fail: bool = False) -> None:
    """One orchestrator task: a root span with LLM, file and build child spans."""
    from opentelemetry import trace

    root = tracer.start_span("orchestrator.task", start_time=clock.now_ns, attributes={
        "orchestrator.task.id": task_id,
        "orchestrator.task.title": title,
        "orchestrator.task.trigger": "issue",
        "orchestrator.agent.name": "coder",
        "orchestrator.route": route,
        "gen_ai.request.model": model,
    })
    with trace.use_span(root, end_on_exit=False):
        for tokens_in, tokens_out, ms in llm_calls:
            _llm_call(tracer, clock, model, tokens_in, tokens_out, ms)
        ops = tracer.start_span("file_ops.apply", start_time=clock.now_ns)
        ops.end(end_time=clock.advance(40))
        for attempt, ok in enumerate(builds, start=1):
            _build(tracer, clock, attempt, ok, 2500)
    root.set_attributes({
        "orchestrator.file_operations": file_operations,
        "orchestrator.build_verify.attempts": len(builds),
        "orchestrator.build_verify.passed": builds[-1] and not fail,
        "orchestrator.escalation_count": escalations,
    })
    if stderr:
        root.set_attribute("orchestrator.build_verify.stderr_tail", stderr)
    if fail:
        root.set_status(Status(StatusCode.ERROR, "build never passed"))
    root.end(end_time=clock.advance(15))


DEFAULT_DIR = "demo-kb"
"""The demo's knowledge base, in the current folder: never the real one (``OTEL_DIARY_DIR``)."""
MARKER = ".otel-diary-demo"
"""The file that marks a folder as the demo's own, so that the next run may delete it."""


def fresh_folder(root: Path) -> str | None:
    """Empty ``root`` for a new demo run; why it cannot be used, or ``None``.

    Only a folder an earlier demo made (it holds :data:`MARKER`), or an empty one, is used.
    """
    try:
        if (root / MARKER).is_file():
            shutil.rmtree(root)
        elif root.exists() and (not root.is_dir() or any(root.iterdir())):
            return (f"{root} already exists and was not made by the demo; remove it or pass "
                    "another --dir")
        root.mkdir(parents=True, exist_ok=True)
        (root / MARKER).write_text("Made by `otel-diary demo`: its next run deletes this "
                                   "folder and starts afresh.\n", encoding="utf-8")
    except OSError as exc:
        return f"cannot write to {root}: {exc.strerror or exc}"
    return None


class _RecordingFolder(FolderSink):
    """The folder sink, remembering each diary this run wrote and its file."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.written: list[tuple[Diary, str]] = []

    def write(self, diary: Diary) -> str:
        location = super().write(diary)
        self.written.append((diary, location))
        return location


def main(root: Path, shown: str | None = None) -> int:
    """Run the three demo tasks in a fresh ``root`` and print every diary written.

    ``shown`` is how ``root`` is written in the commands suggested at the end.
    """
    shown = shown or str(root)
    problem = fresh_folder(root)
    if problem is not None:
        return fail("demo", problem, 1)
    provider = TracerProvider(resource=Resource.create({"service.name": "demo-orchestrator"}))
    # Only the demo folder: a hub configured in the environment gets no demo diaries.
    recording = _RecordingFolder(root)
    processor = DiarySpanProcessor(enabled=True, dir=root, tracer_provider=provider,
                                   sinks=[recording])
    written = recording.written  # this run's diaries and their files
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("otel_diary.demo")
    clock = _Clock(time.time_ns() - 60_000_000_000)

    run_task(tracer, clock, task_id="T-101", title="Add pagination to the orders API",
             route="paid_model", model="anthropic/claude-sonnet-4-7",
             llm_calls=[(2900, 1400, 5200)], builds=[True], file_operations=3)
    run_task(tracer, clock, task_id="T-102", title="Tighten types in the orders API",
             route="paid_model", model="anthropic/claude-sonnet-4-7",
             llm_calls=[(3100, 900, 4100), (4200, 1300, 6100), (3900, 1100, 5600)],
             builds=[False, False, True], escalations=2, file_operations=5,
             stderr=TS_STDERR)
    run_task(tracer, clock, task_id="T-103", title="Migrate the billing schema",
             route="local_model", model="qwen3-coder-30b",
             llm_calls=[(1800, 600, 3000)], builds=[False, False], file_operations=2,
             stderr="error: relation \"invoices\" does not exist", fail=True)

    provider.force_flush()
    provider.shutdown()
    stats = processor.stats
    print(f"otel-diary demo: 3 tasks run, {len(written)} diaries written, "
          f"{stats.failed_runs} failed run skipped (a failed run writes no diary)")
    print(f"knowledge base: {root.resolve()} (the next demo run starts it afresh)")
    for diary, location in written:
        print(f"\n=== {_relative(Path(location))} ({diary.outcome}) ===")
        print(Path(location).read_text(encoding="utf-8"), end="")
    if written:
        program = _program()
        recovered = next((d for d, _ in written if d.outcome == "recovered"), written[0][0])
        folder = shlex.quote(shown)
        print("\nTry next:")
        for command, what in (
            (f"search TS2345 --dir {folder}", "find the run that met this compiler error"),
            (f'search "how did we get past the type error" --dir {folder}',
             "a question in plain words: the lesson of the run it finds comes first"),
            (f'search "orders api" --dir {folder} --json', "ranked results as JSON, for agents"),
            (f"lessons --dir {folder}", "one lesson per error: what it said, what worked"),
            (f"show --id {recovered.id} --dir {folder}", "print one diary by its id"),
            (f'context --task "types in the orders api" --dir {folder}',
             "the digest a session-start hook gives an agent"),
            (f"mcp --dir {folder}", "serve it to an MCP client over stdio (see the README, "
             "Use it from an agent)"),
        ):
            print(f"  {program} {command}\n      {what}")
    return 0 if len(written) == 2 else 1


def _relative(path: Path) -> str:
    """``path`` relative to the current folder when it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _program() -> str:
    """How to run otel-diary again: its name when PATH finds this one, else its path."""
    invoked = Path(sys.argv[0])
    if invoked.name != "otel-diary":
        return "otel-diary"
    found = shutil.which("otel-diary")
    if found is not None and Path(found).resolve() == invoked.resolve():
        return "otel-diary"
    return str(invoked)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=DEFAULT_DIR,
                        help=f"the demo's own knowledge base (default: ./{DEFAULT_DIR}); each "
                             "run deletes what the previous one wrote there")


def run(args: argparse.Namespace) -> int:
    shown = args.dir if Path(args.dir).is_absolute() or args.dir.startswith(".") \
        else f"./{args.dir}"
    return main(Path(args.dir), shown)
