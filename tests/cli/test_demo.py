"""`otel-diary demo` runs three tasks and writes the two successful ones' diaries to a folder
of its own, never to the user's knowledge base or home directory."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from otel_diary.cli.demo import MARKER

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment whose home and XDG folders are ``home``, and whose real knowledge
    base (``OTEL_DIARY_DIR``) is there too, so that a demo writing to it would show."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("XDG_", "OTEL_", "KB_", "MOTHER_AI_"))}
    env.update(HOME=str(home), OTEL_DIARY_DIR=str(home / "real-kb"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env


def demo(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otel_diary.cli", "demo", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def test_demo_prints_every_diary_and_what_to_try_next(tmp_path: Path) -> None:
    """The demo writes ./demo-kb, prints both diaries whole, and the commands it suggests work."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = home_env(home)
    done = demo(work, env)
    assert done.returncode == 0, done.stderr
    diaries = sorted((work / "demo-kb" / "diaries" / "agents").rglob("*.md"))
    assert [path.name[-8:] for path in diaries] == ["T-101.md", "T-102.md"]
    for path in diaries:
        assert path.read_text(encoding="utf-8") in done.stdout
    assert files_under(home) == []
    suggested = [line.strip() for line in done.stdout.split("Try next:\n", 1)[1].splitlines()
                 if line.strip().startswith("otel-diary ")]
    assert len(suggested) == 7 and all("--dir ./demo-kb" in line for line in suggested)
    assert any(" mcp " in line for line in suggested)
    context = next(line for line in suggested if " context " in line)
    digest = subprocess.run(shlex.split(context), cwd=work, env=env, capture_output=True,
                            text=True, timeout=60)
    assert digest.returncode == 0 and "Tighten types in the orders API" in digest.stdout
    show = next(line for line in suggested if " show " in line)
    shown = subprocess.run(shlex.split(show), cwd=work, env=env, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "outcome: recovered" in shown.stdout and "error TS2345" in shown.stdout
    search = next(line for line in suggested if "TS2345" in line)
    found = subprocess.run(shlex.split(search), cwd=work, env=env, capture_output=True,
                           text=True, timeout=60)
    assert found.returncode == 0 and "Tighten types in the orders API" in found.stdout
    question = next(line for line in suggested if "how did we" in line)
    asked = subprocess.run(shlex.split(question), cwd=work, env=env, capture_output=True,
                           text=True, timeout=60)
    assert asked.returncode == 0, asked.stderr
    first = asked.stdout.split("\n\n", 1)[0]
    assert "  lesson  " in first and "code:TS2345" in first and "What worked: " in first


@pytest.mark.slow
def test_a_second_demo_starts_clean(tmp_path: Path) -> None:
    """Running the demo twice leaves the second run's two diaries and its lesson only."""
    home = tmp_path / "home"
    home.mkdir()
    kb = tmp_path / "kb"
    first = demo(tmp_path, home_env(home), "--dir", str(kb))
    assert first.returncode == 0, first.stderr
    before = {path.read_text(encoding="utf-8") for path in kb.rglob("*.md")}
    second = demo(tmp_path, home_env(home), "--dir", str(kb))
    assert second.returncode == 0, second.stderr
    after = {path.read_text(encoding="utf-8") for path in kb.rglob("*.md")}
    assert len(after) == 3 and not before & after
    assert len(list((kb / "diaries" / "agents").rglob("*.md"))) == 2
    assert "Related" in second.stdout and "kh-" not in second.stdout.split(
        "## Related", 1)[1].split("===", 1)[0]  # nothing from the first run is related


def test_demo_leaves_a_folder_it_did_not_make_alone(tmp_path: Path) -> None:
    """A --dir holding someone else's files is refused with a message, and left as it was."""
    kb = tmp_path / "notes"
    kb.mkdir()
    (kb / "mine.txt").write_text("keep me")
    done = demo(tmp_path, home_env(tmp_path / "home"), "--dir", str(kb))
    assert done.returncode == 1
    assert done.stderr.startswith("otel-diary demo: ") and str(kb) in done.stderr
    assert [path.name for path in files_under(kb)] == ["mine.txt"]
    assert not (kb / MARKER).exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_writes_into_the_checkout_and_not_home(tmp_path: Path) -> None:
    """`make demo` in a checkout writes ./demo-kb there (ignored by git), nothing in HOME."""
    checkout, home = tmp_path / "checkout", tmp_path / "home"
    checkout.mkdir()
    home.mkdir()
    shutil.copy(REPO / "Makefile", checkout / "Makefile")
    env = home_env(home, XDG_DATA_HOME=str(home / ".local" / "share"),
                   XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
                   XDG_STATE_HOME=str(home / ".local" / "state"))
    # -o: take the virtual environment as made (this one), do not install it again.
    done = subprocess.run(["make", "-s", "-o", ".venv/.base", "demo", f"BIN={BIN}"],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list((checkout / "demo-kb" / "diaries" / "agents").rglob("*.md"))) == 2
    assert files_under(home) == []
    assert "warning" not in done.stderr.lower()
    assert "/demo-kb/" in (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
