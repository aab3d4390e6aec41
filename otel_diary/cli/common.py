"""What the index commands (``search``, ``show``, ``reindex``) share: the knowledge-base root,
opening the index, ``--json`` output and error messages.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from otel_diary.index.store import INDEX_FILE
from otel_diary.pipeline import DIARY_ROOT
from otel_diary.settings import Settings
from otel_diary.text import one_line

if TYPE_CHECKING:
    from otel_diary.index.postgres import PostgresStore
    from otel_diary.readers.knowledge import KnowledgeBase


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help="knowledge-base root (default: OTEL_DIARY_DIR or "
                                      "~/.local/share/otel-diary)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document (for agents and scripts)")


def root_of(args: argparse.Namespace) -> Path:
    return Path(args.dir).expanduser() if args.dir else Settings().root


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL",
                        help="a shared store, postgresql://… (default: OTEL_DIARY_STORE_URL; "
                             "unset: the folder)")


def store_of(args: argparse.Namespace) -> str | None:
    """The store URL asked for (``--store``, else ``OTEL_DIARY_STORE_URL``), if any."""
    if getattr(args, "store", None):
        return str(args.store)
    if getattr(args, "dir", None):
        return None  # a folder named on the command line wins over the environment
    url = Settings().store_url
    return url.get_secret_value() if url is not None else None


def open_store_of(command: str, url: str, *, migrate: bool = False) -> PostgresStore | None:
    """The PostgreSQL store at ``url`` (its schema as it is), or ``None`` after printing why
    it cannot be opened (the ``pg`` extra missing, a bad URL)."""
    try:
        from otel_diary.index.postgres import PostgresStore
    except ImportError as exc:
        if not_installed(exc, "psycopg") or not_installed(exc, "psycopg_pool"):
            fail(command, 'a PostgreSQL store needs the pg extra: pip install "otel-diary[pg]"',
                 2)
        else:
            fail(command, f"the pg extra is installed but does not import ({exc}): "
                          'reinstall it with pip install --force-reinstall "otel-diary[pg]"', 2)
        return None
    try:
        return PostgresStore(url, migrate=migrate)
    except ValueError as exc:
        fail(command, str(exc), 2)
        return None


def knowledge_base_of(command: str, root: Path, url: str | None) -> KnowledgeBase | None:
    """What ``command`` reads: the store at ``url`` when one is given, else the folder at
    ``root``; ``None`` after printing why the store cannot be opened."""
    if not url:
        from otel_diary.readers.knowledge import KnowledgeBase

        return KnowledgeBase(root)
    store = open_store_of(command, url)
    if store is None:
        return None
    from otel_diary.readers.shared import StoreKnowledgeBase  # psycopg: the pg extra

    return StoreKnowledgeBase(store)


RECEIVER_MODULES: Mapping[str, str] = {
    "opentelemetry.proto.trace.v1.trace_pb2": "opentelemetry-proto",
    "google.rpc.status_pb2": "googleapis-common-protos",
}
"""Module -> distribution, for decoding OTLP (``replay``, ``serve``): the ``serve`` extra."""
SERVE_MODULES: Mapping[str, str] = {
    **RECEIVER_MODULES, "grpc": "grpcio", "uvicorn": "uvicorn", "httptools": "httptools",
    **({} if sys.version_info >= (3, 14) else {"backports.zstd": "backports.zstd"})}
"""Module -> distribution, for listening for OTLP (``serve``): the ``serve`` extra."""


def missing_extra(command: str, modules: Mapping[str, str], extra: str = "serve") -> int | None:
    """Exit status 2 with a message naming the extra to install when one of ``modules``
    cannot be imported; ``None`` when they all can. A module that is installed but fails to
    import (a missing shared library, a half-upgraded package) is named with its error."""
    missing, broken = [], []
    for module, distribution in modules.items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if not_installed(exc, module):
                missing.append(distribution)
            else:
                broken.append(f"{distribution}: {exc}")
    if missing:
        return fail(command, f"needs the {extra!r} extra ({', '.join(missing)} not installed): "
                             f'pip install "otel-diary[{extra}]"', 2)
    if broken:
        return fail(command, f"the {extra!r} extra is installed but does not import "
                             f"({'; '.join(broken)}): reinstall it with "
                             f'pip install --force-reinstall "otel-diary[{extra}]"', 2)
    return None


def not_installed(exc: ImportError, module: str) -> bool:
    """Whether ``exc`` says ``module`` (or a package above it) is absent, rather than present
    and failing to import."""
    name = exc.name if isinstance(exc, ModuleNotFoundError) else None
    return name is not None and (module == name or module.startswith(f"{name}."))


def has_knowledge_base(root: Path) -> bool:
    """True when ``root`` holds an index or a diary folder (opening one may create files)."""
    return (root / INDEX_FILE).exists() or (root / DIARY_ROOT).is_dir()


def fail(command: str, message: str, code: int) -> int:
    """Print ``message`` for a person, redacted (it may quote what was typed, or a
    document), and return ``code``."""
    from otel_diary.pipeline.redact import redact  # read by every command but --help

    print(f"otel-diary {command}: {redact(message)}", file=sys.stderr)
    return code


def print_skipped(command: str) -> Callable[[str, str], None]:
    """What prints each file of the diary folder not read as a diary, and why."""
    def skipped(path: str, why: str) -> None:
        print(f"otel-diary {command}: skipped {one_line(path, 300)}: {why}", file=sys.stderr)
    return skipped


def print_json(document: object) -> None:
    json.dump(document, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")
