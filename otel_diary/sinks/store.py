"""The store sink: diaries delivered to a shared store (PostgreSQL) through the spool.

:class:`StoreSink` is the hub sink's delivery path (durable spool, delivery thread, retry
with backoff, counters) with a :class:`StoreClient` in place of HTTP: ``write`` only
spools, so a store that is down or slow never holds up the pipeline, and diaries wait on
disk until it is back. Delivering a diary keeps it in the store (idempotent per id) and
counts it into its error's lesson (idempotent per diary); a diary the store refuses as
data is set aside in ``failed/``.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from otel_diary.errors import IndexUnavailable
from otel_diary.index.base import DiaryStore
from otel_diary.index.documents import entry_from_parts
from otel_diary.index.lessons import sighting
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.runner import suppressed
from otel_diary.sinks.hub.client import Attempt, Outcome
from otel_diary.sinks.hub.sink import HubSink

logger = logging.getLogger("otel_diary")


class StoreClient:
    """Keeps one spooled diary in ``store`` and says what came of it. Never raises."""

    def __init__(self, store: DiaryStore, timeout_s: float = 5.0) -> None:
        self.store = store
        self.timeout_s = timeout_s

    def send(self, ident: str, body: dict[str, Any], timeout_s: float | None = None) -> Attempt:
        if body.get("source_type") == "lesson":
            return Attempt(Outcome.DELIVERED)  # the store grows its own lessons
        try:
            path, content = str(body["path"]), str(body["content"])
            front = parse_front_matter(content)
            entry = entry_from_parts(path, front, content)
            found = sighting(path, front, content)
        except (KeyError, ValueError, TypeError) as exc:
            return Attempt(Outcome.REJECTED, detail=f"not a diary: {exc}")
        try:
            with suppressed():
                kept = self.store.add_diary(entry, content)  # another run may hold ``path``
                if found is not None:
                    self.store.add_lesson(found[0], replace(found[1], path=kept))
        except IndexUnavailable as exc:
            return Attempt(Outcome.RETRY, detail=str(exc))
        except ValueError as exc:
            return Attempt(Outcome.REJECTED, detail=str(exc))
        except Exception as exc:
            logger.debug("otel-diary store write failed unexpectedly", exc_info=True)
            return Attempt(Outcome.RETRY, detail=f"unexpected {type(exc).__name__}")
        return Attempt(Outcome.DELIVERED)

    def close(self) -> None:
        self.store.close()


class StoreSink(HubSink):
    """Delivers diaries to ``store`` through a durable spool and a delivery thread.

    Usage::

        store = PostgresStore(url)
        sink = StoreSink(store, spool_dir="/var/lib/otel-diary/spool/store")
    """

    kind = "store"

    def __init__(self, store: DiaryStore, *, spool_dir: str | Path,
                 timeout_s: float = 5.0, **options: Any) -> None:
        self.store = store
        super().__init__(store.where, spool_dir=spool_dir, timeout_s=timeout_s,
                         client=StoreClient(store, timeout_s), label="the store", **options)
