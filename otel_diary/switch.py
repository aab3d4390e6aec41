"""``KB_DIARIES_ENABLED``: the one switch read before anything else of otel-diary is loaded.

Diaries off means zero work: the processor, the ``opentelemetry-instrument`` hook and the
instrumentor read this switch first and load nothing more (no settings, no pipeline) while
it is off.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("otel_diary")

KB_DIARIES_ENABLED = "KB_DIARIES_ENABLED"
"""Unset or falsy (``0``, ``false``, ``no``, ``off``, empty): no processing at all."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_flag(value: object) -> bool:
    """``KB_DIARIES_ENABLED``-style truthiness; anything unrecognized raises ``ValueError``."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected one of {sorted(_TRUE | _FALSE)}, got {value!r}")


def enabled_in_environment() -> bool:
    """``KB_DIARIES_ENABLED``, its name in any case as every setting's, is truthy (an
    unrecognized value logs and counts as off)."""
    value = os.environ.get(KB_DIARIES_ENABLED)
    if value is None:
        value = next((found for name, found in os.environ.items()
                      if name.upper() == KB_DIARIES_ENABLED), "")
    try:
        return parse_flag(value)
    except ValueError:
        logger.warning("ignoring %s=%r: not a recognized flag; diaries stay off",
                       KB_DIARIES_ENABLED, value)
        return False
