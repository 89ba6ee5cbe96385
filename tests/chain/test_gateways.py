"""Gateways announced on chain (StakeManager.announce, rolebase.gateways) on anvil: the round trip and its
bound, which announcements a fetcher takes (accounts with stake or a posted job, a multi-party one
included, ranked by stake and escrow, not its own), a flood of unstaked one-wei jobs that cannot push a staked solver's gateway
off the list, and a store that finds content through them with no --peer at all."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.chain import Signer, Wei
from core.contracts import JobTerms, Role
from core.errors import ConfigError
from core.reverts import ContractRevert
from core.storage import LocalStore
from core.storage.gateway import GatewayServer
from core.storage.peers import MAX_PEERS
from deploy.devnet import Devnet
from proofs.keccak import keccak
from rolebase.cli import open_store
from rolebase.gateways import AnnouncedGateways, announce_gateway
from tests.chain.test_lifecycle import REWARD, post, stake

if TYPE_CHECKING:
    from tests.conftest import Parties


def test_an_announcement_round_trips_bounded_and_idempotent(devnet: Devnet, parties: Parties) -> None:
    p = devnet.protocol(parties.submitter)
    me = parties.submitter.address
    receipt = p.stakes.announce("http://10.0.0.2:8080")
    (event,) = p.stakes.decode_events(receipt, "GatewayAnnounced")
    assert event.args == {"account": me, "url": "http://10.0.0.2:8080"}
    assert devnet.protocol().stakes.gateway_of(me) == "http://10.0.0.2:8080"
    longest = p.stakes.max_gateway_url_bytes()
    with pytest.raises(ContractRevert) as refused:
        p.stakes.announce("h" * (longest + 1))
    assert refused.value.error_name == "GatewayUrlTooLong" and refused.value.values == {"length": longest + 1, "maxLength": longest}
    block = devnet.client.block_number()
    assert announce_gateway(p, me, "10.0.0.2:8080", None) == "http://10.0.0.2:8080"  # the chain holds it: no transaction
    with pytest.raises(ConfigError, match="--serve 0.0.0.0:8080 listens on every address and names none to announce: give --announce"):
        announce_gateway(p, me, "0.0.0.0:8080", None)  # unreachable from other hosts: refused
    assert devnet.client.block_number() == block
    assert announce_gateway(p, me, "0.0.0.0:8080", "http://10.0.0.3:8088") == "http://10.0.0.3:8088"  # the address others reach
    assert p.stakes.gateway_of(me) == "http://10.0.0.3:8088"
    announce_gateway(p, me, "127.0.0.1:8080", None)  # loopback is fine on a devnet (LOCAL_CHAIN_IDS)
    assert p.stakes.gateway_of(me) == "http://127.0.0.1:8080"


def test_a_fetcher_takes_the_gateways_of_staked_accounts_and_submitters_only(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    for who, url in ((parties.outsider, "http://10.0.0.9:8080"), (parties.verifier, "http://10.0.0.4:8080"), (parties.submitter, "http://10.0.0.2:8080")):
        devnet.protocol(who).stakes.announce(url)
    devnet.protocol(parties.solver).stakes.announce("not a url")
    assert AnnouncedGateways(lambda: proto)() == []  # nobody holds stake or posted a job yet
    stake(proto, parties.verifier, Role.VERIFIER)
    stake(proto, parties.solver, Role.SOLVER)
    post(proto, parties.submitter, reward=2 * REWARD)
    assert proto.stakes.min_stake(Role.VERIFIER) < 2 * REWARD, "the submitter's escrow outranks the verifier's stake"
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.2:8080", "http://10.0.0.4:8080"]  # not the outsider's, not a malformed one
    devnet.protocol(parties.verifier).stakes.announce("http://10.0.0.5:8080")  # moved: its rank is its stake's
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.2:8080", "http://10.0.0.5:8080"]
    assert AnnouncedGateways(lambda: proto, own="http://10.0.0.2:8080")() == ["http://10.0.0.5:8080"]
    stake(proto, parties.verifier, Role.VERIFIER, 2 * REWARD)  # more at stake than the submitter's escrow
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.5:8080", "http://10.0.0.2:8080"]
    devnet.protocol(parties.verifier).stakes.announce("")  # withdrawn
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.2:8080"]


def test_a_multi_party_submitter_s_gateway_is_taken_ranked_by_its_job_s_funds(devnet: Devnet, parties: Parties) -> None:
    """Issue 28: a submitter that only posted a multi-party job holds no stake and no JobMarket job, yet
    its gateway alone serves the job's document, spec, dataset and G_0 at first: it is taken, ranked by
    the funds its unfinished job holds."""
    proto = devnet.protocol()
    devnet.protocol(parties.submitter).stakes.announce("http://10.0.0.2:8080")
    stake(proto, parties.verifier, Role.VERIFIER)
    devnet.protocol(parties.verifier).stakes.announce("http://10.0.0.4:8080")
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.4:8080"]
    e18 = 10**18
    terms = JobTerms(b"\x01" * 32, b"\x02" * 32, b"\x03" * 32, 2, 2, 1, 600, 900, 50 * e18, 5 * e18, 40 * e18, 10 * e18, 100 * e18)
    sub = devnet.protocol(parties.submitter)
    sub.token.approve(sub.diloco.address, sub.diloco.escrow_for(terms))
    job_id, _ = sub.diloco.post(terms)
    assert sub.diloco.get_job(job_id).funds > proto.stakes.min_stake(Role.VERIFIER), "its funds outrank the verifier's stake"
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.2:8080", "http://10.0.0.4:8080"]


def test_a_flood_of_unstaked_announcements_cannot_push_a_staked_solvers_gateway_off(devnet: Devnet, parties: Parties) -> None:
    """Issue 26: 33 one-wei jobs, each announcing a gateway, pushed an honest solver's off every
    daemon's list (the 32 newest were kept). Ranked by stake, the solver's stays, and first."""
    proto = devnet.protocol()
    stake(proto, parties.solver, Role.SOLVER)
    devnet.protocol(parties.solver).stakes.announce("http://10.0.0.7:8080")
    floods = [Signer.from_private_key(keccak(b"flood %d" % i)) for i in range(MAX_PEERS + 1)]
    funder = proto.with_signer(parties.outsider)
    for i, flood in enumerate(floods):
        devnet.chain.set_balance(flood.address, Wei(10**18))
        funder.token.transfer(flood.address, 10)
        post(proto, flood, reward=1, fee=1)  # one wei of reward, one of fee, and the jackpot tax
        devnet.protocol(flood).stakes.announce(f"http://10.9.{i}.1:8080")
    listed = AnnouncedGateways(lambda: proto)()
    assert len(listed) == MAX_PEERS
    assert listed[0] == "http://10.0.0.7:8080", "the staked solver's gateway ranks first, announced first or not"


def test_content_is_found_through_an_announced_gateway(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol()
    served = LocalStore(tmp_path / "solver")
    cid = served.put(b"a checkpoint on another host")
    stake(proto, parties.solver, Role.SOLVER)
    with GatewayServer(served) as gateway:
        announce_gateway(devnet.protocol(parties.solver), parties.solver.address, gateway.address, None)
        store = open_store(store_dir=None, ipfs_api=None, data_dir=tmp_path / "verifier", discover=AnnouncedGateways(lambda: proto))
        assert store.get(cid, 100) == b"a checkpoint on another host"
