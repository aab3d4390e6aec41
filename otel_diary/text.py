"""Text helpers shared by every stage: one line, a cut at a boundary, timestamps, links.

Values that came from a span are hostile: :func:`clean` drops what a YAML stream or a
reader's eye cannot take, :func:`one_line` flattens and caps, :func:`cut` shortens prose
at a sentence or word boundary. A trace-link template is checked once, when it is set.
:func:`read_text` reads a file of the knowledge base without ever waiting on it, and
:func:`knowledge_files` lists those a planted symbolic link does not lead out of it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import string
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# Characters a YAML stream may not carry raw, and those that show nothing: every format
# character (Unicode category Cf: zero-width, bidi controls, soft hyphen, word joiner,
# tags...) and the other default-ignorable ones (variation selectors, fillers), which
# could hide text or split a secret that redaction would otherwise recognize.
_HIDDEN = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200e\u200f\u2028-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0d\ufeff\uffa0\ufff0-\uffff\ud800-\udfff\U000110bd"
    "\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff")
_SHAPING = "\u200c\u200d\ufe0e\ufe0f"
"""Zero-width non-joiner and joiner (part of the spelling of Persian and of Indic scripts,
and of emoji sequences: 👩‍💻), text and emoji presentation (❤️)."""
_HIDDEN_ONLY = re.compile(f"[{_HIDDEN}]")
_WIDE = f"[^\\x00-\\x7f\\s{_HIDDEN}{_SHAPING}]"
"""A visible character past ASCII, not a space."""
_UNSHAPING = re.compile(
    f"(?<!{_WIDE})(?<!{_WIDE}[\ufe0e\ufe0f])[\u200c\u200d]|[\u200c\u200d](?!{_WIDE})"
    f"|(?<!{_WIDE})[\ufe0e\ufe0f]|[\ufe0e\ufe0f](?=[\ufe0e\ufe0f])")
"""A joiner or a selector that shapes nothing: a joiner not between two visible characters
past ASCII (or such a character and its selector), a selector not after one, or before
another selector (a run of them can carry hidden bytes)."""


_ASCII_CONTROLS = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
"""The ASCII part of ``_HIDDEN``."""


def clean(text: str) -> str:
    """``text`` without characters that a YAML stream or a reader's eye cannot take; a
    joiner or a presentation selector shaping visible characters past ASCII stays. Next to
    ASCII it goes: it could split a secret, and secrets are ASCII."""
    if text.isascii():  # the common case: one pass in C instead of the regex engine's
        data = text.encode("ascii")
        kept = data.translate(None, _ASCII_CONTROLS)
        return text if len(kept) == len(data) else kept.decode("ascii")
    text = _HIDDEN_ONLY.sub("", text)
    return _UNSHAPING.sub("", text) if any(char in text for char in _SHAPING) else text


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (JSON and ``surrogateescape`` can carry one, UTF-8
    cannot) as U+FFFD."""
    if text.isascii():
        return text
    return text.encode(errors="surrogatepass").decode(errors="replace")


def one_line(text: str, limit: int) -> str:
    """``text`` as one line of at most ``limit`` characters."""
    if text.isascii() and text.isprintable() and "  " not in text and \
            text[:1] != " " and text[-1:] != " ":
        flat = text  # printable ASCII, single spaces inside only: one line already
    else:
        flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a sentence end, else at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    sentence_end = max(head.rfind(". "), head.rfind("! "), head.rfind("? "))
    if head.endswith((".", "!", "?")):
        return head
    if sentence_end >= limit // 3:
        return head[: sentence_end + 1]
    space = head.rfind(" ", 0, limit - 1)
    return (head[:space] if space > 0 else head[: limit - 1]).rstrip(" ,;:") + "…"


def sha256_hex(text: str) -> str:
    """The SHA-256 of ``text`` in UTF-8 (an unpaired surrogate replaced), in hex. OpenSSL
    (``hashlib``) is loaded by the first call, not by importing otel-diary."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def utc_stamp(end_ns: int) -> tuple[str, str]:
    """``end_ns`` as the diaries' ``created`` stamp (UTC, milliseconds) and its UTC date."""
    seconds, nanos = divmod(max(end_ns, 0), 1_000_000_000)
    try:
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        moment = datetime(9999, 12, 31, tzinfo=timezone.utc)
    # Formatted by hand: strftime is the slowest part of a diary's header. Years are
    # 1970..9999 here, so four digits, as %Y writes them.
    date = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    stamp = (f"{date}T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
             f".{nanos // 1_000_000:03d}Z")
    return stamp, date


PLACEHOLDERS = frozenset({"trace_id", "span_id"})


def check_trace_url_template(template: str) -> str:
    """``template`` unchanged when it only uses the known placeholders, else ``ValueError``."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:  # a lone "{" or "}"
        raise ValueError(f"trace URL template {template!r}: {exc} "
                         "(write literal braces as '{{' and '}}')") from None
    for _literal, name, spec, conversion in fields:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            raise ValueError(f"trace URL template {template!r} has an unknown placeholder "
                             f"{{{name}}}; use {{trace_id}} and {{span_id}}")
        if spec or conversion:
            raise ValueError(f"trace URL template {template!r}: write {{{name}}} without "
                             "a conversion or format spec")
    return template


_HEADER_VALUE = re.compile(r"[!-~](?:[ -~]{0,8190}[!-~])?")


def check_header_value(value: str, what: str = "the value") -> str:
    """``value`` when it can be sent as an HTTP header value; ``ValueError`` otherwise.

    The message never repeats ``value`` (it is usually a secret).
    """
    if not _HEADER_VALUE.fullmatch(value):
        raise ValueError(f"{what} must be printable ASCII without leading or trailing "
                         "spaces: it is sent as an HTTP header")
    return value


_AGE = re.compile(r"(\d{1,6})\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> str:
    """``--since`` as a ``created`` timestamp: a date, a date and time, or an age (``7d``)."""
    value = text.strip()
    age = _AGE.fullmatch(value.lower())
    if age:
        delta = timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
        try:
            moment = (now or datetime.now(timezone.utc)) - delta
        except OverflowError:  # before the year 1: every diary is newer
            moment = datetime.min.replace(tzinfo=timezone.utc)
    else:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{text!r} is not a date (2026-11-30), a UTC time (2026-11-30T12:00) or an "
                "age (30m, 12h, 7d, 2w)") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
    try:
        moment = moment.astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:00+01:00, 9999-12-31T23:00-02:00
        raise ValueError(f"{text!r} is out of range (years 1 to 9999 in UTC)") from None
    # By hand: strftime writes the year 1 as "1", which sorts after every real stamp.
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
            f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z")


_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""``os.O_NOFOLLOW`` where the system has it, else nothing."""


def open_to_read(path: str | os.PathLike[str], *, follow: bool = True) -> int:
    """A descriptor reading ``path``, opened without waiting (a FIFO opens at once). With
    ``follow`` false, a symbolic link at ``path`` is an ``OSError`` (systems differ in
    which)."""
    if not follow and not NOFOLLOW and os.path.islink(path):
        raise OSError(errno.ELOOP, "a symbolic link", os.fspath(path))
    return os.open(path, _READ if follow else _READ | NOFOLLOW)


def read_text(path: str | os.PathLike[str], errors: str = "strict", *,
              follow: bool = True, within: Path | None = None,
              max_bytes: int | None = None) -> str:
    """The UTF-8 text of the regular file at ``path``. Never waits: a FIFO, socket or
    device found there (anyone may drop one into a knowledge-base folder), or a folder,
    is an ``OSError`` naming ``path``, as a missing file is. With ``follow`` false, so is
    a symbolic link; with ``within`` (a resolved folder), a file the path led out of it
    to when opened (a folder or file swapped for a link after it was listed); with
    ``max_bytes``, a file larger than that once open (``EFBIG``; one that grows while it
    is read is read no further than that many characters)."""
    fd = open_to_read(path, follow=follow)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        if max_bytes is not None and status.st_size > max_bytes:
            raise OSError(errno.EFBIG, "larger than a document can be", os.fspath(path))
        if within is not None and not _is_under(_opened(fd, path), os.fspath(within)):
            raise OSError(errno.EXDEV, "outside the knowledge base", os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    with open(fd, encoding="utf-8", errors=errors) as handle:  # closes fd, even on error
        if max_bytes is None:
            return handle.read()
        text = handle.read(max_bytes + 1)
    if len(text) > max_bytes:
        raise OSError(errno.EFBIG, "larger than a document can be", os.fspath(path))
    return text


def _opened(fd: int, path: str | os.PathLike[str]) -> str:
    """Where the file open as ``fd`` is (the kernel's answer where there is one)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _is_under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def inside(path: Path, base: Path, *, strict: bool = False) -> bool:
    """Whether ``path``, its symbolic links followed, is in the folder ``base`` (resolved);
    when ``strict``, only if it exists (a dangling link or a loop of links is not)."""
    try:
        return path.resolve(strict=strict).is_relative_to(base)
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
        return False


def knowledge_files(folder: Path, base: Path, *, recursive: bool = True) -> list[Path]:
    """The ``*.md`` files under ``folder`` (in its subfolders too when ``recursive``),
    sorted, that are in ``base``, the knowledge base's folder (resolved): none when
    ``folder`` leads out of it, and a file that is a symbolic link only when it leads to
    a file inside (not a dangling link or a loop). Anyone may plant a link in a shared
    folder; what it points to is not the knowledge base's to show."""
    if not folder.is_dir() or not inside(folder, base):
        return []
    files = sorted(folder.rglob("*.md") if recursive else folder.glob("*.md"))
    return [file for file in files if not file.is_symlink() or inside(file, base, strict=True)]
