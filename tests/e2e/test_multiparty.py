"""`veritrain demo --job diloco` end to end with two cheaters (issue 28): four solver daemons run with
``--multiparty`` take the slots of a two-round multi-party job; one cheats on its traces (``--cheat
wrong-lr``: its inner jobs lose their dispute games), one copies another slot's contribution (``--cheat
copy-contribution``); four verifier daemons verify every inner job as any job, catch the trace cheater,
and aggregate when drawn (calling the copy wrong). Nothing but the submitter's post is driven: neither
cheater is ever paid, the copier loses its slot bond and slot, the honest parties are paid every round,
and the job's final global model is recomputed here, offline, from the spec alone (each included
party's inner steps, its int8 contribution, the outer step): the chain's state hash is those bits.
"""

from __future__ import annotations

from pathlib import Path

from core.storage import LocalStore
from proofs.data import load_dataset
from proofs.diloco import MultipartyConfig, OuterState, aggregate, compress, encode_contribution, pseudo_gradient, train_party
from proofs.spec import Limits, load_spec
from proofs.train import Trainer
from veritrain.diloco_demo import DILOCO_INNER_STEPS, DILOCO_PARTIES, DILOCO_ROUNDS, run_diloco_demo


def test_a_trace_cheater_and_a_copier_are_cut_out_and_the_job_finishes_with_the_honest_model(tmp_path: Path) -> None:
    figures = run_diloco_demo(tmp_path, timeout_s=600, cheats=("wrong-lr", "copy-contribution"))

    assert figures["complete"], figures
    cheats = figures["cheaters"]
    assert cheats["party3"]["strategy"] == "wrong-lr" and cheats["party4"]["strategy"] == "copy-contribution"
    assert all(c["paid"] == 0 for c in cheats.values()), f"a cheater is never paid a contribution: {cheats}"
    assert figures["games_on_inner_jobs"] >= 1 and cheats["party3"]["slashed"] > 0, "the trace cheater's traces caught and slashed"
    assert cheats["party4"]["slashed"] >= 20 * 10**18, "the copier's slot bond slashed"
    slots = {int(k): v for k, v in figures["slots"].items()}
    copier = next(s for s, label in slots.items() if label == "party4")
    rounds = figures["rounds"]
    assert [r["round"] for r in rounds] == list(range(DILOCO_ROUNDS))
    assert rounds[0]["cut_out"] == [copier], rounds  # called wrong in round 0, out of its slot after
    assert all(sorted(slots[s] for s in r["paid"]) == ["party1", "party2"] for r in rounds), rounds

    # The chain's model is the spec's, over the included parties: every round recomputed here.
    store = LocalStore(Path(figures["store_dir"]))
    spec = load_spec(store.get(figures["spec_cid"], Limits.SPEC_BYTES))
    dataset = load_dataset(spec, store.get(spec.dataset.cid, spec.dataset.size_bytes))
    cfg = MultipartyConfig(DILOCO_PARTIES, DILOCO_ROUNDS, DILOCO_INNER_STEPS, block_size=64, quorum=DILOCO_PARTIES - 2)
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
