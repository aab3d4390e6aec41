"""Retrieval quality on a labeled corpus: does every error family find its siblings?

Writes recovered runs of 22 error families (Go, npm, javac, C, Docker, YAML, TypeScript,
rustc, Python, pytest, …; each family several message variants with different paths,
identifiers, line numbers and versions, and progress lines around the error) through the
real pipeline into a temporary knowledge base, in one shuffled order, then prints

  * Related precision@5: of the diaries a diary lists as related, the share of its family,
  * Related coverage: of the diaries with an earlier sibling, the share listing any diary,
  * lesson first: of those, the share whose "Related" starts with their family's lesson,
  * search precision@10 per family (lessons above diaries, as ``otel-diary search``),
  * lesson found by a question: the share of families whose lesson is listed for the
    family's words in a question no lesson has every word of,
  * lessons per family and lesson purity (share of a lesson's evidence from one family).

    python benchmarks/retrieval.py [--runs 12] [--seed 7] [--no-noise] [--held-out] [--verbose]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from otel_diary import ORCHESTRATOR, ChildSummary, Settings, SpanRecord
from otel_diary.pipeline.render import parse_front_matter
from otel_diary.wiring import build_pipeline

BASE_NS = 1_785_000_000_000_000_000
Variant = Callable[[random.Random], str]

_NAMES = ["parseConfig", "loadUser", "orderTotal", "retryPolicy", "cacheKey", "buildIndex",
          "userId", "sessionStore", "fetchRows", "handler", "cfg", "ctx", "renderPage",
          "maxItems", "tokenTTL", "itemCount", "payload", "widgetId"]
_DIRS = ["src/orders", "internal/billing", "pkg/api", "cmd/server", "lib/auth", "app/core",
         "services/cart", "src/main/java/com/acme/shop", "modules/report"]
_PKGS = ["react", "react-dom", "eslint", "webpack", "typescript", "@types/node", "vite",
         "jest", "@babel/core", "next", "storybook", "graphql"]


def _n(r: random.Random, low: int = 2, high: int = 480) -> int:
    return r.randint(low, high)


def _name(r: random.Random) -> str:
    return r.choice(_NAMES)


def _dir(r: random.Random) -> str:
    return r.choice(_DIRS)


def _ver(r: random.Random) -> str:
    return f"{r.randint(1, 19)}.{r.randint(0, 12)}.{r.randint(0, 30)}"


def _hex(r: random.Random, size: int = 12) -> str:
    return "".join(r.choice("0123456789abcdef") for _ in range(size))


def go_undefined(r: random.Random) -> str:
    return (f"# example.com/shop/{_dir(r)}\n"
            f"./{_dir(r)}/{_name(r).lower()}.go:{_n(r)}:{_n(r, 1, 40)}: undefined: {_name(r)}\n"
            f"./{_dir(r)}/main.go:{_n(r)}:{_n(r, 1, 40)}: undefined: {_name(r)}")


def go_unused(r: random.Random) -> str:
    return (f"# example.com/shop/{_dir(r)}\n"
            f"./{_dir(r)}/util.go:{_n(r)}:{_n(r, 1, 30)}: declared and not used: {_name(r)}")


def npm_eresolve(r: random.Random) -> str:
    pkg, peer = r.sample(_PKGS, 2)
    return (f"npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
            f"npm ERR! \nnpm ERR! While resolving: shop-web@{_ver(r)}\n"
            f"npm ERR! Found: {pkg}@{_ver(r)}\n"
            f"npm ERR! Could not resolve dependency:\n"
            f"npm ERR! peer {peer}@\"^{_ver(r)}\" from {pkg}@{_ver(r)}\n"
            f"npm ERR! A complete log of this run can be found in:\n"
            f"npm ERR!     /home/runner/.npm/_logs/2026-07-{_n(r, 10, 28)}T10_{_n(r, 10, 59)}"
            f"_{_n(r, 10, 59)}_{_n(r, 100, 999)}Z-debug-0.log")


def javac_symbol(r: random.Random) -> str:
    cls = r.choice(["OrderService", "CartController", "UserRepo", "Invoice", "PriceCalc"])
    return (f"{_dir(r)}/{cls}.java:{_n(r)}: error: cannot find symbol\n"
            f"        return {_name(r)}.get();\n               ^\n"
            f"  symbol:   variable {_name(r)}\n  location: class {cls}\n1 error")


def c_undeclared(r: random.Random) -> str:
    var = _name(r)
    return (f"{_dir(r)}/{var.lower()}.c: In function 'main':\n"
            f"{_dir(r)}/{var.lower()}.c:{_n(r)}:{_n(r, 1, 40)}: error: '{var}' undeclared "
            "(first use in this function)\n"
            f"{_dir(r)}/{var.lower()}.c:{_n(r)}:{_n(r, 1, 40)}: note: each undeclared "
            "identifier is reported only once for each function it appears in")


def docker_cache_key(r: random.Random) -> str:
    step = r.randint(3, 9)
    file = r.choice(["package.json", "go.sum", "requirements.txt", "Cargo.lock", "pom.xml"])
    return (f"#{step} [build {step - 1}/{step + 2}] COPY {file} ./\n"
            f"#{step} ERROR: failed to calculate checksum of ref {_hex(r, 25)}::{_hex(r, 25)}: "
            f"\"/{file}\": not found\n"
            f"------\n > [build {step - 1}/{step + 2}] COPY {file} ./:\n------\n"
            f"ERROR: failed to solve: failed to compute cache key: failed to calculate "
            f"checksum of ref {_hex(r, 25)}::{_hex(r, 25)}: \"/{file}\": not found")


def oom_137(r: random.Random) -> str:
    cmd = r.choice(["npm run build", "go test ./...", "cargo build --release", "mvn package"])
    return (f"Step {r.randint(4, 12)}/{r.randint(13, 20)} : RUN {cmd}\n"
            f" ---> Running in {_hex(r)}\n"
            f"The command '/bin/sh -c {cmd}' returned a non-zero code: 137\n"
            f"error: exit code 137 (out of memory: killed after {_n(r, 30, 900)}s)")


def yaml_scanner(r: random.Random) -> str:
    file = r.choice([".github/workflows/ci.yml", "deploy/values.yaml", "config/app.yaml"])
    line = _n(r, 2, 90)
    return ("Traceback (most recent call last):\n"
            f"  File \"/usr/lib/python3.{r.randint(9, 12)}/site-packages/yaml/scanner.py\", "
            f"line {_n(r, 100, 900)}, in fetch_value\n"
            "yaml.scanner.ScannerError: mapping values are not allowed here\n"
            f"  in \"{file}\", line {line}, column {_n(r, 3, 40)}")


def ts2345(r: random.Random) -> str:
    return (f"{_dir(r)}/{_name(r)}.ts({_n(r)},{_n(r, 1, 60)}): error TS2345: Argument of type "
            f"'{r.choice(['string | undefined', 'number', 'Order[]', 'null'])}' is not "
            f"assignable to parameter of type '{r.choice(['string', 'Order', 'Item[]'])}'.")


def ts2322(r: random.Random) -> str:
    return (f"{_dir(r)}/{_name(r)}.tsx({_n(r)},{_n(r, 1, 60)}): error TS2322: Type "
            f"'{r.choice(['string', 'number | null', 'boolean'])}' is not assignable to type "
            f"'{r.choice(['number', 'string', 'ReactNode'])}'.")


def rust_e0308(r: random.Random) -> str:
    return (f"error[E0308]: mismatched types\n  --> src/{_name(r).lower()}.rs:{_n(r)}:"
            f"{_n(r, 1, 50)}\n   |\n{_n(r)} |     let total: u32 = {_name(r)}.len();\n"
            f"   |                ---   ^^^^^^^^^^^ expected `u32`, found `usize`\n"
            "error: could not compile `shop` due to previous error")


def py_keyerror(r: random.Random) -> str:
    key = r.choice(["user_id", "order", "SECRET_NAME", "items", "region"])
    return ("Traceback (most recent call last):\n"
            f"  File \"/srv/app/{_dir(r)}/views.py\", line {_n(r)}, in handle\n"
            f"    value = payload['{key}']\nKeyError: '{key}'")


def pytest_assert(r: random.Random) -> str:
    test = r.choice(["test_totals", "test_discount", "test_parse_date", "test_login"])
    module = r.choice(["orders", "cart", "auth", "dates"])
    return (f"tests/test_{module}.py:{_n(r)}: in {test}\n"
            f"    assert result == {_n(r)}\nE   assert {_n(r)} == {_n(r)}\n"
            "===================== short test summary info =====================\n"
            f"FAILED tests/test_{module}.py::{test} - assert {_n(r)} == {_n(r)}\n"
            f"==================== 1 failed, {_n(r, 10, 200)} passed in "
            f"{_n(r, 1, 9)}.{_n(r, 10, 99)}s ====")


def py_modulenotfound(r: random.Random) -> str:
    mod = r.choice(["requests", "numpy", "yaml", "pydantic_settings", "boto3"])
    return ("Traceback (most recent call last):\n"
            f"  File \"/srv/app/{_dir(r)}/main.py\", line {_n(r, 1, 30)}, in <module>\n"
            f"    import {mod}\nModuleNotFoundError: No module named '{mod}'")


def node_cannot_find_module(r: random.Random) -> str:
    mod = r.choice(["express", "./config", "lodash/merge", "../lib/db"])
    return (f"node:internal/modules/cjs/loader:{_n(r, 900, 1200)}\n  throw err;\n  ^\n\n"
            f"Error: Cannot find module '{mod}'\nRequire stack:\n- /app/{_dir(r)}/index.js\n"
            f"    at Module._resolveFilename (node:internal/modules/cjs/loader:{_n(r)}:15)\n"
            "  code: 'MODULE_NOT_FOUND',")


def eslint_unused(r: random.Random) -> str:
    return (f"/home/runner/work/shop/{_dir(r)}/{_name(r)}.js\n"
            f"  {_n(r)}:{_n(r, 1, 40)}  error  '{_name(r)}' is defined but never used  "
            "no-unused-vars\n\n"
            f"✖ {r.randint(1, 9)} problems ({r.randint(1, 9)} errors, 0 warnings)")


def git_conflict(r: random.Random) -> str:
    file = f"{_dir(r)}/{_name(r)}.py"
    return (f"Auto-merging {file}\nCONFLICT (content): Merge conflict in {file}\n"
            "Automatic merge failed; fix conflicts and then commit the result.")


def port_in_use(r: random.Random) -> str:
    port = r.choice([3000, 5432, 8000, 8080, 9090])
    return (f"Error: listen EADDRINUSE: address already in use :::{port}\n"
            f"    at Server.setupListenHandle [as _listen2] (node:net:{_n(r, 1000, 2000)}:16)\n"
            f"  code: 'EADDRINUSE',\n  errno: -98,\n  syscall: 'listen',\n  port: {port}")


def cmake_package(r: random.Random) -> str:
    pkg = r.choice(["OpenSSL", "Boost", "ZLIB", "Protobuf", "CURL"])
    return (f"CMake Error at CMakeLists.txt:{_n(r, 5, 80)} (find_package):\n"
            f"  Could not find a package configuration file provided by \"{pkg}\" with any "
            "of the following names:\n\n"
            f"    {pkg}Config.cmake\n    {pkg.lower()}-config.cmake\n\n"
            "-- Configuring incomplete, errors occurred!")


def pip_resolution(r: random.Random) -> str:
    pkg = r.choice(["torch", "numpy", "fastapi", "django", "pandas"])
    return (f"ERROR: Could not find a version that satisfies the requirement {pkg}=={_ver(r)} "
            f"(from versions: {_ver(r)}, {_ver(r)}, {_ver(r)})\n"
            f"ERROR: No matching distribution found for {pkg}=={_ver(r)}")


def go_nil_pointer(r: random.Random) -> str:
    return ("panic: runtime error: invalid memory address or nil pointer dereference\n"
            f"[signal SIGSEGV: segmentation violation code=0x1 addr=0x{_hex(r, 2)} "
            f"pc=0x{_hex(r, 6)}]\n\ngoroutine {_n(r, 1, 80)} [running]:\n"
            f"example.com/shop/{_dir(r)}.({_name(r)}).Run(0x0)\n"
            f"\t/src/{_dir(r)}/run.go:{_n(r)} +0x{_hex(r, 2)}")


def gcc_undefined_reference(r: random.Random) -> str:
    return (f"/usr/bin/ld: build/{_name(r).lower()}.o: in function `main':\n"
            f"{_name(r).lower()}.c:(.text+0x{_hex(r, 2)}): undefined reference to "
            f"`{_name(r)}'\ncollect2: error: ld returned 1 exit status")


NOISE = [
    "+ make build", "go: downloading github.com/stretchr/testify v{v}",
    "npm WARN deprecated glob@{v}: Glob versions prior to v9 are no longer supported",
    "   Compiling shop v{v} (/src/shop)", "[INFO] Building shop {v}-SNAPSHOT",
    "> shop-web@{v} build", "> tsc --noEmit -p tsconfig.json", "#{n} [internal] load .dockerignore",
    "Collecting pyyaml=={v}", "make[1]: Entering directory '/src/shop/build'",
    "warning: variable `total` is assigned to, but never read",
]
"""Lines real output has around its error: progress, downloads, warnings."""


def with_noise(r: random.Random, text: str) -> str:
    """``text`` with up to three progress lines before it and, sometimes, make's epilogue."""
    before = [line.format(v=_ver(r), n=_n(r, 1, 9)) for line in r.sample(NOISE, r.randint(0, 3))]
    after = [f"make: *** [Makefile:{_n(r, 5, 90)}: build] Error 2"] if r.random() < 0.3 else []
    return "\n".join([*before, text, *after])


FAMILIES: dict[str, tuple[Variant, str]] = {
    "go-undefined": (go_undefined, "undefined"),
    "go-unused": (go_unused, "declared and not used"),
    "npm-eresolve": (npm_eresolve, "ERESOLVE"),
    "javac-symbol": (javac_symbol, "cannot find symbol"),
    "c-undeclared": (c_undeclared, "undeclared first use"),
    "docker-cache-key": (docker_cache_key, "failed to compute cache key"),
    "oom-137": (oom_137, "exit code 137"),
    "yaml-scanner": (yaml_scanner, "ScannerError"),
    "ts2345": (ts2345, "TS2345"),
    "ts2322": (ts2322, "TS2322"),
    "rust-e0308": (rust_e0308, "E0308"),
    "py-keyerror": (py_keyerror, "KeyError"),
    "pytest-assert": (pytest_assert, "assert FAILED"),
    "py-modulenotfound": (py_modulenotfound, "ModuleNotFoundError"),
    "node-module": (node_cannot_find_module, "Cannot find module"),
    "eslint-unused": (eslint_unused, "defined but never used"),
    "git-conflict": (git_conflict, "merge conflict"),
    "port-in-use": (port_in_use, "EADDRINUSE"),
    "cmake-package": (cmake_package, "could not find package configuration"),
    "pip-resolution": (pip_resolution, "no matching distribution"),
    "go-nil-pointer": (go_nil_pointer, "nil pointer dereference"),
    "ld-undefined-reference": (gcc_undefined_reference, "undefined reference"),
}


def kotlin_unresolved(r: random.Random) -> str:
    return (f"e: file:///src/{_dir(r)}/{_name(r)}.kt:{_n(r)}:{_n(r, 1, 40)} Unresolved "
            f"reference: {_name(r)}\nFAILURE: Build failed with an exception.")


def swift_not_in_scope(r: random.Random) -> str:
    return (f"/Users/ci/shop/Sources/{_name(r)}.swift:{_n(r)}:{_n(r, 1, 40)}: error: cannot "
            f"find '{_name(r)}' in scope\n        let x = {_name(r)}(y)\n                ^~~~")


def php_undefined_function(r: random.Random) -> str:
    return (f"PHP Fatal error:  Uncaught Error: Call to undefined function {_name(r)}() in "
            f"/var/www/{_dir(r)}/index.php:{_n(r)}\nStack trace:\n#0 {{main}}\n  thrown in "
            f"/var/www/{_dir(r)}/index.php on line {_n(r)}")


def ruby_nomethod(r: random.Random) -> str:
    return (f"{_dir(r)}/{_name(r).lower()}.rb:{_n(r)}:in `{_name(r)}': undefined method "
            f"`{_name(r)}' for nil:NilClass (NoMethodError)\n\tfrom bin/rails:{_n(r)}:in "
            "`<main>'")


def maven_compile(r: random.Random) -> str:
    return (f"[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:"
            f"{_ver(r)}:compile (default-compile) on project shop-{_name(r).lower()}: "
            "Compilation failure\n[ERROR] -> [Help 1]")


def pg_refused(r: random.Random) -> str:
    port = r.choice([5432, 5433, 6543])
    return (f"psql: error: connection to server at \"db-{_n(r)}.internal\" ({_n(r, 10, 250)}."
            f"{_n(r, 0, 250)}.0.{_n(r, 1, 250)}), port {port} failed: Connection refused\n"
            "\tIs the server running on that host and accepting TCP/IP connections?")


def helm_name_in_use(r: random.Random) -> str:
    return ("Error: INSTALLATION FAILED: cannot re-use a name that is still in use\n"
            f"helm.go:{_n(r, 50, 99)}: [debug] cannot re-use a name that is still in use")


def ssh_denied(r: random.Random) -> str:
    return ("git@github.com: Permission denied (publickey).\nfatal: Could not read from "
            "remote repository.\n\nPlease make sure you have the correct access rights")


HELD_OUT: dict[str, tuple[Variant, str]] = {
    "kotlin-unresolved": (kotlin_unresolved, "Unresolved reference"),
    "swift-scope": (swift_not_in_scope, "cannot find in scope"),
    "php-undefined-function": (php_undefined_function, "undefined function"),
    "ruby-nomethod": (ruby_nomethod, "NoMethodError"),
    "maven-compile": (maven_compile, "maven compiler plugin compilation failure"),
    "pg-refused": (pg_refused, "connection refused"),
    "helm-name-in-use": (helm_name_in_use, "cannot re-use a name"),
    "ssh-denied": (ssh_denied, "permission denied publickey"),
}
"""Families written after the normaliser, never used to tune it (``--held-out``)."""


def record(n: int, family: str, stderr: str) -> SpanRecord:
    end_ns = BASE_NS + n * 60_000_000_000
    return SpanRecord(trace_id=0x5EED0000 + n, span_id=0x1000 + n, name="task",
                      start_ns=end_ns - 5_000_000_000, end_ns=end_ns, attributes={
                          "orchestrator.task.id": f"T-{n}",
                          "orchestrator.task.title": f"Fix the build of change {n}",
                          "orchestrator.agent.name": f"agent-{n % 3}",
                          "orchestrator.route": "paid_model",
                          "orchestrator.build_verify.attempts": 2 + n % 3,
                          "orchestrator.build_verify.stderr_tail": stderr,
                      })


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=12, help="runs per family (12)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--verbose", action="store_true", help="figures per family")
    parser.add_argument("--no-noise", action="store_true",
                        help="the error output alone, without progress lines around it")
    parser.add_argument("--held-out", action="store_true",
                        help="add 8 families the normaliser was not written against")
    args = parser.parse_args()
    if args.held_out:
        FAMILIES.update(HELD_OUT)
    rng = random.Random(args.seed)
    order = [family for family in FAMILIES for _ in range(args.runs)]
    rng.shuffle(order)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pipeline = build_pipeline(Settings(enabled=True, dir=root), ORCHESTRATOR)
        family_of: dict[str, str] = {}
        related_of: dict[str, tuple[str, ...]] = {}
        seen: Counter[str] = Counter()
        had_sibling: set[str] = set()
        for n, family in enumerate(order, start=1):
            stderr = FAMILIES[family][0](rng)
            if not args.no_noise:
                stderr = with_noise(rng, stderr)
            diary = pipeline.handle((record(n, family, stderr), ChildSummary()))
            assert diary is not None
            family_of[diary.id] = family
            related_of[diary.id] = diary.related
            if seen[family]:
                had_sibling.add(diary.id)
            seen[family] += 1
        pipeline.close()
        lessons = _lessons(root)
        search = _search(root, family_of, lessons)
        asked = _questions(root, family_of, lessons)
    _report(family_of, related_of, had_sibling, lessons, search, args.verbose)
    print(f"Lesson found by a question: {_mean(list(asked.values())):.3f} (share of families; "
          "'how did an earlier run get past <words> when the build broke')")
    return 0


def _lessons(root: Path) -> dict[str, list[str]]:
    """Lesson id -> the diary ids of its evidence."""
    found: dict[str, list[str]] = {}
    folder = root / "diaries" / "lessons"
    for file in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        front = parse_front_matter(file.read_text(encoding="utf-8"))
        found[str(front["id"])] = [str(item) for item in front.get("evidence") or []]
    return found


def _search(root: Path, family_of: dict[str, str],
            lessons: dict[str, list[str]]) -> dict[str, float]:
    """Family -> precision@10 of the search a person would type for it."""
    from otel_diary.cli.search import ranked  # lessons above diaries, as the command lists
    from otel_diary.index.store import DiaryIndex

    precision: dict[str, float] = {}
    with DiaryIndex(root) as index:
        for family, (_, query) in FAMILIES.items():
            ids = [item["id"] for item in ranked(root, index, query, limit=10)]
            good = 0
            for ident in ids:
                if ident in lessons:
                    evidence = [family_of.get(e) for e in lessons[ident]]
                    good += evidence.count(family) * 2 > len(evidence)
                else:
                    good += family_of.get(ident) == family
            precision[family] = good / len(ids) if ids else 0.0
    return precision


def _questions(root: Path, family_of: dict[str, str],
               lessons: dict[str, list[str]]) -> dict[str, float]:
    """Family -> 1.0 when the search for a question around its words lists its lesson."""
    from otel_diary.cli.search import ranked
    from otel_diary.index.store import DiaryIndex

    found: dict[str, float] = {}
    with DiaryIndex(root) as index:
        for family, (_, words) in FAMILIES.items():
            question = f"how did an earlier run get past {words} when the build broke"
            listed = [item["id"] for item in ranked(root, index, question, limit=10)]
            found[family] = float(any(
                [family_of.get(e) for e in lessons[ident]].count(family) * 2
                > len(lessons[ident]) for ident in listed if ident in lessons))
    return found


def _report(family_of: dict[str, str], related_of: dict[str, tuple[str, ...]],
            had_sibling: set[str], lessons: dict[str, list[str]],
            search: dict[str, float], verbose: bool) -> None:
    precisions: list[float] = []
    covered: list[float] = []
    first_lesson: list[float] = []
    per_family: dict[str, list[float]] = defaultdict(list)
    lesson_family: dict[str, str] = {}
    for ident, evidence in lessons.items():
        counts = Counter(family_of.get(e, "?") for e in evidence)
        if counts:
            lesson_family[ident] = counts.most_common(1)[0][0]
    for ident, related in related_of.items():
        diaries = [r for r in related if r in family_of]
        if diaries:
            share = sum(family_of[r] == family_of[ident] for r in diaries) / len(diaries)
            precisions.append(share)
            per_family[family_of[ident]].append(share)
        if ident in had_sibling:
            covered.append(1.0 if diaries else 0.0)
            first_lesson.append(1.0 if related and lesson_family.get(related[0])
                                == family_of[ident] else 0.0)
    print(f"diaries: {len(family_of)} in {len(FAMILIES)} families")
    print(f"Related precision@5: {_mean(precisions):.3f} (over {len(precisions)} diaries "
          "listing any)")
    print(f"Related coverage:    {_mean(covered):.3f} (of {len(covered)} with an earlier "
          "sibling)")
    print(f"Lesson listed first: {_mean(first_lesson):.3f}")
    print(f"Search precision@10: {_mean(list(search.values())):.3f} (mean over families)")
    families_of_lessons: dict[str, set[str]] = defaultdict(set)
    purities: list[float] = []
    for ident, evidence in lessons.items():
        counts = Counter(family_of.get(e, "?") for e in evidence)
        if not counts:
            continue
        purities.append(counts.most_common(1)[0][1] / sum(counts.values()))
        for family in counts:
            families_of_lessons[family].add(ident)
    per = [len(families_of_lessons.get(f, ())) for f in FAMILIES]
    print(f"Lessons: {len(lessons)}; per family: mean {_mean([float(x) for x in per]):.2f}, "
          f"min {min(per)}, max {max(per)}")
    print(f"Lesson purity:       {_mean(purities):.3f} (mean over lessons)")
    if verbose:
        for family in FAMILIES:
            print(f"  {family:24s} related p@5 {_mean(per_family[family]):.2f}  search p@10 "
                  f"{search[family]:.2f}  lessons {len(families_of_lessons.get(family, ()))}")


if __name__ == "__main__":
    sys.exit(main())
