"""Every exception otel-diary raises on purpose, in one tree.

::

    DiaryError
    ├── UnsafePathError        a diary path would leave the diary folder
    ├── FolderUnwritable       nothing can be written under a knowledge-base folder
    ├── ConventionsError       an attribute mapping that cannot be used (also a ValueError)
    ├── SpoolFullError         the hub spool is at its bound; the diary was not spooled
    ├── IndexUnavailable       the index database cannot be opened or read
    ├── QuotingError           a message that may quote what was asked, redacted
    │   └── SearchError        a search the index cannot run (a message for the person)
    ├── DecodeError            a payload that is not an OTLP trace request (also a ValueError)
    └── TooLarge               a payload past the size cap, found while inflating (a ValueError)

Errors of dependencies are translated where they are met (``raise ... from exc``);
nothing here is raised into an instrumented app, whose spans never see an exception.
"""

from __future__ import annotations

from pathlib import Path


class DiaryError(Exception):
    """Base of otel-diary's errors."""


class UnsafePathError(DiaryError):
    """A diary path would leave the diary folder."""


class FolderUnwritable(DiaryError):
    """Nothing can be written under a knowledge-base folder; the message names it and why."""

    def __init__(self, root: Path, reason: str) -> None:
        super().__init__(f"otel-diary cannot write diaries under {root}: {reason}")
        self.root = root
        self.reason = reason

    @classmethod
    def of(cls, root: Path, exc: OSError) -> FolderUnwritable:
        return cls(root, exc.strerror or str(exc))


class ConventionsError(DiaryError, ValueError):
    """An attribute mapping that cannot be used; the message names the key at fault."""


class SpoolFullError(DiaryError):
    """The spool holds its maximum of entries or bytes; the diary was not spooled."""


class IndexUnavailable(DiaryError):
    """The index database cannot be opened or read (missing folder, damage, locking)."""


class QuotingError(DiaryError):
    """An error whose message may quote what a person or an agent asked (a query, an id),
    secrets included: the message is redacted as a diary is."""

    def __init__(self, message: str) -> None:
        from otel_diary.pipeline.redact import redact  # loaded by a reader already

        super().__init__(redact(message))


class SearchError(QuotingError):
    """A search the index cannot run, with a message meant for the person who typed it."""


class DecodeError(DiaryError, ValueError):
    """The payload is not an OTLP trace request; retrying it cannot help (HTTP 400)."""


class TooLarge(DiaryError, ValueError):
    """The payload exceeds the size cap (checked while inflating, not after; HTTP 413)."""
