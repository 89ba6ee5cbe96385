"""The deployer: idempotency, stale address books, parameters checked against the ABI, wiring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_utils import to_checksum_address

from core.address_book import AddressBook
from core.contracts import Protocol, Role
from core.errors import AddressBookError, ConfigError
from deploy.deployer import DeployParams, deploy_protocol
from deploy.devnet import Devnet


def test_deployed_protocol_is_wired_and_reads_its_parameters_from_chain(devnet: Devnet) -> None:
    proto = devnet.protocol()
    params = DeployParams.devnet()
    assert proto.stakes.is_protocol(proto.market.address) and proto.stakes.wired()
    assert all(proto.stakes.is_protocol(c.address) for c in (proto.game, proto.court, proto.sealed_jobs, proto.diloco))
    assert not proto.stakes.is_protocol(proto.keys.address)  # it only reads stakes
    assert proto.sealed_jobs.key_window() == params.key_window
    assert proto.diloco.params().committee_size == params.diloco["committeeSize"]
    assert proto.diloco.market() == proto.market.address and proto.diloco.token() == proto.token.address
    assert proto.market.token() == proto.token.address == proto.stakes.token()
    assert proto.market.stake_manager() == proto.stakes.address
    assert proto.stakes.min_stake(Role.SOLVER) == params.min_stakes.solver
    assert proto.stakes.unbonding_delay() == params.unbonding_delay
    assert proto.market.params().challenge_window == params.market["challengeWindow"]
    assert proto.token.total_supply() == params.token_supply
    onchain = proto.market.params()
    assert (onchain.jackpot_tax_bps, onchain.jackpot_share_bps) == (params.market["jackpotTaxBps"], params.market["jackpotShareBps"])
    assert (onchain.forced_error_rate_bps, onchain.probe_count) == (params.market["forcedErrorRateBps"], params.market["probeCount"])


def test_deployment_seeds_the_jackpot(devnet: Devnet, tmp_path: Path) -> None:
    params = DeployParams.devnet()
    assert params.jackpot_seed == 1000 * 10**18
    assert devnet.protocol().market.jackpot() == params.jackpot_seed
    book = deploy_protocol(devnet.client, devnet.deployer, params, tmp_path)
    proto = Protocol.connect(devnet.client, book)
    assert proto.market.jackpot() == params.jackpot_seed
    assert proto.token.balance_of(proto.market.address) == params.jackpot_seed  # no job yet: all of it is the pool
    (funded,) = [e for e in proto.market.events("JackpotFunded", book.deploy_block) if e.args["from"] == devnet.deployer.address]
    assert funded.args["amount"] == funded.args["jackpot"] == params.jackpot_seed
    unseeded = DeployParams.model_validate({**params.to_json(), "jackpotSeed": 0})
    bare = deploy_protocol(devnet.client, devnet.deployer, unseeded, tmp_path / "bare")
    assert Protocol.connect(devnet.client, bare).market.jackpot() == 0


def test_redeploy_with_a_live_address_book_sends_nothing(devnet: Devnet, tmp_path: Path) -> None:
    book = deploy_protocol(devnet.client, devnet.deployer, DeployParams.devnet(), tmp_path)
    nonce = devnet.client.w3.eth.get_transaction_count(to_checksum_address(devnet.deployer.address))
    again = deploy_protocol(devnet.client, devnet.deployer, DeployParams.devnet(), tmp_path)
    assert again == book == AddressBook.load(tmp_path / f"{devnet.client.chain_id}.json")
    assert devnet.client.w3.eth.get_transaction_count(to_checksum_address(devnet.deployer.address)) == nonce
    forced = deploy_protocol(devnet.client, devnet.deployer, DeployParams.devnet(), tmp_path, force=True)
    assert forced.address("JobMarket") != book.address("JobMarket")


def test_a_stale_address_book_is_replaced(devnet: Devnet, tmp_path: Path) -> None:
    book = deploy_protocol(devnet.client, devnet.deployer, DeployParams.devnet(), tmp_path)
    stale = book.model_copy(update={"contracts": {**book.contracts, "JobMarket": book.contracts["JobMarket"].model_copy(update={"address": "0x" + "ab" * 20})}})
    path = tmp_path / f"{book.chain_id}.json"
    stale.save(path)
    with pytest.raises(AddressBookError, match="stale"):
        AddressBook.for_chain(tmp_path, devnet.client)
    fresh = deploy_protocol(devnet.client, devnet.deployer, DeployParams.devnet(), tmp_path)
    assert not fresh.missing_code(devnet.client)
    assert Protocol.connect(devnet.client, AddressBook.for_chain(tmp_path, devnet.client)).market.job_count() == 0


def test_address_book_errors_are_clear(tmp_path: Path, devnet: Devnet) -> None:
    with pytest.raises(AddressBookError, match="deploy first"):
        AddressBook.load(tmp_path / "1.json")
    (tmp_path / "2.json").write_text(json.dumps({"chainId": 2}))
    with pytest.raises(AddressBookError, match="malformed"):
        AddressBook.load(tmp_path / "2.json")
    other = devnet.book.model_copy(update={"chain_id": 5})
    with pytest.raises(AddressBookError, match="chain 5"):
        other.check(devnet.client)


def test_parameters_must_match_the_compiled_struct(devnet: Devnet, tmp_path: Path) -> None:
    raw = DeployParams.devnet().to_json()
    raw["market"]["notAField"] = 1
    bad = DeployParams.model_validate(raw)
    nonce = devnet.client.w3.eth.get_transaction_count(to_checksum_address(devnet.deployer.address))
    with pytest.raises(ConfigError, match="notAField"):
        deploy_protocol(devnet.client, devnet.deployer, bad, tmp_path)
    # checked before anything is sent: no transaction, no book
    assert not (tmp_path / f"{devnet.client.chain_id}.json").exists()
    assert devnet.client.w3.eth.get_transaction_count(to_checksum_address(devnet.deployer.address)) == nonce


def test_parameter_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        DeployParams.load(tmp_path / "nope.json")
    (tmp_path / "p.json").write_text("[1, 2")
    with pytest.raises(ConfigError, match="not valid JSON"):
        DeployParams.load(tmp_path / "p.json")
    raw = DeployParams.devnet().to_json()
    raw["minStakes"]["solver"] = 0
    (tmp_path / "p.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="minStakes.solver"):
        DeployParams.load(tmp_path / "p.json")
    for window in (0, 365 * 86_400 + 1):
        raw = DeployParams.devnet().to_json()
        raw["keyWindow"] = window
        (tmp_path / "p.json").write_text(json.dumps(raw))
        with pytest.raises(ConfigError, match="keyWindow"):
            DeployParams.load(tmp_path / "p.json")
    for seed, message in ((-1, "jackpotSeed"), (DeployParams.devnet().token_supply + 1, "exceeds tokenSupply")):
        raw = DeployParams.devnet().to_json()
        raw["jackpotSeed"] = seed
        (tmp_path / "p.json").write_text(json.dumps(raw))
        with pytest.raises(ConfigError, match=message):
            DeployParams.load(tmp_path / "p.json")
