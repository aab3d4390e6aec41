"""The package's shape: stages as subpackages, imports that point one way, small modules."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "otel_diary"
MAX_TOP_LEVEL_MODULES = 12
MAX_LINES = 600
SETTINGS_READERS = {"otel_diary", "otel_diary.settings", "otel_diary.wiring"}
"""Besides ``otel_diary.cli.*``: the modules that may import ``otel_diary.settings``."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node that runs, in functions too; ``if TYPE_CHECKING:`` bodies are skipped."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def imports_of(name: str) -> set[str]:
    """The package modules ``name`` imports at run time (anywhere in it)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # ``from a import b`` needs module ``a.b`` when there is one, else a name of ``a``.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                       for alias in node.names]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("otel_diary"):
                found.add(target)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def _cycle_from(start: str) -> list[str] | None:
    path: list[str] = []
    on_path: set[str] = set()
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(GRAPH[node]):
            if target in on_path:
                return [*path[path.index(target):], target]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    return visit(start)


def test_no_import_cycles() -> None:
    """No module of the package imports, directly or not, a module that imports it back
    (imports inside functions count)."""
    for name in MODULES:
        cycle = _cycle_from(name)
        assert cycle is None, " -> ".join(cycle)


def test_few_modules_at_the_top() -> None:
    """The top of the package holds at most 12 modules; the stages are subpackages."""
    top = [path.name for path in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, sorted(top)
    stages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert {"sources", "assembly", "pipeline", "receiver", "sinks", "index", "readers",
            "cli"} <= stages


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_are_small(name: str) -> None:
    """No module is over 600 lines."""
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines"


def test_only_the_composition_root_reads_settings() -> None:
    """Settings reach components through ``wiring`` (and the CLI); nothing below imports
    ``otel_diary.settings``."""
    readers = {name for name, targets in GRAPH.items() if "otel_diary.settings" in targets}
    below = {name for name in readers - SETTINGS_READERS if not name.startswith("otel_diary.cli")}
    assert below == set()


def test_the_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    """A lazy import inside a function is an import like any other for the cycle check."""
    tree = ast.parse("def f():\n    from otel_diary.wiring import build_pipeline\n")
    names = [node.module for node in _runtime_nodes(tree) if isinstance(node, ast.ImportFrom)]
    assert names == ["otel_diary.wiring"]
