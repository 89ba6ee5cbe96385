"""The incentive game of one veritrain job, in closed form and by Monte Carlo (pure numpy, no chain).

Roles and moves (docs/incentives.md has the derivation and the figures):

* a solver cheats (commits a trace with a wrong segment) with probability ``cheat_rate`` q;
* the drawn verifier is HONEST (replays its sampled segments at cost c_v, finds a bad trace with
  probability d) or LAZY (passes without replaying, cost 0);
* with probability ``forced_error_rate`` p_f the verifier is forced to publish a wrong report while
  committing to its true one; the true report always decides the job, the forced verifier is not
  slashed, and the first whistleblower that challenges the error wins ``jackpot_share`` s of the
  pool (capped at a third, Truebit's bound);
* each of N whistleblowers audits a job with probability a at cost c_w; an audit finds a bad trace
  with probability d_w, a forced error with probability d_f and a lazy report with probability h
  (``replay_binding``: 1 when the report commits to a value only a replay yields, 0 when it can be
  copied from the solver's commitment);
* a verifier that passed a bad trace or a lazy report without being forced loses
  ``verifier_slash`` x B_v and its fee; the solver of a bad trace loses B_s; the finder (verifier or
  whistleblower) gets ``finder_share`` rho of what is slashed, the jackpot pool the rest (the deployed
  contracts pay all of it to the winner of the game: rho = 1);
* the pool also receives ``jackpot_tax`` t of each job's payment (R + F), paid by the submitter on top.

Amounts are in tokens (one job reward R = 100 by default); every probability is per job.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from core.errors import ConfigError

__all__ = [
    "MAX_JACKPOT_SHARE",
    "Equilibrium",
    "GameParams",
    "SimResult",
    "Strategy",
    "Estimate",
    "audit_revenue",
    "blind_challenge_value",
    "catch_event_rate",
    "default_burn_in",
    "equilibrium",
    "expected_slashed",
    "honesty_margin",
    "lazy_catch_rate",
    "min_cheat_rate_for_honesty",
    "pool_inflow",
    "simulate",
    "steady_jackpot",
    "steady_pool",
    "verifier_payoff",
    "whistleblower_profit",
]

_BPS = 10_000
_UNIT = 10**18  # token base units per token (VeriToken has 18 decimals)

MAX_JACKPOT_SHARE = 1.0 / 3.0
"""Truebit: one jackpot payout takes at most a third of the pool."""

_PROBABILITIES = (
    "forced_error_rate",
    "jackpot_tax",
    "jackpot_share",
    "verifier_slash",
    "finder_share",
    "cheat_rate",
    "audit_rate",
    "detect",
    "detect_audit",
    "forced_detect",
    "replay_binding",
)
_AMOUNTS = ("reward", "fee", "replay_cost", "audit_cost", "verifier_bond", "solver_bond", "whistleblower_bond")
_MAX_WHISTLEBLOWERS = 10_000
_MAX_JOBS = 10_000_000


class Strategy(enum.Enum):
    """What the drawn verifier does."""

    HONEST = "honest"  # replays its sampled segments
    LAZY = "lazy"  # reports pass without replaying


@dataclass(frozen=True)
class GameParams:
    """Parameters of one job's game. Symbols as in docs/incentives.md; defaults are the proposed deployment."""

    reward: float = 100.0  # R, paid to the solver
    fee: float = 10.0  # F, paid to the verifier
    replay_cost: float = 5.0  # c_v, the verifier's cost of replaying its sample (here half the fee)
    audit_cost: float = 5.0  # c_w, a whistleblower's cost of one audit
    forced_error_rate: float = 0.01  # p_f
    jackpot_tax: float = 0.03  # t, share of R + F paid into the pool
    jackpot_share: float = 0.2  # s, share of the pool paid per caught forced error (capped at 1/3)
    verifier_bond: float = 20.0  # B_v (JobMarket: verifierBondBps 2000 of R)
    verifier_slash: float = 1.0  # sigma_v, share of B_v slashed for passing a bad trace / a lazy report
    solver_bond: float = 50.0  # B_s (JobMarket: solverBondBps 5000 of R)
    finder_share: float = 1.0  # rho, share of slashed stake paid to whoever proved the fault (on chain: all of it)
    whistleblower_bond: float = 20.0  # B_w, posted with a challenge, lost if the challenge is wrong
    cheat_rate: float = 0.05  # q, environment: share of solvers that commit a bad trace
    audit_rate: float = 0.5  # a, each whistleblower's probability of auditing a job
    whistleblowers: int = 1  # N, whistleblowers watching each job
    detect: float = 0.99  # d, the verifier's detection probability of a bad trace (proofs/sampling.py)
    detect_audit: float = 0.99  # d_w, an audit's detection probability of a bad trace
    forced_detect: float = 1.0  # d_f, an audit's detection probability of a forced error
    replay_binding: float = 1.0  # h, an audit's detection probability of a lazy report on any trace

    def __post_init__(self) -> None:
        for name in _PROBABILITIES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must lie in [0, 1], got {value}")
        for name in _AMOUNTS:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ConfigError(f"{name} must be a finite amount >= 0, got {value}")
        if not 1 <= self.whistleblowers <= _MAX_WHISTLEBLOWERS:
            raise ConfigError(f"whistleblowers must lie in [1, {_MAX_WHISTLEBLOWERS}], got {self.whistleblowers}")

    @property
    def payout_share(self) -> float:
        """s as paid: the jackpot share capped at a third of the pool."""
        return min(self.jackpot_share, MAX_JACKPOT_SHARE)

    @property
    def audited(self) -> float:
        """A = 1 - (1 - a)^N: probability that at least one whistleblower audits a job."""
        if self.audit_rate == 1.0:
            return 1.0
        return -math.expm1(self.whistleblowers * math.log1p(-self.audit_rate))  # exact for tiny a as well

    @property
    def win_share(self) -> float:
        """phi = E[1 / (1 + K)], K ~ Bin(N - 1, a): a whistleblower's chance of being first, given it audits."""
        n, a = self.whistleblowers, self.audit_rate
        return 1.0 if a == 0.0 or n == 1 else self.audited / (n * a)

    @property
    def lazy_detect(self) -> float:
        """d_L = 1 - (1 - d_w)(1 - h): an audit's detection probability of a lazy pass of a bad trace."""
        return 1.0 - (1.0 - self.detect_audit) * (1.0 - self.replay_binding)

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_deployment(cls, deployment: Mapping[str, Any], *, reward: float = 100.0, fee: float = 10.0, **rest: Any) -> GameParams:
        """The model of a job of ``reward`` + ``fee`` tokens under a deployment parameters file.

        ``deployment`` is a ``deploy/params/*.json`` object (its ``market`` and ``game`` parts, amounts
        in token base units of 18 decimals): p_f, t, s and the bonds come from it; sigma_v = rho = 1
        because the contracts slash the whole verifier bond and pay every slash to the game's winner.
        ``rest`` sets the behavioural parameters (costs, q, a, N, detection rates).
        """
        market, game = deployment["market"], deployment["game"]

        def bond(bps_key: str, min_key: str) -> float:
            return max(reward * market[bps_key] / _BPS, market[min_key] / _UNIT)

        return cls(
            reward=reward,
            fee=fee,
            forced_error_rate=market["forcedErrorRateBps"] / _BPS,
            jackpot_tax=market["jackpotTaxBps"] / _BPS,
            jackpot_share=market["jackpotShareBps"] / _BPS,
            verifier_bond=bond("verifierBondBps", "minVerifierBond"),
            solver_bond=bond("solverBondBps", "minSolverBond"),
            verifier_slash=1.0,
            finder_share=1.0,
            whistleblower_bond=game["challengeBond"] / _UNIT,
            **rest,
        )


# ---------------------------------------------------------------- closed form


def _q(p: GameParams, q: float | None) -> float:
    return p.cheat_rate if q is None else q


def verifier_payoff(p: GameParams, strategy: Strategy, q: float | None = None) -> float:
    """Expected payoff per job of the drawn verifier (fee, finder rewards, slashes, replay cost).

    HONEST: -c_v + (1-q) F + q [d (F + rho B_s) + (1-d)((1 - A d_w) F - A d_w sigma B_v)]
    LAZY:   (1-q) [(1 - A h) F - A h sigma B_v] + q [(1 - A d_L) F - A d_L sigma B_v]
    """
    q = _q(p, q)
    A, F, penalty = p.audited, p.fee, p.verifier_slash * p.verifier_bond
    if strategy is Strategy.HONEST:
        caught = A * p.detect_audit  # a missed bad trace later found by a whistleblower
        bad = p.detect * (F + p.finder_share * p.solver_bond) + (1 - p.detect) * ((1 - caught) * F - caught * penalty)
        return -p.replay_cost + (1 - q) * F + q * bad
    on_honest = A * p.replay_binding
    on_bad = A * p.lazy_detect
    return (1 - q) * ((1 - on_honest) * F - on_honest * penalty) + q * ((1 - on_bad) * F - on_bad * penalty)


def honesty_margin(p: GameParams, q: float | None = None) -> float:
    """U_honest - U_lazy for the verifier; at q = 0 it is A h (F + sigma B_v) - c_v."""
    return verifier_payoff(p, Strategy.HONEST, q) - verifier_payoff(p, Strategy.LAZY, q)


def min_cheat_rate_for_honesty(p: GameParams) -> float:
    """The least cheating rate q* at which replaying pays (the margin is linear in q).

    0 when honesty dominates at every q; math.inf when laziness pays even if every trace is bad.
    """
    m0, m1 = honesty_margin(p, 0.0), honesty_margin(p, 1.0)
    if m0 >= 0.0:
        return 0.0
    if m1 <= 0.0:
        return math.inf
    return m0 / (m0 - m1)


def lazy_catch_rate(p: GameParams, q: float | None = None) -> float:
    """Probability that a lazy verifier is slashed on a job: (1-q) A h + q A d_L."""
    q = _q(p, q)
    return p.audited * ((1 - q) * p.replay_binding + q * p.lazy_detect)


def expected_slashed(p: GameParams, strategy: Strategy, q: float | None = None) -> float:
    """Expected stake slashed per job (solver and verifier together)."""
    q = _q(p, q)
    A, both, vb = p.audited, p.solver_bond + p.verifier_slash * p.verifier_bond, p.verifier_slash * p.verifier_bond
    if strategy is Strategy.HONEST:
        return q * (p.detect * p.solver_bond + (1 - p.detect) * A * p.detect_audit * both)
    only_lazy = A * (1 - p.detect_audit) * p.replay_binding
    return q * (A * p.detect_audit * both + only_lazy * vb) + (1 - q) * A * p.replay_binding * vb


def pool_inflow(p: GameParams, strategy: Strategy, q: float | None = None) -> float:
    """I: expected tokens into the jackpot pool per job, t (R + F) + (1 - rho) x slashed."""
    return p.jackpot_tax * (p.reward + p.fee) + (1 - p.finder_share) * expected_slashed(p, strategy, q)


def catch_event_rate(p: GameParams) -> float:
    """pi = p_f A d_f: probability per job that a forced error is caught (and a jackpot paid)."""
    return p.forced_error_rate * p.audited * p.forced_detect


def steady_jackpot(p: GameParams, strategy: Strategy, q: float | None = None) -> float:
    """J* = I / pi: the mean payout per caught forced error once the pool is stationary.

    Stationarity of E[P] under P' = (P + I)(1 - s X) gives s pi (P + E[I | X]) = E[I], and the payout
    is s (P + I): so J* does not depend on s. math.inf when no forced error is ever caught.
    """
    rate = catch_event_rate(p)
    return math.inf if rate == 0.0 else pool_inflow(p, strategy, q) / rate


def steady_pool(p: GameParams, strategy: Strategy, q: float | None = None) -> float:
    """Approximate stationary pool balance, I / (s pi) (exact up to one job's inflow)."""
    rate = catch_event_rate(p) * p.payout_share
    return math.inf if rate == 0.0 else pool_inflow(p, strategy, q) / rate


def _finder_value(p: GameParams, strategy: Strategy, q: float) -> float:
    """Expected slashed stake an audit proves, given the job is audited (before rho and sharing)."""
    both, vb = p.solver_bond + p.verifier_slash * p.verifier_bond, p.verifier_slash * p.verifier_bond
    if strategy is Strategy.HONEST:
        return q * (1 - p.detect) * p.detect_audit * both
    return q * (p.detect_audit * both + (1 - p.detect_audit) * p.replay_binding * vb) + (1 - q) * p.replay_binding * vb


def audit_revenue(p: GameParams, strategy: Strategy, q: float | None = None, jackpot: float | None = None) -> float:
    """Expected reward of ONE audit: phi (p_f d_f J + rho x proven slashes).

    ``jackpot`` is the payout J of a caught forced error now (s x pool); None takes the stationary J*,
    for which the forced-error part is phi I / A = I / (N a): the pool's inflow shared by the audits.
    """
    q = _q(p, q)
    if p.forced_error_rate == 0.0 or p.forced_detect == 0.0:
        forced = 0.0  # no forced error is ever caught: the pool pays nothing
    elif jackpot is None:
        forced = p.forced_error_rate * p.forced_detect * steady_jackpot(p, strategy, q) if p.audited > 0 else 0.0
    else:
        forced = p.forced_error_rate * p.forced_detect * jackpot
    return p.win_share * (forced + p.finder_share * _finder_value(p, strategy, q))


def whistleblower_profit(p: GameParams, strategy: Strategy, q: float | None = None, jackpot: float | None = None) -> float:
    """Expected profit per job of one whistleblower that audits with probability a: a (revenue - c_w)."""
    return p.audit_rate * (audit_revenue(p, strategy, q, jackpot) - p.audit_cost)


def blind_challenge_value(p: GameParams, jackpot: float) -> float:
    """Expected value of challenging a report WITHOUT auditing it (hoping it was forced): p_f J - (1 - p_f) B_w.

    Must be negative, or whistleblowers stop auditing and challenge at random: B_w > p_f J / (1 - p_f).
    """
    return p.forced_error_rate * jackpot - (1 - p.forced_error_rate) * p.whistleblower_bond


@dataclass(frozen=True)
class Equilibrium:
    """Where the parameters stand against each condition (margins >= 0 hold)."""

    honesty_margin_q0: float  # U_H - U_L when no solver cheats (the hardest case for honesty)
    honesty_margin_q1: float  # U_H - U_L when every solver cheats
    min_cheat_rate: float  # q* above which replaying pays (0: honesty dominates)
    audit_margin_q0: float  # audit revenue - c_w against honest verifiers and solvers, stationary pool
    truebit_margin: float  # p_f J* - c_w (Truebit: J >= fair pay per task / p_f)
    blind_challenge: float  # p_f J* - (1 - p_f) B_w, must be < 0
    share_within_bound: bool  # s <= 1/3

    @property
    def honesty_dominates(self) -> bool:
        return self.honesty_margin_q0 >= 0.0 and self.honesty_margin_q1 >= 0.0

    @property
    def auditing_pays(self) -> bool:
        return self.audit_margin_q0 >= 0.0

    @property
    def holds(self) -> bool:
        """Honesty dominates laziness for every q, auditing pays even when nobody cheats, the Truebit bounds hold
        and blind challenges lose money."""
        return self.honesty_dominates and self.auditing_pays and self.truebit_margin >= 0.0 and self.blind_challenge < 0.0 and self.share_within_bound


def equilibrium(p: GameParams) -> Equilibrium:
    """Check the equilibrium conditions of docs/incentives.md at the stationary pool."""
    jackpot = steady_jackpot(p, Strategy.HONEST, 0.0)
    finite = math.isfinite(jackpot)
    return Equilibrium(
        honesty_margin_q0=honesty_margin(p, 0.0),
        honesty_margin_q1=honesty_margin(p, 1.0),
        min_cheat_rate=min_cheat_rate_for_honesty(p),
        audit_margin_q0=audit_revenue(p, Strategy.HONEST, 0.0) - p.audit_cost,
        truebit_margin=p.forced_error_rate * jackpot - p.audit_cost if finite else -p.audit_cost,
        blind_challenge=blind_challenge_value(p, jackpot) if finite else -math.inf,
        share_within_bound=p.jackpot_share <= MAX_JACKPOT_SHARE,
    )


# ---------------------------------------------------------------- Monte Carlo


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo mean with its batch-means standard error (robust to the pool's autocorrelation)."""

    mean: float
    se: float

    def within(self, expected: float, sigmas: float) -> bool:
        return abs(self.mean - expected) <= sigmas * self.se + 1e-12 * max(1.0, abs(expected))


@dataclass(frozen=True)
class SimResult:
    """What one simulated run measured over its measurement window (after burn-in)."""

    strategy: Strategy
    jobs: int
    verifier_payoff: Estimate
    whistleblower_profit: Estimate  # whistleblower 0, per job
    verifier_slashed: Estimate  # share of jobs where the verifier was slashed
    slashed_given_bad: Estimate  # the same among jobs with a bad trace
    catch_events: Estimate  # share of jobs where a forced error was caught
    jackpot_per_catch: float  # mean payout per caught forced error
    catches: int
    pool_inflow: Estimate
    max_payout_ratio: float  # max over payouts of payout / pool held at that moment (whole run)
    min_pool: float  # least pool balance seen (whole run)
    final_pool: float
    conservation_error: float  # |pool0 + inflows - payouts - final pool| (whole run)


def _estimate(values: np.ndarray, batches: int) -> Estimate:
    usable = len(values) - len(values) % batches
    means = values[:usable].reshape(batches, -1).mean(axis=1)
    return Estimate(float(values.mean()), float(means.std(ddof=1) / math.sqrt(batches)))


def default_burn_in(p: GameParams) -> int:
    """Ten time constants of the pool, 10 / (s pi) jobs (0 when no jackpot is ever paid), at most 10^6."""
    rate = catch_event_rate(p) * p.payout_share
    return 0 if rate == 0.0 else min(1_000_000, math.ceil(10.0 / rate))


def simulate(
    p: GameParams,
    strategy: Strategy,
    jobs: int = 100_000,
    seed: int = 0,
    burn_in: int | None = None,
    pool0: float = 0.0,
    batches: int = 20,
) -> SimResult:
    """Play ``jobs`` jobs (after ``burn_in`` jobs that fill the pool from ``pool0``), vectorized over jobs.

    Every verifier plays ``strategy``. Only the jackpot pool is sequential; it changes by a payout only
    at a caught forced error, so the loop runs over those events (about pi x jobs of them).
    """
    burn = default_burn_in(p) if burn_in is None else burn_in
    total = burn + jobs
    if not 0 < jobs <= _MAX_JOBS or not 0 <= burn <= _MAX_JOBS or batches < 2 or jobs < batches:
        raise ConfigError(f"jobs {jobs} / burn_in {burn} / batches {batches} out of bounds")
    rng = np.random.default_rng(seed)
    u = lambda: rng.random(total)  # noqa: E731 - one fresh uniform per job and event
    cheat = u() < p.cheat_rate
    forced = u() < p.forced_error_rate
    verifier_finds = u() < p.detect
    focal = u() < p.audit_rate
    auditors = focal + rng.binomial(p.whistleblowers - 1, p.audit_rate, total)
    audited = auditors > 0
    audit_finds_bad = u() < p.detect_audit
    audit_finds_lazy = u() < p.replay_binding
    audit_finds_forced = u() < p.forced_detect
    focal_first = focal & (u() * np.maximum(auditors, 1) < 1.0)  # the first challenger, uniform among auditors

    penalty = p.verifier_slash * p.verifier_bond
    if strategy is Strategy.HONEST:
        rejected = cheat & verifier_finds
        found = cheat & ~verifier_finds & audited & audit_finds_bad
        slashed_verifier = found
        verifier = np.where(found, -penalty, p.fee) - p.replay_cost + np.where(rejected, p.finder_share * p.solver_bond, 0.0)
        slashed = np.where(rejected, p.solver_bond, 0.0) + np.where(found, p.solver_bond + penalty, 0.0)
        proven_by_audit = np.where(found, p.solver_bond + penalty, 0.0)
    else:
        found = cheat & audited & audit_finds_bad
        only_lazy = ~found & audited & audit_finds_lazy
        slashed_verifier = found | only_lazy
        verifier = np.where(slashed_verifier, -penalty, p.fee)
        slashed = np.where(found, p.solver_bond + penalty, 0.0) + np.where(only_lazy, penalty, 0.0)
        proven_by_audit = slashed
    inflow = p.jackpot_tax * (p.reward + p.fee) + (1 - p.finder_share) * slashed

    caught = forced & audited & audit_finds_forced
    payouts, held = np.zeros(total), np.zeros(total)
    cum = np.cumsum(inflow)
    pool, added_upto = pool0, 0.0
    for i in np.flatnonzero(caught):
        pool += cum[i] - added_upto  # inflow of every job since the last payout, this one included
        added_upto = cum[i]
        held[i] = pool
        payouts[i] = p.payout_share * pool
        pool -= payouts[i]
    final_pool = pool + cum[-1] - added_upto
    pool_lows = held - payouts  # the pool right after each payout; it only grows in between
    min_pool = min(pool0, final_pool, float(pool_lows[caught].min()) if caught.any() else pool0)
    ratios = payouts[caught] / np.where(held[caught] > 0, held[caught], 1.0)

    whistleblower = np.where(focal_first, payouts + p.finder_share * proven_by_audit, 0.0) - np.where(focal, p.audit_cost, 0.0)
    window = slice(burn, total)
    bad = cheat[window]
    window_caught = caught[window]
    return SimResult(
        strategy=strategy,
        jobs=jobs,
        verifier_payoff=_estimate(verifier[window], batches),
        whistleblower_profit=_estimate(whistleblower[window], batches),
        verifier_slashed=_estimate(slashed_verifier[window].astype(float), batches),
        slashed_given_bad=_estimate(slashed_verifier[window][bad].astype(float), batches) if bad.sum() >= batches else Estimate(math.nan, math.nan),
        catch_events=_estimate(window_caught.astype(float), batches),
        jackpot_per_catch=float(payouts[window][window_caught].mean()) if window_caught.any() else 0.0,
        catches=int(window_caught.sum()),
        pool_inflow=_estimate(inflow[window], batches),
        max_payout_ratio=float(ratios.max()) if ratios.size else 0.0,
        min_pool=min_pool,
        final_pool=float(final_pool),
        conservation_error=float(abs(pool0 + cum[-1] - payouts.sum() - final_pool)),
    )
