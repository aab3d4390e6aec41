"""Runs the script named by the first argument as ``__main__``, then reports every diary
engine of the process on one stdout line: ``otel-diary-report <json list of stats>``.

Used as ``opentelemetry-instrument python report.py app.py`` to count how often each
task span was processed while the app itself stays unmodified.
"""

from __future__ import annotations

import json
import runpy
import sys

from opentelemetry import trace

from otel_diary.sources import attach as _attach


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if flush is not None:
        flush()
    engines = [engine for engine in _attach.engines() if engine.enabled]
    for engine in engines:
        engine.force_flush()
    print("otel-diary-report " + json.dumps([engine.stats.as_dict() for engine in engines]))


if __name__ == "__main__":
    main()
