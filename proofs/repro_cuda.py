"""``repro-v1`` and ``repro-v2`` on CUDA: the kernels of :mod:`proofs.repro_kernels` for NVIDIA GPUs
(numba.cuda), giving the same bits, and the autograd functions over them that :mod:`proofs.repro`
picks for tensors on a CUDA device.

Each kernel performs, for every output, the same rounded operations in the same order as its
CPU twin (docs/numerics.md, "GPUs"):

* every float operation is an explicit round-to-nearest intrinsic of libdevice (``fadd_rn``,
  ``fmul_rn``, ``fdiv_rn``, ``fsqrt_rn`` and their float64 twins): NVVM contracts a plain
  ``a * b + c`` into an FMA, these are never fused; repro-v2's matmul term is the one fused
  operation, ``fmaf_rn`` (``ffma``), as its CPU kernel's;
* a thread owns whole outputs and runs each output's reduction over its index in ascending
  order, as the CPU does (matmul: ``k = 0, 1, ...`` from 0 in float32; row statistics in float64);
  tiling only changes which outputs run side by side, never a sum's order (no split-K, no tree
  reductions, no atomics, no cuBLAS, no tensor cores);
* ``exp``, ``log``, ``tanh`` are :func:`proofs.repro_kernels.exp64`'s polynomials and powers of two.

The same source runs in numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), where the intrinsics
are numpy float32 / float64 scalar operations (each one correctly rounded): ``make test`` compares
the simulated kernels' bits with the CPU kernels' on a machine without a GPU. In the simulator the
kernels take the numpy arrays of CPU tensors.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
import torch
from numba import cuda

from proofs.repro_kernels import _EXP_C, _GELU_A, _GELU_K, _LN2_HI, _LN2_LO, _LOG2E, _LOG_C, _SQRT2

__all__ = [
    "SIM",
    "unavailable",
    "array",
    "Linear",
    "Conv2d",
    "MaxPool2",
    "MeanPixels",
    "LayerNorm",
    "Gelu",
    "CausalAttention",
    "Embedding",
    "CrossEntropy",
    "sgd_update",
    "adam_update",
    "add_into",
    "divide",
    "scale",
    "each",
    "sum_squares_each",
]

#: Running in numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` before numba was imported).
SIM = bool(numba.config.ENABLE_CUDASIM)

# ------------------------------------------------------------------ rounded operations
#
# On a GPU: libdevice's round-to-nearest intrinsics, never contracted into an FMA. In the simulator:
# the same IEEE operations on numpy scalars (the simulator has no libdevice).

if SIM:

    def _device(fn: Any) -> Any:  # plain Python in the simulator: a device function's call is costly there
        return fn

    def fadd(a: Any, b: Any) -> Any:
        return np.float32(a) + np.float32(b)

    def fsub(a: Any, b: Any) -> Any:
        return np.float32(a) - np.float32(b)

    def fmul(a: Any, b: Any) -> Any:
        return np.float32(a) * np.float32(b)

    def fdiv(a: Any, b: Any) -> Any:
        return np.float32(a) / np.float32(b)

    def fsqrt(a: Any) -> Any:
        return np.sqrt(np.float32(a))

    def dadd(a: Any, b: Any) -> Any:
        return np.float64(a) + np.float64(b)

    def dsub(a: Any, b: Any) -> Any:
        return np.float64(a) - np.float64(b)

    def dmul(a: Any, b: Any) -> Any:
        return np.float64(a) * np.float64(b)

    def ddiv(a: Any, b: Any) -> Any:
        return np.float64(a) / np.float64(b)

    def dsqrt(a: Any) -> Any:
        return np.sqrt(np.float64(a))

    def ffma(a: Any, b: Any, c: Any) -> Any:
        """a * b + c rounded once to float32 (repro-v2's term; numba's simulated ``cuda.fma``
        rounds twice). The float64 product of two float32 is exact; their sum with c is rounded
        to odd (TwoSum's error moves an even result one step towards the exact value), and a
        float64 rounded to odd rounds to the float32 of the exact value (53 >= 24 + 2 bits)."""
        p = np.float64(np.float32(a)) * np.float64(np.float32(b))
        c64 = np.float64(np.float32(c))
        s = p + c64
        if np.isfinite(s):
            v = s - p
            err = (p - (s - v)) + (c64 - v)
            if err != 0 and not np.int64(s.view(np.int64)) & 1:
                s = np.nextafter(s, np.inf if err > 0 else -np.inf)
        return np.float32(s)

else:  # pragma: no cover - needs a GPU (bench.device_check runs it)
    from numba.cuda import libdevice

    _device = cuda.jit(device=True)
    fadd, fsub, fmul, fdiv, fsqrt = libdevice.fadd_rn, libdevice.fsub_rn, libdevice.fmul_rn, libdevice.fdiv_rn, libdevice.fsqrt_rn
    ffma = libdevice.fmaf_rn  # fma.rn.f32: one rounding (repro-v2's matmul term)
    dadd, dmul, ddiv, dsqrt = libdevice.dadd_rn, libdevice.dmul_rn, libdevice.ddiv_rn, libdevice.dsqrt_rn

    @_device
    def dsub(a: Any, b: Any) -> Any:  # a - b is a + (-b) exactly (IEEE); libdevice has no dsub_rn
        return libdevice.dadd_rn(a, -b)

    if hasattr(numba.config, "CUDA_LOW_OCCUPANCY_WARNINGS"):
        numba.config.CUDA_LOW_OCCUPANCY_WARNINGS = False  # small grids are expected (one thread per row)


# ------------------------------------------------------------------ transcendentals (proofs.repro_kernels' polynomials)

#: 2**k for k in [-1030, 1023] as exact float64, for exp64's last scaling (the CPU kernel writes
#: the same power of two from its exponent bits: n is in [-1021, 1023], so the same value).
_POW2 = np.array([math.ldexp(1.0, k) for k in range(-1030, 1024)], dtype=np.float64)
_POW2_BIAS = 1030


@_device
def exp64(x: Any) -> Any:
    if x != x:
        return x
    if x < -708.0:
        return np.float64(0.0)
    if x > 709.0:
        return np.float64(math.inf)
    n = int(math.floor(dadd(dmul(x, _LOG2E), 0.5)))  # math.floor is a float on the GPU, an int in Python
    nf = np.float64(n)
    r = dsub(dsub(x, dmul(nf, _LN2_HI)), dmul(nf, _LN2_LO))
    p = np.float64(_EXP_C[13])
    for i in range(12, -1, -1):
        p = dadd(dmul(p, r), _EXP_C[i])
    return dmul(p, _POW2[n + _POW2_BIAS])


@_device
def log64(x: Any) -> Any:
    if x != x or x < 0.0:
        return np.float64(math.nan)
    if x == 0.0:
        return np.float64(-math.inf)
    if x == math.inf:
        return x
    e = 0
    while x > 1.8446744073709552e19:
        x = dmul(x, 5.421010862427522e-20)
        e += 64
    while x < 5.421010862427522e-20:
        x = dmul(x, 1.8446744073709552e19)
        e -= 64
    while x > _SQRT2:
        x = dmul(x, 0.5)
        e += 1
    while x < dmul(_SQRT2, 0.5):
        x = dmul(x, 2.0)
        e -= 1
    z = ddiv(dsub(x, 1.0), dadd(x, 1.0))
    z2 = dmul(z, z)
    s = np.float64(_LOG_C[11])
    for i in range(10, -1, -1):
        s = dadd(dmul(s, z2), _LOG_C[i])
    ef = np.float64(e)
    return dadd(dmul(ef, _LN2_HI), dadd(dmul(ef, _LN2_LO), dmul(z, s)))


@_device
def tanh64(u: Any) -> Any:
    if u > 20.0:
        return np.float64(1.0)
    if u < -20.0:
        return np.float64(-1.0)
    t = exp64(dmul(2.0, u))
    return ddiv(dsub(t, 1.0), dadd(t, 1.0))


@_device
def _gelu_inner(v: Any) -> Any:
    """tanh(sqrt(2/pi) (v + 0.044715 v**3)) as the CPU kernel rounds it: ((a v) v) v, then v + that."""
    return tanh64(dmul(_GELU_K, dadd(v, dmul(dmul(dmul(_GELU_A, v), v), v))))


# ------------------------------------------------------------------ launching


#: Threads per block of the one-dimensional kernels; the simulator runs each thread as a Python
#: thread, so there a few threads walk the outputs (grid-stride loops: the same outputs either way).
_TPB = 4 if SIM else 128
#: The row kernels (softmax, log-sum-exp, layer norm) give each row a block of _ROW_THREADS threads
#: (a warp): they compute a chunk of _ROW_CHUNK terms side by side, then the first thread adds the
#: chunk to the row's sum in order (:func:`_chunk_sum`), so each sum is still one left-to-right
#: sequence. The simulator's small numbers take it through several chunks on tiny rows.
_ROW_THREADS = 4 if SIM else 32
_ROW_CHUNK = 2 * _ROW_THREADS if SIM else 4 * _ROW_THREADS
#: The column kernels (a bias's gradient, layer norm's parameter gradients) give each _COL_LANES
#: columns a block of _COL_LANES x _COL_LOADERS threads (a warp per loader): every thread loads
#: _COL_DEPTH rows of its column per chunk of _COL_CHUNK rows, the next chunk's loads in flight while
#: the first loader's threads add the staged chunk to their columns' sums in row order. Each sum is
#: still one top-to-bottom sequence, fed by the whole block's loads instead of one thread's.
_COL_LANES = 4 if SIM else 32
_COL_LOADERS = 2 if SIM else 8
_COL_DEPTH = 2 if SIM else 8
_COL_CHUNK = _COL_LOADERS * _COL_DEPTH
#: The sums of squares (clipping's norm) give each tensor a row's block: every thread loads
#: _SQUARES_DEPTH values per chunk of _SQUARES_CHUNK, so that the first thread's float64 adds, one
#: sequence per tensor, wait on their own latency rather than on memory's.
_SQUARES_DEPTH = 2 if SIM else 16
_SQUARES_CHUNK = _ROW_THREADS * _SQUARES_DEPTH
_streams: dict[int, Any] = {}


def _stream() -> Any:
    """torch's current stream, so kernels and torch's own operations stay in order."""
    if SIM:
        return 0
    handle = torch.cuda.current_stream().cuda_stream
    if handle not in _streams:
        _streams[handle] = cuda.default_stream() if handle == 0 else cuda.external_stream(handle)
    return _streams[handle]


def _launch(kernel: Any, n: int, *args: Any) -> None:
    """``kernel`` over ``n`` independent outputs (a grid-stride loop inside)."""
    if n <= 0:
        return
    blocks = 1 if SIM else min((n + _TPB - 1) // _TPB, 1 << 16)
    kernel[blocks, _TPB, _stream()](*args)


def _launch_columns(kernel: Any, columns: int, *args: Any) -> None:
    """``kernel`` over ``columns`` columns, a block of :data:`_COL_LANES` x :data:`_COL_LOADERS`
    threads per :data:`_COL_LANES` of them (a grid-stride loop over column groups inside)."""
    if columns <= 0:
        return
    groups = (columns + _COL_LANES - 1) // _COL_LANES
    kernel[1 if SIM else min(groups, 1 << 16), (_COL_LANES, _COL_LOADERS), _stream()](*args)


def _launch_rows(kernel: Any, rows: int, *args: Any) -> None:
    """``kernel`` over ``rows`` rows, a block of :data:`_ROW_THREADS` threads per row (a grid-stride
    loop over rows inside)."""
    if rows <= 0:
        return
    kernel[1 if SIM else min(rows, 1 << 16), _ROW_THREADS, _stream()](*args)


def array(t: torch.Tensor) -> Any:
    """``t``'s memory as a kernel argument, without a copy: a CUDA tensor through its
    ``__cuda_array_interface__`` (no stream synchronization: the kernels run on torch's stream);
    in the simulator a CPU tensor's numpy view (a strided view is copied there: the simulator moves
    only contiguous buffers; the kernels only read the strided ones)."""
    t = t.detach()
    if not t.is_cuda:
        return np.ascontiguousarray(t.numpy())
    return cuda.as_cuda_array(t, sync=False)  # pragma: no cover - needs a GPU


def unavailable() -> str | None:
    """Why these kernels cannot run here (None: they can): numba finds no usable CUDA GPU, or its CUDA
    target is numba's built-in one (deprecated; it cannot align the matmul's shared tiles)."""
    if SIM:
        return None
    try:
        if not cuda.is_available():
            return "numba finds no usable CUDA GPU (driver or NVVM missing)"
        if getattr(cuda, "implementation", None) != "NVIDIA":
            return "numba's CUDA target is its built-in one: install numba-cuda (pip install numba-cuda)"
        return None
    except Exception as exc:  # pragma: no cover - a broken CUDA install
        return f"numba's CUDA target does not load: {type(exc).__name__}: {exc}"


def _empty(shape: Any, like: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=like.device)


# ------------------------------------------------------------------ a row's block (the row kernels)


@_device
def _chunk_sum(acc: Any, terms: Any, count: Any) -> Any:
    """``acc`` plus ``terms[0]``, ``terms[1]``, ... ``terms[count - 1]`` in that order (float64), added by
    the block's first thread once every thread has written its terms; every thread returns (only the
    first thread's value is the sum)."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        for q in range(count if count < _ROW_CHUNK else _ROW_CHUNK):
            acc = dadd(acc, terms[q])
    cuda.syncthreads()
    return acc


@_device
def _broadcast(value: Any, cell: Any) -> Any:
    """The first thread's ``value``, to every thread of the block (through the shared ``cell``, free
    again on return: every thread has read it)."""
    if cuda.threadIdx.x == 0:
        cell[0] = value
    cuda.syncthreads()
    value = cell[0]
    cuda.syncthreads()
    return value


@_device
def _row_max(row: Any, n: Any, scale: Any, best: Any, where: Any) -> Any:
    """The value a left-to-right scan ``if v > hi: hi = v`` from -inf finds over ``v = row[j] * scale``
    (float64), ``j < n``: NaN is never larger, and of equal values (+0 and -0) the first is kept.
    Each thread scans every ``_ROW_THREADS``-th ``j``; the first thread keeps the largest, the lowest
    ``j`` among equals; every thread returns it."""
    tx = cuda.threadIdx.x
    hi = -math.inf
    at = n
    for j in range(tx, n, _ROW_THREADS):
        v = dmul(np.float64(row[j]), scale)
        if v > hi:
            hi = v
            at = j
    best[tx] = hi
    where[tx] = at
    cuda.syncthreads()
    if tx == 0:
        for q in range(1, _ROW_THREADS):
            if best[q] > hi or (best[q] == hi and where[q] < at):
                hi = best[q]
                at = where[q]
        best[0] = hi
    cuda.syncthreads()
    return best[0]


# ------------------------------------------------------------------ matmul


#: Columns of padding in each shared tile row. 4 keeps every row 16-byte aligned, so that a thread
#: reads a run of 4 staged values as one vector load (4 loads per 64 multiply-adds of the large
#: tile, against 16 scalar ones). A warp that stages a k-fastest operand writes 16 values of k,
#: rows ``bm + 4`` apart, to 8 banks: a 2-way conflict on those stores (``bm`` is a multiple of 32:
#: unpadded, all 16 fell in one bank; 2 of padding spread them over 16 but broke the alignment).
_PAD = 4


@_device
def _tile_slot(e: Any, k_fastest: Any, bm: Any, bk: Any) -> Any:
    """(row, k) of the ``e``-th element of a ``bm`` x ``bk`` tile, consecutive ``e`` along k when
    ``k_fastest``, else along the rows."""
    if k_fastest:
        return e // bk, e % bk
    return e % bm, e // bm


@_device
def _fetch(x: Any, t: Any, r0: Any, k0: Any, tid: Any, k_fastest: Any, regs: Any, bm: Any, bk: Any, nthreads: Any) -> None:
    """Load thread ``tid``'s share of the tile ``x[t, r0 : r0 + bm, k0 : k0 + bk]`` into ``regs``
    (0 outside ``x``), consecutive threads along whichever axis of ``x`` is contiguous: every load
    is issued before any is used, so their latencies overlap."""
    rows, kk = x.shape[1], x.shape[2]
    for q in range(regs.shape[0]):
        rr, kq = _tile_slot(tid + q * nthreads, k_fastest, bm, bk)
        if r0 + rr < rows and k0 + kq < kk:
            regs[q] = x[t, r0 + rr, k0 + kq]
        else:
            regs[q] = np.float32(0.0)


@_device
def _stage(s: Any, tid: Any, k_fastest: Any, regs: Any, bm: Any, bk: Any, nthreads: Any) -> None:
    """Store what :func:`_fetch` loaded into the shared tile ``s[k, row]``."""
    for q in range(regs.shape[0]):
        rr, kq = _tile_slot(tid + q * nthreads, k_fastest, bm, bk)
        s[kq, rr] = regs[q]


def _make_bmm(tpb: int, tm: int, fused: bool) -> Any:
    """out[t] = a[t] @ bt[t]^T: a (T, M, K), bt (T, N, K) (``b`` transposed), any strides. A block of
    tpb x tpb threads owns a (tpb*tm) x (tpb*tm) tile of outputs, each thread tm x tm of them in
    registers: rows in runs of ``vec`` side by side (``ty*vec + r``, then the same ``tpb*vec`` further
    down), columns likewise, so that a thread reads its ``vec`` values of a staged k as one vector
    load from shared memory; tiles of a and b (tpb deep in k) pass through
    shared memory, the next tile's loads in flight while the current one is multiplied. Every output
    runs ``acc = fadd(acc, fmul(a[i,k], b[k,j]))`` (repro-v1) or, ``fused``,
    ``acc = ffma(a[i,k], b[k,j], acc)`` (repro-v2) for k = 0, 1, ... from 0: the CPU kernel's
    sequence (the staging changes which thread loads what, never a sum's order)."""
    bm = tpb * tm  # the block's rows = columns
    bk = tpb  # k per stage
    nthreads = tpb * tpb
    loads = bm * bk // nthreads  # elements of each tile one thread stages (= tm)
    width = bm + _PAD  # a shared tile's row
    vec = 4 if tm % 4 == 0 else tm  # outputs side by side per run (one 16-byte load at 4)
    runs = tm // vec
    span = tpb * vec  # rows (columns) between a thread's runs

    @cuda.jit
    def kernel(a, bt, out, a_k_fastest, b_k_fastest):  # pragma: no cover - compiled by numba
        t = cuda.blockIdx.z
        i0 = cuda.blockIdx.y * bm
        j0 = cuda.blockIdx.x * bm
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * tpb + tx
        m = out.shape[1]
        n = out.shape[2]
        kk = a.shape[2]
        if SIM:  # the simulator takes no alignment
            sa = cuda.shared.array((bk, width), numba.float32)
            sb = cuda.shared.array((bk, width), numba.float32)
        else:  # 16 bytes: a run of ``vec`` staged values is one vector load
            sa = cuda.shared.array((bk, width), numba.float32, alignment=16)
            sb = cuda.shared.array((bk, width), numba.float32, alignment=16)
        acc = cuda.local.array((tm, tm), numba.float32)
        ar = cuda.local.array(tm, numba.float32)
        br = cuda.local.array(tm, numba.float32)
        va = cuda.local.array(loads, numba.float32)
        vb = cuda.local.array(loads, numba.float32)
        for r in range(tm):
            for c in range(tm):
                acc[r, c] = np.float32(0.0)
        _fetch(a, t, i0, 0, tid, a_k_fastest, va, bm, bk, nthreads)
        _fetch(bt, t, j0, 0, tid, b_k_fastest, vb, bm, bk, nthreads)
        for k0 in range(0, kk, bk):
            cuda.syncthreads()  # every thread is done with the last tile
            _stage(sa, tid, a_k_fastest, va, bm, bk, nthreads)
            _stage(sb, tid, b_k_fastest, vb, bm, bk, nthreads)
            cuda.syncthreads()
            if k0 + bk < kk:  # the next tile's loads, in flight during this tile's products
                _fetch(a, t, i0, k0 + bk, tid, a_k_fastest, va, bm, bk, nthreads)
                _fetch(bt, t, j0, k0 + bk, tid, b_k_fastest, vb, bm, bk, nthreads)
            depth = kk - k0 if kk - k0 < bk else bk  # only real k: no padded term enters a sum
            for kq in range(depth):
                for g in range(runs):
                    for v in range(vec):
                        ar[g * vec + v] = sa[kq, g * span + ty * vec + v]
                        br[g * vec + v] = sb[kq, g * span + tx * vec + v]
                for r in range(tm):
                    for c in range(tm):
                        if fused:  # a constant of the closure: numba compiles one branch
                            acc[r, c] = ffma(ar[r], br[c], acc[r, c])
                        else:
                            acc[r, c] = fadd(acc[r, c], fmul(ar[r], br[c]))
        for r in range(tm):
            i = i0 + (r // vec) * span + ty * vec + r % vec
            if i < m:
                for c in range(tm):
                    j = j0 + (c // vec) * span + tx * vec + c % vec
                    if j < n:
                        out[t, i, j] = acc[r, c]

    return kernel


#: Tile shapes (threads per side, outputs per thread per side): the large one for large outputs.
#: The shape changes no bits (each output's sum is the same sequence), so the simulator runs a
#: small one (its threads are Python threads) and the tests run every shape there.
BMM_SHAPES = {"small": (4, 2), "medium": (16, 4), "large": (16, 8)}
_bmm_kernels: dict[tuple[str, bool], Any] = {}


def _bmm_shape(m: int, n: int) -> str:
    if SIM:
        return "small"
    return "large" if m >= 512 and n >= 512 else "medium"


def bmm(a: torch.Tensor, b: torch.Tensor, shape: str | None = None, fused: bool = False) -> torch.Tensor:
    """a (T, M, K) @ b (T, K, N) (any strides: transposed views are read in place), each output's
    k order fixed; ``shape``: a key of :data:`BMM_SHAPES` (default: by size); ``fused``: each
    term one fused multiply-add (repro-v2)."""
    nb, m, kk = a.shape
    n = b.shape[2]
    out = _empty((nb, m, n), a)
    if out.numel() == 0:
        return out
    if kk == 0:
        return out.zero_()
    name = shape or _bmm_shape(m, n)
    if (name, fused) not in _bmm_kernels:
        _bmm_kernels[name, fused] = _make_bmm(*BMM_SHAPES[name], fused)
    tpb, tm = BMM_SHAPES[name]
    side = tpb * tm
    grid = ((n + side - 1) // side, (m + side - 1) // side, nb)
    bt = b.transpose(1, 2)
    _bmm_kernels[name, fused][grid, (tpb, tpb), _stream()](array(a), array(bt), array(out), a.stride(2) == 1, bt.stride(2) == 1)
    return out


def _mm(a: torch.Tensor, b: torch.Tensor, fused: bool) -> torch.Tensor:
    return bmm(a[None], b[None], fused=fused)[0]


# ------------------------------------------------------------------ sums over rows and columns


@_device
def _col_fetch(x: Any, i0: Any, j: Any, regs: Any) -> None:
    """This thread's rows of the chunk that starts at row ``i0`` (rows ``i0 + loader + u * _COL_LOADERS``)
    of column ``j`` of ``x`` into ``regs``, 0 outside ``x``: the loads are issued together."""
    m, n = x.shape
    for u in range(_COL_DEPTH):
        i = i0 + cuda.threadIdx.y + u * _COL_LOADERS
        if i < m and j < n:
            regs[u] = x[i, j]
        else:
            regs[u] = 0


@_device
def _col_fetch_rows(v: Any, i0: Any, regs: Any) -> None:
    """As :func:`_col_fetch`, for a value per row (``v[i]``)."""
    for u in range(_COL_DEPTH):
        i = i0 + cuda.threadIdx.y + u * _COL_LOADERS
        if i < v.shape[0]:
            regs[u] = v[i]
        else:
            regs[u] = 0


@cuda.jit
def _colsum_k(g, out):  # pragma: no cover - compiled by numba
    """out[j] = sum_i g[i, j] in float32, rows ascending (repro_kernels.colsum): a block per
    :data:`_COL_LANES` columns."""
    m, n = g.shape
    lane = cuda.threadIdx.x
    tile = cuda.shared.array((_COL_CHUNK, _COL_LANES), numba.float32)
    regs = cuda.local.array(_COL_DEPTH, numba.float32)
    for j0 in range(cuda.blockIdx.x * _COL_LANES, n, cuda.gridDim.x * _COL_LANES):
        j = j0 + lane
        acc = np.float32(0.0)
        _col_fetch(g, 0, j, regs)
        for i0 in range(0, m, _COL_CHUNK):
            cuda.syncthreads()  # the first loader is done with the last chunk
            for u in range(_COL_DEPTH):
                tile[cuda.threadIdx.y + u * _COL_LOADERS, lane] = regs[u]
            cuda.syncthreads()
            if i0 + _COL_CHUNK < m:  # the next chunk's loads, in flight during the sums
                _col_fetch(g, i0 + _COL_CHUNK, j, regs)
            if cuda.threadIdx.y == 0:
                for r in range(_COL_CHUNK):
                    if i0 + r < m:
                        acc = fadd(acc, tile[r, lane])
        if cuda.threadIdx.y == 0 and j < n:
            out[j] = acc


@cuda.jit
def _rowsum_k(g, out):  # pragma: no cover - compiled by numba
    m, n = g.shape
    for i in range(cuda.grid(1), m, cuda.gridsize(1)):
        acc = np.float32(0.0)
        for j in range(n):
            acc = fadd(acc, g[i, j])
        out[i] = acc


@cuda.jit
def _channel_sum_k(g, out):  # pragma: no cover - compiled by numba
    """out[c] = sum over images b, then pixels p, ascending, of g[b, c, p] (float32)."""
    nb, nc, n = g.shape
    for c in range(cuda.grid(1), nc, cuda.gridsize(1)):
        acc = np.float32(0.0)
        for b in range(nb):
            for j in range(n):
                acc = fadd(acc, g[b, c, j])
        out[c] = acc


@cuda.jit
def _embedding_bwd_k(idx, dy, dw):  # pragma: no cover - compiled by numba
    """dw[v, j] += dy[i, j] for tokens i ascending with idx[i] == v (one thread per column j)."""
    n, e = dy.shape
    for j in range(cuda.grid(1), e, cuda.gridsize(1)):
        for i in range(n):
            v = idx[i]
            dw[v, j] = fadd(dw[v, j], dy[i, j])


# ------------------------------------------------------------------ attention softmax (a block per row)


@cuda.jit
def _causal_softmax_k(s, scale, p):  # pragma: no cover - compiled by numba
    """p[t, i, j] = softmax over j <= i of scale * s[t, i, j] (float64 inside), 0 for j > i; a row per
    block: its maximum, the sum of its exponentials in order, then each output (the exponential
    computed again: the same operations give the same value)."""
    nb, m, n = s.shape
    tx = cuda.threadIdx.x
    best = cuda.shared.array(_ROW_THREADS, numba.float64)
    where = cuda.shared.array(_ROW_THREADS, numba.int64)
    terms = cuda.shared.array(_ROW_CHUNK, numba.float64)
    cell = cuda.shared.array(1, numba.float64)
    for r in range(cuda.blockIdx.x, nb * m, cuda.gridDim.x):
        t, i = r // m, r % m
        row = s[t, i]
        hi = _row_max(row, i + 1, scale, best, where)
        total = np.float64(0.0)
        for c0 in range(0, i + 1, _ROW_CHUNK):
            for q in range(tx, _ROW_CHUNK, _ROW_THREADS):
                if c0 + q <= i:
                    terms[q] = exp64(dsub(dmul(np.float64(row[c0 + q]), scale), hi))
            total = _chunk_sum(total, terms, i + 1 - c0)
        total = _broadcast(total, cell)
        for j in range(tx, n, _ROW_THREADS):
            if j <= i:
                p[t, i, j] = np.float32(ddiv(exp64(dsub(dmul(np.float64(row[j]), scale), hi)), total))
            else:
                p[t, i, j] = np.float32(0.0)


@cuda.jit
def _causal_softmax_bwd_k(p, dp, scale, ds):  # pragma: no cover - compiled by numba
    nb, m, n = p.shape
    tx = cuda.threadIdx.x
    terms = cuda.shared.array(_ROW_CHUNK, numba.float64)
    cell = cuda.shared.array(1, numba.float64)
    for r in range(cuda.blockIdx.x, nb * m, cuda.gridDim.x):
        t, i = r // m, r % m
        dot = np.float64(0.0)
        for c0 in range(0, i + 1, _ROW_CHUNK):
            for q in range(tx, _ROW_CHUNK, _ROW_THREADS):
                if c0 + q <= i:
                    terms[q] = dmul(np.float64(p[t, i, c0 + q]), np.float64(dp[t, i, c0 + q]))
            dot = _chunk_sum(dot, terms, i + 1 - c0)
        dot = _broadcast(dot, cell)
        for j in range(tx, n, _ROW_THREADS):
            if j <= i:
                ds[t, i, j] = np.float32(dmul(scale, dmul(np.float64(p[t, i, j]), dsub(np.float64(dp[t, i, j]), dot))))
            else:
                ds[t, i, j] = np.float32(0.0)


# ------------------------------------------------------------------ layer norm


@cuda.jit
def _layer_norm_k(x, w, b, eps, y, mean, rstd):  # pragma: no cover - compiled by numba
    """A row per block: its mean and variance, each a float64 sum in order, then its outputs."""
    m, n = x.shape
    nf = np.float64(n)
    tx = cuda.threadIdx.x
    terms = cuda.shared.array(_ROW_CHUNK, numba.float64)
    cell = cuda.shared.array(1, numba.float64)
    for i in range(cuda.blockIdx.x, m, cuda.gridDim.x):
        s = np.float64(0.0)
        for c0 in range(0, n, _ROW_CHUNK):
            for q in range(tx, _ROW_CHUNK, _ROW_THREADS):
                if c0 + q < n:
                    terms[q] = np.float64(x[i, c0 + q])
            s = _chunk_sum(s, terms, n - c0)
        mu = ddiv(_broadcast(s, cell), nf)
        v = np.float64(0.0)
        for c0 in range(0, n, _ROW_CHUNK):
            for q in range(tx, _ROW_CHUNK, _ROW_THREADS):
                if c0 + q < n:
                    d = dsub(np.float64(x[i, c0 + q]), mu)
                    terms[q] = dmul(d, d)
            v = _chunk_sum(v, terms, n - c0)
        r = ddiv(1.0, dsqrt(dadd(ddiv(_broadcast(v, cell), nf), eps)))
        if tx == 0:
            mean[i] = mu
            rstd[i] = r
        for j in range(tx, n, _ROW_THREADS):
            y[i, j] = np.float32(dadd(dmul(dmul(dsub(np.float64(x[i, j]), mu), r), np.float64(w[j])), np.float64(b[j])))


@cuda.jit
def _layer_norm_bwd_k(dy, x, w, mean, rstd, dx):  # pragma: no cover - compiled by numba
    m, n = x.shape
    nf = np.float64(n)
    tx = cuda.threadIdx.x
    ta = cuda.shared.array(_ROW_CHUNK, numba.float64)
    tc = cuda.shared.array(_ROW_CHUNK, numba.float64)
    cell = cuda.shared.array(1, numba.float64)
    for i in range(cuda.blockIdx.x, m, cuda.gridDim.x):
        mu, r = mean[i], rstd[i]
        a = np.float64(0.0)
        c = np.float64(0.0)
        for c0 in range(0, n, _ROW_CHUNK):
            for q in range(tx, _ROW_CHUNK, _ROW_THREADS):
                j = c0 + q
                if j < n:
                    g = dmul(np.float64(dy[i, j]), np.float64(w[j]))
                    ta[q] = g
                    tc[q] = dmul(g, dmul(dsub(np.float64(x[i, j]), mu), r))
            a = _chunk_sum(a, ta, n - c0)
            c = _chunk_sum(c, tc, n - c0)
        a = ddiv(_broadcast(a, cell), nf)
        c = ddiv(_broadcast(c, cell), nf)
        for j in range(tx, n, _ROW_THREADS):
            g = dmul(np.float64(dy[i, j]), np.float64(w[j]))
            xh = dmul(dsub(np.float64(x[i, j]), mu), r)
            dx[i, j] = np.float32(dmul(r, dsub(dsub(g, a), dmul(xh, c))))


@cuda.jit
def _layer_norm_params_bwd_k(dy, x, mean, rstd, dw, db):  # pragma: no cover - compiled by numba
    """dw[j], db[j]: the float64 sums over rows ascending of dy * ((x - mean) * rstd) and of dy, a
    block per :data:`_COL_LANES` columns (every thread computes terms of its rows, the first
    loader's threads add them in order)."""
    m, n = x.shape
    lane = cuda.threadIdx.x
    loader = cuda.threadIdx.y
    tw = cuda.shared.array((_COL_CHUNK, _COL_LANES), numba.float64)
    tb = cuda.shared.array((_COL_CHUNK, _COL_LANES), numba.float64)
    rg = cuda.local.array(_COL_DEPTH, numba.float32)
    rx = cuda.local.array(_COL_DEPTH, numba.float32)
    rm = cuda.local.array(_COL_DEPTH, numba.float64)
    rr = cuda.local.array(_COL_DEPTH, numba.float64)
    for j0 in range(cuda.blockIdx.x * _COL_LANES, n, cuda.gridDim.x * _COL_LANES):
        j = j0 + lane
        aw = np.float64(0.0)
        ab = np.float64(0.0)
        _col_fetch(dy, 0, j, rg)
        _col_fetch(x, 0, j, rx)
        _col_fetch_rows(mean, 0, rm)
        _col_fetch_rows(rstd, 0, rr)
        for i0 in range(0, m, _COL_CHUNK):
            cuda.syncthreads()  # the first loader is done with the last chunk
            for u in range(_COL_DEPTH):
                g = np.float64(rg[u])
                tb[loader + u * _COL_LOADERS, lane] = g
                tw[loader + u * _COL_LOADERS, lane] = dmul(g, dmul(dsub(np.float64(rx[u]), rm[u]), rr[u]))
            cuda.syncthreads()
            if i0 + _COL_CHUNK < m:  # the next chunk's loads, in flight during the sums
                _col_fetch(dy, i0 + _COL_CHUNK, j, rg)
                _col_fetch(x, i0 + _COL_CHUNK, j, rx)
                _col_fetch_rows(mean, i0 + _COL_CHUNK, rm)
                _col_fetch_rows(rstd, i0 + _COL_CHUNK, rr)
            if loader == 0:
                for r in range(_COL_CHUNK):
                    if i0 + r < m:
                        aw = dadd(aw, tw[r, lane])
                        ab = dadd(ab, tb[r, lane])
        if loader == 0 and j < n:
            dw[j] = np.float32(aw)
            db[j] = np.float32(ab)


# ------------------------------------------------------------------ GELU (tanh form)


@cuda.jit
def _gelu_k(x, y):  # pragma: no cover - compiled by numba
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = np.float64(x[i])
        y[i] = np.float32(dmul(dmul(0.5, v), dadd(1.0, _gelu_inner(v))))


@cuda.jit
def _gelu_bwd_k(x, dy, dx):  # pragma: no cover - compiled by numba
    three_a = dmul(3.0, _GELU_A)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = np.float64(x[i])
        t = _gelu_inner(v)
        # 0.5 (1 + t) + (((0.5 v) (1 - t t)) K) (1 + ((3 A) v) v), as the CPU kernel's expression rounds
        left = dmul(0.5, dadd(1.0, t))
        right = dmul(dmul(dmul(dmul(0.5, v), dsub(1.0, dmul(t, t))), _GELU_K), dadd(1.0, dmul(dmul(three_a, v), v)))
        dx[i] = np.float32(dmul(np.float64(dy[i]), dadd(left, right)))


# ------------------------------------------------------------------ cross-entropy


@cuda.jit
def _row_lse_k(logits, lse):  # pragma: no cover - compiled by numba
    """lse[i] = max + log of the float64 sum over j ascending of exp(logits[i, j] - max), a row per block."""
    m, n = logits.shape
    tx = cuda.threadIdx.x
    best = cuda.shared.array(_ROW_THREADS, numba.float64)
    where = cuda.shared.array(_ROW_THREADS, numba.int64)
    terms = cuda.shared.array(_ROW_CHUNK, numba.float64)
    for i in range(cuda.blockIdx.x, m, cuda.gridDim.x):
        row = logits[i]
        hi = _row_max(row, n, 1.0, best, where)
        s = np.float64(0.0)
        for c0 in range(0, n, _ROW_CHUNK):
            for q in range(tx, _ROW_CHUNK, _ROW_THREADS):
                if c0 + q < n:
                    terms[q] = exp64(dsub(np.float64(row[c0 + q]), hi))
            s = _chunk_sum(s, terms, n - c0)
        if tx == 0:
            lse[i] = dadd(hi, log64(s))


@cuda.jit
def _mean_nll_k(logits, targets, lse, out):  # pragma: no cover - compiled by numba
    """out[0] = float32 of the float64 mean over rows, in order, of lse - the target's logit (one thread)."""
    if cuda.grid(1) == 0:
        m = logits.shape[0]
        total = np.float64(0.0)
        for i in range(m):
            total = dadd(total, dsub(lse[i], np.float64(logits[i, targets[i]])))
        out[0] = np.float32(ddiv(total, np.float64(m)))


@cuda.jit
def _cross_entropy_bwd_k(logits, targets, lse, scale, grad):  # pragma: no cover - compiled by numba
    m, n = logits.shape
    for e in range(cuda.grid(1), m * n, cuda.gridsize(1)):
        i, j = e // n, e % n
        q = exp64(dsub(np.float64(logits[i, j]), lse[i]))
        if j == targets[i]:
            q = dsub(q, 1.0)
        grad[i, j] = np.float32(dmul(q, scale))


# ------------------------------------------------------------------ convolution pieces (stride 1, same padding)


@cuda.jit
def _im2col_k(x, ks, pad, cols):  # pragma: no cover - compiled by numba
    """cols[(c*ks + kh)*ks + kw, (b*H + h)*W + w] = x[b, c, h + kh - pad, w + kw - pad], 0 outside."""
    nb, nc, hh, ww = x.shape
    npix = nb * hh * ww
    for e in range(cuda.grid(1), nc * ks * ks * npix, cuda.gridsize(1)):
        r, col = e // npix, e % npix
        c, kh, kw = r // (ks * ks), (r // ks) % ks, r % ks
        b, h, w = col // (hh * ww), (col // ww) % hh, col % ww
        y = h + kh - pad
        xx = w + kw - pad
        if 0 <= y < hh and 0 <= xx < ww:
            cols[r, col] = x[b, c, y, xx]
        else:
            cols[r, col] = np.float32(0.0)


@cuda.jit
def _col2im_k(dcols, ks, pad, dx):  # pragma: no cover - compiled by numba
    """dx[b, c, y, x] = the sum over kh, then kw, ascending, of the taps inside the image, from 0
    (repro_kernels.col2im's order); ``dcols`` is (tap, image * pixel), im2col's layout."""
    nb, nc, hh, ww = dx.shape
    hw = hh * ww
    for e in range(cuda.grid(1), nb * nc * hw, cuda.gridsize(1)):
        b, c, y, xx = e // (nc * hw), (e // hw) % nc, (e // ww) % hh, e % ww
        acc = np.float32(0.0)
        for kh in range(ks):
            h = y - kh + pad
            if 0 <= h < hh:
                for kw in range(ks):
                    w = xx - kw + pad
                    if 0 <= w < ww:
                        acc = fadd(acc, dcols[(c * ks + kh) * ks + kw, b * hw + h * ww + w])
        dx[b, c, y, xx] = acc


@cuda.jit
def _maxpool2_k(x, y, idx):  # pragma: no cover - compiled by numba
    nb, nc, hh, ww = y.shape
    for e in range(cuda.grid(1), nb * nc * hh * ww, cuda.gridsize(1)):
        b, c, i, j = e // (nc * hh * ww), (e // (hh * ww)) % nc, (e // ww) % hh, e % ww
        best = x[b, c, 2 * i, 2 * j]
        at = 0
        for q in range(1, 4):
            v = x[b, c, 2 * i + q // 2, 2 * j + q % 2]
            if v > best or (v != v and best == best):
                best = v
                at = q
        y[b, c, i, j] = best
        idx[b, c, i, j] = at


@cuda.jit
def _maxpool2_bwd_k(dy, idx, dx):  # pragma: no cover - compiled by numba
    nb, nc, hh, ww = dy.shape
    for e in range(cuda.grid(1), nb * nc * hh * ww, cuda.gridsize(1)):
        b, c, i, j = e // (nc * hh * ww), (e // (hh * ww)) % nc, (e // ww) % hh, e % ww
        g = dy[b, c, i, j]
        q = idx[b, c, i, j]
        zero = np.float32(0.0)
        dx[b, c, 2 * i, 2 * j] = g if q == 0 else zero
        dx[b, c, 2 * i, 2 * j + 1] = g if q == 1 else zero
        dx[b, c, 2 * i + 1, 2 * j] = g if q == 2 else zero
        dx[b, c, 2 * i + 1, 2 * j + 1] = g if q == 3 else zero


# ------------------------------------------------------------------ elementwise (flat float32 arrays)


@cuda.jit
def _sgd_k(p, g, buf, lr, momentum, dampening, weight_decay, nesterov):  # pragma: no cover - compiled by numba
    one = np.float32(1.0)
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        gi = g[i]
        if weight_decay != 0:
            gi = fadd(gi, fmul(weight_decay, p[i]))
        if momentum != 0:
            bi = fadd(fmul(momentum, buf[i]), fmul(fsub(one, dampening), gi))
            buf[i] = bi
            gi = fadd(gi, fmul(momentum, bi)) if nesterov else bi
        p[i] = fsub(p[i], fmul(lr, gi))


@cuda.jit
def _adam_k(p, g, m, v, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt, decay):  # pragma: no cover - compiled by numba
    one = np.float32(1.0)
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        pi = p[i]
        if decay != one:
            pi = fmul(pi, decay)
        gi = g[i]
        if weight_decay != 0:
            gi = fadd(gi, fmul(weight_decay, pi))
        mi = fadd(fmul(beta1, m[i]), fmul(fsub(one, beta1), gi))
        vi = fadd(fmul(beta2, v[i]), fmul(fsub(one, beta2), fmul(gi, gi)))
        m[i] = mi
        v[i] = vi
        p[i] = fsub(pi, fmul(step_size, fdiv(mi, fadd(fdiv(fsqrt(vi), bc2_sqrt), eps))))


@cuda.jit
def _add_into_k(acc, g):  # pragma: no cover - compiled by numba
    for i in range(cuda.grid(1), acc.shape[0], cuda.gridsize(1)):
        acc[i] = fadd(acc[i], g[i])


@cuda.jit
def _divide_k(x, d):  # pragma: no cover - compiled by numba
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        x[i] = fdiv(x[i], d)


@cuda.jit
def _scale_k(x, s):  # pragma: no cover - compiled by numba
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        x[i] = fmul(x[i], s)


@_device
def _squares_fetch(x: Any, i0: Any, hi: Any, regs: Any) -> None:
    """This thread's values of the chunk of ``x`` that starts at ``i0`` (``x[i0 + tx + u * _ROW_THREADS]``)
    into ``regs``, 0 from ``hi`` on: the loads are issued together."""
    for u in range(_SQUARES_DEPTH):
        i = i0 + cuda.threadIdx.x + u * _ROW_THREADS
        if i < hi:
            regs[u] = x[i]
        else:
            regs[u] = 0


@cuda.jit
def _sum_squares_k(x, bounds, out):  # pragma: no cover - compiled by numba
    """out[s] = the float64 sum of x[i]**2 over i = bounds[s], ..., bounds[s + 1] - 1 ascending
    (repro_kernels.sum_squares of one tensor): a block per tensor. Its threads square a chunk
    side by side (exact in float64) and stage it; the first thread adds the chunk in order while
    the next chunk's loads are in flight."""
    tx = cuda.threadIdx.x
    terms = cuda.shared.array(_SQUARES_CHUNK, numba.float64)
    regs = cuda.local.array(_SQUARES_DEPTH, numba.float32)
    for s in range(cuda.blockIdx.x, out.shape[0], cuda.gridDim.x):
        lo, hi = bounds[s], bounds[s + 1]
        acc = np.float64(0.0)
        _squares_fetch(x, lo, hi, regs)
        for c0 in range(lo, hi, _SQUARES_CHUNK):
            for u in range(_SQUARES_DEPTH):
                v = np.float64(regs[u])
                terms[tx + u * _ROW_THREADS] = dmul(v, v)
            cuda.syncthreads()
            _squares_fetch(x, c0 + _SQUARES_CHUNK, hi, regs)
            if tx == 0:
                for q in range(hi - c0 if hi - c0 < _SQUARES_CHUNK else _SQUARES_CHUNK):
                    acc = dadd(acc, terms[q])
            cuda.syncthreads()  # the first thread is done with the chunk
        if tx == 0:
            out[s] = acc


# The elementwise entry points take kernel arrays (:func:`array`), as proofs.repro_kernels' do.


def sgd_update(p: Any, g: Any, buf: Any, lr: np.float32, momentum: np.float32, dampening: np.float32, weight_decay: np.float32, nesterov: bool) -> None:
    """:func:`proofs.repro_kernels.sgd_update` (``buf`` may be empty when momentum is 0)."""
    # with no momentum buf is never touched; an empty one: g stands in for it (an alias of p would
    # be copied back over p by the simulator)
    _launch(_sgd_k, p.shape[0], p, g, buf if buf.shape[0] else g, lr, momentum, dampening, weight_decay, nesterov)


def adam_update(
    p: Any,
    g: Any,
    m: Any,
    v: Any,
    beta1: np.float32,
    beta2: np.float32,
    eps: np.float32,
    weight_decay: np.float32,
    step_size: np.float32,
    bc2_sqrt: np.float32,
    decay: np.float32,
) -> None:
    """:func:`proofs.repro_kernels.adam_update`."""
    _launch(_adam_k, p.shape[0], p, g, m, v, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt, decay)


def add_into(acc: Any, g: Any) -> None:
    _launch(_add_into_k, acc.shape[0], acc, g)


def divide(x: Any, d: np.float32) -> None:
    _launch(_divide_k, x.shape[0], x, d)


def scale(x: Any, s: np.float32) -> None:
    _launch(_scale_k, x.shape[0], x, s)


def _end_to_end(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """One flat copy of ``tensors``' elements, tensor after tensor (each in index order)."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def each(kernel: Callable[..., None], groups: Sequence[Sequence[torch.Tensor]], *scalars: Any) -> None:
    """``kernel`` (one of the elementwise entry points above) over each group of tensors, a group per
    parameter, as if called once per group with the same ``scalars``: one launch over flat copies,
    an argument's tensors of every group end to end, then every tensor copied back (each element
    gets the operations its own tensor's call gives it: the kernels are elementwise). A parameter's
    launch cost more than its copies (docs/numerics.md)."""
    if not groups:
        return
    columns = [list(column) for column in zip(*groups, strict=True)]
    flats = [_end_to_end(column) for column in columns]
    kernel(*(array(flat) for flat in flats), *scalars)
    for column, flat in zip(columns, flats, strict=True):
        parts = flat.split([t.numel() for t in column])
        torch._foreach_copy_([t.detach() for t in column], [part.view_as(t) for part, t in zip(parts, column, strict=True)])


def sum_squares_each(tensors: Sequence[torch.Tensor]) -> list[float]:
    """Each contiguous tensor's float64 sum of squares, its elements in index order
    (:func:`proofs.repro_kernels.sum_squares` of each): one launch for all of them, a block per
    tensor, over one flat copy; one copy of the sums back."""
    if not tensors:
        return []
    flat = _end_to_end(tensors)
    bounds = torch.tensor([0, *itertools.accumulate(t.numel() for t in tensors)], dtype=torch.int64, device=flat.device)
    out = _empty(len(tensors), flat, torch.float64)
    _launch_rows(_sum_squares_k, len(tensors), array(flat), array(bounds), array(out))
    return [float(s) for s in out.tolist()]


# ------------------------------------------------------------------ autograd functions (proofs.repro's, on the GPU)


def _colsum(g: torch.Tensor) -> torch.Tensor:
    out = _empty(g.shape[1], g)
    _launch_columns(_colsum_k, g.shape[1], array(g), array(out))
    return out


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, fused: bool) -> torch.Tensor:
        xs = x.detach().reshape(-1, x.shape[-1])
        y = _mm(xs, w.detach().t(), fused)  # the CPU's y^T = W x^T for few rows has the same products and order
        if b is not None:
            y += b.detach()  # one rounded add per output, after the whole dot product
        ctx.save_for_backward(x, w)
        ctx.has_bias, ctx.fused = b is not None, fused
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        g = dy.detach().contiguous().reshape(-1, w.shape[0])
        xs = x.detach().reshape(-1, x.shape[-1])
        dx = _mm(g, w.detach(), ctx.fused).reshape(x.shape) if ctx.needs_input_grad[0] else None
        dw = _mm(g.t(), xs, ctx.fused)
        db = _colsum(g) if ctx.has_bias else None
        return dx, dw, db, None


class Conv2d(torch.autograd.Function):
    # cols (taps, images x pixels) as on the CPU; y = W cols as one matmul over all images (each
    # output's k = tap order is the CPU's per-image one), then a copy into NCHW. Backward:
    # dcols = W^T G, dW = G cols^T (k = image-major pixels ascending, the CPU's dW^T = cols G^T).
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, pad: int, fused: bool) -> torch.Tensor:
        nb, _, hh, ww = x.shape
        c_out, c_in, ks, _ = w.shape
        xc = x.detach().contiguous()
        cols = _empty((c_in * ks * ks, nb * hh * ww), x)
        _launch(_im2col_k, cols.numel(), array(xc), ks, pad, array(cols))
        ctx.fused = fused
        y = _mm(w.detach().reshape(c_out, -1), cols, fused).reshape(c_out, nb, hh * ww).permute(1, 0, 2).contiguous()
        y += b.detach()[:, None]
        ctx.save_for_backward(w)
        ctx.cols, ctx.pad, ctx.x_shape = cols, pad, x.shape
        return y.reshape(nb, c_out, hh, ww)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (w,) = ctx.saved_tensors
        c_out, _, ks, _ = w.shape
        nb, _, hh, ww = ctx.x_shape
        g = dy.detach().contiguous().reshape(nb, c_out, hh * ww)
        gt = g.permute(1, 0, 2).reshape(c_out, nb * hh * ww)  # (c_out, image-major pixels): a copy
        dw = _mm(gt, ctx.cols.t(), ctx.fused).reshape(w.shape)
        db = _empty(c_out, g)
        _launch(_channel_sum_k, c_out, array(g), array(db))
        if not ctx.needs_input_grad[0]:
            return None, dw, db, None, None
        dcols = _mm(w.detach().reshape(c_out, -1).t(), gt, ctx.fused)
        dx = _empty(ctx.x_shape, g)
        _launch(_col2im_k, dx.numel(), array(dcols), ks, ctx.pad, array(dx))
        return dx, dw, db, None, None


class MaxPool2(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        nb, nc, hh, ww = x.shape
        y = _empty((nb, nc, hh // 2, ww // 2), x)
        idx = _empty(y.shape, x, torch.int8)
        _launch(_maxpool2_k, y.numel(), array(x.detach().contiguous()), array(y), array(idx))
        ctx.idx, ctx.x_shape = idx, x.shape
        return y

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        dx = _empty(ctx.x_shape, dy)
        _launch(_maxpool2_bwd_k, dy.numel(), array(dy.detach().contiguous()), array(ctx.idx), array(dx))
        return dx


class MeanPixels(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        nb, nc, hh, ww = x.shape
        y = _empty(nb * nc, x)
        _launch(_rowsum_k, nb * nc, array(x.detach().contiguous().reshape(nb * nc, hh * ww)), array(y))
        _launch(_divide_k, nb * nc, array(y), np.float32(hh * ww))
        ctx.x_shape = x.shape
        return y.reshape(nb, nc)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        nb, nc, hh, ww = ctx.x_shape
        g = dy.detach().reshape(-1).clone()
        _launch(_divide_k, g.shape[0], array(g), np.float32(hh * ww))
        return g.reshape(nb, nc, 1, 1).expand(ctx.x_shape).contiguous()


class LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, eps: float) -> torch.Tensor:
        xs = x.detach().contiguous().reshape(-1, x.shape[-1])
        y = torch.empty_like(xs)
        mean = _empty(xs.shape[0], x, torch.float64)
        rstd = _empty(xs.shape[0], x, torch.float64)
        bias = torch.zeros_like(w.detach()) if b is None else b.detach()
        _launch_rows(_layer_norm_k, xs.shape[0], array(xs), array(w), array(bias), float(eps), array(y), array(mean), array(rstd))
        ctx.save_for_backward(x, w)
        ctx.mean, ctx.rstd, ctx.has_bias = mean, rstd, b is not None
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        xs = x.detach().contiguous().reshape(-1, x.shape[-1])
        g = dy.detach().contiguous().reshape(xs.shape)
        dx = torch.empty_like(xs)
        _launch_rows(_layer_norm_bwd_k, xs.shape[0], array(g), array(xs), array(w), array(ctx.mean), array(ctx.rstd), array(dx))
        dw = _empty(xs.shape[1], xs)
        db = _empty(xs.shape[1], xs)
        _launch_columns(_layer_norm_params_bwd_k, xs.shape[1], array(g), array(xs), array(ctx.mean), array(ctx.rstd), array(dw), array(db))
        return dx.reshape(x.shape), dw, db if ctx.has_bias else None, None


class Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        xs = x.detach().contiguous().reshape(-1)
        y = torch.empty_like(xs)
        _launch(_gelu_k, xs.shape[0], array(xs), array(y))
        ctx.save_for_backward(x)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        xs = x.detach().contiguous().reshape(-1)
        dx = torch.empty_like(xs)
        _launch(_gelu_bwd_k, xs.shape[0], array(xs), array(dy.detach().contiguous().reshape(-1)), array(dx))
        return dx.reshape(x.shape)


class CausalAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, fused: bool) -> torch.Tensor:
        shape = q.shape  # (B, H, T, D)
        qn, kn, vn = (z.detach().contiguous().reshape(-1, shape[2], shape[3]) for z in (q, k, v))
        scale = 1.0 / math.sqrt(shape[3])
        s = bmm(qn, kn.transpose(1, 2), fused=fused)
        p = torch.empty_like(s)
        _launch_rows(_causal_softmax_k, s.shape[0] * s.shape[1], array(s), scale, array(p))
        ctx.saved = (qn, kn, vn, p, scale, shape, fused)
        return bmm(p, vn, fused=fused).reshape(shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        qn, kn, vn, p, scale, shape, fused = ctx.saved
        g = dy.detach().contiguous().reshape(qn.shape)
        dp = bmm(g, vn.transpose(1, 2), fused=fused)
        dv = bmm(p.transpose(1, 2), g, fused=fused)
        ds = torch.empty_like(dp)
        _launch_rows(_causal_softmax_bwd_k, dp.shape[0] * dp.shape[1], array(p), array(dp), scale, array(ds))
        dq = bmm(ds, kn, fused=fused)
        dk = bmm(ds.transpose(1, 2), qn, fused=fused)
        return dq.reshape(shape), dk.reshape(shape), dv.reshape(shape), None


class Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.idx, ctx.w_shape = idx.detach().contiguous().reshape(-1), w.shape
        return w.detach()[idx]  # a gather: no arithmetic

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[None, torch.Tensor]:
        dw = torch.zeros(ctx.w_shape, dtype=torch.float32, device=dy.device)
        _launch(_embedding_bwd_k, ctx.w_shape[1], array(ctx.idx), array(dy.detach().contiguous().reshape(-1, ctx.w_shape[1])), array(dw))
        return None, dw


class CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x, t = logits.detach().contiguous(), targets.detach().contiguous()
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= x.shape[1]):
            raise IndexError(f"target out of range [0, {x.shape[1]})")
        lse = _empty(x.shape[0], x, torch.float64)
        _launch_rows(_row_lse_k, x.shape[0], array(x), array(lse))
        loss = _empty(1, x)
        _launch(_mean_nll_k, 1, array(x), array(t), array(lse), array(loss))
        ctx.saved = (x, t, lse)
        return loss.reshape(())

    @staticmethod
    def backward(ctx: Any, dloss: torch.Tensor) -> tuple[torch.Tensor, None]:
        x, t, lse = ctx.saved
        grad = torch.empty_like(x)
        _launch(_cross_entropy_bwd_k, x.numel(), array(x), array(t), array(lse), float(dloss) / x.shape[0], array(grad))
        return grad, None
