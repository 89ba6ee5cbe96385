"""The job spec: declarative, versioned, bounded data that says exactly what to train.

A spec names a model architecture from the registry (:mod:`proofs.models`) with
its typed config, a dataset by content id, an optimizer with every
hyperparameter pinned, the batch size, the number of steps, the seed (which
fixes both the initial weights and the data order), the checkpoint interval
``k`` and how replays are judged. Nothing in it is executable, and every size
is bounded so that a solver can accept any spec without trusting its author.

Specs travel as canonical JSON (sorted keys, no whitespace, defaults written
out), so the same spec always has the same bytes, hash and CID::

    spec = load_spec(path.read_bytes())
    data = spec.canonical_bytes()        # what the submitter uploads
    spec.spec_hash()                     # keccak256 of those bytes, in every checkpoint
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer, model_validator

from core.bounded import InputRejected, load_json
from proofs.errors import LimitExceeded, SpecError
from proofs.keccak import keccak

__all__ = [
    "SPEC_VERSION",
    "Limits",
    "MLPConfig",
    "CNNConfig",
    "CharTransformerConfig",
    "GPTConfig",
    "ResNetConfig",
    "ModelConfig",
    "TOKEN_MODELS",
    "training_memory_bytes",
    "DatasetSpec",
    "InitSpec",
    "EvalSpec",
    "SGDConfig",
    "AdamConfig",
    "AdamWConfig",
    "OptimizerConfig",
    "ScheduleConfig",
    "Tolerance",
    "Numerics",
    "JobSpec",
    "load_spec",
    "canonical_json",
]

SPEC_VERSION: Literal[1] = 1


class Limits:
    """Upper bounds on everything a spec can ask for (a solver runs any spec within them)."""

    SPEC_BYTES = 16 * 1024
    PARAMS = 130_000_000  # GPT-2 small (124M) fits
    STEPS = 1_000_000
    SEGMENTS = 100_000
    BATCH = 4096
    DATASET_BYTES = 256 * 1024 * 1024  # 128M uint16 tokens: more than a CPU trains a 124M model on in a commit window
    #: A pretrained model: its parameters in float32 plus a header.
    WEIGHTS_BYTES = 4 * PARAMS + (1 << 20)
    #: A checkpoint, and so a final model: the parameters plus at most two optimizer slots each, float32, plus a header.
    CHECKPOINT_BYTES = 3 * 4 * PARAMS + (1 << 20)
    WIDTH = 8192
    LAYERS = 16
    SEQUENCE = 1024
    VOCAB = 65_536
    CLASSES = 10_000
    #: Peak training memory a spec may need (:func:`training_memory_bytes`): a GPT-2-small job with
    #: micro-batches of up to 4 sequences of 1024 tokens fits (22.2 GiB estimated, docs/formats.md).
    MEMORY_BYTES = 24 << 30


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


_Width = Annotated[int, Field(ge=1, le=Limits.WIDTH)]
_PositiveFloat = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
_Fraction = Annotated[float, Field(ge=0.0, lt=1.0, allow_inf_nan=False)]


# ----------------------------------------------------------------- models


class MLPConfig(_Frozen):
    """Fully connected classifier: flatten, ``hidden`` ReLU layers, a linear head."""

    kind: Literal["mlp"] = "mlp"
    input_dim: _Width
    hidden: tuple[_Width, ...] = Field(min_length=0, max_length=Limits.LAYERS)
    num_classes: Annotated[int, Field(ge=2, le=Limits.CLASSES)]

    def param_count(self) -> int:
        dims = (self.input_dim, *self.hidden, self.num_classes)
        return sum(a * b + b for a, b in zip(dims, dims[1:]))

    def activation_floats(self) -> int:
        """Floats the forward keeps for the backward per example: each layer's input, output and ReLU."""
        dims = (self.input_dim, *self.hidden, self.num_classes)
        return sum(a + 2 * b for a, b in zip(dims, dims[1:]))


class CNNConfig(_Frozen):
    """Small convnet: per entry of ``channels`` a same-padded conv, ReLU and 2x2 max-pool;
    then a ReLU hidden layer and a linear head."""

    kind: Literal["cnn"] = "cnn"
    in_channels: Annotated[int, Field(ge=1, le=16)]
    height: Annotated[int, Field(ge=2, le=256)]
    width: Annotated[int, Field(ge=2, le=256)]
    channels: tuple[Annotated[int, Field(ge=1, le=512)], ...] = Field(min_length=1, max_length=6)
    kernel_size: Literal[3, 5] = 3
    hidden: _Width
    num_classes: Annotated[int, Field(ge=2, le=Limits.CLASSES)]

    @model_validator(mode="after")
    def _pools_fit(self) -> CNNConfig:
        scale = 2 ** len(self.channels)
        if self.height % scale or self.width % scale:
            raise ValueError(f"height and width must be divisible by 2**len(channels) = {scale} (got {self.height}x{self.width})")
        return self

    @property
    def flat_features(self) -> int:
        scale = 2 ** len(self.channels)
        return self.channels[-1] * (self.height // scale) * (self.width // scale)

    def param_count(self) -> int:
        total, c_in = 0, self.in_channels
        for c_out in self.channels:
            total += c_in * c_out * self.kernel_size**2 + c_out
            c_in = c_out
        total += self.flat_features * self.hidden + self.hidden
        return total + self.hidden * self.num_classes + self.num_classes

    def activation_floats(self) -> int:
        """Floats the forward keeps for the backward per example: per stage the im2col columns
        (``kernel_size**2`` x input channels per pixel), the convolution's output and ReLU, the
        pooled map and its argmax bytes (counted as floats); then the head's layers."""
        total, c_in, pixels = 0, self.in_channels, self.height * self.width
        for c in self.channels:
            total += pixels * (self.kernel_size**2 * c_in + 2 * c) + pixels // 2 * c
            c_in, pixels = c, pixels // 4
        return total + self.flat_features + 2 * self.hidden + 2 * self.num_classes


class _DecoderFields(_Frozen):
    """The sizes of a decoder-only transformer over tokens (nanoGPT's ``GPTConfig`` names)."""

    vocab_size: Annotated[int, Field(ge=2, le=Limits.VOCAB)]
    block_size: Annotated[int, Field(ge=2, le=Limits.SEQUENCE)]
    n_layer: Annotated[int, Field(ge=1, le=Limits.LAYERS)]
    n_head: Annotated[int, Field(ge=1, le=64)]
    n_embd: Annotated[int, Field(ge=1, le=4096)]

    @model_validator(mode="after")
    def _heads_divide(self) -> _DecoderFields:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} must be divisible by n_head {self.n_head}")
        return self

    def _decoder_params(self, bias: bool) -> int:
        """Embeddings, blocks and the final LayerNorm (no head); ``bias``: linear and LayerNorm biases."""
        e, b = self.n_embd, int(bias)
        per_layer = 2 * (e + b * e) + (3 * e * e + b * 3 * e) + (e * e + b * e) + (4 * e * e + b * 4 * e) + (4 * e * e + b * e)
        return self.vocab_size * e + self.block_size * e + self.n_layer * per_layer + e + b * e

    def activation_floats(self) -> int:
        """Floats the forward keeps for the backward per example (a window of ``block_size`` tokens):
        per block about 23 ``n_embd`` (normalized inputs, q k v and their per-head copies, attention
        output, the 4 ``n_embd`` MLP hidden before and after GELU, residual sums) plus the
        ``n_head`` x ``block_size`` attention probabilities per token; then the final LayerNorm and
        the logits with their gradient (2 ``vocab_size``)."""
        e, t = self.n_embd, self.block_size
        return t * (self.n_layer * (23 * e + self.n_head * t) + 2 * e + 2 * self.vocab_size)


class CharTransformerConfig(_DecoderFields):
    """nanoGPT-style decoder over byte/character tokens (pre-LayerNorm, causal attention,
    GELU MLP, no dropout so that a step is a pure function of state and batch), with its own
    bias-free head."""

    kind: Literal["char-transformer"] = "char-transformer"

    def param_count(self) -> int:
        return self._decoder_params(bias=True) + self.n_embd * self.vocab_size


class GPTConfig(_DecoderFields):
    """GPT-2 in nanoGPT's configuration (``GPTConfig``: ``vocab_size``, ``block_size``, ``n_layer``,
    ``n_head``, ``n_embd``, ``bias``; no dropout): the char-transformer's blocks, biases in the
    linear layers and LayerNorms only where ``bias``, and the head tied to the token embedding
    (one tensor, ``tok.weight``). GPT-2 small is 50257 / 1024 / 12 / 12 / 768, ``bias`` true:
    124,439,808 parameters."""

    kind: Literal["gpt"] = "gpt"
    bias: bool = True

    def param_count(self) -> int:
        return self._decoder_params(self.bias)


class ResNetConfig(_Frozen):
    """A residual CNN for images, without normalization (a step stays a pure function of state
    and batch): a 3x3 stem convolution (``in_channels`` -> ``channels[0]``) and ReLU; per entry of
    ``channels`` a stage, halved by a 2x2 max-pool before every stage but the first, of ``blocks``
    basic blocks ``relu(x + conv(relu(conv(x))))`` (3x3, same padding), whose shortcut is a 1x1
    convolution where the channels change; a global average pool and a linear head."""

    kind: Literal["resnet"] = "resnet"
    in_channels: Annotated[int, Field(ge=1, le=16)]
    height: Annotated[int, Field(ge=2, le=256)]
    width: Annotated[int, Field(ge=2, le=256)]
    channels: tuple[Annotated[int, Field(ge=1, le=512)], ...] = Field(min_length=1, max_length=6)
    blocks: Annotated[int, Field(ge=1, le=8)]
    num_classes: Annotated[int, Field(ge=2, le=Limits.CLASSES)]

    @model_validator(mode="after")
    def _pools_fit(self) -> ResNetConfig:
        scale = 2 ** (len(self.channels) - 1)
        if self.height % scale or self.width % scale:
            raise ValueError(f"height and width must be divisible by 2**(len(channels) - 1) = {scale} (got {self.height}x{self.width})")
        return self

    def stages(self) -> list[tuple[int, int, int]]:
        """``(input channels, channels, pixels)`` of each stage."""
        out, c_in, pixels = [], self.channels[0], self.height * self.width
        for i, c in enumerate(self.channels):
            pixels //= 4 if i else 1
            out.append((c_in, c, pixels))
            c_in = c
        return out

    def param_count(self) -> int:
        total = self.in_channels * self.channels[0] * 9 + self.channels[0]
        for c_in, c, _ in self.stages():
            total += c_in * c * 9 + c + (2 * self.blocks - 1) * (c * c * 9 + c)  # the first convolution reads c_in channels
            total += c_in * c + c if c_in != c else 0
        return total + self.channels[-1] * self.num_classes + self.num_classes

    def activation_floats(self) -> int:
        """Floats the forward keeps for the backward per example: the stem's im2col columns and
        feature maps; per block the im2col columns of its two convolutions (9 x their input
        channels per pixel) and five feature maps (two convolution outputs, a ReLU, the sum and its
        ReLU); per stage its pooled input and the shortcut's columns and output; the head's few."""
        total = (9 * self.in_channels + 2 * self.channels[0]) * self.height * self.width
        for c_in, c, pixels in self.stages():
            total += pixels * (9 * c_in + 9 * c + 5 * c + (self.blocks - 1) * (18 * c + 5 * c) + 3 * c_in)
        return total + self.channels[-1] + 2 * self.num_classes


ModelConfig = Annotated[MLPConfig | CNNConfig | CharTransformerConfig | GPTConfig | ResNetConfig, Field(discriminator="kind")]

#: The model kinds that read one token stream (``dataset.targets`` null) and predict the next token.
TOKEN_MODELS = ("char-transformer", "gpt")


# ----------------------------------------------------------------- data


class DatasetSpec(_Frozen):
    """Where the training data is and which tensors to read.

    Classification models (``mlp``, ``cnn``, ``resnet``) read ``inputs`` (float features, or
    uint8 images) and ``targets`` (integer labels); the token models (:data:`TOKEN_MODELS`) read
    one 1-D integer tensor of tokens named ``inputs`` and need ``targets`` to be null.
    ``format`` ``u16`` is a flat token file (little-endian uint16, no header: nanoGPT's
    ``train.bin``), the whole file one token stream, so ``targets`` is null there.
    ``size_bytes`` is the exact length of the dataset file: a downloader stops
    past it and the loader refuses anything else. ``sealed``: the file is sealed under the job's
    data key (docs/sealing.md), so ``cid`` and ``size_bytes`` are the sealed bytes'; the parties the
    chain entitles open it with the key before loading it.
    """

    cid: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9]+$")]
    format: Literal["npz", "safetensors", "u16"]
    size_bytes: Annotated[int, Field(ge=1, le=Limits.DATASET_BYTES)]
    inputs: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")] = "x"
    targets: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")] | None = "y"
    sealed: bool = False

    @model_validator(mode="after")
    def _one_stream(self) -> DatasetSpec:
        if self.format == "u16" and self.targets is not None:
            raise ValueError("a u16 file is one token stream: dataset.targets must be null")
        return self

    @model_serializer(mode="wrap")
    def _sealed_only_when_sealed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``sealed`` is written only when true, so every earlier spec keeps its bytes, hash and CID."""
        dumped: dict[str, Any] = handler(self)
        if not self.sealed:
            dumped.pop("sealed", None)
        return dumped


class InitSpec(_Frozen):
    """Fine-tuning: the pretrained weights training starts from, by content id. The file is
    safetensors holding exactly the model's parameters by module name, float32 (what
    ``veritrain model export`` writes as ``weights.safetensors``); checkpoint 0 is those
    parameters with zero optimizer slots. ``size_bytes`` is its exact length."""

    cid: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9]+$")]
    size_bytes: Annotated[int, Field(ge=1, le=Limits.WEIGHTS_BYTES)]


class EvalSpec(_Frozen):
    """A held-out evaluation split, never trained on: ``count`` examples (tokens, for the
    token models) or that ``fraction`` of them, chosen as :func:`proofs.data.load_dataset`
    says. Its mean loss is computed at every checkpoint whose step is a multiple of ``every``
    (itself a multiple of ``checkpoint_interval``), and reported, not committed."""

    count: Annotated[int, Field(ge=1, le=Limits.DATASET_BYTES)] | None = None
    fraction: Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)] | None = None
    every: Annotated[int, Field(ge=1, le=Limits.STEPS)]

    @model_validator(mode="after")
    def _one_size(self) -> EvalSpec:
        if (self.count is None) == (self.fraction is None):
            raise ValueError("give exactly one of count and fraction")
        return self


# ----------------------------------------------------------------- optimizers


class SGDConfig(_Frozen):
    """SGD with momentum, PyTorch's formula: ``g += wd*p; b = m*b + (1-dampening)*g;
    p -= lr * (g + m*b if nesterov else b)`` (the momentum buffer starts at zero)."""

    kind: Literal["sgd"] = "sgd"
    lr: Annotated[float, Field(gt=0.0, le=10.0, allow_inf_nan=False)]
    momentum: _Fraction = 0.0
    dampening: _Fraction = 0.0
    weight_decay: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 0.0
    nesterov: bool = False

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self) -> SGDConfig:
        if self.nesterov and (self.momentum == 0.0 or self.dampening != 0.0):
            raise ValueError("nesterov needs momentum > 0 and dampening = 0")
        return self


class _AdamFields(_Frozen):
    """The fields Adam and AdamW share (canonical JSON sorts keys, so their order is free)."""

    lr: Annotated[float, Field(gt=0.0, le=10.0, allow_inf_nan=False)]
    beta1: _Fraction = 0.9
    beta2: _Fraction = 0.999
    eps: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = 1e-8


class AdamConfig(_AdamFields):
    """Adam (L2 weight decay added to the gradient, as ``torch.optim.Adam``), bias-corrected."""

    kind: Literal["adam"] = "adam"
    weight_decay: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 0.0


class AdamWConfig(_AdamFields):
    """AdamW (``torch.optim.AdamW``): decoupled weight decay ``p *= 1 - lr*wd`` before the
    bias-corrected Adam step, which sees the plain gradient."""

    kind: Literal["adamw"] = "adamw"
    weight_decay: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 0.01


OptimizerConfig = Annotated[SGDConfig | AdamConfig | AdamWConfig, Field(discriminator="kind")]


class ScheduleConfig(_Frozen):
    """The learning rate at global step ``t`` (the step being taken, from 0), as a multiple of
    ``optimizer.lr``: a linear warmup over ``warmup_steps`` steps (``lr * (t+1) / warmup_steps``),
    then ``constant`` (``lr``) or ``warmup-cosine`` (cosine decay from ``lr`` at the end of
    warmup towards ``min_lr``, reached one step past the last). Exactly as :func:`proofs.optim.learning_rate`
    computes it, in float64 (docs/formats.md)."""

    kind: Literal["constant", "warmup-cosine"] = "constant"
    warmup_steps: Annotated[int, Field(ge=0, le=Limits.STEPS)] = 0
    min_lr: Annotated[float, Field(ge=0.0, le=10.0, allow_inf_nan=False)] = 0.0


# ----------------------------------------------------------------- judging


class Tolerance(_Frozen):
    """How a replayed segment is compared with the committed checkpoint.

    ``exact``: the replayed checkpoint's bytes must hash to the committed state hash
    (what deterministic CPU replay gives). ``tolerance``: the parameter vector and the
    optimizer-state vector must each be within all three thresholds: relative l2
    (``|a-b| / |b|``), absolute linf (``max |a-b|``) and cosine distance
    (``1 - cos(a, b)``). Thresholds come from :mod:`proofs.calibrate`.
    """

    mode: Literal["exact", "tolerance"] = "exact"
    l2: _PositiveFloat | None = None
    linf: _PositiveFloat | None = None
    cosine: _PositiveFloat | None = None

    @model_validator(mode="after")
    def _thresholds_match_mode(self) -> Tolerance:
        given = [t is not None for t in (self.l2, self.linf, self.cosine)]
        if self.mode == "exact" and any(given):
            raise ValueError("exact mode takes no thresholds")
        if self.mode == "tolerance" and not all(given):
            raise ValueError("tolerance mode needs l2, linf and cosine thresholds")
        return self


# ----------------------------------------------------------------- numerics

#: Which kernels compute a step. ``repro-v1``: :mod:`proofs.repro`, the same bits on every
#: CPU and GPU (any instruction set, vector width, thread count), each term of a matmul a rounded
#: multiply then a rounded add; ``repro-v2``: the same, with each term one fused multiply-add
#: (faster where a multiply-add is one instruction: Intel cores, GPUs); ``torch``: plain PyTorch
#: kernels, faster on big models but bit-exact only on the same hardware and kernels.
Numerics = Literal["repro-v1", "repro-v2", "torch"]


# ----------------------------------------------------------------- the job


class JobSpec(_Frozen):
    """Everything a solver needs to train and a verifier needs to replay."""

    version: Literal[1] = SPEC_VERSION
    model: ModelConfig
    dataset: DatasetSpec
    optimizer: OptimizerConfig
    batch_size: Annotated[int, Field(ge=1, le=Limits.BATCH)]
    steps: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    seed: Annotated[int, Field(ge=0, lt=2**63)]
    checkpoint_interval: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    tolerance: Tolerance = Tolerance()
    numerics: Numerics = "repro-v1"
    # Added after version 1 shipped: written into the canonical bytes only when not the default
    # (OPTIONAL_FIELDS), so every earlier spec keeps its bytes, hash and CID.
    schedule: ScheduleConfig = ScheduleConfig()
    grad_clip: Annotated[float, Field(gt=0.0, le=1e6, allow_inf_nan=False)] | None = None
    micro_batches: Annotated[int, Field(ge=1, le=Limits.BATCH)] = 1
    init: InitSpec | None = None
    eval: EvalSpec | None = None

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        k = self.checkpoint_interval
        if self.steps % k:
            raise ValueError(f"steps {self.steps} must be a multiple of checkpoint_interval {k}")
        if self.steps // k > Limits.SEGMENTS:
            raise ValueError(f"{self.steps // k} segments; at most {Limits.SEGMENTS} are accepted")
        params = self.model.param_count()
        if params > Limits.PARAMS:
            raise ValueError(f"model has {params:,} parameters; at most {Limits.PARAMS:,} are accepted")
        is_lm = self.model.kind in TOKEN_MODELS
        if is_lm and self.dataset.targets is not None:
            raise ValueError(f"a {self.model.kind} reads one token tensor: dataset.targets must be null")
        if not is_lm and self.dataset.targets is None:
            raise ValueError(f"a {self.model.kind} classifier needs dataset.targets (the labels)")
        if self.batch_size % self.micro_batches:
            raise ValueError(f"batch_size {self.batch_size} must be a multiple of micro_batches {self.micro_batches}")
        sched = self.schedule
        if sched.warmup_steps > self.steps or (sched.kind == "warmup-cosine" and sched.warmup_steps >= self.steps):
            raise ValueError(f"schedule.warmup_steps {sched.warmup_steps} leaves no room in {self.steps} steps")
        if self.eval is not None and self.eval.every % k:
            raise ValueError(f"eval.every {self.eval.every} must be a multiple of checkpoint_interval {k}")
        if sched.min_lr > self.optimizer.lr:
            raise ValueError(f"schedule.min_lr {sched.min_lr} is above optimizer.lr {self.optimizer.lr}")
        memory = training_memory_bytes(self)
        if memory > Limits.MEMORY_BYTES:
            raise ValueError(
                f"training needs about {memory / 2**30:,.1f} GiB of memory; at most {Limits.MEMORY_BYTES / 2**30:g} GiB are accepted "
                f"(more micro_batches, a smaller batch or model lower it)"
            )
        return self

    @property
    def segments(self) -> int:
        """Number of segments n; the trace has n + 1 checkpoints (0 is the initial state)."""
        return self.steps // self.checkpoint_interval

    def param_count(self) -> int:
        return self.model.param_count()

    def to_json_dict(self) -> dict[str, Any]:
        """The spec as JSON values; fields of :data:`OPTIONAL_FIELDS` are left out at their defaults."""
        fields = type(self).model_fields
        return self.model_dump(mode="json", exclude={f for f in OPTIONAL_FIELDS if getattr(self, f) == fields[f].default})

    def canonical_bytes(self) -> bytes:
        """Sorted keys, no whitespace, every default written out (but those of
        :data:`OPTIONAL_FIELDS`): the bytes whose CID names the job."""
        return canonical_json(self.to_json_dict())

    def spec_hash(self) -> str:
        """``0x`` + keccak256 of :meth:`canonical_bytes` (recorded in every checkpoint)."""
        return "0x" + keccak(self.canonical_bytes()).hex()


#: Memory of the training process before any job: Python, torch, numba and the compiled kernels.
PROCESS_BYTES = 1 << 30


def training_memory_bytes(spec: JobSpec) -> int:
    """An upper estimate of the peak memory that training ``spec`` takes, from the spec alone
    (docs/formats.md, "Memory"): the process; the parameters, their optimizer slots, gradients
    (and their accumulator with micro-batches); a checkpoint being encoded (twice the state);
    twice the activations the forward keeps for one micro-batch (the backward's gradients are
    at most as large); the dataset at 8 bytes per file byte (tokens and labels become int64) and
    any pretrained weights."""
    params = spec.param_count()
    opt = spec.optimizer
    slots = 2 if opt.kind != "sgd" else int(opt.momentum > 0)
    state = 4 * params * (1 + slots)
    gradients = 4 * params * (2 if spec.micro_batches > 1 else 1)
    activations = 2 * 4 * (spec.batch_size // spec.micro_batches) * spec.model.activation_floats()
    inputs = 8 * spec.dataset.size_bytes + (spec.init.size_bytes if spec.init is not None else 0)
    return PROCESS_BYTES + 3 * state + gradients + activations + inputs


#: Fields added after the first version-1 specs: omitted from the canonical bytes at their defaults.
OPTIONAL_FIELDS = ("schedule", "grad_clip", "micro_batches", "init", "eval")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, compact separators, ASCII, no NaN/inf."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def load_spec(source: bytes | str | Mapping[str, Any]) -> JobSpec:
    """Parse and validate a job spec from JSON bytes/text or an already-decoded mapping.

    Raises :class:`SpecError` (one line per problem, with its field path) or
    :class:`LimitExceeded` for input over :attr:`Limits.SPEC_BYTES`.
    """
    if isinstance(source, (bytes, str)):
        raw = source.encode() if isinstance(source, str) else source
        if len(raw) > Limits.SPEC_BYTES:
            raise LimitExceeded("job spec size in bytes", len(raw), Limits.SPEC_BYTES)
        try:
            decoded = load_json(raw, max_bytes=Limits.SPEC_BYTES, what="job spec")  # size and depth bounded first
        except InputRejected as exc:
            raise SpecError(str(exc)) from None
    else:
        decoded = source
    if not isinstance(decoded, Mapping):
        raise SpecError(f"job spec must be a JSON object, got {type(decoded).__name__}")
    try:
        # Validate in JSON mode: arrays become tuples, ints are accepted where floats are
        # expected, and nothing but JSON types gets in (strict everywhere else).
        text = json.dumps(decoded, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"job spec holds a value JSON cannot carry: {exc}") from exc
    try:
        return JobSpec.model_validate_json(text)
    except ValidationError as exc:
        raise SpecError(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(spec)"
        lines.append(f"{where}: {err['msg']}")
    return "invalid job spec: " + "; ".join(lines)
