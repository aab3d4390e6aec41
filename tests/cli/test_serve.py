"""``otel-diary serve`` as a subprocess, fed by real OTLP exporters (Python SDK and Node.js)."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_diary.pipeline.render import parse_front_matter
from otel_diary.receiver.metrics import metric_values
from tests.support.loopback import free_port
from tests.support.node_app import node_script
from tests.support.otlp_build import (
    new_span_id,
    new_trace_id,
    protobuf_body,
    span,
    task_trace,
)
from tests.support.zero_code import REPO, clean_env, explain, run


class Serve:
    """One ``otel-diary serve`` process on free loopback ports (over TLS, trusted through
    ``ca_file``, when given one)."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None,
                 ca_file: Path | None = None) -> None:
        self.root = root
        self.scheme = "https" if ca_file else "http"
        self.verify = ssl.create_default_context(cafile=ca_file) if ca_file else True
        for _ in range(3):  # a free port can be taken before serve binds it: pick again
            if self._start(args, {**os.environ, **(env or {})}):
                return
            if "cannot listen for" not in self.stderr.read_text():
                break
        raise AssertionError("serve did not start:\n" + self.stderr.read_text())

    def _start(self, args: tuple[str, ...], environment: dict[str, str]) -> bool:
        self.http_port = free_port()
        self.grpc_port = free_port()
        self.url = f"{self.scheme}://127.0.0.1:{self.http_port}"
        self.stderr = self.root / f"serve-{self.http_port}.log"
        with self.stderr.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "otel_diary.cli", "serve", "--dir",
                 str(self.root / "kb"), "--http-port", str(self.http_port),
                 "--grpc-port", str(self.grpc_port), "--grace", "0.2", *args],
                env=environment, stderr=log, stdout=subprocess.DEVNULL)
        for _ in range(400):  # bounded: about 20 s
            try:
                if httpx.get(self.url + "/health", timeout=1,
                             verify=self.verify).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                return False
            time.sleep(0.05)
        self.process.kill()
        return False

    def exporting_provider(self, service: str = "svc") -> TracerProvider:
        """A provider whose spans the SDK's OTLP/HTTP exporter sends to this service."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider = TracerProvider(resource=Resource.create({"service.name": service}),
                                  shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=self.url + "/v1/traces")))
        return provider

    def metrics(self) -> dict[str, float]:
        return metric_values(httpx.get(self.url + "/metrics", timeout=10,
                                       verify=self.verify).text)

    def wait_for_diaries(self, count: int) -> None:
        """Until the service reports ``count`` diaries written (bounded: about 20 s)."""
        self.wait_for_runs(count, "otel_diary_diaries_written_total")

    def wait_for_runs(self, count: int, *counters: str) -> dict[str, float]:
        """Until the ``counters`` the service reports add up to ``count`` (bounded: about
        20 s); the metrics it reported last."""
        for _ in range(400):
            metrics = self.metrics()
            if sum(metrics.get(name, 0) for name in counters) >= count:
                break
            time.sleep(0.05)
        return metrics

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def diaries(self) -> dict[str, dict[str, object]]:
        """Front matter of every diary on disk, by task id."""
        found = {}
        for path in sorted((self.root / "kb" / "diaries").rglob("*.md")):
            front = parse_front_matter(path.read_text())
            found[str(front["task"])] = front
        return found


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.stop()


def send_with(exporter: SpanExporter, prefix: str, tasks: int) -> None:
    """Run ``tasks`` orchestrator tasks on a real TracerProvider exporting with ``exporter``."""
    provider = TracerProvider(resource=Resource.create({"service.name": prefix}),
                              shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("orchestrator")
    for n in range(tasks):
        with tracer.start_as_current_span("orchestrator.task", attributes={
            "orchestrator.task.id": f"{prefix}-{n}", "orchestrator.task.title": f"Task {n}",
            "orchestrator.agent.name": prefix, "orchestrator.build_verify.attempts": 1 + n % 2,
        }):
            for _ in range(3):
                with tracer.start_as_current_span("chat", attributes={
                    "gen_ai.request.model": "m-py", "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 5}):
                    pass
    assert provider.force_flush(30_000)
    provider.shutdown()


@pytest.mark.parametrize("compression", ["Gzip", "Deflate"])
def test_python_http_exporter_gets_diaries(serve: Serve, compression: str) -> None:
    """The SDK's OTLP/HTTP protobuf exporter, gzip or deflate, delivers tasks that become
    diaries."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    send_with(OTLPSpanExporter(endpoint=serve.url + "/v1/traces",
                               compression=Compression[compression]), "py-http", 3)
    serve.wait_for_diaries(3)
    assert serve.stop() == 0
    diaries = serve.diaries()
    assert sorted(diaries) == ["py-http-0", "py-http-1", "py-http-2"]
    assert diaries["py-http-0"]["outcome"] == "completed"
    assert diaries["py-http-1"]["outcome"] == "recovered"
    assert diaries["py-http-0"]["tokens"] == 45


def test_a_task_under_a_plain_span_under_a_task_is_one_diary(serve: Serve) -> None:
    """Task > plain step > task, exported by the SDK, is one diary for the outer task with
    the inner runs' tokens and models, those of their children and their own."""
    provider = serve.exporting_provider("nest")
    tracer = provider.get_tracer("orchestrator")
    with tracer.start_as_current_span("orchestrator.task", attributes={
            "orchestrator.task.id": "OUTER", "orchestrator.agent.name": "nest"}):
        with tracer.start_as_current_span("plan"):
            with tracer.start_as_current_span("orchestrator.task", attributes={
                    "orchestrator.task.id": "INNER"}):
                with tracer.start_as_current_span("chat", attributes={
                        "gen_ai.request.model": "m-inner", "gen_ai.usage.input_tokens": 7,
                        "gen_ai.usage.output_tokens": 3}):
                    pass
            with tracer.start_as_current_span("orchestrator.task", attributes={
                    "orchestrator.task.id": "INNER-2", "gen_ai.request.model": "m-own",
                    "gen_ai.usage.input_tokens": 4, "gen_ai.usage.output_tokens": 1}):
                pass  # its facts are on the task span itself
    assert provider.force_flush(30_000)
    provider.shutdown()
    serve.wait_for_diaries(1)
    assert serve.stop() == 0
    diaries = serve.diaries()
    assert sorted(diaries) == ["OUTER"]
    assert (diaries["OUTER"]["tokens"], diaries["OUTER"]["model"]) == (15, "m-inner")
    [text] = [path.read_text() for path in (serve.root / "kb" / "diaries").rglob("*.md")]
    assert "m-own" in text


def test_a_failed_call_recorded_as_an_exception_event_is_named(tmp_path: Path) -> None:
    """serve reads a failed tool span's exception event: the diary names its class and
    message and shows the end of its stack trace."""
    from opentelemetry.trace import Status, StatusCode

    server = Serve(tmp_path, env={"OTEL_DIARY_CONVENTIONS": "genai"})
    provider = server.exporting_provider()
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent helper", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper",
            "gen_ai.conversation.id": "conv-1"}):
        with tracer.start_as_current_span("execute_tool lookup", record_exception=False,
                                          set_status_on_exception=False, attributes={
                                              "gen_ai.operation.name": "execute_tool"}) as tool:
            try:
                raise LookupError("no row for key 42")
            except LookupError as exc:
                tool.record_exception(exc)
                tool.set_status(Status(StatusCode.ERROR))
    assert provider.force_flush(30_000)
    provider.shutdown()
    server.wait_for_diaries(1)
    assert server.stop() == 0
    [path] = (tmp_path / "kb" / "diaries").rglob("*-conv-1.md")
    body = path.read_text()
    assert "1 failed call(s) (LookupError)" in body
    assert "First error: LookupError: no row for key 42" in body
    assert 'raise LookupError("no row for key 42")' in body
    # the error's signature files the run under its lesson
    assert (tmp_path / "kb" / "diaries" / "lessons" / "exception-LookupError.md").is_file()


@pytest.mark.parametrize("compression", ["Gzip", "Deflate"])
def test_python_grpc_exporter_gets_diaries(serve: Serve, compression: str) -> None:
    """The SDK's OTLP/gRPC exporter, gzip or deflate, delivers tasks that become diaries."""
    from grpc import Compression
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    send_with(OTLPSpanExporter(endpoint=f"127.0.0.1:{serve.grpc_port}", insecure=True,
                               compression=Compression[compression]), "py-grpc", 2)
    serve.wait_for_diaries(2)
    assert serve.stop() == 0
    diaries = serve.diaries()
    assert sorted(diaries) == ["py-grpc-0", "py-grpc-1"]
    assert diaries["py-grpc-1"]["tokens"] == 45


@pytest.fixture(scope="session")
def node_client() -> Path:
    return node_script("send.mjs")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["json", "proto"])
def test_node_exporters_get_diaries(serve: Serve, node_client: Path, protocol: str) -> None:
    """The Node.js SDK's OTLP/HTTP JSON and protobuf exporters deliver tasks as diaries."""
    result = subprocess.run(
        ["node", str(node_client), protocol, serve.url + "/v1/traces", f"node-{protocol}", "3"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    serve.wait_for_diaries(3)
    received = serve.metrics()['otel_diary_spans_received_total{protocol="http"}']
    assert serve.stop() == 0
    diaries = serve.diaries()
    assert sorted(diaries) == [f"node-{protocol}-{n}" for n in range(3)]
    assert diaries[f"node-{protocol}-0"]["tokens"] == 240
    assert diaries[f"node-{protocol}-1"]["outcome"] == "recovered"
    assert diaries[f"node-{protocol}-0"]["agent"] == f"node-{protocol}"
    assert received == 9


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["json", "proto"])
def test_a_value_the_node_sdk_cut_inside_a_character_is_read(
        serve: Serve, node_client: Path, protocol: str) -> None:
    """The JS SDK's attribute length limit cuts a title inside its emoji (UTF-16 strings),
    and the JSON exporter sends the half left as an escaped lone surrogate: the requests
    are taken, as the Collector takes them, not refused whole."""
    result = subprocess.run(
        ["node", str(node_client), protocol, serve.url + "/v1/traces", f"cut-{protocol}", "2",
         "24"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    serve.wait_for_diaries(2)
    assert serve.stop() == 0
    titles = {task: diary["title"] for task, diary in serve.diaries().items()}
    assert titles == {f"cut-{protocol}-{n}": f"Node {protocol} task {n}".ljust(23, ".")
                      for n in range(2)}


METERED_APP = """
from opentelemetry import metrics, trace

metrics.get_meter("app").create_counter("tasks").add(1)
with trace.get_tracer("app").start_as_current_span(
        "task", attributes={"orchestrator.task.id": "R-1", "orchestrator.agent.name": "app"}):
    pass
"""


def test_the_readmes_line_sends_an_app_its_traces_alone(serve: Serve, tmp_path: Path) -> None:
    """The README's line, run with an app under ``opentelemetry-instrument`` that records
    a metric: its task becomes a diary, nothing else is sent, and the app logs no failed
    export (the distro turns every signal's exporter on: its metrics got a 404, and it
    logged so)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Collector-side: `otel-diary serve`"):]
    line = section[section.index("```sh\n") + 6:section.index("```\n", 6)].splitlines()[1]
    *settings, app = line.replace("127.0.0.1:4318", f"127.0.0.1:{serve.http_port}").split()
    assert app == "your-app" and all("=" in setting for setting in settings), line
    (tmp_path / "app.py").write_text(METERED_APP)
    env = clean_env(tmp_path)
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"):
        del env[name]  # the distro's defaults (otlp, each), unless the line says
    env.update(setting.partition("=")[::2] for setting in settings)
    result = run(["opentelemetry-instrument", "python", "app.py"], tmp_path, env)
    assert result.returncode == 0, explain(result)
    assert "Failed to export" not in result.stderr, explain(result)
    serve.wait_for_diaries(1)
    assert list(serve.diaries()) == ["R-1"]
    assert serve.metrics().get('otel_diary_requests_rejected_total{reason="not_found"}', 0) == 0


def test_token_is_required_when_set(tmp_path: Path) -> None:
    """With OTEL_DIARY_SERVE_TOKEN set, an exporter without it is refused and counted."""
    server = Serve(tmp_path, env={"OTEL_DIARY_SERVE_TOKEN": "s3cret"})
    try:
        body = protobuf_body(task_trace("T-tok"))
        headers = {"content-type": "application/x-protobuf"}
        assert httpx.post(server.url + "/v1/traces", content=body,
                          headers=headers).status_code == 401
        ok = httpx.post(server.url + "/v1/traces", content=body,
                        headers={**headers, "authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        server.wait_for_diaries(1)
        values = server.metrics()
    finally:
        assert server.stop() == 0
    assert values['otel_diary_requests_rejected_total{reason="unauthenticated"}'] == 1
    assert list(server.diaries()) == ["T-tok"]


@pytest.mark.parametrize(("args", "env", "named"), [
    ((), {"OTEL_DIARY_SERVE_TOKEN": ""}, "OTEL_DIARY_SERVE_TOKEN"),
    ((), {"OTEL_DIARY_SERVE_TOKEN": " \t "}, "OTEL_DIARY_SERVE_TOKEN"),
    (("--token", ""), {}, "--token"),
    (("--token", "   "), {"OTEL_DIARY_SERVE_TOKEN": "s3cret"}, "--token"),
])
def test_an_empty_token_refuses_to_start(tmp_path: Path, args: tuple[str, ...],
                                         env: dict[str, str], named: str) -> None:
    """An empty or blank token from the environment or --token stops serve before it listens."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if k != "OTEL_DIARY_SERVE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "otel_diary.cli", "serve", "--dir", str(tmp_path / "kb"),
         "--http-port", str(port), "--grpc-port", "0", *args],
        env={**environment, **env}, capture_output=True, text=True, timeout=20)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("otel-diary serve: ") and named in lines[0]
    assert "empty" in lines[0]
    assert not (tmp_path / "kb").exists()


@pytest.mark.parametrize(("args", "said"), [
    (("--grace", "-1"), "--grace: must be at least 0 (got -1.0)"),
    (("--http-port", "99999"), "--http-port: must be at most 65535 (got 99999)"),
    (("--store", "mysql://diary:hunter2@db/kb"),
     "--store: expected a postgresql:// URL (got <hidden>)"),  # never its password
])
def test_a_flag_out_of_range_is_named_as_given(tmp_path: Path, args: tuple[str, ...],
                                               said: str) -> None:
    """A flag's value out of range stops serve before it listens, naming the flag."""
    done = subprocess.run(
        [sys.executable, "-m", "otel_diary.cli", "serve", "--dir", str(tmp_path / "kb"),
         "--grpc-port", "0", *args], capture_output=True, text=True, timeout=20)
    assert (done.returncode, done.stderr) == (2, f"otel-diary serve: {said}\n")


@pytest.mark.parametrize("taken", ["--http-port", "--grpc-port"])
def test_a_port_in_use_is_named_and_serve_exits_1(tmp_path: Path, taken: str) -> None:
    """A port another process listens on stops serve with a line naming the protocol and
    the address, and exit code 1, whichever listener it is."""
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        ports = {"--http-port": str(free_port()), "--grpc-port": str(free_port()),
                 taken: str(port)}
        done = subprocess.run(
            [sys.executable, "-m", "otel_diary.cli", "serve", "--dir", str(tmp_path / "kb"),
             "--log-format", "text", *(item for pair in ports.items() for item in pair)],
            capture_output=True, text=True, timeout=30)
    protocol = "HTTP" if taken == "--http-port" else "gRPC"
    assert done.returncode == 1, done.stderr
    assert f"cannot listen for OTLP/{protocol} on 127.0.0.1:{port}" in done.stderr
    assert "is listening on" not in done.stderr


def test_traces_without_a_task_never_keep_a_task_out(tmp_path: Path) -> None:
    """Traces of one LLM span and no task fill the trace bound; a task trace still gets in."""
    server = Serve(tmp_path, env={"OTEL_DIARY_SERVE_MAX_TRACES": "100",
                                  "OTEL_DIARY_SERVE_TRACE_TIMEOUT_S": "600"})
    headers = {"content-type": "application/x-protobuf"}
    flood: list[int] = []
    try:
        for _ in range(3):  # 300 traces, each one contributing span and no task span
            spans = [span(new_trace_id(), new_span_id(), new_span_id(), name="chat",
                          attributes={"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 5})
                     for _ in range(100)]
            flood.append(httpx.post(server.url + "/v1/traces", content=protobuf_body(spans),
                                    headers=headers, timeout=10).status_code)
        full = server.metrics()
        answer = httpx.post(server.url + "/v1/traces", content=protobuf_body(
            task_trace("T-room")), headers=headers, timeout=10)
        server.wait_for_diaries(1)
        values = server.metrics()
    finally:
        assert server.stop() == 0
    assert full["otel_diary_open_traces"] == 100
    assert answer.status_code == 200
    assert flood == [200, 200, 200]
    assert list(server.diaries()) == ["T-room"]
    assert values["otel_diary_taskless_traces_evicted_total"] >= 201
    assert values['otel_diary_spans_dropped_total{reason="taskless_evicted"}'] >= 201


@pytest.mark.slow
def test_redelivery_after_a_restart_keeps_one_diary(tmp_path: Path) -> None:
    """The same root task span delivered to two successive processes leaves one diary."""
    body = protobuf_body(task_trace("T-again", chats=1))
    headers = {"content-type": "application/x-protobuf"}
    for _ in range(2):
        server = Serve(tmp_path)
        try:
            for _ in range(2):  # and twice to the same process
                assert httpx.post(server.url + "/v1/traces", content=body,
                                  headers=headers).status_code == 200
            server.wait_for_diaries(1)
        finally:
            assert server.stop() == 0
    assert len(list((tmp_path / "kb" / "diaries").rglob("*.md"))) == 1


def test_text_logs_say_where_it_listens_and_it_answers_at_once(tmp_path: Path) -> None:
    """With --log-format text the first line names both addresses and the folder, and
    /health answers the moment that line is out, without waiting or retrying."""
    http_port, grpc_port = free_port(), free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_diary.cli", "serve", "--dir", str(tmp_path / "kb"),
         "--http-port", str(http_port), "--grpc-port", str(grpc_port), "--log-format", "text"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    watchdog = threading.Timer(60, process.kill)  # a guard against a hung child only
    watchdog.start()
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "otel-diary serve is listening on " in line, line
        assert f"http://127.0.0.1:{http_port} (OTLP/HTTP)" in line
        assert f"127.0.0.1:{grpc_port} (OTLP/gRPC)" in line
        assert str(tmp_path / "kb") in line
        assert line.rstrip().endswith(
            "; spans are read with the orchestrator conventions (OTEL_DIARY_CONVENTIONS)")
        health = httpx.get(f"http://127.0.0.1:{http_port}/health", timeout=10)
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
        process.send_signal(signal.SIGTERM)
        rest = process.stderr.read()
        assert process.wait(30) == 0
        assert "otel-diary serve stopped: 0 diaries written" in rest
        assert "without a token" not in rest  # loopback: no one else can reach it
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("token", [None, "a-token-of-sixteen+"])
def test_listening_beyond_loopback_without_a_token_is_warned_of(
        tmp_path: Path, token: str | None) -> None:
    """On every address (0.0.0.0) without a token, a warning says anyone who can reach it
    may send spans, and how to stop that; with a token, none."""
    server = Serve(tmp_path, "--host", "0.0.0.0", *(("--token", token) if token else ()),
                   "--log-format", "text")
    assert server.stop() == 0
    log = server.stderr.read_text()
    warned = ("otel-diary serve listens on 0.0.0.0 without a token: anyone who can reach it "
              "may send spans (set --token or OTEL_DIARY_SERVE_TOKEN") in log
    assert warned == (token is None), log


def test_sigterm_writes_waiting_diaries_before_exit(tmp_path: Path) -> None:
    """A task still in its grace period is written during a graceful shutdown."""
    server = Serve(tmp_path, "--grace", "600")
    body = protobuf_body(task_trace("T-term"))
    response = httpx.post(server.url + "/v1/traces", content=body,
                          headers={"content-type": "application/x-protobuf"})
    assert response.status_code == 200
    assert server.stop() == 0
    assert list(server.diaries()) == ["T-term"]
    assert '"event": "serve.stopped"' in server.stderr.read_text()


@pytest.mark.parametrize("given", ["environment", "flag"])
def test_deliveries_to_the_store_are_on_the_metrics(tmp_path: Path, postgres_url: str,
                                                    given: str) -> None:
    """serve with a PostgreSQL store, named by OTEL_DIARY_STORE_URL or by ``--store`` as the
    readers take it, reports what the store took and what waits for it."""
    server = (Serve(tmp_path, env={"OTEL_DIARY_STORE_URL": postgres_url}) if given == "environment"
              else Serve(tmp_path, "--store", postgres_url))
    try:
        answer = httpx.post(server.url + "/v1/traces", timeout=10,
                            content=protobuf_body(task_trace("T-stored")),
                            headers={"content-type": "application/x-protobuf"})
        assert answer.status_code == 200
        server.wait_for_diaries(1)
        for _ in range(200):  # bounded: until the delivery thread has taken it
            values = server.metrics()
            if values.get('otel_diary_deliveries_total{sink="store",outcome="delivered"}'):
                break
            time.sleep(0.05)
        assert values['otel_diary_deliveries_total{sink="store",outcome="delivered"}'] == 1
        assert values['otel_diary_deliveries_total{sink="store",outcome="refused"}'] == 0
        assert values['otel_diary_spooled_diaries{sink="store"}'] == 0
    finally:
        assert server.stop() == 0
    # The first line says where the diaries go: the folder asked for, and the store (its
    # host and database, never its password).
    log = server.stderr.read_text()
    assert f"diaries go to {tmp_path / 'kb'} and the store at postgresql://127.0.0.1:" in log
    password = postgres_url.split("@", 1)[0].rsplit(":", 1)[1]
    assert password not in log
