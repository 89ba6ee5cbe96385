"""Report games on anvil: a whistleblower disputes a probe of a passing report, the job's VERIFIER
defends it (``Game.defender`` is the defender), over the real training states of the arena's job.

* a lazy verifier (its probe is the segment's end checkpoint, not the state at the probe's step)
  that stays silent, or bisects with made-up states, loses its whole bond to the whistleblower and
  the job goes back to Committed for a new verifier;
* an honest verifier defends its true probe through the referees and keeps its report;
* a forced verifier concedes by revealing its secret: the whistleblower is paid from the jackpot,
  the verifier keeps bond and fee, the challenge window resumes (on a market forced at 100 %).

``core.dispute`` (opening_on_report, next_turn, isolated_step) drives every move, so these tests
also check the helpers against the contract for a defender that is not the solver.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from eth_utils import keccak

from core.contracts import Bytes32, GameStatus, JobState, SettleReason
from core.dispute import Action, Actor, isolated_step, next_turn
from core.reverts import revert_class
from core.storage.local import LocalStore
from deploy.deployer import DeployParams
from deploy.devnet import start_devnet
from proofs.checkpoint import state_hash
from proofs.probes import forced_commitment, forced_hash

from .arena import FEE, REWARD, Arena, K, TrainedJob


def _secret(verifier: str) -> bytes:
    """Each verifier's forced-error secret on the forced market."""
    return keccak(b"forced secret/" + bytes.fromhex(verifier[2:]))


@pytest.mark.parametrize("defence", ["silent", "random"])
def test_a_lazy_verifier_loses_its_bond_and_the_job_gets_a_new_verifier(arena: Arena, defence: str) -> None:
    honest = arena.trained.honest
    lazy = lambda _i, segment, _step: state_hash(honest[(segment + 1) * K])  # noqa: E731 - the end checkpoint, copied
    job_id, _, cids = arena.commit_job(honest, by_verifier=False, probe_hash=lazy)
    market, game_api = arena.base.market, arena.base.game
    verifier = market.get_job(job_id).verifier
    probe = arena.probes[job_id].probe(0)
    before = arena.wealth()

    played = arena.open_on_report(job_id, 0, honest)
    game = game_api.get_game(played.game_id)
    assert game.on_report and game.defender == verifier and game.challenger == arena.whistleblower.address
    assert (game.segment, game.steps, game.lo, game.hi) == (probe.segment, probe.step, 0, probe.step)
    assert bytes(game.disputed_hash) == probe.state_hash
    assert market.get_job(job_id).state is JobState.DISPUTED
    turn = next_turn(game, arena.params, arena.net.client.timestamp())
    if probe.step > 1:
        assert (turn.action, turn.actor, turn.step) == (Action.POST_MIDPOINT, Actor.SOLVER, game_api.next_midpoint(played.game_id))

    arena.bisect(played, honest, lambda i: defence, lambda i: "truth")
    game = game_api.get_game(played.game_id)
    if game.status is GameStatus.ISOLATED:  # made-up midpoints (or a one-step probe): to the referees
        task = isolated_step(game, K, cids)  # every answer disagreed: the step from the checkpoint itself
        assert (task.step, task.global_step, task.pre_cid) == (0, probe.segment * K, cids[probe.segment])
        arena.arbitrate(played, cids)
    game = game_api.get_game(played.game_id)
    assert game.status is GameStatus.CHALLENGER_WON

    v_bond = market.verifier_bond(REWARD)
    fees = arena.params.referee_fee * played.majority_referees
    after = arena.wealth()
    assert after[verifier] - before[verifier] == -v_bond, "an unforced wrong probe costs the whole verifier bond"
    assert after[arena.whistleblower.address] - before[arena.whistleblower.address] == v_bond - fees
    assert after[arena.solver.address] == before[arena.solver.address], "the solver is not at fault"
    assert sum(after.values()) == sum(before.values()) and after["DisputeGame"] == 0
    (overturned,) = market.events("ReportOverturned", arena.net.book.deploy_block, jobId=job_id)
    assert (overturned.args["verifier"], overturned.args["slashed"]) == (verifier, v_bond)

    job = market.get_job(job_id)
    assert job.state is JobState.COMMITTED
    arena.net.chain.mine(max(0, job.anchor_block + 2 - arena.net.client.block_number()))
    arena.proto(arena.outsider).market.assign_verifier(job_id)
    assert market.get_job(job_id).verifier not in (verifier, arena.solver.address)
    assert market.seal_of(job_id, arena.net.book.deploy_block) is None, "the new verifier has not reported"


def test_an_honest_verifier_defends_its_probe_through_the_referees(arena: Arena) -> None:
    honest = arena.trained.honest
    job_id, _, cids = arena.commit_job(honest, by_verifier=False)
    market = arena.base.market
    verifier = market.get_job(job_id).verifier
    window_left = market.get_job(job_id).deadline - arena.net.client.timestamp()
    before = arena.wealth()

    played = arena.open_on_report(job_id, 0, honest)
    frozen = market.get_job(job_id).challenge_left  # the window's remainder, paused while the game runs
    assert 0 < frozen <= window_left
    arena.bisect(played, honest, lambda i: "trace", lambda i: "disagree")
    game = arena.base.game.get_game(played.game_id)
    assert game.status is GameStatus.ISOLATED and game.defender == verifier
    task = isolated_step(game, K, cids)
    assert task.global_step == game.segment * K and task.post_hash == game.disputed_hash
    arena.arbitrate(played, cids)
    game = arena.base.game.get_game(played.game_id)
    assert game.status is GameStatus.DEFENDER_WON, "the referees side with the verifier's true state"

    after = arena.wealth()
    fees = arena.params.referee_fee * played.majority_referees
    assert after[verifier] - before[verifier] == arena.params.challenge_bond - fees
    assert after[arena.whistleblower.address] - before[arena.whistleblower.address] == -arena.params.challenge_bond
    job = market.get_job(job_id)
    assert job.state is JobState.VERIFIED, "the report stands and its challenge window resumes"
    (resumed,) = market.events("ChallengeWindowResumed", arena.net.book.deploy_block, jobId=job_id)
    assert job.deadline == arena.net.client.timestamp(resumed.block_number) + frozen  # with what it had left
    arena.finish(played)
    assert market.get_job(job_id).state is JobState.FINALIZED


def test_a_probe_not_under_the_seal_cannot_open_a_report_game(arena: Arena) -> None:
    honest = arena.trained.honest
    job_id, _, _ = arena.commit_job(honest, by_verifier=False)
    tree = arena.probes[job_id]
    real = tree.probe(0)
    arena.probes[job_id] = type(tree)([type(real)(real.index, real.segment, real.step, forced_hash(real.state_hash))])
    with pytest.raises(revert_class("InvalidProbe")):
        arena.open_on_report(job_id, 0, honest)  # a leaf the verifier never committed


# ------------------------------------------------------------------ forced errors


@pytest.fixture(scope="module")
def forced_arena(trained: TrainedJob, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    """A market whose seeded verifiers are forced on every job (forcedErrorRateBps = 100 %), every
    verifier seeded with its own secret (:func:`_secret`)."""
    base = DeployParams.devnet()
    params = base.model_copy(update={"market": {**base.market, "forcedErrorRateBps": 10_000}})
    with start_devnet(book_dir=tmp_path_factory.mktemp("forced-book"), accounts=8, params=params) as net:
        arena = Arena(net, LocalStore(tmp_path_factory.mktemp("forced-store")), trained)
        arena.stake_everyone()
        for v in arena.verifiers:
            arena.proto(v).market.commit_forced_seed(forced_commitment(_secret(v.address), v.address))
        yield arena


def test_a_forced_verifier_concedes_and_the_whistleblower_wins_the_jackpot_share(forced_arena: Arena) -> None:
    arena = forced_arena
    honest = arena.trained.honest

    def forced_probe(i: int, segment: int, step: int) -> Bytes32:
        true = state_hash(honest[segment * K + step])
        return forced_hash(true) if i == 0 else true

    job_id, _, _ = arena.commit_job(honest, by_verifier=False, probe_hash=forced_probe)
    market = arena.base.market
    verifier = market.get_job(job_id).verifier
    secret = _secret(verifier)
    seal = market.seal_of(job_id, arena.net.book.deploy_block)
    assert seal is not None and seal.forced_commitment == forced_commitment(secret, verifier)
    assert market.is_forced(secret, verifier, seal)
    jackpot = market.jackpot()
    payout = jackpot * market.params().jackpot_share_bps // 10_000
    before = arena.wealth()

    played = arena.open_on_report(job_id, 0, honest)
    defender = arena.proto(arena.by_address[verifier]).game
    with pytest.raises(revert_class("NotForced")):
        defender.concede_forced(played.game_id, b"\x09" * 32, seal)
    with pytest.raises(revert_class("NotAuthorized")):
        arena.proto(arena.whistleblower).game.concede_forced(played.game_id, secret, seal)
    receipt = defender.concede_forced(played.game_id, secret, seal)
    (settled,) = arena.base.game.decode_events(receipt, "DisputeSettled")
    assert SettleReason(settled.args["reason"]) is SettleReason.FORCED_ERROR
    assert (settled.args["winner"], settled.args["payout"]) == (arena.whistleblower.address, payout + arena.params.challenge_bond)
    assert arena.base.game.get_game(played.game_id).status is GameStatus.CHALLENGER_WON

    after = arena.wealth()
    assert after[arena.whistleblower.address] - before[arena.whistleblower.address] == payout
    assert after[verifier] == before[verifier], "a forced verifier keeps its bond"
    assert market.jackpot() == jackpot - payout and after["DisputeGame"] == 0
    assert sum(after.values()) == sum(before.values())
    assert market.forced_seed_of(verifier).commitment == bytes(32), "the revealed secret is spent"
    assert market.get_job(job_id).state is JobState.VERIFIED, "a forced error changes no verdict"
    arena.finish(played)
    assert market.get_job(job_id).state is JobState.FINALIZED
    assert arena.wealth()[verifier] - before[verifier] == FEE
