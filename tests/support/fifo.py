"""A FIFO planted in a knowledge base, and a check that nothing waits on it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

needs_fifos = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def finishes(call: Callable[[], T], fifo: Path, within_s: float = 60.0) -> T:
    """What ``call()`` returns (or raises); the test fails when it is still running after
    ``within_s``, waiting on ``fifo`` (nothing ever writes into it), which is then let go."""
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(call())
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within_s)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the waiting reader goes on
        pytest.fail(f"waited on the FIFO {fifo}")
    if errors:
        raise errors[0]
    return results[0]
