"""`veritrain spec new --model KIND`: a valid job spec to start from (docs/formats.md)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

import typer

from proofs.datasets import reference_job
from proofs.pack import pack_text
from proofs.tokenizer import VOCAB_SIZE
from rolebase.cli import err_console

app = typer.Typer(
    name="spec", help="Job specs: templates to start from (docs/formats.md).", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False
)

#: The reference job whose spec is each kind's template (proofs.datasets).
_TEMPLATES = {"mlp": "mlp-spirals", "cnn": "cnn-shapes", "char-transformer": "char-text", "gpt": "gpt-text", "resnet": "resnet-shapes"}


@app.command()
def new(
    model: Annotated[Literal["mlp", "cnn", "char-transformer", "gpt", "resnet"], typer.Option("--model", help="the model kind")],
    out: Annotated[Path | None, typer.Option("--out", help="write the spec here (default: stdout)", show_default=False)] = None,
    sample_data: Annotated[
        Path | None, typer.Option("--sample-data", help="also write a small dataset that fits the template (safetensors)", show_default=False)
    ] = None,
) -> None:
    """Write a valid job spec template for a model kind; edit its model and dataset fields to your data.

    dataset.cid and dataset.size_bytes are left out: `submit post --data FILE` fills them in. The gpt
    template reads what `data pack text` writes: u16 tokens of the shipped 4,096-token tokenizer.

    Examples:

      veritrain spec new --model cnn > job.json

      veritrain spec new --model mlp --out job.json --sample-data data.safetensors && veritrain submit post job.json --data data.safetensors --dry-run
    """
    job = reference_job(_TEMPLATES[model])
    template, sample = job.template, job.dataset
    if model == "gpt":  # what `data pack text` writes, not the reference job's ASCII codes
        template = {**template, "model": {**template["model"], "vocab_size": VOCAB_SIZE}, "dataset": {**template["dataset"], "format": "u16"}}
        sample = pack_text(resources.files("proofs.datasets").joinpath("text.txt").read_bytes())
    text = json.dumps(template, indent=2) + "\n"
    if sample_data is not None:
        sample_data.write_bytes(sample)
        err_console.print(f"wrote {sample_data} ({len(sample):,} bytes)", highlight=False)
    if out is None:
        print(text, end="")
    else:
        out.write_text(text)
        err_console.print(f"wrote {out}", highlight=False)
