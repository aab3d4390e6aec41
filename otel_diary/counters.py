"""Counters and log-once: how every stage reports what it did and what went wrong.

One mechanism serves every component: :class:`Counters` holds named numbers (and
labelled ones, for the receiver's ``/metrics``) that any thread may bump; a component
declares the names it counts as annotated class attributes. :class:`LogOnce` logs the
first failure of each kind with its traceback and later ones at debug level, so a
broken sink or model never floods an app's log.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar

logger = logging.getLogger("otel_diary")


class Counters:
    """Named counters of one component; read them, never reset them.

    Usage::

        class HubStats(Counters):
            delivered: int
            last_retry_delay_s: float

        stats = HubStats()
        stats.add("delivered")            # safe from any thread
        stats.delivered                   # 1
        stats.as_dict()                   # {"delivered": 1, "last_retry_delay_s": 0.0}
        stats.add("requests_rejected_total:reason", "too_large")   # a labelled counter

    A declared counter is a plain attribute, so the thread that owns a component may
    also write ``stats.delivered += 1``. Labelled counters are listed by :meth:`items`.
    """

    names: ClassVar[tuple[str, ...]] = ()
    """The declared counters, in declaration order (set for each subclass)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared: dict[str, None] = dict.fromkeys(cls.names)
        for name, annotation in vars(cls).get("__annotations__", {}).items():
            if "ClassVar" not in str(annotation):
                declared[name] = None
        cls.names = tuple(declared)

    def __init__(self, **initial: float) -> None:
        floats = self._float_names()
        for name in self.names:
            setattr(self, name, 0.0 if name in floats else 0)
        for name, value in initial.items():
            if name not in self.names:
                raise TypeError(f"{type(self).__name__} has no counter {name!r}")
            setattr(self, name, value)
        self._labelled: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    @classmethod
    def _float_names(cls) -> frozenset[str]:
        found: set[str] = set()
        for klass in cls.__mro__:
            for name, annotation in vars(klass).get("__annotations__", {}).items():
                if str(annotation) in ("float", "'float'"):
                    found.add(name)
        return frozenset(found)

    def add(self, name: str, label: str = "", amount: int = 1) -> None:
        """Add ``amount`` to a declared counter, or to the labelled counter ``name{label}``."""
        with self._lock:
            if not label and name in self.names:
                setattr(self, name, getattr(self, name) + amount)
            else:
                key = (name, label)
                self._labelled[key] = self._labelled.get(key, 0) + amount

    def get(self, name: str, label: str = "") -> float:
        """A counter's value (0 for one never counted)."""
        if not label and name in self.names:
            return float(getattr(self, name))
        with self._lock:
            return self._labelled.get((name, label), 0)

    def items(self) -> list[tuple[tuple[str, str], int]]:
        """The labelled counters as ``((name, label), value)``, sorted."""
        with self._lock:
            return sorted(self._labelled.items())

    def as_dict(self) -> dict[str, Any]:
        """The declared counters by name."""
        return {name: getattr(self, name) for name in self.names}

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.as_dict().items())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Counters)
        return self.as_dict() == other.as_dict() and self.items() == other.items()

    __hash__ = None  # type: ignore[assignment]


class LogOnce:
    """Logs the first failure of each kind with its traceback, later ones at debug level.

    Call it inside an ``except`` block: ``log_once("sink:FolderSink", "sink %s failed", name)``.
    """

    def __init__(self, log: logging.Logger = logger) -> None:
        self._log = log
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def _first(self, kind: str) -> bool:
        with self._lock:
            first = kind not in self._seen
            self._seen.add(kind)
        return first

    def __call__(self, kind: str, message: str, *args: object,
                 exc: BaseException | None = None, trace: bool = True) -> None:
        """Log the exception being handled, or ``exc``; with its traceback unless not
        ``trace`` (when the message says all there is)."""
        exc_info = (exc or True) if trace else None
        if self._first(kind):
            self._log.error(message + " (further errors of this kind are logged at debug)",
                            *args, exc_info=exc_info)
        else:
            self._log.debug(message, *args, exc_info=exc_info)

    def warning(self, kind: str, message: str, *args: object) -> None:
        """A condition (not an exception) worth one warning: the first time a warning,
        then debug lines."""
        if self._first(kind):
            self._log.warning(message, *args)
        else:
            self._log.debug(message, *args)
