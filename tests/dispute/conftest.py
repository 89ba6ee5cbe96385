"""One anvil for the dispute tests, with the protocol deployed and every party staked, and one
tiny job trained by the proofs engine (every intermediate state kept)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.storage.local import LocalStore
from deploy.build import build
from deploy.devnet import Devnet, start_devnet

from .arena import Arena, TrainedJob


@pytest.fixture(scope="session")
def trained() -> TrainedJob:
    return TrainedJob.train()


@pytest.fixture(scope="session")
def dispute_net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    build()
    with start_devnet(book_dir=tmp_path_factory.mktemp("deployments"), accounts=8) as net:
        yield net


@pytest.fixture(scope="session")
def staked_arena(dispute_net: Devnet, trained: TrainedJob, tmp_path_factory: pytest.TempPathFactory) -> Arena:
    arena = Arena(dispute_net, LocalStore(tmp_path_factory.mktemp("store")), trained)
    arena.stake_everyone()
    return arena


@pytest.fixture
def arena(staked_arena: Arena) -> Iterator[Arena]:
    """The staked arena, reverted to its state before the test when the test ends."""
    snapshot = staked_arena.net.chain.snapshot()
    try:
        yield staked_arena
    finally:
        staked_arena.net.chain.revert(snapshot)
