"""Fork safety: objects that own threads, locks, sockets or database handles renew them in
a child process, so a prefork server (gunicorn, Celery, multiprocessing) never shares
them with its parent.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Protocol

logger = logging.getLogger("otel_diary")


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


def renew_after_fork(owner: ForkAware) -> None:
    """Call ``owner._after_fork_in_child()`` in every child forked from now on.

    The hook holds ``owner`` through a weak reference, so it never keeps it alive. Does
    nothing where ``fork`` does not exist.
    """
    register = getattr(os, "register_at_fork", None)
    if register is None:  # pragma: no cover - not POSIX
        return
    ref = weakref.ref(owner)

    def after_in_child() -> None:
        target = ref()
        if target is None:
            return
        try:
            target._after_fork_in_child()
        except Exception:  # a fork must never fail because of a diary
            logger.debug("otel-diary could not renew %s after fork", type(target).__name__,
                         exc_info=True)

    register(after_in_child=after_in_child)
