"""What deciding the task spans of one request costs ``serve`` when the request is shaped
to make assembly slow, against a request of as many spans in ordinary traces.

Each request holds ``--tasks`` agent runs (the ``genai`` profile: ``invoke_agent`` spans)
with two failed tool calls each, decoded by the receiver's reader and decided by the
store ``serve`` uses (no pipeline: only assembly is measured). Shapes, in the same run:

  - ``ordinary``: one trace per run, the runs under no common parent (the baseline);
  - ``one trace``: every run a root task of one trace, under one parent span: each run
    takes the failed calls that ended since the run before it;
  - ``deep chain``: the same, under a chain of ``--chain`` plain spans, with the failed
    calls beside the runs (not under them), so that reading whether a run got past a
    failure walks up the chain.

Prints CPU seconds (median of ``--repeats``) and the ratio to ``ordinary``. Without a bound,
the last two grow as tasks times contributions and tasks times depth.

    python benchmarks/hostile_traces.py [--tasks 5000] [--chain 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_diary import GENAI
from otel_diary.assembly.grace import TraceStore
from otel_diary.receiver.decode import PROTOBUF, decode
from tests.support.otlp_build import new_span_id, new_trace_id, protobuf_body, span

T0 = 10**18
RUN = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "agent"}


def runs(tasks: int, shared: bool, chain: int) -> list[Span]:
    """``tasks`` runs with two failed calls each: in traces of their own, or in one trace
    under one parent (at the end of a chain of ``chain`` plain spans)."""
    spans: list[Span] = []
    trace_id, parent = new_trace_id(), b""
    for _ in range(chain if shared else 0):
        spans.append(span(trace_id, new_span_id(), parent, name="hop"))
        parent = spans[-1].span_id
    for n in range(tasks):
        if not shared:
            trace_id, parent = new_trace_id(), b""
        at = T0 + n * 10**9
        spans += [span(trace_id, new_span_id(), parent, name="tool", error=True, start=at,
                       duration_ms=1),
                  span(trace_id, new_span_id(), parent, name="tool", error=True, start=at,
                       duration_ms=2),
                  span(trace_id, new_span_id(), parent, name="run", attributes=RUN, start=at,
                       duration_ms=5)]
    return spans


def decide(body: bytes) -> tuple[float, int]:
    """CPU seconds to decode ``body`` and decide every task span in it; tasks decided."""
    start = time.process_time()
    store = TraceStore(GENAI, grace=0)
    store.add(decode(body, PROTOBUF, GENAI), 0.0)
    ready = store.drain()
    return time.process_time() - start, len(ready)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--chain", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    shapes = {"ordinary": runs(args.tasks, False, 0),
              "one trace": runs(args.tasks, True, 1),
              "deep chain": runs(args.tasks, True, args.chain)}
    bodies = {name: protobuf_body(spans) for name, spans in shapes.items()}
    times: dict[str, list[float]] = {name: [] for name in bodies}
    for _ in range(args.repeats):
        for name, body in bodies.items():  # interleaved: drift hits every shape alike
            seconds, decided = decide(body)
            assert decided == args.tasks, (name, decided)
            times[name].append(seconds)
    base = statistics.median(times["ordinary"])
    print(f"{args.tasks} agent runs, 2 failed calls each; chain {args.chain}; "
          f"median of {args.repeats}")
    for name, body in bodies.items():
        median = statistics.median(times[name])
        print(f"  {name:10s} {len(body) / 2**20:6.2f} MiB  {median:8.3f} s CPU  "
              f"ratio to ordinary {median / base:7.2f}")


if __name__ == "__main__":
    main()
