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

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.chain import Signer
from deploy.build import build
from deploy.devnet import Devnet, start_devnet

#: Test folders whose tests run role daemons on a chain. Their windows are sized for one such test at a
#: time on two cores, so under ``pytest -n N`` (pytest-xdist, ``--dist loadgroup``: ``make test`` runs
#: two workers) they all run on one worker, one after another, while the other workers take the rest.
DAEMON_FOLDERS = frozenset({"e2e", "e2e_ipfs", "packaging"})
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.relative_to(TESTS).parts[0] in DAEMON_FOLDERS:
            item.add_marker(pytest.mark.xdist_group("daemons"))


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
