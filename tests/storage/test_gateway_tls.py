"""``--serve`` over HTTPS (issue 30, item 3): a gateway given a certificate serves only HTTPS, a fetcher
given its CA (``--peer-ca``) fetches from it and verifies every block by CID, and a fetcher that cannot
verify the certificate treats the gateway as an unavailable source (never asking it over plain HTTP).
Certificates, keys and CA bundles that do not load are refused at start in one line naming the file.
The certificates are made here with the ``openssl`` command: a self-signed one for 127.0.0.1."""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from core.errors import ConfigError
from core.storage import ContentNotFound, LocalStore, StoreUnavailable
from core.storage.gateway import GatewayServer
from core.storage.peers import UNVERIFIED_GATEWAY, FetchingStore, GatewayFetcher
from core.storage.tls import client_context, server_context
from core.storage.unixfs import CHUNK_SIZE
from rolebase.cli import DaemonFlags, open_store, serve_store, serve_tls
from rolebase.gateways import gateway_url

ROOT = Path(__file__).resolve().parents[2]
OPENSSL = shutil.which("openssl")


def _self_signed(directory: Path, name: str, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` (an IP address) and its key, as the docs make one."""
    if OPENSSL is None:
        pytest.skip("the openssl command is not installed: it makes the test certificates")
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"]
        + ["-subj", f"/CN={host}", "-addext", f"subjectAltName=IP:{host}", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def pem(tmp_path: Path) -> tuple[Path, Path]:
    return _self_signed(tmp_path, "gateway")


@pytest.fixture
def https(tmp_path: Path, pem: tuple[Path, Path]) -> Iterator[tuple[LocalStore, GatewayServer]]:
    store = LocalStore(tmp_path / "served")
    with GatewayServer(store, tls=server_context(*pem)) as server:
        yield store, server


def test_a_fetcher_with_the_ca_fetches_over_https_verified_and_keeps_it(
    https: tuple[LocalStore, GatewayServer], pem: tuple[Path, Path], tmp_path: Path
) -> None:
    store, server = https
    assert server.url == f"https://127.0.0.1:{server.port}"
    data = os.urandom(CHUNK_SIZE * 3 + 17)  # a root and four leaves: every block over TLS
    cid = store.put(data)
    mine = LocalStore(tmp_path / "mine")
    assert FetchingStore(mine, [server.url], tls=client_context(pem[0]), timeout=10).get(cid, len(data)) == data
    assert mine.has(cid) and mine.stat(cid).pinned  # kept, to serve on
    assert GatewayFetcher(server.url, tls=client_context(pem[0]), timeout=10).fetch(cid, len(data)) == data


def test_without_the_ca_the_gateway_is_an_unavailable_source_logged_once(
    https: tuple[LocalStore, GatewayServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, server = https
    cid = store.put(b"kept behind a certificate nobody vouches for")
    with pytest.raises(StoreUnavailable, match=r"block Qm\w+: TLS certificate not verified \(self.signed certificate\)"):
        GatewayFetcher(server.url, timeout=5).fetch(cid, 100)
    mine = LocalStore(tmp_path / "mine")
    fetching = FetchingStore(mine, [server.url], timeout=5)  # the system's trust store only
    with caplog.at_level(logging.WARNING, logger="core.storage.peers"):
        for _ in range(2):
            with pytest.raises(ContentNotFound, match=rf"gateway {server.url} \(.*TLS certificate not verified"):
                fetching.get(cid, 100)
    assert [r.peer for r in caplog.records if r.message == UNVERIFIED_GATEWAY] == [server.url]  # type: ignore[attr-defined]
    assert not mine.has(cid)
    with GatewayServer(LocalStore(tmp_path / "plain")) as plain:  # the fetch goes on with the other sources
        other = plain.index.store.put(b"kept behind a certificate nobody vouches for")
        assert (
            FetchingStore(LocalStore(tmp_path / "again"), [server.url, plain.url], timeout=5).get(other, 100) == b"kept behind a certificate nobody vouches for"
        )


def test_another_ca_does_not_vouch_for_the_gateway(https: tuple[LocalStore, GatewayServer], tmp_path: Path) -> None:
    store, server = https
    cid = store.put(b"x")
    stranger, _ = _self_signed(tmp_path, "stranger")
    with pytest.raises(StoreUnavailable, match="TLS certificate not verified"):
        GatewayFetcher(server.url, tls=client_context(stranger), timeout=5).fetch(cid, 10)


def test_plain_http_to_the_https_port_gets_no_content(https: tuple[LocalStore, GatewayServer], tmp_path: Path) -> None:
    store, server = https
    cid = store.put(b"only over TLS")
    plain_url = server.url.replace("https://", "http://")
    with pytest.raises(requests.ConnectionError):  # the handshake fails: the connection closes, no reply
        requests.get(f"{plain_url}/ipfs/{cid}?format=raw", timeout=5)
    with pytest.raises(ContentNotFound, match=rf"gateway {plain_url} \("):
        FetchingStore(LocalStore(tmp_path / "mine"), [plain_url], timeout=5).get(cid, 100)


def test_certificates_and_keys_that_do_not_load_are_refused_in_one_line(pem: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = pem
    other_cert, other_key = _self_signed(tmp_path, "other")
    encrypted = tmp_path / "encrypted.key"
    subprocess.run([str(OPENSSL), "pkey", "-in", str(key), "-aes256", "-passout", "pass:secret", "-out", str(encrypted)], check=True, capture_output=True)
    cases = [
        (tmp_path / "missing.crt", key, rf"TLS certificate {tmp_path}/missing.crt does not exist"),
        (cert, tmp_path / "missing.key", rf"TLS key {tmp_path}/missing.key does not exist"),
        (tmp_path, key, f"TLS certificate {tmp_path} is a directory"),
        (key, key, f"TLS certificate {key}: no PEM certificate in it"),
        (cert, cert, f"TLS key {cert}: no PEM private key in it"),
        (cert, other_key, f"TLS key {other_key} does not match the certificate {cert}"),
        (cert, encrypted, f"TLS key {encrypted} is encrypted: give it unencrypted"),
    ]
    secret = key.read_text().splitlines()[1]
    for given_cert, given_key, why in cases:
        with pytest.raises(ConfigError, match=why) as refused:
            server_context(given_cert, given_key)
        assert "\n" not in str(refused.value) and secret not in str(refused.value) and "PRIVATE" not in str(refused.value)
    assert server_context(other_cert, other_key).minimum_version >= ssl.TLSVersion.TLSv1_2
    for bundle, why in [(tmp_path / "none.pem", "CA bundle .*none.pem does not exist"), (key, f"CA bundle {key}: no PEM certificate in it")]:
        with pytest.raises(ConfigError, match=why):
            client_context(bundle)
    assert client_context(None) is None  # aiohttp's default: the system's trust store
    with pytest.raises(ConfigError, match=f"CA bundle {key}"):
        open_store(store_dir=tmp_path / "s", ipfs_api=None, data_dir=tmp_path, peers=["https://127.0.0.1:1"], peer_ca=key)


def test_the_serve_options_go_together_and_announce_https(pem: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = pem
    monkeypatch.setattr("rolebase.cli.configure_logging", lambda **_: None)  # a daemon's run would take over the test's logging
    with pytest.raises(ConfigError, match="--tls-cert and --tls-key go together: give both"):
        serve_tls("127.0.0.1:0", cert, None)
    with pytest.raises(ConfigError, match="--tls-cert and --tls-key go together"):
        serve_tls("127.0.0.1:0", None, key)
    with pytest.raises(ConfigError, match="certificate of --serve: give --serve HOST:PORT too"):
        serve_tls(None, cert, key)
    assert serve_tls(None, None, None) is None
    with pytest.raises(ConfigError, match="go together"):  # a daemon's run: refused before its key is asked for
        DaemonFlags(serve="127.0.0.1:0", tls_cert=cert).run(None, lambda *_: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="CA bundle"):
        DaemonFlags(peer_ca=tmp_path / "absent.pem").run(None, lambda *_: None)  # type: ignore[arg-type]
    assert gateway_url("10.0.0.3:8443", None, None, tls=True) == "https://10.0.0.3:8443"
    assert gateway_url("0.0.0.0:8443", "https://203.0.113.7:443", 1, tls=True) == "https://203.0.113.7:443"
    with pytest.raises(ConfigError, match="--serve speaks HTTPS .*announce https://, not http://"):
        gateway_url("0.0.0.0:8443", "http://203.0.113.7:8443", 1, tls=True)
    store = LocalStore(tmp_path / "served")
    cid = store.put(b"served by the options")
    gateway = serve_store(store, "127.0.0.1:0", serve_tls("127.0.0.1:0", cert, key))
    try:
        assert gateway.url.startswith("https://127.0.0.1:")
        fetching = open_store(store_dir=tmp_path / "b", ipfs_api=None, data_dir=tmp_path, peers=[gateway.url], peer_ca=cert)
        assert fetching.get(cid, 100) == b"served by the options"
    finally:
        gateway.stop()


def test_submit_serve_refuses_a_key_that_does_not_match_in_one_line_exit_2(pem: tuple[Path, Path], tmp_path: Path) -> None:
    cert, _ = pem
    _, other_key = _self_signed(tmp_path, "other")
    args = ["submit", "serve", "127.0.0.1:0", "--store-dir", str(tmp_path / "store"), "--tls-cert", str(cert), "--tls-key", str(other_key)]
    done = subprocess.run([sys.executable, "-m", "veritrain", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"TLS key {other_key} does not match the certificate {cert}" in lines[0], done.stderr
    assert not (tmp_path / "store").exists()  # refused before anything started
