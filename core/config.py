"""Client settings: where the chain is, where the address book and data live, which key signs.

Settings come from CLI flags, then environment variables (``VERITRAIN_*``),
then defaults. There are deliberately NO protocol parameters here (stakes,
windows, fees): every client reads those from the deployed contracts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.errors import ConfigError

__all__ = ["Settings", "ENV_PREFIX", "redact_url"]

ENV_PREFIX = "VERITRAIN_"

_ENV_FIELDS = {
    "rpc_url": "RPC_URL",
    "chain_id": "CHAIN_ID",
    "address_book_dir": "ADDRESS_BOOK_DIR",
    "data_dir": "DATA_DIR",
    "keystore": "KEYSTORE",
    "key_env": "KEY_ENV",
    "password_file": "PASSWORD_FILE",
    "rpc_timeout": "RPC_TIMEOUT",
}


def redact_url(url: str) -> str:
    """``url`` as errors and logs may show it: scheme, host and port only.

    ``user:secret@`` is replaced by ``***@`` and a path or query (where providers put API
    keys, ``/v3/<key>``) by ``/...``, so no credential in an endpoint URL is ever echoed.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<malformed URL>"
    if not parts.scheme or not host:
        return "<malformed URL>"
    shown = f"{parts.scheme}://{'***@' if '@' in parts.netloc else ''}{host}{port}"
    return shown + ("/..." if parts.path.strip("/") or parts.query else "")


class Settings(BaseModel):
    """Where to connect and who signs. Immutable; build with :meth:`load`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rpc_url: str = Field(default="http://127.0.0.1:8545", description="JSON-RPC HTTP endpoint")
    chain_id: int | None = Field(default=None, gt=0, description="expected chain id; checked on connect when set")
    address_book_dir: Path = Field(default=Path("deployments"), description="holds <chainId>.json address books")
    data_dir: Path = Field(default=Path.home() / ".veritrain", description="client state (databases, caches)")
    keystore: Path | None = Field(default=None, description="encrypted JSON keystore of the signing key")
    key_env: str | None = Field(default=None, description="name of an env var holding the private key")
    password_file: Path | None = Field(default=None, description="file whose first line is the keystore's password")
    rpc_timeout: float = Field(default=10.0, gt=0, le=600, description="seconds per RPC request")

    @field_validator("rpc_url")
    @classmethod
    def _http_only(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not value.replace("_", "a").isalnum():
            raise ValueError("must be an environment variable name")
        return value

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
        """Flags (``None`` means not given) over ``VERITRAIN_*`` env vars over defaults."""
        source = os.environ if env is None else env
        values: dict[str, Any] = {}
        for field, suffix in _ENV_FIELDS.items():
            raw = source.get(ENV_PREFIX + suffix)
            if raw not in (None, ""):
                values[field] = raw
        unknown = set(flags) - set(_ENV_FIELDS)
        if unknown:
            raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
        values.update({k: v for k, v in flags.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "settings"
            env_name = ENV_PREFIX + _ENV_FIELDS.get(where, where.upper())
            raise ConfigError(f"invalid {where} (flag or {env_name}): {first['msg']}") from None

    def address_book_path(self, chain_id: int) -> Path:
        return self.address_book_dir / f"{chain_id}.json"
