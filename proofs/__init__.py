"""veritrain's proof-of-learning engine.

The solver trains deterministically and commits to its trace; verifiers,
whistleblowers and referees check it. Each public name is imported from its module: this package
itself imports nothing, so a module that needs only parsing or hashing (``proofs.spec``,
``proofs.merkle``, ``proofs.manifest``) does not load torch, numba and the training stack, which
take seconds of every command's start::

    from proofs.spec import JobSpec, load_spec
    from proofs.data import load_dataset
    from proofs.train import Runtime, train_trace
    from proofs.manifest import load_manifest, write_manifest, MANIFEST_BLOCK
    from proofs.replay import verify_trace
    from proofs.probes import Probe, ProbeTree, probe_positions
    from proofs.checkpoint import state_hash
    from proofs.steps import execute_step, state_at

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
