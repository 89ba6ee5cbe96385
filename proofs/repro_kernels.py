"""Reproducible CPU kernels (numba): every output is the same sequence of rounded operations
on every machine.

Rules each kernel keeps (docs/numerics.md says why):

* a fixed reduction order per output: a sum runs over its index in ascending order, never
  split across threads or vector lanes; ``prange`` and vectorization run across independent
  outputs only (matmul: rows x column tiles, each output accumulating over ``k`` in order);
* no fused multiply-add (numba's default: no ``fastmath``, so LLVM never contracts
  ``a * b + c``), no reassociation;
* transcendentals (``exp``, ``log``, ``tanh``) from fixed polynomials built from
  + - * / only (:func:`exp64`, :func:`log64`), never libm;
* float32 in and out; matmuls and plain sums (bias and embedding gradients, col2im) accumulate
  in float32, row reductions (softmax, layer norm, cross-entropy) in float64, each rounded to
  float32 once at the end.

All functions take preallocated C-contiguous outputs and return nothing unless stated.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from types import FunctionType
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

# numba's workqueue pool sleeps when idle; an OpenMP pool spins, and next to torch's own
# pool on a busy machine a spinning pool stalls every kernel launch (measured: 5x slower).
# The layer changes no bits; NUMBA_THREADING_LAYER still chooses another.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

__all__ = [
    "exp64",
    "log64",
    "tanh64",
    "bmm",
    "colsum",
    "causal_softmax",
    "causal_softmax_bwd",
    "layer_norm",
    "layer_norm_bwd",
    "layer_norm_params_bwd",
    "gelu",
    "gelu_bwd",
    "cross_entropy",
    "cross_entropy_bwd",
    "im2col",
    "col2im",
    "rowsum",
    "channel_sum",
    "maxpool2",
    "maxpool2_bwd",
    "embedding_bwd",
    "sgd_update",
    "adam_update",
    "add_into",
    "divide",
    "scale",
    "sum_squares",
]

# ------------------------------------------------------------------ threads

#: Below this much work (estimated nanoseconds on one core) a kernel runs its serial build:
#: a call of a ``parallel=True`` kernel goes through numba's workqueue, measured here at 50 us
#: of CPU (100 us wall on the loaded machine) even at one thread for an add of 64 elements
#: (0.2 us serially), and a transformer step makes about 100 kernel calls. The estimates are
#: rough; the build and the thread count change no bits.
PARALLEL_MIN = 100_000
_EXP_NS = 2.0  # per element of a kernel that calls exp64 (GELU: 1.9 ns measured)


def _size(arg: int, ns_per_element: float = 0.5) -> Callable[..., float]:
    """Work of a kernel: the size of its argument ``arg`` times ``ns_per_element``."""
    return lambda *args: args[arg].size * ns_per_element


def _parallel(work: Callable[..., float]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Compile a kernel twice: ``.kernel`` with ``prange`` across threads, ``.serial`` with
    ``prange`` as ``range`` (the same source, so the same operations per output). A call runs
    ``.kernel`` when more than one thread is set and ``work(*args)`` is at least
    :data:`PARALLEL_MIN`, else ``.serial``."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        kernel = njit(parallel=True, cache=True)(fn)
        # a function of its own name, so that numba's disk cache keeps the two builds apart
        twin = FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_serial", fn.__defaults__, fn.__closure__)
        twin.__qualname__ = fn.__qualname__ + "_serial"
        # IEEE division (inf or nan, no ZeroDivisionError), as in the parallel loops: the
        # Python error model's check on every division kept numba from vectorizing them
        serial = njit(cache=True, error_model="numpy")(twin)

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            if numba.get_num_threads() > 1 and work(*args) >= PARALLEL_MIN:
                return kernel(*args)
            return serial(*args)

        call.kernel, call.serial = kernel, serial  # type: ignore[attr-defined]
        return call

    return wrap


# ------------------------------------------------------------------ transcendentals

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2: n * _LN2_HI is exact for |n| < 2**11
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951
#: 2**k for k in [-1030, 1023] as exact float64 (scaling by a table entry is exact, no ldexp).
_POW2 = np.array([math.ldexp(1.0, k) for k in range(-1030, 1024)], dtype=np.float64)
_POW2_BIAS = 1030
#: 1/k! for the exp Taylor polynomial (|r| <= ln2/2: truncation error < 2e-16 relative).
_EXP_C = np.array([1.0 / float(np.prod(np.arange(1, k + 1, dtype=np.float64))) for k in range(14)], dtype=np.float64)
#: 2/(2k+1) for log's atanh series (|z| <= 0.1716: truncation error < 1e-17).
_LOG_C = np.array([2.0 / (2 * k + 1) for k in range(12)], dtype=np.float64)


@njit(cache=True, inline="always")
def exp64(x: float) -> float:
    """e**x in float64 from range reduction by ln 2 and a degree-13 Taylor polynomial."""
    if x != x:
        return x
    if x < -708.0:
        return 0.0
    if x > 709.0:
        return np.inf
    n = np.floor(x * _LOG2E + 0.5)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    p = _EXP_C[13]
    for i in range(12, -1, -1):
        p = p * r + _EXP_C[i]
    return p * _POW2[int(n) + _POW2_BIAS]


@njit(cache=True, inline="always")
def log64(x: float) -> float:
    """Natural log in float64 for finite x > 0: x = m * 2**e with m in [1/sqrt2, sqrt2],
    then log m = 2 atanh((m-1)/(m+1)) by its odd series."""
    if x != x or x < 0.0:
        return np.nan
    if x == 0.0:
        return -np.inf
    if x == np.inf:
        return x
    e = 0
    while x > 1.8446744073709552e19:  # 2**64
        x = x * 5.421010862427522e-20
        e += 64
    while x < 5.421010862427522e-20:
        x = x * 1.8446744073709552e19
        e -= 64
    while x > _SQRT2:
        x = x * 0.5
        e += 1
    while x < _SQRT2 * 0.5:
        x = x * 2.0
        e -= 1
    z = (x - 1.0) / (x + 1.0)
    z2 = z * z
    s = _LOG_C[11]
    for i in range(10, -1, -1):
        s = s * z2 + _LOG_C[i]
    return e * _LN2_HI + (e * _LN2_LO + z * s)


@njit(cache=True, inline="always")
def tanh64(u: float) -> float:
    if u > 20.0:
        return 1.0
    if u < -20.0:
        return -1.0
    t = exp64(2.0 * u)
    return (t - 1.0) / (t + 1.0)


# ------------------------------------------------------------------ matmul
#
# The matmul holds a 4-row x (1, 2 or 4)-vector tile of outputs in registers for the whole
# k loop: numba has no vector type, so a small one is declared below (an LLVM <16 x float>
# value with load, store, broadcast and a multiply-then-add as two separate IR instructions).
# LLVM lowers it to whatever the target has (one zmm with AVX-512, two ymm with AVX2, four
# xmm with SSE2); every lane is an independent output, so the bits cannot depend on that.

_W = 16  # float32 lanes per vector
_VEC = ir.VectorType(ir.FloatType(), _W)
_ROWS = 4  # rows per register tile: each loaded vector of b feeds four accumulators


class _F32Vec(types.Type):
    def __init__(self) -> None:
        super().__init__(name=f"float32x{_W}")


_f32vec = _F32Vec()


@register_model(_F32Vec)
class _F32VecModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VEC)


def _vec_ptr(context, builder, aryty, ary, index_types, index):
    arr = context.make_array(aryty)(context, builder, ary)
    inds = [context.cast(builder, v, t, types.intp) for v, t in zip(index, index_types)]
    return builder.bitcast(cgutils.get_item_pointer(context, builder, aryty, arr, inds, wraparound=False), _VEC.as_pointer())


@intrinsic
def _vload(typingctx, a, i, j):
    """a[i, j : j + 16] as a vector (no bounds check: the caller's tile is inside ``a``)."""

    def codegen(context, builder, sig, args):
        return builder.load(_vec_ptr(context, builder, sig.args[0], args[0], sig.args[1:], args[1:]), align=4)

    return _f32vec(a, i, j), codegen


@intrinsic
def _vstore(typingctx, a, i, j, v):
    """a[i, j : j + 16] = v."""

    def codegen(context, builder, sig, args):
        builder.store(args[3], _vec_ptr(context, builder, sig.args[0], args[0], sig.args[1:3], args[1:3]), align=4)
        return context.get_dummy_value()

    return types.none(a, i, j, v), codegen


@intrinsic
def _vsplat(typingctx, x):
    """x (float32) in every lane."""

    def codegen(context, builder, sig, args):
        one = builder.insert_element(ir.Constant(_VEC, ir.Undefined), args[0], ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), _W), [0] * _W))

    return _f32vec(types.float32), codegen


@intrinsic
def _vzero(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_VEC, [0.0] * _W)

    return _f32vec(), codegen


@intrinsic
def _vmuladd(typingctx, acc, x, y):
    """acc + x * y, lane by lane, as a float32 multiply rounded, then an add rounded: an fmul and
    an fadd with no fast-math flags, which LLVM never fuses into an FMA."""

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], builder.fmul(args[1], args[2]))

    return _f32vec(acc, x, y), codegen


# The register tiles: out[o0 + r, c0 : c0 + 16 nv] = the sum over k = 0, 1, ... of
# a[i0 + r, k] * b[k, j0 : j0 + 16 nv], starting from 0 (the same sequence the old 4 x 256 tile had).


@njit(cache=True)
def _tile4x4(a, i0, b, j0, out, o0, c0, kk):
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = _vzero()
    for k in range(kk):
        b0, b1, b2, b3 = _vload(b, k, j0), _vload(b, k, j0 + _W), _vload(b, k, j0 + 2 * _W), _vload(b, k, j0 + 3 * _W)
        x = _vsplat(a[i0, k])
        c00, c01, c02, c03 = _vmuladd(c00, x, b0), _vmuladd(c01, x, b1), _vmuladd(c02, x, b2), _vmuladd(c03, x, b3)
        x = _vsplat(a[i0 + 1, k])
        c10, c11, c12, c13 = _vmuladd(c10, x, b0), _vmuladd(c11, x, b1), _vmuladd(c12, x, b2), _vmuladd(c13, x, b3)
        x = _vsplat(a[i0 + 2, k])
        c20, c21, c22, c23 = _vmuladd(c20, x, b0), _vmuladd(c21, x, b1), _vmuladd(c22, x, b2), _vmuladd(c23, x, b3)
        x = _vsplat(a[i0 + 3, k])
        c30, c31, c32, c33 = _vmuladd(c30, x, b0), _vmuladd(c31, x, b1), _vmuladd(c32, x, b2), _vmuladd(c33, x, b3)
    _vstore(out, o0, c0, c00), _vstore(out, o0, c0 + _W, c01), _vstore(out, o0, c0 + 2 * _W, c02), _vstore(out, o0, c0 + 3 * _W, c03)
    _vstore(out, o0 + 1, c0, c10), _vstore(out, o0 + 1, c0 + _W, c11), _vstore(out, o0 + 1, c0 + 2 * _W, c12), _vstore(out, o0 + 1, c0 + 3 * _W, c13)
    _vstore(out, o0 + 2, c0, c20), _vstore(out, o0 + 2, c0 + _W, c21), _vstore(out, o0 + 2, c0 + 2 * _W, c22), _vstore(out, o0 + 2, c0 + 3 * _W, c23)
    _vstore(out, o0 + 3, c0, c30), _vstore(out, o0 + 3, c0 + _W, c31), _vstore(out, o0 + 3, c0 + 2 * _W, c32), _vstore(out, o0 + 3, c0 + 3 * _W, c33)


@njit(cache=True)
def _tile4x2(a, i0, b, j0, out, o0, c0, kk):
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _vzero()
    for k in range(kk):
        b0, b1 = _vload(b, k, j0), _vload(b, k, j0 + _W)
        x = _vsplat(a[i0, k])
        c00, c01 = _vmuladd(c00, x, b0), _vmuladd(c01, x, b1)
        x = _vsplat(a[i0 + 1, k])
        c10, c11 = _vmuladd(c10, x, b0), _vmuladd(c11, x, b1)
        x = _vsplat(a[i0 + 2, k])
        c20, c21 = _vmuladd(c20, x, b0), _vmuladd(c21, x, b1)
        x = _vsplat(a[i0 + 3, k])
        c30, c31 = _vmuladd(c30, x, b0), _vmuladd(c31, x, b1)
    _vstore(out, o0, c0, c00), _vstore(out, o0, c0 + _W, c01)
    _vstore(out, o0 + 1, c0, c10), _vstore(out, o0 + 1, c0 + _W, c11)
    _vstore(out, o0 + 2, c0, c20), _vstore(out, o0 + 2, c0 + _W, c21)
    _vstore(out, o0 + 3, c0, c30), _vstore(out, o0 + 3, c0 + _W, c31)


@njit(cache=True)
def _tile4x1(a, i0, b, j0, out, o0, c0, kk):
    c0_ = c1 = c2 = c3 = _vzero()
    for k in range(kk):
        b0 = _vload(b, k, j0)
        c0_ = _vmuladd(c0_, _vsplat(a[i0, k]), b0)
        c1 = _vmuladd(c1, _vsplat(a[i0 + 1, k]), b0)
        c2 = _vmuladd(c2, _vsplat(a[i0 + 2, k]), b0)
        c3 = _vmuladd(c3, _vsplat(a[i0 + 3, k]), b0)
    _vstore(out, o0, c0, c0_), _vstore(out, o0 + 1, c0, c1), _vstore(out, o0 + 2, c0, c2), _vstore(out, o0 + 3, c0, c3)


@njit(cache=True)
def _tile(nv, a, i0, b, j0, out, o0, c0, kk):
    """The 4 x (16 nv) tile at a's rows i0.., b's columns j0.., into out at (o0, c0)."""
    if nv == 4:
        _tile4x4(a, i0, b, j0, out, o0, c0, kk)
    elif nv == 2:
        _tile4x2(a, i0, b, j0, out, o0, c0, kk)
    else:
        _tile4x1(a, i0, b, j0, out, o0, c0, kk)


@njit(cache=True)
def _edge_tile(nv, a, i0, b, j0, out, kk):
    """A tile that sticks out of the matrix: computed on zero-padded copies of its rows of a
    and columns of b (the padding only adds outputs that are thrown away)."""
    width = nv * _W
    rows, cols = min(_ROWS, out.shape[0] - i0), min(width, out.shape[1] - j0)
    ap = np.zeros((_ROWS, kk), np.float32)
    ap[:rows] = a[i0 : i0 + rows]
    bp = np.zeros((kk, width), np.float32)
    bp[:, :cols] = b[:, j0 : j0 + cols]
    op = np.empty((_ROWS, width), np.float32)
    _tile(nv, ap, 0, bp, 0, op, 0, 0, kk)
    out[i0 : i0 + rows, j0 : j0 + cols] = op[:rows, :cols]


@_parallel(lambda a, b, out: out.size * a.shape[2] / 128)  # multiply-adds: about 8 of 16 lanes a ns
def bmm(a, b, out):
    """out[t] = a[t] @ b[t] for a (T, M, K), b (T, K, N): out[t, i, j] = sum_k a[t,i,k] * b[t,k,j],
    accumulated in float32 over k = 0, 1, ... in order (a separate multiply and add each).

    ``a`` may have any strides (a transposed view needs no copy); ``b`` and ``out`` must be
    contiguous along their last axis (their rows are loaded and stored as vectors)."""
    nb, m, kk = a.shape
    n = b.shape[2]
    if (b.size and b.strides[2] != 4) or (out.size and out.strides[2] != 4):
        raise ValueError("bmm: b and out must be contiguous along their last axis")
    nv = 4 if n >= 4 * _W else (2 if n >= 2 * _W else 1)  # the widest tile the columns fill
    width = nv * _W
    nr = (m + _ROWS - 1) // _ROWS
    nc = (n + width - 1) // width
    for t in prange(nb * nc * nr):  # row tiles innermost: a column panel of b is reused from cache
        bi = t // (nc * nr)
        i0 = (t % nr) * _ROWS
        j0 = ((t // nr) % nc) * width
        if i0 + _ROWS <= m and j0 + width <= n:
            _tile(nv, a[bi], i0, b[bi], j0, out[bi], i0, j0, kk)
        else:
            _edge_tile(nv, a[bi], i0, b[bi], j0, out[bi], kk)


_COLS = 256  # columns per pass of the column sums: four rows of them stay in L1


@njit(cache=True)
def _axpy1(o0, a0, bk, n):
    for j in range(n):
        o0[j] += a0 * bk[j]


@njit(cache=True)
def _add4(acc, g0, g1, g2, g3, n):
    for j in range(n):
        acc[j] = (((acc[j] + g0[j]) + g1[j]) + g2[j]) + g3[j]


@_parallel(_size(0))
def colsum(g, out):
    """out[j] = sum_i g[i, j] in float32, rows in ascending order."""
    m, n = g.shape
    nc = (n + _COLS - 1) // _COLS
    for c in prange(nc):
        j0 = c * _COLS
        j1 = min(j0 + _COLS, n)
        acc = np.zeros(j1 - j0, np.float32)
        m4 = m - m % 4
        for i in range(0, m4, 4):  # four rows a pass, still added one after the other
            _add4(acc, g[i, j0:j1], g[i + 1, j0:j1], g[i + 2, j0:j1], g[i + 3, j0:j1], j1 - j0)
        for i in range(m4, m):
            _axpy1(acc, np.float32(1.0), g[i, j0:j1], j1 - j0)
        out[j0:j1] = acc


# ------------------------------------------------------------------ attention softmax


_SOFTMAX_ROWS = 16  # rows per parallel task (they share one float64 buffer)


@_parallel(_size(0, _EXP_NS))
def causal_softmax(s, scale, p):
    """p[t, i, j] = softmax over j <= i of scale * s[t, i, j] (float64 inside), 0 for j > i."""
    nb, m, n = s.shape
    for c in prange((nb * m + _SOFTMAX_ROWS - 1) // _SOFTMAX_ROWS):
        e = np.empty(n, np.float64)
        for r in range(c * _SOFTMAX_ROWS, min((c + 1) * _SOFTMAX_ROWS, nb * m)):
            t, i = r // m, r % m
            row = s[t, i]
            hi = -np.inf
            for j in range(i + 1):
                v = np.float64(row[j]) * scale
                if v > hi:
                    hi = v
            for j in range(i + 1):  # a map (vectorized), then the sum in order
                e[j] = exp64(np.float64(row[j]) * scale - hi)
            total = 0.0
            for j in range(i + 1):
                total += e[j]
            out = p[t, i]
            for j in range(i + 1):
                out[j] = np.float32(e[j] / total)
            for j in range(i + 1, n):
                out[j] = np.float32(0.0)


@_parallel(_size(0))
def causal_softmax_bwd(p, dp, scale, ds):
    """ds = scale * p * (dp - sum_j p dp) per row (float64 inside), 0 for j > i."""
    nb, m, n = p.shape
    for r in prange(nb * m):
        t, i = r // m, r % m
        pr, dr, out = p[t, i], dp[t, i], ds[t, i]
        dot = 0.0
        for j in range(i + 1):
            dot += np.float64(pr[j]) * np.float64(dr[j])
        for j in range(i + 1):
            out[j] = np.float32(scale * (np.float64(pr[j]) * (np.float64(dr[j]) - dot)))
        for j in range(i + 1, n):
            out[j] = np.float32(0.0)


# ------------------------------------------------------------------ layer norm


@_parallel(_size(0))
def layer_norm(x, w, b, eps, y, mean, rstd):
    """Rows of x (N, E): y = (x - mean) * rstd * w + b, mean/variance in float64."""
    m, n = x.shape
    for i in prange(m):
        row = x[i]
        s = 0.0
        for j in range(n):
            s += np.float64(row[j])
        mu = s / n
        v = 0.0
        for j in range(n):
            d = np.float64(row[j]) - mu
            v += d * d
        r = 1.0 / np.sqrt(v / n + eps)
        mean[i] = mu
        rstd[i] = r
        out = y[i]
        for j in range(n):
            out[j] = np.float32(((np.float64(row[j]) - mu) * r) * np.float64(w[j]) + np.float64(b[j]))


@_parallel(_size(0))
def layer_norm_bwd(dy, x, w, mean, rstd, dx):
    """dx of :func:`layer_norm` per row (float64 inside)."""
    m, n = x.shape
    for i in prange(m):
        mu, r = mean[i], rstd[i]
        a = 0.0
        c = 0.0
        for j in range(n):
            g = np.float64(dy[i, j]) * np.float64(w[j])
            a += g
            c += g * ((np.float64(x[i, j]) - mu) * r)
        a = a / n
        c = c / n
        for j in range(n):
            g = np.float64(dy[i, j]) * np.float64(w[j])
            xh = (np.float64(x[i, j]) - mu) * r
            dx[i, j] = np.float32(r * ((g - a) - xh * c))


@_parallel(_size(0))
def layer_norm_params_bwd(dy, x, mean, rstd, dw, db):
    """dw[j] = sum_i dy[i,j] * xhat[i,j], db[j] = sum_i dy[i,j]: rows in order, float64."""
    m, n = x.shape
    nc = (n + _COLS - 1) // _COLS
    for c in prange(nc):
        j0 = c * _COLS
        j1 = min(j0 + _COLS, n)
        aw = np.zeros(j1 - j0, np.float64)
        ab = np.zeros(j1 - j0, np.float64)
        for i in range(m):
            mu, r = mean[i], rstd[i]
            for j in range(j0, j1):
                g = np.float64(dy[i, j])
                aw[j - j0] += g * ((np.float64(x[i, j]) - mu) * r)
                ab[j - j0] += g
        for j in range(j0, j1):
            dw[j] = np.float32(aw[j - j0])
            db[j] = np.float32(ab[j - j0])


# ------------------------------------------------------------------ GELU (tanh form)

_GELU_K = 0.7978845608028654  # sqrt(2 / pi)
_GELU_A = 0.044715


@_parallel(_size(0, _EXP_NS))
def gelu(x, y):
    """y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3))), elementwise on flat arrays."""
    for i in prange(x.shape[0]):
        v = np.float64(x[i])
        y[i] = np.float32(0.5 * v * (1.0 + tanh64(_GELU_K * (v + _GELU_A * v * v * v))))


@_parallel(_size(0, _EXP_NS))
def gelu_bwd(x, dy, dx):
    for i in prange(x.shape[0]):
        v = np.float64(x[i])
        t = tanh64(_GELU_K * (v + _GELU_A * v * v * v))
        d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * _GELU_K * (1.0 + 3.0 * _GELU_A * v * v)
        dx[i] = np.float32(np.float64(dy[i]) * d)


# ------------------------------------------------------------------ cross-entropy


@_parallel(_size(0, _EXP_NS))
def _row_lse(logits, lse):
    m, n = logits.shape
    for c in prange((m + _SOFTMAX_ROWS - 1) // _SOFTMAX_ROWS):
        e = np.empty(n, np.float64)
        for i in range(c * _SOFTMAX_ROWS, min((c + 1) * _SOFTMAX_ROWS, m)):
            row = logits[i]
            hi = -np.inf
            for j in range(n):
                if np.float64(row[j]) > hi:
                    hi = np.float64(row[j])
            for j in range(n):  # a map (vectorized), then the sum in order
                e[j] = exp64(np.float64(row[j]) - hi)
            s = 0.0
            for j in range(n):
                s += e[j]
            lse[i] = hi + log64(s)


@njit(cache=True)
def _mean_nll(logits, targets, lse):
    total = 0.0
    for i in range(logits.shape[0]):
        total += lse[i] - np.float64(logits[i, targets[i]])
    return total / logits.shape[0]


def cross_entropy(logits, targets, lse):
    """Mean over rows of lse(row) - row[target] (float64, rows in order); fills ``lse``."""
    _row_lse(logits, lse)
    return _mean_nll(logits, targets, lse)


@_parallel(_size(0, _EXP_NS))
def cross_entropy_bwd(logits, targets, lse, scale, grad):
    """grad = scale * (softmax(row) - onehot(target)), scale = d(loss) / N."""
    m, n = logits.shape
    for i in prange(m):
        for j in range(n):
            q = exp64(np.float64(logits[i, j]) - lse[i])
            if j == targets[i]:
                q = q - 1.0
            grad[i, j] = np.float32(q * scale)


# ------------------------------------------------------------------ convolution pieces (stride 1, same padding)


@_parallel(_size(3))
def im2col(x, ks, pad, cols):
    """cols[(c*ks + kh)*ks + kw, (b*H + h)*W + w] = x[b, c, h + kh - pad, w + kw - pad] (0 outside):
    one row per filter tap, one column per output pixel (so a convolution is ``W @ cols``,
    image by image, with the pixel axis in the vector lanes)."""
    nb, nc, hh, ww = x.shape
    for r in prange(nc * ks * ks):
        c, kh, kw = r // (ks * ks), (r // ks) % ks, r % ks
        out = cols[r]
        for b in range(nb):
            for h in range(hh):
                y = h + kh - pad
                base = (b * hh + h) * ww
                for w in range(ww):
                    xx = w + kw - pad
                    if 0 <= y < hh and 0 <= xx < ww:
                        out[base + w] = x[b, c, y, xx]
                    else:
                        out[base + w] = np.float32(0.0)


@_parallel(_size(0))
def col2im(dcols, ks, pad, dx):
    """The adjoint of :func:`im2col`, from ``dcols`` (image, tap, pixel): dx[b,c,y,x] starts at 0
    and adds its entries over kh, then kw, ascending (taps that fall outside the image are
    skipped). Tap by tap over whole rows, so the inner loop runs along contiguous x in both
    arrays; each output's adds keep that order."""
    nb, nc, hh, ww = dx.shape
    for r in prange(nb * nc):
        b, c = r // nc, r % nc
        out = dx[b, c]
        for y in range(hh):
            for xx in range(ww):
                out[y, xx] = np.float32(0.0)
        for kh in range(ks):
            for kw in range(ks):
                row = dcols[b, (c * ks + kh) * ks + kw]
                for y in range(max(0, kh - pad), min(hh, hh + kh - pad)):
                    base = (y - kh + pad) * ww + pad - kw  # the column of x = 0 (w = x - kw + pad)
                    for xx in range(max(0, kw - pad), min(ww, ww + kw - pad)):
                        out[y, xx] += row[base + xx]


@_parallel(_size(0))
def rowsum(g, out):
    """out[i] = sum_j g[i, j] in float32, columns in ascending order."""
    m, n = g.shape
    for i in prange(m):
        acc = np.float32(0.0)
        for j in range(n):
            acc += g[i, j]
        out[i] = acc


@_parallel(_size(0))
def channel_sum(g, out):
    """out[c] = sum of g[b, c, p] in float32 over b, then p, ascending (g: image, channel, pixel)."""
    nb, nc, n = g.shape
    for c in prange(nc):
        acc = np.float32(0.0)
        for b in range(nb):
            for j in range(n):
                acc += g[b, c, j]
        out[c] = acc


@_parallel(_size(0))
def maxpool2(x, y, idx):
    """2x2 max-pool, stride 2: the first maximum in (0,0), (0,1), (1,0), (1,1) order wins."""
    nb, nc, hh, ww = y.shape
    for r in prange(nb * nc):
        b, c = r // nc, r % nc
        for i in range(hh):
            for j in range(ww):
                best = x[b, c, 2 * i, 2 * j]
                at = 0
                for q in range(1, 4):
                    v = x[b, c, 2 * i + q // 2, 2 * j + q % 2]
                    if v > best or (v != v and best == best):
                        best = v
                        at = q
                y[b, c, i, j] = best
                idx[b, c, i, j] = at


@_parallel(_size(2))
def maxpool2_bwd(dy, idx, dx):
    """dx: each window's gradient at its maximum (``idx``: 0..3 in scan order), 0 elsewhere."""
    nb, nc, hh, ww = dy.shape
    zero = np.float32(0.0)
    for r in prange(nb * nc):
        b, c = r // nc, r % nc
        for i in range(hh):
            g, at, top, bottom = dy[b, c, i], idx[b, c, i], dx[b, c, 2 * i], dx[b, c, 2 * i + 1]
            for j in range(ww):
                q = at[j]
                top[2 * j] = g[j] if q == 0 else zero
                top[2 * j + 1] = g[j] if q == 1 else zero
                bottom[2 * j] = g[j] if q == 2 else zero
                bottom[2 * j + 1] = g[j] if q == 3 else zero


@_parallel(_size(1))
def embedding_bwd(idx, dy, dw):
    """dw[v] = sum of dy[n] over n with idx[n] == v, n ascending (dw starts at zero)."""
    n, e = dy.shape
    nc = (e + _COLS - 1) // _COLS
    for c in prange(nc):
        j0 = c * _COLS
        j1 = min(j0 + _COLS, e)
        for i in range(n):
            _axpy1(dw[idx[i], j0:j1], np.float32(1.0), dy[i, j0:j1], j1 - j0)


# ------------------------------------------------------------------ optimizer updates (flat float32 arrays)


@_parallel(_size(0))
def sgd_update(p, g, buf, lr, momentum, dampening, weight_decay, nesterov):
    """g' = g + wd*p; buf = m*buf + (1-d)*g'; u = g' + m*buf (nesterov) or buf; p = p - lr*u.
    ``buf`` is empty when momentum is 0 (then u = g'). Every scalar is float32."""
    one = np.float32(1.0)
    for i in prange(p.shape[0]):
        gi = g[i]
        if weight_decay != 0:
            gi = gi + weight_decay * p[i]
        if momentum != 0:
            bi = momentum * buf[i] + (one - dampening) * gi
            buf[i] = bi
            gi = gi + momentum * bi if nesterov else bi
        p[i] = p[i] - lr * gi


@_parallel(_size(0))
def adam_update(p, g, m, v, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt):
    """g' = g + wd*p; m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*g'*g';
    p = p - step_size * (m / (sqrt(v)/bc2_sqrt + eps)). Every scalar is float32."""
    one = np.float32(1.0)
    for i in prange(p.shape[0]):
        gi = g[i]
        if weight_decay != 0:
            gi = gi + weight_decay * p[i]
        mi = beta1 * m[i] + (one - beta1) * gi
        vi = beta2 * v[i] + (one - beta2) * (gi * gi)
        m[i] = mi
        v[i] = vi
        p[i] = p[i] - step_size * (mi / (np.sqrt(vi) / bc2_sqrt + eps))


# ------------------------------------------------------------------ gradient accumulation and clipping (flat float32 arrays)


@_parallel(_size(0))
def add_into(acc, g):
    """acc[i] = acc[i] + g[i] (one float32 add per element)."""
    for i in prange(acc.shape[0]):
        acc[i] = acc[i] + g[i]


@_parallel(_size(0))
def divide(x, d):
    """x[i] = x[i] / d (one correctly rounded float32 division per element)."""
    for i in prange(x.shape[0]):
        x[i] = x[i] / d


@_parallel(_size(0))
def scale(x, s):
    """x[i] = x[i] * s (one float32 multiply per element): clipping, and AdamW's decay."""
    for i in prange(x.shape[0]):
        x[i] = x[i] * s


@njit(cache=True)
def sum_squares(x):
    """sum_i float64(x[i])**2 over i ascending, in float64 on one thread (each square is exact:
    a float32 product fits in float64's mantissa); returns a float64."""
    acc = 0.0
    for i in range(x.shape[0]):
        xi = np.float64(x[i])
        acc += xi * xi
    return acc
