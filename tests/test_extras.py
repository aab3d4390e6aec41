"""What the ``serve`` extra adds: the processor and demo work without it; ``serve`` and
``replay`` name it when it is missing; ``dev`` pulls it in."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from otel_diary.cli.common import SERVE_MODULES

BLOCKED = ("grpc", "uvicorn", "httptools", "opentelemetry.proto", "google")
"""Top-level names of what the ``serve`` extra installs (``google``: protobuf and its types)."""

WITHOUT_EXTRA = f"""
import sys

class Absent:
    '''Makes the serve extra's modules look uninstalled.'''
    def find_spec(self, name, path=None, target=None):
        if name.startswith({BLOCKED!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Absent())
sys.argv[0] = "otel-diary"
"""


def python_without_extra(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRA + code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_processor_and_demo_work_without_the_serve_extra(tmp_path: Path) -> None:
    """Importing otel_diary and its zero-code hooks, a processor writing a diary and the
    demo need none of the extra."""
    done = python_without_extra(f"""
from opentelemetry.sdk.trace import TracerProvider
import otel_diary
import otel_diary.sources.autoinstrument, otel_diary.sources.exporter  # zero-code hooks
provider = TracerProvider(shutdown_on_exit=False)
otel_diary.install(provider, enabled=True, dir={str(tmp_path / "kb")!r})
with provider.get_tracer("app").start_as_current_span(
        "task", attributes={{"orchestrator.task.id": "T-1"}}):
    pass
provider.shutdown()
from otel_diary.cli import main
code = main(["demo", "--dir", {str(tmp_path / "demo")!r}])
loaded = sorted(name for name in sys.modules if name.startswith({BLOCKED!r}))
print("loaded:", loaded)
sys.exit(code)
""", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "loaded: []" in done.stdout
    assert len(list((tmp_path / "kb").rglob("*.md"))) == 1
    assert len(list((tmp_path / "demo" / "diaries" / "agents").rglob("*.md"))) == 2


@pytest.mark.parametrize("command", [["serve"], ["replay", "traces.jsonl"]])
def test_commands_needing_the_extra_name_it(tmp_path: Path, command: list[str]) -> None:
    """Without the extra, serve and replay exit 2 with one line saying what to install."""
    done = python_without_extra(f"""
from otel_diary.cli import main
sys.exit(main({command!r}))
""", tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"otel-diary {command[0]}: needs the 'serve' extra")
    assert 'pip install "otel-diary[serve]"' in line and "opentelemetry-proto" in line


def test_dev_extra_pulls_in_the_serve_extra() -> None:
    """The dev extra requires otel-diary[serve], and the serve extra lists every module's
    distribution the receiver needs."""
    requires = metadata.requires("otel-diary") or []
    assert 'otel-diary[serve]; extra == "dev"' in requires
    serve = {line.split(">=")[0] for line in requires if line.endswith('extra == "serve"')}
    assert set(SERVE_MODULES.values()) <= serve
