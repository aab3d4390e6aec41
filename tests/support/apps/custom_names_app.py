"""The orchestrator app's two tasks under attribute names of its own (``acme.*``).

With a conventions file that maps these names, its diaries read like the default ones.
"""

from __future__ import annotations

from opentelemetry import trace

tracer = trace.get_tracer("acme-orchestrator")


def run_task(job: str, summary: str, retries: int) -> None:
    with tracer.start_as_current_span(f"job {job}", attributes={
        "acme.job.key": job,
        "acme.job.summary": summary,
        "acme.worker": "coder",
        "acme.lane": "paid_model",
        "acme.retries": retries,
    }):
        with tracer.start_as_current_span("llm call", attributes={
            "acme.llm.model": "claude-sonnet",
            "acme.llm.tokens_in": 120,
            "acme.llm.tokens_out": 30,
        }):
            pass


def main() -> None:
    run_task("T-1", "Add a health endpoint", retries=0)
    run_task("T-2", "Fix the flaky login test", retries=1)


if __name__ == "__main__":
    main()
