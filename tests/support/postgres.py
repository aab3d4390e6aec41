"""A throwaway PostgreSQL server for tests: ``initdb`` + ``pg_ctl`` on a free loopback port.

Host connections need a password (SCRAM), the Unix socket trusts. As root the server
runs as the ``postgres`` user (``initdb`` refuses root). Without the server binaries the
tests skip, saying how to install them; with ``CI=true`` they fail instead.

Usage::

    with PostgresCluster() as cluster:
        url = cluster.new_database()      # postgresql://postgres:…@127.0.0.1:PORT/db_1
        cluster.stop(); cluster.start()   # the same port and data
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL_HINT = ("PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
                "`apt-get install postgresql` (Debian/Ubuntu) or put their directory on PATH")
USER = "postgres"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, if there is one."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True):
        return Path(candidate).parent
    return None


def require_server() -> Path:
    """The server binaries' directory; skips the test without them (fails under CI)."""
    binaries = server_binaries()
    if binaries is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return binaries


class PostgresCluster:
    """A PostgreSQL server of its own in a temporary directory; ``close`` removes it."""

    def __init__(self) -> None:
        self.bin = require_server()
        self.password = "pw-" + secrets.token_hex(8)
        self.port = free_port()
        self.base = Path(tempfile.mkdtemp(prefix="otel-diary-pg-"))
        self.data = self.base / "data"
        self._databases = itertools.count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(USER)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", USER], check=True)
            shutil.chown(self.base, USER)
            self._as = ["runuser", "-u", USER, "--"]
        self.base.chmod(0o755)
        password_file = self.base / "password"
        password_file.write_text(self.password + "\n")
        if self._as:
            shutil.chown(password_file, USER)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
                  "--auth-host=scram-sha-256", f"--pwfile={password_file}", "-E", "UTF8",
                  "--no-sync")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        result = subprocess.run([*self._as, str(self.bin / tool), *args],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{tool} failed: {result.stdout}\n{result.stderr}")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "server.log"), "-w",
                  "-o", f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 "
                        "-c fsync=off -c max_connections=200", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql://postgres:{secret}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new, empty database."""
        import psycopg

        name = f"db_{next(self._databases)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One server for the test session (per xdist worker); tests take a database each."""
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """A new, empty database on the session's server."""
    return postgres_cluster.new_database()
