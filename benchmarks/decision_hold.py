"""How long deciding task spans keeps ``serve``'s receivers waiting for the lock they
assemble under, when one trace is huge.

Workload, in one process on the collector ``serve`` uses (real store, real decoder, the
pipeline writing to memory): one request of a trace holding a chain of ``--chain`` plain
spans and a task span under the chain's last span; then, every ``--every`` seconds for
``--seconds``, a request of one more such task span. Each task's grace period (0.5 s)
ends on its own, and each decision reads the whole trace. Meanwhile a probe offers a
one-span request of another trace every 2 ms and times how long each offer takes (the
wait for the lock, mostly). Two configurations, in the same run:

  - ``unbounded``: every due task decided at once, whatever it reads, and the timer
    takes the lock again at once (the baseline);
  - ``bounded``: at most ``DECIDE_BUDGET`` spans and links read per hold of the lock,
    and after a hold longer than ``LONG_HOLD_S`` twice as long without it.

Prints, for each: the offers' median, 99th percentile and longest time, how many offers
the probe made, and the diaries written (all of them: the collector is closed first).

    python benchmarks/decision_hold.py [--chain 131072] [--every 0.02] [--seconds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otel_diary import ORCHESTRATOR, Settings
from otel_diary.assembly.grace import TraceStore
from otel_diary.receiver import admission
from otel_diary.receiver.admission import Collector
from otel_diary.receiver.decode import PROTOBUF, decode
from otel_diary.testing import InMemorySink
from otel_diary.wiring import build_pipeline
from tests.support.otlp_build import new_span_id, new_trace_id, protobuf_body, span, task_trace

GRACE_S = 0.5


def run(chain: int, every: float, seconds: float, bounded: bool) -> tuple[list[float], int]:
    """The probe's offer times (seconds) and the diaries written."""
    budget, hold = admission.DECIDE_BUDGET, admission.LONG_HOLD_S
    if not bounded:
        admission.DECIDE_BUDGET, admission.LONG_HOLD_S = None, float("inf")  # type: ignore[assignment]
    sink = InMemorySink()
    collector = Collector(TraceStore(ORCHESTRATOR, grace=GRACE_S, trace_timeout=600),
                          build_pipeline(Settings(index=False), ORCHESTRATOR, sinks=[sink]),
                          max_pending=1_000_000)
    try:
        trace_id = new_trace_id()
        ids = [new_span_id() for _ in range(chain)]
        spans = [span(trace_id, ids[0]), *(span(trace_id, ids[n], ids[n - 1])
                                           for n in range(1, chain))]

        def task(n: int) -> bytes:
            return protobuf_body(task_trace(f"T-{n}", chats=0, trace_id=trace_id,
                                            parent=ids[-1])[:1])

        bodies = [task(n) for n in range(int(seconds / every) + 1)]
        collector.offer(decode(protobuf_body(spans + task_trace(
            "T-first", chats=0, trace_id=trace_id, parent=ids[-1])[:1]), PROTOBUF,
            ORCHESTRATOR))
        times: list[float] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                body = protobuf_body([span(new_trace_id(), new_span_id())])
                started = time.perf_counter()
                collector.offer(decode(body, PROTOBUF, ORCHESTRATOR))
                times.append(time.perf_counter() - started)
                time.sleep(0.002)

        prober = threading.Thread(target=probe)
        prober.start()
        started = time.perf_counter()
        for n, body in enumerate(bodies):
            time.sleep(max(started + n * every - time.perf_counter(), 0))
            collector.offer(decode(body, PROTOBUF, ORCHESTRATOR))
        stop.set()
        prober.join()
        collector.close(600)  # decides and writes what is left
        return times, len(sink.diaries)
    finally:
        collector.close(600)
        admission.DECIDE_BUDGET, admission.LONG_HOLD_S = budget, hold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chain", type=int, default=131_072)
    parser.add_argument("--every", type=float, default=0.02)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    print(f"one trace: a chain of {args.chain:,} plain spans, a task span under it every "
          f"{args.every * 1000:.0f} ms for {args.seconds:.0f} s (grace {GRACE_S} s); a "
          "probe offers a one-span request every 2 ms")
    longest: dict[bool, float] = {}
    for bounded in (False, True):
        times, diaries = run(args.chain, args.every, args.seconds, bounded)
        ordered = sorted(times)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        longest[bounded] = ordered[-1]
        print(f"{'bounded' if bounded else 'unbounded':9s}: offers {len(times):,}, "
              f"median {statistics.median(times) * 1000:.2f} ms, p99 {p99 * 1000:.1f} ms, "
              f"longest {ordered[-1] * 1000:.1f} ms; diaries written {diaries:,}")
    print(f"longest offer, bounded / unbounded: {longest[True] / longest[False]:.3f}")


if __name__ == "__main__":
    main()
