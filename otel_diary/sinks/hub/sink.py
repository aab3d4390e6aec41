"""The knowledge-hub sink: each diary POSTed to ``<MOTHER_AI_URL>/v1/kb/edit``.

:meth:`HubSink.write` only spools the diary (a durable file) and wakes a delivery thread,
so the pipeline never waits on the network. That thread sends spooled diaries oldest
first, each call within its deadline; a refusal of the document itself (400, 409, 413,
415, 422) is logged with the hub's answer and set aside in ``failed/``; every other
answer, connection errors and timeouts are retried with exponential backoff and jitter
(honouring ``Retry-After``); an acknowledged diary leaves the spool. Any other error
while sending counts as retryable. An entry that cannot be read is set aside as it is;
one the disk fails on waits with a backoff of its own while the others go on. Its HTTP
calls run with instrumentation suppressed; URLs and the hub's answers are redacted
before they are logged or kept. A process forked from one with a hub sink gets its own
client and delivery thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from otel_diary.counters import Counters, LogOnce
from otel_diary.errors import SpoolFullError
from otel_diary.pipeline.redact import display_url
from otel_diary.pipeline.render import Diary
from otel_diary.runner import Runner, renew_after_fork
from otel_diary.sinks.hub.client import (
    Attempt,
    Backoff,
    HubClient,
    Outcome,
    Sender,
    hub_body,
)
from otel_diary.sinks.hub.spool import Entry, Spool

logger = logging.getLogger("otel_diary")

_POLL_S = 2.0
"""How often an idle delivery thread looks for entries spooled by another process."""


class HubStats(Counters):
    """Counters of the hub sink; read them, never reset them."""

    spooled: int
    delivered: int
    rejected: int
    retries: int
    spool_full: int
    spool_errors: int
    failed_removed: int
    """Refused diaries removed from ``failed/`` (oldest first) to keep it bounded."""
    last_retry_delay_s: float


@dataclass(frozen=True)
class PassResult:
    """One pass over the spool: what it did, and how long to wait after a retryable failure."""

    delivered: int = 0
    rejected: int = 0
    skipped: int = 0
    """Entries another deliverer had, or held back after an error here."""
    retry_in: float | None = None
    failure: str = ""


class Deliverer:
    """Sends what waits in a spool, oldest first; shared by the delivery thread and the CLI."""

    def __init__(self, spool: Spool, client: Sender, backoff: Backoff,
                 stats: HubStats | None = None, label: str = "the knowledge hub") -> None:
        self.label = label
        self.spool = spool
        self.client = client
        self.backoff = backoff
        self.stats = stats or HubStats()
        self._held: dict[str, tuple[float, Backoff]] = {}
        """Entries that failed here, by id: when each may be tried again, and its backoff."""
        self._log_once = LogOnce()

    def deliver_pass(self, deadline: float | None = None) -> PassResult:
        """Try every waiting entry once; stop at the first retryable failure or ``deadline``.

        ``deadline`` is a ``time.monotonic()`` value; each call's timeout ends by it. An
        entry that fails here rather than at the hub (a disk error while reading it or
        setting it aside) is logged once and held back with a backoff of its own, while
        the others go on.
        """
        delivered = rejected = skipped = 0
        entries = self.spool.pending()
        if self._held:  # entries delivered or removed since are forgotten
            waiting = {entry.id for entry in entries}
            self._held = {k: held for k, held in self._held.items() if k in waiting}
        for entry in entries:
            timeout = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                timeout = min(self.client.timeout_s, remaining)
            attempt = None
            if not self._held_back(entry):
                try:
                    attempt = self._deliver_one(entry, timeout)
                except Exception as exc:
                    self._hold(entry, exc)
            if attempt is None:
                skipped += 1
            elif attempt.outcome is Outcome.DELIVERED:
                delivered += 1
            elif attempt.outcome is Outcome.REJECTED:
                rejected += 1
            else:
                self.stats.retries += 1
                delay = self.backoff.next(attempt.retry_after)
                self.stats.last_retry_delay_s = delay
                return PassResult(delivered, rejected, skipped, delay,
                                  f"diary {entry.id}: {attempt.detail}")
        return PassResult(delivered, rejected, skipped)

    def _deliver_one(self, entry: Entry, timeout: float | None) -> Attempt | None:
        """Send one entry and settle it; ``None`` when another deliverer has it."""
        claim = self.spool.claim(entry)
        if claim is None:
            return None
        try:  # whatever happens, the entry is unlocked for the next attempt
            if claim.record is None:
                target = self.spool.fail(claim, None, "unreadable spool entry")
                self.stats.rejected += 1
                self.stats.failed_removed = self.spool.failed_removed
                logger.warning("otel-diary set aside an unreadable spool entry %s; its bytes "
                               "are kept in %s", entry.path, target)
                return Attempt(Outcome.REJECTED, detail="unreadable spool entry")
            attempt = self.client.send(claim.id, claim.record["body"], timeout)
            if attempt.outcome is Outcome.DELIVERED:
                self.stats.delivered += 1  # counted first: flush() returns once it is gone
                self.backoff.reset()
                self.spool.done(claim)
            elif attempt.outcome is Outcome.REJECTED:
                self.stats.rejected += 1
                target = self.spool.fail(claim, attempt.status, attempt.detail)
                self.stats.failed_removed = self.spool.failed_removed
                logger.warning("%s refused diary %s (%s); not retried, kept in %s",
                               self.label, claim.id, attempt.detail, target)
            return attempt
        finally:
            claim.release()

    def _held_back(self, entry: Entry) -> bool:
        held = self._held.get(entry.id)
        return held is not None and time.monotonic() < held[0]

    def _hold(self, entry: Entry, exc: Exception) -> None:
        """Hold ``entry`` back after ``exc``, longer each time; the first of a kind is
        logged with its traceback, the others at debug."""
        _, backoff = self._held.get(entry.id) or (
            0.0, Backoff(self.backoff.initial_s, self.backoff.maximum_s))
        delay = backoff.next()
        self._held[entry.id] = (time.monotonic() + delay, backoff)
        self._log_once(f"entry:{type(exc).__name__}", "otel-diary could not deliver or set "
                       "aside the spooled diary %s (%s); it stays in the spool, tried again "
                       "in %.1fs", entry.path, exc, delay, exc=exc)


class HubSink:
    """Delivers diaries to a knowledge hub through a durable spool and a delivery thread.

    Usage::

        sink = HubSink("https://hub.example", api_key="...", spool_dir="/var/lib/diary/spool")
        pipeline = Pipeline(conventions, [FolderSink(root), sink])

    ``write`` returns once the diary is on disk; ``flush`` waits for the spool to empty;
    ``close`` delivers what it can within ``shutdown_timeout_s`` and leaves the rest for
    the next process. Entries left by an earlier process are delivered on start.

    Each diary is sent under the path ``path_of`` gives (the folder sink's, when there is
    one); without it, under ``diary.alternate_path``, which names the span, so two runs
    of one task on one day never share a hub path. In a forked child the sink gets a new
    HTTP client, and a new delivery thread with its first ``write`` or ``flush``.
    """

    kind = "hub"
    """What its metrics are labelled with (``sink="hub"``)."""

    def __init__(
        self,
        url: str,
        *,
        spool_dir: str | Path,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        initial_backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        max_entries: int = 10_000,
        max_bytes: int = 256 * 1024 * 1024,
        max_failed_entries: int = 1000,
        shutdown_timeout_s: float = 10.0,
        path_of: Callable[[Diary], str] | None = None,
        poll_s: float = _POLL_S,
        transport: httpx.BaseTransport | None = None,
        redactor: Callable[[str], str] | None = None,
        client: Sender | None = None,
        label: str = "the knowledge hub",
    ) -> None:
        if timeout_s <= 0 or shutdown_timeout_s < 0 or poll_s <= 0:
            raise ValueError("timeouts must be positive")
        self.url = url.rstrip("/")
        self.label = label
        """What the diaries are delivered to, for log lines."""
        # Any: the HTTP client's own attributes stay reachable (as they were) for the hub.
        self._client: Any = client if client is not None else HubClient(
            self.url, api_key=api_key, timeout_s=timeout_s, transport=transport,
            redactor=redactor)
        self.spool = Spool(spool_dir, max_entries=max_entries, max_bytes=max_bytes,
                           max_failed_entries=max_failed_entries)
        self.stats = HubStats()
        self.shutdown_timeout_s = shutdown_timeout_s
        self._path_of = path_of
        self._poll_s = poll_s
        self._deliverer = Deliverer(self.spool, self._client,
                                    Backoff(initial_backoff_s, max_backoff_s), self.stats,
                                    label)
        self._log_once = LogOnce()
        self._closed = False
        self._retry_at = 0.0
        self._tried_once_more = False
        self._failing = False
        self._thread_lock = threading.Lock()
        self._runner = Runner("otel-diary-hub", self._deliver, interval_s=poll_s)
        self._runner.start()
        self._needs_thread = False
        renew_after_fork(self)

    def _after_fork_in_child(self) -> None:
        """The parent's delivery thread does not exist here and its events and locks may
        be held: new ones, and a new thread once this process writes or flushes."""
        self._thread_lock = threading.Lock()
        self._runner.after_fork(restart=False)
        self._needs_thread = not self._closed

    def _ensure_thread(self) -> None:
        if not self._needs_thread:
            return
        with self._thread_lock:
            if self._needs_thread and not self._closed:
                self._runner.start()
            self._needs_thread = False

    # -- Sink -----------------------------------------------------------------------------

    def write(self, diary: Diary) -> str:
        self._ensure_thread()
        path = diary.alternate_path or diary.path  # unique per run, stable per span
        if self._path_of is not None:
            try:
                path = self._path_of(diary)
            except Exception:
                logger.debug("otel-diary could not resolve the folder path of %s", diary.id,
                             exc_info=True)
        return self._spool(diary.id, hub_body(diary, path), path)

    def write_lesson(self, ident: str, path: str, content: str, title: str) -> str:
        """Spool a lesson document (``source_type: lesson``); a newer version of one lesson
        replaces the one still waiting."""
        self._ensure_thread()
        body = {"path": path, "content": content, "source_type": "lesson", "title": title,
                "tags": ["lesson"], "metadata": {"id": ident}}
        return self._spool(ident, body, path)

    def _spool(self, ident: str, body: dict[str, Any], path: str) -> str:
        """Put a document in the spool (counted) and wake the delivery runner."""
        try:
            self.spool.put(ident, body)
        except SpoolFullError:
            self.stats.add("spool_full")
            self._log_once.warning("spool_full", "otel-diary spool %s is full: diaries for %s "
                                   "are dropped until it drains (see OTEL_DIARY_SPOOL_MAX_*)",
                                   self.spool.directory, self.label)
            raise
        except OSError:
            self.stats.add("spool_errors")
            raise
        self.stats.add("spooled")
        self._runner.wake()
        return f"hub:{path}"

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until nothing waits in the spool; False when ``timeout_s`` passed first."""
        self._ensure_thread()
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while True:
            if not self.spool.pending():
                return True
            if time.monotonic() >= deadline or not self._runner.alive:
                return False
            self._runner.wake()
            time.sleep(0.01)

    def close(self) -> None:
        """Deliver what can be delivered within ``shutdown_timeout_s``; idempotent."""
        self.close_within(self.shutdown_timeout_s)

    def close_within(self, timeout_s: float) -> None:
        """:meth:`close`, delivering for no longer than ``timeout_s`` (nor than
        ``shutdown_timeout_s``): what a shutdown with other work to do has left."""
        if self._closed:
            return
        self._closed = True
        # The client is closed once the delivery thread is done with it: a call that
        # outlasts the timeout ends first (a store's pool left open would make whoever
        # collects it wait on its threads).
        self._runner.stop(min(max(timeout_s, 0.0), self.shutdown_timeout_s),
                          then=self._client.close)
        waiting = len(self.spool)
        if waiting:
            logger.warning("otel-diary stopped with %d %s for %s in %s; the next start "
                           "delivers %s", waiting, "diary" if waiting == 1 else "diaries",
                           self.label, self.spool.directory, "it" if waiting == 1 else "them")

    # -- delivery thread --------------------------------------------------------------------

    def _once_more(self, wait: float) -> float | None:
        """At exit, the wait before one more try of a failing hub; none after that one."""
        if self._tried_once_more:
            return None
        self._tried_once_more = True
        return wait

    def _deliver(self, stopping: bool) -> float | None:
        """One round of the delivery runner: a pass over the spool, unless backing off.

        Returns the wait before the next round: the backoff after a retryable failure,
        else the poll interval. Once stopping, rounds go on while they deliver something
        and end at the runner's deadline; a failing hub is tried once more after its
        backoff (a passing 503), not through it (a hub that is down would hold the exit up
        for retries the next start makes: what waits is in the spool).
        """
        now = time.monotonic()
        if now < self._retry_at:  # backing off: new diaries wait too
            return self._once_more(self._retry_at - now) if stopping else self._retry_at - now
        result = self._deliverer.deliver_pass(self._runner.deadline if stopping else None)
        if result.retry_in is not None:
            self._retry_at = time.monotonic() + result.retry_in
            if not self._failing:
                self._failing = True
                logger.warning("otel-diary could not deliver to %s at %s (%s); diaries "
                               "wait in %s, retrying in %.1fs", self.label,
                               display_url(self.url), result.failure, self.spool.directory,
                               result.retry_in)
            else:
                logger.debug("%s still failing (%s); retrying in %.1fs", self.label,
                             result.failure, result.retry_in)
            return self._once_more(result.retry_in) if stopping else result.retry_in
        if self._failing and result.delivered:
            self._failing = False
            logger.info("otel-diary reached %s again", self.label)
        if stopping:  # done once a pass finds nothing more to send
            return 0.0 if result.delivered or result.rejected else None
        return None


