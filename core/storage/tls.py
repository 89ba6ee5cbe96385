"""TLS for the content gateways: the server's certificate (``--tls-cert``/``--tls-key``) and the CAs a
fetcher trusts (``--peer-ca``), each loaded once at start, where a file that does not load is one line
naming it (ConfigError, exit 2) rather than a failure at the first request.

Sealed content needs no TLS for confidentiality, but TLS hides which CIDs a host asks for and proves the
gateway is the one its URL names (docs/storage.md, "Across hosts"). Verification is never turned off: a
fetcher trusts the system's store, plus a private CA or a self-signed gateway's certificate if given.
Nothing here logs or shows a key's bytes; errors name files only.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from core.bounded import InputRejected, read_regular_file
from core.errors import ConfigError

__all__ = ["server_context", "client_context"]

#: The largest PEM file read: a certificate chain or a key is a few KiB, a CA bundle a few hundred.
MAX_PEM_BYTES = 4 << 20


def _pem(path: Path, what: str) -> str:
    """The text of a PEM file, read bounded (a directory, a FIFO, a missing or binary file: one line)."""
    try:
        return read_regular_file(path, max_bytes=MAX_PEM_BYTES, what=what).decode("ascii")
    except InputRejected as exc:
        raise ConfigError(str(exc)) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not PEM text") from None


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The context a gateway serves HTTPS with: ``cert`` (PEM, the certificate then any intermediates)
    and its private ``key`` (PEM, unencrypted: a daemon starts unattended), TLS 1.2 at least. Which of
    the two files is wrong is told apart here because OpenSSL's own error ("PEM lib") names neither."""
    _pem(key, "TLS key")  # readable, before OpenSSL opens it
    try:
        ssl.create_default_context().load_verify_locations(cadata=_pem(cert, "TLS certificate"))
    except (ssl.SSLError, ValueError):
        raise ConfigError(f"TLS certificate {cert}: no PEM certificate in it") from None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2

    def encrypted() -> str:  # asked only for an encrypted key; OpenSSL would prompt on the terminal
        raise ConfigError(f"TLS key {key} is encrypted: give it unencrypted (openssl pkey -in {key} -out KEY.pem)")

    try:
        context.load_cert_chain(cert, key, password=encrypted)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(f"TLS key {key} does not match the certificate {cert}") from None
        raise ConfigError(f"TLS key {key}: no PEM private key in it") from None
    except OSError as exc:  # changed since it was read
        raise ConfigError(f"TLS certificate {cert} or key {key}: {exc.strerror or type(exc).__name__}") from None
    return context


def client_context(ca: Path | None) -> ssl.SSLContext | None:
    """The context https gateways are verified with: None (aiohttp's default, the system's trust store)
    without ``ca``; else the system's store plus the certificates of the PEM bundle ``ca`` (a private CA,
    or a self-signed gateway's own certificate), host names checked as always."""
    if ca is None:
        return None
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cadata=_pem(ca, "CA bundle"))
    except (ssl.SSLError, ValueError):
        raise ConfigError(f"CA bundle {ca}: no PEM certificate in it") from None
    context.set_alpn_protocols(("http/1.1",))  # as aiohttp's own default context
    return context
