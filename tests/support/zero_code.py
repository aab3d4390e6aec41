"""Run unmodified apps in a subprocess the way a user would, and read what they left.

``run`` starts a command (argv list, or a shell line as the README shows it) with this
virtual environment's ``bin`` first on ``PATH`` and an environment cleaned of the
caller's OpenTelemetry and otel-diary variables; diaries go to ``<tmp>/kb``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_diary.pipeline.render import parse_front_matter
from tests.support.loopback import (
    ChatServer,
    Receive,
    Recorded,
    Scope,
    Send,
    ToolCall,
    serve_asgi,
)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parents[1]
APPS = TESTS / "apps"
BIN = Path(sys.executable).parent
REPORT_PREFIX = "otel-diary-report "
TIMEOUT_S = 120
"""A guard against a hung child, not an assertion: each run takes a few seconds."""


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of a child: no inherited OTel/diary/OpenAI settings, no exporters."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("OTEL_", "KB_", "OPENAI_", "MOTHER_AI_"))
           and name != "PYTHONPATH"}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "OTEL_DIARY_DIR": str(tmp / "kb"),
        "OTEL_DIARY_SCHEDULE_DELAY_MS": "50",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        # Importing openai or the Agents SDK for their instrumentations costs seconds: only
        # the GenAI runs keep openai's.
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai,openai_agents",
    })
    env.update(extra)
    return env


def run(command: Sequence[str] | str, cwd: Path, env: Mapping[str, str]) -> \
        subprocess.CompletedProcess[str]:
    """Run ``command`` (a shell line when a string) and return its result; never raises."""
    return subprocess.run(command, cwd=cwd, env=dict(env), shell=isinstance(command, str),
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
                          executable="/bin/sh" if isinstance(command, str) else None)


def instrumented(script: str, *args: str) -> list[str]:
    """``opentelemetry-instrument python <apps/script> args...``."""
    return ["opentelemetry-instrument", "python", str(APPS / script), *args]


def reported(script: str) -> list[str]:
    """Like :func:`instrumented`, wrapped so that the child reports its diary engines."""
    return instrumented("report.py", str(APPS / script))


def engine_report(stdout: str) -> list[dict[str, int]]:
    """The stats of every enabled diary engine, as the ``report.py`` wrapper printed them."""
    for line in stdout.splitlines():
        if line.startswith(REPORT_PREFIX):
            report: list[dict[str, int]] = json.loads(line[len(REPORT_PREFIX):])
            return report
    raise AssertionError(f"no engine report in the output:\n{stdout[-2000:]}")


def diaries(kb: Path) -> dict[str, dict[str, Any]]:
    """Front matter of every diary under ``kb``, by task id."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((kb / "diaries" / "agents").glob("*/*.md")):
        front = parse_front_matter(path.read_text(encoding="utf-8"))
        front["body"] = path.read_text(encoding="utf-8")
        assert front["task"] not in found, f"two diaries for task {front['task']}"
        found[front["task"]] = front
    return found


def outcomes(kb: Path) -> dict[str, str]:
    """Task id -> outcome of every diary under ``kb``."""
    return {task: front["outcome"] for task, front in diaries(kb).items()}


def explain(result: subprocess.CompletedProcess[str]) -> str:
    """The tail of a child's output, for assertion messages."""
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\n" \
           f"stderr:\n{result.stderr[-3000:]}"


def run_agent_app(app: str, command: str, script: list[str | int | ToolCall], model: str,
                  tmp: Path, **env: str) -> dict[str, dict[str, Any]]:
    """The diaries (front matter by task id) ``command`` leaves, a README line run as
    written in ``tmp`` on the app ``apps/<app>`` copied to ``agent.py``, against a model
    server answering ``script`` as ``model`` (in ``OPENAI_BASE_URL``, and for the Gemini
    API in ``GOOGLE_GEMINI_BASE_URL``); ``env`` adds to the child's environment. Fails
    unless the command succeeded, and unless ``otel-diary serve`` (with the command's
    conventions), sent the app's spans by the SDK's OTLP exporter, writes the same files."""
    from tests.cli.test_serve import Serve

    shutil.copy(APPS / app, tmp / "agent.py")
    profile = re.search(r"\bOTEL_DIARY_CONVENTIONS=(\S+)", command)
    assert profile is not None, command
    (tmp / "serve").mkdir()
    server = Serve(tmp / "serve", env={"OTEL_DIARY_CONVENTIONS": profile.group(1)})
    try:
        with serve_asgi(ChatServer(script=script, model=model)) as url:
            result = run(command, tmp, clean_env(
                tmp, OPENAI_BASE_URL=url + "/v1", OPENAI_API_KEY="test-key",
                GOOGLE_GEMINI_BASE_URL=url, GOOGLE_API_KEY="test-key",
                OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
                OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=server.url + "/v1/traces", **env))
        assert result.returncode == 0, explain(result)
        found = diaries(tmp / "kb")
        server.wait_for_diaries(len(found))
    finally:
        assert server.stop() == 0
    assert files(tmp / "serve" / "kb") == files(tmp / "kb"), "serve wrote other diaries"
    return found


def files(kb: Path) -> dict[str, str]:
    """Every diary under ``kb``, by path."""
    return {str(path.relative_to(kb)): path.read_text(encoding="utf-8")
            for path in sorted((kb / "diaries" / "agents").rglob("*.md"))}


@dataclass
class Collector:
    """An OTLP/HTTP endpoint on 127.0.0.1 that accepts every export and records it."""

    requests: list[Recorded] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.requests.append(await Recorded.receive(scope, receive))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/x-protobuf"),
                                (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]


@contextmanager
def collector() -> Iterator[tuple[Collector, dict[str, str]]]:
    """A running :class:`Collector` and the environment that points OTLP exporters at it."""
    sink = Collector()
    with serve_asgi(sink) as url:
        yield sink, {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": url,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{url}/v1/traces",
        }
