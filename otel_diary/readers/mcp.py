"""The knowledge base as an MCP server (the official ``mcp`` SDK): read-only tools and resources.

Tools ``kb_search``, ``kb_fetch`` and ``kb_lessons`` (the names the knowledge hub's agents
use) and the resource template ``diary://{id}``, over a :class:`KnowledgeBase`. A request
the knowledge base cannot answer is a tool error with a message; the server keeps serving.
Transports: stdio, or streamable HTTP at ``/mcp`` behind a bearer token.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import logging
import socket
import sqlite3
import sys
import typing
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any, Literal, TypeVar

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, create_model

from otel_diary import __version__
from otel_diary.errors import DiaryError
from otel_diary.readers.knowledge import (
    MAX_ERROR_CHARS,
    MAX_ID_CHARS,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    Document,
    Found,
    KnowledgeBase,
    LessonsAnswer,
    SearchAnswer,
)
from otel_diary.text import parse_since

logger = logging.getLogger("otel_diary")

TOKEN_ENV = "OTEL_DIARY_MCP_TOKEN"
"""The bearer token HTTP clients must send (``Authorization: Bearer <token>``); no default."""
HTTP_PATH = "/mcp"
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
INSTRUCTIONS = (
    "The knowledge base of earlier agent runs: diaries (what was done, the error met, how it "
    "was recovered, what was learned) and lessons (one per error signature). Call kb_lessons "
    "with an error's text before fixing it, kb_search for a task or a word, kb_fetch for a "
    "whole document."
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]],
                    Callable[[Message], Awaitable[None]]], Awaitable[None]]

Query = Annotated[str, Field(max_length=MAX_QUERY_CHARS, description=(
    'Words to find (every word must match, else documents with some of them are listed; '
    '"a phrase", prefix*); a question in plain words or an error code such as TS2345 '
    "works. Empty: the newest diaries."))]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="At most this many results.")]
Filter = Annotated[str | None, Field(max_length=200)]


_M = TypeVar("_M", bound=BaseModel)


def _model(cls: type[Any], models: dict[type[Any], type[BaseModel]]) -> type[BaseModel]:
    """A frozen pydantic model of the answer dataclass ``cls``: its name, docstring, fields
    and defaults, an answer dataclass in a field's type being its model (in ``models``).
    The SDK derives a tool's output schema from its return type, and serializes a model."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for item in dataclasses.fields(cls):
        kind = hints[item.name]
        if typing.get_origin(kind) is list and typing.get_args(kind)[0] in models:
            kind = list.__class_getitem__(models[typing.get_args(kind)[0]])
        if item.default is not dataclasses.MISSING:
            fields[item.name] = (kind, item.default)
        elif item.default_factory is not dataclasses.MISSING:
            fields[item.name] = (kind, item.default_factory())
        else:
            fields[item.name] = kind
    model: type[BaseModel] = create_model(cls.__name__, __config__=ConfigDict(frozen=True),
                                          __doc__=cls.__doc__, **fields)
    models[cls] = model
    return model


_MODELS: dict[type[Any], type[BaseModel]] = {}
_model(Found, _MODELS)
SearchModel = _model(SearchAnswer, _MODELS)
DocumentModel = _model(Document, _MODELS)
LessonsModel = _model(LessonsAnswer, _MODELS)


def _answer(call: Callable[[], object], model: type[_M]) -> _M:
    """``call()``'s answer as ``model``, with what the knowledge base refuses turned into a
    tool error."""
    try:
        answer = call()
    except (DiaryError, sqlite3.Error) as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:  # a fault of the reader's own: said, and logged in full
        logger.exception("otel-diary's MCP server could not answer a tool call")
        raise ToolError(f"the knowledge base could not answer ({type(exc).__name__}: "
                        f"{exc}); the server's log has the details") from exc
    return model.model_validate(answer, from_attributes=True)


def build_server(kb: KnowledgeBase) -> MCPServer[Any]:
    """The MCP server answering from ``kb``."""
    server: MCPServer[Any] = MCPServer("otel-diary", version=__version__,
                                       instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(annotations=READ_ONLY, title="Search the knowledge base")
    def kb_search(
        query: Query = "",
        agent: Annotated[Filter, Field(description=(
            "Only diaries of this agent: its name or its folder, in any case."))] = None,
        outcome: Annotated[Literal["completed", "recovered"] | None,
                           Field(description="Only diaries with this outcome.")] = None,
        since: Annotated[Filter, Field(description=(
            "Only documents created since a date or UTC time (2026-11-30, "
            "2026-11-30T12:00:00Z) or an age (30m, 12h, 7d, 2w)."))] = None,
        limit: Limit = 10,
    ) -> SearchModel:  # type: ignore[valid-type]
        """Lessons and diaries matching some words, best first: lessons first, those with
        every word, then those gathering the diaries found."""
        after = _since(since)  # a bad date is the caller's mistake, said as such
        return _answer(lambda: kb.search(query, agent=agent or None, outcome=outcome,
                                         since=after, limit=limit), SearchModel)

    @server.tool(annotations=READ_ONLY, title="Fetch a document")
    def kb_fetch(
        id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description=(
            "A diary id (kh-…), a lesson id, or a document path inside the knowledge base "
            "(diaries/…/x.md)."))],
    ) -> DocumentModel:  # type: ignore[valid-type]
        """The whole document (front matter and markdown body) of a diary or a lesson."""
        return _answer(lambda: kb.fetch(id), DocumentModel)

    @server.tool(annotations=READ_ONLY, title="Has anyone seen this error?")
    def kb_lessons(
        error: Annotated[str, Field(min_length=1, max_length=MAX_ERROR_CHARS, description=(
            "Pasted error text or the tail of a build's stderr."))],
        limit: Limit = 10,
    ) -> LessonsModel:  # type: ignore[valid-type]
        """The error's signatures and the lessons and diaries that met it, best first."""
        return _answer(lambda: kb.lessons(error, limit=limit), LessonsModel)

    @server.resource("diary://{id}", name="diary", mime_type="text/markdown",
                     description="A diary (kh-…) or lesson of the knowledge base, as markdown.")
    def diary(id: str) -> str:
        try:
            return kb.fetch(id).content
        except (DiaryError, sqlite3.Error) as exc:
            raise ResourceNotFoundError(str(exc)) from exc

    return server


def _since(text: str | None) -> str | None:
    """``since`` as the diaries' ``created`` format (none when empty, as a client filling
    every optional argument sends it); a bad value is a tool error."""
    if text is None or not text.strip():
        return None
    try:
        return parse_since(text)
    except ValueError as exc:
        raise ToolError(f"since: {exc}") from None


class BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] == "http":
            scheme, _, given = dict(scope.get("headers") or []).get(
                b"authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given, self._expected):
                body = b'{"error": "a bearer token is required (OTEL_DIARY_MCP_TOKEN)"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="otel-diary"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer[Any], token: str, host: str = "127.0.0.1") -> ASGIApp:
    """The streamable-HTTP app of ``server`` at ``/mcp``, behind the bearer ``token``."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    return BearerToken(app, token)


def serve_stdio(kb: KnowledgeBase) -> None:
    """Serve ``kb`` over standard input and output until the client closes them, saying
    once on standard error (which MCP hosts keep in their server logs) what it reads."""
    server = build_server(kb)
    print(f"otel-diary mcp is serving over stdio; it reads {kb.where}", file=sys.stderr,
          flush=True)
    anyio.run(server.run_stdio_async)


class _Announcing(uvicorn.Server):
    """A server that says once, on standard error, where it listens, when it does."""

    def __init__(self, config: uvicorn.Config, listening: str) -> None:
        super().__init__(config)
        self._listening = listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(self._listening, file=sys.stderr, flush=True)


def serve_http(kb: KnowledgeBase, *, token: str, host: str, port: int) -> bool:
    """Serve ``kb`` over streamable HTTP at ``http://<host>:<port>/mcp`` until interrupted,
    saying on standard error once it listens, and what it reads; False when it could not
    listen (uvicorn logged why).

    An ``Upgrade`` request (a WebSocket handshake, ``curl --http2``'s ``h2c``) is served as
    the HTTP/1.1 request it also is, and logs nothing: no client, token or not, fills the
    log by repeating one. Slow, stalled and oversized requests are cut off, and open
    connections capped, as ``serve`` does (:mod:`otel_diary.receiver.guard`, its defaults):
    clients that never finish a request cannot keep an agent out."""
    from otel_diary.receiver.guard import connection_limits, guarded_protocol

    guarded = guarded_protocol()
    config = uvicorn.Config(http_app(build_server(kb), token, host), host=host, port=port,
                            http=guarded, backlog=connection_limits(guarded.max_connections)[1],
                            log_level="warning", lifespan="on", ws="none")
    logging.getLogger("uvicorn.error").addFilter(_upgrade_warnings)  # after Config's setup
    address = f"[{host}]" if ":" in host else host
    listening = f"otel-diary mcp is listening on http://{address}:{port}{HTTP_PATH}"
    server = _Announcing(config, f"{listening}; it reads {kb.where}")
    with contextlib.suppress(SystemExit):  # uvicorn's answer to a port it cannot bind
        server.run()
    return server.started


def _upgrade_warnings(record: logging.LogRecord) -> bool:
    """False for uvicorn's warnings about an upgrade it does not make."""
    return not record.getMessage().startswith(("Unsupported upgrade request",
                                               "No supported WebSocket library"))
