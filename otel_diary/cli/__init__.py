"""The ``otel-diary`` command line: one sub-command per entry of ``COMMANDS``.

Each command lives in a module with ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from otel_diary.version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("otel_diary.cli.demo", "run three example tasks; print the diaries (in ./demo-kb)"),
    "search": ("otel_diary.cli.search", "find diaries by words, agent, outcome, task or age"),
    "show": ("otel_diary.cli.show", "print the diary of a trace (--trace) or an id (--id)"),
    "lessons": ("otel_diary.cli.lessons", "list the lessons: one per error, with what worked"),
    "reindex": ("otel_diary.cli.reindex",
                "rebuild the search index and the lessons from the diary folder"),
    "serve": ("otel_diary.cli.serve", "receive OTLP traces over HTTP and gRPC and write diaries"),
    "replay": ("otel_diary.cli.replay", "feed OTLP JSON files through the pipeline offline"),
    "store": ("otel_diary.cli.store",
              "the shared PostgreSQL store: migrate its schema, import a folder into it"),
    "spool": ("otel_diary.cli.spool", "show the diaries waiting for the knowledge hub; --flush"),
    "mcp": ("otel_diary.cli.mcp", "serve the knowledge base to agents over MCP (stdio or HTTP)"),
    "context": ("otel_diary.cli.context",
                "print what earlier runs learned about a task or an error, for session start"),
}
"""Sub-command -> (module, one-line help)."""


def version() -> str:
    """otel-diary's version."""
    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="otel-diary",
        description="Turn AI agents' OpenTelemetry traces into diaries and lessons the next "
                    "agent can search.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    arguments = list(sys.argv[1:] if argv is None else argv)
    # Only the command asked for is imported (its module may need an extra, and every
    # other one would cost start-up time): `otel-diary --help` imports none of them.
    chosen = next((word for word in arguments if not word.startswith("-")), None)
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        command = commands.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            modules[name] = importlib.import_module(module_name)
            modules[name].add_arguments(command)
    for word in arguments:
        if not _is_text(word):  # bytes the locale could not decode: SQLite, JSON and the
            # index take no such text (a traceback, exit 1, read as "no match", before)
            shown = os.fsencode(word).decode("ascii", "backslashreplace")
            parser.error(f"argument '{shown}' is not valid UTF-8 text")
    args = parser.parse_args(arguments)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command in READERS and any(
            value and key.upper() in REDACTION_VARIABLES for key, value in os.environ.items()):
        _redact_as_configured()  # settings read names in any case, as this does
    try:
        code = int(modules[args.command].run(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()


READERS = frozenset(("search", "show", "lessons", "context", "mcp", "reindex", "store"))
"""The commands that read the knowledge base (those that write diaries build the
pipeline's redactor from the settings themselves)."""
REDACTION_VARIABLES = ("OTEL_DIARY_REDACT_PATTERNS", "MOTHER_AI_API_KEY",
                       "OTEL_DIARY_REFLECTION_API_KEY", "OTEL_DIARY_SERVE_TOKEN")
"""The settings redaction takes besides its built-in families: read only when one is set
(reading every setting costs a session-start hook about 40 ms)."""


def _redact_as_configured() -> None:
    """What a reader redacts (its answers, an error, the index's words) takes out the
    configured patterns and keys too, as the pipeline does. Settings that cannot be read
    are the command's to report: it runs with the built-in families."""
    from otel_diary.pipeline.redact import use
    from otel_diary.settings import Settings
    from otel_diary.wiring import settings_redactor

    with contextlib.suppress(ValueError):
        use(settings_redactor(Settings(), prepare=False))


def _is_text(word: str) -> bool:
    """Whether ``word`` is text, not undecodable bytes carried as lone surrogates."""
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reader_went_away() -> int:
    """Exit quietly when stdout's reader closed early (``otel-diary search | head``).

    As the signal module's documentation advises for SIGPIPE: point stdout at devnull so
    the interpreter's final flush has nowhere to fail, and exit 1.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file (captured, replaced)
        pass
    return 1

