"""Knowledge-hub delivery against a real hub on 127.0.0.1: body, retries, spool, restarts."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_diary import (
    ORCHESTRATOR,
    Diary,
    DiarySpanProcessor,
    FolderSink,
    Settings,
    TaskRun,
    render,
)
from otel_diary.cli import main as cli
from otel_diary.errors import SpoolFullError
from otel_diary.index.lessons import lesson_id, lesson_path
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.sinks.hub.client import parse_retry_after
from otel_diary.sinks.hub.sink import HubSink
from otel_diary.sinks.hub.spool import Spool
from otel_diary.wiring import build_pipeline, default_sinks
from tests.support.forking import in_forked_child, needs_fork
from tests.support.kb import TS_STDERR, task_record, write
from tests.support.loopback import (
    HubServer,
    Receive,
    Scope,
    Send,
    free_port,
    read_body,
    send_json,
    serve_asgi,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
END_NS = 1_785_000_000_000_000_000  # 2026-07-25


def make_diary(n: int, **facts: Any) -> Diary:
    """The rendered diary of task run number ``n``."""
    run = TaskRun(trace_id=0xABC000 + n, span_id=0xDEF000 + n, task_id=f"T-{n}",
                  title=f"Task {n}", agent="coder", outcome="completed", end_ns=END_NS,
                  latency_ms=1200, **facts)
    return render(run, "Check the cache first.")


class Sinks:
    """Hub sinks made by a test, closed at its end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.made: list[HubSink] = []

    def __call__(self, url: str, **options: Any) -> HubSink:
        settings: dict[str, Any] = {
            "spool_dir": self.tmp_path / "spool", "timeout_s": 2.0,
            "initial_backoff_s": 0.01, "max_backoff_s": 0.05, "shutdown_timeout_s": 5.0,
            "poll_s": 0.05, **options}
        sink = HubSink(url, **settings)
        self.made.append(sink)
        return sink

    def close(self) -> None:
        for sink in self.made:
            sink.shutdown_timeout_s = 0.2
            sink.close()


@pytest.fixture
def sinks(tmp_path: Path) -> Iterator[Sinks]:
    made = Sinks(tmp_path)
    yield made
    made.close()


def run_tasks(provider: TracerProvider, count: int, **attributes: Any) -> None:
    tracer = provider.get_tracer("tests")
    for n in range(count):
        with tracer.start_as_current_span("task", attributes={
                "orchestrator.task.id": f"T-{n}", "orchestrator.agent.name": "coder",
                "orchestrator.task.title": f"Task {n}", **attributes}):
            pass


def test_hub_receives_the_documented_body_and_headers(
        hub: tuple[HubServer, str], tmp_path: Path) -> None:
    """With MOTHER_AI_URL and OTEL_DIARY_DIR set, the folder and the hub get the same diary."""
    server, url = hub
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}),
                              shutdown_on_exit=False)
    settings = Settings(enabled=True, dir=tmp_path / "kb", spool_dir=tmp_path / "spool",
                        index=False)
    processor = DiarySpanProcessor(settings=settings, hub_url=url, hub_api_key="hub-key-123")
    provider.add_span_processor(processor)
    run_tasks(provider, 1, **{"orchestrator.build_verify.attempts": 1})
    assert processor.force_flush(10_000)
    assert wait_until(lambda: len(server.acknowledged) == 1)
    provider.shutdown()

    [request] = server.posts()
    body = request.json()
    [file] = (tmp_path / "kb" / "diaries" / "agents" / "coder").glob("*.md")
    front = parse_front_matter(body["content"])
    assert request.method == "POST"
    assert request.headers["x-api-key"] == "hub-key-123"
    assert request.headers["idempotency-key"] == front["id"]
    assert request.headers["content-type"] == "application/json"
    assert body["path"] == f"diaries/agents/coder/{file.name}"
    assert body["content"] == file.read_text(encoding="utf-8")
    assert body["source_type"] == "diary"
    assert body["title"] == "Task 0"
    assert body["tags"][:2] == ["outcome:completed", "task:T-0"]
    assert {k: body["metadata"][k] for k in ("id", "trace_id", "span_id", "agent", "task",
                                              "outcome")} == {
        "id": front["id"], "trace_id": front["trace_id"], "span_id": front["span_id"],
        "agent": "coder", "task": "T-0", "outcome": "completed"}
    assert not list((tmp_path / "spool").glob("*.json"))


def test_without_an_api_key_no_key_header_is_sent(hub: tuple[HubServer, str],
                                                  sinks: Sinks) -> None:
    """No MOTHER_AI_API_KEY: the request carries no x-api-key header at all."""
    server, url = hub
    sink = sinks(url)
    sink.write(make_diary(1))
    assert sink.flush(10)
    [request] = server.posts()
    assert "x-api-key" not in request.headers
    assert request.headers["idempotency-key"] == make_diary(1).id


def test_two_503_then_200_delivers_exactly_one_diary(hub: tuple[HubServer, str],
                                                     sinks: Sinks) -> None:
    """A hub that answers 503 twice and then 200 ends up with the diary once."""
    server, url = hub
    server.script = [503, 503, 200]
    sink = sinks(url)
    diary = make_diary(1)
    sink.write(diary)
    assert sink.flush(10)
    assert len(server.posts()) == 3
    assert server.acknowledged == [diary.id]
    assert list(server.documents) == [diary.id]
    assert (sink.stats.retries, sink.stats.delivered) == (2, 1)


def test_429_with_retry_after_is_honoured(hub: tuple[HubServer, str], sinks: Sinks) -> None:
    """After a 429 with ``Retry-After: 1`` the next attempt waits at least that second."""
    server, url = hub
    server.script = [(429, {"Retry-After": "1"}), 200]
    sink = sinks(url)  # the backoff alone would wait at most 0.05 s
    sink.write(make_diary(1))
    assert sink.flush(10)
    assert len(server.posts()) == 2
    assert sink.stats.last_retry_delay_s >= 1.0
    assert server.received_at[1] - server.received_at[0] >= 1.0


def test_retry_after_as_a_date_and_as_nonsense() -> None:
    """Retry-After is read as seconds or as an HTTP date; garbage means no hint."""
    now = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
    later = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(90)
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("999999") == 3600.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_400_is_not_retried_and_the_answer_is_logged(
        hub: tuple[HubServer, str], sinks: Sinks, caplog: pytest.LogCaptureFixture) -> None:
    """A 400 is final: sent once, set aside with the hub's answer, logged; others go on."""
    server, url = hub
    server.script = [400, 200]
    sink = sinks(url)
    refused, accepted = make_diary(1), make_diary(2)
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        sink.write(refused)
        assert sink.flush(10)
        sink.write(accepted)
        assert sink.flush(10)
    keys = [r.headers["idempotency-key"] for r in server.posts()]
    assert keys == [refused.id, accepted.id]
    assert server.acknowledged == [accepted.id]
    [failed] = sink.spool.failed()
    record = failed.load()
    assert record is not None and record["answer"]["status"] == 400
    assert "hub says 400" in record["answer"]["text"]
    assert any(refused.id in r.getMessage() and "hub says 400" in r.getMessage()
               for r in caplog.records)
    assert sink.stats.rejected == 1


def test_a_hanging_hub_times_out_and_the_diary_is_retried(
        hub: tuple[HubServer, str], sinks: Sinks) -> None:
    """A hub that never answers is given up on after the timeout; the retry delivers."""
    server, url = hub
    server.script = ["hang", 200]
    server.hang_s = 3.0
    sink = sinks(url, timeout_s=0.3)
    diary = make_diary(1)
    sink.write(diary)
    assert sink.flush(10)
    assert len(server.posts()) == 2
    assert server.acknowledged == [diary.id]
    assert sink.stats.retries == 1


def test_a_request_under_way_at_close_closes_the_client_when_it_ends(
        hub: tuple[HubServer, str], sinks: Sinks) -> None:
    """Closed while the hub holds a request past the shutdown timeout, the sink leaves the
    client to the delivery thread, which closes it once that request ended: not under the
    request, and not never (a store's pool left open stalled whoever collected it)."""
    server, url = hub
    server.script = ["hang"]
    server.hang_s = 1.0
    sink = sinks(url, timeout_s=5.0, shutdown_timeout_s=0.1)
    sink.write(make_diary(1))
    assert wait_until(lambda: len(server.posts()) == 1)
    client = sink._client._client  # the HTTP client
    sink.close()
    assert not client.is_closed  # the request goes on
    assert wait_until(lambda: client.is_closed)
    assert len(sink.spool) == 1  # the hub never answered: the diary waits for a next start


def test_a_hub_outage_does_not_stall_folder_writes(hub: tuple[HubServer, str],
                                                   tmp_path: Path) -> None:
    """With the hub hanging, diaries still reach the folder; shutdown leaves them spooled."""
    server, url = hub
    server.script = ["hang"]
    server.hang_s = 5.0
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path / "kb", hub_url=url,
                                   spool_dir=tmp_path / "spool", hub_timeout_s=5.0,
                                   shutdown_timeout_ms=200, index=False)
    provider.add_span_processor(processor)
    run_tasks(provider, 3)
    assert processor.force_flush(10_000)
    assert len(list((tmp_path / "kb" / "diaries" / "agents" / "coder").glob("*.md"))) == 3
    provider.shutdown()
    assert server.acknowledged == []
    assert len(Spool(tmp_path / "spool").pending()) == 3


def test_an_unusable_spool_never_fails_the_app(hub: tuple[HubServer, str],
                                               tmp_path: Path) -> None:
    """A spool that cannot be created costs the hub its diaries, counted; the app and the
    folder carry on."""
    _, url = hub
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    provider = TracerProvider(shutdown_on_exit=False)
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path / "kb", hub_url=url,
                                   spool_dir=blocker / "spool", index=False)
    provider.add_span_processor(processor)
    run_tasks(provider, 1)
    assert processor.force_flush(10_000)
    provider.shutdown()
    assert len(list((tmp_path / "kb").rglob("*.md"))) == 1
    assert processor.stats.sink_errors == 1 and processor.stats.diaries == 1


def test_shutdown_delivers_what_waits(hub: tuple[HubServer, str], sinks: Sinks) -> None:
    """Closing the sink right after writing still delivers everything to a healthy hub."""
    server, url = hub
    sink = sinks(url)
    diaries = [make_diary(n) for n in range(4)]
    for diary in diaries:
        sink.write(diary)
    sink.close()
    assert sorted(server.acknowledged) == sorted(d.id for d in diaries)
    assert not sink.spool.pending()


def test_an_exit_is_not_held_up_by_a_failing_hub(hub: tuple[HubServer, str],
                                                 sinks: Sinks) -> None:
    """Closed while the hub fails, the sink tries it once more after its backoff (a
    passing 503), then leaves what waits in the spool for the next start: an app's exit
    does not wait through the hub's backoff until the shutdown timeout."""
    server, url = hub
    server.script = [503]
    sink = sinks(url, initial_backoff_s=1.0, max_backoff_s=1.0)
    diary = make_diary(1)
    sink.write(diary)
    assert wait_until(lambda: len(server.posts()) == 1)
    sink.close()
    assert len(server.posts()) == 2  # one retry made at exit, not one a second for 5 s
    assert [entry.id for entry in sink.spool.pending()] == [diary.id]


@pytest.mark.parametrize(("count", "told"), [
    (1, "stopped with 1 diary for the knowledge hub in {spool}; the next start delivers it"),
    (2, "stopped with 2 diaries for the knowledge hub in {spool}; the next start delivers "
        "them")])
def test_what_a_stop_leaves_for_the_next_start_is_counted_in_words(
        sinks: Sinks, caplog: pytest.LogCaptureFixture, count: int, told: str) -> None:
    """Closed with diaries the hub did not take, the sink says how many wait, and where."""
    sink = sinks(f"http://127.0.0.1:{free_port()}", shutdown_timeout_s=0.2)
    for n in range(count):
        sink.write(make_diary(n))
    sink.close()
    assert told.format(spool=sink.spool.directory) in caplog.text


def test_a_new_sink_delivers_what_an_earlier_one_left(hub: tuple[HubServer, str],
                                                      sinks: Sinks) -> None:
    """Diaries spooled while the hub was unreachable are delivered by the next sink."""
    server, url = hub
    down = f"http://127.0.0.1:{free_port()}"
    first = sinks(down, shutdown_timeout_s=0.2)
    diaries = [make_diary(n) for n in range(3)]
    for diary in diaries:
        first.write(diary)
    first.close()
    assert len(first.spool.pending()) == 3
    second = sinks(url)
    assert second.flush(10)
    assert sorted(server.acknowledged) == sorted(d.id for d in diaries)


def test_a_processor_delivers_an_earlier_spool_before_its_first_diary(
        hub: tuple[HubServer, str], sinks: Sinks, tmp_path: Path) -> None:
    """The sinks are built at once: an app that restarts delivers what its last run left
    in the spool without waiting for a diary (the rest of the pipeline waits for one)."""
    server, url = hub
    first = sinks(f"http://127.0.0.1:{free_port()}", shutdown_timeout_s=0.2)
    diaries = [make_diary(n) for n in range(2)]
    for diary in diaries:
        first.write(diary)
    first.close()
    processor = DiarySpanProcessor(enabled=True, dir=tmp_path / "kb", hub_url=url,
                                   spool_dir=tmp_path / "spool")
    try:
        assert wait_until(lambda: len(server.acknowledged) == 2, timeout=30)
        assert sorted(server.acknowledged) == sorted(d.id for d in diaries)
        assert processor._pipeline is None  # no diary yet: nothing else was built
    finally:
        processor.shutdown()


def test_the_spool_is_bounded_in_entries_and_bytes(
        sinks: Sinks, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Past its entry or byte bound the spool refuses new diaries, counted and logged."""
    down = f"http://127.0.0.1:{free_port()}"
    sink = sinks(down, max_entries=2, initial_backoff_s=5.0, max_backoff_s=5.0)
    sink.write(make_diary(1))
    sink.write(make_diary(2))
    sink.write(make_diary(2))  # the same diary again replaces its entry
    with caplog.at_level(logging.WARNING, logger="otel_diary"), \
            pytest.raises(SpoolFullError):
        sink.write(make_diary(3))
    assert sink.stats.spool_full == 1
    assert any("full" in r.getMessage() for r in caplog.records)
    small = Spool(tmp_path / "small", max_bytes=600)
    small.put("kh-a", {"content": "x" * 300})
    with pytest.raises(SpoolFullError):
        small.put("kh-b", {"content": "x" * 300})
    assert [entry.id for entry in small.pending()] == ["kh-a"]


def test_spooled_entries_are_private_to_the_user(tmp_path: Path) -> None:
    """A waiting diary (agent content, on its way to the hub) is readable by its owner
    alone, whatever the umask, and no temporary file is left beside it."""
    import stat

    path = Spool(tmp_path / "spool").put("kh-a", {"content": "x"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert list((tmp_path / "spool").glob(".*.tmp")) == []


def test_an_entry_being_delivered_is_locked_against_other_deliverers(tmp_path: Path) -> None:
    """While one deliverer holds an entry, another (another process) cannot claim it."""
    one, other = Spool(tmp_path / "spool"), Spool(tmp_path / "spool")
    one.put("kh-a", {"content": "x"})
    [entry] = one.pending()
    claim = one.claim(entry)
    assert claim is not None and claim.record is not None
    assert other.claim(entry) is None
    claim.release()
    again = other.claim(entry)
    assert again is not None
    other.done(again)
    assert one.pending() == []


def test_an_entry_swapped_after_the_scan_is_not_delivered(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An entry replaced by a link, a FIFO or a socket between the scan and the claim is
    skipped: its target is never read (nor sent to the hub), a FIFO never blocks the
    deliverer, and one that cannot be opened (said once) does not hold up the others."""
    spool = Spool(tmp_path / "spool")
    outside = tmp_path / "private.json"
    outside.write_text(json.dumps({"content": "not the spool's"}))
    sockets: list[socket.socket] = []

    def bind(path: Path) -> None:
        sockets.append(socket.socket(socket.AF_UNIX))
        sockets[-1].bind(str(path))

    for name, swap in (("kh-link", lambda path: path.symlink_to(outside)),
                       ("kh-fifo", os.mkfifo), ("kh-socket", bind)):
        path = spool.put(name, {"content": "x"})
        [entry] = [entry for entry in spool.pending() if entry.id == name]
        path.unlink()
        swap(path)
        assert spool.claim(entry) is None
        path.unlink()
    for each in sockets:
        each.close()
    assert "cannot read the spooled diary" in caplog.text
    spool.put("kh-next", {"content": "x"})
    [entry] = spool.pending()
    assert spool.claim(entry) is not None


def test_outage_then_sigkill_then_restart_delivers_each_diary_once(
        hub: tuple[HubServer, str], tmp_path: Path) -> None:
    """An app killed (SIGKILL) while the hub is down loses nothing: a restart delivers it once."""
    server, _ = hub
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = start_app("emit", url, tmp_path, tasks=3)
    try:
        wait_for_line(first, "spooled 3", first.stdout)
        wait_for_line(first, "could not deliver", first.stderr)  # retrying right now
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    assert len(list((tmp_path / "spool").glob("*.json"))) == 3
    assert len(list((tmp_path / "kb").rglob("*.md"))) == 3

    with serve_asgi(server, port=port):
        report = drain(url, tmp_path)
    delivered = len(set(server.acknowledged))
    duplicated = len(server.acknowledged) - delivered
    assert (delivered, 3 - delivered, duplicated) == (3, 0, 0)
    assert len(server.posts()) == 3
    assert report["delivered"] == 3 and report["waiting"] == 0


def test_sigkill_during_a_request_then_restart_stores_each_diary_once(
        hub: tuple[HubServer, str], tmp_path: Path) -> None:
    """Killed while the hub holds its request, the app's restart redelivers under the same
    Idempotency-Key, so the hub stores every diary exactly once."""
    server, url = hub
    server.script = ["hang"]
    server.hang_s = 3.0
    first = start_app("emit", url, tmp_path, tasks=2)
    try:
        wait_for_line(first, "spooled 2", first.stdout)
        assert wait_until(lambda: len(server.posts()) == 1)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    in_flight = server.posts()[0].headers["idempotency-key"]
    server.script = [200]
    report = drain(url, tmp_path)
    assert report["delivered"] == 2 and report["waiting"] == 0
    assert len(server.documents) == 2 and in_flight in server.documents
    assert sorted(server.acknowledged) == sorted(server.documents)


def start_app(mode: str, url: str, tmp_path: Path, tasks: int = 0) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_") and k not in ("KB_DIARIES_ENABLED", "MOTHER_AI_URL")}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.hub_app", mode, "--hub", url, "--kb",
         str(tmp_path / "kb"), "--spool", str(tmp_path / "spool"), "--tasks", str(tasks)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(process: subprocess.Popen[str], text: str, stream: Any) -> str:
    """The first line of ``stream`` containing ``text`` (fails if the process ends first)."""
    for line in stream:
        if text in line:
            return str(line)
    raise AssertionError(f"process exited ({process.wait()}) before printing {text!r}")


def drain(url: str, tmp_path: Path) -> dict[str, int]:
    """Start the app again with nothing to do; its shutdown delivers what the spool holds."""
    second = start_app("drain", url, tmp_path)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    report: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return report


def test_spool_command_lists_and_flushes(hub: tuple[HubServer, str], sinks: Sinks,
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`otel-diary spool` shows what waits; `--flush` delivers it (exit 1 while it cannot)."""
    server, url = hub
    down = f"http://127.0.0.1:{free_port()}"
    left = sinks(down, shutdown_timeout_s=0.1)
    diary = make_diary(7)
    left.write(diary)
    left.close()
    spool = str(tmp_path / "spool")
    monkeypatch.setenv("OTEL_DIARY_RETRY_INITIAL_BACKOFF_S", "0.01")

    assert cli(["spool", "--spool-dir", spool]) == 0
    listing = capsys.readouterr().out
    assert "1 waiting" in listing and diary.id in listing and diary.alternate_path in listing

    assert cli(["spool", "--spool-dir", spool, "--flush", "--hub-url", down,
                "--timeout", "0.3"]) == 1
    assert "1 still waiting" in capsys.readouterr().out

    monkeypatch.setenv("MOTHER_AI_URL", url)
    assert cli(["spool", "--spool-dir", spool, "--flush"]) == 0
    assert "delivered 1" in capsys.readouterr().out
    assert server.acknowledged == [diary.id]


def test_spool_command_retries_refused_diaries_on_request(
        hub: tuple[HubServer, str], sinks: Sinks, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--flush --retry-failed` sends the diaries the hub refused once more; `--retry-failed`
    alone is a usage error that moves nothing."""
    server, url = hub
    server.script = [422, 200]
    sink = sinks(url)
    sink.write(make_diary(1))
    assert sink.flush(10)
    spool = str(tmp_path / "spool")
    assert cli(["spool", "--spool-dir", spool]) == 0
    assert "1 refused by the hub" in capsys.readouterr().out
    assert cli(["spool", "--spool-dir", spool, "--flush", "--hub-url", url]) == 0
    assert server.acknowledged == []
    capsys.readouterr()
    assert cli(["spool", "--spool-dir", spool, "--retry-failed", "--hub-url", url]) == 2
    assert "--retry-failed only goes with --flush" in capsys.readouterr().err
    assert server.acknowledged == [] and len(Spool(Path(spool)).failed()) == 1  # untouched
    assert cli(["spool", "--spool-dir", spool, "--flush", "--retry-failed",
                "--hub-url", url]) == 0
    assert server.acknowledged == [make_diary(1).id]


def test_hub_settings_come_from_mother_ai_variables(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """MOTHER_AI_URL and MOTHER_AI_API_KEY configure the hub; the key never shows in a repr."""
    monkeypatch.setenv("MOTHER_AI_URL", "https://hub.example/")
    monkeypatch.setenv("MOTHER_AI_API_KEY", "very-secret-key")
    settings = Settings()
    assert settings.hub_url == "https://hub.example"
    assert settings.hub_api_key is not None
    assert settings.hub_api_key.get_secret_value() == "very-secret-key"
    assert "very-secret-key" not in repr(settings) and "very-secret-key" not in str(settings)
    assert settings.spool_root == settings.root / "spool"


def test_bad_hub_url_warns_from_the_environment_and_raises_in_code(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A non-http MOTHER_AI_URL is logged and ignored; the same value in code is an error."""
    monkeypatch.setenv("MOTHER_AI_URL", "ftp://hub.example")
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        assert Settings().hub_url is None
    assert any("MOTHER_AI_URL" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError):
        Settings(hub_url="hub.example")
    with pytest.raises(ValueError):
        Settings(spool_max_entries=0)


def test_sinks_follow_the_settings(tmp_path: Path) -> None:
    """No hub: the folder; a hub: the hub; a hub and OTEL_DIARY_DIR: the folder, then the hub."""
    folder_only = default_sinks(Settings(dir=tmp_path))
    hub_only = default_sinks(Settings(hub_url="http://127.0.0.1:9", spool_dir=tmp_path / "s"))
    both = default_sinks(Settings(hub_url="http://127.0.0.1:9", dir=tmp_path,
                                  spool_dir=tmp_path / "s"))
    try:
        assert [type(s) for s in folder_only] == [FolderSink]
        assert [type(s) for s in hub_only] == [HubSink]
        assert [type(s) for s in both] == [FolderSink, HubSink]
    finally:
        for sink in (*hub_only, *both):
            if isinstance(sink, HubSink):
                sink.shutdown_timeout_s = 0
                sink.close()


def test_the_hub_gets_the_folder_path_of_a_second_run_on_the_same_day(
        hub: tuple[HubServer, str], tmp_path: Path) -> None:
    """When another run took the usual file name, the hub is sent the folder's other path."""
    server, url = hub
    [folder, sink] = default_sinks(Settings(hub_url=url, dir=tmp_path / "kb",
                                            spool_dir=tmp_path / "spool"))
    assert isinstance(folder, FolderSink) and isinstance(sink, HubSink)
    first = make_diary(1)
    second = render(TaskRun(trace_id=0x999, span_id=0x777, task_id="T-1", title="Task 1",
                            agent="coder", outcome="completed", end_ns=END_NS,
                            latency_ms=5), "Other.")
    try:
        for diary in (first, second):
            folder.write(diary)
            sink.write(diary)
        assert sink.flush(10)
    finally:
        sink.close()
    paths = {server.documents[d.id]["path"] for d in (first, second)}
    assert paths == {first.path, second.alternate_path}


def test_write_returns_before_delivery(hub: tuple[HubServer, str], sinks: Sinks) -> None:
    """``write`` only spools: it returns while the hub is still holding the request."""
    server, url = hub
    server.script = ["hang"]
    server.hang_s = 10.0
    sink = sinks(url, timeout_s=5.0)
    sink.write(make_diary(1))
    assert wait_until(lambda: len(server.posts()) == 1)
    location = sink.write(make_diary(2))
    assert location == "hub:" + make_diary(2).alternate_path
    assert len(server.posts()) == 1 and server.acknowledged == []
    assert len(sink.spool.pending()) == 2


def test_without_a_folder_each_run_gets_its_own_hub_path(hub: tuple[HubServer, str],
                                                         tmp_path: Path) -> None:
    """Hub only: two runs of one task on one day are sent under different paths, each the
    same on every redelivery (the span's alternate path)."""
    server, url = hub
    [sink] = default_sinks(Settings(hub_url=url, spool_dir=tmp_path / "spool"))
    assert isinstance(sink, HubSink)
    first = make_diary(1)
    second = render(TaskRun(trace_id=0x999, span_id=0x7770000000000001, task_id="T-1",
                            title="Task 1", agent="coder", outcome="completed", end_ns=END_NS,
                            latency_ms=5), "Other.")
    try:
        for diary in (first, second, first):
            sink.write(diary)
        assert sink.flush(10)
    finally:
        sink.close()
    sent = {d.id: server.documents[d.id]["path"] for d in (first, second)}
    assert sent == {first.id: first.alternate_path, second.id: second.alternate_path}
    assert len(set(sent.values())) == 2 and first.path == second.path


def test_an_answer_that_cannot_be_decoded_is_retried(hub: tuple[HubServer, str],
                                                     sinks: Sinks) -> None:
    """A 502 whose gzip body is corrupt counts as a retry and the next attempt delivers."""
    server, url = hub
    server.script = [(502, {"content-encoding": "gzip"}), 200]
    sink = sinks(url)
    diary = make_diary(1)
    sink.write(diary)
    assert sink.flush(10)
    assert server.acknowledged == [diary.id]
    assert (sink.stats.retries, sink.stats.delivered) == (1, 1)


def test_an_unexpected_send_error_is_retried_logged_once_and_unlocks_the_entry(
        hub: tuple[HubServer, str], sinks: Sinks, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """An entry whose id cannot be sent as a header fails outside httpx: it is counted as a
    retry, warned about once (no traceback per attempt) and stays claimable."""
    _, url = hub
    spool_dir = tmp_path / "spool"
    Spool(spool_dir).put("kh-x", {"content": "x"})
    (spool_dir / "kh-x.json").rename(spool_dir / "kh-\u00eb.json")  # left by another tool
    with caplog.at_level(logging.DEBUG, logger="otel_diary"):
        sink = sinks(url)
        assert wait_until(lambda: sink.stats.retries >= 3)
        sink.shutdown_timeout_s = 0.2
        sink.close()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING
                and "could not deliver" in r.getMessage()]
    assert len(warnings) == 1 and "UnicodeEncodeError" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    [entry] = Spool(spool_dir).pending()
    claim = Spool(spool_dir).claim(entry)
    assert claim is not None
    claim.release()


def test_a_non_ascii_api_key_is_refused_when_configured(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        tmp_path: Path) -> None:
    """An API key that cannot be an HTTP header is a ValueError in code, and a warning
    (that never shows the key) from the environment."""
    with pytest.raises(ValueError, match="API key"):
        HubSink("http://127.0.0.1:9", api_key="key\u2019s-value", spool_dir=tmp_path / "s")
    with pytest.raises(ValueError, match="API key"):
        Settings(hub_api_key="key\u2019s-value")
    with pytest.raises(ValueError, match="API key"):
        Settings(reflection_api_key="line\nbreak")
    monkeypatch.setenv("MOTHER_AI_API_KEY", "key\u2019s-value")
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        assert Settings().hub_api_key is None
    assert any("MOTHER_AI_API_KEY" in r.getMessage() for r in caplog.records)
    assert "s-value" not in caplog.text
    assert not (tmp_path / "s").exists()


async def echoing_hub(scope: Scope, receive: Receive, send: Send) -> None:
    """A hub that refuses every diary and echoes the key it was sent, as some do."""
    if scope["type"] != "http":
        return
    await read_body(receive)
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    await send_json(send, 400, {"error": f"invalid x-api-key {headers.get('x-api-key')}; "
                                         "hint: password=hunter2hunter2"})


def test_hub_urls_and_answers_are_logged_and_kept_without_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Credentials in the hub URL, secrets in the hub's answer and in a rejected
    MOTHER_AI_URL reach neither the log nor ``failed/``."""
    key = "Hub-Key-0f9e8d7c"
    down = f"http://diary:hub-pass-123@127.0.0.1:{free_port()}/?api_key=query-secret-456"
    made: list[HubSink] = []
    with caplog.at_level(logging.DEBUG, logger="otel_diary"), serve_asgi(echoing_hub) as url:
        refusing = url.replace("http://", "http://diary:hub-pass-123@")
        for hub_url, spool in ((down, "down"), (refusing, "refusing")):
            [sink] = default_sinks(Settings(
                hub_url=hub_url, hub_api_key=key, spool_dir=tmp_path / spool,
                retry_initial_backoff_s=0.01, retry_max_backoff_s=0.05))
            assert isinstance(sink, HubSink)
            made.append(sink)
            sink.write(make_diary(1))
        assert wait_until(lambda: made[0].stats.retries >= 2 and made[1].stats.rejected == 1)
        for sink in made:
            sink.shutdown_timeout_s = 0.1
            sink.close()
        monkeypatch.setenv("MOTHER_AI_URL", "hub.internal/?api_key=env-secret-789")
        assert Settings().hub_url is None
    [failed] = made[1].spool.failed()
    kept = failed.path.read_text("utf-8")
    assert "could not deliver" in caplog.text and "refused diary" in caplog.text
    assert "[REDACTED:" in kept
    for secret in ("hub-pass-123", "query-secret-456", key, "hunter2hunter2", "env-secret-789"):
        assert secret not in caplog.text
        assert secret not in kept


def test_refused_diaries_are_capped_apart_from_the_waiting_ones(
        hub: tuple[HubServer, str], sinks: Sinks,
        caplog: pytest.LogCaptureFixture) -> None:
    """Refused diaries never fill the spool: failed/ keeps its newest few, counts and logs
    (once) what it drops, and new diaries are still spooled and delivered."""
    server, url = hub
    server.script = [422, 422, 422, 422, 200]
    sink = sinks(url, max_entries=2, max_failed_entries=2)
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        for n in range(4):
            sink.write(make_diary(n))
            assert sink.flush(10)
        sink.write(make_diary(9))
        assert sink.flush(10)
    assert [entry.id for entry in sink.spool.failed()] == [make_diary(2).id, make_diary(3).id]
    assert sink.stats.failed_removed == 2 and sink.spool.failed_removed == 2
    assert server.acknowledged == [make_diary(9).id]
    assert len([r for r in caplog.records if "removed the oldest" in r.getMessage()]) == 1


@needs_fork
def test_a_forked_child_delivers_through_its_own_client_and_thread(
        hub: tuple[HubServer, str], sinks: Sinks) -> None:
    """A child forked from a process with a hub sink delivers its diary with a new client
    and delivery thread; the parent's sink keeps working."""
    server, url = hub
    sink = sinks(url, poll_s=60.0)  # the parent's thread sleeps until the parent writes
    sink.write(make_diary(1))
    assert sink.flush(10)
    parent_client = sink._client._client

    def child() -> bool:
        sink.write(make_diary(2))
        return sink.flush(10) and sink._client._client is not parent_client

    assert in_forked_child(child) == 0
    assert make_diary(2).id in server.acknowledged
    sink.write(make_diary(3))
    assert sink.flush(10)
    assert server.acknowledged == [make_diary(n).id for n in (1, 2, 3)]
    assert sink._client._client is parent_client


def test_lessons_go_to_the_hub_as_lesson_documents(hub: tuple[HubServer, str],
                                                   tmp_path: Path) -> None:
    """With a hub and a folder, each lesson is posted under its folder path as a lesson."""
    server, url = hub
    settings = Settings(enabled=True, dir=tmp_path / "kb", spool_dir=tmp_path / "spool",
                        hub_url=url, retry_initial_backoff_s=0.01)
    pipeline = build_pipeline(settings, ORCHESTRATOR)
    for n in (1, 2):
        write(pipeline, task_record(n, f"T-{n}", stderr=TS_STDERR))
    pipeline.close()
    lesson_file = tmp_path / "kb" / lesson_path("code:TS2345")
    assert wait_until(lambda: any(
        r.json()["source_type"] == "lesson" and r.json()["content"] == lesson_file.read_text(
            encoding="utf-8") for r in server.posts()))
    lessons = [r.json() for r in server.posts() if r.json()["source_type"] == "lesson"]
    assert {body["path"] for body in lessons} == {lesson_path("code:TS2345")}
    assert {body["metadata"]["id"] for body in lessons} == {lesson_id("code:TS2345")}
    assert parse_front_matter(lessons[-1]["content"])["runs"] == 2
    assert len([r for r in server.posts() if r.json()["source_type"] == "diary"]) == 2
