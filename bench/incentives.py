"""Economic simulation of the incentive game (issue 5 item 4): closed form vs Monte Carlo, regions, defaults.

    .venv/bin/python -m bench.incentives [--jobs 100000] [--seed 7] [--img docs/img] [--no-plots]

Prints the deployment parameters of deploy/params/devnet.json (with their model symbols), the closed-form payoffs and
equilibrium margins, and a table of closed form vs Monte Carlo (mean +- batch-means standard error,
ratio) for honest and lazy verifiers; writes docs/img/incentives_region.png and
docs/img/incentives_payoffs.png. The model is bench/incentives_model.py; docs/incentives.md explains it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.incentives_model import (
    MAX_JACKPOT_SHARE,
    GameParams,
    Strategy,
    audit_revenue,
    blind_challenge_value,
    catch_event_rate,
    equilibrium,
    honesty_margin,
    lazy_catch_rate,
    pool_inflow,
    simulate,
    steady_jackpot,
    steady_pool,
    verifier_payoff,
    whistleblower_profit,
)

DEPLOYMENT = Path(__file__).resolve().parents[1] / "deploy" / "params" / "devnet.json"
"""The deployment whose parameters the figures are computed at (tests/incentives checks GameParams() equals it)."""

ONCHAIN_NAMES = {
    # deployment parameter -> model symbol; shares in basis points (1e4 = 100 %)
    "market.forcedErrorRateBps": "p_f",
    "market.jackpotTaxBps": "t",
    "market.jackpotShareBps": "s",
    "market.verifierBondBps": "B_v / R",
    "market.solverBondBps": "B_s / R",
    "market.probeCount": "(h = 1: probes per passing report)",
    "game.challengeBond": "B_w (base units)",
}


def deployment_defaults(path: Path = DEPLOYMENT) -> tuple[dict[str, Any], GameParams]:
    """The deployment parameters file and the model of a 100-token job under it."""
    deployment = json.loads(path.read_text())
    return deployment, GameParams.from_deployment(deployment)


DEPLOYED, DEFAULTS = deployment_defaults()

_SYMBOLS = {
    "reward": "R",
    "fee": "F",
    "replay_cost": "c_v",
    "audit_cost": "c_w",
    "forced_error_rate": "p_f",
    "jackpot_tax": "t",
    "jackpot_share": "s",
    "verifier_bond": "B_v",
    "verifier_slash": "sigma_v",
    "solver_bond": "B_s",
    "finder_share": "rho",
    "whistleblower_bond": "B_w",
    "cheat_rate": "q",
    "audit_rate": "a",
    "whistleblowers": "N",
    "detect": "d",
    "detect_audit": "d_w",
    "forced_detect": "d_f",
    "replay_binding": "h",
}

_OK, _LAZY, _UNPAID, _BLIND, _CAP = range(5)
_REGION_COLORS = ["#4caf50", "#e57373", "#ffb74d", "#9575cd", "#bdbdbd"]
_REGION_LABELS = [
    "equilibrium holds",
    "laziness pays (some q)",
    "auditing unpaid (q = 0)",
    "blind challenges pay",
    "s above Truebit's 1/3",
]


def _row(name: str, closed: float, est_mean: float, est_se: float) -> str:
    ratio = est_mean / closed if closed else math.nan
    z = (est_mean - closed) / est_se if est_se > 0 else math.nan
    return f"  {name:<42} {closed:>11.4f} {est_mean:>11.4f} +- {est_se:<9.4f} {ratio:>7.4f} {z:>6.2f}"


def _comparison(p: GameParams, jobs: int, seed: int) -> None:
    print(f"closed form vs Monte Carlo: {jobs} jobs per run after burn-in, seed {seed}, pool starts empty")
    print(f"  {'quantity':<42} {'closed':>11} {'simulated':>11} {'+- s.e.':<12} {'ratio':>7} {'z':>6}")
    for strategy in Strategy:
        start = time.perf_counter()
        sim = simulate(p, strategy, jobs=jobs, seed=seed)
        elapsed = time.perf_counter() - start
        print(f" all verifiers {strategy.value} ({elapsed:.2f} s, {sim.catches} jackpots paid)")
        print(_row("verifier payoff per job", verifier_payoff(p, strategy), sim.verifier_payoff.mean, sim.verifier_payoff.se))
        slashed = lazy_catch_rate(p) if strategy is Strategy.LAZY else p.cheat_rate * (1 - p.detect) * p.audited * p.detect_audit
        print(_row("verifier slashed, share of jobs", slashed, sim.verifier_slashed.mean, sim.verifier_slashed.se))
        given_bad = p.audited * (p.lazy_detect if strategy is Strategy.LAZY else (1 - p.detect) * p.detect_audit)
        print(_row("verifier slashed, share of bad-trace jobs", given_bad, sim.slashed_given_bad.mean, sim.slashed_given_bad.se))
        print(_row("whistleblower profit per job", whistleblower_profit(p, strategy), sim.whistleblower_profit.mean, sim.whistleblower_profit.se))
        print(_row("pool inflow per job", pool_inflow(p, strategy), sim.pool_inflow.mean, sim.pool_inflow.se))
        print(_row("forced errors caught, share of jobs", catch_event_rate(p), sim.catch_events.mean, sim.catch_events.se))
        jackpot = steady_jackpot(p, strategy)
        print(
            f"  {'jackpot paid per caught forced error':<42} {jackpot:>11.2f} {sim.jackpot_per_catch:>11.2f} {'':<12} {sim.jackpot_per_catch / jackpot:>7.4f}"
        )
        print(
            f"  pool: max payout/held {sim.max_payout_ratio:.4f} (cap {MAX_JACKPOT_SHARE:.4f}), least balance "
            f"{sim.min_pool:.2f}, final {sim.final_pool:.1f}, conservation error {sim.conservation_error:.2e}"
        )


def _report(p: GameParams, jobs: int, seed: int) -> None:
    print("parameters (tokens; probabilities per job)")
    for name, value in p.as_dict().items():
        print(f"  {_SYMBOLS[name]:>8} {name:<20} {value:g}")
    print(f"deployment parameters ({DEPLOYMENT.relative_to(DEPLOYMENT.parents[2])})")
    for key, symbol in ONCHAIN_NAMES.items():
        part, name = key.split(".")
        print(f"  {name:<22} {DEPLOYED[part][name]:<24} {symbol}")
    eq = equilibrium(p)
    honest_j = steady_jackpot(p, Strategy.HONEST, 0.0)
    print("closed form at the defaults")
    print(f"  honest verifier payoff/job   {verifier_payoff(p, Strategy.HONEST):9.4f}   lazy {verifier_payoff(p, Strategy.LAZY):9.4f}")
    print(
        f"  honesty margin U_H - U_L     q=0: {eq.honesty_margin_q0:.4f}  q=1: {eq.honesty_margin_q1:.4f}  "
        f"q*={eq.min_cheat_rate:.4f}  -> {'honesty dominates' if eq.honesty_dominates else 'laziness pays somewhere'}"
    )
    print(f"  lazy verifier catch rate     {lazy_catch_rate(p):.4f} per job, {p.audited * p.lazy_detect:.4f} per bad-trace job")
    print(
        f"  whistleblower profit/job     {whistleblower_profit(p, Strategy.HONEST):.4f} (q={p.cheat_rate:g}), "
        f"{whistleblower_profit(p, Strategy.HONEST, 0.0):.4f} (q=0: jackpot only); per audit at q=0 "
        f"{audit_revenue(p, Strategy.HONEST, 0.0):.4f} revenue vs c_w {p.audit_cost:g}"
    )
    print(
        f"  stationary jackpot J* (q=0)  {honest_j:.2f} per caught forced error, pool ~{steady_pool(p, Strategy.HONEST, 0.0):.0f}; "
        f"Truebit floor c_w/p_f = {p.audit_cost / p.forced_error_rate:.0f}"
    )
    print(f"  blind challenge value        {blind_challenge_value(p, honest_j):.4f} (must be < 0)")
    copyable = dataclasses.replace(p, replay_binding=0.0)
    print(
        f"  with copyable reports (h=0): margin at q=0 {honesty_margin(copyable, 0.0):.4f}, replay pays only for q >= "
        f"{equilibrium(copyable).min_cheat_rate:.4f}; lazy catch rate {lazy_catch_rate(copyable):.4f} per job"
    )
    print(f"  equilibrium holds: {eq.holds}")
    _comparison(p, jobs, seed)


def _classify(p: GameParams, jackpot: float | None = None) -> int:
    """Region code of one parameter point; ``jackpot`` fixes the pool's payout (short run), None takes J*."""
    if p.jackpot_share > MAX_JACKPOT_SHARE:
        return _CAP
    if honesty_margin(p, 0.0) < 0.0 or honesty_margin(p, 1.0) < 0.0:
        return _LAZY
    if audit_revenue(p, Strategy.HONEST, 0.0, jackpot) < p.audit_cost:
        return _UNPAID
    j = steady_jackpot(p, Strategy.HONEST, 0.0) if jackpot is None else jackpot
    if j == math.inf or blind_challenge_value(p, j) >= 0.0:
        return _BLIND
    return _OK


def _grid(xs: np.ndarray, ys: np.ndarray, point: Callable[[float, float], int]) -> np.ndarray:
    return np.array([[point(float(x), float(y)) for x in xs] for y in ys])


def _plots(p: GameParams, img: Path, seed: int) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.artist import Artist
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    img.mkdir(parents=True, exist_ok=True)
    cmap, norm = ListedColormap(_REGION_COLORS), BoundaryNorm(np.arange(-0.5, 5.5), 5)
    pool = steady_pool(p, Strategy.HONEST, 0.0)
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.4), constrained_layout=True)

    pf, shares = np.geomspace(1e-3, 0.1, 160), np.linspace(0.005, 0.5, 160)
    codes = _grid(pf, shares, lambda x, y: _classify(dataclasses.replace(p, forced_error_rate=x, jackpot_share=y), jackpot=min(y, MAX_JACKPOT_SHARE) * pool))
    ax = axes[0]
    ax.pcolormesh(pf, shares, codes, cmap=cmap, norm=norm, shading="nearest")
    ax.set_xscale("log")
    ax.axhline(MAX_JACKPOT_SHARE, color="k", ls="--", lw=1)
    ax.set_xlabel("forced-error rate p_f")
    ax.set_ylabel("jackpot share s (of the pool, per caught forced error)")
    ax.set_title(f"short run: pool fixed at {pool:.0f} tokens\n(auditing pays: phi p_f s P >= c_w; blind challenges lose: p_f s P < (1-p_f) B_w)", fontsize=9)
    ax.plot(p.forced_error_rate, p.jackpot_share, "k*", ms=14, label="proposed defaults")

    taxes, rates = np.linspace(0.0, 0.1, 160), np.linspace(0.005, 1.0, 160)
    codes = _grid(taxes, rates, lambda x, y: _classify(dataclasses.replace(p, jackpot_tax=x, audit_rate=y)))
    ax = axes[1]
    ax.pcolormesh(taxes * 100, rates, codes, cmap=cmap, norm=norm, shading="nearest")
    ax.set_xlabel("jackpot tax t (% of reward + fee)")
    ax.set_ylabel("audit probability a (per whistleblower, per job)")
    ax.set_title("long run: stationary pool, J* = I / (p_f A d_f)\n(auditing pays: I >= N a c_w; honesty: A h (F + sigma B_v) >= c_v)", fontsize=9)
    ax.plot(p.jackpot_tax * 100, p.audit_rate, "k*", ms=14)

    bonds = np.linspace(0.0, 100.0, 160)
    codes = _grid(rates, bonds, lambda x, y: _classify(dataclasses.replace(p, audit_rate=x, verifier_bond=y)))
    ax = axes[2]
    ax.pcolormesh(rates, bonds, codes, cmap=cmap, norm=norm, shading="nearest")
    ax.set_xlabel("audit probability a (per whistleblower, per job)")
    ax.set_ylabel("verifier bond B_v (tokens; reward R = 100)")
    ax.set_title(
        f"verifier honesty vs stake, tax t = {p.jackpot_tax:.0%}\n(slash {p.verifier_slash:.0%} of B_v, fee F = {p.fee:g}, replay c_v = {p.replay_cost:g})",
        fontsize=9,
    )
    ax.plot(p.audit_rate, p.verifier_bond, "k*", ms=14)

    handles: list[Artist] = [Patch(color=c, label=label) for c, label in zip(_REGION_COLORS, _REGION_LABELS)]
    handles.append(plt.Line2D([], [], color="k", marker="*", ls="", ms=12, label="proposed defaults"))
    fig.legend(handles=handles, loc="outside lower center", ncols=6, fontsize=9)
    fig.suptitle(
        "veritrain incentive game: where honest verification and paid auditing are both the best strategy"
        f" (N = {p.whistleblowers}, d = {p.detect}, h = {p.replay_binding:g})"
    )
    region = img / "incentives_region.png"
    fig.savefig(region, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 5.2), constrained_layout=True)
    grid = np.linspace(0.01, 1.0, 100)
    at = [dataclasses.replace(p, audit_rate=float(a)) for a in grid]
    ax.plot(grid, [verifier_payoff(x, Strategy.HONEST) for x in at], color="#2e7d32", label="honest verifier")
    ax.plot(grid, [verifier_payoff(x, Strategy.LAZY) for x in at], color="#c62828", label="lazy verifier")
    ax.plot(grid, [whistleblower_profit(x, Strategy.HONEST) for x in at], color="#1565c0", label=f"whistleblower vs honest verifiers (q = {p.cheat_rate:g})")
    ax.plot(
        grid,
        [whistleblower_profit(x, Strategy.HONEST, 0.0) for x in at],
        color="#1565c0",
        ls="--",
        label="whistleblower vs honest verifiers (q = 0, jackpot only)",
    )
    for a in (0.1, 0.25, 0.5, 0.75, 1.0):
        x = dataclasses.replace(p, audit_rate=a)
        for strategy, color in ((Strategy.HONEST, "#2e7d32"), (Strategy.LAZY, "#c62828")):
            sim = simulate(x, strategy, jobs=50_000, seed=seed)
            ax.errorbar(a, sim.verifier_payoff.mean, yerr=3 * sim.verifier_payoff.se, fmt="o", color=color, ms=4)
        sim = simulate(x, Strategy.HONEST, jobs=50_000, seed=seed)
        ax.errorbar(a, sim.whistleblower_profit.mean, yerr=3 * sim.whistleblower_profit.se, fmt="o", color="#1565c0", ms=4)
    ax.axvline(p.audit_rate, color="k", ls=":", lw=1)
    ax.axhline(0.0, color="grey", lw=0.6)
    ax.set_xlabel("audit probability a (per whistleblower, per job)")
    ax.set_ylabel("expected payoff per job (tokens; reward R = 100)")
    ax.set_title("closed form (lines) vs Monte Carlo, 50k jobs, +-3 s.e. (points); dotted: default a", fontsize=10)
    ax.legend(fontsize=8)
    payoffs = img / "incentives_payoffs.png"
    fig.savefig(payoffs, dpi=110)
    plt.close(fig)
    return [region, payoffs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000, help="simulated jobs per run after burn-in, default 100000")
    parser.add_argument("--seed", type=int, default=7, help="random seed, default 7")
    parser.add_argument("--img", type=Path, default=Path("docs/img"), help="where the PNGs go, default docs/img")
    parser.add_argument("--no-plots", action="store_true", help="print the tables only")
    args = parser.parse_args()
    _report(DEFAULTS, args.jobs, args.seed)
    if not args.no_plots:
        for path in _plots(DEFAULTS, args.img, args.seed):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
