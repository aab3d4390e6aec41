"""The ``otel-diary`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ._settings import Settings


def _root(value: str | None) -> Path:
    if value:
        return Path(value)
    return Settings().root


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="otel-diary",
        description="Turn an AI-agent orchestrator's OpenTelemetry traces into diaries.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run three example tasks and write their diaries")
    demo.add_argument("--dir", help="knowledge-base root (default: OTEL_DIARY_DIR or "
                                    "~/.local/share/otel-diary)")

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        from ._demo import main as demo_main

        return demo_main(_root(args.dir))
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
