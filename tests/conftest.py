"""Shared fixtures: one real anvil per test session with the real compiled contracts deployed.

* ``devnet_session``: anvil on a random loopback port, the protocol deployed by
  the real deployer (devnet parameters), dev accounts 1..6 funded with tokens.
* ``devnet``: the same devnet, isolated per test by ``evm_snapshot`` /
  ``evm_revert``; time travel through ``devnet.chain`` (``increase_time``,
  ``mine``, ``travel_to``).
* ``parties``: named signers (submitter, solver, verifier, ...) over the funded accounts.

The contracts must be built (``make build`` / ``python -m deploy.build``);
the fixture builds them when the artifacts are missing or stale.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import settings

from core.chain import Signer
from deploy.build import build
from deploy.devnet import Devnet, start_devnet

#: Test folders whose tests keep to a chain's windows in wall-clock time: role daemons on a chain (e2e,
#: e2e_ipfs, packaging) and the dispute arena's games, whose moves are mined at the time they are sent
#: (dispute). Their windows are sized for one such test at a time on two cores, so under ``pytest -n N``
#: (pytest-xdist: ``make test`` runs two workers, ``PYTEST_WORKERS=0`` one process; README) they all
#: run on one worker, one after another (:func:`pytest_xdist_make_scheduler`), while the other workers
#: take the rest at a lower CPU priority (:func:`pytest_runtest_setup`), so that their clocks keep to
#: their windows as when they ran alone. (Beside the daemons at niceness 10, a dispute arena's game
#: missed its open window.)
DAEMON_FOLDERS = frozenset({"e2e", "e2e_ipfs", "packaging", "dispute"})
#: The niceness of a worker once it runs a test without daemons.
BESIDE_DAEMONS_NICENESS = 10


# No wall-clock deadline per hypothesis example: beside the daemons' tests at a lower priority, an
# example's time measures the machine, not the code (timing targets live in bench/, never in tests).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


def _runs_daemons(nodeid: str) -> bool:
    parts = nodeid.split("/")
    return len(parts) > 2 and parts[0] == "tests" and parts[1] in DAEMON_FOLDERS


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduler, the daemons' tests one scope (the largest, so the first worker's
    first unit), every other test a scope of its own. (xdist's ``xdist_group`` marks do not reach
    the scheduler under pytest 9: the worker's rename of the node id no longer takes.)"""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class DaemonsOneAfterAnother(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "daemons" if _runs_daemons(nodeid) else nodeid

    return DaemonsOneAfterAnother(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A worker that runs a test without daemons yields the CPU to the daemons' worker from then on
    (niceness is per thread on Linux and inherited by the threads and processes it starts)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and not _runs_daemons(item.nodeid) and os.getpriority(os.PRIO_PROCESS, 0) < BESIDE_DAEMONS_NICENESS:
        os.setpriority(os.PRIO_PROCESS, 0, BESIDE_DAEMONS_NICENESS)


@dataclass(frozen=True)
class Parties:
    """Funded dev accounts by role in the tests (none is staked yet)."""

    submitter: Signer
    solver: Signer
    verifier: Signer
    solver2: Signer
    verifier2: Signer
    outsider: Signer


@pytest.fixture(scope="session")
def devnet_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    build()  # incremental: a no-op when artifacts are up to date
    with start_devnet(book_dir=tmp_path_factory.mktemp("deployments"), accounts=6) as net:
        yield net


@pytest.fixture
def devnet(devnet_session: Devnet) -> Iterator[Devnet]:
    """The session devnet, reverted to its state before the test when the test ends."""
    snapshot = devnet_session.chain.snapshot()
    try:
        yield devnet_session
    finally:
        devnet_session.chain.revert(snapshot)


@pytest.fixture
def parties(devnet: Devnet) -> Parties:
    return Parties(*devnet.accounts[:6])
