"""What the submitter's commands do, without the command line: post, list, show, fetch, cancel.

Every check that can fail on bad input runs before the first transaction, so a bad
input costs nothing and leaves nothing on chain: the spec is parsed and validated,
the files exist and are within bounds, the balance covers the escrow, the job exists
and is in a state that allows the call. Only then are the dataset and spec uploaded,
the escrow approved and the job posted.

Before posting (and in ``--dry-run``) the staked solvers' adverts of capabilities are read
(:func:`solver_fit`): a job that no staked solver says it can run is posted all the same, with
a warning.

A sealed job (``--sealed``, docs/sealing.md) draws its data key first, keeps it on disk before the
post (``submitter.datakeys``), uploads only the sealed dataset, and is sealed straight after its post:
the balance covers the key bond (reward + fee) besides the escrow.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from core.chain import Address, Receipt
from core.cid import Cid, cid_to_digest, digest_to_cid
from core.contracts import Job, JobId, JobState, Protocol, Role, TokenAmount, TraceCommitment
from core.errors import ChainError, SealingError
from core.sealing import new_data_key, open_canonical
from core.storage import ContentStore
from proofs.merkle import hex32
from proofs.sampling import needs_full_replay
from proofs.spec import JobSpec, Limits, load_spec
from rolebase.amounts import show_tokens
from rolebase.capabilities import misfit
from rolebase.guarantee import weaker_guarantee
from submitter.datakeys import DataKeys, seal_job
from submitter.errors import SubmitError
from submitter.specfile import publish, read_job

log = logging.getLogger(__name__)


#: The most solvers (the latest advertisers) whose adverts a fit check reads.
MAX_ADVERTISERS = 1_000
#: The solvers that do not fit whose reasons the warning names.
SHOWN_MISFITS = 3


@dataclass(frozen=True)
class SolverFit:
    """How a job fits the adverts of the solvers staked now (StakeManager.capabilitiesOf)."""

    advertised: int  # eligible solvers with an advert
    fitting: int
    misfits: tuple[tuple[Address, str], ...]  # each advertised solver that does not fit, and why

    @property
    def warning(self) -> bool:
        return self.fitting == 0

    def line(self) -> str:
        """One line: the warning when none fits, else how many fit."""
        if self.advertised == 0:
            return "warning: no staked solver has advertised what it can run, so none is known to fit this job"
        if self.fitting == 0:
            shown = "; ".join(f"{a[:6]}…{a[-4:]} {why}" for a, why in self.misfits[:SHOWN_MISFITS])
            more = f"; {len(self.misfits) - SHOWN_MISFITS} more" if len(self.misfits) > SHOWN_MISFITS else ""
            return f"warning: none of the {self.advertised} staked solvers fits this job ({shown}{more})"
        return f"{self.fitting} of the {self.advertised} staked solvers fit this job"

    def to_json(self) -> dict[str, object]:
        return {"advertised": self.advertised, "fit": self.fitting, "misfits": [{"solver": a, "reason": why} for a, why in self.misfits]}


def solver_fit(protocol: Protocol, spec: JobSpec, commit_window: int, window: str = "commit window") -> SolverFit:
    """Read the adverts of the solvers whose stake meets the minimum now (the latest
    ``MAX_ADVERTISERS`` to advertise) and check ``spec`` against each (rolebase.capabilities.misfit:
    the check each solver runs before a claim). ``window``: what the window is called (a
    multi-party round's: "work window", with ``rolebase.capabilities.round_spec``)."""
    stakes = protocol.stakes
    events = stakes.events("CapabilitiesAdvertised", protocol.book.deploy_block)
    solvers = list(dict.fromkeys(Address(e.args["solver"]) for e in reversed(events)))[:MAX_ADVERTISERS]
    minimum = stakes.min_stake(Role.SOLVER)
    advertised, misfits = 0, []
    for solver in solvers:
        if stakes.stake_of(solver, Role.SOLVER).staked < minimum:
            continue  # an advert outlives its stake: an unstaked solver claims nothing
        advertised += 1
        why = misfit(stakes.capabilities_of(solver), spec, commit_window, window=window)
        if why:
            misfits.append((solver, why))
    return SolverFit(advertised, advertised - len(misfits), tuple(misfits))


def commit_window_of(protocol: Protocol, commit_window: int | None) -> int:
    """``--commit-window``, checked against the market's maximum (its default)."""
    max_window = protocol.market.params().max_commit_window
    if commit_window is None:
        return max_window
    if not 0 < commit_window <= max_window:
        raise SubmitError(f"--commit-window must be in 1..{max_window} seconds (the market's maximum)")
    return commit_window


@dataclass(frozen=True)
class Posted:
    job_id: JobId
    spec_cid: Cid
    dataset_cid: Cid
    tax: TokenAmount
    """The jackpot tax escrowed on top of reward + fee (into the jackpot at finalize, else refunded)."""
    receipts: dict[str, Receipt]
    solvers: SolverFit
    """The staked solvers' adverts against the job, read before posting it."""
    weaker: str | None = None
    """The spec's weaker-guarantee line (``rolebase.guarantee``), None for a bit-exact job."""
    full_replay: bool = False
    """Posted with the market's full-replay flag (every draw a full replay): exactly a weaker-guarantee spec."""
    sealed: bool = False
    """Posted with a sealed dataset and sealed on chain straight after (``seal`` in ``receipts``)."""


def post_job(
    protocol: Protocol,
    store: ContentStore,
    spec_path: Path,
    data_path: Path | None,
    reward: TokenAmount,
    verifier_fee: TokenAmount,
    commit_window: int | None,
    init_path: Path | None = None,
    *,
    allow_tolerance: bool = False,
    data_keys: DataKeys | None = None,
) -> Posted:
    """Validate everything, read how the staked solvers' adverts fit the job, upload dataset (and
    pretrained weights) and spec,
    approve the escrow (reward + fee + the market's jackpot tax on them + its replay fee), post the job.
    A spec that is a weaker guarantee (``rolebase.guarantee``: torch numerics or tolerance mode) is
    posted only with ``allow_tolerance``, and exactly such a spec is posted with the market's full-replay
    flag (``proofs.sampling.needs_full_replay``): every draw of it is a full replay, which solvers
    require of such a job. With ``data_keys`` the job is sealed: a new data key, kept there before
    anything is sent, seals the dataset, and the job is sealed on chain right after its post; a seal
    that fails then says, in one line, how to finish it."""
    if reward <= 0:
        raise SubmitError("--reward must be above 0")
    if verifier_fee <= 0:
        raise SubmitError("--fee must be above 0")
    market, token = protocol.market, protocol.token
    commit_window = commit_window_of(protocol, commit_window)
    data_key = None if data_keys is None else new_data_key()
    draft = read_job(spec_path, data_path, store, init_path, data_key)  # parse and validate spec and inputs, upload nothing
    if (weaker := weaker_guarantee(draft.spec)) is not None and not allow_tolerance:
        raise SubmitError(f"{spec_path}: {weaker}; pass --allow-tolerance to post it all the same")
    me = _me(protocol)
    tax = market.jackpot_tax(reward, verifier_fee)
    replay_fee = market.replay_fee(reward)  # back at finalize unless the job was fully replayed
    need = reward + verifier_fee + tax + replay_fee
    bond = 0 if data_key is None else reward + verifier_fee  # the key bond, escrowed by the seal
    have = token.balance_of(me)
    if have < need + bond:
        raise SubmitError(
            f"insufficient balance: {me} holds {show_tokens(have)} VERI, the escrow needs {show_tokens(need)}"
            f" (reward + fee + {show_tokens(tax)} jackpot tax + {show_tokens(replay_fee)} replay fee)"
            + (f" and the key bond {show_tokens(TokenAmount(bond))}" if bond else "")
        )
    solvers = solver_fit(protocol, draft.spec, commit_window)
    if data_keys is not None and data_key is not None:
        data_keys.keep(draft.dataset_cid, data_key)  # before the post: a crash from here on loses no key
    spec_cid = publish(draft, store)
    receipts: dict[str, Receipt] = {}
    if token.allowance(me, market.address) < need:
        receipts["approve"] = token.approve(market.address, need)
    full_replay = needs_full_replay(draft.spec)
    job_id, receipts["postJob"] = market.post_job(cid_to_digest(spec_cid), reward, verifier_fee, commit_window, full_replay=full_replay)
    log.info("job posted", extra={"job": job_id, "spec": spec_cid, "dataset": draft.dataset_cid})
    if data_key is not None:
        try:
            receipts |= seal_job(protocol, me, job_id, data_key)
        except ChainError as exc:
            raise SubmitError(
                f"job {job_id} was posted but not sealed ({exc}); no honest solver claims it until it is: finish with `veritrain submit seal {job_id}`"
            ) from None
    return Posted(job_id, spec_cid, draft.dataset_cid, tax, receipts, solvers, weaker, full_replay, data_key is not None)


def get_job(protocol: Protocol, job_id: int) -> Job:
    """The job, or a one-line error naming the known range."""
    count = protocol.market.job_count()
    if not 1 <= job_id <= count:
        raise SubmitError(f"unknown job {job_id}: jobs on this market are 1..{count}" if count else f"unknown job {job_id}: no job posted yet")
    return protocol.market.get_job(JobId(job_id))


def list_jobs(protocol: Protocol, limit: int = 1_000) -> list[tuple[JobId, Job]]:
    count = protocol.market.job_count()
    return [(JobId(i), protocol.market.get_job(JobId(i))) for i in range(max(1, count - limit + 1), count + 1)]


def commitment(protocol: Protocol, job_id: JobId, job: Job) -> TraceCommitment | None:
    """The commitment of the job's current solver, or None before its commit."""
    if job.state in (JobState.OPEN, JobState.CLAIMED):
        return None
    events = protocol.market.events("TraceCommitted", protocol.book.deploy_block, jobId=job_id)
    ours = [c for c in map(TraceCommitment.of, events) if c.solver == job.solver and c.trace_root == job.trace_root]
    return ours[-1] if ours else None


def final_model(protocol: Protocol, store: ContentStore, job_id: int, spec: JobSpec, keys: DataKeys | None) -> tuple[Cid, bytes]:
    """A finalized job's committed model CID and its final checkpoint's bytes, verified against the
    CID; a sealed job's (``spec``: the job's, :func:`fetch_spec`) opened with the data key kept in
    ``keys`` (the buyer's: docs/sealing.md).
    :class:`SubmitError` before it is final; :class:`SealingError` (exit 6) for a sealed job without
    its key here or a model that does not open."""
    job = get_job(protocol, job_id)
    if job.state is not JobState.FINALIZED:
        raise SubmitError(f"job {job_id} is {job.state.name}: the model can be fetched once it is FINALIZED")
    done = commitment(protocol, JobId(job_id), job)
    if done is None:
        raise SubmitError(f"job {job_id} has no trace commitment on chain")
    data = store.get(done.final_model_cid, Limits.CHECKPOINT_BYTES)  # verified against the CID by the store
    if spec.dataset.sealed:
        if keys is None:
            raise SealingError(f"job {job_id} is sealed: its model opens only with the data key its buyer kept")
        data = open_canonical(keys.load(spec.dataset.cid), data)
    return done.final_model_cid, data


def fetch_model(protocol: Protocol, store: ContentStore, job_id: int, out: Path, keys: DataKeys | None = None) -> tuple[Cid, int]:
    """Write the finalized job's model to ``out`` (:func:`final_model`: verified against the committed
    CID, a sealed job's opened with our data key); its CID and the size written."""
    if out.is_dir():
        raise SubmitError(f"--out {out} is a directory; give a file path")
    if not out.parent.exists():
        raise SubmitError(f"--out {out}: directory {out.parent} does not exist")
    cid, data = final_model(protocol, store, job_id, load_spec(fetch_spec(protocol, store, job_id)), keys)
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, out)
    return cid, len(data)


def fetch_spec(protocol: Protocol, store: ContentStore, job_id: int) -> bytes:
    """The spec a job was posted with, its bytes verified against the CID in its ``JobPosted`` event."""
    get_job(protocol, job_id)
    posted = protocol.market.events("JobPosted", protocol.book.deploy_block, jobId=JobId(job_id))
    if not posted:
        raise SubmitError(f"no JobPosted event for job {job_id} (a node behind?)")
    return store.get(digest_to_cid(bytes(posted[0].args["specCid"])), Limits.SPEC_BYTES)


def cancel_job(protocol: Protocol, job_id: int) -> Receipt:
    job = get_job(protocol, job_id)
    me = _me(protocol)
    if job.submitter != me:
        raise SubmitError(f"job {job_id} was posted by {job.submitter}, not by {me}: only its submitter can cancel it")
    if job.state is not JobState.OPEN:
        raise SubmitError(f"job {job_id} is {job.state.name}: only an OPEN job can be cancelled")
    return protocol.market.cancel(JobId(job_id))


def job_json(job_id: JobId, job: Job) -> dict[str, object]:
    return {
        "job_id": job_id,
        "state": job.state.name,
        "submitter": job.submitter,
        "reward": str(job.reward),
        "verifier_fee": str(job.verifier_fee),
        "deadline": job.deadline,
        "commit_window": job.commit_window,
        "solver": job.solver,
        "verifier": job.verifier,
        "checkpoint_count": job.checkpoint_count,
        "trace_root": hex32(job.trace_root),
        "draws": job.draws,
    }


def _me(protocol: Protocol) -> Address:
    signer = protocol.market.signer
    if signer is None:
        raise SubmitError("this command signs a transaction: pass --key-env or --keystore")
    return signer.address


def dumps(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=False)
