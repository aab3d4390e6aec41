"""An instrumented app for the outage-and-restart tests, run as its own process.

``emit`` runs ``--tasks`` task spans with the hub sink on, prints ``spooled N`` and then
idles while its delivery thread retries (the test kills it). ``drain`` starts the same
configuration with no tasks, shuts down (which delivers what the spool holds) and prints
the hub sink's counters as JSON.

    python -m tests.hub_app emit --hub URL --kb DIR --spool DIR --tasks 3
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from opentelemetry.sdk.trace import TracerProvider

from otel_diary import DiarySpanProcessor
from otel_diary.sinks.hub.sink import HubSink


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["emit", "drain"])
    parser.add_argument("--hub", required=True)
    parser.add_argument("--kb", required=True)
    parser.add_argument("--spool", required=True)
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--hub-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")

    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(
        enabled=True, dir=args.kb, hub_url=args.hub, spool_dir=args.spool, index=False,
        hub_timeout_s=args.hub_timeout, retry_initial_backoff_s=0.05,
        retry_max_backoff_s=0.2, shutdown_timeout_ms=20_000)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("hub-app")
    if args.mode == "emit":
        for n in range(args.tasks):
            with tracer.start_as_current_span("task", attributes={
                    "orchestrator.task.id": f"T-{n}", "orchestrator.agent.name": "coder",
                    "orchestrator.task.title": f"Task number {n}"}):
                pass
        provider.force_flush()
        print(f"spooled {args.tasks}", flush=True)
        time.sleep(120)  # delivering (or retrying) until the test kills this process
        return 1
    provider.shutdown()
    [hub] = [sink for sink in processor.sinks if isinstance(sink, HubSink)]
    print(json.dumps({**hub.stats.as_dict(), "waiting": len(hub.spool)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
