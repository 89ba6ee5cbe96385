"""Posting a multi-party job (issue 28, docs/multiparty.md): the base spec and its dataset, G_0 (the
spec's seeded initialization with a zero outer buffer) and the job's document, uploaded; the escrow
approved; the job posted on DilocoJobs. Every party re-derives G_0 before it begins round 0."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from core.chain import Receipt
from core.cid import Cid, cid_to_digest
from core.contracts import JobTerms, Protocol, TokenAmount
from core.storage import ContentStore
from proofs.diloco import MultipartyConfig, OuterState, encode_document
from rolebase.amounts import show_tokens
from rolebase.capabilities import round_spec
from rolebase.guarantee import weaker_guarantee
from submitter import service
from submitter.errors import SubmitError
from submitter.specfile import publish, read_job

__all__ = ["MultipartyPay", "PostedMultiparty", "post_multiparty"]

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
    solvers: service.SolverFit
    """The staked solvers' adverts against one round of the job (``rolebase.capabilities.round_spec``), read before posting it."""


def post_multiparty(protocol: Protocol, store: ContentStore, spec_path: Path, data_path: Path, cfg: MultipartyConfig, pay: MultipartyPay) -> PostedMultiparty:
    """Validate the spec and dataset, compute G_0, upload everything, approve the escrow and post.
    The spec must be bit-exact (repro numerics): every party, aggregator and referee recomputes the
    same bits."""
    from proofs.data import load_dataset  # the training stack, only where a job is posted
    from proofs.train import Trainer

    me = service._me(protocol)  # before anything is computed or uploaded: a command without a key says so in one line
    draft = read_job(spec_path, data_path, store)
    if (weaker := weaker_guarantee(draft.spec)) is not None:
        raise SubmitError(f"{spec_path}: {weaker}; a multi-party job needs bit-exact numerics (every party's outer step is recomputed)")
    if draft.dataset is None:
        raise SubmitError("a multi-party job needs its dataset file (--data): G_0 and the shards are computed from it")
    document_spec = draft.spec
    solvers = service.solver_fit(protocol, round_spec(document_spec, cfg.inner_steps), pay.work_window, window="work window")
    state = OuterState.start(Trainer(document_spec, load_dataset(document_spec, draft.dataset)).params)
    g0 = state.to_bytes(document_spec.spec_hash())
    d, token = protocol.diloco, protocol.token
    spec_cid = publish(draft, store)
    document = encode_document(spec_cid, cfg)
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
    return PostedMultiparty(job_id, document_cid, spec_cid, global_cid, escrow, receipts, solvers)
