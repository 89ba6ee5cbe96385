"""The model registry: architectures a spec may name, built from their typed config.

No code comes from a spec: ``spec.model.kind`` selects one of the builders
below and the config's validated fields size it. Initial weights come from the
spec's seed alone (:func:`build_model`), so checkpoint 0 is a pure function of
the spec.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from proofs.seeds import derive_seed
from proofs.spec import CharTransformerConfig, CNNConfig, JobSpec, MLPConfig

__all__ = ["REGISTRY", "build_model", "MLP", "CNN", "CharTransformer"]


class MLP(nn.Module):
    def __init__(self, cfg: MLPConfig) -> None:
        super().__init__()
        dims = (cfg.input_dim, *cfg.hidden, cfg.num_classes)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class CNN(nn.Module):
    def __init__(self, cfg: CNNConfig) -> None:
        super().__init__()
        chans = (cfg.in_channels, *cfg.channels)
        pad = cfg.kernel_size // 2
        self.convs = nn.ModuleList(nn.Conv2d(a, b, cfg.kernel_size, padding=pad) for a, b in zip(chans, chans[1:]))
        self.hidden = nn.Linear(cfg.flat_features, cfg.hidden)
        self.head = nn.Linear(cfg.hidden, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = F.max_pool2d(F.relu(conv(x)), 2)
        return self.head(F.relu(self.hidden(x.flatten(1))))


class _Block(nn.Module):
    def __init__(self, cfg: CharTransformerConfig) -> None:
        super().__init__()
        e = cfg.n_embd
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(e)
        self.attn = nn.Linear(e, 3 * e)
        self.proj = nn.Linear(e, e)
        self.ln_2 = nn.LayerNorm(e)
        self.fc = nn.Linear(e, 4 * e)
        self.fc_proj = nn.Linear(4 * e, e)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def _attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, e = x.shape
        h = self.n_head
        q, k, v = self.attn(x).split(e, dim=2)
        q, k, v = (z.view(b, t, h, e // h).transpose(1, 2) for z in (q, k, v))
        # Written out (no fused SDPA kernel) so the arithmetic is the same on every backend.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(e // h))
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, e)
        return self.proj(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self._attention(self.ln_1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class CharTransformer(nn.Module):
    """A nanoGPT in miniature: token and position embeddings, pre-LN blocks, a linear head."""

    def __init__(self, cfg: CharTransformerConfig) -> None:
        super().__init__()
        self.block_size = cfg.block_size
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


REGISTRY: dict[str, Callable[..., nn.Module]] = {
    "mlp": MLP,
    "cnn": CNN,
    "char-transformer": CharTransformer,
}


def build_model(spec: JobSpec, device: torch.device | str = "cpu") -> nn.Module:
    """The spec's model with its seeded initial weights (float32, on ``device``).

    Weights are drawn on the CPU from a generator seeded by the spec alone (the
    process's global RNG is left as it was), then moved, so every device starts
    from the same bits.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(spec.seed, "init"))
        model = REGISTRY[spec.model.kind](spec.model)
    return model.to(device=device, dtype=torch.float32)
