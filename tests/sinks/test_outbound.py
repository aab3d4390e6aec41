"""Outbound HTTP calls: a deadline for the whole call, answers read as sent."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from otel_diary.sinks import outbound
from tests.support.loopback import wait_until
from tests.support.raw_http import RawServer, head


def test_a_deadline_bounds_the_whole_call_in_its_block_only() -> None:
    """Headers trickled a byte at a time (6 s of them) end a call at its deadline though
    each read is well within the client's timeout; the same client, out of the block,
    waits for a whole answer as usual."""
    trickled = head(200, content_length=2, x_pad="p" * 90) + b"ok"
    slow = RawServer(b"", trickled)
    client = outbound.client(30)
    try:
        with pytest.raises(httpx.TimeoutException), outbound.deadline(0.3):
            client.get(slow.url)
        quick = RawServer(head(200, content_length=2) + b"ok")
        assert client.get(quick.url).text == "ok"
        quick.finish()
    finally:
        client.close()
        slow.finish()
    assert slow.trickled < len(trickled)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_call_to_a_silent_server_ends_once_cut_short(scheme: str) -> None:
    """A server that takes the connection and never answers (the request, or the TLS
    handshake) holds a call for its deadline (30 s here); cutting it short ends it, while
    it waits, with a timeout that says so."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()
    cut = threading.Event()
    client = outbound.client(30)
    failure: list[BaseException] = []

    def call() -> None:
        try:
            with outbound.deadline(30, cut):
                client.get(f"{scheme}://127.0.0.1:{listener.getsockname()[1]}/")
        except BaseException as exc:
            failure.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        assert wait_until(lambda: bool(accepted), timeout=10)
        cut.set()
        caller.join()
    finally:
        client.close()
        listener.close()
        for conn in accepted:
            conn.close()
    assert len(failure) == 1 and isinstance(failure[0], httpx.TimeoutException)
    assert "cut short" in str(failure[0])


def test_an_answer_is_read_as_sent_up_to_the_cap() -> None:
    """A gzip answer is not inflated, and no more than the cap is kept."""
    bomb = gzip.compress(b"A" * 1_000_000)
    server = RawServer(head(200, content_encoding="gzip", content_length=len(bomb)) + bomb)
    client = outbound.client(5)
    try:
        with client.stream("GET", server.url, headers=outbound.IDENTITY) as response:
            data, whole = outbound.read_capped(response, 100)
    finally:
        client.close()
        server.finish()
    assert data == bomb[:100] and not whole


@pytest.mark.parametrize(("base", "expected"), [
    ("https://hub.example", "https://hub.example/v1/kb/edit"),
    ("https://hub.example/kb/", "https://hub.example/kb/v1/kb/edit"),
    ("https://hub.example/v1/kb/edit", "https://hub.example/v1/kb/edit"),
    ("https://x.example/openai?api-version=2024-06-01",
     "https://x.example/openai/v1/kb/edit?api-version=2024-06-01"),
])
def test_an_endpoint_goes_on_the_path_before_the_query(base: str, expected: str) -> None:
    assert outbound.endpoint(base, "/v1/kb/edit") == expected


def test_a_slowly_read_upload_ends_at_the_deadline() -> None:
    """A server that reads an upload slowly but steadily (256 KiB every 10 ms: 64 MiB
    would take 2.6 s, each write waiting well under its timeout) does not stretch the
    call past its deadline."""
    listener = socket.create_server(("127.0.0.1", 0))
    read = 0
    given_up = threading.Event()

    def slow_reader() -> None:
        nonlocal read
        connection, _ = listener.accept()
        with connection:
            while not given_up.is_set() and (chunk := connection.recv(256 * 1024)):
                read += len(chunk)
                time.sleep(0.01)

    thread = threading.Thread(target=slow_reader, daemon=True)
    thread.start()
    client = outbound.client(30)
    try:
        with pytest.raises(httpx.TimeoutException), outbound.deadline(0.5):
            client.post(f"http://127.0.0.1:{listener.getsockname()[1]}",
                        content=b"x" * 64 * 2**20)
    finally:
        given_up.set()
        client.close()
        thread.join(30)
        listener.close()
    assert read < 40 * 2**20


def test_proxies_named_by_the_environment_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTPS_PROXY and NO_PROXY apply as to any httpx client, the deadline too."""
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "hub.internal")
    client = outbound.client(5)
    try:
        proxied = client._transport_for_url(httpx.URL("https://hub.example/v1"))
        direct = client._transport_for_url(httpx.URL("https://hub.internal/v1"))
        assert proxied is not direct and direct is client._transport
        for transport in (proxied, direct):
            assert isinstance(transport._pool._network_backend,  # type: ignore[attr-defined]
                              outbound._Backend)
    finally:
        client.close()


def test_a_name_lookup_that_does_not_answer_ends_at_the_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The name lookup before a connection is bounded by no timeout of httpx's: a resolver
    that does not answer held a call past its deadline. It ends at the deadline."""
    release = threading.Event()
    real = socket.getaddrinfo

    def silent_resolver(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "hub.example.invalid":
            release.wait(30)  # a resolver that does not answer, until the test ends
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", silent_resolver)
    client = outbound.client(30)
    try:
        with pytest.raises(httpx.TimeoutException, match="deadline"), outbound.deadline(0.5):
            client.get("http://hub.example.invalid:9/")
    finally:
        release.set()
        client.close()
