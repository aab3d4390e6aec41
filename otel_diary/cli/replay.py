"""``otel-diary replay FILE…``: OTLP trace files through the pipeline, offline.

Reads the OpenTelemetry Collector file exporter's files (JSON lines, or its records in
protobuf or JSON, zstd-compressed or not) and plain ``ExportTraceServiceRequest`` JSON
documents, ``.gz`` or not. Spans are
assembled as ``serve`` assembles them, with the grace period counted in spans read instead
of seconds; at the end every waiting task span is decided. Prints a summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from otel_diary import wiring
from otel_diary.cli.common import RECEIVER_MODULES, missing_extra
from otel_diary.conventions import load_conventions
from otel_diary.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="OTLP trace files (the Collector file exporter's, or one JSON "
                        "document; .gz too)")
    parser.add_argument("--dir", dest="dir", type=Path, default=None,
                        help="knowledge-base root the diaries go under (OTEL_DIARY_DIR)")
    parser.add_argument("--grace-spans", type=int, default=100_000, metavar="N",
                        help="decide a task span once N more spans were read (default 100000)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show a progress bar on stderr (default: on a terminal, for "
                        "large input)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    missing = missing_extra("replay", RECEIVER_MODULES)
    if missing is not None:
        return missing
    from otel_diary.sources.replay import replay  # decodes OTLP: needs the serve extra

    try:
        settings = Settings(**({"dir": args.dir} if args.dir is not None else {}))
    except ValueError as exc:
        print(f"otel-diary replay: {exc}", file=sys.stderr)
        return 2
    if args.grace_spans < 0:
        print("otel-diary replay: --grace-spans must be 0 or more", file=sys.stderr)
        return 2
    conventions = load_conventions(settings.conventions)
    pipeline = wiring.build_pipeline(settings, conventions)
    store = wiring.trace_store(settings, conventions, grace=args.grace_spans,
                               trace_timeout=10 * args.grace_spans)
    try:
        report = replay(list(args.files), pipeline, store, progress=args.progress,
                        max_document_bytes=settings.serve_max_body_bytes)
    finally:
        pipeline.close()
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.text())
    return 1 if report.skipped.get("unreadable files") else 0
