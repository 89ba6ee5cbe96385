"""`veritrain data pack text|images`: the file it writes, the dataset block it prints, which a
spec validates and `submit post --dry-run` accepts; bad input ends in one line and leaves nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from core.storage import file_cid
from deploy.anvil import free_port
from proofs.data import load_dataset
from proofs.spec import load_spec
from veritrain.cli import app

CLI = [sys.executable, "-m", "veritrain"]
TALE = resources.files("proofs").joinpath("datasets/text.txt").read_bytes()
TEMPLATE = {
    "model": {"kind": "char-transformer", "vocab_size": 4096, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16},
    "optimizer": {"kind": "adam", "lr": 0.003},
    "batch_size": 8,
    "steps": 4,
    "seed": 1,
    "checkpoint_interval": 2,
}


def test_packed_text_prints_a_dataset_block_that_a_spec_validates_and_submit_post_dry_run_accepts(tmp_path: Path) -> None:
    (tmp_path / "tale.txt").write_bytes(TALE)
    out = tmp_path / "tale.u16"
    result = CliRunner().invoke(app, ["data", "pack", "text", str(tmp_path / "tale.txt"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    block = json.loads(result.stdout)
    data = out.read_bytes()
    assert block == {"dataset": {"cid": file_cid(data), "format": "u16", "size_bytes": len(data), "inputs": "x", "targets": None}}
    spec = load_spec({**TEMPLATE, **block})
    assert len(load_dataset(spec, data).inputs) == len(data) // 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tale.txt", "tale.u16"]  # no temporary file left

    (tmp_path / "job.json").write_text(json.dumps({**TEMPLATE, **block}))
    rpc = f"http://127.0.0.1:{free_port()}"  # no chain: the dry run says so and still checks spec and data
    store = tmp_path / "store"
    dry = subprocess.run(
        [*CLI, "submit", "post", str(tmp_path / "job.json"), "--data", str(out), "--dry-run", "--json", "--rpc-url", rpc, "--store-dir", str(store)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["dataset_cid"] == block["dataset"]["cid"]


def test_packed_images_print_a_block_for_a_cnn(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "arrays.npz", images=rng.integers(0, 256, (10, 8, 8, 3), dtype=np.uint8), labels=rng.integers(0, 5, 10))
    out = tmp_path / "images.safetensors"
    args = ["data", "pack", "images", "--x", f"{tmp_path}/arrays.npz:images", "--y", f"{tmp_path}/arrays.npz:labels", "--out", str(out), "--channels-last"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    block = json.loads(result.stdout)
    assert block["dataset"]["format"] == "safetensors" and block["dataset"]["cid"] == file_cid(out.read_bytes())
    assert "a cnn with in_channels 3, height 8, width 8" in result.stderr
    cnn = {"kind": "cnn", "in_channels": 3, "height": 8, "width": 8, "channels": [4], "hidden": 8, "num_classes": 5}
    spec = load_spec({**TEMPLATE, "model": cnn, **block})
    assert load_dataset(spec, out.read_bytes()).inputs.shape == (10, 3, 8, 8)


def test_bad_input_ends_in_one_line_with_exit_code_2_and_keeps_the_old_output(tmp_path: Path) -> None:
    out = tmp_path / "corpus.u16"
    out.write_bytes(b"old")
    (tmp_path / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n")
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 4, 4), np.float32))
    np.save(tmp_path / "y.npy", np.zeros(2, np.int64))
    env = {**os.environ, "COLUMNS": "300"}
    for args, line in [
        (["text", str(tmp_path / "binary.txt"), "--out", str(out)], "the text is not UTF-8: byte 0 (invalid start byte)"),
        (["text", str(tmp_path / "missing.txt"), "--out", str(out)], "does not exist"),
        (["images", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"), "--out", str(out)], "images must be uint8"),
    ]:
        done = subprocess.run([*CLI, "data", "pack", *args], capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        [shown] = done.stderr.strip().splitlines()
        assert shown.startswith("error: PackError: ") and line in shown, shown
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["binary.txt", "corpus.u16", "x.npy", "y.npy"]


def test_the_gpt_template_reads_packed_text_as_it_is(tmp_path: Path) -> None:
    """`spec new --model gpt` and `data pack text` agree: the packed block drops into the template
    unchanged (vocabulary 4,096, u16), and the template's own sample data is such a file."""
    (tmp_path / "tale.txt").write_bytes(TALE)
    packed = CliRunner().invoke(app, ["data", "pack", "text", str(tmp_path / "tale.txt"), "--out", str(tmp_path / "tale.u16")])
    assert packed.exit_code == 0, packed.output
    block = json.loads(packed.stdout)["dataset"]
    made = CliRunner().invoke(app, ["spec", "new", "--model", "gpt", "--out", str(tmp_path / "gpt.json"), "--sample-data", str(tmp_path / "sample.u16")])
    assert made.exit_code == 0, made.output
    template = json.loads((tmp_path / "gpt.json").read_text())
    assert template["model"]["vocab_size"] == 4096 and template["dataset"] == {k: block[k] for k in template["dataset"]}
    data = (tmp_path / "tale.u16").read_bytes()
    tokens = load_dataset(load_spec({**template, "dataset": block}), data).inputs
    assert int(tokens.max()) >= 256  # merged tokens, past any byte vocabulary: the old 128 would refuse them
    sample = (tmp_path / "sample.u16").read_bytes()
    sample_block = {**template["dataset"], "cid": file_cid(sample), "size_bytes": len(sample)}
    assert len(load_dataset(load_spec({**template, "dataset": sample_block}), sample).inputs) == len(sample) // 2


def test_readme_and_cli_reference_list_the_same_spec_kinds() -> None:
    import re
    import typing

    from veritrain.spec_cmd import new

    kinds = set(typing.get_args(typing.get_args(typing.get_type_hints(new, include_extras=True)["model"])[0]))
    root = Path(__file__).resolve().parents[2]
    readme = next(line for line in (root / "README.md").read_text().splitlines() if "spec new --model" in line)
    cli_md = next(line for line in (root / "docs" / "cli.md").read_text().splitlines() if "spec new --model" in line)
    assert set(re.findall(r"[a-z-]+", readme.split("also", 1)[1].split(";")[0])) | {"mlp"} == kinds
    assert set(cli_md.split("--model ", 1)[1].split(" ", 1)[0].replace("\\", "").split("|")) == kinds
