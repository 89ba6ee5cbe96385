"""The pieces every command shares: its options, settings, client and signer, consoles, ``status``.

Role sub-apps and the ``veritrain`` commands import these so that ``--rpc-url``, ``--data-dir``,
``--keystore``, ``--key-env`` and ``--json`` mean the same everywhere::

    @app.command()
    def status(rpc: cli.Rpc = None, book_dir: cli.BookDir = None) -> None:
        settings = cli.settings(rpc_url=rpc, address_book_dir=book_dir)

Conventions (docs/cli.md): amounts in VERI and times as UTC dates by default, base units and unix
seconds with ``--json``; the RPC URL from ``--rpc-url`` (or ``--rpc``), else ``VERITRAIN_RPC_URL``,
else ``ETH_RPC_URL`` (foundry's), else http://127.0.0.1:8545.
"""

from __future__ import annotations

import functools
import gc
import inspect
import json
import os
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from eth_utils import is_address, to_checksum_address
from rich.console import Console
from rich.table import Table

from core.address_book import AddressBook
from core.agent import LoopSettings, configure_logging
from core.bounded import InputRejected, read_regular_file
from core.chain import Address, ChainClient, Signer
from core.config import Settings
from core.contracts import Protocol, Role
from core.errors import ConfigError, SignerError
from core.sealing import EncryptionKey
from core.storage import ContentStore, IpfsStore, LocalStore
from core.storage.gateway import GatewayServer
from core.storage.peers import FetchingStore
from core.storage.tls import client_context, server_context
from rolebase.amounts import show_tokens
from rolebase.config_file import ConfigFile
from rolebase.daemon import RoleDaemon, connect, state_dir
from rolebase.deployment import Deployment, run_following
from rolebase.earnings import earnings_of
from rolebase.gateways import AnnouncedGateways, announce_gateway, gateway_url
from rolebase.metrics import render, serve_metrics
from rolebase.sent import DEFAULT_CONFIRMATIONS
from rolebase.status import status_lines

__all__ = [
    "Rpc",
    "ChainId",
    "BookDir",
    "DataDir",
    "Keystore",
    "KeyEnv",
    "Account",
    "PasswordFile",
    "Json",
    "StoreDir",
    "IpfsApi",
    "Serve",
    "Announce",
    "TlsCert",
    "TlsKey",
    "Peers",
    "PeerCa",
    "LogJson",
    "LogLevel",
    "Poll",
    "Confirmations",
    "CHAIN",
    "KEY",
    "command_group",
    "settings",
    "with_settings",
    "DaemonFlags",
    "status_command",
    "open_store",
    "serve_store",
    "serve_tls",
    "client",
    "signer",
    "address_book",
    "protocol",
    "console",
    "err_console",
    "show_status",
    "who",
    "show_time",
    "keystore_dir",
    "encryption_keys_dir",
    "password",
]

PASSWORD_ENV = "VERITRAIN_KEYSTORE_PASSWORD"
_MAX_PASSWORD_FILE_BYTES = 4096

console = Console()
err_console = Console(stderr=True)

Rpc = Annotated[
    str | None,
    typer.Option("--rpc-url", "--rpc", "-r", help="JSON-RPC URL (env VERITRAIN_RPC_URL, else ETH_RPC_URL; default http://127.0.0.1:8545)", show_default=False),
]
ChainId = Annotated[int | None, typer.Option("--chain-id", help="expected chain id, checked on connect (env VERITRAIN_CHAIN_ID)", show_default=False)]
BookDir = Annotated[
    Path | None,
    typer.Option(
        "--address-book-dir", help="directory of <chainId>.json address books (env VERITRAIN_ADDRESS_BOOK_DIR; default ./deployments)", show_default=False
    ),
]
DataDir = Annotated[Path | None, typer.Option("--data-dir", help="client state directory (env VERITRAIN_DATA_DIR; default ~/.veritrain)", show_default=False)]
Keystore = Annotated[Path | None, typer.Option("--keystore", help="encrypted JSON keystore file (env VERITRAIN_KEYSTORE)", show_default=False)]
Account = Annotated[
    str | None,
    typer.Option(
        "--account",
        "-a",
        help="a key by its name in <data-dir>/keystores (veritrain wallet new NAME; env VERITRAIN_ACCOUNT)",
        envvar="VERITRAIN_ACCOUNT",
        show_default=False,
    ),
]
PasswordFile = Annotated[
    Path | None,
    typer.Option(
        "--password-file",
        help="file whose first line is the keystore's password (env VERITRAIN_PASSWORD_FILE; else VERITRAIN_KEYSTORE_PASSWORD, else a prompt)",
        show_default=False,
    ),
]
KeyEnv = Annotated[str | None, typer.Option("--key-env", help="name of the env var that holds the private key (env VERITRAIN_KEY_ENV)", show_default=False)]
EncryptionKeyName = Annotated[
    str | None,
    typer.Option(
        "--encryption-key",
        help="the encryption key that reads sealed jobs (docs/sealing.md): NAME of <data-dir>/encryption-keys (veritrain keys new NAME);"
        " default: one named after the role, made on the first start. The daemon registers it on chain once it has stake",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="print machine-readable JSON (amounts in base units, times in unix seconds)")]
StoreDir = Annotated[
    Path | None,
    typer.Option(
        "--store-dir",
        help="local content store directory [env: VERITRAIN_STORE_DIR; default <data-dir>/store]",
        envvar="VERITRAIN_STORE_DIR",
        show_default=False,
    ),
]
IpfsApi = Annotated[
    str | None,
    typer.Option(
        "--ipfs-api", help="IPFS node RPC API URL (instead of the local store), e.g. http://127.0.0.1:5001", envvar="VERITRAIN_IPFS_API", show_default=False
    ),
]
Serve = Annotated[
    str | None,
    typer.Option(
        "--serve",
        help="serve the local store's pinned content to other hosts as an IPFS trustless gateway on HOST:PORT, announced on chain, e.g. 10.0.0.3:8080 (docs/storage.md)",
        envvar="VERITRAIN_SERVE",
        show_default=False,
    ),
]
Announce = Annotated[
    str | None,
    typer.Option(
        "--announce",
        help="the URL other hosts reach --serve at, announced on chain (behind NAT, in a container: the forwarded address), e.g. http://203.0.113.7:8088; default http://HOST:PORT of --serve (https:// with --tls-cert), refused if that is 0.0.0.0 or, on a public chain, loopback or private",
        envvar="VERITRAIN_ANNOUNCE",
        show_default=False,
    ),
]
TlsCert = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert",
        help="serve --serve over HTTPS with this certificate (PEM, then any intermediates; with --tls-key); announced as https://HOST:PORT (docs/storage.md)",
        envvar="VERITRAIN_TLS_CERT",
        show_default=False,
    ),
]
TlsKey = Annotated[
    Path | None,
    typer.Option("--tls-key", help="the private key of --tls-cert (PEM, unencrypted)", envvar="VERITRAIN_TLS_KEY", show_default=False),
]
PeerCa = Annotated[
    Path | None,
    typer.Option(
        "--peer-ca",
        help="a PEM bundle of CAs (or self-signed gateway certificates) https gateways are also verified with, besides the system's trust store",
        envvar="VERITRAIN_PEER_CA",
        show_default=False,
    ),
]
Peers = Annotated[
    list[str] | None,
    typer.Option(
        "--peer",
        help="a gateway to fetch missing content from before those announced on chain, verified by CID (repeat it; env VERITRAIN_PEERS, space-separated), e.g. http://10.0.0.3:8080",
        envvar="VERITRAIN_PEERS",
        show_default=False,
    ),
]
LogJson = Annotated[bool, typer.Option("--log-json", help="log one JSON object per line")]
LogLevel = Annotated[str, typer.Option(help="DEBUG, INFO, WARNING")]
Poll = Annotated[float, typer.Option(help="seconds between polls of the chain", min=0.05, max=600)]
Confirmations = Annotated[
    int,
    typer.Option(help="act on chain state this many blocks deep: a reorg shallower than that never reaches a decision (0: the latest block)", min=0, max=1000),
]

#: The shared options that make a command's :class:`Settings`: parameter name -> (settings field, option).
_SETTINGS_OPTIONS: dict[str, tuple[str, Any]] = {
    "rpc": ("rpc_url", Rpc),
    "chain_id": ("chain_id", ChainId),
    "book_dir": ("address_book_dir", BookDir),
    "data_dir": ("data_dir", DataDir),
    "keystore": ("keystore", Keystore),
    "account": ("account", Account),
    "password_file": ("password_file", PasswordFile),
    "key_env": ("key_env", KeyEnv),
}
#: The options that find the deployment, and those that name the key (a command that keeps no
#: records takes no ``--data-dir``; one that never signs no key).
CHAIN = ("rpc", "chain_id", "book_dir")
KEY = ("keystore", "account", "password_file", "key_env")


def command_group(name: str, help: str) -> typer.Typer:
    """A ``veritrain NAME`` group of commands, set up as every group is (help when called bare,
    one-line errors, no shell-completion commands)."""
    return typer.Typer(name=name, help=help, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


def settings(account: str | None = None, **flags: Any) -> Settings:
    """Settings from the given flags (None = not given) over env vars over defaults; the RPC URL
    falls back to foundry's ``ETH_RPC_URL`` when neither the flag nor ``VERITRAIN_RPC_URL`` is set.
    ``account`` names a key of the keystore directory (it becomes the settings' keystore)."""
    if flags.get("rpc_url") is None and not os.environ.get("VERITRAIN_RPC_URL") and os.environ.get("ETH_RPC_URL"):
        flags["rpc_url"] = os.environ["ETH_RPC_URL"]
    loaded = Settings.load(**flags)
    if account is None:
        return loaded
    if flags.get("keystore") is not None or flags.get("key_env") is not None:
        raise ConfigError("give one of --account, --keystore, --key-env")
    path = keystore_dir(loaded) / account
    if not account.replace("-", "_").isidentifier() or not path.is_file():
        raise ConfigError(f"no account {account!r} in {keystore_dir(loaded)} (veritrain wallet list; veritrain wallet new {account})")
    return loaded.model_copy(update={"keystore": path, "key_env": None})


def open_store(
    *,
    store_dir: Path | None,
    ipfs_api: str | None,
    data_dir: Path,
    peers: list[str] | None = None,
    discover: AnnouncedGateways | None = None,
    peer_ca: Path | None = None,
) -> ContentStore:
    """The content store of ``--store-dir`` or ``--ipfs-api``: an IPFS node's RPC API if given, else a
    local directory store; with ``--peer`` gateways or ``discover`` (the gateways announced on chain),
    what it lacks is fetched from them (verified) and kept, https ones verified with the system's trust
    store and ``--peer-ca`` (loaded first: a bundle that does not load is one line).

    Processes on one machine may instead share one ``store_dir`` (the demo's daemons); the default is
    ``<data_dir>/store``.
    """
    if ipfs_api is not None and store_dir is not None:
        raise ConfigError("give either --store-dir or --ipfs-api, not both")
    tls = client_context(peer_ca)
    own: ContentStore = IpfsStore(ipfs_api) if ipfs_api is not None else LocalStore(store_dir if store_dir is not None else data_dir / "store")
    return FetchingStore(own, peers or [], discover=discover, tls=tls) if peers or discover else own


def serve_tls(serve: str | None, cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """The TLS context of ``--tls-cert`` and ``--tls-key`` (:func:`core.storage.tls.server_context`), None
    without them; one line (exit 2), before anything starts, for one without the other, either without
    ``--serve``, or a file that does not load."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ConfigError("--tls-cert and --tls-key go together: give both (PEM files) or neither")
    if serve is None:
        raise ConfigError("--tls-cert and --tls-key are the certificate of --serve: give --serve HOST:PORT too")
    return server_context(cert, key)


def serve_store(store: ContentStore, address: str, tls: ssl.SSLContext | None = None) -> GatewayServer:
    """A started gateway serving ``store`` (a local store, maybe behind peers) on ``HOST:PORT``, over
    HTTPS with ``tls`` (:func:`serve_tls`)."""
    own = store.own if isinstance(store, FetchingStore) else store
    if not isinstance(own, LocalStore):
        raise ConfigError("--serve serves the local store; an IPFS node (--ipfs-api) serves its own content")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--serve takes HOST:PORT, e.g. 127.0.0.1:8080, not {address!r}")
    try:
        return GatewayServer(own, host.strip("[]"), int(port), tls).start()
    except OSError as exc:
        raise ConfigError(f"--serve {address}: cannot listen there: {exc.strerror or exc}") from None


Metrics = Annotated[
    str | None,
    typer.Option(
        "--metrics",
        help="serve this daemon's status (stake, earnings, jobs in hand and their deadlines, last error) as Prometheus text at http://HOST:PORT/metrics, e.g. 127.0.0.1:9101",
        envvar="VERITRAIN_METRICS",
        show_default=False,
    ),
]

#: What ``--metrics`` serves: a role's name, its state directory and its ``status`` report (the ``status`` command's).
StatusSource = tuple[str, Callable[[Protocol, Path, Address, Callable[[int], str]], dict[str, object]]]


@dataclass(frozen=True)
class DaemonFlags:
    """The options every daemon's ``run`` takes: where content lives (and is served from, and fetched
    from), the poll interval, the logs."""

    store_dir: Path | None = None
    ipfs_api: str | None = None
    serve: str | None = None
    announce: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    peer: list[str] | None = None
    peer_ca: Path | None = None
    poll: float = 2.0
    confirmations: int = DEFAULT_CONFIRMATIONS
    log_json: bool = False
    log_level: str = "INFO"
    metrics: str | None = None

    @property
    def loop(self) -> LoopSettings:
        return LoopSettings(poll_interval_s=self.poll, confirmations=self.confirmations)

    def run(self, settings: Settings, build: Callable[[Settings, Signer, ContentStore], RoleDaemon[Any, Any]], status: StatusSource | None = None) -> None:
        """The body of every role's ``run``: logs configured, the key loaded, the store opened (served with
        ``--serve``, over HTTPS with ``--tls-cert``/``--tls-key``, announced on chain; fetching what it lacks
        from ``--peer`` and the announced gateways, https ones verified with ``--peer-ca`` too:
        :mod:`rolebase.gateways`), then the daemon ``build(settings, signer, store)`` run over the current
        deployment's records (built again when the deployment changes: :func:`rolebase.deployment.run_following`).
        With ``--metrics HOST:PORT``, ``status`` (the role's name, state directory and report, as its
        ``status`` command has them) is served as Prometheus text (:mod:`rolebase.metrics`)."""
        configure_logging(level=self.log_level, json_lines=self.log_json)
        tls, peer_tls = serve_tls(self.serve, self.tls_cert, self.tls_key), client_context(self.peer_ca)  # before the key's password
        key = signer(settings)
        own = open_store(store_dir=self.store_dir, ipfs_api=self.ipfs_api, data_dir=settings.data_dir)
        if self.serve is None and self.announce is not None:
            raise ConfigError("--announce names where --serve is reached: give --serve HOST:PORT too")
        if self.serve is not None:
            gateway_url(self.serve, self.announce, settings.chain_id, tls=tls is not None)  # refused before anything starts
        gateway = serve_store(own, self.serve, tls) if self.serve is not None else None
        own_url = (self.announce or gateway.url) if gateway is not None else None
        discover = AnnouncedGateways(lambda: protocol(settings, signing=False), own=own_url)
        store = FetchingStore(own, self.peer or [], discover=discover, tls=peer_tls)
        metrics = None
        if self.metrics is not None and status is not None:
            role, report_of = status
            metrics = serve_metrics(self.metrics, lambda: render(role, status_report(role, settings, key.address, True, report_of)))

        def announced_and_built(s: Settings) -> RoleDaemon[Any, Any]:
            if gateway is not None:
                announce_gateway(connect(s, key), key.address, gateway.address, self.announce, tls=tls is not None)
            return build(s, key, store)

        try:
            run_following(settings, announced_and_built)
        finally:
            for server in (gateway, metrics):
                if server is not None:
                    server.stop()
            # What is left is interpreter exit, whose last garbage collection over torch's and numba's
            # objects held a stopped daemon past `veritrain up`'s 15 s SIGKILL: nothing in it needs collecting.
            gc.freeze()


#: The options of :class:`DaemonFlags`, by field.
_DAEMON_OPTIONS: dict[str, Any] = {
    "store_dir": StoreDir,
    "ipfs_api": IpfsApi,
    "serve": Serve,
    "announce": Announce,
    "tls_cert": TlsCert,
    "tls_key": TlsKey,
    "peer": Peers,
    "peer_ca": PeerCa,
    "poll": Poll,
    "confirmations": Confirmations,
    "log_json": LogJson,
    "log_level": LogLevel,
    "metrics": Metrics,
}


def with_settings(*names: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the shared options ``names`` (all eight by default) in place of its ``settings:
    Settings`` parameter, which it then receives built from them by :func:`settings`; and, if it has a
    ``flags: DaemonFlags`` parameter, the daemon options (``--store-dir``, ``--ipfs-api``, ``--serve``,
    ``--announce``, ``--tls-cert``, ``--tls-key``, ``--peer``, ``--peer-ca``, ``--poll``, ``--confirmations``, ``--log-json``, ``--log-level``) in its place, and
    ``--config FILE`` (:mod:`rolebase.config_file`: any of its options from a TOML file). They follow
    the command's own options (typer reads the signature)::

        @app.command()
        @with_settings()
        def run(settings: Settings, flags: DaemonFlags, stake: str = "0") -> None: ...
    """
    chosen = names or tuple(_SETTINGS_OPTIONS)

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        hints = get_type_hints(command, include_extras=True)
        params = inspect.signature(command).parameters
        own = [p.replace(annotation=hints[p.name]) for p in params.values() if p.name not in ("settings", "flags")]
        daemon = tuple(_DAEMON_OPTIONS) if "flags" in params else ()
        keyword = inspect.Parameter.KEYWORD_ONLY
        shared = [
            *([inspect.Parameter("config", keyword, default=None, annotation=ConfigFile)] if daemon else []),
            *(inspect.Parameter(n, keyword, default=getattr(DaemonFlags, n), annotation=_DAEMON_OPTIONS[n]) for n in daemon),
            *(inspect.Parameter(n, keyword, default=None, annotation=_SETTINGS_OPTIONS[n][1]) for n in chosen),
        ]

        @functools.wraps(command)
        def with_options(**given: Any) -> None:
            if daemon:
                given.pop("config")  # read by its callback, into the other options' defaults
                given["flags"] = DaemonFlags(**{n: given.pop(n) for n in daemon})
            command(settings=settings(**{_SETTINGS_OPTIONS[n][0]: given.pop(n) for n in chosen}), **given)

        vars(with_options)["__signature__"] = inspect.Signature([*own, *shared])  # what typer and inspect read
        with_options.__annotations__ = {p.name: p.annotation for p in (*own, *shared)}
        return with_options

    return wrap


def keystore_dir(s: Settings) -> Path:
    """Where ``--account NAME`` keys live: ``<data-dir>/keystores/NAME`` (encrypted JSON, 0600)."""
    return s.data_dir / "keystores"


def encryption_keys_dir(s: Settings) -> Path:
    """Where ``veritrain keys new NAME`` keeps encryption keys: ``<data-dir>/encryption-keys/NAME``
    (the 32 private bytes of an X25519 key, 0600; core/sealing.py)."""
    return s.data_dir / "encryption-keys"


def encryption_key_path(s: Settings, name: str) -> Path:
    """The file of encryption key ``name`` (letters, digits, - and _; refused otherwise, in one line)."""
    if not name.replace("-", "_").isidentifier():
        raise typer.BadParameter(f"{name!r}: use letters, digits, - and _", param_hint="NAME")
    return encryption_keys_dir(s) / name


def encryption_key(s: Settings, name: str | None, role: str) -> EncryptionKey:
    """A daemon's ``--encryption-key NAME``, loaded; without it, the key named after its ``role``,
    made on the first start (as ``veritrain keys new`` makes one). Every daemon holds one: a verifier
    cannot decline the draw of a sealed job, and one it cannot read would cost it its bond."""
    if name is not None:
        return EncryptionKey.load(encryption_key_path(s, name))
    path = encryption_key_path(s, role)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        EncryptionKey.generate().save(path)
    return EncryptionKey.load(path)


def password(s: Settings, *, confirm: bool = False) -> str:
    """The keystore password: the first line of ``--password-file``, else ``VERITRAIN_KEYSTORE_PASSWORD``,
    else asked on the terminal (twice with ``confirm``). Never echoed, never logged."""
    if s.password_file is not None:
        try:
            text = read_regular_file(s.password_file, max_bytes=_MAX_PASSWORD_FILE_BYTES, what="password file").decode()
        except (InputRejected, UnicodeDecodeError) as exc:
            raise ConfigError(f"password file {s.password_file}: {exc}") from None
        return text.splitlines()[0] if text else ""
    if os.environ.get(PASSWORD_ENV) is not None:
        return os.environ[PASSWORD_ENV]
    if not sys.stdin.isatty():
        raise SignerError(f"a keystore needs its password: --password-file, {PASSWORD_ENV}, or a terminal to ask on")
    return str(typer.prompt("keystore password", hide_input=True, confirmation_prompt=confirm))


def client(s: Settings) -> ChainClient:
    return ChainClient(s.rpc_url, timeout=s.rpc_timeout, expected_chain_id=s.chain_id)


def signer(s: Settings) -> Signer:
    """The key the settings name: a keystore (``--account`` or ``--keystore``; :func:`password`) or ``--key-env``."""
    if s.keystore is not None and s.key_env is None:
        return Signer.from_keystore(s.keystore, password(s))
    return Signer.from_settings(s.keystore, s.key_env)


def address_book(s: Settings, c: ChainClient) -> AddressBook:
    return AddressBook.for_chain(s.address_book_dir, c)


def protocol(s: Settings, *, signing: bool) -> Protocol:
    """The deployed protocol the settings point at, signing with their key if ``signing``."""
    return signing_protocol(s)[0] if signing else _connect(s, None)


def signing_protocol(s: Settings) -> tuple[Protocol, Signer]:
    """The deployed protocol signing with the settings' key, and that key: a command that needs both
    opens the keystore (and asks its password) once."""
    key = signer(s)
    return _connect(s, key), key


def _connect(s: Settings, key: Signer | None) -> Protocol:
    c = client(s)
    return Protocol.connect(c, address_book(s, c), key)


def show_time(unix_s: int) -> str:
    """A chain timestamp as a UTC date (what every table prints; ``--json`` keeps the seconds)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_s))


def status_report(
    role: str,
    settings: Settings,
    me: Address,
    raw: bool,
    report_of: Callable[[Protocol, Path, Address, Callable[[int], str]], dict[str, object]],
) -> dict[str, object]:
    """A role's status report (:func:`show_status`; base units and unix seconds when ``raw``, as
    ``--json`` and the ``--metrics`` endpoint read it)."""
    deployed = protocol(settings, signing=False)
    tokens: Callable[[int], str] = str if raw else show_tokens
    report = report_of(deployed, state_dir(Deployment.of(deployed).data_dir(settings.data_dir), role, me), me, tokens)
    release_at = deployed.stakes.stake_of(me, Role[role.upper()]).release_at
    net = sum(int(e["amount"]) for e in earnings_of(deployed, me))
    report["gas"] = tokens(deployed.client.balance(me))
    report["unbonding_release_at"] = release_at if raw else (show_time(release_at) if release_at else "-")
    report["earnings_net"] = str(net) if raw else ("-" if net < 0 else "") + show_tokens(abs(net))
    return report


def show_status(
    role: str,
    settings: Settings,
    address: str | None,
    json_out: bool,
    report_of: Callable[[Protocol, Path, Address, Callable[[int], str]], dict[str, object]],
    table_of: Callable[[dict[str, object]], Table | None],
) -> None:
    """The body of every role's ``status`` command: the report as JSON, or its header lines and table.

    ``report_of`` gets the role's state directory (:func:`rolebase.daemon.state_dir`, under the current
    deployment's records: :mod:`rolebase.deployment`) and the amount formatter: VERI
    for people, base units with ``--json``. Every report also says the gas balance, when the unbonding
    stake is released, and the account's net earnings (:mod:`rolebase.earnings`)."""
    me = who(address, settings)
    report = status_report(role, settings, me, json_out, report_of)
    if json_out:
        print(json.dumps(report, indent=2))
        return
    for line in status_lines(role, report):
        console.print(line)
    console.print(
        f"gas {report['gas']} ETH  unbonding released {report['unbonding_release_at']}  net earnings {report['earnings_net']} VERI (veritrain earnings {me})",
        highlight=False,
    )
    table = table_of(report)
    if table is not None:
        console.print(table)


def status_command(
    role: str,
    report_of: Callable[[Protocol, Path, Address, Callable[[int], str]], dict[str, object]],
    table_of: Callable[[dict[str, object]], Table | None],
    doc: str,
) -> Callable[..., None]:
    """A role's ``status`` command (``app.command()(status_command(...))``): :func:`show_status` behind
    the shared options, ``--address`` and ``--json``; ``doc`` is its help, with examples."""

    def status(settings: Settings, address: str | None = None, json_out: bool = False) -> None:
        show_status(role, settings, address, json_out, report_of, table_of)

    status.__doc__ = doc
    status.__annotations__ = {
        "settings": Settings,
        "address": Annotated[str | None, typer.Option(help=f"{role} address (instead of a key: status needs no secret)")],
        "json_out": Json,
        "return": None,
    }
    return with_settings()(status)


def who(address: str | None, settings: Settings) -> Address:
    """The account a command is about: ``--address``, else the key's address."""
    if address is not None:
        if not is_address(address):
            raise typer.BadParameter(f"{address!r} is not an address", param_hint="--address")
        return Address(to_checksum_address(address))
    return signer(settings).address
