"""Wires the solver agent: chain, storage, local records, policy, responder, loop."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.agent import LoopSettings, Responder
from core.chain import Signer
from core.config import Settings
from core.contracts import Capabilities
from core.storage import ContentStore, LocalStore
from core.storage.peers import FetchingStore
from proofs.spec import JobSpec
from proofs.strategies import ALL_STRATEGIES
from proofs.train import Runtime
from rolebase.capabilities import device_of, misfit, training_seconds
from rolebase.daemon import RoleDaemon, Wiring
from rolebase.daemon import build as build_daemon
from rolebase.daemon import state_dir as role_state_dir
from rolebase.multiparty import RoundFit
from rolebase.multiparty_duty import MultipartyDuty
from solver.adversary import (
    COPY_CONTRIBUTION,
    FOREIGN_ROOT,
    GARBAGE_MANIFEST,
    STALE_MODEL,
    WITHHOLD,
    CheatingJobTrainer,
    CopyingMultipartyDuty,
    ForeignManifest,
    StaleModel,
    Withholding,
)
from solver.judge import SpecJudge, measure_flops
from solver.loader import SolverLoader
from solver.policy import (
    LANES,
    Limits,
    SolverAction,
    SolverConfig,
    SolverPolicy,
    SolverView,
    work,
)
from solver.responder import SolverResponder
from solver.state import SolverDb
from solver.work import JobTrainer, ProgressHook

SolverDaemon = RoleDaemon[SolverView, SolverAction]

#: The actions never sent twice (``rolebase.sent.Journal``): each one contract call (a stake: approve, then the stake call).

#: Adversaries that go silent when challenged (they lose on their clock); the others defend
#: with their own wrong states and lose at the referees.
SILENT_CHEATS = frozenset({"fake-final"})

#: Every ``--cheat``: a trace adversary of ``proofs.adversary``, ``withhold`` (an honest trace whose
#: checkpoints are deleted once committed), ``stale-model`` (an honest trace committed with checkpoint 0
#: as its model), ``garbage-manifest`` or ``foreign-root`` (an honest trace committed with a manifest that
#: does not parse, or names another root), ``copy-contribution`` (a multi-party party that commits another
#: slot's contribution as its own): solver.adversary.
CHEATS = (*ALL_STRATEGIES, WITHHOLD, STALE_MODEL, GARBAGE_MANIFEST, FOREIGN_ROOT, COPY_CONTRIBUTION)
#: The adversaries of solver.adversary: they wrap an honest trace.
_HONEST_TRACE_CHEATS = (WITHHOLD, STALE_MODEL, GARBAGE_MANIFEST, FOREIGN_ROOT, COPY_CONTRIBUTION)


def state_dir(data_dir: Path, address: str) -> Path:
    """One directory per solver account: its records and its checkpoints."""
    return role_state_dir(data_dir, "solver", address)


def offer(limits: Limits, rt: Runtime = Runtime()) -> Capabilities:
    """What this solver advertises: its limits, the device JobTrainer trains on (``--device``) and its
    speed there, measured now (docs/roles.md, "Capabilities")."""
    return Capabilities(limits.max_params, limits.max_dataset_bytes, limits.max_steps, measure_flops(rt), device_of(rt.device), advertised_at=0)


def build(
    settings: Settings,
    signer: Signer,
    store: ContentStore,
    config: SolverConfig,
    *,
    limits: Limits = Limits(),
    loop: LoopSettings = LoopSettings(),
    progress: ProgressHook | None = None,
    cheat: str | None = None,
    rt: Runtime = Runtime(),
) -> SolverDaemon:
    """``cheat``: a name of :data:`CHEATS`: of ``proofs.strategies.ALL_STRATEGIES`` (the solver then commits
    that adversary's trace instead of training honestly), ``withhold`` (it trains honestly and deletes
    its checkpoints once committed), ``stale-model`` (it trains honestly and commits checkpoint 0 as the
    model), ``garbage-manifest`` or ``foreign-root`` (it trains honestly and commits a manifest that does
    not parse, or names another root). Test and demo adversaries, never for real use."""
    if cheat is not None:  # the adversary cheats on one job (so tests and the demo know which), and may go silent
        config = replace(config, defend=cheat not in SILENT_CHEATS, max_claims=1)

    def parts(w: Wiring, db: SolverDb) -> tuple[SolverLoader, SolverPolicy, Responder[SolverAction]]:
        home = state_dir(settings.data_dir, signer.address)
        judge = SpecJudge(store, db, limits, f"{w.protocol.client.chain_id}:{w.protocol.market.address}", rt=rt, background=True, judged=w.bell.ring)
        if cheat is None or cheat in _HONEST_TRACE_CHEATS:
            job_trainer = JobTrainer(w.protocol, store, db, w.watcher, home / "jobs", w.stop, progress=progress, rt=rt, disk_budget=config.disk_budget)
        else:
            job_trainer = CheatingJobTrainer(
                w.protocol, store, db, w.watcher, home / "jobs", w.stop, progress=progress, rt=rt, strategy=cheat, disk_budget=config.disk_budget
            )
        offered = offer(limits, rt)
        duty_class = CopyingMultipartyDuty if cheat == COPY_CONTRIBUTION else MultipartyDuty

        def fit(spec: JobSpec, work_window: int) -> RoundFit:  # judged on what we advertise, and our memory
            return RoundFit(misfit(offered, spec, work_window, limits.max_memory_bytes, window="work window"), training_seconds(spec, offered.flops))

        multiparty = duty_class(w.protocol, store, w.watcher, w.me, begun=db.start_job, fit=fit)
        responder = SolverResponder(w.protocol, db, job_trainer, w.watcher, w.me, multiparty)
        performers: dict[str, Responder[SolverAction]] = {
            WITHHOLD: Withholding(responder, db, store),
            STALE_MODEL: StaleModel(responder, db),
            GARBAGE_MANIFEST: ForeignManifest(responder, db, store, GARBAGE_MANIFEST),
            FOREIGN_ROOT: ForeignManifest(responder, db, store, FOREIGN_ROOT),
        }
        own = store.own if isinstance(store, FetchingStore) else store  # what our gateway (--serve) serves
        wanted = own.take_wanted if isinstance(own, LocalStore) else list
        loader = SolverLoader(w.protocol, w.watcher, db, judge, w.me, config, offered, wanted, multiparty.fits, multiparty.forget)
        return loader, SolverPolicy(config), performers.get(cheat or "", responder)

    return build_daemon("solver", settings, signer, SolverDb, parts, loop=loop, work=work, lanes=LANES)
