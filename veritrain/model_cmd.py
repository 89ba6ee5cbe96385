"""`veritrain model export|eval`: the trained model as a plain PyTorch program, and its score.

``model export JOB --out DIR`` fetches a finalized job's spec and final checkpoint (every byte checked
against the CIDs on chain) and writes:

* ``DIR/model.pt2``: the trained network as a ``torch.export`` program (plain PyTorch operations,
  any batch size). Load it with one line, no veritrain needed::

      model = torch.export.load("DIR/model.pt2").module()

* ``DIR/weights.safetensors``: the parameters alone, by their module names (the checkpoint also holds
  the optimizer's slots: they are left out);
* ``DIR/architecture.json``: the model's kind, its config, its input and output, and the layers in
  words (activations, padding, pooling), so that it can be rebuilt anywhere;
* ``DIR/spec.json``: the job's spec, as posted.

``model eval DIR --data FILE`` runs the exported program on a held-out dataset file in the spec's
format (docs/formats.md) and prints its loss and accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from core.bounded import InputRejected, read_regular_file
from core.errors import ConfigError
from proofs.spec import Limits, load_spec
from rolebase import cli as options
from rolebase.cli import IpfsApi, StoreDir, console, open_store
from rolebase.gateways import AnnouncedGateways
from submitter import service
from submitter.datakeys import DataKeys

app = typer.Typer(
    name="model",
    help="Use the model a job trained: export it as plain PyTorch, evaluate it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.command()
def export(
    job: Annotated[int, typer.Argument(help="a FINALIZED job's id", show_default=False)],
    out: Annotated[Path, typer.Option("--out", help="directory to write model.pt2, weights.safetensors, architecture.json, spec.json", show_default=False)],
    rpc: options.Rpc = None,
    chain_id: options.ChainId = None,
    book_dir: options.BookDir = None,
    data_dir: options.DataDir = None,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    peer_ca: options.PeerCa = None,
    json_out: options.Json = False,
) -> None:
    """Export a finalized job's model as plain PyTorch; load it with: torch.export.load("OUT/model.pt2").module()

    The spec and the model come from the store, else from the gateways announced on chain (CIDs checked);
    a sealed job's model is opened with the data key its buyer kept in --data-dir.

    Examples:

      veritrain model export 3 --out model3/

      python -c 'import torch; m = torch.export.load("model3/model.pt2").module(); print(m)'
    """
    from proofs.export import export_model  # here, not above: torch loads in seconds, and only the model commands need it

    settings = options.settings(rpc_url=rpc, chain_id=chain_id, address_book_dir=book_dir, data_dir=data_dir)
    protocol = options.protocol(settings, signing=False)
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir, discover=AnnouncedGateways(lambda: protocol), peer_ca=peer_ca)
    spec_bytes = service.fetch_spec(protocol, store, job)
    spec = load_spec(spec_bytes)
    _, checkpoint = service.final_model(protocol, store, job, spec, DataKeys.of(settings.data_dir))
    architecture = export_model(spec_bytes, spec, checkpoint, out)
    if json_out:
        print(json.dumps({"out": str(out), **architecture}))
        return
    console.print(f"exported job {job}'s {spec.model.kind} to {out}/ (model.pt2, weights.safetensors, architecture.json, spec.json)")
    console.print(f'load it:  model = torch.export.load("{out / "model.pt2"}").module()', highlight=False)


def _read(path: Path, what: str, limit: int) -> bytes:
    """A file the user named, read bounded; a directory, a FIFO or a missing file is one line (exit 2)."""
    try:
        return read_regular_file(path, max_bytes=limit, what=what)
    except InputRejected as exc:
        raise ConfigError(str(exc)) from None


@app.command("eval")
def eval_(
    model_dir: Annotated[Path, typer.Argument(help="a directory written by `veritrain model export`", show_default=False)],
    data: Annotated[Path, typer.Option("--data", help="held-out dataset file, in the job's format (docs/formats.md)", show_default=False)],
    json_out: options.Json = False,
) -> None:
    """Score an exported model on a held-out dataset file: mean cross-entropy and accuracy.

    Examples:

      veritrain model eval model3/ --data test.safetensors
    """
    import torch

    from proofs.data import load_dataset
    from proofs.export import score

    for needed in ("model.pt2", "spec.json"):  # a directory and its files; the files are read bounded below
        if not (model_dir / needed).is_file():
            raise ConfigError(f"{model_dir} has no {needed}: give a directory written by `veritrain model export`")
    raw = _read(data, "--data file", Limits.DATASET_BYTES)
    spec = load_spec(_read(model_dir / "spec.json", "spec file", Limits.SPEC_BYTES))
    held_out = spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"size_bytes": len(raw)})})
    test = load_dataset(held_out, raw)
    model = torch.export.load(str(model_dir / "model.pt2")).module()
    result = score(model, test, getattr(spec.model, "block_size", 0))
    if json_out:
        print(json.dumps(result))
    else:
        console.print(f"{result['examples']:,} examples: loss {result['loss']:.4f}, accuracy {result['accuracy']:.4f}")
