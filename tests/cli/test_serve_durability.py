"""``otel-diary serve`` keeps what it acknowledged: SIGKILL, SIGTERM with a slow model,
the journal taken back on start and its bound."""

from __future__ import annotations

import http.client
import signal
import sqlite3
import threading
from collections import Counter
from pathlib import Path

import httpx

from otel_diary.pipeline.render import parse_front_matter
from tests.cli.test_serve import Serve
from tests.support.loopback import ChatServer, serve_asgi
from tests.support.otlp_build import protobuf_body, task_trace

PROTOBUF = {"content-type": "application/x-protobuf"}


def diary_files(root: Path) -> Counter[str]:
    """How many diary files each task id has on disk."""
    found: Counter[str] = Counter()
    for path in (root / "kb" / "diaries" / "agents").rglob("*.md"):
        found[str(parse_front_matter(path.read_text())["task"])] += 1
    return found


def journal_rows(root: Path) -> int:
    with sqlite3.connect(root / "kb" / "journal.sqlite3") as conn:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


def test_sigkill_under_load_loses_no_acknowledged_task(tmp_path: Path) -> None:
    """Six clients post task traces; serve is killed with SIGKILL once 400 tasks were
    answered 200 while they still post (some written by then, some decided, some in their
    grace period). After a restart every task answered 200 has its diary, exactly once."""
    server = Serve(tmp_path, "--grace", "0.5")
    acknowledged: list[str] = []
    lock = threading.Lock()
    enough = threading.Event()

    def client(number: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
        try:
            for n in range(400):  # bounded; the kill ends it long before
                tasks = [f"T-{number}-{n}-{k}" for k in range(2)]
                body = protobuf_body([span for task in tasks for span in task_trace(task)])
                connection.request("POST", "/v1/traces", body=body, headers=PROTOBUF)
                response = connection.getresponse()
                response.read()
                if response.status == 200:
                    with lock:
                        acknowledged.extend(tasks)
                        if len(acknowledged) >= 400:
                            enough.set()
        except (OSError, http.client.HTTPException):
            return  # the server is gone
        finally:
            connection.close()

    clients = [threading.Thread(target=client, args=(n,)) for n in range(6)]
    for thread in clients:
        thread.start()
    try:
        assert enough.wait(120)
        for _ in range(400):  # bounded: until some diaries are written as well
            if server.metrics().get("otel_diary_diaries_written_total", 0) >= 20:
                break
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(30)
    finally:
        for thread in clients:
            thread.join(60)
    with lock:
        answered = list(acknowledged)
    assert len(answered) >= 400
    written_before = len(diary_files(tmp_path))
    assert 0 < written_before < len(answered)  # some written, some still waiting

    again = Serve(tmp_path)
    try:
        again.wait_for_diaries(len(answered) - written_before)
    finally:
        assert again.stop() == 0
    files = diary_files(tmp_path)
    assert [task for task in answered if files[task] != 1] == []
    assert max(files.values()) == 1


def test_sigterm_with_a_slow_model_writes_every_task(tmp_path: Path) -> None:
    """40 tasks waiting for their grace period when SIGTERM comes, a model taking 1 s a
    call, 8 calls allowed at once, 10 s to stop: every diary is written, each with the
    model's answer."""
    chat = ChatServer(script=["Slow but useful insight."], delay_s=1.0)
    with serve_asgi(chat) as model_url:
        server = Serve(tmp_path, "--grace", "600", env={
            "OTEL_DIARY_REFLECTION_URL": model_url + "/v1",
            "OTEL_DIARY_REFLECTION_CONCURRENCY": "8",
            "OTEL_DIARY_REFLECTION_CALLS_PER_MINUTE": "1000",
            "OTEL_DIARY_SHUTDOWN_TIMEOUT_MS": "10000"})
        try:
            for n in range(40):
                assert httpx.post(server.url + "/v1/traces", headers=PROTOBUF, timeout=10,
                                  content=protobuf_body(task_trace(f"T-slow-{n}"))
                                  ).status_code == 200
        finally:
            assert server.stop() == 0
    files = diary_files(tmp_path)
    assert sorted(files) == sorted(f"T-slow-{n}" for n in range(40))
    learned = [path.read_text() for path in (tmp_path / "kb" / "diaries").rglob("*.md")]
    assert all("Slow but useful insight." in text for text in learned)
    assert chat.max_in_flight >= 4  # calls overlapped


def test_the_journal_is_taken_back_on_start_and_compacted(tmp_path: Path) -> None:
    """Tasks in their grace period when serve is killed are in the journal; the next
    start takes them back, and once their diaries are written the journal is empty."""
    server = Serve(tmp_path, "--grace", "600")
    for n in range(5):
        assert httpx.post(server.url + "/v1/traces", headers=PROTOBUF, timeout=10,
                          content=protobuf_body(task_trace(f"T-j-{n}"))).status_code == 200
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(30)
    assert diary_files(tmp_path) == Counter()
    assert journal_rows(tmp_path) == 5

    again = Serve(tmp_path, "--grace", "600")
    values = again.metrics()
    assert again.stop() == 0  # the replayed tasks are held again, and written on SIGTERM
    assert values["otel_diary_held_spans"] == 5 * 3  # each: its task span and 2 chats
    assert sorted(diary_files(tmp_path)) == [f"T-j-{n}" for n in range(5)]
    assert journal_rows(tmp_path) == 0
    assert '"event": "journal.replayed"' in again.stderr.read_text()


def test_past_the_journal_bound_requests_get_503_and_are_counted(tmp_path: Path) -> None:
    """With a small journal bound, requests past it are answered 503 with Retry-After and
    counted; every request answered 200 still gets its diary."""
    server = Serve(tmp_path, "--grace", "600", env={"OTEL_DIARY_JOURNAL_MAX_BYTES": "4000"})
    answers = {}
    try:
        for n in range(20):
            answers[f"T-b-{n}"] = httpx.post(
                server.url + "/v1/traces", headers=PROTOBUF, timeout=10,
                content=protobuf_body(task_trace(f"T-b-{n}")))
        values = server.metrics()
    finally:
        assert server.stop() == 0
    refused = [task for task, answer in answers.items() if answer.status_code == 503]
    accepted = [task for task, answer in answers.items() if answer.status_code == 200]
    assert refused and accepted and len(refused) + len(accepted) == 20
    assert all(answers[task].headers.get("retry-after") for task in refused)
    assert values['otel_diary_requests_rejected_total{reason="journal_full"}'] == len(refused)
    assert sorted(diary_files(tmp_path)) == sorted(accepted)


def test_what_sigterm_cannot_write_in_time_is_written_by_the_next_start(
        tmp_path: Path) -> None:
    """With a model slower than the shutdown timeout allows, the tasks SIGTERM could not
    write stay in the journal; the next start writes them, each once."""
    chat = ChatServer(script=["Late insight."], delay_s=2.0)
    tasks = [f"T-late-{n}" for n in range(6)]
    with serve_asgi(chat) as model_url:
        server = Serve(tmp_path, "--grace", "600", env={
            "OTEL_DIARY_REFLECTION_URL": model_url + "/v1",
            "OTEL_DIARY_REFLECTION_CONCURRENCY": "1",
            "OTEL_DIARY_REFLECTION_CALLS_PER_MINUTE": "1000",
            "OTEL_DIARY_SHUTDOWN_TIMEOUT_MS": "1000"})
        try:
            for task in tasks:
                assert httpx.post(server.url + "/v1/traces", headers=PROTOBUF, timeout=10,
                                  content=protobuf_body(task_trace(task))).status_code == 200
        finally:
            assert server.stop() == 0
    written_at_stop = diary_files(tmp_path)
    assert len(written_at_stop) < len(tasks)
    assert journal_rows(tmp_path) > 0

    again = Serve(tmp_path)  # no model now: the stub writes what is left
    try:
        again.wait_for_diaries(len(tasks) - len(written_at_stop))
    finally:
        assert again.stop() == 0
    assert diary_files(tmp_path) == Counter({task: 1 for task in tasks})
    assert journal_rows(tmp_path) == 0


def test_contributions_waiting_for_their_task_survive_sigterm(tmp_path: Path) -> None:
    """A task's LLM spans are answered 200, serve is stopped with SIGTERM, and the task span
    comes to the next start: the diary counts the tokens those spans reported."""
    spans = task_trace("T-later", chats=3, tokens=(100, 20))
    first = Serve(tmp_path, "--grace", "1")
    try:
        assert httpx.post(first.url + "/v1/traces", headers=PROTOBUF, timeout=10,
                          content=protobuf_body(spans[1:])).status_code == 200
    finally:
        assert first.stop() == 0
    second = Serve(tmp_path)
    try:
        assert httpx.post(second.url + "/v1/traces", headers=PROTOBUF, timeout=10,
                          content=protobuf_body(spans[:1])).status_code == 200
        second.wait_for_diaries(1)
    finally:
        assert second.stop() == 0
    assert second.diaries()["T-later"]["tokens"] == 3 * (100 + 20)
