"""Gateways announced on chain (StakeManager.announce, rolebase.gateways) on anvil: the round trip and its
bound, which announcements a fetcher takes (accounts with stake or a posted job, newest last, not its
own), and a store that finds content through them with no --peer at all."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.contracts import Role
from core.reverts import ContractRevert
from core.storage import LocalStore
from core.storage.gateway import GatewayServer
from deploy.devnet import Devnet
from rolebase.cli import open_store
from rolebase.gateways import AnnouncedGateways, announce_gateway
from tests.chain.test_lifecycle import post, stake

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
    announce_gateway(p, me, "http://10.0.0.2:8080")  # the chain holds it: no transaction
    announce_gateway(p, me, "http://0.0.0.0:8080")  # unreachable from other hosts: not announced
    assert devnet.client.block_number() == block
    assert p.stakes.gateway_of(me) == "http://10.0.0.2:8080"


def test_a_fetcher_takes_the_gateways_of_staked_accounts_and_submitters_only(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    for who, url in ((parties.outsider, "http://10.0.0.9:8080"), (parties.verifier, "http://10.0.0.4:8080"), (parties.submitter, "http://10.0.0.2:8080")):
        devnet.protocol(who).stakes.announce(url)
    devnet.protocol(parties.solver).stakes.announce("not a url")
    assert AnnouncedGateways(lambda: proto)() == []  # nobody holds stake or posted a job yet
    stake(proto, parties.verifier, Role.VERIFIER)
    stake(proto, parties.solver, Role.SOLVER)
    post(proto, parties.submitter)
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.4:8080", "http://10.0.0.2:8080"]  # not the outsider's, not a malformed one
    devnet.protocol(parties.verifier).stakes.announce("http://10.0.0.5:8080")  # moved: the newest comes last
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.2:8080", "http://10.0.0.5:8080"]
    assert AnnouncedGateways(lambda: proto, own="http://10.0.0.2:8080")() == ["http://10.0.0.5:8080"]
    devnet.protocol(parties.verifier).stakes.announce("")  # withdrawn
    assert AnnouncedGateways(lambda: proto)() == ["http://10.0.0.2:8080"]


def test_content_is_found_through_an_announced_gateway(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol()
    served = LocalStore(tmp_path / "solver")
    cid = served.put(b"a checkpoint on another host")
    stake(proto, parties.solver, Role.SOLVER)
    with GatewayServer(served) as gateway:
        announce_gateway(devnet.protocol(parties.solver), parties.solver.address, gateway.url)
        store = open_store(store_dir=None, ipfs_api=None, data_dir=tmp_path / "verifier", discover=AnnouncedGateways(lambda: proto))
        assert store.get(cid, 100) == b"a checkpoint on another host"
