"""The delivery spool: diaries waiting for the knowledge hub, one JSON file each.

A diary is on disk (written atomically, then synced) from the moment the hub sink takes it
until the hub acknowledges it, so a process that dies or restarts loses nothing: the next
one delivers what is left. Bounded in entries and bytes. A delivery holds a lock on its
entry, so processes sharing a spool never send one diary at the same time; what the hub
refuses moves to ``failed/`` with the hub's answer (as it is when that cannot be written),
and so does an entry that cannot be read, its bytes kept. ``failed/`` has its own bound
(the oldest refused entries make room for new ones), so refusals never stop new diaries.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import logging
import os
import re
import stat
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from otel_diary.counters import LogOnce
from otel_diary.errors import SpoolFullError
from otel_diary.runner import renew_after_fork
from otel_diary.sinks.base import atomic_write
from otel_diary.text import open_to_read, sha256_hex

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("otel_diary")

SPOOL_VERSION = 1
FAILED_DIR = "failed"
SUFFIX = ".json"
_STALE_TEMP_S = 300.0
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_aside_names = itertools.count()
_ASIDE = re.compile(r"\.(.+\.json)\.([0-9]+)\.[0-9]+\.tmp")
"""A file taken aside (or being written) under an entry's name: ``.<name>.<pid>.<n>.tmp``."""


@dataclass(frozen=True)
class Entry:
    """One spooled diary as the directory shows it (the content is read on claim)."""

    id: str
    path: Path
    size: int
    mtime_ns: int

    @property
    def spooled_at(self) -> datetime:
        return datetime.fromtimestamp(self.mtime_ns / 1e9, tz=timezone.utc)

    def load(self) -> dict[str, Any] | None:
        """The entry's record, ``None`` when it is gone or unreadable."""
        try:
            return _parse(self.path.read_bytes())
        except OSError:
            return None


class Claim:
    """An entry locked for delivery by this process; ``record`` is ``None`` if unreadable."""

    def __init__(self, entry: Entry, fd: int, inode: int, record: dict[str, Any] | None):
        self.entry = entry
        self.record = record
        self._fd: int | None = fd
        self._inode = inode

    @property
    def id(self) -> str:
        return self.entry.id

    def still_current(self) -> bool:
        """True while the entry's path still names the file this claim locked."""
        return self.holds(self.entry.path)

    def holds(self, path: Path) -> bool:
        """True when ``path`` names the file this claim locked."""
        try:
            return os.stat(path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Unlock (idempotent): another deliverer may take the entry from now on."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass(frozen=True)
class Requeued:
    """What :meth:`Spool.requeue_failed` did."""

    moved: int
    """Refused entries now waiting again."""
    superseded: int
    """Refused entries dropped: a newer version of each was waiting."""
    left: int = 0
    """Refused entries left in ``failed/`` because the spool was full (or failed)."""
    reason: str = ""
    """Why they were left."""


class Spool:
    """Diaries waiting for delivery under ``directory``; safe across threads and processes.

    Usage::

        spool = Spool(path, max_entries=10_000, max_bytes=256 << 20)
        spool.put("kh-...", {"path": ..., "content": ...})
        for entry in spool.pending():
            claim = spool.claim(entry)
            if claim is not None:
                ... deliver claim.record["body"] ...
                spool.done(claim)
    """

    def __init__(self, directory: str | os.PathLike[str], *, max_entries: int = 10_000,
                 max_bytes: int = 256 * 1024 * 1024, max_failed_entries: int = 1000) -> None:
        if max_entries <= 0 or max_bytes <= 0 or max_failed_entries <= 0:
            raise ValueError("spool bounds must be positive")
        self.directory = Path(directory)
        self.failed_directory = self.directory / FAILED_DIR
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_failed_entries = max_failed_entries
        """Most entries kept in ``failed/``; the oldest go beyond it (counted, logged once)."""
        self.failed_removed = 0
        """Refused entries removed from ``failed/`` to keep it within its bound."""
        self._failed_cap_logged = False
        self._log_once = LogOnce()
        self._lock = threading.Lock()
        self._claims: weakref.WeakSet[Claim] = weakref.WeakSet()
        renew_after_fork(self)
        try:
            self._make_directories()
        except OSError as exc:  # never fail the app at start: writes fail (and count) instead
            logger.warning("otel-diary cannot create the spool %s (%s); diaries for the "
                           "knowledge hub are not kept until it can", self.directory, exc)
        self._remove_stale_temp_files()
        self._count, self._bytes = self._measure()

    # -- writing ------------------------------------------------------------------------

    def put(self, ident: str, body: dict[str, Any]) -> Path:
        """Spool ``body`` under ``ident`` (replacing a waiting entry of the same id).

        Raises :class:`SpoolFullError` over the bounds and ``OSError`` when the disk fails.
        """
        record = {"version": SPOOL_VERSION, "id": ident, "spooled_at": _now_iso(),
                  "body": body}
        data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        path = self.directory / (file_stem(ident) + SUFFIX)
        self._store(path, data)
        return path

    def _store(self, path: Path, data: bytes, *, replace: bool = True) -> None:
        """Write an entry within the bounds; with ``replace`` false, ``FileExistsError``
        when one waits under its name (then it is left as it is)."""
        with self._lock:
            try:
                replaced = path.stat().st_size
            except FileNotFoundError:
                replaced = None
            if replaced is not None and not replace:
                raise FileExistsError(errno.EEXIST, "an entry waits under this name", str(path))
            count = self._count + (0 if replaced is not None else 1)
            size = self._bytes + len(data) - (replaced or 0)
            if count > self.max_entries or size > self.max_bytes:
                raise SpoolFullError(
                    f"spool {self.directory} is full ({self._count} entries, {self._bytes} "
                    f"bytes; limits {self.max_entries} and {self.max_bytes})")
            self._make_directories()
            _keep(path, data, replace=replace)
            self._count, self._bytes = count, size

    # -- reading ------------------------------------------------------------------------

    def pending(self) -> list[Entry]:
        """Entries waiting for delivery, oldest first (also refreshes the bound counters)."""
        with self._lock:  # a put between the scan and the update would be lost otherwise
            entries = _scan(self.directory)
            self._count = len(entries)
            self._bytes = sum(e.size for e in entries)
        return entries

    def failed(self) -> list[Entry]:
        """Entries the hub refused, oldest first."""
        return _scan(self.failed_directory)

    def __len__(self) -> int:
        """Entries waiting for delivery."""
        return len(_scan(self.directory))

    @property
    def waiting(self) -> int:
        """Entries waiting for delivery as this process counts them (no directory scan:
        entries another process spooled count from the next delivery pass)."""
        return self._count

    # -- delivering ---------------------------------------------------------------------

    def claim(self, entry: Entry) -> Claim | None:
        """Lock ``entry`` for delivery; ``None`` if it is gone or another process has it."""
        try:  # never through a link, nor waiting on a FIFO swapped in since the scan
            fd = open_to_read(entry.path, follow=False)
        except OSError as exc:  # the next entries are delivered meanwhile
            if exc.errno not in _GONE:
                self._log_once.warning(f"unreadable:{exc.errno}", "otel-diary cannot read "
                                       "the spooled diary %s (%s); it stays in the spool",
                                       entry.path, exc.strerror or exc)
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return None
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return None
            inode = os.fstat(fd).st_ino
            claim = Claim(entry, fd, inode, None)
            if not claim.still_current():  # delivered (or replaced) while we opened it
                claim.release()
                return None
            with os.fdopen(os.dup(fd), "rb") as handle:
                claim.record = _parse(handle.read())
            self._claims.add(claim)
            return claim
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise

    def done(self, claim: Claim) -> None:
        """The hub acknowledged ``claim``: forget it (unless it was replaced meanwhile),
        and an older version of it the hub refused (sent again, it would replace this one)."""
        try:
            with self._taken(claim) as aside:
                if aside is not None:
                    with contextlib.suppress(FileNotFoundError):  # another took it back
                        aside.unlink()
            refused = self.failed_directory / claim.entry.path.name
            if claim.record is not None and refused.exists():
                older = _parse(_read(refused))
                if older is not None and str(older.get("spooled_at", "")) < str(
                        claim.record.get("spooled_at", "")):
                    with contextlib.suppress(OSError):
                        refused.unlink()
        finally:
            claim.release()

    def fail(self, claim: Claim, status: int | None, answer: str) -> Path:
        """The hub refused ``claim``: move it to ``failed/`` with the hub's answer. An entry
        that cannot be read, or whose answer cannot be written (a full disk), moves as it
        is. ``OSError`` when it cannot be moved at all: it stays waiting."""
        try:
            target = self.failed_directory / claim.entry.path.name
            self._make_directories()
            recorded = False
            if claim.record is not None:
                record = {**claim.record, "answer": {"status": status, "text": answer,
                                                     "at": _now_iso()}}
                try:
                    _keep(target, json.dumps(record, ensure_ascii=False).encode("utf-8"))
                    recorded = True
                except OSError as exc:
                    self._log_once.warning(
                        f"answer:{exc.errno}", "otel-diary cannot write the hub's answer "
                        "beside the refused diary %s (%s); it is set aside as it was",
                        claim.entry.path, exc.strerror or exc)
            with self._taken(claim) as aside:
                if aside is not None:
                    if recorded:
                        with contextlib.suppress(FileNotFoundError):  # another took it back
                            aside.unlink()
                    else:
                        with contextlib.suppress(FileNotFoundError):  # another took it back
                            os.rename(aside, target)
            self._trim_failed()
            return target
        finally:
            claim.release()

    @contextlib.contextmanager
    def _taken(self, claim: Claim) -> Iterator[Path | None]:
        """The claimed file, renamed from its entry's name to a hidden one for the caller
        to delete or move on; ``None`` when that name holds a newer version by now.

        Renaming first, then checking what was renamed, means a newer version spooled at
        any moment is never what goes: whatever is still aside at the end (that version,
        or this one after an error) goes back under the name, unless a newer one took it.
        """
        path = claim.entry.path
        aside = path.with_name(f".{path.name}.{os.getpid()}.{next(_aside_names)}.tmp")
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            yield None
            return
        size = 0
        try:
            size = os.stat(aside).st_size
            yield aside if claim.holds(aside) else None
        finally:
            if os.path.lexists(aside):
                _put_back(aside, path)
            else:
                with self._lock:
                    self._count = max(self._count - 1, 0)
                    self._bytes = max(self._bytes - size, 0)

    def _trim_failed(self) -> None:
        """Remove the oldest refused entries beyond ``max_failed_entries``."""
        excess = _scan(self.failed_directory)[: -self.max_failed_entries]
        removed = 0
        for entry in excess:
            with contextlib.suppress(FileNotFoundError):
                entry.path.unlink()
                removed += 1
        if not removed:
            return
        self.failed_removed += removed
        if not self._failed_cap_logged:
            self._failed_cap_logged = True
            logger.warning("otel-diary removed the oldest %d diar%s the knowledge hub refused "
                           "from %s (it keeps at most %d); further removals are counted only",
                           removed, "y" if removed == 1 else "ies", self.failed_directory,
                           self.max_failed_entries)

    def requeue_failed(self) -> Requeued:
        """Move the refused entries back to the waiting ones, oldest first, within the
        bounds (what does not fit stays in ``failed/``). A refused entry a newer version
        of which waits is dropped: the newer one is sent. One that cannot be read stays."""
        moved = superseded = 0
        refused = self.failed()
        for tried, entry in enumerate(refused):
            record = entry.load()
            if record is None:
                continue
            record.pop("answer", None)
            data = json.dumps(record, ensure_ascii=False).encode("utf-8")
            try:
                self._store(self.directory / entry.path.name, data, replace=False)
            except FileExistsError:
                superseded += 1
            except (SpoolFullError, OSError) as exc:
                return Requeued(moved, superseded, len(refused) - tried, str(exc))
            else:
                moved += 1
            with contextlib.suppress(FileNotFoundError):
                entry.path.unlink()
        return Requeued(moved, superseded)

    # -- housekeeping -------------------------------------------------------------------

    def _make_directories(self) -> None:
        if not self.failed_directory.is_dir():
            self.failed_directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _measure(self) -> tuple[int, int]:
        entries = _scan(self.directory)
        return len(entries), sum(entry.size for entry in entries)

    def _after_fork_in_child(self) -> None:
        """A lock another thread held at the fork is never released here: a new one. The
        claims of the parent's deliveries stay the parent's."""
        self._lock = threading.Lock()
        for claim in list(self._claims):
            claim.release()  # closes this process's copy only: the parent's lock holds
        self._claims = weakref.WeakSet()

    def _remove_stale_temp_files(self) -> None:
        """Half-written files of a process that died mid-write (never visible as entries)
        are removed; a whole entry a process that died had taken aside to deliver or
        refuse goes back under its name, unless a newer version took it. A process still
        running keeps its files (one delivering an entry spooled long ago renames it aside
        with its old mtime)."""
        cutoff = time.time() - _STALE_TEMP_S
        for folder in (self.directory, self.failed_directory):
            for path in folder.glob(".*.tmp"):
                with contextlib.suppress(OSError):
                    name = _ASIDE.fullmatch(path.name)
                    if name is not None:  # its process's: left to it while it runs
                        if _alive(int(name.group(2))):
                            continue
                    elif path.stat().st_mtime >= cutoff:
                        continue
                    if name is not None and _parse(_read(path)) is not None:
                        _put_back(path, path.with_name(name.group(1)))
                    else:
                        path.unlink()


def file_stem(ident: str) -> str:
    """A file name for ``ident``: itself when it is a plain id, else a digest of it."""
    if _SAFE_ID.fullmatch(ident):
        return ident
    return "id-" + sha256_hex(ident)[:32]


def _keep(path: Path, data: bytes, *, replace: bool = True) -> None:
    """Write a spool file atomically, synced to disk, readable by this user alone."""
    atomic_write(path, data, durable=True, replace=replace, mode=0o600)


def _put_back(aside: Path, path: Path) -> None:
    """Give the file at ``aside`` its entry's name back, unless a newer version took it."""
    try:
        os.link(aside, path)
    except FileExistsError:  # superseded: the newer version is sent instead
        os.unlink(aside)
    except OSError:  # a file system without hard links
        os.rename(aside, path)
    else:
        os.unlink(aside)


_GONE = (errno.ENOENT, errno.ELOOP, errno.EMLINK)
"""An entry deleted, or swapped for a link (systems differ in which error they give)."""


def _scan(directory: Path) -> list[Entry]:
    entries: list[Entry] = []
    try:
        iterator = os.scandir(directory)
    except OSError:  # missing or unreadable: nothing to deliver from it
        return entries
    with iterator:
        for item in iterator:
            name = item.name
            if name.startswith(".") or not name.endswith(SUFFIX):
                continue
            try:
                info = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not item.is_file(follow_symlinks=False):
                continue
            entries.append(Entry(name[: -len(SUFFIX)], Path(item.path), info.st_size,
                                 info.st_mtime_ns))
    entries.sort(key=lambda entry: (entry.mtime_ns, entry.id))
    return entries


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> bytes:
    """The bytes of a spool file (none when it is gone or unreadable)."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):  # damaged: not JSON, or nested past the stack
        return None
    if not isinstance(record, dict) or not isinstance(record.get("body"), dict):
        return None
    return record


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

