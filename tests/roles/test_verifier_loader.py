"""The verifier's view of its forced seed and its draws, read from a real anvil: the first start
commits a seed, a seed replaced on chain is rotated, and a draw carries the assign seed and the
commitment the market snapshotted (and whether our secret forces the job)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.contracts import Bytes32, Role
from core.dispute import ZERO32
from deploy.devnet import Devnet
from proofs.probes import is_forced
from rolebase.watchers import MarketWatcher
from tests.chain.test_lifecycle import MANIFEST, MODEL, ROOT, post, stake
from verifier.loader import VerifierLoader
from verifier.policy import Draw, SeedView, seed_moves
from verifier.responder import VerifierResponder
from verifier.state import VerifierDb

if TYPE_CHECKING:
    from tests.conftest import Parties


def test_the_seed_is_committed_rotated_and_snapshotted_by_a_draw(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol(parties.verifier)
    me = parties.verifier.address
    db = VerifierDb(tmp_path / "verifier" / "state.sqlite")
    loader = VerifierLoader(proto, MarketWatcher(proto.market, proto.book.deploy_block), db, me)
    responder = VerifierResponder(proto, db, None, None, me, None)  # type: ignore[arg-type]  # only forced-seed actions here

    def settle_seed() -> SeedView:
        seed = loader.load().seed
        assert seed is not None
        for move in seed_moves(seed):
            responder.perform(move)
        after = loader.load().seed
        assert after is not None and seed_moves(after) == []  # one round is enough
        return after

    assert loader.load().seed == SeedView(ZERO32, (), current_committed=False)
    first = settle_seed()
    assert first.on_chain == first.current and first.current_committed and len(first.kept) == 1

    stake(proto, parties.solver, Role.SOLVER)
    stake(proto, parties.verifier, Role.VERIFIER)
    job_id, _ = post(proto, parties.submitter)
    solver = proto.with_signer(parties.solver).market
    solver.claim(job_id)
    solver.commit(job_id, ROOT, 9, MODEL, MANIFEST)
    devnet.chain.mine(2)
    (assigned,) = proto.market.decode_events(solver.assign_verifier(job_id), "VerifierAssigned")
    view = loader.load()
    (assignment,) = view.assignments
    seed = Bytes32(bytes(assigned.args["assignSeed"]))
    secret = db.forced_secret(first.kept[0])
    assert secret is not None and assigned.args["forcedCommitment"] == first.kept[0]
    rate = proto.market.params().forced_error_rate_bps
    assert assignment.draw == Draw(seed, first.kept[0], is_forced(secret, seed, rate))
    assert view.seed is not None and view.seed.snapshotted == {first.kept[0]}

    proto.market.commit_forced_seed(Bytes32(b"\x09" * 32))  # the seed on chain is not ours any more (as after a concession)
    rotated = settle_seed()
    assert rotated.kept[0] == first.kept[0] and rotated.on_chain == rotated.current != first.current  # the old one kept: job live


def test_the_rivals_are_the_other_staked_verifiers_read_while_a_job_waits_for_its_draw(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol(parties.verifier)
    me = parties.verifier.address
    loader = VerifierLoader(proto, MarketWatcher(proto.market, proto.book.deploy_block), VerifierDb(tmp_path / "state.sqlite"), me)
    stake(proto, parties.solver, Role.SOLVER)  # another role: no rival
    stake(proto, parties.verifier, Role.VERIFIER)
    before = devnet.chain.snapshot()
    stake(proto, parties.verifier2, Role.VERIFIER)
    job_id, _ = post(proto, parties.submitter)
    assert loader.load().rivals == ()  # no job waits for a draw: nothing read
    solver = proto.with_signer(parties.solver).market
    solver.claim(job_id)
    solver.commit(job_id, ROOT, 9, MODEL, MANIFEST)
    assert loader.load().rivals == (parties.verifier2.address,)
    stake(proto, parties.verifier2, Role.VERIFIER)  # staked again: still one rival
    assert loader.load().rivals == (parties.verifier2.address,)
    devnet.chain.mine(2)
    solver.assign_verifier(job_id)
    assert loader.load().rivals == ()  # drawn: nobody waits

    devnet.chain.revert(before)  # the chain went back: read again, the stake on the abandoned branch gone
    stake(proto, parties.solver2, Role.VERIFIER)  # a block the first read had passed
    job_id, _ = post(proto, parties.submitter)
    solver.claim(job_id)
    solver.commit(job_id, ROOT, 9, MODEL, MANIFEST)
    assert loader.load().rivals == (parties.solver2.address,)
