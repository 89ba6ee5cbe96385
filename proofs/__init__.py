"""veritrain's proof-of-learning engine.

The solver trains deterministically and commits to its trace; verifiers,
whistleblowers and referees check it. Public API (stable names)::

    from proofs import (JobSpec, load_spec, load_dataset, train_trace, Runtime,
                        TraceTree, write_manifest, load_manifest, choose_segments, verify_trace)

    spec = load_spec(spec_bytes)                      # SpecError / LimitExceeded on bad input
    dataset = load_dataset(spec, dataset_bytes)       # DatasetError on bad data
    trace = train_trace(spec, dataset, put=store.put, progress=bar)   # solver
    manifest = trace.manifest(spec_cid)               # CIDs from put
    manifest_cid = write_manifest(store.put, manifest)  # its root's CID (pages first when it spans blocks)
    trace.root, trace.tree.proof(i)                   # on-chain commitment: bytes32 root and proof (bytes)

    manifest = load_manifest(store.get(manifest_cid, MANIFEST_BLOCK), lambda c: store.get(c, MANIFEST_BLOCK), spec)   # verifier
    verdict = verify_trace(spec, dataset, manifest, fetch=lambda i: store.get(manifest.checkpoint_cids[i]),
                           seed=onchain_randomness)   # verdict.passed, verdict.failures[0].detail

    probes = [Probe(i, s, m, state_hash(...)) for i, s, m in probe_positions(seed, count, n + 1, k)]
    ProbeTree(probes).root, .proof(i)                 # a passing report's probe commitment

    state_at(spec, dataset, ckpt_bytes, step)         # dispute: state hash at a bisection midpoint
    execute_step(spec, dataset, agreed_state_bytes)   # referee: one step

Every error is a :class:`proofs.errors.ProofError`.
"""

from proofs.adversary import ADAPTIVE, ALL_STRATEGIES, FALSE_CLAIMS, FEW_BAD, STRATEGIES, CheatTrace, cheat, mix
from proofs.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint, state_hash, update_norm
from proofs.data import BatchOrder, Dataset, load_dataset
from proofs.errors import (
    CheckpointError,
    DatasetError,
    HashMismatch,
    LimitExceeded,
    ManifestError,
    MerkleError,
    ProofError,
    SegmentOutOfRange,
    SpecError,
)
from proofs.evaluate import Evaluation, evaluate, sample_tokens
from proofs.manifest import MANIFEST_BLOCK, CheckpointEntry, Manifest, load_manifest, parse_manifest, write_manifest
from proofs.merkle import TraceTree, leaf_hash, verify_proof
from proofs.probes import (
    FORCED_DOMAIN,
    Probe,
    ProbeTree,
    forced_commitment,
    forced_hash,
    is_forced,
    parse_probe,
    probe_json,
    probe_positions,
    probe_segment,
    probe_step,
    verify_probe,
)
from proofs.replay import (
    Distances,
    Reason,
    SegmentVerdict,
    TraceReplay,
    TraceVerdict,
    check_committed_manifest,
    check_held_out,
    check_loss,
    check_manifest,
    check_norm,
    check_start,
    committed_manifest,
    distances,
    first_idle_step,
    initial_state,
    initial_state_hash,
    moved_frozen,
    referee_step,
    replay_segment,
    verify_trace,
)
from proofs.sampling import (
    DEFAULT_Q,
    DEFAULT_R,
    Selection,
    caught_probability,
    choose_segments,
    detection_probability,
    full_replay_drawn,
    needs_full_replay,
    replay_fraction,
    required_random,
)
from proofs.spec import JobSpec, Limits, Tolerance, load_spec
from proofs.steps import execute_step, state_at
from proofs.train import Runtime, Trace, Trainer, segment_loss, train_trace

__all__ = [
    # spec and data
    "JobSpec", "Limits", "Tolerance", "load_spec", "Dataset", "BatchOrder", "load_dataset",
    # training and checkpoints
    "Runtime", "Trainer", "Trace", "train_trace", "segment_loss",
    "Checkpoint", "encode_checkpoint", "decode_checkpoint", "state_hash", "update_norm",
    # commitment
    "TraceTree", "leaf_hash", "verify_proof", "Manifest", "CheckpointEntry", "parse_manifest", "load_manifest", "write_manifest", "MANIFEST_BLOCK",
    # verification
    "replay_segment", "TraceReplay", "verify_trace", "SegmentVerdict", "TraceVerdict", "Reason", "Distances", "distances",
    "moved_frozen", "initial_state", "initial_state_hash", "check_start", "check_manifest", "check_committed_manifest", "committed_manifest", "check_norm", "check_loss", "check_held_out", "first_idle_step", "referee_step",
    "Selection", "choose_segments", "detection_probability", "required_random", "replay_fraction",
    "DEFAULT_Q", "DEFAULT_R", "full_replay_drawn", "needs_full_replay", "caught_probability",
    # probes of a passing report, forced errors
    "Probe", "probe_json", "parse_probe", "ProbeTree", "probe_segment", "probe_step", "probe_positions", "verify_probe",
    "forced_commitment", "is_forced", "forced_hash", "FORCED_DOMAIN",
    # disputes
    "state_at", "execute_step",
    # evaluation of a trained model
    "Evaluation", "evaluate", "sample_tokens",
    # adversaries
    "STRATEGIES", "ADAPTIVE", "FEW_BAD", "FALSE_CLAIMS", "ALL_STRATEGIES", "CheatTrace", "cheat", "mix",
    # errors
    "ProofError", "SpecError", "LimitExceeded", "DatasetError", "CheckpointError", "HashMismatch",
    "ManifestError", "MerkleError", "SegmentOutOfRange",
]  # fmt: skip
