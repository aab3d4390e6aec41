"""What importing and installing otel-diary costs an app, next to importing the SDK.

Each case runs in a fresh interpreter (several runs, interleaved so that drift hits every
case alike) and is measured, inside it, from before the first import to the end:

  sdk       import opentelemetry.sdk.trace (and make a TracerProvider)
  package   the same, then import otel_diary
  off       ... then otel_diary.install(provider) with KB_DIARIES_ENABLED unset
  on        ... then otel_diary.install(provider) with KB_DIARIES_ENABLED=1
  first     ... then one task span ended and flushed: the first diary builds the rest of
            the pipeline (redaction, rendering, the index, the lessons); no goal, shown so
            that the cost moved off start-up is in view
  --help    otel-diary --help (the whole command, as a user waits for it)

Prints each in CPU milliseconds with its ratio to ``sdk`` (the median and the fastest run)
and, with valgrind installed, in instructions counted by callgrind less those of an
interpreter that does nothing (one run each: the figure a noisy machine cannot move).
Also prints which heavy modules each case loaded (the receiver's grpcio, uvicorn,
httptools and opentelemetry-proto must never be among them). ``--importtime`` adds the
slowest imports of ``on`` (``python -X importtime``).

    python benchmarks/import_cost.py [--runs 7] [--importtime]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HEAVY = ("pydantic", "pydantic_settings", "yaml", "sqlite3", "httpx", "grpc", "uvicorn",
         "httptools", "opentelemetry.proto", "google.protobuf")
"""Modules worth naming when a case loads them."""

CHILD = """
import sys, time
start = time.process_time()
import opentelemetry.sdk.trace
provider = opentelemetry.sdk.trace.TracerProvider(shutdown_on_exit=False)
if {level} >= 1:
    import otel_diary
if {level} >= 2:
    otel_diary.install(provider)
if {level} >= 3:
    task = {{"orchestrator.task.id": "T-1", "orchestrator.task.title": "Fix the build",
             "orchestrator.agent.name": "coder"}}
    with provider.get_tracer("bench").start_as_current_span("task", attributes=task):
        pass
    provider.force_flush()
    import os, pathlib
    assert any(pathlib.Path(os.environ["OTEL_DIARY_DIR"]).rglob("*.md")), "no diary written"
elapsed = time.process_time() - start
heavy = [name for name in {heavy!r} if name in sys.modules]
print(elapsed * 1000, ",".join(heavy) or "-")
if {level} >= 2:
    provider.shutdown()
"""

CASES = {"sdk": (0, False), "package": (1, False), "off": (2, False), "on": (2, True),
         "first": (3, True)}


def environment(enabled: bool, root: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_DIARY_", "KB_DIARIES_", "MOTHER_AI_"))}
    env["OTEL_DIARY_DIR"] = tempfile.mkdtemp(dir=root)  # each run its own, empty
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


def instructions(code: str, root: str, enabled: bool) -> int:
    """Instructions callgrind counts for ``python -c code`` (the whole process)."""
    env = {**environment(enabled, root), "PYTHONHASHSEED": "0"}
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           sys.executable, "-c", code],
                          capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit("could not read callgrind's count:\n" + done.stderr[-2000:])
    return int(found.group(1))


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
    # Bytecode written first: an interpreter told not to write it (PYTHONDONTWRITEBYTECODE)
    # would otherwise compile every changed module from source in every run.
    package = importlib.util.find_spec("otel_diary")
    assert package is not None and package.submodule_search_locations is not None
    for location in package.submodule_search_locations:
        compileall.compile_dir(location, quiet=1)
    times: dict[str, list[float]] = {name: [] for name in [*CASES, "--help"]}
    loaded: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(args.runs):
            for name in CASES:
                ms, loaded[name] = run_case(name, root)
                times[name].append(ms)
            times["--help"].append(run_help(root))
        median = {name: statistics.median(values) for name, values in times.items()}
        fastest = {name: min(values) for name, values in times.items()}
        print(f"import and install cost (CPU ms; the start-up of Python itself is not "
              f"counted), {args.runs} fresh interpreters each:")
        print(f"  {'':8s} {'median':>7s} {'ratio':>6s}  {'fastest':>7s} {'ratio':>6s}")
        for name, value in median.items():
            heavy = f"  loads: {loaded[name]}" if name in loaded else ""
            print(f"  {name:8s} {value:7.1f} {value / median['sdk']:6.2f}  "
                  f"{fastest[name]:7.1f} {fastest[name] / fastest['sdk']:6.2f}{heavy}")
        if shutil.which("valgrind"):
            bare = instructions("import sys, time", root, False)
            counted = {name: instructions(CHILD.format(level=level, heavy=HEAVY), root,
                                          enabled) - bare
                       for name, (level, enabled) in CASES.items()}
            print("  instructions (callgrind, less an interpreter that does nothing):")
            for name, count in counted.items():
                print(f"  {name:8s} {count / 1e6:7.1f} M  ratio to sdk "
                      f"{count / counted['sdk']:.2f}")
        else:
            print("  instructions: skipped (needs valgrind)")
        receiver = {"grpc", "uvicorn", "httptools", "opentelemetry.proto"}
        leaked = sorted(receiver.intersection(",".join(loaded.values()).split(",")))
        print(f"  receiver modules loaded by the processor: {', '.join(leaked) or 'none'}")
        if args.importtime:
            print("slowest imports of 'on' (cumulative):")
            for line in slowest_imports(root):
                print("  " + line)


if __name__ == "__main__":
    main()
