"""Every command of the README's "Adopt without changing code" section runs here, verbatim,
against an unmodified app; the packages it asks for are the ones the tests run with."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tests.support.loopback import ChatServer, serve_asgi
from tests.support.zero_code import (
    APPS,
    REPO,
    clean_env,
    collector,
    diaries,
    explain,
    outcomes,
    run,
)

SECTION = "Adopt without changing code"


def section_blocks(language: str) -> list[str]:
    """The fenced ``language`` blocks of the README section, in order."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index(f"## {SECTION}\n")
    end = readme.find("\n## ", start + 1)
    text = readme[start:end if end > 0 else None]
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def shell_lines() -> list[str]:
    return [line.strip() for block in section_blocks("sh") for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


COMMANDS = [line for line in shell_lines() if not line.startswith("pip install")]
PIP_LINES = [line for line in shell_lines() if line.startswith("pip install")]
EXPECTED = {"T-1": "completed", "T-2": "recovered"}


@dataclass
class Scenario:
    """What a README command runs against and what it must leave behind."""

    app: str
    """The app (under tests/support/apps) copied to the name the command runs."""
    check: Callable[[Path, list[str]], None]
    """Given the diary root and the paths the OTLP collector received."""
    instruments_openai: bool = False
    """Whether the app needs the OpenAI instrumentation (it is skipped elsewhere: slow)."""
    distro_defaults: bool = False
    """Whether metrics and logs keep the distro's defaults too, as for a user who set none."""


def orchestrator_diaries(kb: Path, otlp_paths: list[str]) -> None:
    assert outcomes(kb) == EXPECTED
    assert "/v1/traces" in otlp_paths  # the user's own exporter still ships spans


def first_try_diaries(kb: Path, otlp_paths: list[str]) -> None:
    assert outcomes(kb) == EXPECTED
    assert otlp_paths == []  # nothing exported: no backend needed, no time spent retrying


def custom_name_diaries(kb: Path, otlp_paths: list[str]) -> None:
    found = diaries(kb)
    assert {task: front["outcome"] for task, front in found.items()} == EXPECTED
    assert found["T-1"]["title"] == "Add a health endpoint"
    assert found["T-1"]["agent"] == "coder"
    assert found["T-1"]["model"] == "claude-sonnet"
    assert found["T-1"]["tokens"] == 150


def genai_diaries(kb: Path, otlp_paths: list[str]) -> None:
    found = diaries(kb)
    assert {task: front["outcome"] for task, front in found.items()} == {
        "conv-1": "completed", "conv-2": "recovered"}
    for front in found.values():
        assert front["agent"] == "researcher"
        assert front["model"] == "gpt-test"
        assert front["tokens"] == 2 * (11 + 7)  # two successful calls, as the spans say
        assert "Made 1 tool call(s): lookup (1)." in front["body"]
    # The content-capture variables of the command: the question is the title.
    assert found["conv-1"]["title"] == "What changed in the release?"
    assert "openai.InternalServerError" in found["conv-2"]["body"].split(
        "## Error encountered", 1)[1]
    # A server error the agent retried past is the call's failure, not the agent's.
    assert "a later call to gpt-test succeeded, and the agent" in found["conv-2"]["body"]
    assert "first try" not in found["conv-2"]["body"]


SCENARIOS: dict[str, Scenario] = {
    "OTEL_TRACES_EXPORTER=diary ": Scenario("orchestrator_app.py", first_try_diaries,
                                            distro_defaults=True),
    "KB_DIARIES_ENABLED=1 opentelemetry-instrument python app.py":
        Scenario("orchestrator_app.py", orchestrator_diaries),
    "OTEL_TRACES_EXPORTER=otlp,diary": Scenario("orchestrator_app.py", orchestrator_diaries),
    "OTEL_CONFIG_FILE=examples/otel-config.yaml":
        Scenario("orchestrator_app.py", orchestrator_diaries),
    "OTEL_CONFIG_FILE=examples/otel-config-instrumentor.yaml":
        Scenario("orchestrator_app.py", orchestrator_diaries),
    "OTEL_DIARY_CONVENTIONS=genai": Scenario("genai_agent.py", genai_diaries,
                                                      instruments_openai=True),
    "OTEL_DIARY_CONVENTIONS=diary-conventions.toml":
        Scenario("custom_names_app.py", custom_name_diaries),
}
"""A distinguishing part of each README command -> its scenario."""


def scenario_for(command: str) -> Scenario:
    matches = [scenario for key, scenario in SCENARIOS.items() if key in command]
    assert len(matches) == 1, f"README command without exactly one scenario: {command}"
    return matches[0]


@pytest.fixture
def chat() -> Iterator[str]:
    """An OpenAI-compatible endpoint: a clean run, then a run whose second call fails once."""
    server = ChatServer(script=["draft", "final", "draft", 500, "final"], model="test-model")
    with serve_asgi(server) as url:
        yield url + "/v1"


def test_section_has_the_commands_it_promises() -> None:
    """The section shows a command for each mechanism and each has exactly one scenario."""
    assert len(COMMANDS) == len(SCENARIOS)
    for command in COMMANDS:
        scenario_for(command)


def test_first_command_needs_no_backend() -> None:
    """The section's first command exports nowhere but to diaries, so a first try without a
    Collector does not wait on OTLP retries."""
    assert "OTEL_TRACES_EXPORTER=diary " in COMMANDS[0]
    assert scenario_for(COMMANDS[0]).check is first_try_diaries


@pytest.mark.parametrize("command", [
    pytest.param(command, marks=pytest.mark.slow) if scenario_for(command).instruments_openai
    else command for command in COMMANDS])
def test_readme_command(command: str, tmp_path: Path, chat: str) -> None:
    """The README command, run as written in a folder holding the app, writes its diaries."""
    scenario = scenario_for(command)
    script = re.search(r"python (\S+\.py)", command)
    assert script is not None
    shutil.copy(APPS / scenario.app, tmp_path / script.group(1))
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (tmp_path / "diary-conventions.toml").write_text(section_blocks("toml")[0])
    with collector() as (otlp, otlp_env):
        env = clean_env(tmp_path, OPENAI_BASE_URL=chat, OPENAI_API_KEY="test-key",
                        **otlp_env)
        if scenario.instruments_openai:
            env["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = "openai_agents"
        del env["OTEL_TRACES_EXPORTER"]  # the distro's default (otlp) applies
        if scenario.distro_defaults:
            del env["OTEL_METRICS_EXPORTER"], env["OTEL_LOGS_EXPORTER"]
        result = run(command, tmp_path, env)
    assert result.returncode == 0, explain(result)
    try:
        scenario.check(tmp_path / "kb", otlp.paths())
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(result)}") from exc


@pytest.mark.parametrize("line", PIP_LINES)
def test_pip_lines_name_what_the_tests_run_with(line: str) -> None:
    """Every package the section asks to install is installed here, at the pinned version."""
    for requirement in line.split()[2:]:
        name, _, version = requirement.partition("==")
        installed = metadata.version(name)
        assert installed == (version or installed), f"{name} {installed} is not {version}"


def test_install_snippet_attaches_to_an_apps_own_provider(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The section's Python snippet attaches diaries to a provider the app built itself."""
    [snippet] = section_blocks("python")
    monkeypatch.setenv("KB_DIARIES_ENABLED", "1")
    monkeypatch.setenv("OTEL_DIARY_DIR", str(tmp_path / "kb"))
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                              shutdown_on_exit=False)
    exec(snippet, {"provider": provider})
    with provider.get_tracer("app").start_as_current_span(
            "task", attributes={"orchestrator.task.id": "T-9"}):
        pass
    assert provider.force_flush(10_000)
    assert outcomes(tmp_path / "kb") == {"T-9": "completed"}
    provider.shutdown()
