"""An orchestrator that knows nothing of otel-diary: two tasks, opentelemetry-api only.

One task completes, the other is recovered (one escalation); each makes one LLM call.
"""

from __future__ import annotations

from opentelemetry import trace

tracer = trace.get_tracer("example-orchestrator")


def run_task(task_id: str, title: str, escalations: int) -> None:
    with tracer.start_as_current_span(f"task {task_id}", attributes={
        "orchestrator.task.id": task_id,
        "orchestrator.task.title": title,
        "orchestrator.agent.name": "coder",
        "orchestrator.route": "paid_model",
        "orchestrator.escalation_count": escalations,
    }):
        with tracer.start_as_current_span("chat claude-sonnet", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "claude-sonnet",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
        }):
            pass


def main() -> None:
    run_task("T-1", "Add a health endpoint", escalations=0)
    run_task("T-2", "Fix the flaky login test", escalations=1)


if __name__ == "__main__":
    main()
