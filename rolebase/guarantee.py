"""What a job's verification proves, in one line for people (``submit post``, ``submit show``, the dashboard).

A ``repro-v1`` or ``repro-v2`` job in exact mode is checked bit for bit: any trace that is not the honest one fails a
replay. A job that names ``"numerics": "torch"`` or tolerance mode is a **weaker guarantee**: replay
is bit-exact only on the solver's own hardware, and within tolerance windows a cheater can push
every segment (``tolerance-backdoor``: no segment fails), so such a job is always fully replayed
(``proofs.sampling.needs_full_replay``) and still only as sound as the windows and the replayer's
hardware (docs/proofs.md, "Full replay and the cheats of few segments").
"""

from __future__ import annotations

from proofs.numerics import profile
from proofs.sampling import needs_full_replay
from proofs.spec import JobSpec

__all__ = ["guarantee", "weaker_guarantee"]


def weaker_guarantee(spec: JobSpec) -> str | None:
    """One line saying why the spec is a weaker guarantee, or None for a bit-exact (repro numerics, exact) job."""
    if not needs_full_replay(spec):
        return None
    why = [f'"numerics": "{spec.numerics}" (bit-exact only on the same hardware)'] if not profile(spec.numerics).portable else []
    if spec.tolerance.mode == "tolerance":
        why.append(f"tolerance mode (a cheater may push every segment within l2 {spec.tolerance.l2:g}, linf {spec.tolerance.linf:g})")
    return f"weaker guarantee: {' and '.join(why)}; always fully replayed"


def guarantee(spec: JobSpec) -> str:
    """``exact`` or the :func:`weaker_guarantee` line."""
    return weaker_guarantee(spec) or "exact: every replayed step must match bit for bit"
