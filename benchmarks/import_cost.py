"""What importing and installing otel-diary costs an app, next to importing the SDK.

Each case runs in a fresh interpreter (median of several runs, interleaved so that drift
hits every case alike) and times, inside it, from before the first import to the end:

  sdk       import opentelemetry.sdk.trace (and make a TracerProvider)
  package   the same, then import otel_diary
  off       ... then otel_diary.install(provider) with KB_DIARIES_ENABLED unset
  on        ... then otel_diary.install(provider) with KB_DIARIES_ENABLED=1
  --help    otel-diary --help (the whole command, as a user waits for it)

Prints each as milliseconds and as a ratio to ``sdk``, and which heavy modules each case
loaded (the receiver's grpcio, uvicorn, httptools and opentelemetry-proto must never be
among them). ``--importtime`` adds the slowest imports of ``on`` (``python -X importtime``).

    python benchmarks/import_cost.py [--runs 7] [--importtime]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HEAVY = ("pydantic", "pydantic_settings", "yaml", "sqlite3", "httpx", "grpc", "uvicorn",
         "httptools", "opentelemetry.proto", "google.protobuf")
"""Modules worth naming when a case loads them."""

CHILD = """
import sys, time
start = time.perf_counter()
import opentelemetry.sdk.trace
provider = opentelemetry.sdk.trace.TracerProvider(shutdown_on_exit=False)
if {level} >= 1:
    import otel_diary
if {level} >= 2:
    otel_diary.install(provider)
elapsed = time.perf_counter() - start
heavy = [name for name in {heavy!r} if name in sys.modules]
print(elapsed * 1000, ",".join(heavy) or "-")
if {level} >= 2:
    provider.shutdown()
"""

CASES = {"sdk": (0, False), "package": (1, False), "off": (2, False), "on": (2, True)}


def environment(enabled: bool, root: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_DIARY_", "KB_DIARIES_", "MOTHER_AI_"))}
    env["OTEL_DIARY_DIR"] = root
    if enabled:
        env["KB_DIARIES_ENABLED"] = "1"
    return env


def run_case(name: str, root: str) -> tuple[float, str]:
    level, enabled = CASES[name]
    code = CHILD.format(level=level, heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment(enabled, root), check=True)
    ms, heavy = done.stdout.split()
    return float(ms), heavy


def run_help(root: str) -> float:
    """Wall milliseconds of ``otel-diary --help`` less those of an interpreter that does
    nothing (the start-up both pay)."""
    import time

    def wall(command: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True,
                       env=environment(False, root))
        return (time.perf_counter() - start) * 1000

    return (wall([sys.executable, "-m", "otel_diary.cli", "--help"])
            - wall([sys.executable, "-c", "pass"]))


def slowest_imports(root: str, count: int = 12) -> list[str]:
    code = CHILD.format(level=2, heavy=HEAVY)
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, env=environment(True, root),
                          check=True)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, module = line[len("import time:"):].split("|")
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), module.rstrip()))
    rows.sort(reverse=True)
    return [f"{us / 1000:8.1f} ms {module}" for us, module in rows[:count]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in [*CASES, "--help"]}
    loaded: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(args.runs):
            for name in CASES:
                ms, loaded[name] = run_case(name, root)
                times[name].append(ms)
            times["--help"].append(run_help(root))
        median = {name: statistics.median(values) for name, values in times.items()}
        print(f"import and install cost, median of {args.runs} fresh interpreters:")
        for name, value in median.items():
            heavy = f"  loads: {loaded[name]}" if name in loaded else ""
            print(f"  {name:8s} {value:7.1f} ms  ratio to sdk {value / median['sdk']:.2f}"
                  f"{heavy}")
        receiver = {"grpc", "uvicorn", "httptools", "opentelemetry.proto"}
        leaked = sorted(receiver.intersection(",".join(loaded.values()).split(",")))
        print(f"  receiver modules loaded by the processor: {', '.join(leaked) or 'none'}")
        if args.importtime:
            print("slowest imports of 'on' (cumulative):")
            for line in slowest_imports(root):
                print("  " + line)


if __name__ == "__main__":
    main()
