"""Test clients installed apart from the virtual environment: ``make`` puts each set in a
folder of its own, ``<venv>/<name>`` (see the Makefile), when its entry points or its pins
would clash with the environment's packages."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def folder(name: str) -> Path:
    """``<venv>/<name>``; when it is missing, the test fails in CI and is skipped
    elsewhere."""
    found = Path(sys.prefix) / name
    if not found.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{found} is missing: `make` installs it with the test set-up")
        pytest.skip(f"{found} is missing: `make` installs it with the test set-up")
    return found


def on_path(name: str) -> Iterator[None]:
    """:func:`folder` on ``sys.path`` meanwhile (for a fixture to yield from), and on the
    path of each package already imported that it adds modules to (``openinference.
    instrumentation``: a package of the environment's, whose path was set when it was
    imported)."""
    place = folder(name)
    sys.path.append(str(place))
    extended: list[tuple[list[str], str]] = []
    for package_name, package in list(sys.modules.items()):
        inside = str(place.joinpath(*package_name.split(".")))
        # read from the module's own namespace: a module's ``__getattr__`` may raise
        # anything for a name it lacks (Agno's ``_genai_compat``: ImportError)
        paths = getattr(package, "__dict__", {}).get("__path__")
        if isinstance(paths, list) and os.path.isdir(inside) and inside not in paths:
            paths.append(inside)
            extended.append((paths, inside))
    yield
    for paths, inside in extended:
        paths.remove(inside)
    sys.path.remove(str(place))
