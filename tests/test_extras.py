"""What the extras add: the processor and demo work without the ``serve`` extra; ``serve``,
``replay``, ``mcp`` and the store's commands name the extra they miss, and one installed but
failing to import for what it is; ``dev`` pulls in ``serve``."""

from __future__ import annotations

import os
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


@pytest.mark.parametrize(("command", "package", "extra"), [
    (["serve"], "httptools", "serve"), (["mcp"], "mcp", "mcp"),
    (["search", "x", "--store", "postgresql://127.0.0.1:1/kb"], "psycopg", "pg"),
    (["context", "--task", "x", "--store", "postgresql://127.0.0.1:1/kb"], "psycopg", "pg")])
def test_an_extra_installed_but_failing_to_import_is_not_called_missing(
        tmp_path: Path, command: list[str], package: str, extra: str) -> None:
    """A package of an extra that is there but raises on import (a missing shared library)
    is named with its error and a reinstall, not reported as not installed."""
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text(
        'raise ImportError("libwidget.so.3: cannot open shared object file")\n')
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
            "from otel_diary.cli import main\n"
            f"sys.exit(main({[*command, '--dir', str(tmp_path / 'kb')]!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert f"the {extra} extra is installed but does not import" in line.replace("'", "")
    assert "libwidget.so.3" in line and "not installed" not in line
    assert f'pip install --force-reinstall "otel-diary[{extra}]"' in line


@pytest.mark.parametrize("command", [["search", "x"], ["context", "--task", "x"], ["mcp"]])
def test_commands_on_a_store_name_the_pg_extra_when_it_is_missing(
        tmp_path: Path, command: list[str]) -> None:
    """Without psycopg, a command given a PostgreSQL store says to install the pg extra."""
    code = ("import sys; sys.modules['psycopg'] = sys.modules['psycopg_pool'] = None\n"
            "from otel_diary.cli import main\n"
            f"sys.exit(main({[*command, '--store', 'postgresql://127.0.0.1:1/kb']!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f'otel-diary {command[0]}: a PostgreSQL store needs the pg extra: '
        'pip install "otel-diary[pg]"']


def test_an_app_given_a_store_without_the_pg_extra_keeps_running_into_the_folder(
        tmp_path: Path) -> None:
    """The processor, told of a store it cannot reach without psycopg, logs what to install
    and writes to the default folder, as for a URL it cannot use; the app is not stopped."""
    code = """
import sys; sys.modules['psycopg'] = sys.modules['psycopg_pool'] = None
from opentelemetry.sdk.trace import TracerProvider
import otel_diary
provider = TracerProvider(shutdown_on_exit=False)
otel_diary.install(provider, enabled=True)
with provider.get_tracer("app").start_as_current_span(
        "task", attributes={"orchestrator.task.id": "T-1"}):
    pass
provider.shutdown()
print("app went on")
"""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "OTEL_DIARY_STORE_URL": "postgresql://app:hunter2@127.0.0.1:1/kb"}
    env.pop("OTEL_DIARY_DIR", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0 and "app went on" in done.stdout, done.stderr
    assert 'needs the pg extra' in done.stderr and 'pip install "otel-diary[pg]"' in done.stderr
    assert "hunter2" not in done.stderr
    assert len(list((tmp_path / "data" / "otel-diary").rglob("*-T-1.md"))) == 1


def test_dev_extra_pulls_in_the_serve_extra() -> None:
    """The dev extra requires otel-diary[serve], and the serve extra lists every module's
    distribution the receiver needs."""
    requires = metadata.requires("otel-diary") or []
    assert 'otel-diary[serve]; extra == "dev"' in requires
    serve = {line.split(">=")[0] for line in requires if line.endswith('extra == "serve"')}
    assert set(SERVE_MODULES.values()) <= serve
