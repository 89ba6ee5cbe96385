"""The typed wrappers cover the compiled ABIs exactly; settings load as documented."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from core import artifacts
from core.config import Settings
from core.contracts import (
    Capabilities,
    DilocoJobs,
    DilocoParams,
    ForcedSeed,
    Job,
    JobMarket,
    JobTerms,
    KeyDemand,
    KeyRegistry,
    MarketParams,
    MultipartyAggregate,
    MultipartyContribution,
    MultipartyJob,
    ReportSeal,
    SealedJobs,
    Sealing,
    StakeInfo,
    StakeManager,
    VeriToken,
    snake_case,
)
from core.errors import ArtifactsMissing, ConfigError
from deploy.build import build


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    build()


@pytest.mark.parametrize("wrapper", [VeriToken, StakeManager, JobMarket, KeyRegistry, SealedJobs, DilocoJobs], ids=lambda w: w.__name__)
def test_every_abi_function_has_a_wrapper_method(wrapper: type[VeriToken | StakeManager | JobMarket | KeyRegistry | SealedJobs | DilocoJobs]) -> None:
    abi = artifacts.load(wrapper.ARTIFACT).abi
    names = {snake_case(e["name"]) for e in abi if e["type"] == "function"}
    missing = sorted(n for n in names if not callable(getattr(wrapper, n, None)))
    assert not missing, f"{wrapper.__name__} lacks {missing}"


@pytest.mark.parametrize(
    ("cls", "artifact", "function"),
    [
        (Job, "JobMarket", "getJob"),
        (MarketParams, "JobMarket", "params"),
        (ForcedSeed, "JobMarket", "forcedSeedOf"),
        (StakeInfo, "StakeManager", "stakeOf"),
        (Capabilities, "StakeManager", "capabilitiesOf"),
        (Sealing, "SealedJobs", "sealingOf"),
        (KeyDemand, "SealedJobs", "demandOf"),
        (DilocoParams, "DilocoJobs", "params"),
        (MultipartyJob, "DilocoJobs", "getJob"),
        (MultipartyContribution, "DilocoJobs", "contributionOf"),
        (MultipartyAggregate, "DilocoJobs", "aggregateOf"),
    ],
)
def test_result_dataclasses_match_the_abi_structs(cls: type, artifact: str, function: str) -> None:
    (entry,) = [e for e in artifacts.load(artifact).abi if e.get("name") == function]
    assert entry["type"] == "function"
    components = [snake_case(c["name"]) for c in entry["outputs"][0]["components"]]
    assert components == [f.name for f in dataclasses.fields(cls)]


def test_report_seal_fields_are_the_abi_tuple_in_order() -> None:
    """``ReportSeal.as_tuple()`` is sent positionally: its fields must be the struct's, in order."""
    (entry,) = [e for e in artifacts.load("JobMarket").abi if e.get("name") == "isForced"]
    assert entry["type"] == "function"
    (seal,) = [i for i in entry["inputs"] if i["name"] == "seal"]
    assert [snake_case(c["name"]) for c in seal["components"]] == [f.name for f in dataclasses.fields(ReportSeal)]


def test_job_terms_fields_are_the_abi_tuple_in_order() -> None:
    """``JobTerms.as_tuple()`` is sent positionally to ``DilocoJobs.post``: its fields must be the struct's, in order."""
    (entry,) = [e for e in artifacts.load("DilocoJobs").abi if e.get("name") == "post"]
    assert entry["type"] == "function"
    (terms,) = entry["inputs"]
    assert [snake_case(c["name"]) for c in terms["components"]] == [f.name for f in dataclasses.fields(JobTerms)]


def test_decode_struct_refuses_a_drifted_abi() -> None:
    from core.contracts import decode_struct

    with pytest.raises(ArtifactsMissing, match="do not match"):
        decode_struct(StakeInfo, [{"name": "staked", "type": "uint96"}], (1,))


@pytest.mark.parametrize(("abi", "py"), [("postJob", "post_job"), ("MAX_VERIFIERS", "max_verifiers"), ("getJob", "get_job"), ("stakeOf", "stake_of")])
def test_snake_case(abi: str, py: str) -> None:
    assert snake_case(abi) == py


def test_settings_flags_over_env_over_defaults(tmp_path: Path) -> None:
    env = {"VERITRAIN_RPC_URL": "http://10.0.0.1:8545", "VERITRAIN_CHAIN_ID": "5", "VERITRAIN_ADDRESS_BOOK_DIR": str(tmp_path)}
    s = Settings.load(env=env, rpc_url="https://rpc.example", chain_id=None)
    assert (s.rpc_url, s.chain_id, s.address_book_dir) == ("https://rpc.example", 5, tmp_path)
    assert Settings.load(env={}).rpc_url == "http://127.0.0.1:8545"
    assert s.address_book_path(5) == tmp_path / "5.json"
    assert not hasattr(s, "challenge_window")  # protocol parameters come from the chain, never from config


@pytest.mark.parametrize(
    ("env", "flags", "match"),
    [
        ({"VERITRAIN_RPC_URL": "ws://x"}, {}, "rpc_url"),
        ({"VERITRAIN_CHAIN_ID": "zero"}, {}, "chain_id"),
        ({}, {"key_env": "NOT A NAME"}, "key_env"),
        ({}, {"reward": 1}, "unknown settings"),
    ],
)
def test_bad_settings_raise_config_error(env: dict[str, str], flags: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Settings.load(env=env, **flags)
