"""OTLP/JSON decoding: the reader next to bare ``json.loads``, and ``otel-diary replay``.

Workload: documents of 100 traces of 50 spans each (5,000 spans, about 2.7 MiB): in each
trace an agent step with LLM chat spans carrying models and token usage, and HTTP client
spans with the usual attributes; two traces in a hundred have a task span. Each document
has fresh ids. In one run, best of ``--repeat`` passes over the same documents:

  1. ``json.loads`` alone: the floor any reader built on it pays;
  2. ``read_json``: the receiver's OTLP/JSON reader (``json.loads`` and then reading the
     parsed objects straight into a batch), as ``serve`` and ``replay`` use it;
  3. ``json_format``: the route OTLP/JSON took before that reader, ``json.loads``, hex ids
     converted, ``json_format.ParseDict`` into a protobuf message, then the protobuf walk.

and ``otel-diary replay`` of the documents written as a JSON-lines file, from start to
summary (diaries written too), in spans/s next to bare ``json.loads`` of the same file.
With ``--baseline DIR`` (a checkout of an earlier commit, its C reader built) the same
replay runs from that tree too.

``json.loads`` holds the interpreter lock for the whole of one document: in ``serve`` a
decoding thread keeps the event loop's own work off it, but not the time it waits for the
lock; the body cap bounds that wait.

    python benchmarks/json_decode.py [--documents 20] [--repeat 3] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otel_diary import ORCHESTRATOR
from otel_diary.receiver.decode import extract, parse_json
from otel_diary.receiver.json_reader import read_json
from tests.support.otlp_build import json_document, new_span_id, span, task_trace

TRACES = 100
SPANS_PER_TRACE = 50
CHATS = 12


def document(n: int) -> bytes:
    """One request: 100 traces of 50 spans; two of them hold a task span."""
    spans = []
    for t in range(TRACES):
        trace = task_trace(f"T-{n}-{t}", chats=CHATS)
        if t % 50:  # no task: the task span becomes a plain agent step
            trace[0].attributes.clear()
        root = trace[0]
        for k in range(SPANS_PER_TRACE - len(trace)):
            trace.append(span(root.trace_id, new_span_id(), root.span_id, name="GET", attributes={
                "http.request.method": "GET", "url.full": f"https://api.example.com/v1/items/{k}",
                "http.response.status_code": 200, "server.address": "api.example.com",
                "network.protocol.version": "1.1"}))
        spans.extend(trace)
    return json.dumps(json_document(spans), separators=(",", ":")).encode()


def best(passes: int, work: Callable[[], None]) -> float:
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def replay(source: Path, path: Path) -> tuple[float, int]:
    """Seconds and spans read by ``otel-diary replay`` of ``path`` run from ``source``."""
    with tempfile.TemporaryDirectory() as kb:
        env = {**os.environ, "PYTHONPATH": str(source)}
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "otel_diary.cli", "replay", str(path), "--dir", kb,
             "--json", "--no-progress"],
            env=env, cwd=kb, capture_output=True, text=True, check=True)
        elapsed = time.perf_counter() - start
    return elapsed, int(json.loads(done.stdout)["spans_read"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    documents = [document(n) for n in range(args.documents)]
    spans = args.documents * TRACES * SPANS_PER_TRACE
    size = sum(map(len, documents))
    print(f"{args.documents} documents, {spans} spans, {size / 2**20:.1f} MiB of OTLP/JSON")

    def loads() -> None:
        for body in documents:
            json.loads(body)

    def reader() -> None:
        for body in documents:
            read_json(body, ORCHESTRATOR)

    def through_json_format() -> None:
        for body in documents:
            extract(parse_json(body), ORCHESTRATOR)

    floor = best(args.repeat, loads)
    ours = best(args.repeat, reader)
    before = best(args.repeat, through_json_format)
    print(f"  json.loads alone          : {spans / floor:10,.0f} spans/s  "
          f"{size / floor / 2**20:6.1f} MiB/s")
    print(f"  read_json                 : {spans / ours:10,.0f} spans/s  "
          f"ratio to json.loads {floor / ours:.2f}")
    print(f"  json_format (the old path): {spans / before:10,.0f} spans/s  "
          f"ratio to json.loads {floor / before:.3f}")
    print(f"  read_json / json_format   : {before / ours:.1f}x")
    print("  json.loads holds the interpreter lock for a whole document: another thread "
          "(serve's event loop) waits meanwhile")

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "traces.jsonl"
        path.write_bytes(b"\n".join(documents) + b"\n")
        here = Path(__file__).resolve().parents[1]
        trees = [("replay (this tree)", here)]
        if args.baseline is not None:
            trees.append(("replay (baseline)", args.baseline.resolve()))
        for name, tree in trees:
            elapsed, read = replay(tree, path)
            print(f"  {name:<26}: {read / elapsed:10,.0f} spans/s  ({read} spans in "
                  f"{elapsed:.2f} s with start-up and diaries; ratio to json.loads "
                  f"{floor / elapsed:.2f})")


if __name__ == "__main__":
    main()
