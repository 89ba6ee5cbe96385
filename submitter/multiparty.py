"""Posting a multi-party job (issue 28, docs/multiparty.md): the base spec and its dataset, G_0 (the
spec's seeded initialization with a zero outer buffer) and the job's document, uploaded; the escrow
approved; the job posted on DilocoJobs. Every party re-derives G_0 before it begins round 0."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.chain import Receipt
from core.cid import Cid, cid_to_digest, digest_to_cid
from core.contracts import JobTerms, Protocol, TokenAmount
from core.storage import ContentStore
from proofs.diloco import MultipartyConfig, OuterState, encode_document
from rolebase.amounts import show_tokens
from rolebase.guarantee import weaker_guarantee
from submitter import service
from submitter.errors import SubmitError
from submitter.specfile import publish, read_job

__all__ = ["MultipartyPay", "PostedMultiparty", "post_multiparty", "multiparty_report"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MultipartyPay:
    """What a multi-party job pays (base units) and its windows (seconds): each inner job's reward and
    verifier fee, each accepted contribution, each round's aggregator, the slot bond a party locks."""

    inner_reward: TokenAmount
    inner_fee: TokenAmount
    contribution_reward: TokenAmount
    aggregator_fee: TokenAmount
    slot_bond: TokenAmount
    work_window: int
    verify_window: int


@dataclass(frozen=True)
class PostedMultiparty:
    job_id: int
    document_cid: Cid
    spec_cid: Cid
    global_cid: Cid
    escrow: TokenAmount
    receipts: dict[str, Receipt]


def post_multiparty(protocol: Protocol, store: ContentStore, spec_path: Path, data_path: Path, cfg: MultipartyConfig, pay: MultipartyPay) -> PostedMultiparty:
    """Validate the spec and dataset, compute G_0, upload everything, approve the escrow and post.
    The spec must be bit-exact (repro numerics): every party, aggregator and referee recomputes the
    same bits. Top-k compression is not built on chain."""
    from proofs.data import load_dataset  # the training stack, only where a job is posted
    from proofs.train import Trainer

    me = service._me(protocol)  # before anything is computed or uploaded: a command without a key says so in one line
    draft = read_job(spec_path, data_path, store)
    if (weaker := weaker_guarantee(draft.spec)) is not None:
        raise SubmitError(f"{spec_path}: {weaker}; a multi-party job needs bit-exact numerics (every party's outer step is recomputed)")
    if draft.dataset is None:
        raise SubmitError("a multi-party job needs its dataset file (--data): G_0 and the shards are computed from it")
    document_spec = draft.spec
    state = OuterState.start(Trainer(document_spec, load_dataset(document_spec, draft.dataset)).params)
    g0 = state.to_bytes(document_spec.spec_hash())
    d, token = protocol.diloco, protocol.token
    spec_cid = publish(draft, store)
    document = encode_document(spec_cid, cfg)  # refuses top-k
    global_cid = store.put(g0)
    document_cid = store.put(document)
    terms = JobTerms(
        cid_to_digest(document_cid),
        state.state_hash(document_spec.spec_hash()),
        cid_to_digest(global_cid),
        cfg.parties,
        cfg.quorum,
        cfg.rounds,
        pay.work_window,
        pay.verify_window,
        pay.inner_reward,
        pay.inner_fee,
        pay.contribution_reward,
        pay.aggregator_fee,
        pay.slot_bond,
    )
    escrow = d.escrow_for(terms)
    if (have := token.balance_of(me)) < escrow:
        raise SubmitError(f"insufficient balance: {me} holds {show_tokens(have)} VERI, the escrow needs {show_tokens(escrow)}")
    receipts: dict[str, Receipt] = {}
    if token.allowance(me, d.address) < escrow:
        receipts["approve"] = token.approve(d.address, escrow)
    job_id, receipts["post"] = d.post(terms)
    log.info("multi-party job posted", extra={"job": job_id, "document": document_cid, "spec": spec_cid, "g0": global_cid})
    return PostedMultiparty(job_id, document_cid, spec_cid, global_cid, escrow, receipts)


def _slots(mask: int) -> list[int]:
    return [s for s in range(16) if mask >> s & 1]


def multiparty_report(protocol: Protocol, job_id: int) -> dict[str, Any]:
    """What ``submit multiparty-show`` prints: the job's round, phase and global model; each final
    round's aggregator, paid and cut-out slots and state hash (from the chain's events); each slot's
    party and its contribution this round."""
    d = protocol.diloco
    job = d.get_job(job_id)
    deploy = protocol.book.deploy_block
    committed: dict[int, str] = {}
    for e in d.events("AggregateCommitted", deploy, jobId=job_id):
        committed[int(e.args["round"])] = str(e.args["aggregator"])  # the last one of a round is the final one's
    history = [
        {
            "round": int(e.args["round"]),
            "aggregator": committed.get(int(e.args["round"]), "0x" + "00" * 20),
            "paid": _slots(int(e.args["paid"])),
            "cut_out": _slots(int(e.args["slashed"])),
            "state_hash": "0x" + bytes(e.args["globalHash"]).hex(),
        }
        for e in d.events("RoundFinalized", deploy, jobId=job_id)
    ]
    slots = []
    for slot in range(job.parties):
        party = d.party_of(job_id, slot)
        c = d.contribution_of(job_id, job.round, slot) if job.round < job.rounds else None
        slots.append(
            {
                "slot": slot,
                "party": None if int(party, 16) == 0 else party,
                "inner_job": c.inner_job_id if c is not None and c.inner_job_id else None,
                "contribution": str(digest_to_cid(c.cid)) if c is not None and any(c.cid) else None,
            }
        )
    return {
        "job_id": job_id,
        "submitter": job.submitter,
        "round": job.round,
        "rounds": job.rounds,
        "phase": job.phase.name.lower(),
        "global_hash": "0x" + bytes(job.global_hash).hex(),
        "global_cid": str(digest_to_cid(job.global_cid)),
        "funds": str(job.funds),
        "history": history,
        "slots": slots,
    }
