"""``otel-diary mcp``: serve the knowledge base to agents over MCP (stdio, or HTTP).

Read-only tools ``kb_search``, ``kb_fetch``, ``kb_lessons`` and resources ``diary://{id}``.
``--transport http`` serves streamable HTTP at ``http://<host>:<port>/mcp`` and requires
``Authorization: Bearer $OTEL_DIARY_MCP_TOKEN``. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys

from otel_diary.cli.common import (
    add_store_argument,
    fail,
    knowledge_base_of,
    missing_extra,
    root_of,
    store_of,
)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default: the client starts this command) or streamable "
                             "HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on with --transport http (127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8765,
                        help="port to listen on with --transport http (8765)")
    parser.add_argument("--dir", help="knowledge-base root (default: OTEL_DIARY_DIR or "
                                      "~/.local/share/otel-diary)")
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    missing = missing_extra("mcp", {"mcp": "mcp", "uvicorn": "uvicorn", "httptools": "httptools"},
                            extra="mcp")
    if missing is not None:
        return missing
    from otel_diary.readers.mcp import TOKEN_ENV, serve_http, serve_stdio

    token = os.environ.get(TOKEN_ENV, "")
    if args.transport == "http" and not token.strip():
        return fail("mcp", f"--transport http needs a bearer token in {TOKEN_ENV}", 2)

    root = root_of(args)
    url = store_of(args)
    if not url and not root.is_dir():  # a typo in a host's settings would look like no runs
        print(f"otel-diary mcp: warning: {root} is not a folder "
              f"({'a file' if root.exists() else 'it does not exist yet'}): every answer is "
              "empty until diaries are written there (OTEL_DIARY_DIR or --dir)", file=sys.stderr,
              flush=True)
    kb = knowledge_base_of("mcp", root, url)
    if kb is None:
        return 2
    with kb:
        if args.transport == "http":
            if not serve_http(kb, token=token, host=args.host, port=args.port):
                return fail("mcp", f"cannot listen on {args.host} port {args.port}", 1)
        else:
            serve_stdio(kb)
    return 0
