"""``submit post`` (``submitter.service.post_job``) posts a job with the market's full-replay flag exactly
when its spec needs full replay (``proofs.sampling.needs_full_replay``: torch numerics or tolerance
mode), on a real anvil: the flag is in ``JobPosted`` and the market says the job is a full replay from
the post on (docs/proofs.md, "Full replay and the cheats of few segments")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.storage import LocalStore
from deploy.devnet import Devnet
from proofs.sampling import needs_full_replay
from submitter import service
from submitter.demo_job import build_demo_job
from submitter.errors import SubmitError
from submitter.specfile import read_job
from tests.conftest import Parties


def _variant(spec_path: Path, name: str, **changes: object) -> Path:
    raw = json.loads(spec_path.read_text())
    raw.update(changes)
    out = spec_path.with_name(f"{name}.json")
    out.write_text(json.dumps(raw))
    return out


def test_submit_post_sets_the_full_replay_flag_exactly_when_the_spec_needs_it(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    job = build_demo_job("tiny", tmp_path / "job")
    protocol = devnet.protocol(parties.submitter)
    market = protocol.market
    variants = {
        "exact": job.spec_path,
        "torch": _variant(job.spec_path, "torch", numerics="torch"),
        "tolerance": _variant(job.spec_path, "tolerance", tolerance={"mode": "tolerance", "l2": 1e-3, "linf": 1e-3, "cosine": 1e-4}),
    }
    for name, path in variants.items():
        needs = needs_full_replay(read_job(path, job.data_path, store).spec)
        assert needs == (name != "exact")
        posted = service.post_job(protocol, store, path, job.data_path, job.reward, job.fee, job.commit_window, allow_tolerance=True)
        (event,) = market.events("JobPosted", devnet.book.deploy_block, jobId=posted.job_id)
        assert posted.full_replay is needs and event.args["fullReplay"] is needs, name
        assert market.is_full_replay(posted.job_id) is needs, name
        assert (posted.weaker is not None) is needs, name


def test_a_spec_that_needs_full_replay_is_still_refused_without_allow_tolerance(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    job = build_demo_job("tiny", tmp_path / "job")
    protocol = devnet.protocol(parties.submitter)
    before = protocol.market.job_count()
    with pytest.raises(SubmitError, match="--allow-tolerance"):
        service.post_job(
            protocol, LocalStore(tmp_path / "store"), _variant(job.spec_path, "torch", numerics="torch"), job.data_path, job.reward, job.fee, job.commit_window
        )
    assert protocol.market.job_count() == before
