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

import math
import os

import numba
import numpy as np
from numba import njit, prange

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

_ROWS = 4  # rows per tile: each loaded element of b feeds four accumulator rows
_COLS = 256  # columns per tile: four tile rows stay in L1


@njit(cache=True)
def _axpy1(o0, a0, bk, n):
    for j in range(n):
        o0[j] += a0 * bk[j]


@njit(cache=True)
def _k4r4(o0, o1, o2, o3, a, i0, k, b, j0, n):
    # Four k steps for four rows: each output still adds its products in k order, one
    # rounding per multiply and per add (the partial sum just stays in a register).
    a00, a01, a02, a03 = a[i0, k], a[i0, k + 1], a[i0, k + 2], a[i0, k + 3]
    a10, a11, a12, a13 = a[i0 + 1, k], a[i0 + 1, k + 1], a[i0 + 1, k + 2], a[i0 + 1, k + 3]
    a20, a21, a22, a23 = a[i0 + 2, k], a[i0 + 2, k + 1], a[i0 + 2, k + 2], a[i0 + 2, k + 3]
    a30, a31, a32, a33 = a[i0 + 3, k], a[i0 + 3, k + 1], a[i0 + 3, k + 2], a[i0 + 3, k + 3]
    b0, b1, b2, b3 = b[k, j0 : j0 + n], b[k + 1, j0 : j0 + n], b[k + 2, j0 : j0 + n], b[k + 3, j0 : j0 + n]
    for j in range(n):
        x0, x1, x2, x3 = b0[j], b1[j], b2[j], b3[j]
        o0[j] = (((o0[j] + a00 * x0) + a01 * x1) + a02 * x2) + a03 * x3
        o1[j] = (((o1[j] + a10 * x0) + a11 * x1) + a12 * x2) + a13 * x3
        o2[j] = (((o2[j] + a20 * x0) + a21 * x1) + a22 * x2) + a23 * x3
        o3[j] = (((o3[j] + a30 * x0) + a31 * x1) + a32 * x2) + a33 * x3


@njit(cache=True)
def _tile(a, b, out, i0, rows, j0, n):
    kk = a.shape[1]
    acc = np.zeros((_ROWS, n), np.float32)
    if rows == _ROWS:
        o0, o1, o2, o3 = acc[0], acc[1], acc[2], acc[3]
        k4 = kk - kk % 4
        for k in range(0, k4, 4):
            _k4r4(o0, o1, o2, o3, a, i0, k, b, j0, n)
        for k in range(k4, kk):
            for r in range(_ROWS):
                _axpy1(acc[r], a[i0 + r, k], b[k, j0 : j0 + n], n)
    else:
        for r in range(rows):
            o0 = acc[r]
            for k in range(kk):
                _axpy1(o0, a[i0 + r, k], b[k, j0 : j0 + n], n)
    out[i0 : i0 + rows, j0 : j0 + n] = acc[:rows]


@njit(parallel=True, cache=True)
def bmm(a, b, out):
    """out[t] = a[t] @ b[t] for a (T, M, K), b (T, K, N): out[t, i, j] = sum_k a[t,i,k] * b[t,k,j],
    accumulated in float32 over k = 0, 1, ... in order (a separate multiply and add each)."""
    nb, m, _ = a.shape
    n = b.shape[2]
    nr = (m + _ROWS - 1) // _ROWS
    nc = (n + _COLS - 1) // _COLS
    for t in prange(nb * nr * nc):
        bi = t // (nr * nc)
        rem = t - bi * nr * nc
        i0 = (rem // nc) * _ROWS
        j0 = (rem % nc) * _COLS
        _tile(a[bi], b[bi], out[bi], i0, min(_ROWS, m - i0), j0, min(_COLS, n - j0))


@njit(cache=True)
def _add4(acc, g0, g1, g2, g3, n):
    for j in range(n):
        acc[j] = (((acc[j] + g0[j]) + g1[j]) + g2[j]) + g3[j]


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
def causal_softmax(s, scale, p):
    """p[t, i, j] = softmax over j <= i of scale * s[t, i, j] (float64 inside), 0 for j > i."""
    nb, m, n = s.shape
    for r in prange(nb * m):
        t, i = r // m, r % m
        row = s[t, i]
        hi = -np.inf
        for j in range(i + 1):
            v = np.float64(row[j]) * scale
            if v > hi:
                hi = v
        e = np.empty(i + 1, np.float64)
        total = 0.0
        for j in range(i + 1):
            e[j] = exp64(np.float64(row[j]) * scale - hi)
            total += e[j]
        out = p[t, i]
        for j in range(i + 1):
            out[j] = np.float32(e[j] / total)
        for j in range(i + 1, n):
            out[j] = np.float32(0.0)


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
def gelu(x, y):
    """y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3))), elementwise on flat arrays."""
    for i in prange(x.shape[0]):
        v = np.float64(x[i])
        y[i] = np.float32(0.5 * v * (1.0 + tanh64(_GELU_K * (v + _GELU_A * v * v * v))))


@njit(parallel=True, cache=True)
def gelu_bwd(x, dy, dx):
    for i in prange(x.shape[0]):
        v = np.float64(x[i])
        t = tanh64(_GELU_K * (v + _GELU_A * v * v * v))
        d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * _GELU_K * (1.0 + 3.0 * _GELU_A * v * v)
        dx[i] = np.float32(np.float64(dy[i]) * d)


# ------------------------------------------------------------------ cross-entropy


@njit(parallel=True, cache=True)
def _row_lse(logits, lse):
    m, n = logits.shape
    for i in prange(m):
        row = logits[i]
        hi = -np.inf
        for j in range(n):
            if np.float64(row[j]) > hi:
                hi = np.float64(row[j])
        s = 0.0
        for j in range(n):
            s += exp64(np.float64(row[j]) - hi)
        lse[i] = hi + log64(s)


@njit(cache=True)
def cross_entropy(logits, targets, lse):
    """Mean over rows of lse(row) - row[target] (float64, rows in order); fills ``lse``."""
    _row_lse(logits, lse)
    total = 0.0
    for i in range(logits.shape[0]):
        total += lse[i] - np.float64(logits[i, targets[i]])
    return total / logits.shape[0]


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
def im2col(x, ks, pad, cols):
    """cols[(c*ks + kh)*ks + kw, (b*H + h)*W + w] = x[b, c, h + kh - pad, w + kw - pad] (0 outside):
    one row per filter tap, one column per output pixel (so a convolution is ``W @ cols``
    with the long pixel axis in the vector lanes)."""
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


@njit(parallel=True, cache=True)
def col2im(dcols, ks, pad, dx):
    """The adjoint of :func:`im2col`: dx[b,c,y,x] sums its entries over kh, then kw, ascending."""
    nb, nc, hh, ww = dx.shape
    for r in prange(nb * nc):
        b, c = r // nc, r % nc
        for y in range(hh):
            for xx in range(ww):
                acc = np.float32(0.0)
                for kh in range(ks):
                    h = y - kh + pad
                    if 0 <= h < hh:
                        for kw in range(ks):
                            w = xx - kw + pad
                            if 0 <= w < ww:
                                acc += dcols[(c * ks + kh) * ks + kw, (b * hh + h) * ww + w]
                dx[b, c, y, xx] = acc


@njit(parallel=True, cache=True)
def rowsum(g, out):
    """out[i] = sum_j g[i, j] in float32, columns in ascending order."""
    m, n = g.shape
    for i in prange(m):
        acc = np.float32(0.0)
        for j in range(n):
            acc += g[i, j]
        out[i] = acc


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
def maxpool2_bwd(dy, idx, dx):
    nb, nc, hh, ww = dy.shape
    for r in prange(nb * nc):
        b, c = r // nc, r % nc
        for i in range(hh):
            for j in range(ww):
                for q in range(4):
                    dx[b, c, 2 * i + q // 2, 2 * j + q % 2] = dy[b, c, i, j] if q == idx[b, c, i, j] else np.float32(0.0)


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
def add_into(acc, g):
    """acc[i] = acc[i] + g[i] (one float32 add per element)."""
    for i in prange(acc.shape[0]):
        acc[i] = acc[i] + g[i]


@njit(parallel=True, cache=True)
def divide(x, d):
    """x[i] = x[i] / d (one correctly rounded float32 division per element)."""
    for i in prange(x.shape[0]):
        x[i] = x[i] / d


@njit(parallel=True, cache=True)
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
