"""A multi-party job across hosts (issue 28): the chain, the submitter, four parties and four verifiers
each in a network namespace of its own (tests/e2e/hosts.py), nothing shared but the network. The
submitter serves its store (``submit serve``) and posts the job with the CLI from its own store, so
the job's document, base spec, dataset and G_0 are first on its host alone; four solver daemons run
with ``--multiparty`` take the slots, one of them copying another slot's contribution (``--cheat
copy-contribution``); four verifier daemons verify the inner jobs and aggregate when drawn. Every
daemon serves its store (``--serve``, announced on chain) and fetches what it lacks from the announced
gateways (no ``--peer``), every byte checked against its CID.

It shows: the job finishes every round; the honest parties are paid each round and the copier is cut
out, its slot bond slashed; each party took the job's inputs and each round's global model from
another host's gateway, and each round's aggregator the contributions from the parties'; and the
chain's final global model is recomputed here, offline, bit for bit. Run with ``-s`` to see its wall time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from core.cid import digest_to_cid
from core.contracts import MultipartyPhase, Role
from deploy.devnet import Devnet
from proofs.diloco import decode_document
from proofs.spec import Limits, load_spec
from submitter.demo_job import build_demo_job
from tests.e2e.hosts import NEEDS_HOSTS, Party, assert_no_traceback, daemon, host_fixtures, serve_submitter, until, wait_staked
from tests.e2e.multiparty_check import assert_recomputed
from veritrain.diloco_demo import DILOCO_INNER_STEPS, DILOCO_PARTIES, DILOCO_ROUNDS

pytestmark = NEEDS_HOSTS

PARTIES = [f"party{i}" for i in range(1, DILOCO_PARTIES + 1)]
VERIFIERS = [f"verifier{i}" for i in range(1, 5)]
COPIER = PARTIES[-1]
#: Each host's funded dev account.
ACCOUNTS = {"submitter": 0, **{name: i for i, name in enumerate([*PARTIES, *VERIFIERS], start=1)}}
hosts, chain, parties = host_fixtures(ACCOUNTS)
#: The demo's windows: room for a round's inner jobs to be trained and verified on two busy cores (a
#: round whose slots all contributed closes as soon as their inner jobs are settled).
WORK_WINDOW, VERIFY_WINDOW = 600, 900


def _fetched_elsewhere(party: Party, parties: dict[str, Party]) -> set[str]:
    """What ``party`` fetched from any other host's gateway."""
    return {cid for other in parties.values() if other is not party for cid in party.fetched(other)}


def test_a_multiparty_job_crosses_hosts_by_gateways_only(chain: tuple[Devnet, Path], parties: dict[str, Party], tmp_path: Path) -> None:
    net, _ = chain
    t_start = time.monotonic()
    sub = parties["submitter"]
    serve_submitter(net, parties)
    for name in PARTIES:
        daemon(net, parties, name, "solver", "--multiparty", "--duty-grace", "5", *(["--cheat", "copy-contribution"] if name == COPIER else []))
    for name in VERIFIERS:
        daemon(net, parties, name, "verifier", "--duty-grace", "5")
    wait_staked(net, parties, {**dict.fromkeys(PARTIES, Role.SOLVER), **dict.fromkeys(VERIFIERS, Role.VERIFIER)})

    job = build_demo_job("tiny", tmp_path / "job")
    t_post = time.monotonic()
    posted = sub.run(
        ["submit", "multiparty", str(job.spec_path), "--data", str(job.data_path), "--parties", str(DILOCO_PARTIES), "--quorum", str(DILOCO_PARTIES - 1),
         "--rounds", str(DILOCO_ROUNDS), "--inner-steps", str(DILOCO_INNER_STEPS), "--block-size", "64", "--work-window", str(WORK_WINDOW),
         "--verify-window", str(VERIFY_WINDOW), *sub.args(net.rpc_url), "--key-env", sub.key_var, "--json"]
    )  # fmt: skip
    assert posted.returncode == 0, posted.stderr
    post = json.loads(posted.stdout.splitlines()[-1])
    job_id = int(post["job_id"])
    d = net.protocol().diloco
    until(f"multi-party job {job_id} finished", lambda: d.get_job(job_id).phase is MultipartyPhase.FINISHED, parties, 900)
    t_done = time.monotonic()

    shown = sub.run(["submit", "multiparty-show", str(job_id), *sub.args(net.rpc_url), "--json"])
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    rounds = report["history"]
    assert report["round"] == DILOCO_ROUNDS and [r["round"] for r in rounds] == list(range(DILOCO_ROUNDS)), report
    host_of = {str(net.accounts[p.account].address): name for name, p in parties.items()}
    deploy = net.protocol().book.deploy_block
    joined = [(int(e.args["slot"]), host_of[str(e.args["party"])]) for e in d.events("SlotJoined", deploy, jobId=job_id)]
    honest = {slot: name for slot, name in joined if name != COPIER}
    copier_slots = [slot for slot, name in joined if name == COPIER]
    assert sorted(honest.values()) == sorted(set(PARTIES) - {COPIER}), joined
    # the honest parties are paid every round; the copier is called wrong in round 0 and loses its slot bond
    assert all(sorted(honest.get(s, f"slot {s}") for s in r["paid"]) == sorted(honest.values()) for r in rounds), rounds
    assert rounds[0]["cut_out"] == copier_slots[:1], (rounds, joined)
    vacated = [e for e in d.events("SlotVacated", deploy, jobId=job_id) if host_of[str(e.args["party"])] == COPIER]
    assert vacated and all(int(e.args["slashed"]) == d.get_job(job_id).slot_bond for e in vacated), vacated

    # the job's inputs were on the submitter's host alone: every party took them from another host
    document_cid, spec_cid, g0 = post["document_cid"], post["spec_cid"], post["global_cid"]
    dataset_cid = load_spec(sub.store.get(spec_cid, Limits.SPEC_BYTES)).dataset.cid
    inputs = {document_cid, spec_cid, dataset_cid, g0}
    others = [p for name, p in parties.items() if name != "submitter"]
    assert inputs <= {cid for p in others for cid in p.fetched(sub)}, "the submitter's gateway served each of them first"
    for name in PARTIES:
        assert inputs <= _fetched_elsewhere(parties[name], parties), name
    # each later round's global model came from another host (first from its aggregator's gateway)
    models = {int(e.args["round"]) + 1: str(digest_to_cid(bytes(e.args["globalCid"]))) for e in d.events("RoundFinalized", deploy, jobId=job_id)}
    for r in rounds[1:]:
        aggregator = parties[host_of[rounds[r["round"] - 1]["aggregator"]]]
        assert models[r["round"]] in {cid for p in others for cid in p.fetched(aggregator)}, r
        assert all(models[r["round"]] in _fetched_elsewhere(parties[honest[s]], parties) for s in r["paid"]), r
    # each round's aggregator took every contribution from the parties' gateways
    for r in rounds:
        aggregator = parties[host_of[r["aggregator"]]]
        contributions = {
            str(digest_to_cid(bytes(e.args["cid"]))) for e in d.events("ContributionCommitted", deploy, jobId=job_id) if e.args["round"] == r["round"]
        }
        assert contributions <= {cid for name in PARTIES for cid in aggregator.fetched(parties[name])}, r

    # the chain's model is the spec's, over the paid parties: every round recomputed from the submitter's store
    document_spec, cfg = decode_document(sub.store.get(document_cid, Limits.SPEC_BYTES))
    assert document_spec == spec_cid
    assert_recomputed(sub.store, spec_cid, cfg, rounds, report["global_hash"])
    assert_no_traceback(parties)
    print(
        f"\nmulti-party job across hosts ({DILOCO_PARTIES} parties x {DILOCO_ROUNDS} rounds, one copier): posted to finished {t_done - t_post:.0f} s, "
        f"test {time.monotonic() - t_start:.0f} s"
    )
