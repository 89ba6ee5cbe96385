"""A multi-party job on a real anvil (issue 28): DilocoJobs, its inner jobs on the JobMarket, and the
engine's judgement of a round (``proofs.diloco.judge_round`` / ``check_round``) deciding every move.

Three parties train, one of them commits a copy of another's contribution; the drawn aggregator
commits an aggregate that includes the copy; a challenger, then each referee of the committee, runs
``check_round`` on the committed inputs; the aggregate is voted wrong, its aggregator slashed, and a
second aggregator's right aggregate (the copier called wrong) finalizes the round: the copier loses its
slot bond and its slot, the two others are paid, and round 1 runs with them to the end. Every token is
accounted for. Content (states, checkpoints, contributions) is kept in a dict by CID here: the content
network carries it in the daemons (docs/multiparty.md); the inner traces are made-up states under a
real manifest of made-up losses (in a store), verified by a report as in tests/chain/test_lifecycle.py
(their replay is any job's, tests/proofs/test_diloco.py). The finished job is then read back as
``submit multiparty-show`` and the dashboard show it (``submitter.multiparty_report``): each round's paid
and cut-out slots, each slot's pay, each party's totals and the per-round curve.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pytest
import torch
from eth_utils import keccak

from core.address_book import book_path
from core.chain import Receipt, Signer
from core.cid import cid_to_digest
from core.contracts import (
    Ballot,
    Bytes32,
    JobId,
    JobState,
    JobTerms,
    MultipartyPhase,
    Protocol,
    Role,
    court_commitment,
)
from core.errors import TransientRPCError
from core.probe import Probe
from core.reverts import revert_class
from core.storage import LocalStore, file_cid
from deploy.build import build
from deploy.devnet import Devnet, start_devnet
from proofs.checkpoint import encode_checkpoint, state_hash
from proofs.diloco import (
    MultipartyConfig,
    OuterState,
    PartyRound,
    aggregate,
    check_round,
    contribution_hash,
    contribution_of,
    judge_round,
    residual_after,
)
from proofs.manifest import CheckpointEntry, Manifest, write_manifest
from proofs.merkle import TraceTree
from rolebase.amounts import show_tokens
from rolebase.multiparty_duty import MultipartyDuty
from rolebase.watchers import MarketWatcher
from submitter.curve import committed_curve
from submitter.multiparty_report import multiparty_report, read_facts
from veritrain.dashboard.index import ChainIndex
from veritrain.dashboard.views import Views

E18 = 10**18
STAMP = "0x" + "cd" * 32
SHAPES = {"a.weight": (6, 9), "a.bias": (6,), "b.weight": (2, 6)}
INNER_REWARD, INNER_FEE = 20 * E18, 2 * E18
CONTRIBUTION_REWARD, AGGREGATOR_FEE, SLOT_BOND = 30 * E18, 5 * E18, 60 * E18
WORK_WINDOW, VERIFY_WINDOW = 900, 3_600
PARTIES = 3
Residual = Mapping[str, torch.Tensor] | None


class Net:
    """A devnet with a submitter, three parties, five verifiers and a challenger, all staked."""

    def __init__(self, devnet: Devnet, store_dir: Path) -> None:
        self.devnet = devnet
        self.store = LocalStore(store_dir)  # the inner traces' manifests
        accounts = devnet.accounts
        self.submitter, self.parties, self.verifiers, self.challenger = accounts[0], accounts[1:4], accounts[4:9], accounts[9]
        self.by_address = {a.address: a for a in accounts}
        self.proto = devnet.protocol()
        self.gas: dict[str, int] = {}  # the last receipt's gas of each DilocoJobs call, printed at the end

    def note(self, name: str, receipt: Receipt) -> Receipt:
        self.gas[name] = receipt.gas_used
        return receipt

    def p(self, who: Signer) -> Protocol:
        return self.proto.with_signer(who)

    def stake_everyone(self) -> None:
        for who, role, amount in [*((s, Role.SOLVER, 200 * E18) for s in self.parties), *((v, Role.VERIFIER, 200 * E18) for v in self.verifiers)]:
            p = self.p(who)
            p.token.approve(p.stakes.address, amount)
            p.stakes.stake(role, amount)

    def past(self, deadline: int) -> None:
        self.devnet.chain.increase_time(max(0, deadline - self.devnet.client.timestamp()) + 1)
        self.devnet.chain.mine(1)


@pytest.fixture(scope="module")
def staked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    build()
    with start_devnet(book_dir=tmp_path_factory.mktemp("deployments"), accounts=10) as devnet:
        net = Net(devnet, tmp_path_factory.mktemp("store"))
        net.stake_everyone()
        yield net


@pytest.fixture
def net(staked: Net) -> Iterator[Net]:
    snapshot = staked.devnet.chain.snapshot()
    try:
        yield staked
    finally:
        staked.devnet.chain.revert(snapshot)


def _tensors(seed: int, scale: float) -> dict[str, torch.Tensor]:
    rng = np.random.Generator(np.random.PCG64(seed))
    return {n: torch.from_numpy((rng.standard_normal(s) * scale).astype(np.float32)) for n, s in SHAPES.items()}


def _digest(data: bytes) -> bytes:
    return cid_to_digest(file_cid(data))


def _losses(round_: int, slot: int) -> tuple[float, ...]:
    """The mean training losses the party of ``slot`` commits for its inner trace of ``round_``: five
    segments of one step, each value exactly a float32."""
    return tuple(4.0 - round_ - 0.25 * i + 0.0625 * slot for i in range(5))


def _finish_inner(net: Net, inner: JobId, party: Signer, final: bytes, losses: tuple[float, ...]) -> None:
    """The party commits its inner trace (its last checkpoint ``final``; a manifest committing to
    ``losses`` in the store), a drawn verifier passes it and the job is finalized: the inner job's
    game, as any job's, decides nothing else here."""
    market = net.p(party).market
    net.store.put(final)  # served, and its state hash the trace's last leaf: what a judge's duty checks
    states = [Bytes32(keccak(b"state %d " % i + final)) for i in range(len(losses))] + [state_hash(final)]
    manifest = Manifest(
        spec_cid=str(file_cid(b"inner spec")),
        spec_hash="0x" + "ab" * 32,
        steps=len(losses),
        checkpoint_interval=1,
        root=TraceTree(states).root,
        checkpoints=tuple(CheckpointEntry(index=i, cid=str(file_cid(b"checkpoint %d " % i + final)), state_hash=h) for i, h in enumerate(states)),
        update_norms=(0.5,) * len(losses),
        losses=losses,
    )
    market.commit(inner, manifest.root, len(states), _digest(final), cid_to_digest(write_manifest(net.store.put, manifest)))
    net.devnet.chain.mine(2)
    drawn = net.p(net.challenger).market.decode_events(net.p(net.challenger).market.assign_verifier(inner), "VerifierAssigned")[0]
    verifier = net.by_address[drawn.args["verifier"]]
    seed, count = bytes(drawn.args["assignSeed"]), market.get_job(inner).checkpoint_count
    probes = [Probe(i, market.probe_segment(seed, i, count), i + 1, Bytes32(keccak(b"probe %d" % i))) for i in range(market.params().probe_count)]
    net.p(verifier).market.report(inner, True, keccak(b"report"), seed, bytes(drawn.args["forcedCommitment"]), probes)


def _run_round(
    net: Net, job_id: int, state: OuterState, cfg: MultipartyConfig, cheat: Mapping[int, int], residuals: Mapping[int, Residual] | None = None
) -> tuple[dict[int, PartyRound], list[JobId]]:
    """Every party in a slot begins, trains (a seeded step stands in for its H inner steps), commits
    its trace and its contribution (``cheat``: slot -> the slot whose contribution it copies; top-k:
    ``residuals``, what each slot's party came into the round with); every inner job is verified and
    finalized. Returns what the chain and the store hold of the round."""
    came_in = residuals or {}
    d = net.proto.diloco
    slots = [s for s in range(PARTIES) if int(d.party_of(job_id, s), 16) != 0]
    finals, inners = {}, {}
    for slot in slots:
        party = net.by_address[d.party_of(job_id, slot)]
        inner, receipt = net.p(party).diloco.begin(job_id, slot, keccak(b"inner spec %d %d" % (state.round, slot)))
        net.note("begin", receipt)
        step = _tensors(100 * state.round + slot, 0.05)
        finals[slot] = encode_checkpoint(6, {f"param.{n}": p - step[n] for n, p in state.params.items()}, STAMP)
        _finish_inner(net, inner, party, finals[slot], _losses(state.round, slot))
        inners[slot] = inner
    own = {s: contribution_of(state, finals[s], cfg, came_in.get(s))[0] for s in slots}
    committed = {s: own[cheat.get(s, s)] for s in slots}
    for slot in slots:
        party = net.by_address[d.party_of(job_id, slot)]
        net.note("contribute", net.p(party).diloco.contribute(job_id, slot, _digest(committed[slot]), contribution_hash(committed[slot])))
    net.past(max(net.proto.market.get_job(i).deadline for i in inners.values()))  # the inner jobs' challenge windows
    for inner in inners.values():
        net.p(net.challenger).market.finalize(inner)
        assert net.proto.market.get_job(inner).state is JobState.FINALIZED
    rounds = {s: PartyRound(committed[s], finals[s], spec_ok=True, verified=True, residual=came_in.get(s)) for s in slots}
    return rounds, list(inners.values())


def _draw_aggregator(net: Net, job_id: int) -> Signer:
    net.devnet.chain.mine(2)
    d = net.p(net.challenger).diloco
    (drawn,) = d.decode_events(net.note("drawAggregator", d.draw_aggregator(job_id)), "AggregatorDrawn")
    return net.by_address[drawn.args["aggregator"]]


def _vote(net: Net, job_id: int, case_id: int, judge: Callable[[], bool]) -> list[Signer]:
    """Each referee runs ``judge`` (True: the aggregate is right) and commits, then reveals, its vote."""
    members = [net.by_address[a] for a in net.proto.diloco.committee(job_id, case_id)]
    votes = {}
    for m in members:
        votes[m.address] = (judge(), secrets.token_bytes(32))
        net.note("commitVote", net.p(m).diloco.commit_vote(job_id, court_commitment(case_id, votes[m.address][0], votes[m.address][1], m.address)))
    for m in members:
        net.note("revealVote", net.p(m).diloco.reveal_vote(job_id, *votes[m.address]))
    return members


def test_a_copied_contribution_is_cut_out_a_wrong_aggregate_is_voted_down_and_the_job_finishes(net: Net, tmp_path: Path) -> None:
    proto, d = net.proto, net.proto.diloco
    cfg = MultipartyConfig(parties=PARTIES, rounds=2, inner_steps=5, block_size=16, quorum=2)
    state = OuterState.start(_tensors(1, 1.0))
    store = {_digest(state.to_bytes(STAMP)): state.to_bytes(STAMP)}
    g0 = state.to_bytes(STAMP)
    terms = JobTerms(
        keccak(b"the job's document"),
        state.state_hash(STAMP),
        _digest(g0),
        PARTIES,
        2,
        2,
        WORK_WINDOW,
        VERIFY_WINDOW,
        INNER_REWARD,
        INNER_FEE,
        CONTRIBUTION_REWARD,
        AGGREGATOR_FEE,
        SLOT_BOND,
    )
    escrow = d.escrow_for(terms)
    assert escrow == 2 * (PARTIES * (d.inner_escrow(INNER_REWARD, INNER_FEE) + CONTRIBUTION_REWARD) + AGGREGATOR_FEE)
    sub = net.p(net.submitter)
    before = proto.token.balance_of(net.submitter.address)
    sub.token.approve(d.address, escrow)
    job_id, receipt = sub.diloco.post(terms)
    net.note("post", receipt)
    assert proto.token.balance_of(d.address) == escrow
    for slot, party in enumerate(net.parties):
        net.note("join", net.p(party).diloco.join(job_id, slot))
        assert proto.stakes.stake_of(party.address, Role.SOLVER).locked == SLOT_BOND
        if slot == 0:
            with pytest.raises(revert_class("AlreadyParty")):
                net.p(party).diloco.join(job_id, 1)
    with pytest.raises(revert_class("SlotTaken")):
        net.p(net.challenger).diloco.join(job_id, 2)

    # Round 0: party 2 copies party 0's contribution.
    rounds, _ = _run_round(net, job_id, state, cfg, cheat={2: 0})
    net.past(d.get_job(job_id).deadline)
    net.note("closeRound (3 slots)", net.p(net.challenger).diloco.close_round(job_id))
    assert d.get_job(job_id).phase is MultipartyPhase.DRAWING

    # A lazy (or colluding) aggregator includes everyone.
    lazy = _draw_aggregator(net, job_id)
    assert lazy.address not in {p.address for p in (*net.parties, net.submitter)}
    everyone, _ = aggregate(state, {s: r.contribution for s, r in rounds.items()}, cfg)
    net.note("commitAggregate", net.p(lazy).diloco.commit_aggregate(job_id, everyone.state_hash(STAMP), _digest(everyone.to_bytes(STAMP)), 0b111, 0))
    reason = check_round(state, rounds, cfg, STAMP, everyone.state_hash(STAMP), 0b111, 0)
    assert reason is not None and "0x3 and 0x4" in reason  # what the challenger sees
    ch = net.p(net.challenger)
    deposit = d.params().challenge_deposit
    ch.token.approve(d.address, deposit)
    case_id, receipt = ch.diloco.challenge(job_id)
    net.note("challenge", receipt)
    net.devnet.chain.mine(2)
    net.note("drawCommittee (3 seats)", ch.diloco.draw_committee(job_id))
    members = _vote(net, job_id, case_id, lambda: check_round(state, rounds, cfg, STAMP, everyone.state_hash(STAMP), 0b111, 0) is None)
    assert {net.proto.diloco.ballot_of(case_id, m.address)[0] for m in members} == {Ballot.REVEALED_DEFENDER_WRONG}
    lazy_staked = proto.stakes.stake_of(lazy.address, Role.VERIFIER).staked
    challenger_wallet = proto.token.balance_of(net.challenger.address)
    net.note("settleChallenge (upheld)", net.p(net.challenger).diloco.settle_challenge(job_id))
    aggregator_bond = d.params().aggregator_bond
    assert proto.stakes.stake_of(lazy.address, Role.VERIFIER).staked == lazy_staked - aggregator_bond
    assert proto.token.balance_of(net.challenger.address) == challenger_wallet + aggregator_bond
    referee_fee = d.params().referee_fee
    assert d.credit(net.challenger.address) == deposit - 3 * referee_fee
    assert all(d.credit(m.address) == referee_fee for m in members)
    assert d.get_job(job_id).phase is MultipartyPhase.DRAWING and d.aggregate_of(job_id).last_failed == lazy.address

    # The next aggregator runs judge_round: the copier is wrong, the two others are the mean.
    honest = _draw_aggregator(net, job_id)
    assert honest.address != lazy.address
    verdict = judge_round(state, rounds, cfg)
    assert verdict.state is not None and verdict.masks() == (0b011, 0b100)
    nxt = verdict.state
    store[_digest(nxt.to_bytes(STAMP))] = nxt.to_bytes(STAMP)
    net.p(honest).diloco.commit_aggregate(job_id, verdict.state_hash(STAMP), _digest(nxt.to_bytes(STAMP)), *verdict.masks())
    assert check_round(state, rounds, cfg, STAMP, verdict.state_hash(STAMP), *verdict.masks()) is None  # nobody challenges
    with pytest.raises(revert_class("DeadlineNotReached")):
        net.p(net.challenger).diloco.finalize_round(job_id)
    copier = net.parties[2]
    copier_staked = proto.stakes.stake_of(copier.address, Role.SOLVER).staked
    net.past(d.get_job(job_id).deadline)
    net.note("finalizeRound (2 paid, 1 slashed)", net.p(net.challenger).diloco.finalize_round(job_id))
    job = d.get_job(job_id)
    assert (job.round, job.phase, job.global_hash) == (1, MultipartyPhase.WORKING, nxt.state_hash(STAMP))
    assert store[bytes(job.global_cid)] == nxt.to_bytes(STAMP)
    assert proto.stakes.stake_of(copier.address, Role.SOLVER).staked == copier_staked - SLOT_BOND
    assert int(d.party_of(job_id, 2), 16) == 0
    assert [d.credit(p.address) for p in net.parties] == [CONTRIBUTION_REWARD, CONTRIBUTION_REWARD, 0]
    assert d.credit(honest.address) == AGGREGATOR_FEE + (referee_fee if honest in members else 0)  # it may have sat on the committee

    # Round 1 from the new global model, with the two honest parties (the quorum).
    rounds1, _ = _run_round(net, job_id, nxt, cfg, cheat={})
    assert sorted(rounds1) == [0, 1]
    net.past(d.get_job(job_id).deadline)
    net.p(net.challenger).diloco.close_round(job_id)
    last = _draw_aggregator(net, job_id)
    verdict1 = judge_round(nxt, rounds1, cfg)
    assert verdict1.state is not None
    net.p(last).diloco.commit_aggregate(job_id, verdict1.state_hash(STAMP), _digest(verdict1.state.to_bytes(STAMP)), *verdict1.masks())
    net.past(d.get_job(job_id).deadline)
    net.p(net.challenger).diloco.finalize_round(job_id)
    job = d.get_job(job_id)
    assert (job.phase, job.round, job.global_hash, job.funds) == (MultipartyPhase.FINISHED, 2, verdict1.state_hash(STAMP), 0)
    assert all(proto.stakes.stake_of(p.address, Role.SOLVER).locked == 0 for p in net.parties)

    # Every token: the submitter paid four accepted contributions, their inner jobs, two aggregator
    # fees, and got back the slot bond it was owed and two unspent rounds' slots; all credits claim out.
    inner = d.inner_escrow(INNER_REWARD, INNER_FEE)
    refund = escrow - 5 * inner - 4 * CONTRIBUTION_REWARD - 2 * AGGREGATOR_FEE + SLOT_BOND
    assert d.credit(net.submitter.address) == refund
    for who in {net.submitter.address, net.challenger.address, *(p.address for p in net.parties), *(m.address for m in members), honest.address, last.address}:
        if d.credit(who):
            net.p(net.challenger).diloco.claim_credit(who)
    assert proto.token.balance_of(d.address) == 0 == d.total_credit()
    assert proto.token.balance_of(net.submitter.address) == before - escrow + refund
    print("DilocoJobs gas per call:", net.gas)
    _assert_shown(net, job_id, ("0x" + bytes(nxt.state_hash(STAMP)).hex(), "0x" + bytes(verdict1.state_hash(STAMP)).hex()), (honest, last), tmp_path)


def _assert_shown(net: Net, job_id: int, state_hashes: tuple[str, str], aggregators: tuple[Signer, Signer], tmp_path: Path) -> None:
    """The finished job as ``submit multiparty-show`` and the dashboard show it: round 0 paid slots 0
    and 1 and cut the copier (slot 2) out, round 1 paid slots 0 and 1; each slot's pay is the
    contribution reward when paid plus its finalized inner job's reward; the copier earned its inner
    reward and lost its slot bond; each inner trace's committed losses, replay-checked, and each
    round's mean over its paid slots at the global step r * H + step."""
    report = multiparty_report(read_facts(net.proto, job_id), lambda done: committed_curve(net.store, done))
    rows = report.rounds
    assert [(r.round, r.final, r.paid, r.cut_out, r.state_hash) for r in rows] == [
        (0, True, (0, 1), (2,), state_hashes[0]),
        (1, True, (0, 1), (), state_hashes[1]),
    ]
    assert [r.aggregator for r in rows] == [a.address for a in aggregators]
    parties = [p.address for p in net.parties]
    assert [s.party for s in rows[0].slots] == parties and [s.party for s in rows[1].slots] == [*parties[:2], None]
    assert [s.pay for s in rows[0].slots] == [CONTRIBUTION_REWARD + INNER_REWARD, CONTRIBUTION_REWARD + INNER_REWARD, INNER_REWARD]
    assert [s.pay for s in rows[1].slots] == [CONTRIBUTION_REWARD + INNER_REWARD, CONTRIBUTION_REWARD + INNER_REWARD, 0]
    assert all(s.inner_state is JobState.FINALIZED and s.contribution is not None and s.games == () for r in rows for s in r.slots if s.party)
    totals = {t.party: (t.contributions, t.accepted, t.games_won, t.games_lost, t.earned, t.slashed) for t in report.parties}
    paid = 2 * (CONTRIBUTION_REWARD + INNER_REWARD)
    assert totals == {parties[0]: (2, 2, 0, 0, paid, 0), parties[1]: (2, 2, 0, 0, paid, 0), parties[2]: (1, 0, 0, 0, INNER_REWARD, SLOT_BOND)}
    for r in rows:
        for s in r.slots:
            if s.party:
                assert s.curve is not None and s.curve_checked and [p.loss for p in s.curve.points] == list(_losses(r.round, s.slot)), (r.round, s)
        expected = [(r.round * 5 + i + 1, (a + b) / 2) for i, (a, b) in enumerate(zip(_losses(r.round, 0), _losses(r.round, 1)))]
        assert [(p.global_step, p.loss) for p in r.mean_curve] == expected and all(p.checked and p.parties == 2 for p in r.mean_curve)
    assert report.party_curves()[parties[2]] == [(i + 1, loss, True) for i, loss in enumerate(_losses(0, 2))]  # the copier's round-0 trace

    # The dashboard: the same report in VERI, and the job on the network page.
    index = ChainIndex(net.proto)
    index.advance()
    views = Views(index, net.store)
    page = views.multiparty(job_id)
    assert page is not None and page == {**report.to_json(show_tokens), "head": index.head}
    assert page["totals"][2]["slashed"] == show_tokens(SLOT_BOND) and page["history"][0]["slots"][0]["pay"] == show_tokens(CONTRIBUTION_REWARD + INNER_REWARD)
    listed = {j["id"]: j for j in views.network()["multiparty"]}
    assert listed[job_id]["phase"] == "FINISHED" and listed[job_id]["round"] == 2
    assert views.multiparty(job_id + 1) is None

    # The command: --json is the report in base units, --curve draws it.
    book_dir, png = tmp_path / "book", tmp_path / "rounds.png"
    net.devnet.book.save(book_path(book_dir, net.devnet.client.chain_id))
    shown = subprocess.run(
        [sys.executable, "-m", "veritrain", "submit", "multiparty-show", str(job_id), "--rpc-url", net.devnet.rpc_url, "--address-book-dir", str(book_dir),
         "--store-dir", str(net.store.root), "--json", "--curve", str(png)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == report.to_json(str)
    assert png.read_bytes().startswith(b"\x89PNG")


def _same(a: Residual, b: Residual) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and sorted(a) == sorted(b) and all(torch.equal(a[n], b[n]) for n in a))


def test_a_top_k_party_s_residual_is_derived_from_the_chain_alone_and_restarts_after_a_round_that_did_not_count(net: Net) -> None:
    """Top-k on chain (``keep``): the residual each party comes into a round with, derived by a judge's
    duty (``MultipartyDuty.residual``) from the chain and the store alone, is the one the party carried;
    a cold duty (a restarted judge) derives the same by walking back; a party cut out comes back with
    none; a node whose logs lack a past round's ``RoundFinalized`` makes the move wait."""
    proto, d = net.proto, net.proto.diloco
    cfg = MultipartyConfig(parties=PARTIES, rounds=3, inner_steps=5, block_size=16, keep=0.5, quorum=2)
    state = OuterState.start(_tensors(2, 1.0))
    net.store.put(state.to_bytes(STAMP))
    terms = JobTerms(
        keccak(b"a top-k job's document"), state.state_hash(STAMP), _digest(state.to_bytes(STAMP)), PARTIES, 2, 3, WORK_WINDOW, VERIFY_WINDOW,
        INNER_REWARD, INNER_FEE, CONTRIBUTION_REWARD, AGGREGATOR_FEE, SLOT_BOND,
    )  # fmt: skip
    sub = net.p(net.submitter)
    sub.token.approve(d.address, d.escrow_for(terms))
    job_id, _ = sub.diloco.post(terms)
    for slot, party in enumerate(net.parties):
        net.p(party).diloco.join(job_id, slot)
    judge = MultipartyDuty(proto, net.store, MarketWatcher(proto.market, proto.book.deploy_block), net.challenger.address)
    copier = net.parties[2]
    residuals: dict[int, Residual] = {}  # what each slot's party came into the round with, as the parties carry it
    for r, cheat in enumerate(({}, {2: 0}, {})):
        for slot in range(PARTIES):
            assert _same(judge.residual(job_id, cfg, slot, r, net.parties[slot].address), residuals.get(slot)), (r, slot)
        rounds, _ = _run_round(net, job_id, state, cfg, cheat, residuals)
        if r == 2:  # round 2 not finalized yet: a residual into round 3 needs its RoundFinalized, which the node has not
            with pytest.raises(TransientRPCError, match="RoundFinalized event of round 2"):
                judge.residual(job_id, cfg, 0, 3, net.parties[0].address)
        net.past(d.get_job(job_id).deadline)
        net.p(net.challenger).diloco.close_round(job_id)
        aggregator = _draw_aggregator(net, job_id)
        verdict = judge_round(state, rounds, cfg)
        assert verdict.state is not None and verdict.wrong == tuple(cheat)
        net.store.put(verdict.state.to_bytes(STAMP))
        net.p(aggregator).diloco.commit_aggregate(job_id, verdict.state_hash(STAMP), _digest(verdict.state.to_bytes(STAMP)), *verdict.masks())
        net.past(d.get_job(job_id).deadline)
        net.p(net.challenger).diloco.finalize_round(job_id)
        residuals = {s: residual_after(state, rounds[s].final, cfg, residuals.get(s)) for s in verdict.included}  # type: ignore[arg-type]
        assert all(r is not None for r in residuals.values())
        state = verdict.state
        if r == 1:  # the copier, cut out, takes its slot back: it comes into round 2 with nothing
            assert 2 not in residuals
            net.p(copier).diloco.join(job_id, 2)
    assert d.get_job(job_id).phase is MultipartyPhase.FINISHED
    cold = MultipartyDuty(proto, net.store, MarketWatcher(proto.market, proto.book.deploy_block), net.challenger.address)
    for slot in range(PARTIES):  # a judge started now walks back through every round the party was included in
        assert _same(cold.residual(job_id, cfg, slot, 3, net.parties[slot].address), residuals.get(slot)), slot
    assert cold.residual(job_id, cfg, 0, 3, net.parties[1].address) is None  # round 2's inner job of slot 0 was not party 1's
