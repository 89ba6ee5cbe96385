"""`veritrain demo --job diloco --keep 0.25` end to end with two cheaters (issue 28): four solver daemons
run with ``--multiparty`` take the slots of a two-round multi-party job whose contributions are top-25 %
with error feedback (round 1's depend on the residual round 0 left, which every judge derives); one cheats on its traces (``--cheat
wrong-lr``: its inner jobs lose their dispute games), one copies another slot's contribution (``--cheat
copy-contribution``); four verifier daemons verify every inner job as any job, catch the trace cheater,
and aggregate when drawn (calling the copy wrong). Nothing but the submitter's post is driven: neither
cheater is ever paid, the copier loses its slot bond and slot, the honest parties are paid every round,
and the job's final global model is recomputed here, offline, from the spec alone (each included
party's inner steps, its top-k contribution with its residual, the outer step): the chain's state hash
is those bits. (tests/e2e/test_multiparty_hosts.py runs dense int8, every party on its own host.)
"""

from __future__ import annotations

from pathlib import Path

from core.storage import LocalStore
from proofs.diloco import MultipartyConfig
from tests.e2e.multiparty_check import assert_recomputed
from veritrain.diloco_demo import DILOCO_INNER_STEPS, DILOCO_PARTIES, DILOCO_ROUNDS, run_diloco_demo

KEEP = 0.25


def test_a_trace_cheater_and_a_copier_are_cut_out_and_the_job_finishes_with_the_honest_model(tmp_path: Path) -> None:
    figures = run_diloco_demo(tmp_path, timeout_s=600, cheats=("wrong-lr", "copy-contribution"), keep=KEEP)

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

    # What `submit multiparty-show` and the dashboard show (the report, base units): each honest party
    # paid its contribution and inner reward every round, the trace cheater's games lost, the curve.
    report = figures["report"]
    label = {s["party"]: slots[s["slot"]] for s in report["history"][0]["slots"] if s["party"]}
    totals = {label[t["party"]]: t for t in report["totals"]}
    for honest in ("party1", "party2"):
        assert totals[honest]["accepted"] == DILOCO_ROUNDS and int(totals[honest]["earned"]) == DILOCO_ROUNDS * 15 * 10**18, totals  # 10 + 5 VERI a round
        assert totals[honest]["slashed"] == "0" and totals[honest]["games_lost"] == 0, totals
    # a game on the trace cheater's last inner trace may settle between the two reads: the report's, first, holds at most the chain's
    assert totals["party3"]["accepted"] == 0 and totals["party3"]["games_lost"] >= 1 and 0 < int(totals["party3"]["slashed"]) <= cheats["party3"]["slashed"]
    assert int(totals["party4"]["slashed"]) == cheats["party4"]["slashed"] and totals["party4"]["accepted"] == 0, totals
    for r in report["history"]:
        included = [s for s in r["slots"] if s["included"]]
        assert all(s["curve"]["replay_checked"] and int(s["pay"]) == 15 * 10**18 for s in included), r
        mean = r["mean_curve"]
        assert mean and all(p["replay_checked"] and p["parties"] == 2 for p in mean), r
        assert [p["global_step"] for p in mean] == [r["round"] * DILOCO_INNER_STEPS + p["steps"][1] for p in included[0]["curve"]["points"]], r

    # The chain's model is the spec's, over the included parties: every round recomputed here.
    cfg = MultipartyConfig(DILOCO_PARTIES, DILOCO_ROUNDS, DILOCO_INNER_STEPS, block_size=64, keep=KEEP, quorum=DILOCO_PARTIES - 2)
    assert_recomputed(LocalStore(Path(figures["store_dir"])), figures["spec_cid"], cfg, rounds, figures["global_hash"])
