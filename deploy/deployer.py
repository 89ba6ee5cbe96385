"""Deploy VeriToken, StakeManager, JobMarket, DisputeGame, AvailabilityCourt, KeyRegistry, SealedJobs and DilocoJobs, wire them, and write the chain's address book.

Idempotent: when ``<book_dir>/<chainId>.json`` exists and every address in it
has code on the chain, nothing is sent and that book is returned. A book
whose addresses have no code (a fresh devnet, a reset chain) is replaced.

Parameters come from a JSON file (``deploy/params/devnet.json`` is the
devnet default) whose keys are the Solidity names; the MarketParams,
GameParams and CourtParams structs are encoded by the field names of the
compiled ABI, so a field added to a struct is a key added to the file, not a
code change here.

Wiring (both one-shot on chain): ``StakeManager.authorize([JobMarket,
DisputeGame, AvailabilityCourt, SealedJobs, DilocoJobs])`` and ``JobMarket.setDisputeGame(DisputeGame)`` (the JobMarket
admits the court's and the sealed jobs' hold and release as protocol contracts of the StakeManager's
wiring). The KeyRegistry needs no wiring: it only reads the StakeManager's stakes. SealedJobs (it takes
the JobMarket and the KeyRegistry) holds a job while its data key is demanded and releases
bonds when a demand goes unanswered, hence its authorization; DilocoJobs claims each party's inner job for
it (``JobMarket.claimFor``) and locks, releases and slashes slot, aggregator and referee bonds. Then the
jackpot is seeded with ``jackpotSeed`` tokens (``approve`` + ``fundJackpot``,
topping up to the seed, so nothing is sent when it already holds that much):
forced errors start paying a whistleblower more than an audit costs from the
first job instead of after ~1000 taxed jobs (docs/incentives.md, "Seeding").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eth_abi import encode as abi_encode
from eth_abi.exceptions import EncodingError
from eth_typing import ABIConstructor
from eth_utils.abi import get_abi_input_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core import artifacts
from core.address_book import AddressBook, DeployedContract, book_path
from core.bounded import InputRejected, load_json, read_regular_file
from core.chain import Address, ChainClient, Receipt, Signer
from core.contracts import JobMarket, StakeManager, VeriToken
from core.errors import ArtifactsMissing, ConfigError

__all__ = ["DeployParams", "RoleAmounts", "DEVNET_PARAMS", "deploy_protocol", "encode_constructor"]

log = logging.getLogger(__name__)

DEVNET_PARAMS = Path(__file__).resolve().parent / "params" / "devnet.json"
_MAX_PARAMS_BYTES = 64 * 1024
_UINT96_MAX = 2**96 - 1
_MAX_WINDOW = 365 * 86_400  # the contracts' bound on a window (SealedJobs.MAX_WINDOW)


class RoleAmounts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    solver: int = Field(gt=0, le=_UINT96_MAX)
    verifier: int = Field(gt=0, le=_UINT96_MAX)
    whistleblower: int = Field(gt=0, le=_UINT96_MAX)


class DeployParams(BaseModel):
    """What a deployment is given. Token amounts in base units (18 decimals), windows in seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    token_supply: int = Field(alias="tokenSupply", gt=0, le=_UINT96_MAX)
    min_stakes: RoleAmounts = Field(alias="minStakes")
    unbonding_delay: int = Field(alias="unbondingDelay", ge=0, lt=2**32)
    market: dict[str, int] = Field(description="JobMarket MarketParams by Solidity field name")
    game: dict[str, int] = Field(description="DisputeGame GameParams by Solidity field name")
    court: dict[str, int] = Field(description="AvailabilityCourt CourtParams by Solidity field name")
    key_window: int = Field(alias="keyWindow", gt=0, le=_MAX_WINDOW, description="SealedJobs: seconds a demand for a sealed job's data key may stay unanswered")
    diloco: dict[str, int] = Field(description="DilocoJobs DilocoParams by Solidity field name")
    jackpot_seed: int = Field(alias="jackpotSeed", default=0, ge=0, description="tokens the deployer puts into the jackpot after wiring")

    @model_validator(mode="after")
    def _seed_fits_the_supply(self) -> DeployParams:
        """The deployer holds the whole supply at deployment: it cannot seed more than that."""
        if self.jackpot_seed > self.token_supply:
            raise ValueError(f"jackpotSeed = {self.jackpot_seed} exceeds tokenSupply = {self.token_supply}")
        return self

    @model_validator(mode="after")
    def _game_fits_the_dispute_window(self) -> DeployParams:
        """The DisputeGame constructor's check, told before anything is sent: a game opened at its
        last moment must end before the JobMarket's dispute timeout can refund the job."""
        g, window = self.game, self.market.get("disputeWindow")
        names = ("openWindow", "clockTime", "drawWindow", "commitWindow", "revealWindow")
        if window is None or any(n not in g for n in names):
            return self  # missing keys are reported against the compiled ABI by encode_constructor
        longest = g["openWindow"] + 2 * g["clockTime"] + g["drawWindow"] + g["commitWindow"] + g["revealWindow"]
        if longest >= window:
            raise ValueError(
                f"game.openWindow + 2 * clockTime + drawWindow + commitWindow + revealWindow = {longest} s must be below market.disputeWindow = {window} s"
            )
        return self

    @classmethod
    def load(cls, path: Path) -> DeployParams:
        try:
            return cls.model_validate(
                load_json(
                    read_regular_file(path, max_bytes=_MAX_PARAMS_BYTES, what="parameters file"), max_bytes=_MAX_PARAMS_BYTES, what=f"parameters file {path}"
                )
            )
        except InputRejected as exc:
            raise ConfigError(str(exc)) from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "(parameters)"
            raise ConfigError(f"parameters file {path}: {where}: {first['msg']}") from None

    @classmethod
    def devnet(cls) -> DeployParams:
        return cls.load(DEVNET_PARAMS)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


def _constructor(name: str) -> ABIConstructor:
    artifact = artifacts.load(name)
    for entry in artifact.abi:
        if entry["type"] == "constructor":
            return entry
    return {"type": "constructor", "inputs": []}


def _arrange(component: Mapping[str, Any], value: Any, where: str) -> Any:
    """Dicts keyed by ABI component names -> tuples in ABI order (recursively); checks the keys."""
    if component["type"].startswith("tuple"):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected an object with fields {[c['name'] for c in component['components']]}")
        names = [c["name"] for c in component["components"]]
        missing, extra = set(names) - set(value), set(value) - set(names)
        if missing or extra:
            raise ConfigError(f"{where}: missing {sorted(missing)}, unknown {sorted(extra)} (the compiled ABI has {names})")
        return tuple(_arrange(c, value[c["name"]], f"{where}.{c['name']}") for c in component["components"])
    return value


def encode_constructor(name: str, args: Sequence[Any]) -> bytes:
    """ABI-encode constructor ``args`` of contract ``name`` (struct args given as dicts by field name)."""
    ctor = _constructor(name)
    inputs = ctor["inputs"]
    if len(inputs) != len(args):
        raise ArtifactsMissing(f"{name} constructor takes {len(inputs)} arguments in the compiled ABI, deployer gives {len(args)}")
    arranged = [_arrange(i, a, f"{name}.{i['name'] or 'arg'}") for i, a in zip(inputs, args)]
    try:
        return abi_encode(get_abi_input_types(ctor), arranged)
    except EncodingError as exc:
        raise ConfigError(f"{name} constructor arguments do not fit the ABI types: {exc}") from None


def _deploy(client: ChainClient, signer: Signer, name: str, args: Sequence[Any]) -> tuple[Address, Receipt]:
    artifact = artifacts.load(name)
    if not artifact.deployable:
        raise ArtifactsMissing(f"{name} has no bytecode (abstract or interface)")
    address, receipt = client.deploy(artifact.bytecode, encode_constructor(name, args), signer, what=f"deploy {name}")
    log.info("deployed %s at %s (gas %d)", name, address, receipt.gas_used)
    return address, receipt


def _address_of(name: str) -> Callable[[Mapping[str, DeployedContract]], str]:
    return lambda deployed: deployed[name].address


def _plan(params: DeployParams) -> list[tuple[str, list[Any]]]:
    """Contracts in deployment order with their constructor arguments (callables: earlier addresses)."""
    stakes = params.min_stakes
    return [
        ("VeriToken", [params.token_supply]),
        ("StakeManager", [_address_of("VeriToken"), [stakes.solver, stakes.verifier, stakes.whistleblower], params.unbonding_delay]),
        ("JobMarket", [_address_of("VeriToken"), _address_of("StakeManager"), params.market]),
        ("DisputeGame", [_address_of("JobMarket"), params.game]),
        ("AvailabilityCourt", [_address_of("JobMarket"), params.court]),
        ("KeyRegistry", [_address_of("StakeManager")]),
        ("SealedJobs", [_address_of("JobMarket"), _address_of("KeyRegistry"), params.key_window]),
        ("DilocoJobs", [_address_of("JobMarket"), params.diloco]),
    ]


def _seed_jackpot(client: ChainClient, signer: Signer, token: str, market: str, seed: int) -> None:
    """Tops the jackpot up to ``seed`` tokens from the deployer (approve + fundJackpot); sends nothing
    when it already holds that much."""
    jobs = JobMarket(client, market, signer)
    missing = seed - jobs.jackpot()
    if missing <= 0:
        return
    VeriToken(client, token, signer).approve(market, missing)
    jobs.fund_jackpot(missing)
    log.info("jackpot seeded with %d base units", missing)


def deploy_protocol(
    client: ChainClient,
    signer: Signer,
    params: DeployParams,
    book_dir: Path,
    *,
    force: bool = False,
) -> AddressBook:
    """Deploy and wire the protocol unless this chain's book already points at live code."""
    path = book_path(book_dir, client.chain_id)
    plan = _plan(params)
    if path.exists() and not force:
        existing = AddressBook.load(path)
        lacking = [name for name, _ in plan if name not in existing.contracts]
        if existing.chain_id == client.chain_id and not lacking and not existing.missing_code(client):
            log.info("protocol already deployed on chain %d (address book %s)", client.chain_id, path)
            return existing
        if lacking:
            log.warning("address book %s has no %s: redeploying", path, ", ".join(lacking))
        else:
            log.warning("address book %s points at no code on this chain: redeploying", path)

    placeholder = Address("0x" + "00" * 20)
    for name, args in plan:  # check every argument against the compiled ABI before sending anything
        encode_constructor(name, [placeholder if callable(a) else a for a in args])

    deployed: dict[str, DeployedContract] = {}

    def record(name: str, address: Address, receipt: Receipt) -> Address:
        deployed[name] = DeployedContract(address=address, txHash=receipt.tx_hash, block=receipt.block_number)
        return address

    for name, args in plan:
        values = [a(deployed) if callable(a) else a for a in args]
        record(name, *_deploy(client, signer, name, values))
    protocols = [deployed[n].address for n in ("JobMarket", "DisputeGame", "AvailabilityCourt", "SealedJobs", "DilocoJobs")]
    StakeManager(client, deployed["StakeManager"].address, signer).authorize(protocols)
    JobMarket(client, deployed["JobMarket"].address, signer).set_dispute_game(deployed["DisputeGame"].address)
    log.info("wired: StakeManager authorized JobMarket, DisputeGame, AvailabilityCourt, SealedJobs and DilocoJobs; JobMarket's dispute game set")
    _seed_jackpot(client, signer, deployed["VeriToken"].address, deployed["JobMarket"].address, params.jackpot_seed)

    book = AddressBook(
        chainId=client.chain_id,
        deployer=signer.address,
        deployBlock=min(c.block for c in deployed.values()),
        contracts=deployed,
        params=params.to_json(),
    )
    book.save(path)
    log.info("address book written to %s", path)
    return book
