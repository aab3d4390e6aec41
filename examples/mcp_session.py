"""One MCP session with ``otel-diary mcp``, through the official client SDK, printed.

Writes the demo's diaries into a temporary knowledge base (``otel-diary demo``), starts
``otel-diary mcp`` over stdio as an MCP client would, then lists the tools, searches for
an error code, fetches the diary found and matches a new error with ``kb_lessons``.

    pip install 'otel-diary[mcp]'
    python examples/mcp_session.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

OTEL_DIARY = [sys.executable, "-m", "otel_diary.cli"]
NEW_ERROR = """\
> tsc --noEmit
src/billing/invoice.ts(7,3): error TS2345: Argument of type 'number | null' is not \
assignable to parameter of type 'number'.
Found 1 error.
"""


def show(label: str, value: Any) -> None:
    print(f"\n>>> {label}")
    print(json.dumps(value, indent=2, ensure_ascii=False)[:2500])


async def session(root: str) -> None:
    server = StdioServerParameters(command=OTEL_DIARY[0], args=[*OTEL_DIARY[1:], "mcp"],
                                   env={**os.environ, "OTEL_DIARY_DIR": root})
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        init = await client.initialize()
        print(f"connected to {init.server_info.name} {init.server_info.version}")
        tools = (await client.list_tools()).tools
        show("tools/list", [{"name": t.name, "read_only": t.annotations and
                             t.annotations.read_only_hint,
                             "arguments": sorted(t.input_schema["properties"])} for t in tools])
        found = await client.call_tool("kb_search", {"query": "TS2345"})
        show('kb_search {"query": "TS2345"}', found.structured_content)
        first = (found.structured_content or {}).get("results", [{}])[0].get("id", "")
        document = await client.call_tool("kb_fetch", {"id": first})
        fetched = dict(document.structured_content or {})
        fetched.pop("content", None)
        show(f'kb_fetch {{"id": "{first}"}}  (content left out: front_matter + body)', fetched)
        lessons = await client.call_tool("kb_lessons", {"error": NEW_ERROR})
        show("kb_lessons {\"error\": <a new tsc failure in another file>}",
             lessons.structured_content)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="otel-diary-mcp-") as root:
        subprocess.run([*OTEL_DIARY, "demo", "--dir", root], check=True,
                       stdout=subprocess.DEVNULL, env={**os.environ, "KB_DIARIES_ENABLED": "1"})
        asyncio.run(session(root))


if __name__ == "__main__":
    main()
