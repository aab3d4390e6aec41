"""What the write-ahead journal costs the receive path: spans/s with and without it.

Workload: the requests of ``receiver_throughput.py`` (ten ~52-span task traces each, from
the real SDK and OTLP encoder, fresh trace ids per request), posted over OTLP/HTTP
protobuf by keep-alive client threads. Each pair of rounds starts ``otel-diary serve``
twice, journal off and journal on (``OTEL_DIARY_JOURNAL``, a file on the disk, each
commit synced), in alternating order, and times the same requests through each after a
warm-up; the grace period is long enough that no diary is rendered meanwhile. With the
journal a request is answered only once its spans are committed. Reported per pair: both
rates, the ratio on/off, the receiver's CPU per span, and requests per commit; then the
median ratio over the pairs. All of it with 4 clients, then with 12: a request waits for
the commit that covers it, so few clients measure that wait and more measure the cost.

    python benchmarks/journal.py [--pairs 3] [--requests 400] [--clients 4,12]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any


def throughput_module() -> Any:
    """``receiver_throughput.py``, whose workload and clients this benchmark shares."""
    import receiver_throughput  # benchmarks/receiver_throughput.py, beside this file

    return receiver_throughput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", default="4,12", help="client counts, comma-separated")
    args = parser.parse_args()
    bench = throughput_module()
    template, trace_ids = bench.make_template()
    warm_up = [bench.fresh(template, trace_ids) for _ in range(20)]
    bodies = [bench.fresh(template, trace_ids) for _ in range(args.requests)]
    root = Path(tempfile.mkdtemp(prefix="otel-diary-journal-bench-"))  # on disk, not tmpfs
    try:
        for clients in (int(n) for n in args.clients.split(",")):
            measure(bench, root, warm_up, bodies, clients, args.pairs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(bench: Any, root: Path, warm_up: list[bytes], bodies: list[bytes], clients: int,
            pairs: int) -> None:
    """``pairs`` pairs of rounds with ``clients`` clients; prints each and the median."""
    ratios: list[float] = []
    per_request = 0.0
    for pair in range(1, pairs + 1):
        order = ("off", "on") if pair % 2 else ("on", "off")
        rates: dict[str, tuple[float, float, float]] = {}
        for mode in order:
            kb = root / f"kb-{clients}-{pair}-{mode}"
            receiver = bench.Receiver(
                kb, OTEL_DIARY_SERVE_GRACE_S="600", OTEL_DIARY_SHUTDOWN_TIMEOUT_MS="1",
                OTEL_DIARY_SERVE_MAX_SPANS="10000000",
                OTEL_DIARY_JOURNAL="off" if mode == "off" else str(kb / "journal.sqlite3"))
            statuses: Counter[int] = Counter()
            try:
                bench.post_all(receiver.url, warm_up, clients, Counter())
                before = receiver.metrics()
                cpu_before = receiver.cpu_seconds()
                start = time.perf_counter()
                bench.post_all(receiver.url, bodies, clients, statuses)
                elapsed = time.perf_counter() - start
                cpu = receiver.cpu_seconds() - cpu_before
                after = receiver.metrics()
            finally:
                receiver.stop(graceful=False)
            spans = (after["otel_diary_spans_accepted_total"]
                     - before["otel_diary_spans_accepted_total"])
            per_request = spans / len(bodies)
            if set(statuses) != {200}:
                raise SystemExit(f"pair {pair}, journal {mode}: statuses {dict(statuses)}")
            commits = (after.get("otel_diary_journal_commits_total", 0)
                       - before.get("otel_diary_journal_commits_total", 0))
            rates[mode] = (spans / elapsed, cpu / spans * 1e6,
                           len(bodies) / commits if commits else 0.0)
        ratio = rates["on"][0] / rates["off"][0]
        ratios.append(ratio)
        print(f"pair {pair}: journal off {rates['off'][0]:,.0f} spans/s "
              f"({rates['off'][1]:.2f} us CPU/span); journal on {rates['on'][0]:,.0f} "
              f"spans/s ({rates['on'][1]:.2f} us CPU/span, {rates['on'][2]:.1f} requests "
              f"per commit); ratio on/off {ratio:.3f}")
    print(f"journal cost on the receive path: spans/s with the journal / without = "
          f"{statistics.median(ratios):.3f} (median of {len(ratios)} pairs, range "
          f"{min(ratios):.3f} to {max(ratios):.3f}; {len(bodies)} requests of "
          f"{per_request:.0f} spans, {clients} clients, OTLP/HTTP protobuf)")


if __name__ == "__main__":
    main()
