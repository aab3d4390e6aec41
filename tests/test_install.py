"""``pip install -e .`` (what ``make`` runs) builds its editable wheel without setuptools'
"Editable installation" warning box: the checkout goes on sys.path through a plain .pth."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD = """
from setuptools import build_meta
print(build_meta.build_editable(sys.argv[1]))
"""


@pytest.mark.slow
def test_editable_build_prints_no_warning_box(tmp_path: Path) -> None:
    """The PEP 660 build pip calls for ``-e .`` emits no setuptools warning, and its wheel
    puts the project folder itself on sys.path."""
    pytest.importorskip("setuptools", minversion="70")
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "otel_diary", project / "otel_diary",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    done = subprocess.run([sys.executable, "-c", "import sys" + BUILD, str(tmp_path / "dist")],
                          cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "!!" not in done.stderr, done.stderr
    wheel = tmp_path / "dist" / done.stdout.split()[-1]
    with zipfile.ZipFile(wheel) as archive:
        [pth] = [name for name in archive.namelist() if name.endswith(".pth")]
        assert archive.read(pth).decode().strip() == str(project.resolve())
