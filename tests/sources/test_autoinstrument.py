"""Zero-code adoption in a subprocess beyond the README's commands (see
test_readme_adoption.py): nothing without ``KB_DIARIES_ENABLED``, the console exporter
beside ``diary``, several mechanisms at once, and a hook that never raises."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from otel_diary.sources.autoinstrument import post_instrument
from otel_diary.switch import enabled_in_environment
from tests.support.zero_code import (
    REPO,
    clean_env,
    collector,
    engine_report,
    explain,
    instrumented,
    outcomes,
    reported,
    run,
)

EXPECTED = {"T-1": "completed", "T-2": "recovered"}
"""The orchestrator app's two tasks and their outcomes."""


def test_without_kb_diaries_enabled_nothing_is_written(tmp_path: Path) -> None:
    """Without KB_DIARIES_ENABLED no engine does any work and no file appears."""
    result = run(reported("orchestrator_app.py"), tmp_path,
                 clean_env(tmp_path, OTEL_TRACES_EXPORTER="console,diary"))
    assert result.returncode == 0, explain(result)
    assert '"name": "task T-1"' in result.stdout  # the app did run and trace
    assert engine_report(result.stdout) == []
    assert not (tmp_path / "kb").exists()


def test_without_kb_diaries_enabled_the_hooks_load_nothing_more(tmp_path: Path) -> None:
    """``opentelemetry-instrument`` loads the hook and the instrumentor in every process;
    with diaries off they load none of the processor, its settings or its pipeline."""
    code = "import sys; print(sorted(m for m in sys.modules if m.startswith('otel_diary')))"
    result = run(["opentelemetry-instrument", "python", "-c", code], tmp_path,
                 clean_env(tmp_path))
    assert result.returncode == 0, explain(result)
    loaded = result.stdout.strip().splitlines()[-1]  # the hook ran, and loaded only itself
    assert loaded == ("['otel_diary', 'otel_diary.sources', "
                      "'otel_diary.sources.autoinstrument', 'otel_diary.switch', "
                      "'otel_diary.version']"), loaded


def test_console_and_diary_exporters(tmp_path: Path) -> None:
    """OTEL_TRACES_EXPORTER=console,diary writes diaries and the console exporter still prints."""
    result = run(instrumented("orchestrator_app.py"), tmp_path,
                 clean_env(tmp_path, KB_DIARIES_ENABLED="1",
                           OTEL_TRACES_EXPORTER="console,diary"))
    assert result.returncode == 0, explain(result)
    assert outcomes(tmp_path / "kb") == EXPECTED
    assert '"name": "task T-1"' in result.stdout
    assert '"name": "chat claude-sonnet"' in result.stdout


@pytest.mark.parametrize("mechanisms", [
    {"OTEL_TRACES_EXPORTER": "otlp,diary",
     "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai,openai_agents,diary"},
    {"OTEL_CONFIG_FILE": str(REPO / "examples" / "otel-config.yaml")},
], ids=["env-exporter+hook", "config-exporter+instrumentor+hook"])
def test_several_mechanisms_process_each_task_once(tmp_path: Path,
                                                   mechanisms: dict[str, str]) -> None:
    """With several mechanisms active, one engine processes each task span exactly once."""
    with collector() as (_, otlp_env):
        result = run(reported("orchestrator_app.py"), tmp_path,
                     clean_env(tmp_path, KB_DIARIES_ENABLED="1", **otlp_env, **mechanisms))
    assert result.returncode == 0, explain(result)
    busy = [stats for stats in engine_report(result.stdout) if stats["tasks"]]
    assert len(busy) == 1, explain(result)
    assert busy[0]["tasks"] == 2
    assert busy[0]["diaries"] == 2
    assert outcomes(tmp_path / "kb") == EXPECTED


def test_post_instrument_without_an_sdk_does_not_raise(tmp_path: Path) -> None:
    """With no SDK provider configured the hook logs a warning and returns normally."""
    code = ("from otel_diary.sources.autoinstrument import post_instrument\n"
            "post_instrument()\n"
            "print('still running')\n")
    result = run([sys.executable, "-c", code], tmp_path,
                 clean_env(tmp_path, KB_DIARIES_ENABLED="1"))
    assert result.returncode == 0, explain(result)
    assert "still running" in result.stdout
    assert "cannot take span processors" in result.stderr


def test_post_instrument_ignores_a_bad_flag(monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """An unrecognized KB_DIARIES_ENABLED value is logged and leaves diaries off."""
    monkeypatch.setenv("KB_DIARIES_ENABLED", "maybe")
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        assert not enabled_in_environment()
        post_instrument()
    assert "KB_DIARIES_ENABLED='maybe'" in caplog.text
    assert "cannot take span processors" not in caplog.text
