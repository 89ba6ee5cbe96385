"""The ``repro-v1`` and ``repro-v2`` numerics: autograd functions over :mod:`proofs.repro_kernels`.

Each operation the model registry and the loss use, forward and backward, is a
``torch.autograd.Function`` whose arithmetic runs in a numba kernel with a fixed
operation sequence per output, so its bits do not depend on the CPU's instruction
set, vector width, thread count or BLAS. What stays in torch does no rounding:
reshapes, transposes, ReLU (a select), single additions (residuals, gradient
accumulation: one correctly rounded add) and gathers.

The contractions (``linear``, ``conv2d``, ``causal_attention``, ``self_attention``) take ``fused``: False is repro-v1
(each term of a sum a rounded multiply, then a rounded add), True repro-v2 (each term one fused
multiply-add, one rounding); every other operation is the same under both. The models reach these
through :data:`proofs.models.REPRO_OPS` and :data:`proofs.models.REPRO_V2_OPS`.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numba
import numpy as np
import torch

from proofs import repro_kernels as K

__all__ = [
    "linear",
    "conv2d",
    "max_pool2",
    "mean_pixels",
    "layer_norm",
    "gelu",
    "causal_attention",
    "self_attention",
    "per_head",
    "embedding",
    "position_embedding",
    "cross_entropy",
    "each",
    "array",
    "sum_squares",
    "set_threads",
    "threads",
]


def _on_cuda(t: torch.Tensor) -> bool:
    """Whether an operation on ``t`` runs the CUDA kernels (:mod:`proofs.repro_cuda`, the same bits):
    ``t`` is on a CUDA device."""
    return t.device.type == "cuda"


def _cuda() -> ModuleType:
    # imported on first use: numba.cuda loads only in a process that computes on a GPU
    return importlib.import_module("proofs.repro_cuda")


def each(name: str, groups: Sequence[Sequence[torch.Tensor]], *scalars: Any) -> None:
    """The elementwise kernel ``name`` (``adam_update``, ``sgd_update``, ``add_into``, ``divide``,
    ``scale``: the same name and bits in :mod:`proofs.repro_kernels` and :mod:`proofs.repro_cuda`)
    over each group of contiguous tensors, a group per parameter in the kernel's argument order, its
    ``scalars`` shared: on a CPU one call per group; on a GPU one launch for every group
    (:func:`proofs.repro_cuda.each`)."""
    if groups and _on_cuda(groups[0][0]):
        _cuda().each(getattr(_cuda(), name), groups, *scalars)
        return
    kernel = getattr(K, name)
    for group in groups:
        kernel(*(array(t.reshape(-1)) for t in group), *scalars)


def array(t: torch.Tensor) -> Any:
    """Contiguous ``t``'s memory as a kernel's argument (no copy)."""
    return _cuda().array(t) if _on_cuda(t) else t.detach().numpy()


def sum_squares(tensors: Sequence[torch.Tensor]) -> list[float]:
    """Each contiguous tensor's float64 sum of squares, its elements in index order
    (:func:`proofs.repro_kernels.sum_squares`): on a GPU one launch for all of them
    (:func:`proofs.repro_cuda.sum_squares_each`), on a CPU one tensor after another."""
    if tensors and _on_cuda(tensors[0]):
        return _cuda().sum_squares_each(tensors)
    return [K.sum_squares(array(t.reshape(-1))) for t in tensors]


def _np(t: torch.Tensor) -> np.ndarray:
    """A C-contiguous float32 (or int64) numpy view of ``t``'s values (a copy only when needed)."""
    return t.detach().contiguous().numpy()


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a)


def _k(fused: bool) -> Any:
    """The contraction kernels (``bmm`` and the direct convolution's): repro-v1's, each term a
    rounded multiply then a rounded add, or with ``fused`` repro-v2's (:data:`proofs.repro_kernels.FUSED`),
    each term one fused multiply-add. Everything else is the same kernel under both."""
    return K.FUSED if fused else K


def _mm(a: np.ndarray, b: np.ndarray, fused: bool) -> np.ndarray:
    """a (M, K) @ b (K, N) with each output's k order fixed (:func:`proofs.repro_kernels.bmm`).
    ``a`` may be a transposed view (the kernel reads it in place); ``b`` is copied if its rows
    are not contiguous."""
    b = K.contiguous_rows(b)
    out = np.empty((1, a.shape[0], b.shape[1]), np.float32)
    _k(fused).bmm(a[None], b[None], out)
    return out[0]


def _bmm(a: np.ndarray, b: np.ndarray, fused: bool) -> np.ndarray:
    b = K.contiguous_rows(b)
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), np.float32)
    _k(fused).bmm(a, b, out)
    return out


def _colsum(g: np.ndarray) -> np.ndarray:
    out = np.empty(g.shape[1], np.float32)
    K.colsum(np.ascontiguousarray(g), out)
    return out


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, fused: bool) -> torch.Tensor:
        xs = _np(x).reshape(-1, x.shape[-1])
        wn = _np(w)
        if xs.shape[0] * (xs.shape[1] + wn.shape[0]) < wn.size:
            # Few rows (an MLP's or a CNN's batch): y^T = W x^T has the same products (a * b is
            # b * a, and fma(a, b, c) is fma(b, a, c)) and copies x and y, smaller than the
            # weight's transpose.
            y = K.contiguous_rows(_mm(wn, xs.T, fused).T)
        else:
            y = _mm(xs, wn.T, fused)
        if b is not None:
            K.add_rows(y, _np(b))  # one rounded add per output, after the whole dot product
        ctx.save_for_backward(x, w)
        ctx.has_bias, ctx.fused = b is not None, fused
        return _t(y).reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        g = _np(dy).reshape(-1, w.shape[0])
        xs = _np(x).reshape(-1, x.shape[-1])
        dx = _t(_mm(g, _np(w), ctx.fused)).reshape(x.shape) if ctx.needs_input_grad[0] else None
        dw = _t(_mm(g.T, xs, ctx.fused))
        db = _t(_colsum(g)) if ctx.has_bias else None
        return dx, dw, db, None


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, fused: bool = False) -> torch.Tensor:
    """``x @ w.T + b`` over the last dimension of ``x`` (``fused``: repro-v2's multiply-adds)."""
    return (_cuda().Linear if _on_cuda(x) else _Linear).apply(x, w, b, fused)


def _broadcast(a: np.ndarray, nb: int) -> np.ndarray:
    """``a`` (M, K) as (nb, M, K) without a copy (batch stride 0), for a batched matmul that
    multiplies every item by the same matrix (the kernel only reads it)."""
    return np.lib.stride_tricks.as_strided(a, (nb, *a.shape), (0, *a.strides))


class _Conv2d(torch.autograd.Function):
    # Where numba compiles the wide register tiles (AVX-512), the direct kernels
    # (K.conv2d_forward, conv2d_input_grad, conv2d_params_grad): x and dy read in place, no
    # im2col. Elsewhere im2col: cols (taps, pixels), pixels = (image, row, column) ascending; per
    # image b, y[b] = W cols[b] and dcols[b] = W^T G[b] (G[b] = dy[b] as (c_out, H*W), read in
    # place); dW^T = cols G^T. Both give every output the same sequence (docs/numerics.md).
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, pad: int, fused: bool) -> torch.Tensor:
        nb, _, hh, ww = x.shape
        c_out, c_in, ks, _ = w.shape
        ctx.pad, ctx.x_shape, ctx.direct, ctx.fused = pad, x.shape, K.WIDE_TILES, fused
        kern = _k(fused)
        if ctx.direct:
            y = np.empty((nb, c_out, hh, ww), np.float32)
            kern.conv2d_forward(_np(x), _np(w), _np(b), pad, y)
            ctx.save_for_backward(w, x)
            return _t(y)
        cols = np.empty((c_in * ks * ks, nb * hh * ww), np.float32)
        K.im2col(_np(x), ks, pad, cols)
        y = np.empty((nb, c_out, hh * ww), np.float32)  # NCHW: no transposition copy
        kern.bmm(_broadcast(_np(w).reshape(c_out, -1), nb), cols.reshape(-1, nb, hh * ww).transpose(1, 0, 2), y)
        y += _np(b)[:, None]
        ctx.save_for_backward(w)
        ctx.cols = cols
        return _t(y).reshape(nb, c_out, hh, ww)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        w = ctx.saved_tensors[0]
        c_out, _, ks, _ = w.shape
        nb, _, hh, ww = ctx.x_shape
        g = _np(dy).reshape(nb, c_out, hh * ww)
        db = np.empty(c_out, np.float32)
        kern = _k(ctx.fused)
        if ctx.direct:
            dw = np.empty(w.shape, np.float32)
            kern.conv2d_params_grad(_np(ctx.saved_tensors[1]), g, ks, ctx.pad, dw, db)
            if not ctx.needs_input_grad[0]:  # the first layer's input: the data
                return None, _t(dw), _t(db), None, None
            dx = np.empty(ctx.x_shape, np.float32)
            kern.conv2d_input_grad(g, _np(w), ctx.pad, dx)
            return _t(dx), _t(dw), _t(db), None, None
        K.channel_sum(g, db)
        dw = _mm(ctx.cols, g.transpose(0, 2, 1).reshape(-1, c_out), ctx.fused).T.reshape(w.shape)  # dW^T = cols G^T: G's one transposition copy
        if not ctx.needs_input_grad[0]:
            return None, _t(dw), _t(db), None, None
        dcols = np.empty((nb, ctx.cols.shape[0], hh * ww), np.float32)
        kern.bmm(_broadcast(_np(w).reshape(c_out, -1).T, nb), g, dcols)
        dx = np.empty(ctx.x_shape, np.float32)
        K.col2im(dcols, ks, ctx.pad, dx)
        return _t(dx), _t(dw), _t(db), None, None


def conv2d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, padding: int, fused: bool = False) -> torch.Tensor:
    """Stride-1 convolution with ``padding`` zeros each side (the output the input's size): ``W @ im2col(x) + b``
    in the fixed order, computed directly from x (AVX-512) or by im2col and the matmul per image
    (``fused``: repro-v2's multiply-adds)."""
    return (_cuda().Conv2d if _on_cuda(x) else _Conv2d).apply(x, w, b, padding, fused)


class _MaxPool2(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        nb, nc, hh, ww = x.shape
        y = np.empty((nb, nc, hh // 2, ww // 2), np.float32)
        idx = np.empty(y.shape, np.int8)
        K.maxpool2(_np(x), y, idx)
        ctx.idx, ctx.x_shape = idx, x.shape
        return _t(y)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        dx = np.empty(ctx.x_shape, np.float32)
        K.maxpool2_bwd(_np(dy), ctx.idx, dx)
        return _t(dx)


def max_pool2(x: torch.Tensor) -> torch.Tensor:
    """2x2 max-pool with stride 2 (the first maximum in scan order takes the gradient)."""
    return (_cuda().MaxPool2 if _on_cuda(x) else _MaxPool2).apply(x)


class _MeanPixels(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        nb, nc, hh, ww = x.shape
        y = np.empty(nb * nc, np.float32)
        K.rowsum(_np(x).reshape(nb * nc, hh * ww), y)
        K.divide(y, np.float32(hh * ww))
        ctx.x_shape = x.shape
        return _t(y).reshape(nb, nc)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        nb, nc, hh, ww = ctx.x_shape
        g = _np(dy).reshape(-1).copy()
        K.divide(g, np.float32(hh * ww))
        return _t(np.broadcast_to(g.reshape(nb, nc, 1, 1), ctx.x_shape).copy())  # a copy even of 1 x 1 maps: broadcast_to is read-only


def mean_pixels(x: torch.Tensor) -> torch.Tensor:
    """The mean of each (example, channel) map of (B, C, H, W) ``x`` (global average pool): its
    float32 sum over pixels in row-major order, then one float32 division by ``H * W``."""
    return (_cuda().MeanPixels if _on_cuda(x) else _MeanPixels).apply(x)


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, eps: float) -> torch.Tensor:
        xs = _np(x).reshape(-1, x.shape[-1])
        y = np.empty_like(xs)
        mean = np.empty(xs.shape[0], np.float64)
        rstd = np.empty(xs.shape[0], np.float64)
        K.layer_norm(xs, _np(w), np.zeros(w.shape, np.float32) if b is None else _np(b), eps, y, mean, rstd)
        ctx.save_for_backward(x, w)
        ctx.mean, ctx.rstd, ctx.has_bias = mean, rstd, b is not None
        return _t(y).reshape(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        xs = _np(x).reshape(-1, x.shape[-1])
        g = _np(dy).reshape(xs.shape)
        dx = np.empty_like(xs)
        K.layer_norm_bwd(g, xs, _np(w), ctx.mean, ctx.rstd, dx)
        dw = np.empty(xs.shape[1], np.float32)
        db = np.empty(xs.shape[1], np.float32)
        K.layer_norm_params_bwd(g, xs, ctx.mean, ctx.rstd, dw, db)
        return _t(dx).reshape(x.shape), _t(dw), _t(db) if ctx.has_bias else None, None


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    """Layer norm over the last dimension (statistics in float64); no ``b``: a bias of zeros."""
    return (_cuda().LayerNorm if _on_cuda(x) else _LayerNorm).apply(x, w, b, eps)


class _Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        xs = _np(x).reshape(-1)
        y = np.empty_like(xs)
        K.gelu(xs, y)
        ctx.save_for_backward(x)
        return _t(y).reshape(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        dx = np.empty(x.numel(), np.float32)
        K.gelu_bwd(_np(x).reshape(-1), _np(dy).reshape(-1), dx)
        return _t(dx).reshape(x.shape)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh form: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``."""
    return (_cuda().Gelu if _on_cuda(x) else _Gelu).apply(x)


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, fused: bool) -> tuple[np.ndarray, tuple[Any, ...]]:
    """``softmax(q k^T / sqrt(d), causal) v`` for contiguous (N, T, D) heads; the output and what
    :func:`_attend_bwd` needs."""
    scale = 1.0 / math.sqrt(q.shape[2])
    s = _bmm(q, k.transpose(0, 2, 1), fused)
    p = np.empty_like(s)
    K.causal_softmax(s, scale, p)
    return _bmm(p, v, fused), (q, k, v, p, scale, fused)


def _attend_bwd(saved: tuple[Any, ...], g: np.ndarray) -> np.ndarray:
    """The gradients of :func:`_attend`'s q, k and v, given its output's ``g``: (3, N, T, D)."""
    q, k, v, p, scale, fused = saved
    kern = _k(fused)
    grads = np.empty((3, *q.shape), np.float32)
    dp = _bmm(g, v.transpose(0, 2, 1), fused)
    kern.bmm(p.transpose(0, 2, 1), g, grads[2])
    ds = np.empty_like(dp)
    K.causal_softmax_bwd(p, dp, scale, ds)
    kern.bmm(ds, k, grads[0])
    kern.bmm(ds.transpose(0, 2, 1), q, grads[1])
    return grads


class _CausalAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, fused: bool) -> torch.Tensor:
        shape = q.shape  # (B, H, T, D)
        qn, kn, vn = (_np(z).reshape(-1, shape[2], shape[3]) for z in (q, k, v))
        y, ctx.saved = _attend(qn, kn, vn, fused)
        return _t(y).reshape(shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        shape = dy.shape
        grads = _attend_bwd(ctx.saved, _np(dy).reshape(-1, shape[2], shape[3]))
        return *(_t(z).reshape(shape) for z in grads), None


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, fused: bool = False) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d), causal) v`` for (B, H, T, D) inputs (``fused``: repro-v2's multiply-adds)."""
    return (_cuda().CausalAttention if _on_cuda(q) else _CausalAttention).apply(q, k, v, fused)


class _SelfAttention(torch.autograd.Function):
    # The heads copied out of qkv and back by a kernel (K.copy_heads), where
    # the split, the per-head transposes and their copies were autograd nodes (the split's backward a cat).
    @staticmethod
    def forward(ctx: Any, qkv: torch.Tensor, n_head: int, fused: bool) -> torch.Tensor:
        b, t, e3 = qkv.shape
        heads = np.empty((3, b * n_head, t, e3 // 3 // n_head), np.float32)
        K.copy_heads(_np(qkv), heads, True)
        y, ctx.saved = _attend(heads[0], heads[1], heads[2], fused)
        out = np.empty((b, t, e3 // 3), np.float32)
        K.copy_heads(out, y[None], False)
        return _t(out)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        b, t, e = dy.shape
        g = np.empty((1, *ctx.saved[0].shape), np.float32)
        K.copy_heads(_np(dy), g, True)
        dqkv = np.empty((b, t, 3 * e), np.float32)
        K.copy_heads(dqkv, _attend_bwd(ctx.saved, g[0]), False)
        return _t(dqkv), None, None


def self_attention(qkv: torch.Tensor, n_head: int, fused: bool = False) -> torch.Tensor:
    """Causal self-attention over (B, T, 3E) ``qkv`` (q, k and v side by side, each ``n_head`` heads
    of E / n_head features): :func:`causal_attention` per head, the heads side by side again in (B, T, E)."""
    if qkv.shape[2] % (3 * n_head):  # the kernel would leave the features past the last whole head unwritten
        raise ValueError(f"self_attention: qkv's {qkv.shape[2]} features are not 3 x {n_head} heads of equal size")
    if not _on_cuda(qkv):
        return _SelfAttention.apply(qkv, n_head, fused)
    return per_head(lambda q, k, v: _cuda().CausalAttention.apply(q, k, v, fused), qkv, n_head)


def per_head(attention: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor], qkv: torch.Tensor, n_head: int) -> torch.Tensor:
    """``attention`` over the (B, H, T, D) heads of (B, T, 3E) ``qkv`` (q, k and v side by side), cut out
    by torch's split and transposes, the heads side by side again in (B, T, E): torch's numerics, and
    :func:`self_attention` on a GPU."""
    b, t, e3 = qkv.shape
    q, k, v = (z.reshape(b, t, n_head, -1).transpose(1, 2) for z in qkv.split(e3 // 3, dim=2))
    return attention(q, k, v).transpose(1, 2).reshape(b, t, e3 // 3)


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.idx, ctx.w_shape = _np(idx).reshape(-1), w.shape
        return w.detach()[idx]  # a gather: no arithmetic

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[None, torch.Tensor]:
        dw = np.zeros(ctx.w_shape, np.float32)
        K.embedding_bwd(ctx.idx, _np(dy).reshape(-1, ctx.w_shape[1]), dw)
        return None, _t(dw)


def embedding(idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Rows ``w[idx]``; the gradient sums repeated rows in token order."""
    return (_cuda().Embedding if _on_cuda(w) else _Embedding).apply(idx, w)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x, t = _np(logits), _np(targets)
        if t.size and (t.min() < 0 or t.max() >= x.shape[1]):
            raise IndexError(f"target out of range [0, {x.shape[1]})")
        lse = np.empty(x.shape[0], np.float64)
        loss = K.cross_entropy(x, t, lse)
        ctx.saved = (x, t, lse)
        return torch.tensor(np.float32(loss))

    @staticmethod
    def backward(ctx: Any, dloss: torch.Tensor) -> tuple[torch.Tensor, None]:
        x, t, lse = ctx.saved
        grad = np.empty_like(x)
        K.cross_entropy_bwd(x, t, lse, float(dloss) / x.shape[0], grad)
        return _t(grad), None


def position_embedding(idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Rows ``w[t]`` for every token of (B, T) ``idx``, ``t`` its position: (B, T, E), not a (T, E)
    broadcast, so that each position's gradient is the sum over examples in order
    (:func:`embedding`), not torch's reduction of a broadcast (its order varies with torch's
    version and the sizes, and differs between CPU and CUDA)."""
    return embedding(torch.arange(idx.shape[1], device=idx.device).expand_as(idx), w)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of (N, C) logits against (N,) integer targets."""
    return (_cuda().CrossEntropy if _on_cuda(logits) else _CrossEntropy).apply(logits, targets)


def set_threads(n: int) -> None:
    """Threads for the kernels (any count gives the same bits)."""
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


def threads() -> int:
    return int(numba.get_num_threads())
