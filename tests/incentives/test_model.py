"""The incentive game's closed forms (limit cases, identities) and the Monte Carlo that must agree with them."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.incentives_model import (
    MAX_JACKPOT_SHARE,
    GameParams,
    Strategy,
    audit_revenue,
    catch_event_rate,
    equilibrium,
    honesty_margin,
    lazy_catch_rate,
    min_cheat_rate_for_honesty,
    pool_inflow,
    simulate,
    steady_jackpot,
    verifier_payoff,
    whistleblower_profit,
)
from core.errors import ConfigError

DEFAULTS = GameParams()
SIGMAS = 5.0  # Monte Carlo vs closed form: batch-means standard errors allowed
# A second point off the defaults: several competing whistleblowers, copyable-ish reports, more cheating.
CROWDED = GameParams(
    whistleblowers=4, audit_rate=0.3, replay_binding=0.4, cheat_rate=0.2, detect=0.9, detect_audit=0.8, forced_error_rate=0.03, jackpot_share=0.3
)


def test_no_forced_errors_means_no_jackpot_income() -> None:
    p = dataclasses.replace(DEFAULTS, forced_error_rate=0.0)
    assert audit_revenue(p, Strategy.HONEST, q=0.0) == 0.0
    assert whistleblower_profit(p, Strategy.HONEST, q=0.0) == pytest.approx(-p.audit_rate * p.audit_cost)
    assert math.isinf(steady_jackpot(p, Strategy.HONEST))
    assert not equilibrium(p).auditing_pays
    sim = simulate(dataclasses.replace(p, cheat_rate=0.0), Strategy.HONEST, jobs=20_000, seed=1)
    assert sim.catches == 0 and sim.jackpot_per_catch == 0.0
    assert sim.whistleblower_profit.mean < 0.0  # audits cost and nothing ever pays them
    assert sim.final_pool == pytest.approx(20_000 * p.jackpot_tax * (p.reward + p.fee))


@pytest.mark.parametrize("binding", [0.0, 0.5, 1.0])
def test_never_audited_verifier_prefers_laziness_when_replay_costs_anything(binding: float) -> None:
    p = dataclasses.replace(DEFAULTS, audit_rate=0.0, replay_binding=binding)
    for q in (0.0, 0.01, 0.3, 1.0):
        assert honesty_margin(p, q) == pytest.approx(-p.replay_cost + q * p.detect * p.finder_share * p.solver_bond)
    assert honesty_margin(p, 0.0) < 0.0  # with honest solvers only the finder reward of a catch could pay for replay
    assert lazy_catch_rate(p) == 0.0
    sim = simulate(p, Strategy.LAZY, jobs=10_000, seed=2)
    assert sim.verifier_slashed.mean == 0.0
    assert sim.verifier_payoff.mean == pytest.approx(p.fee)
    # Replay that costs nothing is never worse than laziness (positive control of the sign).
    assert honesty_margin(dataclasses.replace(p, replay_cost=0.0), 0.0) == pytest.approx(0.0)


def test_copyable_reports_leave_an_inspection_game() -> None:
    """h = 0: a lazy verifier is caught only on bad traces, so replaying pays only above a cheating rate q*."""
    p = dataclasses.replace(DEFAULTS, replay_binding=0.0)
    q_star = min_cheat_rate_for_honesty(p)
    assert 0.0 < q_star < 1.0
    assert honesty_margin(p, q_star) == pytest.approx(0.0, abs=1e-9)
    assert honesty_margin(p, q_star * 0.9) < 0.0 < honesty_margin(p, min(1.0, q_star * 1.1))
    assert not equilibrium(p).honesty_dominates


def test_honesty_margin_without_cheating_is_the_expected_slash_minus_replay_cost() -> None:
    for p in (DEFAULTS, CROWDED):
        expected = p.audited * p.replay_binding * (p.fee + p.verifier_slash * p.verifier_bond) - p.replay_cost
        assert honesty_margin(p, 0.0) == pytest.approx(expected)


def test_stationary_audit_revenue_shares_the_pool_inflow_among_audits() -> None:
    """Against honest verifiers and solvers, an audit earns I / (N a) whatever p_f and s are."""
    for p in (DEFAULTS, CROWDED):
        inflow = pool_inflow(p, Strategy.HONEST, 0.0)
        assert audit_revenue(p, Strategy.HONEST, 0.0) == pytest.approx(inflow / (p.whistleblowers * p.audit_rate))
        for pf, s in ((0.002, 0.05), (0.05, 0.3)):
            other = dataclasses.replace(p, forced_error_rate=pf, jackpot_share=s)
            assert audit_revenue(other, Strategy.HONEST, 0.0) == pytest.approx(audit_revenue(p, Strategy.HONEST, 0.0))


def test_defaults_are_an_equilibrium_and_cheap_challenges_break_it() -> None:
    eq = equilibrium(DEFAULTS)
    assert eq.holds
    assert eq.honesty_margin_q0 > 0.0 and eq.audit_margin_q0 > 0.0 and eq.blind_challenge < 0.0
    assert not equilibrium(dataclasses.replace(DEFAULTS, whistleblower_bond=0.0)).holds  # blind challenges pay
    assert not equilibrium(dataclasses.replace(DEFAULTS, jackpot_tax=0.005)).auditing_pays
    assert not equilibrium(dataclasses.replace(DEFAULTS, jackpot_share=0.5)).holds  # above Truebit's third


@pytest.mark.parametrize("share", [0.2, 0.9])
def test_jackpot_never_pays_more_than_it_holds(share: float) -> None:
    p = dataclasses.replace(DEFAULTS, forced_error_rate=0.2, audit_rate=0.9, jackpot_share=share, cheat_rate=0.3)
    sim = simulate(p, Strategy.LAZY, jobs=30_000, seed=3, burn_in=0)
    assert sim.catches > 1000
    assert 0.0 < sim.max_payout_ratio <= min(share, MAX_JACKPOT_SHARE) + 1e-12
    assert sim.min_pool >= 0.0
    assert sim.conservation_error <= 1e-6 * max(1.0, sim.final_pool)


@pytest.mark.parametrize("params", [DEFAULTS, CROWDED], ids=["defaults", "crowded"])
@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
def test_monte_carlo_agrees_with_closed_form(params: GameParams, strategy: Strategy) -> None:
    sim = simulate(params, strategy, jobs=100_000, seed=11)
    assert sim.verifier_payoff.within(verifier_payoff(params, strategy), SIGMAS)
    assert sim.whistleblower_profit.within(whistleblower_profit(params, strategy), SIGMAS)
    assert sim.pool_inflow.within(pool_inflow(params, strategy), SIGMAS)
    assert sim.catch_events.within(catch_event_rate(params), SIGMAS)
    if strategy is Strategy.LAZY:
        assert sim.verifier_slashed.within(lazy_catch_rate(params), SIGMAS)
        assert sim.slashed_given_bad.within(params.audited * params.lazy_detect, SIGMAS)
    # The jackpot per caught forced error is a ratio estimate over a few hundred autocorrelated payouts.
    assert sim.jackpot_per_catch / steady_jackpot(params, strategy) == pytest.approx(1.0, abs=0.1)


def test_simulation_is_reproducible_by_seed() -> None:
    a, b = (simulate(CROWDED, Strategy.LAZY, jobs=5_000, seed=5) for _ in range(2))
    assert a == b
    assert simulate(CROWDED, Strategy.LAZY, jobs=5_000, seed=6) != a


@pytest.mark.parametrize("field,value", [("audit_rate", 1.5), ("cheat_rate", -0.1), ("fee", -1.0), ("reward", math.inf), ("whistleblowers", 0)])
def test_invalid_parameters_are_rejected(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        overrides: dict[str, Any] = {field: value}  # any one field, int or float
        dataclasses.replace(DEFAULTS, **overrides)


def test_simulation_bounds_are_enforced() -> None:
    with pytest.raises(ConfigError):
        simulate(DEFAULTS, Strategy.HONEST, jobs=0)
    with pytest.raises(ConfigError):
        simulate(DEFAULTS, Strategy.HONEST, jobs=100_000_000)


unit = st.floats(min_value=0.0, max_value=1.0)


@settings(max_examples=200, deadline=None)
@given(a=unit, h=unit, d=unit, dw=unit, q=unit, pf=unit, n=st.integers(1, 20))
def test_closed_forms_stay_in_range_and_linear_in_q(a: float, h: float, d: float, dw: float, q: float, pf: float, n: int) -> None:
    p = dataclasses.replace(DEFAULTS, audit_rate=a, replay_binding=h, detect=d, detect_audit=dw, forced_error_rate=pf, whistleblowers=n)
    assert 0.0 <= lazy_catch_rate(p, q) <= 1.0
    assert 0.0 < p.win_share <= 1.0
    for strategy in Strategy:
        ends = verifier_payoff(p, strategy, 0.0), verifier_payoff(p, strategy, 1.0)
        assert verifier_payoff(p, strategy, q) == pytest.approx((1 - q) * ends[0] + q * ends[1], abs=1e-9)
        assert -p.verifier_slash * p.verifier_bond - p.replay_cost <= verifier_payoff(p, strategy, q)
        assert audit_revenue(p, strategy, q) >= 0.0
