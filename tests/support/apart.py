"""Test clients installed apart from the virtual environment: ``make`` puts each set in a
folder of its own, ``<venv>/<name>`` (see the Makefile), when its entry points or its pins
would clash with the environment's packages."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def on_path(name: str) -> Iterator[None]:
    """``<venv>/<name>`` on ``sys.path`` meanwhile (for a fixture to yield from); when it is
    missing, the test fails in CI and is skipped elsewhere."""
    folder = Path(sys.prefix) / name
    if not folder.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{folder} is missing: `make` installs it with the test set-up")
        pytest.skip(f"{folder} is missing: `make` installs it with the test set-up")
    sys.path.append(str(folder))
    yield
    sys.path.remove(str(folder))
