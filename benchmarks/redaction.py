"""Redaction throughput on 1 MiB of build log, normal and adversarial.

Prints MiB/s for each input, for half and quarter sizes too (a linear redactor keeps the
same MiB/s at every size), and the ratio against a baseline measured in the same run: one
``re.escape`` literal scan-and-replace pass over the same text.

    .venv/bin/python benchmarks/redaction.py
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

from otel_diary.pipeline.redact import SecretRedactor

MIB = 1024 * 1024

NORMAL_LINES = [
    "> tsc --noEmit",
    "src/orders/api.ts(42,17): error TS2345: Argument of type 'string | undefined' is not "
    "assignable to parameter of type 'string'.",
    "  Type 'undefined' is not assignable to type 'string'.",
    "npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory.",
    "FAILED tests/test_orders.py::test_paginate - AssertionError: assert 3 == 4",
    "    at Object.<anonymous> (/app/node_modules/jest-circus/build/utils.js:298:28)",
    "Compiling serde v1.0.210 (registry+https://github.com/rust-lang/crates.io-index)",
    "error[E0308]: mismatched types --> src/main.rs:12:5 expected `u32`, found `&str`",
    "max_tokens=300 tokens: 5132 latency_ms=8421 secretary: none; passes: 3 of 4",
    "GET https://api.example.com/v1/orders?page=2 -> 200 (31 ms)",
    "export AWS_REGION=eu-west-1 && git push origin main",
]
SECRETS = [
    "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2ln",
    "git clone https://deploy:s3cr3tPa55@git.example.com/acme/app.git",
    "GITHUB_TOKEN=ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3",
]


def normal(size: int) -> str:
    """A build log with a secret every few hundred lines."""
    lines: list[str] = []
    total = 0
    index = 0
    while total < size:
        line = (SECRETS[index // 300 % len(SECRETS)] if index % 300 == 299
                else NORMAL_LINES[index % len(NORMAL_LINES)])
        lines.append(line)
        total += len(line) + 1
        index += 1
    return "\n".join(lines)[:size]


def repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "one long token run": lambda n: "a" * n,
    "AKIA repeated": lambda n: repeat("AKIA", n),
    "eyJ repeated": lambda n: repeat("eyJ", n),
    "eyJ.x. almost-JWTs": lambda n: repeat("eyJaaaa.bbbb", n),
    "ghp_ then a long run": lambda n: "ghp_" + "a" * (n - 4),
    "sk- repeated": lambda n: repeat("sk-", n),
    "password= without values": lambda n: repeat("password=", n),
    "password=\" unclosed": lambda n: 'password="' + "x" * (n - 10),
    "token: token: ...": lambda n: repeat("token: ", n),
    "Bearer Bearer ...": lambda n: repeat("Bearer ", n),
    "://a: without @": lambda n: repeat("://a:aaaaaaaa", n),
    "mongodb://a: without @": lambda n: repeat("mongodb://a:a/a/", n),
    "docker login -u -u ...": lambda n: repeat("docker login -u a -u ", n),
    "BEGIN without END": lambda n: repeat("-----BEGIN RSA PRIVATE KEY-----\n", n),
    "END without BEGIN": lambda n: repeat("QUJDREVGR0hJSktMTU5PUA==\n-----END PRIVATE KEY-----\n",
                                          n),
    "mixed prefixes": lambda n: repeat("AKIAeyJghp_glpat-xoxb-sk-://u:p Bearer password=", n),
    "password = f( never closed": lambda n: "password = f(" + "a" * (n - 13),
    "getenv('PASS...' repeated": lambda n: repeat("getenv('PASS" + "a" * 70, n),
    "token: self.a.a.a...": lambda n: repeat("token: self" + ".a" * 40 + " ", n),
    "echo a | b c (no stdin)": lambda n: repeat("echo aaaa | bbbb cccc ", n),
    "htpasswd -b -b ...": lambda n: repeat("htpasswd -b -b -b -b ", n),
    "smbclient -U without %": lambda n: repeat("smbclient -U aaaa ", n),
    "7z then words": lambda n: repeat("7z a b c d e f g ", n),
    "aws configure set ...": lambda n: repeat("aws configure set a.b.c_key ", n),
    "fly secrets set A=b A=b ...": lambda n: repeat("fly secrets set " + "A=b " * 70, n),
    "fly secrets set A=\" unclosed": lambda n: repeat('fly secrets set A="', n),
    "net use \\\\a ...": lambda n: repeat("net use \\\\a ", n),
    "put-parameter SecureString": lambda n: repeat("put-parameter SecureString ", n),
    '"keyName": "key1", ...': lambda n: repeat('"keyName": "key1", ', n),
    "LS0tLS1CRUdJTi (base64 PEM)": lambda n: repeat("LS0tLS1CRUdJTiBQUklWQVRFIEtF ", n),
    "password> repeated": lambda n: repeat("password>", n),
    'key="a repeated': lambda n: repeat('key="a', n),
    "ENV AAAA...": lambda n: repeat("ENV " + "A" * 50, n),
    "name: aaaa... (no secret)": lambda n: repeat("name: " + "a" * 60, n),
    '"name": "DB_PASSWORD", "a": "b"': lambda n: repeat('"name": "DB_PASSWORD", "a": "b", ', n),
    "IDENTIFIED BY repeated": lambda n: repeat("IDENTIFIED BY ", n),
    "create user aaaa... (no by)": lambda n: repeat("create user " + "a" * 130 + " ", n),
    "sqlplus a/ repeated": lambda n: repeat("sqlplus a/", n),
    "userid=a/ repeated": lambda n: repeat("userid=a/", n),
    '"Jwt": {"a": "b", ...': lambda n: repeat('"Jwt": {' + '"a": "b", ' * 9, n),
    '"element": "password" (no text)': lambda n: repeat('"element": "password", "ref": "e1",', n),
    ".fill('#password' unclosed": lambda n: repeat(".fill('#password" + "a" * 70, n),
    "password').fill( repeated": lambda n: repeat("password').fill(", n),
    "getConnection(a, b, repeated": lambda n: repeat("getConnection(a, 'b', ", n),
    "a:b without @tcp(": lambda n: repeat("a:" + "b" * 60, n - 6) + "@tcp(",
    "AUTH a b c (no line end)": lambda n: repeat("\nAUTH a b c ", n),
    "dbPass dataKey ...": lambda n: repeat("dbPass dataKey jwtKey userPwd ", n),
    'one JSON string of "\\n" escapes': lambda n: '"' + repeat("password:\\n  x\\n", n - 2) + '"',
    '"\\n" strings, unclosed': lambda n: repeat('"a\\nb ', n),
    'JSON in JSON in JSON': lambda n: repeat('{"a": "{\\"b\\": \\"{\\\\\\"c\\\\\\": 1}\\"}"} ', n),
    "AUTH at a prompt": lambda n: repeat("127.0.0.1:6379> AUTH a b\n", n),
    "password for a b c d (no verb)": lambda n: repeat("password for a b c d ", n),
    "the API key for a is (no value)": lambda n: repeat("the API key for a is ", n),
    "credentials: a: repeated": lambda n: repeat("credentials: a:", n),
    "cat a_token then a line": lambda n: repeat("$ cat a_token\nb1 ", n),
    "jwt.sign(a, b, repeated": lambda n: repeat("jwt.sign(a, b, ", n),
    "hmac.new(Some( unclosed": lambda n: repeat("hmac.new(Some(\"", n),
    "auth: \"Aa1... (no close)": lambda n: repeat('auth: "Aa1' + "b" * 30, n),
    "token    Aa1... rows (no line end)": lambda n: repeat("\ntoken    Aa1" + "b" * 40 + " x", n),
    "user=a pass=1 repeated": lambda n: repeat("user=a pass=1 ", n),
}


def best_seconds(work: Callable[[], object], runs: int = 5) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        timings.append(time.perf_counter() - start)
    return min(timings)


def main() -> int:
    redact = SecretRedactor()
    baseline_pattern = re.compile(re.escape("AKIAIOSFODNN7EXAMPLE"))
    inputs: dict[str, Callable[[int], str]] = {"normal build log": normal, **ADVERSARIAL}
    print(f"python {sys.version.split()[0]}; best of 5 runs; MiB/s (higher is better)")
    print(f"{'input':28} {'1 MiB':>9} {'512 KiB':>9} {'256 KiB':>9} "
          f"{'baseline':>9} {'ratio':>6}")
    ratios: list[float] = []
    for name, make in inputs.items():
        rates: list[float] = []
        for size in (MIB, MIB // 2, MIB // 4):
            text = make(size)
            rates.append(size / MIB / best_seconds(partial(redact, text)))
        text = make(MIB)
        base_rate = 1 / best_seconds(partial(baseline_pattern.sub, "[X]", text))
        ratio = base_rate / rates[0]
        ratios.append(ratio)
        print(f"{name:28} {rates[0]:9.1f} {rates[1]:9.1f} {rates[2]:9.1f} "
              f"{base_rate:9.1f} {ratio:5.1f}x")
    print(f"redaction costs {statistics.median(ratios):.1f}x one literal scan (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
