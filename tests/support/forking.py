"""Run a check in a child made with ``os.fork()``, as a prefork server would make it.

Usage::

    assert in_forked_child(lambda: sink.flush(10)) == 0
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable

import pytest

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32",
                                reason="needs os.fork (POSIX)")
"""Marks a test that forks."""

CHILD_FAILED = 1
CHILD_RAISED = 2
CHILD_HUNG = 3


def in_forked_child(check: Callable[[], bool], limit_s: float = 60.0) -> int:
    """Run ``check`` in a forked child; its exit status: 0 when it returned True,
    :data:`CHILD_FAILED` when False, :data:`CHILD_RAISED` when it raised, and
    :data:`CHILD_HUNG` when it had not ended after ``limit_s`` seconds (then it is killed)."""
    with warnings.catch_warnings():  # Python 3.12+ warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never return into the test runner
        code = CHILD_RAISED
        try:
            code = 0 if check() else CHILD_FAILED
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + limit_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return CHILD_HUNG
        time.sleep(0.02)
