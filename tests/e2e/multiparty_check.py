"""A multi-party job's global models recomputed offline, for the end-to-end multi-party tests
(tests/e2e/test_multiparty.py, tests/e2e/test_multiparty_hosts.py): from the spec alone, each paid
party's inner steps, its contribution (int8, or top-k with the residual its previous round left) and
the outer step, round after round."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from core.storage import ContentStore
from proofs.data import load_dataset
from proofs.diloco import MultipartyConfig, OuterState, aggregate, compress, encode_contribution, pseudo_gradient, train_party
from proofs.spec import Limits, load_spec
from proofs.train import Trainer


def assert_recomputed(store: ContentStore, spec_cid: str, cfg: MultipartyConfig, rounds: Sequence[dict[str, Any]], global_hash: str) -> None:
    """Each round of ``rounds`` (``multiparty_report``'s history: its paid slots and state hash) is the
    aggregate of the contributions its paid parties' inner steps give, from the previous round's
    state (G_0: the spec's seeded initialization), and the last is the job's ``global_hash``: the
    chain's state hashes are those bits."""
    spec = load_spec(store.get(spec_cid, Limits.SPEC_BYTES))
    dataset = load_dataset(spec, store.get(spec.dataset.cid, spec.dataset.size_bytes))
    state = OuterState.start(Trainer(spec, dataset).params)
    residuals: dict[int, dict[str, torch.Tensor] | None] = {}  # what each slot paid last round carries on (top-k)
    for r in rounds:
        contributions, carried = {}, {}
        for party in r["paid"]:  # a slot paid last round is still its party's: nothing else frees a slot but the close
            after, _ = train_party(spec, dataset, cfg, state, party)
            c, carried[party] = compress(pseudo_gradient(state.params, after), cfg.block_size, keep=cfg.keep, residual=residuals.get(party))
            contributions[party] = encode_contribution(c)
        residuals = carried if cfg.keep is not None else {}
        state, included = aggregate(state, contributions, cfg)
        assert list(included) == r["paid"]
        assert "0x" + bytes(state.state_hash(spec.spec_hash())).hex() == r["state_hash"]
    assert "0x" + bytes(state.state_hash(spec.spec_hash())).hex() == global_hash
