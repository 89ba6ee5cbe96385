"""A multi-party job end to end with real daemons on anvil (issue 28): two solvers run with
``--multiparty`` take the slots, begin, train and contribute each round; two verifiers verify the
inner jobs as any job, and the one drawn aggregates (a round closes as soon as both contributions are
verified); nobody but the submitter's post is driven by
the test. The job's final global model is then recomputed here, offline, from the spec alone (every
party's inner steps, its int8 contribution and the outer step): the chain's state hash is those bits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from core.contracts import JobId, JobState, MultipartyPhase, Role, TokenAmount
from proofs.data import load_dataset
from proofs.diloco import MultipartyConfig, OuterState, aggregate, compress, encode_contribution, pseudo_gradient, train_party
from proofs.spec import load_spec
from proofs.train import Trainer
from submitter.demo_job import build_demo_job
from submitter.multiparty import MultipartyPay, post_multiparty
from tests.e2e.conftest import Market, wait_for

E2E_ACCOUNTS = 5  # the submitter, two parties, two verifiers
E18 = 10**18


def test_two_parties_train_two_rounds_and_drawn_aggregators_finish_the_job(market: Market, tmp_path: Path) -> None:
    parties = [market.daemon("solver", i, f"party{i}", "--multiparty", "--duty-grace", "5") for i in (1, 2)]
    verifiers = [market.daemon("verifier", i, f"verifier{i}", "--duty-grace", "5") for i in (3, 4)]
    market.wait_staked(180)
    job = build_demo_job("tiny", tmp_path / "job")
    cfg = MultipartyConfig(parties=2, rounds=2, inner_steps=20, block_size=64, quorum=2)
    pay = MultipartyPay(TokenAmount(10 * E18), TokenAmount(E18), TokenAmount(20 * E18), TokenAmount(3 * E18), TokenAmount(35 * E18), 300, 300)
    posted = post_multiparty(market.protocol(market.account(0)), market.store, job.spec_path, job.data_path, cfg, pay)
    d = market.protocol().diloco

    done = wait_for("the multi-party job finished", lambda: d.get_job(posted.job_id).phase is MultipartyPhase.FINISHED or None, 900, market)
    assert done
    final = d.get_job(posted.job_id)
    assert final.round == 2, f"the job ended at round {final.round} of 2"

    protocol, deploy = market.protocol(), market.protocol().book.deploy_block
    finalized = [e.args for e in d.events("RoundFinalized", deploy, jobId=posted.job_id)]
    assert [f["paid"] for f in finalized] == [0b11, 0b11] and [f["slashed"] for f in finalized] == [0, 0]
    inner = [int(e.args["innerJobId"]) for e in d.events("InnerJobBegun", deploy, jobId=posted.job_id)]
    assert len(inner) == 4 and all(protocol.market.get_job(JobId(i)).state is JobState.FINALIZED for i in inner)
    aggregators = {e.args["aggregator"] for e in d.events("AggregatorDrawn", deploy, jobId=posted.job_id)}
    assert aggregators <= {v.address for v in verifiers} and len(aggregators) >= 1
    addresses = [market.account(i).address for i in (1, 2)]
    for a in addresses:
        assert protocol.stakes.stake_of(a, Role.SOLVER).locked == 0, "every slot bond released"
    paid = Counter((e.args["to"], e.args["amount"]) for e in d.events("Credited", deploy))
    assert all(paid[(a, pay.contribution_reward)] == 2 for a in addresses), f"both contributions of each party paid: {paid}"
    wait_for("the parties claimed their pay", lambda: all(d.credit(a) == 0 for a in addresses), 60, market)

    # The chain's model is the spec's: every round recomputed here from the spec and the dataset alone.
    spec = load_spec(market.store.get(posted.spec_cid, 1 << 16))  # as posted: the dataset's CID filled in
    dataset = load_dataset(spec, job.data_path.read_bytes())
    state = OuterState.start(Trainer(spec, dataset).params)
    for _ in range(cfg.rounds):
        contributions = {}
        for party in range(cfg.parties):
            after, _ = train_party(spec, dataset, cfg, state, party)
            contributions[party] = encode_contribution(compress(pseudo_gradient(state.params, after), cfg.block_size)[0])
        state, included = aggregate(state, contributions, cfg)
        assert included == (0, 1)
    assert final.global_hash == state.state_hash(spec.spec_hash())
    shown = subprocess.run(
        [sys.executable, "-m", "veritrain", "submit", "multiparty-show", str(posted.job_id), "--rpc", market.net.rpc_url,
         "--address-book-dir", str(market.book_dir), "--json"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert (report["phase"], report["round"], report["global_hash"]) == ("finished", 2, "0x" + bytes(final.global_hash).hex())
    assert [(r["round"], r["paid"], r["cut_out"]) for r in report["history"]] == [(0, [0, 1], []), (1, [0, 1], [])]
    assert {r["aggregator"] for r in report["history"]} <= aggregators
    for process in (*parties, *verifiers):
        assert not [r for r in process.log_records() if r["level"] in ("ERROR", "CRITICAL")], process.log_tail()
