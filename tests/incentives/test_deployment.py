"""The model's defaults are the deployed parameters: the figures in docs/incentives.md are for them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench.incentives import DEPLOYMENT
from bench.incentives_model import GameParams, equilibrium


def test_model_defaults_are_the_devnet_deployment() -> None:
    deployed = GameParams.from_deployment(json.loads(DEPLOYMENT.read_text()))
    for field in dataclasses.fields(GameParams):
        assert getattr(deployed, field.name) == pytest.approx(getattr(GameParams(), field.name)), field.name


def test_deployment_defaults_hold_the_equilibrium() -> None:
    assert equilibrium(GameParams.from_deployment(json.loads(DEPLOYMENT.read_text()))).holds


def test_from_deployment_reads_bonds_with_their_minimums() -> None:
    deployment = json.loads(DEPLOYMENT.read_text())
    tiny = GameParams.from_deployment(deployment, reward=1.0, fee=0.1)
    assert tiny.verifier_bond == deployment["market"]["minVerifierBond"] / 10**18
    assert tiny.solver_bond == deployment["market"]["minSolverBond"] / 10**18
