"""`veritrain demo --job diloco` end to end (issue 28): four solver daemons run with ``--multiparty``
take the slots of a two-round multi-party job, one of them cheating (``--cheat wrong-lr``: its inner
traces follow that adversary); four verifier daemons verify every inner job as any job, catch the
cheater's traces in dispute games, and aggregate when drawn. Nothing but the submitter's post is
driven: the cheater is slashed and never paid, the honest parties are paid every round, and the job's
final global model is recomputed here, offline, from the spec alone (each included party's inner
steps, its int8 contribution, the outer step): the chain's state hash is those bits.
"""

from __future__ import annotations

from pathlib import Path

from core.storage import LocalStore
from proofs.data import load_dataset
from proofs.diloco import MultipartyConfig, OuterState, aggregate, compress, encode_contribution, pseudo_gradient, train_party
from proofs.spec import Limits, load_spec
from proofs.train import Trainer
from veritrain.diloco_demo import DILOCO_INNER_STEPS, DILOCO_PARTIES, DILOCO_QUORUM, DILOCO_ROUNDS, run_diloco_demo


def test_a_cheating_party_is_caught_and_cut_out_and_the_job_finishes_with_the_honest_model(tmp_path: Path) -> None:
    figures = run_diloco_demo(tmp_path, timeout_s=600)

    assert figures["complete"], figures
    assert figures["games_on_inner_jobs"] >= 1 and figures["cheater_slashed"] > 0, "the cheater's traces were caught and slashed"
    assert figures["cheater_paid"] == 0, "a cheater is never paid a contribution"
    rounds = figures["rounds"]
    assert [r["round"] for r in rounds] == list(range(DILOCO_ROUNDS))
    assert all(len(r["paid"]) == DILOCO_PARTIES - 1 and r["cut_out"] == [] for r in rounds), rounds  # its trace lost: never eligible, nothing to call wrong

    # The chain's model is the spec's, over the included parties: every round recomputed here.
    store = LocalStore(Path(figures["store_dir"]))
    spec = load_spec(store.get(figures["spec_cid"], Limits.SPEC_BYTES))
    dataset = load_dataset(spec, store.get(spec.dataset.cid, spec.dataset.size_bytes))
    cfg = MultipartyConfig(DILOCO_PARTIES, DILOCO_ROUNDS, DILOCO_INNER_STEPS, block_size=64, quorum=DILOCO_QUORUM)
    state = OuterState.start(Trainer(spec, dataset).params)
    for r in rounds:
        contributions = {}
        for party in r["paid"]:
            after, _ = train_party(spec, dataset, cfg, state, party)
            contributions[party] = encode_contribution(compress(pseudo_gradient(state.params, after), cfg.block_size)[0])
        state, included = aggregate(state, contributions, cfg)
        assert list(included) == r["paid"]
        assert "0x" + bytes(state.state_hash(spec.spec_hash())).hex() == r["state_hash"]
    assert "0x" + bytes(state.state_hash(spec.spec_hash())).hex() == figures["global_hash"]
