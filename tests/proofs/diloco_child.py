"""Child process of tests/proofs/test_diloco.py: recompute a round's aggregate and a compression
under this process's kernel settings (numpy's SIMD dispatch, ATen's ISA: set through its
environment) and print their hashes.

    python tests/proofs/diloco_child.py DIR

DIR holds ``state.ckpt`` (the round's outer state), ``party<i>.bin`` (contributions), ``delta.safetensors``
(a pseudo-gradient to compress) and ``config.json`` (MultipartyConfig fields and the stamp).
Prints one JSON object: ``aggregate`` (0x hex state hash), ``dense`` and ``topk`` (0x hex
contribution hashes of ``delta`` compressed both ways).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from safetensors.torch import load as load_safetensors

from proofs.checkpoint import decode_checkpoint
from proofs.diloco import MultipartyConfig, OuterState, aggregate, compress, contribution_hash, encode_contribution
from proofs.merkle import hex32


def main() -> None:
    folder = Path(sys.argv[1])
    raw = json.loads((folder / "config.json").read_text())
    stamp = raw.pop("stamp")
    cfg = MultipartyConfig(**raw)
    state = OuterState.from_checkpoint(decode_checkpoint((folder / "state.ckpt").read_bytes()))
    contributions = {int(p.stem[5:]): p.read_bytes() for p in folder.glob("party*.bin")}
    nxt, _ = aggregate(state, contributions, cfg)
    delta = load_safetensors((folder / "delta.safetensors").read_bytes())
    dense, _ = compress(delta, cfg.block_size)
    topk, _ = compress(delta, cfg.block_size, keep=0.1, residual={k: v * 0.5 for k, v in delta.items()})
    print(
        json.dumps(
            {
                "aggregate": hex32(nxt.state_hash(stamp)),
                "dense": hex32(contribution_hash(encode_contribution(dense))),
                "topk": hex32(contribution_hash(encode_contribution(topk))),
            }
        )
    )


if __name__ == "__main__":
    main()
