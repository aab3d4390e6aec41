"""Instrumentation suppression for otel-diary's own I/O, so it never traces itself.

Contextvars do not cross into a new thread: every thread that makes HTTP calls for the
pipeline (the delivery thread, a model call from any caller) enters :func:`suppressed`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """Instrumentations (httpx, requests, ...) create no spans inside this block."""
    token = context.attach(context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        yield
    finally:
        context.detach(token)
