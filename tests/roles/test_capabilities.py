"""A job against a solver's advert (rolebase.capabilities): each limit, the device, the time; no chain."""

from __future__ import annotations

from dataclasses import replace

from core.contracts import Capabilities, Device
from core.storage import file_cid
from proofs.datasets import reference_job
from proofs.spec import PROCESS_BYTES, training_memory_bytes
from rolebase.capabilities import job_size, misfit, round_spec, step_flop, train_flop

JOB = reference_job("mlp-spirals", steps=400, checkpoint_interval=50)
SPEC = JOB.spec(file_cid(JOB.dataset))
ROOMY = Capabilities(10_000_000, 256 << 20, 1_000_000, 10**9, Device.CPU, advertised_at=1)


def test_compute_is_six_flop_per_parameter_per_example_per_step() -> None:
    assert step_flop(SPEC) == 6 * SPEC.param_count() * SPEC.batch_size
    assert train_flop(SPEC) == step_flop(SPEC) * 400
    text = reference_job("char-text")
    tokens = text.spec(file_cid(text.dataset))
    assert step_flop(tokens) == 6 * tokens.param_count() * tokens.batch_size * 32  # per token: block_size 32


def test_each_limit_and_the_time_say_why_a_job_does_not_fit_and_the_device_never_does() -> None:
    assert misfit(ROOMY, SPEC, 600) == ""
    size = SPEC.dataset.size_bytes
    assert misfit(replace(ROOMY, max_params=100), SPEC, 600) == f"takes at most 100 parameters (the job has {SPEC.param_count():,})"
    assert misfit(replace(ROOMY, max_dataset_bytes=1024), SPEC, 600) == f"takes datasets of at most 1,024 bytes (the job's has {size:,})"
    assert misfit(replace(ROOMY, max_steps=399), SPEC, 600) == "takes at most 399 steps (the job has 400)"
    for numerics in ("repro-v1", "torch"):  # both profiles run on CPU and CUDA: the device never misfits
        assert misfit(replace(ROOMY, device=Device.CUDA), SPEC.model_copy(update={"numerics": numerics}), 600) == ""
    doubled = 2 * train_flop(SPEC)  # FLOP/s at which the doubled time is exactly the window
    assert misfit(replace(ROOMY, flops=doubled // 600), SPEC, 600) == ""
    slow = misfit(replace(ROOMY, flops=doubled // 600 - 1), SPEC, 600)
    assert slow.startswith("would need about 600 s") and slow.endswith("more than the 600 s commit window")


def test_dry_run_size_says_the_training_memory_solvers_compare() -> None:
    size = job_size(SPEC)
    assert size["memory_bytes"] == training_memory_bytes(SPEC) > PROCESS_BYTES
    assert size["parameters"] == SPEC.param_count() and size["train_flop"] == train_flop(SPEC)


def test_a_multi_party_round_fits_on_its_inner_steps_the_whole_dataset_and_the_work_window() -> None:
    one_round = round_spec(SPEC, 25)  # a round is 25 steps of the base spec, whatever its own steps say
    assert misfit(replace(ROOMY, max_steps=25), one_round, 60, window="work window") == ""
    assert misfit(replace(ROOMY, max_steps=24), one_round, 60, window="work window") == "takes at most 24 steps (the job has 25)"
    size = SPEC.dataset.size_bytes  # every party fetches the whole dataset to derive its shard
    assert misfit(replace(ROOMY, max_dataset_bytes=size - 1), one_round, 60) == f"takes datasets of at most {size - 1:,} bytes (the job's has {size:,})"
    doubled = 2 * train_flop(one_round)  # FLOP/s at which 25 steps, doubled, take exactly the window
    assert train_flop(one_round) * 16 == train_flop(SPEC)
    assert misfit(replace(ROOMY, flops=doubled // 60), one_round, 60, window="work window") == ""
    assert misfit(replace(ROOMY, flops=doubled // 60 - 1), one_round, 60, window="work window").endswith("more than the 60 s work window")
    memory = training_memory_bytes(one_round)
    assert misfit(ROOMY, one_round, 60, max_memory_bytes=memory) == ""  # a solver checking itself adds its memory
    assert misfit(ROOMY, one_round, 60, max_memory_bytes=memory - 1).startswith("gives a job at most")
