"""Deterministic, checkpointed training: the solver's side of proof of learning.

Read top to bottom: :class:`Runtime` pins the numerics (threads, deterministic
kernels, matmul precision, device); :class:`Trainer` holds a model, its
optimizer slots and the global step, and advances one seeded batch at a time;
:func:`train_trace` runs a whole job, taking a canonical checkpoint every
``k`` steps, hashing it, and returns a :class:`Trace` with the Merkle tree and
per-segment update norms and mean training losses (:func:`segment_loss`). Both
it and the solver (``solver.work.JobTrainer``) take checkpoints through a
:class:`Committer`, which hashes and stores them off the training thread. The
caller stores checkpoints (``put``) and builds the manifest with their CIDs::

    trace = train_trace(spec, dataset, put=store.put)   # put(bytes) -> CID
    manifest = trace.manifest(spec_cid)
    commit(trace.root, len(trace.state_hashes), manifest.final_cid, write_manifest(store.put, manifest))
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Literal

import numpy as np
import torch

from core.cid import Cid
from core.probe import Bytes32
from core.storage.unixfs import CHUNK_SIZE, DagBuilder
from proofs import optim, repro
from proofs.checkpoint import Checkpoint, StateBuffer, decode_checkpoint, encode_checkpoint, hash_state, seal_state, state_hash, update_norm
from proofs.data import BatchOrder, Dataset
from proofs.errors import CheckpointError, DatasetError, ProofError
from proofs.keccak import keccak_hasher
from proofs.manifest import CheckpointEntry, Manifest
from proofs.merkle import TraceTree, hex32
from proofs.models import build_model, ops_for
from proofs.numerics import profile
from proofs.spec import JobSpec

__all__ = [
    "Runtime",
    "runtime",
    "Trainer",
    "Trace",
    "train_trace",
    "segment_loss",
    "held_out_loss",
    "model_held_out_loss",
    "Committer",
    "Committed",
    "Progress",
    "Put",
    "Write",
]

log = logging.getLogger(__name__)

#: ``progress(steps_done, steps_total)``, called after every step.
Progress = Callable[[int, int], None]
#: ``put(checkpoint_bytes) -> cid``: stores bytes, returns their content id.
Put = Callable[[bytes], str]
#: ``write(index, data)``: keeps checkpoint ``index``'s bytes (a file, a store) before it counts as
#: committed; runs on the :class:`Committer`'s thread, and ``data`` is valid only during the call.
Write = Callable[[int, memoryview], None]


@dataclass(frozen=True)
class Runtime:
    """The numeric environment a trainer runs in.

    The default is what exact replay with ``numerics: torch`` needs: one CPU thread,
    deterministic algorithms, full float32 matmul precision. Calibration varies these.
    Under ``repro-v1`` and ``repro-v2`` the thread count only changes the speed, never the bits: the kernels
    use ``repro_threads`` where it is set (a role's ``--threads``), else ``threads``, and so does
    torch, which then only moves data and adds single terms (the same bits at any thread count;
    its copies and adds on the second thread made every registry model's two-thread step 1.01x
    to 1.18x faster than with torch on one, docs/numerics.md). A ``torch`` job ignores
    ``repro_threads``: its bits depend on torch's thread count.

    ``fill_uninitialized`` is torch's ``fill_uninitialized_memory`` under deterministic algorithms
    (every new tensor first filled with NaN). A repro trainer turns it off: its kernels write every
    output and torch only moves data, so no value is ever read unwritten, and the fills cost
    gpt-10M 14 ms a step on the training thread.
    """

    threads: int = 1
    repro_threads: int | None = None
    deterministic: bool = True
    fill_uninitialized: bool = True
    matmul_precision: Literal["highest", "high", "medium"] = "highest"
    device: str = "cpu"


@contextmanager
def runtime(rt: Runtime) -> Iterator[None]:
    """Apply ``rt`` to torch's (and the repro kernels') process-wide settings, restoring the
    previous ones after."""
    saved = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(), torch.get_float32_matmul_precision()
    saved_fill = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    saved_repro = repro.threads()
    torch.set_num_threads(rt.threads)
    repro.set_threads(rt.threads)
    torch.use_deterministic_algorithms(rt.deterministic)
    torch.set_float32_matmul_precision(rt.matmul_precision)
    torch.utils.deterministic.fill_uninitialized_memory = rt.fill_uninitialized  # type: ignore[attr-defined]
    try:
        yield
    finally:
        torch.set_num_threads(saved[0])
        repro.set_threads(saved_repro)
        torch.use_deterministic_algorithms(saved[1])
        torch.set_float32_matmul_precision(saved[2])
        torch.utils.deterministic.fill_uninitialized_memory = saved_fill  # type: ignore[attr-defined]


class Trainer:
    """A model, its optimizer state and the global step; advances one seeded batch per step.

    Its checkpoints carry the spec's hash (``stamp``); the adversary library's
    ``proofs.adversary.ForgedTrainer`` trains another spec or data order under the honest stamp.
    A sealed job's trainer seals its checkpoints under the dataset's ``data_key``.
    """

    def __init__(self, spec: JobSpec, dataset: Dataset, rt: Runtime = Runtime()) -> None:
        if spec.dataset.sealed and dataset.data_key is None:
            raise ProofError("a sealed job's checkpoints are sealed under its data key: load its dataset with the key")
        self.spec = spec
        self.data_key = dataset.data_key
        self.profile = profile(spec.numerics)
        self.rt = replace(rt, threads=rt.repro_threads or rt.threads, fill_uninitialized=False) if self.profile.repro else rt
        self.device = torch.device(rt.device)
        fault = self.profile.fault(rt.device)
        if fault is not None:
            raise ProofError(fault)
        self.stamp = spec.spec_hash()
        self.order = BatchOrder(spec, dataset)
        self.model = build_model(spec, self.device)
        self.ops = ops_for(spec.numerics)
        self.params = dict(sorted(self.model.named_parameters()))
        if spec.init is not None:
            self._start_from(spec.init.cid, dataset)
        self.optimizer = optim.build_optimizer(spec.optimizer, spec.numerics)
        self.state = self.optimizer.init_state(self.params)
        self.step = 0

    def _start_from(self, cid: str, dataset: Dataset) -> None:
        """Fine-tuning: the parameters become the pretrained ones (exactly the model's names and shapes)."""
        if dataset.init is None:
            raise DatasetError(f"the spec fine-tunes from {cid}: load the dataset with its weights")
        names, want = sorted(dataset.init), list(self.params)
        if names != want:
            raise DatasetError(f"pretrained model {cid} holds {names[:4]}...; the spec's model has {want[:4]}... (names must match exactly)")
        with torch.no_grad():
            for name, p in self.params.items():
                t = dataset.init[name]
                if tuple(t.shape) != tuple(p.shape):
                    raise DatasetError(f"pretrained tensor {name!r} is {tuple(t.shape)}; the spec's model has {tuple(p.shape)}")
                p.copy_(t)

    # -- training -------------------------------------------------------------------------

    def _backward(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """Fresh gradients of the mean loss over ``(x, y)`` in each ``p.grad``; the loss."""
        for p in self.params.values():
            p.grad = None
        logits = self.model(x)
        loss = self.ops.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        return float(loss.detach().item())

    def train_step(self) -> float:
        """One optimizer step on batch ``self.step``; returns the loss (a float32 value).

        With ``micro_batches = m > 1`` the batch is cut into ``m`` equal consecutive parts, their
        gradients summed in order and divided by ``m``, and the loss is ``float32(fsum(losses) / m)``.
        Then the gradients are clipped (``grad_clip``) and the optimizer steps with the
        scheduled learning rate of the global step."""
        spec, fixed = self.spec, self.profile.repro
        x, y = self.order.batch(self.step)
        x, y = x.to(self.device), y.to(self.device)
        m = spec.micro_batches
        if m == 1:
            loss = self._backward(x, y)
        else:
            losses: list[float] = []
            acc: dict[str, torch.Tensor] = {}
            for xs, ys in zip(x.chunk(m), y.chunk(m)):
                losses.append(self._backward(xs, ys))
                grads = self._grads()
                if acc:
                    optim.accumulate(acc, grads, fixed)
                else:
                    acc = {n: g.clone() for n, g in grads.items()}
            optim.average(acc, m, fixed)
            for n, p in self.params.items():
                p.grad = acc[n]
            loss = float(np.float32(math.fsum(losses) / m))
        if spec.grad_clip is not None:
            optim.clip_by_global_norm(self._grads(), spec.grad_clip, fixed)
        lr = optim.learning_rate(spec.schedule, spec.optimizer.lr, spec.steps, self.step)
        self.optimizer.update(self.params, self.state, self.step, lr)
        self.step += 1
        return loss

    def _grads(self) -> dict[str, torch.Tensor]:
        """Each parameter's gradient, made contiguous in place (so kernels may write into it)."""
        out = {}
        for n, p in self.params.items():
            assert p.grad is not None
            p.grad = out[n] = p.grad.contiguous()
        return out

    def run(self, steps: int, progress: Progress | None = None, total: int | None = None) -> list[float]:
        """Advance ``steps`` steps under this trainer's runtime settings; each step's loss (float32 values)."""
        losses = []
        with runtime(self.rt):
            for _ in range(steps):
                losses.append(self.train_step())
                if progress is not None:
                    progress(self.step, total or self.spec.steps)
        return losses

    # -- state ----------------------------------------------------------------------------

    def tensors(self) -> dict[str, torch.Tensor]:
        """The live state tensors, keyed as in a checkpoint (no copy)."""
        out = {f"param.{n}": p.detach() for n, p in self.params.items()}
        out.update(self.state)
        return out

    def to_bytes(self) -> bytes:
        """Committed checkpoint bytes of the current state: canonical, sealed for a sealed job."""
        return bytes(seal_state(encode_checkpoint(self.step, self.tensors(), self.stamp), self.data_key))

    def state_hash(self) -> Bytes32:
        """The state hash of :meth:`to_bytes`; without making the bytes unless they are sealed."""
        if self.data_key is not None:
            return state_hash(self.to_bytes())
        return hash_state(self.step, self.tensors(), self.stamp)

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(
            step=self.step,
            spec_hash=self.stamp,
            tensors={k: v.detach().cpu().clone() for k, v in self.tensors().items()},
        )

    def load(self, ckpt: Checkpoint) -> None:
        """Set the state from a decoded checkpoint; refuses one that does not fit the spec."""
        self.check_fits(ckpt)
        live = self.tensors()
        with torch.no_grad():
            for name, t in ckpt.tensors.items():
                live[name].copy_(t)
        self.step = ckpt.step

    def check_fits(self, ckpt: Checkpoint) -> None:
        """:class:`CheckpointError` unless ``ckpt`` holds exactly this model's and optimizer's
        tensors, in their shapes, at a step within the job."""
        live = self.tensors()
        if sorted(ckpt.tensors) != sorted(live):
            extra = sorted(set(ckpt.tensors) - set(live))[:3]
            missing = sorted(set(live) - set(ckpt.tensors))[:3]
            raise CheckpointError(f"checkpoint does not fit the spec's model/optimizer: extra {extra}, missing {missing}")
        for name, t in ckpt.tensors.items():
            if tuple(t.shape) != tuple(live[name].shape):
                raise CheckpointError(f"tensor {name!r} is {tuple(t.shape)}; the spec's model has {tuple(live[name].shape)}")
        if ckpt.step > self.spec.steps:
            raise CheckpointError(f"checkpoint step {ckpt.step} is past the job's {self.spec.steps} steps")


def held_out_loss(trainer: Trainer) -> float:
    """The current model's mean loss on the spec's held-out split (``spec.eval``), computed with the
    spec's numerics, never trained on: examples in dataset order (tokens: consecutive windows of
    ``block_size``) in chunks of ``batch_size``, each chunk's mean times its count summed exactly
    (``math.fsum``), divided by the count in float64, rounded to float32."""
    held = trainer.order.dataset.held_out
    if held is None:
        raise ProofError("the spec holds out no evaluation split (spec.eval)")
    spec = trainer.spec
    if held.targets is None:
        block = spec.model.block_size  # type: ignore[union-attr]
        usable = (len(held.inputs) - 1) // block * block
        x, y = held.inputs[:usable].reshape(-1, block), held.inputs[1 : usable + 1].reshape(-1, block)
    else:
        x, y = held.inputs, held.targets
    parts, count = [], 0
    with runtime(trainer.rt), torch.no_grad():
        for at in range(0, x.shape[0], spec.batch_size):
            xb, yb = x[at : at + spec.batch_size].to(trainer.device), y[at : at + spec.batch_size].to(trainer.device)
            logits = trainer.model(xb)
            loss = trainer.ops.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1))
            parts.append(float(loss.item()) * yb.numel())  # exact: a float32 times at most 2**22
            count += yb.numel()
    return float(np.float32(math.fsum(parts) / count))


def model_held_out_loss(spec: JobSpec, dataset: Dataset, checkpoint: bytes, rt: Runtime = Runtime()) -> float:
    """:func:`held_out_loss` of the model in ``checkpoint`` (the final one: what the manifest commits
    and the verifier checks, a function of those bytes alone, like an update norm)."""
    trainer = Trainer(spec, dataset, rt)
    trainer.load(decode_checkpoint(checkpoint, expect_spec=spec.spec_hash(), data_key=dataset.data_key))
    return held_out_loss(trainer)


def segment_loss(losses: Sequence[float]) -> float:
    """A segment's mean training loss, as the manifest commits it: the exactly rounded sum of the
    steps' float32 losses (``math.fsum``), divided by their count in float64, rounded to float32.
    No reduction order is left to a library, so every replayer that gets the same per-step losses
    gets the same bits."""
    if not losses:
        raise ProofError("a segment has at least one step")
    return float(np.float32(math.fsum(losses) / len(losses)))


@dataclass(frozen=True)
class Trace:
    """A finished training trace: ``n + 1`` state hashes, ``n`` update norms and ``n`` mean
    training losses (:func:`segment_loss`), the tree.

    ``checkpoints`` holds the bytes when ``train_trace(keep=True)``; ``cids`` holds what
    ``put`` returned when one was given; ``eval_losses`` the ``(step, held-out loss)`` of each
    checkpoint ``spec.eval`` evaluates (:func:`held_out_loss`: reported, not committed);
    ``held_out_loss`` the final model's, which the manifest commits (None when the spec holds out nothing).
    """

    spec: JobSpec
    state_hashes: tuple[Bytes32, ...]
    update_norms: tuple[float, ...]
    losses: tuple[float, ...]
    tree: TraceTree
    checkpoints: tuple[bytes, ...] = ()
    cids: tuple[str, ...] = ()
    eval_losses: tuple[tuple[int, float], ...] = ()
    held_out_loss: float | None = None

    @property
    def root(self) -> Bytes32:
        return self.tree.root

    def manifest(self, spec_cid: str, checkpoint_cids: Sequence[str] | None = None) -> Manifest:
        """The manifest of this trace, with the CIDs ``put`` returned (or the ones given)."""
        cids = tuple(checkpoint_cids) if checkpoint_cids is not None else self.cids
        if len(cids) != len(self.state_hashes):
            raise ProofError(f"{len(cids)} checkpoint CIDs for {len(self.state_hashes)} checkpoints")
        return Manifest(
            spec_cid=spec_cid,
            spec_hash=self.spec.spec_hash(),
            steps=self.spec.steps,
            checkpoint_interval=self.spec.checkpoint_interval,
            root=self.root,
            checkpoints=tuple(CheckpointEntry(index=i, cid=c, state_hash=h) for i, (c, h) in enumerate(zip(cids, self.state_hashes))),
            update_norms=self.update_norms,
            losses=self.losses,
            held_out_loss=self.held_out_loss,
        )


@dataclass(frozen=True)
class Committed:
    """A checkpoint taken by a :class:`Committer`, once its ``write`` returned: its index, state
    hash (keccak256 of the bytes), CID (what ``ipfs add`` gives them), the mean training loss and
    the update norm of the segment it ends (None for checkpoint 0)."""

    index: int
    state_hash: Bytes32
    cid: Cid
    loss: float | None
    norm: float | None


#: Bytes hashed per call on the committer's thread: four UnixFS chunks, still in cache for the second hash.
_PIECE = 4 * CHUNK_SIZE


class Committer:
    """Takes checkpoints off the training thread, at most one in flight.

    On the training thread, :meth:`commit` computes the segment's update norm against the
    previous state (still in the committer's one reused :class:`StateBuffer`) and copies the
    state into that buffer: one copy, no fresh memory. A worker thread then (for a sealed job,
    after sealing them: a second copy, made there) reads the bytes once,
    feeding keccak256 (the state hash) and the UnixFS DAG's sha256 (the CID) piece by piece
    (both release the GIL), and calls ``write``. The next :meth:`commit` first waits for it, so
    memory is the state plus one buffer, and a slow disk slows training rather than piling up
    checkpoints. ``record`` gets each :class:`Committed` on the training thread, in order, once
    its ``write`` returned; an error of the worker (a failing write) is raised there, by the
    next :meth:`commit` or by :meth:`close` (the context manager's exit), which waits for the
    checkpoint in flight whatever stopped the training."""

    def __init__(self, write: Write, record: Callable[[Committed], None]) -> None:
        self._write = write
        self._record = record
        self._buffer = StateBuffer()
        self._held = False
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="commit")
        self._in_flight: Future[Committed] | None = None

    def __enter__(self) -> Committer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def hold(self, trainer: Trainer) -> None:
        """Take ``trainer``'s state as the last checkpoint without committing it (a resumed job's
        last checkpoint on disk): the next segment's update norm is measured from it."""
        self._settle()
        self._buffer.write(trainer.step, trainer.tensors(), trainer.stamp)
        self._held = True

    def commit(self, index: int, trainer: Trainer, loss: float | None) -> None:
        """Checkpoint ``index``: ``trainer``'s state after the segment whose mean loss is ``loss``
        (None for checkpoint 0, which has no segment and no norm)."""
        self._settle()
        norm = None
        if index > 0:
            if not self._held:
                raise ProofError(f"checkpoint {index} has no previous state to measure its update from")
            norm = update_norm(decode_checkpoint(self._buffer.view()).params(), trainer.params)
        data = self._buffer.write(trainer.step, trainer.tensors(), trainer.stamp)
        self._held = True
        self._in_flight = self._worker.submit(self._hash_and_write, index, data, loss, norm, trainer.data_key)

    def close(self) -> None:
        """Wait for the checkpoint in flight (recording it, or raising its error) and stop the worker."""
        try:
            self._settle()
        finally:
            self._worker.shutdown()

    def _settle(self) -> None:
        if self._in_flight is not None:
            done, self._in_flight = self._in_flight, None
            self._record(done.result())

    def _hash_and_write(self, index: int, plain: memoryview, loss: float | None, norm: float | None, data_key: bytes | None) -> Committed:
        data = memoryview(seal_state(plain, data_key))  # a sealed job's: sealed here, off the training thread
        hasher, dag = keccak_hasher(), DagBuilder()
        for at in range(0, len(data), _PIECE):
            piece = data[at : at + _PIECE]
            hasher.update(piece)
            dag.write(piece)
        self._write(index, data)
        return Committed(index, Bytes32(hasher.digest()), dag.finish(), loss, norm)


def train_trace(
    spec: JobSpec,
    dataset: Dataset,
    rt: Runtime = Runtime(),
    *,
    put: Put | None = None,
    keep: bool = True,
    progress: Progress | None = None,
) -> Trace:
    """Train the whole job, checkpointing every ``k`` steps, and commit to the trace.

    ``put`` stores each checkpoint's bytes as soon as it exists (returning its CID);
    ``keep=False`` drops the bytes from memory afterwards (for long jobs with ``put``).
    """
    trainer = Trainer(spec, dataset, rt)
    done: list[Committed] = []
    kept: list[bytes] = []
    cids: list[str] = []
    evals: list[tuple[int, float]] = []

    def write(_index: int, data: memoryview) -> None:
        if keep or put is not None:
            copy = bytes(data)
            if keep:
                kept.append(copy)
            if put is not None:
                cids.append(put(copy))

    def record(committed: Committed) -> None:
        done.append(committed)
        log.debug(
            "checkpoint", extra={"index": committed.index, "state_hash": hex32(committed.state_hash), "update_norm": committed.norm, "loss": committed.loss}
        )

    with Committer(write, record) as committer:
        for index in range(spec.segments + 1):
            loss = segment_loss(trainer.run(spec.checkpoint_interval, progress)) if index else None
            committer.commit(index, trainer, loss)
            if spec.eval is not None and trainer.step % spec.eval.every == 0:
                evals.append((trainer.step, held_out_loss(trainer)))
    final = None if spec.eval is None else evals[-1][1] if evals and evals[-1][0] == spec.steps else held_out_loss(trainer)
    hashes = [c.state_hash for c in done]
    return Trace(
        spec=spec,
        state_hashes=tuple(hashes),
        update_norms=tuple(c.norm for c in done[1:] if c.norm is not None),
        losses=tuple(c.loss for c in done[1:] if c.loss is not None),
        tree=TraceTree(hashes),
        checkpoints=tuple(kept),
        cids=tuple(cids),
        eval_losses=tuple(evals),
        held_out_loss=final,
    )
