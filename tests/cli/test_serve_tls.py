"""``otel-diary serve`` over TLS: real OTLP exporters trusting a throwaway CA, and the
settings it refuses to start with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from tests.cli.test_serve import Serve, send_with
from tests.support.loopback import free_port


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def pems(ca: trustme.CA, tmp_path: Path) -> dict[str, Path]:
    """The CA's certificate, and a certificate for 127.0.0.1 and its key, as files."""
    issued = ca.issue_cert("127.0.0.1")
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(str(files["ca"]))
    files["cert"].write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(files["key"]))
    return files


def test_with_a_certificate_both_listeners_take_tls_alone(
        tmp_path: Path, pems: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """With a certificate and its key, the SDK's OTLP/HTTP exporter (``https://``, trusting
    the CA by ``certificate_file``) and its gRPC exporter (with TLS credentials) deliver
    runs that become diaries; plain HTTP is not answered, and the start-up line names
    ``https://``."""
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests would trust them alone
        monkeypatch.delenv(name, raising=False)
    server = Serve(tmp_path, "--tls-cert", str(pems["cert"]), "--tls-key", str(pems["key"]),
                   "--log-format", "text", ca_file=pems["ca"])
    try:
        send_with(HttpExporter(endpoint=server.url + "/v1/traces",
                               certificate_file=str(pems["ca"])), "tls-http", 2)
        send_with(GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=False,
                               credentials=grpc.ssl_channel_credentials(
                                   pems["ca"].read_bytes())), "tls-grpc", 2)
        server.wait_for_diaries(4)
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{server.http_port}/health", timeout=5)
    finally:
        assert server.stop() == 0
    assert sorted(server.diaries()) == ["tls-grpc-0", "tls-grpc-1", "tls-http-0",
                                        "tls-http-1"]
    said = server.stderr.read_text()
    assert f"https://127.0.0.1:{server.http_port} (OTLP/HTTP)" in said
    assert f"127.0.0.1:{server.grpc_port} (OTLP/gRPC over TLS)" in said


def _encrypted(key: Path, to: Path) -> Path:
    loaded = serialization.load_pem_private_key(key.read_bytes(), password=None)
    to.write_bytes(loaded.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase")))
    return to


@pytest.mark.parametrize("case", ["cert alone", "key alone", "no such key", "other key",
                                  "encrypted key", "key as cert"])
def test_tls_settings_that_cannot_be_served_stop_serve_before_it_listens(
        tmp_path: Path, ca: trustme.CA, pems: dict[str, Path], case: str) -> None:
    """A certificate without its key (or the other way), a file that cannot be read, a
    key that is not the certificate's, or one encrypted (OpenSSL would wait for its
    passphrase on the terminal) is named, and ``serve`` exits 2 without listening."""
    other = tmp_path / "other.pem"
    ca.issue_cert("127.0.0.1").private_key_pem.write_to_path(str(other))
    cert, key = str(pems["cert"]), str(pems["key"])
    args, named = {
        "cert alone": ([], "--tls-cert and --tls-key go together"),  # from the environment
        "key alone": (["--tls-key", key], "--tls-cert and --tls-key go together"),
        "no such key": (["--tls-cert", cert, "--tls-key", str(tmp_path / "none.pem")],
                        f"cannot read the TLS key {tmp_path / 'none.pem'}: No such file"),
        "other key": (["--tls-cert", cert, "--tls-key", str(other)],
                      f"cannot use the TLS certificate {cert} with the key {other}"),
        "encrypted key": (["--tls-cert", cert, "--tls-key",
                           str(_encrypted(pems["key"], tmp_path / "locked.pem"))],
                          "cannot use the TLS certificate"),
        "key as cert": (["--tls-cert", key, "--tls-key", key],
                        "cannot use the TLS certificate"),
    }[case]
    done = subprocess.run([sys.executable, "-m", "otel_diary.cli", "serve", "--dir",
                           str(tmp_path / "kb"), "--http-port", str(free_port()),
                           "--grpc-port", "0", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30, check=False,
                          env={**os.environ, "OTEL_DIARY_SERVE_TLS_CERT_FILE": cert}
                          if case == "cert alone" else None)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert "Traceback" not in done.stderr
