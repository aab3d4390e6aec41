"""What the index commands (``search``, ``show``, ``reindex``) share: the knowledge-base root,
opening the index, ``--json`` output and error messages.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from otel_diary.index.store import INDEX_FILE
from otel_diary.pipeline.render import DIARY_ROOT
from otel_diary.settings import Settings


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help="knowledge-base root (default: OTEL_DIARY_DIR or "
                                      "~/.local/share/otel-diary)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document (for agents and scripts)")


def root_of(args: argparse.Namespace) -> Path:
    return Path(args.dir) if args.dir else Settings().root


def has_knowledge_base(root: Path) -> bool:
    """True when ``root`` holds an index or a diary folder (opening one may create files)."""
    return (root / INDEX_FILE).exists() or (root / DIARY_ROOT).is_dir()


def fail(command: str, message: str, code: int) -> int:
    """Print ``message`` for a person and return ``code``."""
    print(f"otel-diary {command}: {message}", file=sys.stderr)
    return code


def print_json(document: object) -> None:
    json.dump(document, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")
