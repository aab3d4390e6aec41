"""``otel-diary demo``: a tiny orchestrator on the real SDK runs three tasks.

One completes, one recovers (escalations, a build repaired in three attempts) and one
fails. Spans carry simulated timestamps so the diaries show realistic latencies.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_diary.pipeline.render import Diary
from otel_diary.settings import Settings
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


class _RecordingFolder(FolderSink):
    """The folder sink, remembering (outcome, file) of each diary this run wrote."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.written: list[tuple[str, str]] = []

    def write(self, diary: Diary) -> str:
        location = super().write(diary)
        self.written.append((diary.outcome, location))
        return location


def main(root: Path) -> int:
    """Run the three demo tasks and print what was written."""
    provider = TracerProvider(resource=Resource.create({"service.name": "demo-orchestrator"}))
    folder = _RecordingFolder(root)
    processor = DiarySpanProcessor(enabled=True, dir=root, sinks=[folder],
                                   tracer_provider=provider)
    written = folder.written
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
    print(f"otel-diary demo: 3 tasks run, {stats.diaries} diaries written, "
          f"{stats.failed_runs} failed run skipped")
    print(f"knowledge base: {root}")
    recovered: Path | None = None
    for outcome, location in written:
        print(f"  wrote {location} ({outcome})")
        if outcome == "recovered":
            recovered = Path(location)
    if recovered is not None:
        print(f"\n--- {recovered.name} ---")
        print(recovered.read_text(encoding="utf-8"))
    return 0 if stats.diaries == 2 else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help="knowledge-base root (default: OTEL_DIARY_DIR or "
                                      "~/.local/share/otel-diary)")


def run(args: argparse.Namespace) -> int:
    return main(Path(args.dir) if args.dir else Settings().root)
