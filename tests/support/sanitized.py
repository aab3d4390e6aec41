"""A pytest plugin that puts the sanitizer build of the C reader in place of the installed one.

``make sanitize`` (``tools/sanitize.sh``) builds ``otel_diary.receiver._otlpscan`` with
AddressSanitizer and UndefinedBehaviorSanitizer outside the package and runs tests with
``-p tests.support.sanitized``; ``OTLPSCAN_BUILD`` names the built file. The plugin loads
it before any test imports the decoder, so ``decode(..., native=True)`` reads with it,
and stops the run if the decoder ends up with another build.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

import pytest

_NAME = "otel_diary.receiver._otlpscan"


def _load(path: str) -> None:
    if _NAME in sys.modules:
        raise pytest.UsageError(f"{_NAME} was imported before the sanitizer build: "
                                f"{getattr(sys.modules[_NAME], '__file__', '?')}")
    loader = importlib.machinery.ExtensionFileLoader(_NAME, path)
    spec = importlib.util.spec_from_file_location(_NAME, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    loader.exec_module(module)
    import otel_diary.receiver as package

    package._otlpscan = module  # type: ignore[attr-defined]


_BUILD = os.environ.get("OTLPSCAN_BUILD", "")
if not _BUILD or not os.path.isfile(_BUILD):
    raise pytest.UsageError(f"OTLPSCAN_BUILD must name the sanitizer build (got {_BUILD!r})")
_load(_BUILD)


def pytest_report_header() -> str:
    return f"C reader: {_BUILD} (AddressSanitizer, UndefinedBehaviorSanitizer)"


def pytest_sessionstart(session: pytest.Session) -> None:
    from otel_diary.receiver import decode

    used = getattr(getattr(decode, "_otlpscan", None), "__file__", None)
    if not decode.NATIVE or decode.WIRE_RULES is None or used != _BUILD:
        raise pytest.UsageError(f"the decoder reads with {used!r}, not the sanitizer build")
