"""``otel-diary spool``: what waits for the knowledge hub, and ``--flush`` to deliver it.

Lists waiting and refused entries of the spool (``OTEL_DIARY_SPOOL_DIR``, by default
``<dir>/spool``). ``--flush`` delivers the waiting ones to ``MOTHER_AI_URL`` now, with the
same timeouts, retries and backoff as the delivery thread; exit status 0 when nothing
is left waiting, 1 otherwise. ``--retry-failed`` (refused entries back in the queue)
needs ``--flush``: alone it is a usage error, exit 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from otel_diary.runner import suppressed
from otel_diary.settings import Settings, check_base_url
from otel_diary.sinks.hub.client import Backoff, HubClient
from otel_diary.sinks.hub.sink import Deliverer
from otel_diary.sinks.hub.spool import Entry, Spool
from otel_diary.wiring import settings_redactor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help="knowledge-base root, whose spool is <dir>/spool "
                                      "(default: OTEL_DIARY_DIR or ~/.local/share/otel-diary)")
    parser.add_argument("--spool-dir", type=Path,
                        help="the spool (default: OTEL_DIARY_SPOOL_DIR or <dir>/spool)")
    parser.add_argument("--flush", action="store_true",
                        help="deliver the waiting diaries to the hub now")
    parser.add_argument("--retry-failed", action="store_true",
                        help="with --flush: also retry the diaries the hub refused")
    parser.add_argument("--hub-url", help="the hub (default: MOTHER_AI_URL)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="with --flush: give up after this many seconds (default 60)")


def run(args: argparse.Namespace) -> int:
    if args.retry_failed and not args.flush:
        print("otel-diary spool: --retry-failed only goes with --flush (it sends the refused "
              "diaries again): otel-diary spool --flush --retry-failed", file=sys.stderr)
        return 2
    settings = Settings(dir=args.dir) if args.dir else Settings()
    directory: Path = args.spool_dir or settings.spool_root
    if not directory.is_dir():
        print(f"spool {directory}: does not exist (nothing waits)")
        return 0
    spool = Spool(directory, max_entries=settings.spool_max_entries,
                  max_bytes=settings.spool_max_bytes)
    if args.flush:
        status = flush(spool, settings, args)
        if status is not None:
            return status
    show(spool)
    return 1 if args.flush and spool.pending() else 0


def flush(spool: Spool, settings: Settings, args: argparse.Namespace) -> int | None:
    """Deliver the waiting entries; an exit status when flushing cannot even start."""
    try:
        url = check_base_url(args.hub_url) if args.hub_url else settings.hub_url
    except ValueError as exc:
        print(f"otel-diary spool: {exc}")
        return 2
    if not url:
        print("otel-diary spool: no hub to flush to: set MOTHER_AI_URL or pass --hub-url")
        return 2
    if args.retry_failed:
        requeued = spool.requeue_failed()
        print(f"requeued {requeued.moved} refused {_diaries(requeued.moved)}")
        if requeued.superseded:
            print(f"dropped {requeued.superseded} refused {_diaries(requeued.superseded)}: "
                  "a newer version waits and is sent instead")
        if requeued.left:
            print(f"left {requeued.left} refused {_diaries(requeued.left)} in failed/: "
                  f"{requeued.reason}")
    key = settings.hub_api_key.get_secret_value() if settings.hub_api_key else None
    client = HubClient(url, api_key=key, timeout_s=settings.hub_timeout_s,
                       redactor=settings_redactor(settings))
    deliverer = Deliverer(spool, client, Backoff(settings.retry_initial_backoff_s,
                                                 settings.retry_max_backoff_s))
    deadline = time.monotonic() + max(args.timeout, 0.0)
    try:
        with suppressed():
            while spool.pending() and time.monotonic() < deadline:
                result = deliverer.deliver_pass(deadline)
                if result.retry_in is not None:
                    print(f"hub not accepting yet ({result.failure}); "
                          f"retrying in {result.retry_in:.1f}s")
                    time.sleep(max(min(result.retry_in, deadline - time.monotonic()), 0.0))
                elif result.skipped and not (result.delivered or result.rejected):
                    time.sleep(0.2)  # another process is delivering those, or they wait
    finally:
        client.close()
    stats = deliverer.stats
    print(f"delivered {stats.delivered}, refused {stats.rejected}, "
          f"{len(spool)} still waiting")
    return None


def show(spool: Spool) -> None:
    """Print the waiting and the refused entries, oldest first."""
    waiting = spool.pending()
    failed = spool.failed()
    size = sum(entry.size for entry in waiting)
    print(f"spool {spool.directory}: {len(waiting)} waiting ({_bytes(size)}), "
          f"{len(failed)} refused by the hub")
    for entry in waiting:
        print("  waiting  " + _describe(entry))
    for entry in failed:
        record = entry.load()
        answer = (record or {}).get("answer") or {}
        text = " ".join(str(answer.get("text", "")).split())[:160]
        if record is None:
            text = "damaged or not a spool entry: kept as it was found"
        print("  refused  " + _describe(entry) + (f"\n           {text}" if text else ""))


def _describe(entry: Entry) -> str:
    record = entry.load() or {}
    body = record.get("body") or {}
    stamp = entry.spooled_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"{entry.id}  {stamp}  {_bytes(entry.size):>9}  {body.get('path', '?')}"
            f"  {str(body.get('title', ''))[:60]!r}")


def _diaries(count: int) -> str:
    return "diary" if count == 1 else "diaries"


def _bytes(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
