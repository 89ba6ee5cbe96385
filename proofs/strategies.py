"""The names of the cheating solvers' strategies (:mod:`proofs.adversary` plays them), by class, and
which specs each can attack: what a command lists and checks before it loads the training stack."""

from __future__ import annotations

from proofs.spec import JobSpec

__all__ = ["STRATEGIES", "FEW_BAD", "ADAPTIVE", "FALSE_CLAIMS", "ALL_STRATEGIES", "inapplicable"]

#: The classic cheats: each fakes the segments it is given.
STRATEGIES = ("skip-steps", "wrong-lr", "wrong-data", "copy-weights", "fake-final", "tamper")
#: The cheats that need one bad segment or a few: only a full replay catches them whatever the job's length.
FEW_BAD = ("dead-units", "quiet-jumps", "tiny-gradient", "tolerance-backdoor")
#: The cheaters that know the verifier's rules and pick their fakes to fit them.
ADAPTIVE = ("free-start", "coast", "half-batch", "tolerance-drift", *FEW_BAD)
#: Honest training, false claims in the manifest.
FALSE_CLAIMS = ("false-loss",)
ALL_STRATEGIES = STRATEGIES + ADAPTIVE + FALSE_CLAIMS


def inapplicable(strategy: str, spec: JobSpec) -> str | None:
    """Why ``strategy`` cannot attack ``spec`` (None: it can). ``tiny-gradient`` also needs data
    the model fits, which only its fitting run finds out."""
    if strategy in ("tolerance-drift", "tolerance-backdoor") and spec.tolerance.mode != "tolerance":
        return f"{strategy} attacks tolerance-mode specs only"
    if strategy in ("dead-units", "quiet-jumps", "tiny-gradient") and spec.model.kind != "mlp":
        return f"{strategy} is written for MLP specs (units of a ReLU layer), not {spec.model.kind}"
    return None
