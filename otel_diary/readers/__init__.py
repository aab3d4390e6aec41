"""Readers: how agents read what earlier runs learned.

``knowledge`` answers search, fetch and error matches over a knowledge base (read-only);
``context`` turns them into a short digest for session start; ``mcp`` serves them to any
MCP client (it needs the ``mcp`` extra: ``pip install 'otel-diary[mcp]'``).
"""

from otel_diary.readers.knowledge import (
    Document,
    Found,
    KnowledgeBase,
    LessonsAnswer,
    ReadError,
    SearchAnswer,
)

__all__ = ["Document", "Found", "KnowledgeBase", "LessonsAnswer", "ReadError", "SearchAnswer"]
