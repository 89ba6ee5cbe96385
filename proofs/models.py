"""The model registry: architectures a spec may name, built from their typed config.

No code comes from a spec: ``spec.model.kind`` selects one of the builders
below and the config's validated fields size it. Initial weights come from the
spec's seed alone (:func:`build_model`), so checkpoint 0 is a pure function of
the spec: under ``"torch"`` numerics from torch's initializers, under ``"repro-v1"`` and
``"repro-v2"`` the same distributions drawn by :mod:`proofs.repro_init` (the same bits on every CPU).

The arithmetic comes from an :class:`Ops` set picked by ``spec.numerics``:
``"torch"`` is plain PyTorch (fast BLAS, bits tied to the CPU's kernels);
``"repro-v1"`` and ``"repro-v2"`` are :mod:`proofs.repro` (the same bits on every machine;
v2's matmuls and convolutions fuse each multiply-add). The parameters, their names, shapes and
initial distributions are the same under all three.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from proofs import repro
from proofs.numerics import profile
from proofs.repro_init import Init, draw, tensor_seed
from proofs.seeds import derive_seed
from proofs.spec import CharTransformerConfig, CNNConfig, GPTConfig, JobSpec, MLPConfig, Numerics, ResNetConfig

__all__ = [
    "REGISTRY",
    "Ops",
    "TORCH_OPS",
    "REPRO_OPS",
    "REPRO_V2_OPS",
    "ops_for",
    "build_model",
    "portable_init",
    "MLP",
    "CNN",
    "CharTransformer",
    "GPT",
    "ResNet",
]


@dataclass(frozen=True)
class Ops:
    """The operations a model's forward pass and the training loss use."""

    linear: Callable[..., torch.Tensor]
    conv2d: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]
    max_pool2: Callable[[torch.Tensor], torch.Tensor]
    mean_pixels: Callable[[torch.Tensor], torch.Tensor]
    layer_norm: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None, float], torch.Tensor]
    gelu: Callable[[torch.Tensor], torch.Tensor]
    #: ``(qkv, n_head)``: causal self-attention over (B, T, 3E) q, k and v side by side, (B, T, E) out
    self_attention: Callable[[torch.Tensor, int], torch.Tensor]
    embedding: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    #: ``(idx, w)``: the rows of ``w`` for the positions of (B, T) tokens ``idx``, added to their embeddings
    position_embedding: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    cross_entropy: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _torch_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    # Written out (no fused SDPA kernel) so the arithmetic is the same on every backend.
    t = q.shape[2]
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[3]))
    return att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v


TORCH_OPS = Ops(
    linear=F.linear,
    conv2d=lambda x, w, b, padding: F.conv2d(x, w, b, padding=padding),
    max_pool2=lambda x: F.max_pool2d(x, 2),
    mean_pixels=lambda x: x.mean(dim=(2, 3)),
    layer_norm=lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps),
    gelu=F.gelu,
    self_attention=partial(repro.per_head, _torch_attention),
    embedding=F.embedding,
    position_embedding=lambda idx, w: F.embedding(torch.arange(idx.shape[1], device=idx.device), w),  # (T, E), broadcast
    cross_entropy=F.cross_entropy,
)

REPRO_OPS = Ops(
    linear=repro.linear,
    conv2d=repro.conv2d,
    max_pool2=repro.max_pool2,
    mean_pixels=repro.mean_pixels,
    layer_norm=repro.layer_norm,
    gelu=repro.gelu,
    self_attention=repro.self_attention,
    embedding=repro.embedding,
    position_embedding=repro.position_embedding,
    cross_entropy=repro.cross_entropy,
)


#: repro-v2: repro-v1's operations, the contractions with each multiply-add fused.
REPRO_V2_OPS = replace(
    REPRO_OPS,
    linear=partial(repro.linear, fused=True),
    conv2d=partial(repro.conv2d, fused=True),
    self_attention=partial(repro.self_attention, fused=True),
)


def ops_for(numerics: Numerics) -> Ops:
    p = profile(numerics)
    if not p.repro:
        return TORCH_OPS
    return REPRO_V2_OPS if p.fused else REPRO_OPS


class MLP(nn.Module):
    def __init__(self, cfg: MLPConfig, ops: Ops = TORCH_OPS) -> None:
        super().__init__()
        self.ops = ops
        dims = (cfg.input_dim, *cfg.hidden, cfg.num_classes)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = F.relu(self.ops.linear(x, layer.weight, layer.bias))
        last = self.layers[-1]
        return self.ops.linear(x, last.weight, last.bias)


class CNN(nn.Module):
    def __init__(self, cfg: CNNConfig, ops: Ops = TORCH_OPS) -> None:
        super().__init__()
        self.ops = ops
        self.pad = cfg.kernel_size // 2
        chans = (cfg.in_channels, *cfg.channels)
        pad = cfg.kernel_size // 2
        self.convs = nn.ModuleList(nn.Conv2d(a, b, cfg.kernel_size, padding=pad) for a, b in zip(chans, chans[1:]))
        self.hidden = nn.Linear(cfg.flat_features, cfg.hidden)
        self.head = nn.Linear(cfg.hidden, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = self.ops
        for conv in self.convs:
            assert isinstance(conv, nn.Conv2d) and conv.bias is not None
            x = o.max_pool2(F.relu(o.conv2d(x, conv.weight, conv.bias, self.pad)))
        x = F.relu(o.linear(x.flatten(1), self.hidden.weight, self.hidden.bias))
        return o.linear(x, self.head.weight, self.head.bias)


class _Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, bias: bool, ops: Ops) -> None:
        super().__init__()
        self.ops = ops
        e = n_embd
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(e, bias=bias)
        self.attn = nn.Linear(e, 3 * e, bias=bias)
        self.proj = nn.Linear(e, e, bias=bias)
        self.ln_2 = nn.LayerNorm(e, bias=bias)
        self.fc = nn.Linear(e, 4 * e, bias=bias)
        self.fc_proj = nn.Linear(4 * e, e, bias=bias)

    def _attention(self, x: torch.Tensor) -> torch.Tensor:
        o = self.ops
        y = o.self_attention(o.linear(x, self.attn.weight, self.attn.bias), self.n_head)
        return o.linear(y, self.proj.weight, self.proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = self.ops
        x = x + self._attention(o.layer_norm(x, self.ln_1.weight, self.ln_1.bias, self.ln_1.eps))
        hidden = o.gelu(o.linear(o.layer_norm(x, self.ln_2.weight, self.ln_2.bias, self.ln_2.eps), self.fc.weight, self.fc.bias))
        return x + o.linear(hidden, self.fc_proj.weight, self.fc_proj.bias)


class _Decoder(nn.Module):
    """Token and position embeddings, pre-LN blocks and a final LayerNorm; a subclass adds its head."""

    def __init__(self, cfg: CharTransformerConfig | GPTConfig, bias: bool, ops: Ops) -> None:
        super().__init__()
        self.ops = ops
        self.block_size = cfg.block_size
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(_Block(cfg.n_embd, cfg.n_head, bias, ops) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=bias)

    def _torch_init(self) -> None:
        """``init_override``'s distributions through torch's initializers (the ``torch`` numerics;
        :func:`portable_init` draws the same ones under ``repro-v1``)."""
        for name, p in self.named_parameters():
            init = self.init_override(name, p)
            if init is not None and init.kind == "normal":
                nn.init.normal_(p, mean=0.0, std=init.scale)
            elif init is not None:
                nn.init.constant_(p, init.scale)

    def init_override(self, name: str, p: torch.Tensor) -> Init | None:
        """GPT-2's scheme, over the layers' defaults: matrices N(0, 0.02), biases zero."""
        if name.endswith("weight") and p.dim() == 2:
            return Init("normal", 0.02)
        if name.endswith("bias"):
            return Init("const", 0.0)
        return None

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The final LayerNorm's output for tokens ``idx`` (batch, time)."""
        o = self.ops
        x = o.embedding(idx, self.tok.weight) + o.position_embedding(idx, self.pos.weight)
        for block in self.blocks:
            x = block(x)
        return o.layer_norm(x, self.ln_f.weight, self.ln_f.bias, self.ln_f.eps)


class CharTransformer(_Decoder):
    """A nanoGPT in miniature: token and position embeddings, pre-LN blocks, a linear head."""

    def __init__(self, cfg: CharTransformerConfig, ops: Ops = TORCH_OPS) -> None:
        super().__init__(cfg, True, ops)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self._torch_init()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.ops.linear(self.hidden(idx), self.head.weight)


class GPT(_Decoder):
    """GPT-2 (nanoGPT's ``GPT`` without dropout): the head is the token embedding, one tensor
    (``tok.weight``) whose gradient is the embedding's plus the head's (autograd adds the two:
    one correctly rounded add per element, and two terms add the same in either order)."""

    def __init__(self, cfg: GPTConfig, ops: Ops = TORCH_OPS) -> None:
        super().__init__(cfg, cfg.bias, ops)
        self.residual_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        self._torch_init()

    def init_override(self, name: str, p: torch.Tensor) -> Init | None:
        """GPT-2's scheme: the projections into the residual stream N(0, 0.02 / sqrt(2 n_layer))."""
        if name.endswith("proj.weight"):  # proj and fc_proj
            return Init("normal", self.residual_std)
        return super().init_override(name, p)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.ops.linear(self.hidden(idx), self.tok.weight)


class _ResidualBlock(nn.Module):
    """``relu(x + conv_2(relu(conv_1(x))))``; the shortcut a 1x1 convolution where channels change."""

    def __init__(self, c_in: int, c: int, ops: Ops) -> None:
        super().__init__()
        self.ops = ops
        self.conv_1 = nn.Conv2d(c_in, c, 3, padding=1)
        self.conv_2 = nn.Conv2d(c, c, 3, padding=1)
        self.shortcut = nn.Conv2d(c_in, c, 1) if c_in != c else None

    def _conv(self, conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
        assert conv.bias is not None
        return self.ops.conv2d(x, conv.weight, conv.bias, conv.kernel_size[0] // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self._conv(self.conv_2, F.relu(self._conv(self.conv_1, x)))
        return F.relu((x if self.shortcut is None else self._conv(self.shortcut, x)) + y)


class ResNet(nn.Module):
    """A residual CNN: stem, stages of basic blocks (max-pooled between stages), global average
    pool, linear head (:class:`proofs.spec.ResNetConfig`)."""

    def __init__(self, cfg: ResNetConfig, ops: Ops = TORCH_OPS) -> None:
        super().__init__()
        self.ops = ops
        self.stem = nn.Conv2d(cfg.in_channels, cfg.channels[0], 3, padding=1)
        self.stages = nn.ModuleList(nn.Sequential(*(_ResidualBlock(c_in if j == 0 else c, c, ops) for j in range(cfg.blocks))) for c_in, c, _ in cfg.stages())
        self.head = nn.Linear(cfg.channels[-1], cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = self.ops
        assert self.stem.bias is not None
        x = F.relu(o.conv2d(x, self.stem.weight, self.stem.bias, 1))
        for i, stage in enumerate(self.stages):
            x = stage(o.max_pool2(x) if i else x)
        return o.linear(o.mean_pixels(x), self.head.weight, self.head.bias)


REGISTRY: dict[str, Callable[..., nn.Module]] = {
    "mlp": MLP,
    "cnn": CNN,
    "char-transformer": CharTransformer,
    "gpt": GPT,
    "resnet": ResNet,
}


def _layer_init(module: nn.Module, name: str, p: torch.Tensor) -> Init:
    """The distribution torch's ``reset_parameters`` gives parameter ``name`` of ``module``."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        # kaiming_uniform_(a=sqrt(5)) for the weight and the bias alike: bound 1/sqrt(fan_in)
        return Init("uniform", 1.0 / math.sqrt(module.weight[0].numel()))
    if isinstance(module, nn.LayerNorm):
        return Init("const", 1.0 if name == "weight" else 0.0)
    if isinstance(module, nn.Embedding):
        return Init("normal", 1.0)
    raise TypeError(f"no initialization for {type(module).__name__}.{name}")


def portable_init(model: nn.Module, seed: int) -> None:
    """Overwrite every parameter of ``model`` with its distribution drawn by
    :func:`proofs.repro_init.draw`, each from the stream of (``seed``, parameter name)."""
    override = getattr(model, "init_override", None)
    with torch.no_grad():
        for prefix, module in model.named_modules():
            for pname, p in module.named_parameters(recurse=False):
                name = f"{prefix}.{pname}" if prefix else pname
                init = (override(name, p) if override else None) or _layer_init(module, pname, p)
                p.copy_(draw(init, tensor_seed(seed, name), tuple(p.shape)))


def build_model(spec: JobSpec, device: torch.device | str = "cpu") -> nn.Module:
    """The spec's model with its seeded initial weights (float32, on ``device``), computing
    with the spec's numerics.

    Weights are drawn on the CPU from the spec's seed alone (the process's global RNG is
    left as it was), then moved, so every device starts from the same bits: under
    ``"repro-v1"`` by :func:`portable_init` (no torch kernel), under ``"torch"`` by torch's
    initializers seeded with ``derive_seed(seed, "init")``.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(spec.seed, "init"))
        model = REGISTRY[spec.model.kind](spec.model, ops_for(spec.numerics))
    if profile(spec.numerics).repro:
        portable_init(model, spec.seed)
    return model.to(device=device, dtype=torch.float32)
