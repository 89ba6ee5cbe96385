"""Which segments a verifier replays, and how likely that is to catch a cheat.

A selection is made of three distinct parts:

* the **last** segment, always (it produces the model the submitter is paid for);
* the **top-Q** segments by update norm among the others (spoofed segments tend to
  show large updates: Jia et al. 2021). The norms are the solver's claims, checked only on
  the segments fetched, so an adaptive cheater keeps its fakes out of top-Q: the guarantees
  below are the ``worst`` case, which credits top-Q with nothing (docs/proofs.md,
  "Adaptive cheaters");
* **R** segments drawn uniformly without replacement from the rest, from a 32-byte
  seed fixed on chain after the solver committed (so the solver could not know it).

The random draw is a partial Fisher-Yates shuffle whose i-th swap index is
``keccak256(seed || uint256(i)) mod remaining``: reproducible by anyone, in
Solidity too.

Detection (at least one bad segment replayed), for ``b`` bad segments out of
``n`` with ``d = Q + 1`` deterministic picks:

* ``worst`` (the cheater keeps every bad segment out of the deterministic picks,
  e.g. fakes with small norms, none in the last segment): only the random part
  can catch it, hypergeometric::

      P = 1 - C(n - d - b, R) / C(n - d, R)

* ``uniform`` (bad segments placed at random): ``P = 1 - C(n - b, d + R) / C(n, d + R)``.

A job can also be **fully replayed** (every segment, from the seeded initialization): at random,
with probability ``fullReplayRateBps / 1e4`` by the draw's coin (:func:`full_replay_drawn`, the
contract's ``isFullReplayDraw``), and always when its spec is replayed with windows or on
hardware-bound kernels (:func:`needs_full_replay`). A full replay catches any trace that is not
the honest one, however few segments differ, so a cheat is caught with probability at least
``p + (1 - p) * P`` (:func:`caught_probability`).

The defaults (:data:`DEFAULT_Q`, :data:`DEFAULT_R`) keep replay at
``(Q + 1 + R) / n`` < 5% of training for ``n >= 1000`` while the worst case
catches a cheat on >= 10% of segments with probability >= 99%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from proofs.errors import ProofError
from proofs.keccak import keccak
from proofs.merkle import to_bytes32
from proofs.numerics import profile
from proofs.spec import JobSpec

__all__ = [
    "DEFAULT_Q",
    "DEFAULT_R",
    "Selection",
    "choose_segments",
    "detection_probability",
    "required_random",
    "replay_fraction",
    "FULL_REPLAY_TAG",
    "full_replay_drawn",
    "needs_full_replay",
    "caught_probability",
]

#: Domain tag of the full-replay coin: keccak256("veritrain/full-replay"), as in JobMarket.
FULL_REPLAY_TAG = keccak(b"veritrain/full-replay")
BPS = 10_000

DEFAULT_Q = 2
DEFAULT_R = 44

Model = Literal["worst", "uniform"]


@dataclass(frozen=True)
class Selection:
    """The segments to replay: ``last``, ``top`` (by norm, descending) and ``random`` (in draw order)."""

    n: int
    last: int | None
    top: tuple[int, ...]
    random: tuple[int, ...]

    @property
    def segments(self) -> tuple[int, ...]:
        """All selected segments, ascending."""
        picks = set(self.top) | set(self.random) | ({self.last} if self.last is not None else set())
        return tuple(sorted(picks))


def choose_segments(
    update_norms: Sequence[float],
    seed: bytes | str,
    q: int = DEFAULT_Q,
    r: int = DEFAULT_R,
    *,
    include_last: bool = True,
) -> Selection:
    """Select segments of a trace with ``len(update_norms)`` segments (see the module doc).

    Ties in norm go to the lower index. When ``1 + q + r >= n`` every segment is selected.
    """
    n = len(update_norms)
    if n < 1:
        raise ProofError("a trace has at least one segment")
    if q < 0 or r < 0:
        raise ProofError(f"q and r must be non-negative, got q={q}, r={r}")
    if any(not math.isfinite(x) or x < 0 for x in update_norms):
        raise ProofError("update norms must be finite and non-negative")
    seed32 = to_bytes32(seed, "sampling seed")
    last = n - 1 if include_last else None
    others = [i for i in range(n) if i != last]
    top = tuple(sorted(others, key=lambda i: (-update_norms[i], i))[:q])
    pool = [i for i in others if i not in set(top)]
    picks = min(r, len(pool))
    for i in range(picks):
        j = i + int.from_bytes(keccak(seed32 + i.to_bytes(32, "big")), "big") % (len(pool) - i)
        pool[i], pool[j] = pool[j], pool[i]
    return Selection(n=n, last=last, top=top, random=tuple(pool[:picks]))


def _miss_hypergeometric(population: int, bad: int, draws: int) -> float:
    """P(no bad item in ``draws`` draws without replacement) = C(pop-bad, draws) / C(pop, draws)."""
    if draws > population - bad:
        return 0.0
    p = 1.0
    for i in range(draws):
        p *= (population - bad - i) / (population - i)
    return p


def detection_probability(
    bad: int,
    n: int,
    q: int = DEFAULT_Q,
    r: int = DEFAULT_R,
    *,
    include_last: bool = True,
    model: Model = "worst",
) -> float:
    """Probability that a selection replays at least one of ``bad`` bad segments out of ``n``."""
    if not 0 <= bad <= n or n < 1:
        raise ProofError(f"need 0 <= bad <= n and n >= 1, got bad={bad}, n={n}")
    if bad == 0:
        return 0.0
    others = n - 1 if include_last else n
    d = min(q, others) + (1 if include_last else 0)
    rr = min(r, n - d)
    if model == "uniform":
        return 1.0 - _miss_hypergeometric(n, bad, d + rr)
    if bad > n - d:  # cannot keep every bad segment out of the deterministic picks
        return 1.0
    return 1.0 - _miss_hypergeometric(n - d, bad, rr)


def required_random(fraction: float, n: int, target: float = 0.99, q: int = DEFAULT_Q, *, include_last: bool = True) -> int:
    """Smallest R whose worst-case detection of ``ceil(fraction * n)`` bad segments reaches ``target``."""
    bad = max(1, math.ceil(fraction * n - 1e-9))
    for r in range(0, n + 1):
        if detection_probability(bad, n, q, r, include_last=include_last) >= target:
            return r
    return n


def replay_fraction(n: int, q: int = DEFAULT_Q, r: int = DEFAULT_R, *, include_last: bool = True) -> float:
    """Share of the job's training steps a verifier re-executes: selected segments / n."""
    return min(n, q + r + (1 if include_last else 0)) / n


def full_replay_drawn(assign_seed: bytes | str, rate_bps: int) -> bool:
    """The draw's full-replay coin: ``uint256(keccak256(abi.encode(assignSeed, FULL_REPLAY_TAG))) %
    1e4 < rate_bps`` (JobMarket.isFullReplayDraw)."""
    if not 0 <= rate_bps <= BPS:
        raise ProofError(f"a full-replay rate is 0..{BPS} bps, got {rate_bps}")
    word = keccak(to_bytes32(assign_seed, "assign seed") + FULL_REPLAY_TAG)
    return int.from_bytes(word, "big") % BPS < rate_bps


def needs_full_replay(spec: JobSpec) -> bool:
    """Whether a job must be fully replayed whatever the coin: its spec names ``"numerics": "torch"``
    (bit-exact on the same hardware only) or tolerance mode. Within the windows a cheater can push
    every segment (``tolerance-backdoor``: no segment fails), so sampling proves nothing there and
    such a job is a weaker guarantee (docs/proofs.md, "Full replay and the cheats of few segments")."""
    return not profile(spec.numerics).portable or spec.tolerance.mode == "tolerance"


def caught_probability(sampled: float, p: float, *, differs: bool = True) -> float:
    """A cheat's catch probability when a job is fully replayed with probability ``p`` and otherwise
    sampled (``sampled``: its catch probability under sampling alone). A full replay catches every
    trace that ``differs`` from the honest one."""
    return p + (1.0 - p) * sampled if differs else sampled
