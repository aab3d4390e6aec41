"""A real OpenTelemetry Collector (``collector/manifest.yaml``) running ``collector-config/``,
and one that also writes what it receives to a file for ``otel-diary replay``.

The ``otelcol`` fixture builds the Collector with ``bash collector/build.sh`` (``make
collector``), which reuses a cached build of the same manifest at once. Without Go and no
cached build the tests here are skipped; on CI (``CI=true``) a failed build fails them.
Everything listens on 127.0.0.1 on free ports, and every process started here is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from otel_diary.pipeline.render import parse_front_matter
from otel_diary.receiver.metrics import metric_values
from tests.cli.test_serve import Serve
from tests.support.loopback import free_port
from tests.support.otlp_build import new_span_id, new_trace_id, protobuf_body, span, task_trace

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "collector" / "build.sh"
CONFIG_DIR = REPO / "collector-config"
CONFIGS = sorted(path for path in CONFIG_DIR.rglob("*") if path.suffix in (".yaml", ".yml"))
TOKEN = "collector-test-token"
GRACE_S = "1"
"""otel-diary's grace period in these tests: short, yet long enough for reordered batches."""
BUILD_TIMEOUT_S = 3600
"""A guard against a hung build, not an assertion: a cold build takes about ten minutes."""
READY_LINE = "Everything is ready. Begin running and processing data."


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def otelcol() -> Path:
    """The ``otelcol-diary`` binary, built (or taken from the cache) by collector/build.sh."""
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True,
                            timeout=BUILD_TIMEOUT_S, check=False)
    if result.returncode == 0:
        binary = Path(result.stdout.strip().splitlines()[-1])
        assert binary.is_file(), f"collector/build.sh printed {binary}, which does not exist"
        return binary
    log_tail = "\n".join(result.stderr.strip().splitlines()[-30:])
    if result.returncode == 3:  # build.sh: the Go toolchain is not installed
        pytest.skip("the OpenTelemetry Collector tests need Go to build the Collector: "
                    "install Go, then run `make collector`")
    message = (f"`make collector` (collector/build.sh) failed with exit code "
               f"{result.returncode}:\n{log_tail}")
    if _on_ci():
        pytest.fail(message)
    pytest.skip(message)


def wait_until(condition: Callable[[], bool], seconds: float, what: str,
               diagnostics: Callable[[], str] = lambda: "") -> None:
    """Poll ``condition`` every 0.1 s; fail naming ``what`` if ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}\n{diagnostics()}")
        time.sleep(0.1)


class Otelcol:
    """One Collector process running a file of collector-config/ on loopback ports."""

    def __init__(self, binary: Path, config: Path, log: Path, env: dict[str, str]) -> None:
        self.grpc_port = free_port()
        self.http_port = free_port()
        self.metrics_port = free_port()
        self.log = log
        environment = {
            **os.environ,
            "OTELCOL_GRPC_ENDPOINT": f"127.0.0.1:{self.grpc_port}",
            "OTELCOL_HTTP_ENDPOINT": f"127.0.0.1:{self.http_port}",
            "OTELCOL_METRICS_HOST": "127.0.0.1",
            "OTELCOL_METRICS_PORT": str(self.metrics_port),
            **env,
        }
        with log.open("wb") as handle:
            self.process = subprocess.Popen([str(binary), f"--config={config}"], env=environment,
                                            stdout=subprocess.DEVNULL, stderr=handle)
        try:
            wait_until(self._ready, 30, f"the Collector running {config.name} to start",
                       self.log_text)
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the Collector exited with {self.process.returncode}:\n"
                                 + self.log_text())
        return READY_LINE in self.log_text()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        """The Collector's own Prometheus metrics, ``name{labels}`` -> value."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text
        return metric_values(text)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` (with or without ``_total``) carrying ``labels``."""
        names = (name, name + "_total")
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        total = 0.0
        for sample, value in self.metrics().items():
            base, _, rest = sample.partition("{")
            if base in names and all(label in rest for label in wanted):
                total += value
        return total

    def stop(self) -> None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it is still running after 30 s."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def start_serves(stack: ExitStack, *roots: tuple[Path, tuple[str, ...]]) -> list[Serve]:
    """``otel-diary serve`` processes started side by side, one per ``(root, extra args)``.

    Each is stopped (SIGTERM, else SIGKILL) with ``stack``, also when another failed to start.
    """
    for root, _ in roots:
        root.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=len(roots)) as pool:
        futures = [pool.submit(Serve, root, "--grace", GRACE_S, *args) for root, args in roots]
    servers: list[Serve] = []
    for future in futures:
        if future.exception() is None:
            server = future.result()
            stack.callback(_stop_serve, server)
            servers.append(server)
    for future in futures:
        future.result()  # re-raises the first failure to start
    return servers


def _stop_serve(server: Serve) -> None:
    if server.process.poll() is None:
        server.stop()


def start_otelcol(stack: ExitStack, binary: Path, config: str, log: Path,
                  env: dict[str, str]) -> Otelcol:
    """A Collector running ``collector-config/<config>``, stopped with ``stack``."""
    collector = Otelcol(binary, CONFIG_DIR / config, log, env)
    stack.callback(collector.stop)
    return collector


def start_gateway(stack: ExitStack, binary: Path, root: Path) -> tuple[Serve, Serve, Otelcol]:
    """gateway.yaml's Collector, sending to a ``serve`` for diaries (with the token) and to
    another as the tracing backend; all stopped with ``stack``."""
    diary, backend = start_serves(stack, (root / "diary", ("--token", TOKEN)),
                                  (root / "backend", ()))
    gateway = start_otelcol(stack, binary, "gateway.yaml", root / "gateway.log", {
        "TRACING_BACKEND_ENDPOINT": f"127.0.0.1:{backend.grpc_port}",
        "TRACING_BACKEND_TLS_INSECURE": "true",
        "OTEL_DIARY_ENDPOINT": diary.url,
        "OTEL_DIARY_TOKEN": TOKEN,
    })
    return diary, backend, gateway


def run_tasks(exporter: SpanExporter, prefix: str, tasks: int, *, chats: int = 3,
              probes: int = 0) -> None:
    """An app's tasks (a root task span with ``chats`` model calls each), exported via OTLP.

    ``probes`` health-check server spans, each its own trace, are sent along.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": prefix}),
                              shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    tracer = provider.get_tracer("orchestrator")
    for n in range(tasks):
        with tracer.start_as_current_span("orchestrator.task", attributes={
            "orchestrator.task.id": f"{prefix}-{n}", "orchestrator.task.title": f"Task {n}",
            "orchestrator.agent.name": prefix, "orchestrator.build_verify.attempts": 1 + n % 2,
        }):
            for _ in range(chats):
                with tracer.start_as_current_span("chat", attributes={
                    "gen_ai.request.model": "m-1", "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 5}):
                    pass
    for _ in range(probes):
        with tracer.start_as_current_span("GET /healthz", kind=SpanKind.SERVER, attributes={
                "http.request.method": "GET", "url.path": "/healthz"}):
            pass
    assert provider.force_flush(30_000)
    provider.shutdown()


def diary_files(server: Serve) -> list[dict[str, object]]:
    """Front matter of every diary file ``server`` wrote, one entry per file."""
    return [parse_front_matter(path.read_text())
            for path in sorted((server.root / "kb" / "diaries").rglob("*.md"))]


def stopped_event(server: Serve) -> dict[str, object]:
    """The ``serve.stopped`` log record of a server that has exited."""
    for line in server.stderr.read_text().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == "serve.stopped":
                return dict(record)
    raise AssertionError("no serve.stopped record in\n" + server.stderr.read_text())


@pytest.mark.parametrize("config", CONFIGS, ids=[path.name for path in CONFIGS])
def test_config_validates(otelcol: Path, config: Path) -> None:
    """`otelcol-diary validate` accepts the configuration with an operator's variables set."""
    env = {
        **os.environ,
        "TRACING_BACKEND_ENDPOINT": "tempo.observability.svc.cluster.local:4317",
        "TRACING_BACKEND_TLS_INSECURE": "true",
        "OTEL_DIARY_ENDPOINT": "http://otel-diary-lb.observability.svc:4318",
        "OTEL_DIARY_TOKEN": TOKEN,
        "OTEL_DIARY_REPLICAS": "[otel-diary-0.otel-diary:4317, otel-diary-1.otel-diary:4317]",
        "OTEL_DIARY_TLS_INSECURE": "true",
        "OTELCOL_GRPC_ENDPOINT": f"127.0.0.1:{free_port()}",
        "OTELCOL_HTTP_ENDPOINT": f"127.0.0.1:{free_port()}",
        "OTELCOL_METRICS_HOST": "127.0.0.1",
        "OTELCOL_METRICS_PORT": str(free_port()),
    }
    result = subprocess.run([str(otelcol), "validate", f"--config={config}"], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_validate_rejects_a_gateway_without_its_backend(otelcol: Path) -> None:
    """Validation is real: gateway.yaml without TRACING_BACKEND_ENDPOINT is refused."""
    env = {name: value for name, value in os.environ.items()
           if name != "TRACING_BACKEND_ENDPOINT"}
    env["OTEL_DIARY_TOKEN"] = TOKEN
    result = subprocess.run([str(otelcol), "validate",
                             f"--config={CONFIG_DIR / 'gateway.yaml'}"], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "otlp_grpc/backend" in result.stderr


def test_gateway_delivers_task_traces_to_otel_diary_and_the_backend(
        otelcol: Path, tmp_path: Path) -> None:
    """SDK apps export to gateway.yaml; diaries land and the tracing backend gets every span."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    with ExitStack() as stack:
        diary, backend, gateway = start_gateway(stack, otelcol, tmp_path)
        run_tasks(GrpcExporter(endpoint=f"127.0.0.1:{gateway.grpc_port}", insecure=True),
                  "app-grpc", 3, probes=1)
        run_tasks(HttpExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces"),
                  "app-http", 3)
        task_spans = 6 * 4

        def diagnostics() -> str:
            return (f"diary: {diary.metrics()}\nbackend: {backend.metrics()}\n"
                    f"gateway log:\n{gateway.log_text()}")

        wait_until(lambda: diary.metrics().get("otel_diary_diaries_written_total", 0) >= 6,
                   60, "six diaries from the gateway", diagnostics)
        wait_until(lambda: backend.metrics().get(
            'otel_diary_spans_received_total{protocol="grpc"}', 0) >= task_spans + 1,
                   60, "every span at the tracing backend", diagnostics)
        diary_metrics = diary.metrics()
        backend_received = backend.metrics()['otel_diary_spans_received_total{protocol="grpc"}']
        sent_to_diary = gateway.metric("otelcol_exporter_sent_spans", exporter="otlp_http/diary")
        sent_to_backend = gateway.metric("otelcol_exporter_sent_spans",
                                         exporter="otlp_grpc/backend")
        filtered = gateway.metric("otelcol_processor_filter_spans_filtered",
                                  filter="filter/noise")
        assert diary.stop() == 0

    # The diary pipeline: every task span and child, never the health check, with the token.
    assert diary_metrics['otel_diary_spans_received_total{protocol="http"}'] == task_spans
    assert diary_metrics.get(
        'otel_diary_requests_rejected_total{reason="unauthenticated"}', 0) == 0
    assert sent_to_diary == task_spans
    assert filtered == 1
    # The backend pipeline: everything, the health check included.
    assert backend_received == task_spans + 1
    assert sent_to_backend == task_spans + 1

    diaries = {str(front["task"]): front for front in diary_files(diary)}
    assert sorted(diaries) == [f"app-{kind}-{n}" for kind in ("grpc", "http") for n in range(3)]
    assert {front["tokens"] for front in diaries.values()} == {45}
    assert diaries["app-grpc-0"]["outcome"] == "completed"
    assert diaries["app-http-1"]["outcome"] == "recovered"
    assert diaries["app-http-2"]["agent"] == "app-http"


def test_a_string_that_is_not_utf8_loses_no_span_batched_with_it(
        otelcol: Path, tmp_path: Path) -> None:
    """The Collector takes a string that is not UTF-8 (here a Latin-1 path, as an SDK
    that does not check its strings sends it) and forwards it in one batch with the other
    spans it got: the diary of the task beside it is written, the string read with
    U+FFFD."""
    odd = [span(new_trace_id(), new_span_id(), name="GET /cafe",
                attributes={"url.path": "/cafe"})]
    body = protobuf_body([*task_trace("T-latin1", chats=1), *odd])
    body = body.replace(b"/cafe", b"/caf\xe9")  # as long: the lengths stay right
    with ExitStack() as stack:
        diary, backend, gateway = start_gateway(stack, otelcol, tmp_path)
        answer = httpx.post(f"http://127.0.0.1:{gateway.http_port}/v1/traces", content=body,
                            headers={"content-type": "application/x-protobuf"}, timeout=30)
        assert answer.status_code == 200, answer.text
        wait_until(lambda: diary.metrics().get("otel_diary_diaries_written_total", 0) >= 1,
                   60, "the task's diary", lambda: f"gateway log:\n{gateway.log_text()}")
        wait_until(lambda: backend.metrics().get(
            'otel_diary_spans_received_total{protocol="grpc"}', 0) >= 4, 60,
                   "every span at the tracing backend", lambda: gateway.log_text())
        received = diary.metrics()['otel_diary_spans_received_total{protocol="http"}']
        assert diary.stop() == 0
    assert received == 4  # the task, its step and model call, and the odd span
    assert [front["task"] for front in diary_files(diary)] == ["T-latin1"]


def test_loadbalancing_routes_each_trace_to_one_replica(otelcol: Path, tmp_path: Path) -> None:
    """loadbalancing.yaml spreads 200 task traces over two replicas, each trace whole on one."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    tasks, chats = 200, 2
    with ExitStack() as stack:
        replicas = start_serves(stack, *((tmp_path / f"replica-{n}", ("--token", TOKEN))
                                         for n in range(2)))
        balancer = start_otelcol(stack, otelcol, "loadbalancing.yaml", tmp_path / "lb.log", {
            "OTEL_DIARY_REPLICAS": "[" + ", ".join(
                f"127.0.0.1:{replica.grpc_port}" for replica in replicas) + "]",
            "OTEL_DIARY_TLS_INSECURE": "true",
            "OTEL_DIARY_TOKEN": TOKEN,
        })
        run_tasks(OTLPSpanExporter(endpoint=f"127.0.0.1:{balancer.grpc_port}", insecure=True),
                  "lb", tasks, chats=chats)

        def written() -> float:
            return sum(replica.metrics().get("otel_diary_diaries_written_total", 0)
                       for replica in replicas)

        wait_until(lambda: written() >= tasks, 90, f"{tasks} diaries over both replicas",
                   lambda: f"written: {written()}\nbalancer log:\n{balancer.log_text()}")
        balancer.stop()
        for replica in replicas:
            assert replica.stop() == 0

    by_replica = [diary_files(replica) for replica in replicas]
    task_ids = [str(front["task"]) for files in by_replica for front in files]
    assert len(task_ids) == tasks
    assert sorted(task_ids) == sorted(f"lb-{n}" for n in range(tasks))
    assert all(files for files in by_replica), "one replica got no work"
    for replica, files in zip(replicas, by_replica, strict=True):
        event = stopped_event(replica)
        # Every span of a trace reached the replica that had its task span: each diary
        # sums all of its children, and no replica held a span without its task.
        assert {front["tokens"] for front in files} == {15 * chats}
        assert event["root_tasks"] == event["diaries_written"] == len(files)
        assert event["spans_accepted"] == len(files) * (1 + chats)
        assert event["rootless_traces"] == 0
    trace_ids = [{front["trace_id"] for front in files} for files in by_replica]
    assert not trace_ids[0] & trace_ids[1]


def test_replicas_behind_loadbalancing_share_one_postgresql_store(
        otelcol: Path, tmp_path: Path, postgres_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two replicas behind loadbalancing.yaml on one PostgreSQL store: a recovered run on
    one replica lists, in Related and in its lesson, earlier runs of the same error that
    went to the other; `otel-diary search --store` sees every diary of both."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from otel_diary.index.postgres import PostgresStore
    from tests.support.kb import TS_STDERR

    first, second = 10, 10
    monkeypatch.setenv("OTEL_DIARY_STORE_URL", postgres_url)
    monkeypatch.setenv("OTEL_DIARY_RETRY_INITIAL_BACKOFF_S", "0.1")
    store = PostgresStore(postgres_url)
    with ExitStack() as stack:
        stack.callback(store.close)
        replicas = start_serves(stack, *((tmp_path / f"replica-{n}", ("--token", TOKEN))
                                         for n in range(2)))
        balancer = start_otelcol(stack, otelcol, "loadbalancing.yaml", tmp_path / "lb.log", {
            "OTEL_DIARY_REPLICAS": "[" + ", ".join(
                f"127.0.0.1:{replica.grpc_port}" for replica in replicas) + "]",
            "OTEL_DIARY_TLS_INSECURE": "true",
            "OTEL_DIARY_TOKEN": TOKEN,
        })

        def recovered_runs(start: int, count: int) -> None:
            provider = TracerProvider(resource=Resource.create({"service.name": "shared"}),
                                      shutdown_on_exit=False)
            exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{balancer.grpc_port}",
                                        insecure=True)
            provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
            tracer = provider.get_tracer("orchestrator")
            for n in range(start, start + count):
                with tracer.start_as_current_span("orchestrator.task", attributes={
                    "orchestrator.task.id": f"shared-{n}", "orchestrator.agent.name": "shared",
                    "orchestrator.build_verify.attempts": 2,
                    "orchestrator.build_verify.stderr_tail": TS_STDERR}):
                    pass
            assert provider.force_flush(30_000)
            provider.shutdown()

        def stored() -> int:
            try:
                return store.count()
            except Exception:
                return 0

        recovered_runs(0, first)
        wait_until(lambda: stored() >= first, 90, f"{first} diaries in the store",
                   lambda: f"stored: {stored()}\nbalancer log:\n{balancer.log_text()}")
        recovered_runs(first, second)
        wait_until(lambda: stored() >= first + second, 90, "every diary in the store",
                   lambda: f"stored: {stored()}\nbalancer log:\n{balancer.log_text()}")
        balancer.stop()
        for replica in replicas:
            assert replica.stop() == 0

    home = {str(front["id"]): n for n, replica in enumerate(replicas)
            for front in diary_files(replica)}
    assert len(home) == first + second
    assert set(home.values()) == {0, 1}, "one replica got no work"
    lesson = store.lesson("code:TS2345")
    assert lesson.runs == first + second
    assert set(lesson.evidence) == set(home)
    earlier = {str(front["id"]) for replica in replicas for front in diary_files(replica)
               if int(str(front["task"]).split("-")[1]) < first}
    crossed = []
    for n, replica in enumerate(replicas):
        for front in diary_files(replica):
            if int(str(front["task"]).split("-")[1]) < first:
                continue
            related = [str(ident) for ident in front.get("related") or []]  # type: ignore[attr-defined]
            assert related[0] == lesson.id
            crossed += [ident for ident in related[1:] if ident in earlier and home[ident] != n]
    assert crossed, "no later run listed an earlier run of the other replica"
    store.close()
    done = subprocess.run([sys.executable, "-m", "otel_diary.cli", "search", "--store",
                           postgres_url, "--json", "--limit", "1000"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    found = {hit["id"] for hit in json.loads(done.stdout)["results"]}
    assert found == set(home)


ARCHIVE_CONFIG = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: ${env:OTELCOL_GRPC_ENDPOINT}
processors:
  batch:
exporters:
  otlp_http/diary:
    endpoint: ${env:OTEL_DIARY_ENDPOINT}
    compression: ${env:COMPRESSION}
    encoding: ${env:ENCODING}
  file/archive:
    path: ${env:ARCHIVE_PATH}
    format: ${env:ARCHIVE_FORMAT}
    compression: ${env:ARCHIVE_COMPRESSION}
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlp_http/diary, file/archive]
  telemetry:
    metrics:
      level: none
"""


@pytest.mark.parametrize("compression, encoding", [
    ("zstd", "proto"), ("zstd", "json"), ("zlib", "proto"), ("deflate", "json")])
def test_what_the_collectors_exporter_compresses_reaches_serve(
        otelcol: Path, tmp_path: Path, compression: str, encoding: str) -> None:
    """The Collector's ``otlp_http`` exporter set to ``compression: zstd`` (which vendors
    recommend), ``zlib`` or ``deflate`` delivers every run to ``serve``, protobuf or JSON."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    config = tmp_path / "compressed.yaml"
    config.write_text(ARCHIVE_CONFIG)
    with ExitStack() as stack:
        [diary] = start_serves(stack, (tmp_path / "serve", ()))
        collector = Otelcol(otelcol, config, tmp_path / "otelcol.log", {
            "OTEL_DIARY_ENDPOINT": diary.url, "COMPRESSION": compression,
            "ENCODING": encoding, "ARCHIVE_PATH": str(tmp_path / "archive.jsonl"),
            "ARCHIVE_FORMAT": "json", "ARCHIVE_COMPRESSION": ""})
        stack.callback(collector.stop)
        run_tasks(OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}",
                                   insecure=True), "packed", 3)
        wait_until(lambda: diary.metrics().get("otel_diary_diaries_written_total", 0) >= 3,
                   60, f"three diaries sent with {compression}",
                   lambda: f"{diary.metrics()}\n{collector.log_text()}")
        assert diary.stop() == 0
    assert sorted(str(front["task"]) for front in diary_files(diary)) == [
        "packed-0", "packed-1", "packed-2"]


@pytest.mark.parametrize("form, compression", [
    ("json", ""), ("json", "zstd"), ("proto", ""), ("proto", "zstd")])
def test_what_the_collector_files_replays_to_the_diaries_serve_wrote(
        otelcol: Path, tmp_path: Path, form: str, compression: str) -> None:
    """One Collector sends an app's runs to ``serve`` and writes them to a file with its
    file exporter, as JSON lines, or as records (each its length, then the request in
    protobuf or JSON, zstd-compressed or not); ``otel-diary replay`` of that file writes
    the same diaries and lessons, byte for byte (runs that recover from one error relate to
    each other)."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from tests.support.kb import PY_STDERR, TS_STDERR

    config, archive = tmp_path / "archive.yaml", tmp_path / "traces.jsonl"
    config.write_text(ARCHIVE_CONFIG)
    runs = 12
    with ExitStack() as stack:
        [diary] = start_serves(stack, (tmp_path / "serve", ()))
        collector = Otelcol(otelcol, config, tmp_path / "otelcol.log", {
            "OTEL_DIARY_ENDPOINT": diary.url, "COMPRESSION": "gzip", "ENCODING": "proto",
            "ARCHIVE_PATH": str(archive), "ARCHIVE_FORMAT": form,
            "ARCHIVE_COMPRESSION": compression})
        stack.callback(collector.stop)
        provider = TracerProvider(resource=Resource.create({"service.name": "archived"}),
                                  shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True),
            schedule_delay_millis=200))
        tracer = provider.get_tracer("orchestrator")
        for n in range(runs + 1):
            failure: dict[str, str | int] = {
                "orchestrator.build_verify.attempts": 2,
                "orchestrator.build_verify.stderr_tail": (TS_STDERR, PY_STDERR)[n % 2]}
            with tracer.start_as_current_span("orchestrator.task", attributes={
                    "orchestrator.task.id": f"T-{n % 4}", "orchestrator.agent.name": "archived",
                    **(failure if n % 3 else {})}) as task:
                with tracer.start_as_current_span("chat", attributes={
                        "gen_ai.request.model": "m-1", "gen_ai.usage.input_tokens": 10 + n}):
                    pass
                if n == runs:  # a failed run: no diary on either path
                    task.set_status(StatusCode.ERROR, "gave up")
        assert provider.force_flush(30_000)
        provider.shutdown()
        wait_until(lambda: diary.metrics().get("otel_diary_diaries_written_total", 0) >= runs,
                   60, f"{runs} diaries from the Collector", collector.log_text)
        collector.stop()  # the file exporter writes out what it holds
        assert diary.stop() == 0
    replayed = tmp_path / "replayed"
    done = subprocess.run([sys.executable, "-m", "otel_diary.cli", "replay", str(archive),
                           "--dir", str(replayed), "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["diaries_written"] == runs

    def knowledge(root: Path) -> dict[str, bytes]:
        return {str(path.relative_to(root)): path.read_bytes()
                for path in sorted((root / "diaries").rglob("*.md"))}

    served = knowledge(diary.root / "kb")
    assert len([path for path in served if path.startswith("diaries/agents/")]) == runs
    assert len([path for path in served if path.startswith("diaries/lessons/")]) == 2
    assert any(b"\n## Related\n- " in text for text in served.values())
    assert knowledge(replayed) == served
