"""``otel-diary serve`` under a slowloris: many connections that never finish a request head.

Starts ``serve`` with its default settings in a subprocess, opens ``--connections``
connections that each send the start of a request head and then a header byte every
second, and meanwhile sends health checks and exports from fresh connections. Prints how
many slow connections the server closed (after one second, and at the end), how many
the client could not even open, and the statuses and slowest answer of the quick client.
With ``--baseline DIR`` (a checkout of an earlier commit) the same runs from that tree;
with ``--serve-nofile N`` the server runs with that open-file limit.

    python benchmarks/slowloris.py [--connections 1500] [--seconds 15] [--baseline DIR]
        [--serve-nofile 1024]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.loopback import free_port
from tests.support.otlp_build import protobuf_body, task_trace

HEAD = b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-protobuf\r\n"


def _hung_up(sock: socket.socket) -> bool:
    try:
        return sock.recv(65536) == b""
    except OSError:
        return True


def attack(tree: Path, connections: int, seconds: float, nofile: int) -> str:
    http_port = free_port()
    with tempfile.TemporaryDirectory() as kb:
        process = subprocess.Popen(
            [sys.executable, "-m", "otel_diary.cli", "serve", "--dir", kb,
             "--http-port", str(http_port), "--grpc-port", "0"],
            env={**os.environ, "PYTHONPATH": str(tree)}, cwd=kb,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile)))
            if nofile else None)
        url = f"http://127.0.0.1:{http_port}"
        selector = selectors.DefaultSelector()
        open_socks: set[socket.socket] = set()
        try:
            for _ in range(400):
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
            refused = 0
            for _ in range(connections):
                try:
                    sock = socket.create_connection(("127.0.0.1", http_port), timeout=5)
                    sock.sendall(HEAD)
                except OSError:
                    refused += 1
                    continue
                sock.setblocking(False)
                selector.register(sock, selectors.EVENT_READ)
                open_socks.add(sock)
            statuses: Counter[str] = Counter()
            slowest = 0.0
            closed_after_1s = None
            closed = 0
            start = time.monotonic()
            next_trickle = start + 1
            body = protobuf_body(task_trace("T-quick"))
            while time.monotonic() - start < seconds:
                for key, _ in selector.select(timeout=0.05):
                    slow = key.fileobj
                    assert isinstance(slow, socket.socket)
                    if _hung_up(slow):
                        selector.unregister(slow)
                        open_socks.discard(slow)
                        slow.close()
                        closed += 1
                if time.monotonic() >= next_trickle:
                    next_trickle += 1
                    if closed_after_1s is None:
                        closed_after_1s = closed
                    for sock in list(open_socks):
                        with contextlib.suppress(OSError):
                            sock.send(b"x")
                asked = time.monotonic()
                try:
                    health = httpx.get(url + "/health", timeout=5).status_code
                    export = httpx.post(url + "/v1/traces", content=body, timeout=5, headers={
                        "content-type": "application/x-protobuf"}).status_code
                    statuses[f"health {health}"] += 1
                    statuses[f"export {export}"] += 1
                except httpx.HTTPError as exc:
                    statuses[f"{type(exc).__name__} at {time.monotonic() - start:.1f} s"] += 1
                slowest = max(slowest, time.monotonic() - asked)
        finally:
            for sock in open_socks:
                sock.close()
            selector.close()
            process.kill()
            process.wait()
    answered = ", ".join(f"{what} x{n}" for what, n in sorted(statuses.items()))
    return (f"{closed_after_1s} closed by the server after 1 s, {closed} after {seconds:.0f} s, "
            f"{refused} not opened; quick client: {answered}; slowest {slowest:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1500)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--serve-nofile", type=int, default=0,
                        help="run serve with this open-file limit (e.g. 1024, a common one)")
    args = parser.parse_args()
    limit = f", open-file limit {args.serve_nofile}" if args.serve_nofile else ""
    print(f"{args.connections} slowloris connections (a header byte a second), default "
          f"settings{limit}")
    trees = [("this tree", Path(__file__).resolve().parents[1])]
    if args.baseline is not None:
        trees.append(("baseline", args.baseline.resolve()))
    for name, tree in trees:
        result = attack(tree, args.connections, args.seconds, args.serve_nofile)
        print(f"  {name:<9}: {result}", flush=True)


if __name__ == "__main__":
    main()
