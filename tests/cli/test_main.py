"""What every ``otel-diary`` command shares: ``--version``, and a quiet end when the reader
of its output goes away (``otel-diary demo | head``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from otel_diary.cli import REDACTION_VARIABLES, main
from otel_diary.pipeline.redact import SecretRedactor, use
from otel_diary.settings import _SETTINGS
from tests.support.knowledge import build_knowledge_base


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the distribution's version and exits 0."""
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"otel-diary {metadata.version('otel-diary')}\n"


def run_into_a_closed_pipe(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``otel-diary argv`` with stdout a pipe whose reader has already gone, as after
    ``| head`` stopped reading: the first write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "otel_diary.cli", *argv], cwd=cwd,
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


def test_demo_into_a_closed_pipe_ends_without_a_traceback(tmp_path: Path) -> None:
    """`otel-diary demo | head` ends with status 1 and nothing on stderr."""
    done = run_into_a_closed_pipe(["demo", "--dir", str(tmp_path / "kb")], tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert len(list((tmp_path / "kb" / "diaries" / "agents").rglob("*.md"))) == 2  # done


def test_search_json_into_a_closed_pipe_ends_without_a_traceback(tmp_path: Path) -> None:
    """`otel-diary search --json | head` ends with status 1 and nothing on stderr."""
    assert subprocess.run([sys.executable, "-m", "otel_diary.cli", "demo", "--dir",
                           str(tmp_path / "kb")], capture_output=True, timeout=120,
                          cwd=tmp_path).returncode == 0
    done = run_into_a_closed_pipe(["search", "--json", "--dir", str(tmp_path / "kb")],
                                  tmp_path)
    assert (done.returncode, done.stderr) == (1, "")


@pytest.mark.parametrize("argv", [
    ["search", "TS2345", "--agent", "\udcff"],
    ["show", "--id", "kh-\udcff"],
    ["context", "--task", "T-\udcff"],
])
def test_arguments_that_are_not_utf8_are_a_usage_error(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bytes the locale could not decode (a lone surrogate in ``sys.argv``) are refused
    with exit 2 and the bytes shown, not a traceback and exit 1 ("no match")."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--dir", str(tmp_path)])
    assert exited.value.code == 2
    assert "\\xff' is not valid UTF-8 text" in capsys.readouterr().err


def test_every_reader_redacts_the_configured_patterns_and_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A diary written before a pattern was configured, or holding the hub's own key,
    comes back from the readers with both taken out, as the pipeline takes them out of
    what it writes: the index's words, the document, the query echoed."""
    root = tmp_path / "kb"
    diary = build_knowledge_base(root)["types"]
    file = root / diary.path
    hub_key = "hub-key-" + "Q7" * 12
    file.write_text(file.read_text(encoding="utf-8").replace(
        "Tighten types in orders", f"Tighten types in orders TCK-12345678 {hub_key}"),
        encoding="utf-8")
    monkeypatch.setenv("OTEL_DIARY_REDACT_PATTERNS", '{"ticket": "TCK-[0-9]{8}"}')
    monkeypatch.setenv("mother_ai_api_key", hub_key)  # settings read names in any case
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    try:
        assert main(["reindex", "--dir", str(root)]) == 0  # the index's words too
        capsys.readouterr()
        outputs = []
        for argv in (["search", "--json", "TCK-12345678 tighten"], ["show", "--id", diary.id],
                     ["context", "--task", "tighten the types of orders"]):
            assert main([*argv, "--dir", str(root)]) == 0
            outputs.append(capsys.readouterr().out)
    finally:
        use(SecretRedactor())  # the process's redactor, as before
    for output in outputs:
        assert "TCK-12345678" not in output and hub_key not in output
        assert "[REDACTED:ticket]" in output and "[REDACTED:configured_secret]" in output


def test_the_variables_read_for_redaction_are_those_of_its_settings() -> None:
    """The CLI reads the settings for redaction only when one of these is set."""
    assert set(REDACTION_VARIABLES) == {_SETTINGS[name].variable for name in (
        "redact_patterns", "hub_api_key", "reflection_api_key", "serve_token")}
