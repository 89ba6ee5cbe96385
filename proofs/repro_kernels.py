"""Reproducible CPU kernels (numba): every output is the same sequence of rounded operations
on every machine.

Rules each kernel keeps (docs/numerics.md says why):

* a fixed reduction order per output: a sum runs over its index in ascending order, never
  split across threads or vector lanes; ``prange`` and vectorization run across independent
  outputs only (matmul: rows x column tiles, each output accumulating over ``k`` in order);
* no fused multiply-add (numba's default: no ``fastmath``, so LLVM never contracts
  ``a * b + c``), no reassociation; repro-v2's contraction kernels (:data:`FUSED`, the same
  source) fuse each multiply-add of a matmul or convolution term through an explicit intrinsic,
  and nothing else;
* transcendentals (``exp``, ``log``, ``tanh``) from fixed polynomials built from
  + - * / only (:func:`exp64`, :func:`log64`), never libm;
* float32 in and out; matmuls and plain sums (bias and embedding gradients, col2im) accumulate
  in float32, row reductions (softmax, layer norm, cross-entropy) in float64, each rounded to
  float32 once at the end.

All functions take preallocated C-contiguous outputs and return nothing unless stated.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from types import CodeType, FunctionType, SimpleNamespace
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

# numba's OpenMP pool (GNU libgomp) where the system has it, else its workqueue pool: a
# parallel call through the workqueue took 150 us against 2 us through OpenMP, and its idle
# threads woke late (gpt-10M's step 1.13x faster at two threads than at one, against 1.69x:
# docs/numerics.md). Under the repro numerics torch runs as many threads beside it, in its own
# OpenMP pool (measured faster than torch on one). The layer changes no bits;
# NUMBA_THREADING_LAYER still chooses another.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "default"
    numba.config.THREADING_LAYER_PRIORITY = ["omp", "workqueue", "tbb"]  # the workqueue is built in: tbb is never reached

__all__ = [
    "exp64",
    "log64",
    "tanh64",
    "bmm",
    "colsum",
    "add_rows",
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
    "conv2d_forward",
    "conv2d_input_grad",
    "conv2d_params_grad",
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
    "FUSED",
]

# ------------------------------------------------------------------ threads

#: Below this much work (estimated nanoseconds on one core) a kernel runs its serial build: a
#: call of a ``parallel=True`` kernel goes through numba's thread pool, measured here at 2 us
#: of wall clock (4 us of CPU) through OpenMP for a sum of 4 x 64 floats (0.4 us serially), and
#: a transformer step makes hundreds of kernel calls (transformer-1M: 1.34x faster at two threads
#: than at one with 100_000 here, 1.52x with 20_000). The estimates are rough; the build and the
#: thread count change no bits. From it on, the parallel build runs at any thread count, one
#: included: on one thread, steps 0.90x to 1.02x of the serial builds' (the max-pool's parallel
#: build 2.9x faster than its serial one, the matmul up to 1.5x on 16 to 64 rows of k; the row
#: kernels' 1% to 9% slower; numba compiles a ``prange`` loop's body as a function of its own,
#: and why LLVM's code for it differs is not pinned down).
PARALLEL_MIN: float = 20_000
#: The threshold's multiple per threading layer: a call through the workqueue cost 150 us of
#: wall clock (120 us of CPU) for the same sum, and 50 us of CPU on one thread, where the serial
#: builds run whatever the work.
_LAUNCH_SCALE = {"omp": 1, "tbb": 1, "workqueue": 5}
_EXP_NS = 2.0  # per element of a kernel that calls exp64 (GELU: 1.9 ns measured)


def _size(arg: int, ns_per_element: float = 0.5) -> Callable[..., float]:
    """Work of a kernel: the size of its argument ``arg`` times ``ns_per_element``."""
    return lambda *args: args[arg].size * ns_per_element


def _passes(arg: int) -> Callable[..., float]:
    """Work of a sum down the columns of argument ``arg`` (:func:`_col_width`): its size, where
    its columns make more than one pass; else none, as one pass is one task, and through the
    thread pool it only adds the launch (a layer norm's parameter gradients at 64 features:
    60 us on two threads, 57 serially)."""
    size = _size(arg)
    return lambda *args: size(*args) if args[arg].shape[1] > _COLS_MIN else 0.0


@functools.cache
def _pool() -> str:
    """numba's thread pool (its threading layer: fixed once started), started here if no kernel
    or thread count has started it yet."""
    numba.get_num_threads()  # starts the pool, which picks its layer
    return str(numba.threading_layer())


def _parallel(work: Callable[..., float]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Compile a kernel twice: ``.kernel`` with ``prange`` across threads, ``.serial`` with
    ``prange`` as ``range`` (the same source, so the same operations per output). A call runs
    ``.kernel`` when ``work(*args)`` is at least :data:`PARALLEL_MIN` (times the thread pool's
    ``_LAUNCH_SCALE``), on as many threads as are set (through the workqueue, only at two or
    more), else ``.serial``."""

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
            pool = _pool()
            if work(*args) >= PARALLEL_MIN * _LAUNCH_SCALE[pool] and (pool != "workqueue" or numba.get_num_threads() > 1):
                return kernel(*args)
            return serial(*args)

        call.kernel, call.serial = kernel, serial  # type: ignore[attr-defined]
        call.py_func, call.work = fn, work  # type: ignore[attr-defined]  # for repro-v2's twin (_fused_family)
        return call

    return wrap


# ------------------------------------------------------------------ transcendentals

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2: n * _LN2_HI is exact for |n| < 2**11
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951
#: 1/k! for the exp Taylor polynomial (|r| <= ln2/2: truncation error < 2e-16 relative).
_EXP_C = np.array([1.0 / float(np.prod(np.arange(1, k + 1, dtype=np.float64))) for k in range(14)], dtype=np.float64)
#: 2/(2k+1) for log's atanh series (|z| <= 0.1716: truncation error < 1e-17).
_LOG_C = np.array([2.0 / (2 * k + 1) for k in range(12)], dtype=np.float64)


@intrinsic
def _pow2(typingctx, n):
    """2.0**n as float64, exactly, for an int64 n in [-1022, 1023]: the exponent field written
    bit by bit (no ldexp, no libm, and no table: a table lookup kept LLVM from vectorizing the
    loops that call :func:`exp64`, 11.5 against 2.9 ns per GELU element)."""

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        bits = builder.shl(builder.add(args[0], ir.Constant(i64, 1023)), ir.Constant(i64, 52))
        return builder.bitcast(bits, ir.DoubleType())

    return types.float64(types.int64), codegen


@njit(cache=True, inline="always")
def exp64(x: float) -> float:
    """e**x in float64 from range reduction by ln 2 and a degree-13 Taylor polynomial, times
    2**n (n in [-1021, 1023] for x in [-708, 709]: always a normal float64)."""
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
    return p * _pow2(np.int64(n))


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
# The matmul holds a tile of outputs in registers for the whole k loop: numba has no vector
# type, so small ones are declared below (LLVM <16 x float> and <8 x float> values with load,
# store, broadcast and a multiply-then-add as two separate IR instructions). LLVM lowers them
# to whatever the target has (a <16 x float> is one zmm with AVX-512, two ymm with AVX2, four
# xmm with SSE2); every lane is an independent output, so the bits cannot depend on that, nor
# on the tile's shape. Two tile families, one chosen per target (:data:`WIDE_TILES`):
#
# * wide, for AVX-512 (32 vector registers): 6 rows x 64 columns, 24 <16 x float> accumulators
#   (4 x 64 until issue 27's eighth pass: its 4 vectors of b per 16 multiply-adds outran L2 where
#   a panel's block streams from there; 6 x 64 loads them for 24);
# * narrow, for everything else (16 ymm or xmm registers): 6 rows x 16 columns, 12 <8 x float>
#   accumulators (12 ymm with AVX2: the wide tile's 32 ymm accumulators spilled to memory on
#   every k, measured 22 to 34 GFLOP/s here against 43 to 53 for this one).


def _item_ptr(context, builder, aryty, ary, index_types, index, pointer_type):
    """A ``pointer_type`` pointer to ary[index] in generated code (no wraparound, no bounds check)."""
    arr = context.make_array(aryty)(context, builder, ary)
    inds = [context.cast(builder, v, t, types.intp) for v, t in zip(index, index_types)]
    return builder.bitcast(cgutils.get_item_pointer(context, builder, aryty, arr, inds, wraparound=False), pointer_type)


def _vector_ops(width: int) -> SimpleNamespace:
    """A float32 vector type of ``width`` lanes and its intrinsics. The matmul's, on 2-D arrays:
    load, store, splat, an accumulator's start, and ``acc + x * y`` (``muladd``: an fmul, then an
    fadd, no fast-math flags: LLVM never fuses them; ``fma``: one rounding, repro-v2's). The
    direct convolution's, on 1-D arrays at flat indices taken as they are (no wraparound, no
    bounds check, and no ``inbounds``: a masked access may start before the array or end past
    it): load, store, splat of an element, zero,
    ``x + y`` (one fadd), and with lanes chosen by an integer's bits (bit ``l`` is lane ``l``) a
    masked load (+0.0 in the other lanes, which are never read, so they may lie outside the
    array), a masked store and a select."""
    vec = ir.VectorType(ir.FloatType(), width)
    mask_ty = ir.VectorType(ir.IntType(1), width)

    class F32Vec(types.Type):
        def __init__(self) -> None:
            super().__init__(name=f"float32x{width}")

    f32vec = F32Vec()

    @register_model(F32Vec)
    class F32VecModel(models.PrimitiveModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, vec)

    def vec_ptr(context, builder, aryty, ary, index_types, index):
        return _item_ptr(context, builder, aryty, ary, index_types, index, vec.as_pointer())

    @intrinsic
    def vload(typingctx, a, i, j):
        """a[i, j : j + width] as a vector (no bounds check: the caller's tile is inside ``a``)."""

        def codegen(context, builder, sig, args):
            return builder.load(vec_ptr(context, builder, sig.args[0], args[0], sig.args[1:], args[1:]), align=4)

        return f32vec(a, i, j), codegen

    @intrinsic
    def vstore(typingctx, a, i, j, v):
        """a[i, j : j + width] = v."""

        def codegen(context, builder, sig, args):
            builder.store(args[3], vec_ptr(context, builder, sig.args[0], args[0], sig.args[1:3], args[1:3]), align=4)
            return context.get_dummy_value()

        return types.none(a, i, j, v), codegen

    @intrinsic
    def vsplat(typingctx, x):
        """x (float32) in every lane."""

        def codegen(context, builder, sig, args):
            return splat_value(builder, args[0])

        return f32vec(types.float32), codegen

    @intrinsic
    def vstart(typingctx, src, i, j):
        """An accumulator's start: zero where ``src`` is None (the first block of k), else
        src[i, j : j + width], the partial sum a block before stored (a float32 stored and loaded
        exactly: the same bits as one long loop). Decided when numba compiles, by src's type:
        a branch in every tile cost the attention's short-k matmuls a fifth."""
        if isinstance(src, types.NoneType):
            return f32vec(src, i, j), lambda context, builder, sig, args: ir.Constant(vec, [0.0] * width)

        def codegen(context, builder, sig, args):
            return builder.load(vec_ptr(context, builder, sig.args[0], args[0], sig.args[1:], args[1:]), align=4)

        return f32vec(src, i, j), codegen

    @intrinsic
    def vmuladd(typingctx, acc, x, y):
        """acc + x * y, lane by lane, as a float32 multiply rounded, then an add rounded."""

        def codegen(context, builder, sig, args):
            return builder.fadd(args[0], builder.fmul(args[1], args[2]))

        return f32vec(acc, x, y), codegen

    @intrinsic
    def vfma(typingctx, acc, x, y):
        """acc + x * y, lane by lane, rounded once (LLVM's fma: an FMA instruction where the target
        has one, else libm's correctly rounded ``fmaf``): repro-v2's multiply-add."""

        def codegen(context, builder, sig, args):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{width}f32")
            return builder.call(fn, [args[1], args[2], args[0]])

        return f32vec(acc, x, y), codegen

    @intrinsic
    def zero(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(vec, [0.0] * width)

        return f32vec(), codegen

    # the direct convolution's: 1-D arrays at flat indices, and lanes chosen by an integer's bits
    def flat_ptr(context, builder, aryty, ary, index_type, index):
        arr = context.make_array(aryty)(context, builder, ary)
        return builder.gep(arr.data, [context.cast(builder, index, index_type, types.intp)])

    def lanes(context, builder, bits_type, bits):
        bits = context.cast(builder, bits, bits_type, types.int64)
        return builder.bitcast(builder.trunc(bits, ir.IntType(width)), mask_ty)

    def splat_value(builder, x):
        one = builder.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width))

    @intrinsic
    def flat_load(typingctx, a, i):
        """a[i : i + width]."""

        def codegen(context, builder, sig, args):
            return builder.load(builder.bitcast(flat_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1]), vec.as_pointer()), align=4)

        return f32vec(a, i), codegen

    @intrinsic
    def flat_store(typingctx, a, i, v):
        """a[i : i + width] = v."""

        def codegen(context, builder, sig, args):
            builder.store(args[2], builder.bitcast(flat_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1]), vec.as_pointer()), align=4)
            return context.get_dummy_value()

        return types.none(a, i, v), codegen

    @intrinsic
    def flat_splat(typingctx, a, i):
        """a[i] in every lane."""

        def codegen(context, builder, sig, args):
            return splat_value(builder, builder.load(flat_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1]), align=4))

        return f32vec(a, i), codegen

    @intrinsic
    def add(typingctx, x, y):
        """x + y, lane by lane, one float32 add rounded."""

        def codegen(context, builder, sig, args):
            return builder.fadd(args[0], args[1])

        return f32vec(x, y), codegen

    @intrinsic
    def masked_load(typingctx, a, i, m):
        """a[i + l] in the lanes ``l`` of ``m``, +0.0 in the others (LLVM's masked load)."""

        def codegen(context, builder, sig, args):
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vec, [vec.as_pointer(), ir.IntType(32), mask_ty, vec]), f"llvm.masked.load.v{width}f32.p0"
            )
            ptr = builder.bitcast(flat_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1]), vec.as_pointer())
            return builder.call(fn, [ptr, ir.Constant(ir.IntType(32), 4), lanes(context, builder, sig.args[2], args[2]), ir.Constant(vec, [0.0] * width)])

        return f32vec(a, i, m), codegen

    @intrinsic
    def masked_store(typingctx, a, i, v, m):
        """a[i + l] = v[l] for the lanes ``l`` of ``m``; the others are not written."""

        def codegen(context, builder, sig, args):
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [vec, vec.as_pointer(), ir.IntType(32), mask_ty]), f"llvm.masked.store.v{width}f32.p0"
            )
            ptr = builder.bitcast(flat_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1]), vec.as_pointer())
            builder.call(fn, [args[2], ptr, ir.Constant(ir.IntType(32), 4), lanes(context, builder, sig.args[3], args[3])])
            return context.get_dummy_value()

        return types.none(a, i, v, m), codegen

    @intrinsic
    def select(typingctx, m, x, y):
        """x in the lanes of ``m``, y in the others (no arithmetic)."""

        def codegen(context, builder, sig, args):
            return builder.select(lanes(context, builder, sig.args[0], args[0]), args[1], args[2])

        return f32vec(m, x, y), codegen

    return SimpleNamespace(
        load=vload,
        store=vstore,
        splat=vsplat,
        start=vstart,
        muladd=vmuladd,
        fma=vfma,
        zero=zero,
        flat_load=flat_load,
        flat_store=flat_store,
        flat_splat=flat_splat,
        add=add,
        masked_load=masked_load,
        masked_store=masked_store,
        select=select,
    )


@intrinsic
def _prefetch(typingctx, a, i, j):
    """Ask for the cache line of a[i, j] ahead of its load (LLVM's prefetch: a hint, no fault,
    no value): rows of a long strided panel lie on pages of their own, where no hardware
    prefetcher follows them."""

    def codegen(context, builder, sig, args):
        ptr = _item_ptr(context, builder, sig.args[0], args[0], sig.args[1:], args[1:], ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]), "llvm.prefetch.p0i8")
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])  # read, keep in all levels, data
        return context.get_dummy_value()

    return types.none(a, i, j), codegen


_W = 16  # float32 lanes per vector of the wide tiles
_ROWS = 6  # rows of a wide tile: each loaded vector of b feeds six accumulators (24 of 32 zmm at 6 x 64)
_WIDE = _vector_ops(_W)
_vload, _vstore, _vsplat, _vstart, _vmuladd = _WIDE.load, _WIDE.store, _WIDE.splat, _WIDE.start, _WIDE.muladd
_NW = 8  # lanes per vector of the narrow tiles
_NROWS = 6  # rows of a narrow tile
_NARROW = _vector_ops(_NW)
_nload, _nstore, _nsplat, _nstart, _nmuladd = _NARROW.load, _NARROW.store, _NARROW.splat, _NARROW.start, _NARROW.muladd


def _target_has_avx512() -> bool:
    """Whether numba compiles for AVX-512 here: the features its code generator gives LLVM
    (``NUMBA_CPU_FEATURES``, empty under ``NUMBA_CPU_NAME=generic``, else the host's)."""
    features = numba.config.CPU_FEATURES
    if features is None:
        features = numba.core.codegen.get_host_cpu_features()
    return "+avx512f" in features.split(",")


#: The wide tiles where numba targets AVX-512, the narrow ones elsewhere (the same bits).
WIDE_TILES = _target_has_avx512()


# The register tiles: out[o0 + r, c0 : c0 + width] = the sum over k = k0, ..., k1 - 1 of
# a[i0 + r, k] * b[k, j0 : j0 + width], starting from 0 where src is None, else from the partial
# sums src[o0 + r, c0 : c0 + width] of the k before k0: over all blocks of k, the sequence the
# first kernel's 4 x 256 tile in memory had.


@njit(cache=True)
def _tile6x4(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01, c02, c03 = _vstart(src, o0, c0), _vstart(src, o0, c0 + _W), _vstart(src, o0, c0 + 2 * _W), _vstart(src, o0, c0 + 3 * _W)
    c10, c11, c12, c13 = _vstart(src, o0 + 1, c0), _vstart(src, o0 + 1, c0 + _W), _vstart(src, o0 + 1, c0 + 2 * _W), _vstart(src, o0 + 1, c0 + 3 * _W)
    c20, c21, c22, c23 = _vstart(src, o0 + 2, c0), _vstart(src, o0 + 2, c0 + _W), _vstart(src, o0 + 2, c0 + 2 * _W), _vstart(src, o0 + 2, c0 + 3 * _W)
    c30, c31, c32, c33 = _vstart(src, o0 + 3, c0), _vstart(src, o0 + 3, c0 + _W), _vstart(src, o0 + 3, c0 + 2 * _W), _vstart(src, o0 + 3, c0 + 3 * _W)
    c40, c41, c42, c43 = _vstart(src, o0 + 4, c0), _vstart(src, o0 + 4, c0 + _W), _vstart(src, o0 + 4, c0 + 2 * _W), _vstart(src, o0 + 4, c0 + 3 * _W)
    c50, c51, c52, c53 = _vstart(src, o0 + 5, c0), _vstart(src, o0 + 5, c0 + _W), _vstart(src, o0 + 5, c0 + 2 * _W), _vstart(src, o0 + 5, c0 + 3 * _W)
    for k in range(k0, k1):
        b0, b1, b2, b3 = _vload(b, k, j0), _vload(b, k, j0 + _W), _vload(b, k, j0 + 2 * _W), _vload(b, k, j0 + 3 * _W)
        x = _vsplat(a[i0, k])
        c00, c01, c02, c03 = _vmuladd(c00, x, b0), _vmuladd(c01, x, b1), _vmuladd(c02, x, b2), _vmuladd(c03, x, b3)
        x = _vsplat(a[i0 + 1, k])
        c10, c11, c12, c13 = _vmuladd(c10, x, b0), _vmuladd(c11, x, b1), _vmuladd(c12, x, b2), _vmuladd(c13, x, b3)
        x = _vsplat(a[i0 + 2, k])
        c20, c21, c22, c23 = _vmuladd(c20, x, b0), _vmuladd(c21, x, b1), _vmuladd(c22, x, b2), _vmuladd(c23, x, b3)
        x = _vsplat(a[i0 + 3, k])
        c30, c31, c32, c33 = _vmuladd(c30, x, b0), _vmuladd(c31, x, b1), _vmuladd(c32, x, b2), _vmuladd(c33, x, b3)
        x = _vsplat(a[i0 + 4, k])
        c40, c41, c42, c43 = _vmuladd(c40, x, b0), _vmuladd(c41, x, b1), _vmuladd(c42, x, b2), _vmuladd(c43, x, b3)
        x = _vsplat(a[i0 + 5, k])
        c50, c51, c52, c53 = _vmuladd(c50, x, b0), _vmuladd(c51, x, b1), _vmuladd(c52, x, b2), _vmuladd(c53, x, b3)
    _vstore(out, o0, c0, c00), _vstore(out, o0, c0 + _W, c01), _vstore(out, o0, c0 + 2 * _W, c02), _vstore(out, o0, c0 + 3 * _W, c03)
    _vstore(out, o0 + 1, c0, c10), _vstore(out, o0 + 1, c0 + _W, c11), _vstore(out, o0 + 1, c0 + 2 * _W, c12), _vstore(out, o0 + 1, c0 + 3 * _W, c13)
    _vstore(out, o0 + 2, c0, c20), _vstore(out, o0 + 2, c0 + _W, c21), _vstore(out, o0 + 2, c0 + 2 * _W, c22), _vstore(out, o0 + 2, c0 + 3 * _W, c23)
    _vstore(out, o0 + 3, c0, c30), _vstore(out, o0 + 3, c0 + _W, c31), _vstore(out, o0 + 3, c0 + 2 * _W, c32), _vstore(out, o0 + 3, c0 + 3 * _W, c33)
    _vstore(out, o0 + 4, c0, c40), _vstore(out, o0 + 4, c0 + _W, c41), _vstore(out, o0 + 4, c0 + 2 * _W, c42), _vstore(out, o0 + 4, c0 + 3 * _W, c43)
    _vstore(out, o0 + 5, c0, c50), _vstore(out, o0 + 5, c0 + _W, c51), _vstore(out, o0 + 5, c0 + 2 * _W, c52), _vstore(out, o0 + 5, c0 + 3 * _W, c53)


@njit(cache=True)
def _tile6x2(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01 = _vstart(src, o0, c0), _vstart(src, o0, c0 + _W)
    c10, c11 = _vstart(src, o0 + 1, c0), _vstart(src, o0 + 1, c0 + _W)
    c20, c21 = _vstart(src, o0 + 2, c0), _vstart(src, o0 + 2, c0 + _W)
    c30, c31 = _vstart(src, o0 + 3, c0), _vstart(src, o0 + 3, c0 + _W)
    c40, c41 = _vstart(src, o0 + 4, c0), _vstart(src, o0 + 4, c0 + _W)
    c50, c51 = _vstart(src, o0 + 5, c0), _vstart(src, o0 + 5, c0 + _W)
    for k in range(k0, k1):
        b0, b1 = _vload(b, k, j0), _vload(b, k, j0 + _W)
        x = _vsplat(a[i0, k])
        c00, c01 = _vmuladd(c00, x, b0), _vmuladd(c01, x, b1)
        x = _vsplat(a[i0 + 1, k])
        c10, c11 = _vmuladd(c10, x, b0), _vmuladd(c11, x, b1)
        x = _vsplat(a[i0 + 2, k])
        c20, c21 = _vmuladd(c20, x, b0), _vmuladd(c21, x, b1)
        x = _vsplat(a[i0 + 3, k])
        c30, c31 = _vmuladd(c30, x, b0), _vmuladd(c31, x, b1)
        x = _vsplat(a[i0 + 4, k])
        c40, c41 = _vmuladd(c40, x, b0), _vmuladd(c41, x, b1)
        x = _vsplat(a[i0 + 5, k])
        c50, c51 = _vmuladd(c50, x, b0), _vmuladd(c51, x, b1)
    _vstore(out, o0, c0, c00), _vstore(out, o0, c0 + _W, c01)
    _vstore(out, o0 + 1, c0, c10), _vstore(out, o0 + 1, c0 + _W, c11)
    _vstore(out, o0 + 2, c0, c20), _vstore(out, o0 + 2, c0 + _W, c21)
    _vstore(out, o0 + 3, c0, c30), _vstore(out, o0 + 3, c0 + _W, c31)
    _vstore(out, o0 + 4, c0, c40), _vstore(out, o0 + 4, c0 + _W, c41)
    _vstore(out, o0 + 5, c0, c50), _vstore(out, o0 + 5, c0 + _W, c51)


@njit(cache=True)
def _tile6x1(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00 = _vstart(src, o0, c0)
    c10 = _vstart(src, o0 + 1, c0)
    c20 = _vstart(src, o0 + 2, c0)
    c30 = _vstart(src, o0 + 3, c0)
    c40 = _vstart(src, o0 + 4, c0)
    c50 = _vstart(src, o0 + 5, c0)
    for k in range(k0, k1):
        b0 = _vload(b, k, j0)
        x = _vsplat(a[i0, k])
        c00 = _vmuladd(c00, x, b0)
        x = _vsplat(a[i0 + 1, k])
        c10 = _vmuladd(c10, x, b0)
        x = _vsplat(a[i0 + 2, k])
        c20 = _vmuladd(c20, x, b0)
        x = _vsplat(a[i0 + 3, k])
        c30 = _vmuladd(c30, x, b0)
        x = _vsplat(a[i0 + 4, k])
        c40 = _vmuladd(c40, x, b0)
        x = _vsplat(a[i0 + 5, k])
        c50 = _vmuladd(c50, x, b0)
    _vstore(out, o0, c0, c00)
    _vstore(out, o0 + 1, c0, c10)
    _vstore(out, o0 + 2, c0, c20)
    _vstore(out, o0 + 3, c0, c30)
    _vstore(out, o0 + 4, c0, c40)
    _vstore(out, o0 + 5, c0, c50)


@njit(cache=True)
def _tile4x4(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01, c02, c03 = _vstart(src, o0, c0), _vstart(src, o0, c0 + _W), _vstart(src, o0, c0 + 2 * _W), _vstart(src, o0, c0 + 3 * _W)
    c10, c11, c12, c13 = _vstart(src, o0 + 1, c0), _vstart(src, o0 + 1, c0 + _W), _vstart(src, o0 + 1, c0 + 2 * _W), _vstart(src, o0 + 1, c0 + 3 * _W)
    c20, c21, c22, c23 = _vstart(src, o0 + 2, c0), _vstart(src, o0 + 2, c0 + _W), _vstart(src, o0 + 2, c0 + 2 * _W), _vstart(src, o0 + 2, c0 + 3 * _W)
    c30, c31, c32, c33 = _vstart(src, o0 + 3, c0), _vstart(src, o0 + 3, c0 + _W), _vstart(src, o0 + 3, c0 + 2 * _W), _vstart(src, o0 + 3, c0 + 3 * _W)
    for k in range(k0, k1):
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
def _tile4x2(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01 = _vstart(src, o0, c0), _vstart(src, o0, c0 + _W)
    c10, c11 = _vstart(src, o0 + 1, c0), _vstart(src, o0 + 1, c0 + _W)
    c20, c21 = _vstart(src, o0 + 2, c0), _vstart(src, o0 + 2, c0 + _W)
    c30, c31 = _vstart(src, o0 + 3, c0), _vstart(src, o0 + 3, c0 + _W)
    for k in range(k0, k1):
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
def _tile4x1(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00 = _vstart(src, o0, c0)
    c10 = _vstart(src, o0 + 1, c0)
    c20 = _vstart(src, o0 + 2, c0)
    c30 = _vstart(src, o0 + 3, c0)
    for k in range(k0, k1):
        b0 = _vload(b, k, j0)
        x = _vsplat(a[i0, k])
        c00 = _vmuladd(c00, x, b0)
        x = _vsplat(a[i0 + 1, k])
        c10 = _vmuladd(c10, x, b0)
        x = _vsplat(a[i0 + 2, k])
        c20 = _vmuladd(c20, x, b0)
        x = _vsplat(a[i0 + 3, k])
        c30 = _vmuladd(c30, x, b0)
    _vstore(out, o0, c0, c00)
    _vstore(out, o0 + 1, c0, c10)
    _vstore(out, o0 + 2, c0, c20)
    _vstore(out, o0 + 3, c0, c30)


@njit(cache=True)
def _tile1x4(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01, c02, c03 = _vstart(src, o0, c0), _vstart(src, o0, c0 + _W), _vstart(src, o0, c0 + 2 * _W), _vstart(src, o0, c0 + 3 * _W)
    for k in range(k0, k1):
        b0, b1, b2, b3 = _vload(b, k, j0), _vload(b, k, j0 + _W), _vload(b, k, j0 + 2 * _W), _vload(b, k, j0 + 3 * _W)
        x = _vsplat(a[i0, k])
        c00, c01, c02, c03 = _vmuladd(c00, x, b0), _vmuladd(c01, x, b1), _vmuladd(c02, x, b2), _vmuladd(c03, x, b3)
    _vstore(out, o0, c0, c00), _vstore(out, o0, c0 + _W, c01), _vstore(out, o0, c0 + 2 * _W, c02), _vstore(out, o0, c0 + 3 * _W, c03)


@njit(cache=True)
def _tile1x2(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01 = _vstart(src, o0, c0), _vstart(src, o0, c0 + _W)
    for k in range(k0, k1):
        b0, b1 = _vload(b, k, j0), _vload(b, k, j0 + _W)
        x = _vsplat(a[i0, k])
        c00, c01 = _vmuladd(c00, x, b0), _vmuladd(c01, x, b1)
    _vstore(out, o0, c0, c00), _vstore(out, o0, c0 + _W, c01)


@njit(cache=True)
def _tile1x1(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00 = _vstart(src, o0, c0)
    for k in range(k0, k1):
        b0 = _vload(b, k, j0)
        x = _vsplat(a[i0, k])
        c00 = _vmuladd(c00, x, b0)
    _vstore(out, o0, c0, c00)


@njit(cache=True)
def _ntile6x2(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01 = _nstart(src, o0, c0), _nstart(src, o0, c0 + _NW)
    c10, c11 = _nstart(src, o0 + 1, c0), _nstart(src, o0 + 1, c0 + _NW)
    c20, c21 = _nstart(src, o0 + 2, c0), _nstart(src, o0 + 2, c0 + _NW)
    c30, c31 = _nstart(src, o0 + 3, c0), _nstart(src, o0 + 3, c0 + _NW)
    c40, c41 = _nstart(src, o0 + 4, c0), _nstart(src, o0 + 4, c0 + _NW)
    c50, c51 = _nstart(src, o0 + 5, c0), _nstart(src, o0 + 5, c0 + _NW)
    for k in range(k0, k1):
        b0, b1 = _nload(b, k, j0), _nload(b, k, j0 + _NW)
        x = _nsplat(a[i0, k])
        c00, c01 = _nmuladd(c00, x, b0), _nmuladd(c01, x, b1)
        x = _nsplat(a[i0 + 1, k])
        c10, c11 = _nmuladd(c10, x, b0), _nmuladd(c11, x, b1)
        x = _nsplat(a[i0 + 2, k])
        c20, c21 = _nmuladd(c20, x, b0), _nmuladd(c21, x, b1)
        x = _nsplat(a[i0 + 3, k])
        c30, c31 = _nmuladd(c30, x, b0), _nmuladd(c31, x, b1)
        x = _nsplat(a[i0 + 4, k])
        c40, c41 = _nmuladd(c40, x, b0), _nmuladd(c41, x, b1)
        x = _nsplat(a[i0 + 5, k])
        c50, c51 = _nmuladd(c50, x, b0), _nmuladd(c51, x, b1)
    _nstore(out, o0, c0, c00), _nstore(out, o0, c0 + _NW, c01)
    _nstore(out, o0 + 1, c0, c10), _nstore(out, o0 + 1, c0 + _NW, c11)
    _nstore(out, o0 + 2, c0, c20), _nstore(out, o0 + 2, c0 + _NW, c21)
    _nstore(out, o0 + 3, c0, c30), _nstore(out, o0 + 3, c0 + _NW, c31)
    _nstore(out, o0 + 4, c0, c40), _nstore(out, o0 + 4, c0 + _NW, c41)
    _nstore(out, o0 + 5, c0, c50), _nstore(out, o0 + 5, c0 + _NW, c51)


@njit(cache=True)
def _ntile6x1(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c0_ = _nstart(src, o0, c0)
    c1 = _nstart(src, o0 + 1, c0)
    c2 = _nstart(src, o0 + 2, c0)
    c3 = _nstart(src, o0 + 3, c0)
    c4 = _nstart(src, o0 + 4, c0)
    c5 = _nstart(src, o0 + 5, c0)
    for k in range(k0, k1):
        b0 = _nload(b, k, j0)
        c0_ = _nmuladd(c0_, _nsplat(a[i0, k]), b0)
        c1 = _nmuladd(c1, _nsplat(a[i0 + 1, k]), b0)
        c2 = _nmuladd(c2, _nsplat(a[i0 + 2, k]), b0)
        c3 = _nmuladd(c3, _nsplat(a[i0 + 3, k]), b0)
        c4 = _nmuladd(c4, _nsplat(a[i0 + 4, k]), b0)
        c5 = _nmuladd(c5, _nsplat(a[i0 + 5, k]), b0)
    _nstore(out, o0, c0, c0_), _nstore(out, o0 + 1, c0, c1), _nstore(out, o0 + 2, c0, c2)
    _nstore(out, o0 + 3, c0, c3), _nstore(out, o0 + 4, c0, c4), _nstore(out, o0 + 5, c0, c5)


@njit(cache=True)
def _ntile4x2(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01 = _nstart(src, o0, c0), _nstart(src, o0, c0 + _NW)
    c10, c11 = _nstart(src, o0 + 1, c0), _nstart(src, o0 + 1, c0 + _NW)
    c20, c21 = _nstart(src, o0 + 2, c0), _nstart(src, o0 + 2, c0 + _NW)
    c30, c31 = _nstart(src, o0 + 3, c0), _nstart(src, o0 + 3, c0 + _NW)
    for k in range(k0, k1):
        b0, b1 = _nload(b, k, j0), _nload(b, k, j0 + _NW)
        x = _nsplat(a[i0, k])
        c00, c01 = _nmuladd(c00, x, b0), _nmuladd(c01, x, b1)
        x = _nsplat(a[i0 + 1, k])
        c10, c11 = _nmuladd(c10, x, b0), _nmuladd(c11, x, b1)
        x = _nsplat(a[i0 + 2, k])
        c20, c21 = _nmuladd(c20, x, b0), _nmuladd(c21, x, b1)
        x = _nsplat(a[i0 + 3, k])
        c30, c31 = _nmuladd(c30, x, b0), _nmuladd(c31, x, b1)
    _nstore(out, o0, c0, c00), _nstore(out, o0, c0 + _NW, c01)
    _nstore(out, o0 + 1, c0, c10), _nstore(out, o0 + 1, c0 + _NW, c11)
    _nstore(out, o0 + 2, c0, c20), _nstore(out, o0 + 2, c0 + _NW, c21)
    _nstore(out, o0 + 3, c0, c30), _nstore(out, o0 + 3, c0 + _NW, c31)


@njit(cache=True)
def _ntile1x2(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c00, c01 = _nstart(src, o0, c0), _nstart(src, o0, c0 + _NW)
    for k in range(k0, k1):
        x = _nsplat(a[i0, k])
        c00, c01 = _nmuladd(c00, x, _nload(b, k, j0)), _nmuladd(c01, x, _nload(b, k, j0 + _NW))
    _nstore(out, o0, c0, c00), _nstore(out, o0, c0 + _NW, c01)


@njit(cache=True)
def _ntile4x1(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c0_ = _nstart(src, o0, c0)
    c1 = _nstart(src, o0 + 1, c0)
    c2 = _nstart(src, o0 + 2, c0)
    c3 = _nstart(src, o0 + 3, c0)
    for k in range(k0, k1):
        b0 = _nload(b, k, j0)
        c0_ = _nmuladd(c0_, _nsplat(a[i0, k]), b0)
        c1 = _nmuladd(c1, _nsplat(a[i0 + 1, k]), b0)
        c2 = _nmuladd(c2, _nsplat(a[i0 + 2, k]), b0)
        c3 = _nmuladd(c3, _nsplat(a[i0 + 3, k]), b0)
    _nstore(out, o0, c0, c0_), _nstore(out, o0 + 1, c0, c1), _nstore(out, o0 + 2, c0, c2), _nstore(out, o0 + 3, c0, c3)


@njit(cache=True)
def _ntile1x1(a, i0, b, j0, out, o0, c0, k0, k1, src):
    c = _nstart(src, o0, c0)
    for k in range(k0, k1):
        c = _nmuladd(c, _nsplat(a[i0, k]), _nload(b, k, j0))
    _nstore(out, o0, c0, c)


@njit(cache=True)
def _nrest(nv, rows, a, i0, b, j0, out, c0, k0, k1, src):
    """The last ``rows`` (< 6) rows of a narrow tile column in place: a 4-row tile, then 1-row
    tiles (no padded copy: m = 64, the attention's, leaves 4 rows)."""
    if rows >= 4:
        if nv == 2:
            _ntile4x2(a, i0, b, j0, out, i0, c0, k0, k1, src)
        else:
            _ntile4x1(a, i0, b, j0, out, i0, c0, k0, k1, src)
        i0 += 4
        rows -= 4
    for r in range(i0, i0 + rows):
        if nv == 2:
            _ntile1x2(a, r, b, j0, out, r, c0, k0, k1, src)
        else:
            _ntile1x1(a, r, b, j0, out, r, c0, k0, k1, src)


@njit(cache=True)
def _wrest(nv, rows, a, i0, b, j0, out, c0, k0, k1, src):
    """The last ``rows`` (< 6) rows of a wide tile column in place, as :func:`_nrest`'s."""
    if rows >= 4:
        if nv == 4:
            _tile4x4(a, i0, b, j0, out, i0, c0, k0, k1, src)
        elif nv == 2:
            _tile4x2(a, i0, b, j0, out, i0, c0, k0, k1, src)
        else:
            _tile4x1(a, i0, b, j0, out, i0, c0, k0, k1, src)
        i0 += 4
        rows -= 4
    for r in range(i0, i0 + rows):
        if nv == 4:
            _tile1x4(a, r, b, j0, out, r, c0, k0, k1, src)
        elif nv == 2:
            _tile1x2(a, r, b, j0, out, r, c0, k0, k1, src)
        else:
            _tile1x1(a, r, b, j0, out, r, c0, k0, k1, src)


@njit(cache=True)
def _tile(wide, nv, a, i0, b, j0, out, o0, c0, k0, k1, src):
    """The tile of ``rows x nv`` vectors at a's rows i0.., b's columns j0.., into out at (o0, c0)."""
    if not wide:
        if nv == 2:
            _ntile6x2(a, i0, b, j0, out, o0, c0, k0, k1, src)
        else:
            _ntile6x1(a, i0, b, j0, out, o0, c0, k0, k1, src)
    elif nv == 4:
        _tile6x4(a, i0, b, j0, out, o0, c0, k0, k1, src)
    elif nv == 2:
        _tile6x2(a, i0, b, j0, out, o0, c0, k0, k1, src)
    else:
        _tile6x1(a, i0, b, j0, out, o0, c0, k0, k1, src)


@njit(cache=True)
def _tile_in_place(wide, nv, m, a, i0, b, j0, out, c0, k0, k1, src):
    """The row tile at i0 of a tile column, in place in out: a whole tile, or the column's last
    rows (fewer than 6) as 4- and 1-row tiles."""
    if i0 + (_ROWS if wide else _NROWS) <= m:
        _tile(wide, nv, a, i0, b, j0, out, i0, c0, k0, k1, src)
    elif wide:
        _wrest(nv, m - i0, a, i0, b, j0, out, c0, k0, k1, src)
    else:
        _nrest(nv, m - i0, a, i0, b, j0, out, c0, k0, k1, src)


@njit(cache=True)
def _row_tiles(wide, nv, m, height, r0, r1, a, b, j0, out, c0, k0, k1, first):
    """Row tiles r0 to r1 of a tile column in place, over k0 to k1 of ``a``'s columns and ``b``'s
    rows: from zero where the block is the ``first`` of k, else from the partial sums in out."""
    for r in range(r0, r1):
        if first:
            _tile_in_place(wide, nv, m, a, r * height, b, j0, out, c0, k0, k1, None)
        else:
            _tile_in_place(wide, nv, m, a, r * height, b, j0, out, c0, k0, k1, out)


#: Row tiles per task of the matmul at most: a task takes one column panel of b (a copy,
#: contiguous and zero-padded, where it is long or sticks out of b) and runs up to this many row
#: tiles over it (16 copied a 256-row panel for every 64 rows: 1024 x 256 x 1024 at 56 GFLOP/s
#: against 68 at 256 row tiles, one core of a Xeon with AVX-512).
_ROW_TILES = 256
#: Tasks the matmul's parallel loop is cut into at least, where the row tiles allow (so that two
#: threads share the work even when b has one column panel).
_TASKS = 4
#: Panels of b with fewer rows than this, or (where b has under ``_FAR`` columns) shared by fewer
#: than ``_PANEL_TILES`` row tiles, are read in place (their copy cost more than it saved: the
#: resnet's per-image matmuls have 16 to 64 rows).
_PANEL_K = 128
_PANEL_TILES = 32
#: Floats of the panel of b per block of k: 256 KiB, which L2 holds while every row tile of the
#: task runs over it (1024 rows of a 64-wide panel; the 64 x 4096 x 1000 head's 1 MiB panel read
#: in place went from 33 to 48 GFLOP/s; 32 KiB blocks, for L1, cost 1024 x 1024 x 256 a fifth).
_PANEL_BLOCK = 65536
#: Rows of b the block copy asks for ahead of the row it copies (8 measured slower on the
#: 64 x 4096 x 1000 head, 32 no faster).
_AHEAD = 16
#: Columns of b from which its rows are 2 KiB apart or more, past the stride the L1 prefetcher
#: follows: a long panel is then copied a block of k at a time (64 x 4096 x 512 at 57 GFLOP/s in
#: place, 121 copied; 256 x 1000 x 1000 at 134 copied whole, 160 by blocks); nearer rows under few
#: row tiles are read in place (64 x 4096 x 128 and 128 x 4096 x 64 were faster so).
_FAR = 512


@njit(cache=True)
def _copy_block(b, j0, k0, k1, width, buf):
    """buf[: k1 - k0, :width] = b[k0:k1, j0 : j0 + width]: a block of a long column panel, or
    the part of the last panel inside b, made contiguous for the row tiles. Its rows in b are a
    row of b apart, each on a page of its own where b is wide, so each row is asked for
    ``_AHEAD`` rows before it is copied."""
    vectors = width - width % _NW
    for k in range(k0, k1):
        ahead = min(k + _AHEAD, k1 - 1)
        for j in range(0, width, _NW * 2):  # a cache line: 16 floats
            _prefetch(b, ahead, j0 + j)
        _prefetch(b, ahead, j0 + width - 1)  # the row's last line, where b's rows are not 64-byte aligned
        for j in range(0, vectors, _NW):
            _nstore(buf, k - k0, j, _nload(b, k, j0 + j))
        for j in range(vectors, width):
            buf[k - k0, j] = b[k, j0 + j]


def _bmm_tiles(wide: bool) -> Callable[..., Any]:
    """The matmul over one tile family (``wide``: 6 x 64, 32 or 16; else 6 x 16 or 8)."""

    def bmm_tiled(a, b, out):
        nb, m, kk = a.shape
        n = b.shape[2]
        if wide:
            nv = 4 if n >= 4 * _W else (2 if n >= 2 * _W else 1)  # the widest tile the columns fill
            height, width = _ROWS, nv * _W
        else:
            nv = 2 if n >= 2 * _NW else 1
            height, width = _NROWS, nv * _NW
        kc = _PANEL_BLOCK // width
        nr = (m + height - 1) // height
        nc = (n + width - 1) // width
        # row tiles per task: up to _ROW_TILES, fewer where that leaves under _TASKS tasks
        per = max(1, min(_ROW_TILES, (nr * nb * nc + _TASKS - 1) // _TASKS))
        ng = (nr + per - 1) // per
        for t in prange(nb * nc * ng):
            bi = t // (nc * ng)
            j0 = ((t // ng) % nc) * width
            cols = min(width, n - j0)
            ab, ob = a[bi], out[bi]  # views made once per task, not per tile
            rows = range((t % ng) * per, min((t % ng + 1) * per, nr))
            # a long full-width panel of a wide b: copied a block of k at a time
            blocks = cols == width and kk >= _PANEL_K and n >= _FAR
            if blocks or (cols == width and (kk < _PANEL_K or len(rows) < _PANEL_TILES)):
                panel, pj = b[bi], j0  # short panels, few row tiles to share a copy, or blocks: in place
            else:
                # b's column panel, contiguous (rows of b 4 KiB apart all fell in one cache set)
                # and zero-padded past n (the padding's outputs are never stored), each row asked
                # for ahead as a block's (256 x 1000 x 40 under repro-v2: 68 -> 98 GFLOP/s)
                panel, pj = np.zeros((kk, width), np.float32), 0
                _copy_block(b[bi], j0, 0, kk, cols, panel)
            # row tiles run in place (the column's last rows as 4- and 1-row tiles) where the
            # panel is whole; a panel past n runs into a tile buffer, from a's rows in place but
            # for the rows past m, zero-padded in a copy
            full = rows.start if cols < width else rows.stop
            # in place, k in blocks: a block of the panel stays in L2 while every row tile runs
            # over it, each tile's partial sums stored in out between blocks
            block = np.empty((kc if blocks else 0, width), np.float32)
            for k0 in range(0, max(kk, 1), kc):
                k1 = min(kk, k0 + kc)
                if blocks:
                    # the block contiguous (rows of a wide b on pages of their own: the 64 x 4096 x
                    # 1000 head 80 -> 115 GFLOP/s), the tiles over it and a's same columns
                    _copy_block(panel, pj, k0, k1, width, block)
                    _row_tiles(wide, nv, m, height, rows.start, full, ab[:, k0:k1], block, 0, ob, j0, 0, k1 - k0, k0 == 0)
                else:
                    _row_tiles(wide, nv, m, height, rows.start, full, ab, panel, pj, ob, j0, k0, k1, k0 == 0)
            tile = np.empty((height if full < rows.stop else 0, width), np.float32)  # only a panel past n
            for r in range(full, rows.stop):
                i0 = r * height
                rows_in = min(height, m - i0)
                if rows_in == height:  # a's rows read in place
                    _tile(wide, nv, ab, i0, panel, pj, tile, 0, 0, 0, kk, None)
                else:  # the rows past m zero-padded
                    ap = np.zeros((height, kk), np.float32)
                    ap[:rows_in] = ab[i0 : i0 + rows_in]
                    _tile(wide, nv, ap, 0, panel, pj, tile, 0, 0, 0, kk, None)
                ob[i0 : i0 + rows_in, j0 : j0 + cols] = tile[:rows_in, :cols]

    # a name of its own per family, for numba's disk cache and the profiles
    bmm_tiled.__name__ = bmm_tiled.__qualname__ = "_bmm_wide" if wide else "_bmm_narrow"
    return bmm_tiled


def _bmm_work(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> float:
    return out.size * a.shape[2] / 128  # multiply-adds: about 8 of 16 lanes a ns


_bmm_wide = _parallel(_bmm_work)(_bmm_tiles(True))
_bmm_narrow = _parallel(_bmm_work)(_bmm_tiles(False))


#: A transposed ``a`` (rows contiguous) whose k steps lie ``_COPY_STRIDE`` bytes apart or more is
#: copied contiguous before the tiles run, where the output's columns share the copy: the stride
#: times the columns at least ``_COPY_WORK`` (1 KiB apart from 512 columns, 2 KiB from 256, a page
#: from 128). Measured side by side, repro-v2, one thread, k = 1,024: copied, 1.08x to 1.11x at 1 KiB
#: and 512 to 1,024 columns, 1.34x to 1.65x at 2 KiB and 256 to 1,024, 1.46x to 1.81x at a page and
#: 128 to 256; in place, 0.98x at 1 KiB and 256, 0.76x at a page and 16 (the copy costs more than
#: it saves). gpt-10M's ``dW = g^T x``: 1024 x 1024 x 256 from a (1024, 1024) gradient, 768 x 1024 x
#: 256 from the attention's (1024, 768). The copy moves values: the sums are the same.
_COPY_STRIDE = 1024
_COPY_WORK = 1 << 19
#: The copy's block: 8 k steps of 128 rows. At a page apart, a block's k steps share the cache
#: sets, and 8 of them stay in L1's 12 ways (32 x 32 blocks: 1.25 ms for a 1024 x 1024 copy, 0.78 now).
_T_ROWS = 128
_T_K = 8


@_parallel(_size(0))
def _contiguous(a, out):
    """out = a for an ``a`` contiguous along its rows (a transposed view), in _T_ROWS x _T_K blocks."""
    nb, m, kk = a.shape
    ni = (m + _T_ROWS - 1) // _T_ROWS
    for t in prange(nb * ni):
        bi, i0 = t // ni, (t % ni) * _T_ROWS
        i1 = min(i0 + _T_ROWS, m)
        for k0 in range(0, kk, _T_K):
            for i in range(i0, i1):
                for k in range(k0, min(k0 + _T_K, kk)):
                    out[bi, i, k] = a[bi, i, k]


#: A transposed matrix of this many elements or more is made row-contiguous by :func:`_contiguous`
#: (in blocks, on the threads), smaller ones by numpy. Measured at one thread, numpy / kernel: a
#: 8192 x 256 weight's transpose (a tied head of 8,192 tokens) 15.2 / 1.9 ms, 768 x 256 1.50x, 256 x 128
#: 1.47x, 256 x 64 1.04x, 64 x 64 0.40x; batches of attention's small heads 0.42x to 0.59x, so they
#: stay numpy's.
_TRANSPOSE_MIN = 1 << 15


def contiguous_rows(b: np.ndarray) -> np.ndarray:
    """``b`` (float32) with contiguous rows, as :func:`bmm` loads its ``b`` and a linear's output is
    laid out: ``b`` itself where its rows are, else a copy. numpy calls a transposed single row
    (K, 1) contiguous whatever its strides, so the last stride is checked too. A copy moves values
    only."""
    if b.ndim == 2 and b.size >= _TRANSPOSE_MIN and b.strides[0] == b.itemsize:
        out = np.empty(b.shape, np.float32)
        _contiguous(b[None], out[None])
        return out
    b = np.ascontiguousarray(b)
    return b if b.strides[-1] == b.itemsize else b.copy()


def bmm(a, b, out):
    """out[t] = a[t] @ b[t] for a (T, M, K), b (T, K, N): out[t, i, j] = sum_k a[t,i,k] * b[t,k,j],
    accumulated in float32 over k = 0, 1, ... in order (a separate multiply and add each).

    ``a`` may have any strides (a transposed view is read in place, or copied where its k steps
    are far apart and the output wide: ``_COPY_WORK``); ``b`` and ``out`` must be contiguous along their last axis (their rows are
    loaded and stored as vectors). The tile family (:data:`WIDE_TILES`) changes no bit."""
    if (b.size and b.strides[2] != 4) or (out.size and out.strides[2] != 4):
        raise ValueError("bmm: b and out must be contiguous along their last axis")
    if a.size and a.strides[1] == 4 and a.strides[2] >= _COPY_STRIDE and a.strides[2] * b.shape[2] >= _COPY_WORK:
        a, rows = np.empty(a.shape, np.float32), a
        _contiguous(rows, a)
    (_bmm_wide if WIDE_TILES else _bmm_narrow)(a, b, out)


_COLS = 256  # columns per pass of the column sums at most: four rows of them stay in L1
_COLS_MIN = 64


@njit(cache=True)
def _col_width(n):
    """Columns per pass of a sum down the columns of an (m, n) array: up to :data:`_COLS`, fewer
    (down to 64) so that the passes are :data:`_TASKS` and two threads share them (a layer norm
    of 256 features was one pass: serial at any thread count). Each column is summed alone: the
    width changes no bit."""
    w = (n + _TASKS - 1) // _TASKS
    return min(_COLS, max(_COLS_MIN, (w + 15) // 16 * 16))


#: The column sums' row steps are inlined in numba's IR: called, they left the serial builds of
#: ``colsum`` and ``embedding_bwd`` 2.5x to 6x slower than the parallel ones on one thread (a call
#: per row or four; LLVM inlined them into the parallel loop's body only).
@njit(cache=True, inline="always")
def _axpy1(o0, a0, bk, n):
    for j in range(n):
        o0[j] += a0 * bk[j]


@njit(cache=True, inline="always")
def _add4(acc, g0, g1, g2, g3, n):
    for j in range(n):
        acc[j] = (((acc[j] + g0[j]) + g1[j]) + g2[j]) + g3[j]


@_parallel(_passes(0))
def colsum(g, out):
    """out[j] = sum_i g[i, j] in float32, rows in ascending order."""
    m, n = g.shape
    width = _col_width(n)
    for c in prange((n + width - 1) // width):
        j0 = c * width
        j1 = min(j0 + width, n)
        acc = np.zeros(j1 - j0, np.float32)
        m4 = m - m % 4
        for i in range(0, m4, 4):  # four rows a pass, still added one after the other
            _add4(acc, g[i, j0:j1], g[i + 1, j0:j1], g[i + 2, j0:j1], g[i + 3, j0:j1], j1 - j0)
        for i in range(m4, m):
            _axpy1(acc, np.float32(1.0), g[i, j0:j1], j1 - j0)
        out[j0:j1] = acc


@_parallel(_size(0))
def add_rows(y, b):
    """y[i, j] = y[i, j] + b[j] for a C-contiguous ``y`` (M, N): a linear's bias, one float32 add
    per output after its whole dot product, a task per row."""
    for i in prange(y.shape[0]):
        for j in range(y.shape[1]):
            y[i, j] = y[i, j] + b[j]


# ------------------------------------------------------------------ attention heads (copies)


@_parallel(_size(0))
def copy_heads(rows, heads, split):
    """Between rows (B, T, P * E) and heads (P, B * H, T, D): ``heads[p, b * H + h, t]`` is
    ``rows[b, t, p * E + h * D : ... + D]``, the H heads of P tensors side by side in a row (q, k and
    v: P = 3). ``split``: heads from rows, else rows from heads. A task per row, each row read or
    written once. A copy: no arithmetic."""
    nb, nt, _ = rows.shape
    parts, bh, _, d = heads.shape
    nh = bh // nb
    for r in prange(nb * nt):
        bi, t = r // nt, r % nt
        row = rows[bi, t]
        for c in range(parts * nh):
            head = heads[c // nh, bi * nh + c % nh, t]
            if split:
                for k in range(d):
                    head[k] = row[c * d + k]
            else:
                for k in range(d):
                    row[c * d + k] = head[k]


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


@_parallel(_passes(0))
def layer_norm_params_bwd(dy, x, mean, rstd, dw, db):
    """dw[j] = sum_i dy[i,j] * xhat[i,j], db[j] = sum_i dy[i,j]: rows in order, float64."""
    m, n = x.shape
    width = _col_width(n)
    for c in prange((n + width - 1) // width):
        j0 = c * width
        j1 = min(j0 + width, n)
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


# ------------------------------------------------------------------ direct convolution (stride 1, output the input's size)
#
# The convolution without im2col's copy: the same outputs, each the same sequence. A vector holds
# 16 consecutive pixels of one image's map (a "block"; a map's last block may be partial), read
# from ``x`` in place by a masked load: a lane whose tap falls outside the image gets +0.0, as
# im2col's column has there, and is multiplied and added like any other (0 * inf is nan: no term
# is skipped). A forward tile is 4 output channels x 4 blocks (16 accumulators, the wide matmul
# tile's), summing over k = (c, kh, kw) ascending from +0.0, a float32 multiply then a float32
# add per k, then the bias added once: y = W @ im2col(x) + b, output by output. The input
# gradient's tile (4 input channels x 4 blocks) sums each tap's terms over output channels
# ascending from +0.0 (the matmul's ``dcols`` value), then adds it to the pixel's running sum
# (from +0.0, taps (kh, kw) ascending) only in the lanes where col2im adds it. The weight
# gradient's tile (taps x output channels, the channels in the lanes) sums over pixels (image,
# row, column) ascending, reading a zero-padded copy of x: ``cols @ G^T``'s order.


_CL = _W  # lanes of the convolution's vectors (the wide tiles'): pixels per block, channels per weight-gradient vector
_cload, _cstore, _cbcast, _czero, _cmuladd = _WIDE.flat_load, _WIDE.flat_store, _WIDE.flat_splat, _WIDE.zero, _WIDE.muladd
_cadd, _cmload, _cmstore, _cselect = _WIDE.add, _WIDE.masked_load, _WIDE.masked_store, _WIDE.select


@functools.lru_cache(maxsize=64)
def _conv_geometry(hh: int, ww: int, ks: int, pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For maps of ``hh x ww`` pixels in blocks of :data:`_CL`: the forward's lane masks
    (block, tap) (lane set where the tap reads inside the image), the input gradient's (lane set
    where col2im adds that tap to the pixel), each tap's shift in the flat map
    ((kh - pad) * ww + kw - pad) and each block's mask of pixels inside the map."""
    nq = -(-hh * ww // _CL)
    p = np.arange(nq * _CL).reshape(nq, _CL)
    h, w = p // ww, p % ww
    inside = p < hh * ww
    weights = np.left_shift(np.int64(1), np.arange(_CL, dtype=np.int64))

    def bits(ok: np.ndarray) -> np.ndarray:
        return (ok.astype(np.int64) * weights).sum(axis=1)

    fwd = np.empty((nq, ks * ks), np.int64)
    back = np.empty((nq, ks * ks), np.int64)
    shifts = np.empty(ks * ks, np.int64)
    for kh in range(ks):
        for kw in range(ks):
            t, dh, dw = kh * ks + kw, kh - pad, kw - pad
            fwd[:, t] = bits(inside & (h + dh >= 0) & (h + dh < hh) & (w + dw >= 0) & (w + dw < ww))
            back[:, t] = bits(inside & (h - dh >= 0) & (h - dh < hh) & (w - dw >= 0) & (w - dw < ww))
            shifts[t] = dh * ww + dw
    return fwd, back, shifts, bits(inside)


@njit(cache=True)
def _base(q, nq, nc, hw):
    """Where block ``q`` (image q // nq, block q % nq of its map) starts, in a flat (image,
    channel, pixel) array of ``nc`` channels of ``hw`` pixels (its channel 0)."""
    return (q // nq) * nc * hw + (q % nq) * _CL


@njit(cache=True)
def _cput(out, i, acc, ok, m):
    if ok:
        _cmstore(out, i, acc, m)


@njit(cache=True)
def _conv_fwd_tile(xf, w, bias, yf, o0, nrows, g0, nblk, nq, masks, smask, shifts, cin, cout, ks2, hw):
    """Output channels o0.. (``nrows`` <= 4) x blocks g0.. (``nblk`` <= 4; block g is image
    g // nq, block g % nq of its map); rows and blocks past those are computed again, not stored."""
    r1, r2, r3 = o0 + min(1, nrows - 1), o0 + min(2, nrows - 1), o0 + min(3, nrows - 1)
    q0, q1, q2, q3 = g0, g0 + min(1, nblk - 1), g0 + min(2, nblk - 1), g0 + min(3, nblk - 1)
    x0, x1, x2, x3 = _base(q0, nq, cin, hw), _base(q1, nq, cin, hw), _base(q2, nq, cin, hw), _base(q3, nq, cin, hw)
    m0, m1, m2, m3 = masks[q0 % nq], masks[q1 % nq], masks[q2 % nq], masks[q3 % nq]
    kk = cin * ks2
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = _czero()
    for c in range(cin):
        for t in range(ks2):
            k = c * ks2 + t
            s = c * hw + shifts[t]
            b0, b1, b2, b3 = _cmload(xf, x0 + s, m0[t]), _cmload(xf, x1 + s, m1[t]), _cmload(xf, x2 + s, m2[t]), _cmload(xf, x3 + s, m3[t])
            x = _cbcast(w, o0 * kk + k)
            c00, c01, c02, c03 = _cmuladd(c00, x, b0), _cmuladd(c01, x, b1), _cmuladd(c02, x, b2), _cmuladd(c03, x, b3)
            x = _cbcast(w, r1 * kk + k)
            c10, c11, c12, c13 = _cmuladd(c10, x, b0), _cmuladd(c11, x, b1), _cmuladd(c12, x, b2), _cmuladd(c13, x, b3)
            x = _cbcast(w, r2 * kk + k)
            c20, c21, c22, c23 = _cmuladd(c20, x, b0), _cmuladd(c21, x, b1), _cmuladd(c22, x, b2), _cmuladd(c23, x, b3)
            x = _cbcast(w, r3 * kk + k)
            c30, c31, c32, c33 = _cmuladd(c30, x, b0), _cmuladd(c31, x, b1), _cmuladd(c32, x, b2), _cmuladd(c33, x, b3)
    y0, y1, y2, y3 = _base(q0, nq, cout, hw), _base(q1, nq, cout, hw), _base(q2, nq, cout, hw), _base(q3, nq, cout, hw)
    s0, s1, s2, s3 = smask[q0 % nq], smask[q1 % nq], smask[q2 % nq], smask[q3 % nq]
    for r in range(nrows):  # the bias: one float32 add after the whole sum
        o = o0 + r
        bo = _cbcast(bias, o)
        if r == 0:
            a0, a1, a2, a3 = c00, c01, c02, c03
        elif r == 1:
            a0, a1, a2, a3 = c10, c11, c12, c13
        elif r == 2:
            a0, a1, a2, a3 = c20, c21, c22, c23
        else:
            a0, a1, a2, a3 = c30, c31, c32, c33
        _cput(yf, y0 + o * hw, _cadd(a0, bo), True, s0)
        _cput(yf, y1 + o * hw, _cadd(a1, bo), nblk > 1, s1)
        _cput(yf, y2 + o * hw, _cadd(a2, bo), nblk > 2, s2)
        _cput(yf, y3 + o * hw, _cadd(a3, bo), nblk > 3, s3)


def _conv_fwd_work(xf, w, bias, yf, nq, masks, smask, shifts, cin, cout, ks2, hw) -> float:
    return yf.size * cin * ks2 / 128


@_parallel(_conv_fwd_work)
def _conv_fwd(xf, w, bias, yf, nq, masks, smask, shifts, cin, cout, ks2, hw):
    nblocks = yf.size // (cout * hw) * nq
    for t in prange((nblocks + 3) // 4):
        g0 = 4 * t
        for o0 in range(0, cout, 4):
            _conv_fwd_tile(xf, w, bias, yf, o0, min(4, cout - o0), g0, min(4, nblocks - g0), nq, masks, smask, shifts, cin, cout, ks2, hw)


def conv2d_forward(x, w, bias, pad, y):
    """y[b, o] = sum over k = (c, kh, kw) ascending of w[o, c, kh, kw] * x[b, c, h + kh - pad,
    w + kw - pad] (+0.0 outside the image), from +0.0, then + bias[o]: ``W @ im2col(x) + b``
    output by output (stride 1, y the size of x; all C-contiguous float32)."""
    nb, cin, hh, ww = x.shape
    cout, _, ks, _ = w.shape
    masks, _, shifts, smask = _conv_geometry(hh, ww, ks, pad)
    _conv_fwd(x.reshape(-1), w.reshape(-1), bias, y.reshape(-1), masks.shape[0], masks, smask, shifts, cin, cout, ks * ks, hh * ww)


@njit(cache=True)
def _dx_add(dxf, i, acc, ok, m, s):
    """dx[i..] + acc in the lanes of ``m`` (the tap's), dx unchanged in the other lanes of ``s``."""
    if ok:
        d = _cmload(dxf, i, s)
        _cmstore(dxf, i, _cselect(m, _cadd(d, acc), d), s)


@njit(cache=True)
def _conv_dx_tile(gf, wt, dxf, c0, nrows, g0, nblk, nq, masks, smask, shifts, cin, cout, ks2, hw):
    """dx for input channels c0.. (``nrows`` <= 4) x blocks g0.. (``nblk`` <= 4), in place in dx."""
    r1, r2, r3 = c0 + min(1, nrows - 1), c0 + min(2, nrows - 1), c0 + min(3, nrows - 1)
    q0, q1, q2, q3 = g0, g0 + min(1, nblk - 1), g0 + min(2, nblk - 1), g0 + min(3, nblk - 1)
    x0, x1, x2, x3 = _base(q0, nq, cout, hw), _base(q1, nq, cout, hw), _base(q2, nq, cout, hw), _base(q3, nq, cout, hw)
    m0, m1, m2, m3 = masks[q0 % nq], masks[q1 % nq], masks[q2 % nq], masks[q3 % nq]
    y0, y1, y2, y3 = _base(q0, nq, cin, hw), _base(q1, nq, cin, hw), _base(q2, nq, cin, hw), _base(q3, nq, cin, hw)
    s0, s1, s2, s3 = smask[q0 % nq], smask[q1 % nq], smask[q2 % nq], smask[q3 % nq]
    zero = _czero()
    for r in range(nrows):  # each pixel's sum starts at +0.0
        c = c0 + r
        _cput(dxf, y0 + c * hw, zero, True, s0)
        _cput(dxf, y1 + c * hw, zero, nblk > 1, s1)
        _cput(dxf, y2 + c * hw, zero, nblk > 2, s2)
        _cput(dxf, y3 + c * hw, zero, nblk > 3, s3)
    for t in range(ks2):
        c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = _czero()
        n0, n1, n2, n3 = m0[t], m1[t], m2[t], m3[t]
        for o in range(cout):
            s = o * hw - shifts[t]
            b0, b1, b2, b3 = _cmload(gf, x0 + s, n0), _cmload(gf, x1 + s, n1), _cmload(gf, x2 + s, n2), _cmload(gf, x3 + s, n3)
            x = _cbcast(wt, (c0 * ks2 + t) * cout + o)
            c00, c01, c02, c03 = _cmuladd(c00, x, b0), _cmuladd(c01, x, b1), _cmuladd(c02, x, b2), _cmuladd(c03, x, b3)
            x = _cbcast(wt, (r1 * ks2 + t) * cout + o)
            c10, c11, c12, c13 = _cmuladd(c10, x, b0), _cmuladd(c11, x, b1), _cmuladd(c12, x, b2), _cmuladd(c13, x, b3)
            x = _cbcast(wt, (r2 * ks2 + t) * cout + o)
            c20, c21, c22, c23 = _cmuladd(c20, x, b0), _cmuladd(c21, x, b1), _cmuladd(c22, x, b2), _cmuladd(c23, x, b3)
            x = _cbcast(wt, (r3 * ks2 + t) * cout + o)
            c30, c31, c32, c33 = _cmuladd(c30, x, b0), _cmuladd(c31, x, b1), _cmuladd(c32, x, b2), _cmuladd(c33, x, b3)
        for r in range(nrows):
            if r == 0:
                a0, a1, a2, a3 = c00, c01, c02, c03
            elif r == 1:
                a0, a1, a2, a3 = c10, c11, c12, c13
            elif r == 2:
                a0, a1, a2, a3 = c20, c21, c22, c23
            else:
                a0, a1, a2, a3 = c30, c31, c32, c33
            c = c0 + r
            _dx_add(dxf, y0 + c * hw, a0, True, n0, s0)
            _dx_add(dxf, y1 + c * hw, a1, nblk > 1, n1, s1)
            _dx_add(dxf, y2 + c * hw, a2, nblk > 2, n2, s2)
            _dx_add(dxf, y3 + c * hw, a3, nblk > 3, n3, s3)


def _conv_dx_work(gf, wt, dxf, nq, masks, smask, shifts, cin, cout, ks2, hw) -> float:
    return dxf.size * ks2 * cout / 128


@_parallel(_conv_dx_work)
def _conv_dx(gf, wt, dxf, nq, masks, smask, shifts, cin, cout, ks2, hw):
    nblocks = dxf.size // (cin * hw) * nq
    for t in prange((nblocks + 3) // 4):
        g0 = 4 * t
        for c0 in range(0, cin, 4):
            _conv_dx_tile(gf, wt, dxf, c0, min(4, cin - c0), g0, min(4, nblocks - g0), nq, masks, smask, shifts, cin, cout, ks2, hw)


def conv2d_input_grad(g, w, pad, dx):
    """The input gradient of :func:`conv2d_forward` for output gradient ``g`` (image, channel, row,
    column): dx[b, c, y, x] from +0.0, adding over taps (kh, kw) ascending, where (y - kh + pad,
    x - kw + pad) is inside the image, sum_o w[o, c, kh, kw] * g[b, o, y - kh + pad, x - kw + pad]
    (o ascending from +0.0): col2im(W^T G), output by output."""
    nb, cin, hh, ww = dx.shape
    cout, _, ks, _ = w.shape
    _, back, shifts, smask = _conv_geometry(hh, ww, ks, pad)
    wt = np.ascontiguousarray(w.reshape(cout, cin, ks * ks).transpose(1, 2, 0))
    _conv_dx(g.reshape(-1), wt.reshape(-1), dx.reshape(-1), back.shape[0], back, smask, shifts, cin, cout, ks * ks, hh * ww)


@njit(cache=True)
def _conv_dw8x1(xp, offs, k0, gt, o0, dwt, nc, nb, hh, ww, img, wp):
    """dwt[k0 + r, o0 : o0 + 16] for r < 8: the sum over pixels j = (image, row, column) ascending
    of x's tap k at j (a zero-padded copy, ``offs[k]`` its offset in an image) * gt[j, o]."""
    f0, f1, f2, f3, f4, f5, f6, f7 = offs[k0], offs[k0 + 1], offs[k0 + 2], offs[k0 + 3], offs[k0 + 4], offs[k0 + 5], offs[k0 + 6], offs[k0 + 7]
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = _czero()
    for b in range(nb):
        for h in range(hh):
            base = b * img + h * wp
            j = (b * hh + h) * ww
            for w in range(ww):
                gv = _cload(gt, (j + w) * nc + o0)
                i = base + w
                a0, a1 = _cmuladd(a0, _cbcast(xp, i + f0), gv), _cmuladd(a1, _cbcast(xp, i + f1), gv)
                a2, a3 = _cmuladd(a2, _cbcast(xp, i + f2), gv), _cmuladd(a3, _cbcast(xp, i + f3), gv)
                a4, a5 = _cmuladd(a4, _cbcast(xp, i + f4), gv), _cmuladd(a5, _cbcast(xp, i + f5), gv)
                a6, a7 = _cmuladd(a6, _cbcast(xp, i + f6), gv), _cmuladd(a7, _cbcast(xp, i + f7), gv)
    d = k0 * nc + o0
    _cstore(dwt, d, a0), _cstore(dwt, d + nc, a1), _cstore(dwt, d + 2 * nc, a2), _cstore(dwt, d + 3 * nc, a3)
    _cstore(dwt, d + 4 * nc, a4), _cstore(dwt, d + 5 * nc, a5), _cstore(dwt, d + 6 * nc, a6), _cstore(dwt, d + 7 * nc, a7)


@njit(cache=True)
def _conv_dw8x2(xp, offs, k0, gt, o0, dwt, nc, nb, hh, ww, img, wp):
    """As :func:`_conv_dw8x1` for 32 channels o0.."""
    f0, f1, f2, f3, f4, f5, f6, f7 = offs[k0], offs[k0 + 1], offs[k0 + 2], offs[k0 + 3], offs[k0 + 4], offs[k0 + 5], offs[k0 + 6], offs[k0 + 7]
    a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = a60 = a61 = a70 = a71 = _czero()
    for b in range(nb):
        for h in range(hh):
            base = b * img + h * wp
            j = (b * hh + h) * ww
            for w in range(ww):
                g0, g1 = _cload(gt, (j + w) * nc + o0), _cload(gt, (j + w) * nc + o0 + _CL)
                i = base + w
                x = _cbcast(xp, i + f0)
                a00, a01 = _cmuladd(a00, x, g0), _cmuladd(a01, x, g1)
                x = _cbcast(xp, i + f1)
                a10, a11 = _cmuladd(a10, x, g0), _cmuladd(a11, x, g1)
                x = _cbcast(xp, i + f2)
                a20, a21 = _cmuladd(a20, x, g0), _cmuladd(a21, x, g1)
                x = _cbcast(xp, i + f3)
                a30, a31 = _cmuladd(a30, x, g0), _cmuladd(a31, x, g1)
                x = _cbcast(xp, i + f4)
                a40, a41 = _cmuladd(a40, x, g0), _cmuladd(a41, x, g1)
                x = _cbcast(xp, i + f5)
                a50, a51 = _cmuladd(a50, x, g0), _cmuladd(a51, x, g1)
                x = _cbcast(xp, i + f6)
                a60, a61 = _cmuladd(a60, x, g0), _cmuladd(a61, x, g1)
                x = _cbcast(xp, i + f7)
                a70, a71 = _cmuladd(a70, x, g0), _cmuladd(a71, x, g1)
    d = k0 * nc + o0
    _cstore(dwt, d, a00), _cstore(dwt, d + _CL, a01), _cstore(dwt, d + nc, a10), _cstore(dwt, d + nc + _CL, a11)
    _cstore(dwt, d + 2 * nc, a20), _cstore(dwt, d + 2 * nc + _CL, a21), _cstore(dwt, d + 3 * nc, a30), _cstore(dwt, d + 3 * nc + _CL, a31)
    _cstore(dwt, d + 4 * nc, a40), _cstore(dwt, d + 4 * nc + _CL, a41), _cstore(dwt, d + 5 * nc, a50), _cstore(dwt, d + 5 * nc + _CL, a51)
    _cstore(dwt, d + 6 * nc, a60), _cstore(dwt, d + 6 * nc + _CL, a61), _cstore(dwt, d + 7 * nc, a70), _cstore(dwt, d + 7 * nc + _CL, a71)


@njit(cache=True)
def _conv_dw4x4(xp, offs, k0, gt, o0, dwt, nc, nb, hh, ww, img, wp):
    """As :func:`_conv_dw8x1` for 4 taps x 64 channels o0.."""
    f0, f1, f2, f3 = offs[k0], offs[k0 + 1], offs[k0 + 2], offs[k0 + 3]
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = _czero()
    for b in range(nb):
        for h in range(hh):
            base = b * img + h * wp
            j = (b * hh + h) * ww
            for w in range(ww):
                b0, b1, b2, b3 = (
                    _cload(gt, (j + w) * nc + o0),
                    _cload(gt, (j + w) * nc + o0 + _CL),
                    _cload(gt, (j + w) * nc + o0 + 2 * _CL),
                    _cload(gt, (j + w) * nc + o0 + 3 * _CL),
                )
                i = base + w
                x = _cbcast(xp, i + f0)
                c00, c01, c02, c03 = _cmuladd(c00, x, b0), _cmuladd(c01, x, b1), _cmuladd(c02, x, b2), _cmuladd(c03, x, b3)
                x = _cbcast(xp, i + f1)
                c10, c11, c12, c13 = _cmuladd(c10, x, b0), _cmuladd(c11, x, b1), _cmuladd(c12, x, b2), _cmuladd(c13, x, b3)
                x = _cbcast(xp, i + f2)
                c20, c21, c22, c23 = _cmuladd(c20, x, b0), _cmuladd(c21, x, b1), _cmuladd(c22, x, b2), _cmuladd(c23, x, b3)
                x = _cbcast(xp, i + f3)
                c30, c31, c32, c33 = _cmuladd(c30, x, b0), _cmuladd(c31, x, b1), _cmuladd(c32, x, b2), _cmuladd(c33, x, b3)
    d = k0 * nc + o0
    _cstore(dwt, d, c00), _cstore(dwt, d + _CL, c01), _cstore(dwt, d + 2 * _CL, c02), _cstore(dwt, d + 3 * _CL, c03)
    _cstore(dwt, d + nc, c10), _cstore(dwt, d + nc + _CL, c11), _cstore(dwt, d + nc + 2 * _CL, c12), _cstore(dwt, d + nc + 3 * _CL, c13)
    _cstore(dwt, d + 2 * nc, c20), _cstore(dwt, d + 2 * nc + _CL, c21), _cstore(dwt, d + 2 * nc + 2 * _CL, c22), _cstore(dwt, d + 2 * nc + 3 * _CL, c23)
    _cstore(dwt, d + 3 * nc, c30), _cstore(dwt, d + 3 * nc + _CL, c31), _cstore(dwt, d + 3 * nc + 2 * _CL, c32), _cstore(dwt, d + 3 * nc + 3 * _CL, c33)


def _conv_dw_work(xp, offs, gt, dwt, nc, *args: Any) -> float:
    return dwt.size * (gt.size // nc) / 128


@_parallel(_conv_dw_work)
def _conv_dw(xp, offs, gt, dwt, nc, nb, hh, ww, img, wp):
    """dwt (taps rounded up to the tile's rows, channels rounded up to 16): every tile's sums;
    ``offs`` has an entry per row of dwt (rows past the taps repeat a valid offset)."""
    kk = dwt.size // nc
    vecs = 4 if nc % (4 * _CL) == 0 else (2 if nc % (2 * _CL) == 0 else 1)
    rows = 4 if vecs == 4 else 8
    ncol = nc // (vecs * _CL)
    for t in prange(kk // rows * ncol):
        k0, o0 = (t // ncol) * rows, (t % ncol) * vecs * _CL
        if vecs == 4:
            _conv_dw4x4(xp, offs, k0, gt, o0, dwt, nc, nb, hh, ww, img, wp)
        elif vecs == 2:
            _conv_dw8x2(xp, offs, k0, gt, o0, dwt, nc, nb, hh, ww, img, wp)
        else:
            _conv_dw8x1(xp, offs, k0, gt, o0, dwt, nc, nb, hh, ww, img, wp)


@_parallel(_size(0))
def _conv_dw_prep(x, g, pad, xp, gt):
    """xp[b, c, r, s] = x[b, c, r - pad, s - pad] (0 outside x); gt[b, p, o] = g[b, o, p] (0 for
    o past g's channels): the weight gradient's operands, image by image."""
    nb, cin, hh, ww = x.shape
    cout, hw = g.shape[1], g.shape[2]
    hp, wp, nc = xp.shape[2], xp.shape[3], gt.shape[2]
    zero = np.float32(0.0)
    for b in prange(nb):
        for c in range(cin):
            for r in range(hp):
                y = r - pad
                if 0 <= y < hh:
                    for s in range(wp):
                        xx = s - pad
                        xp[b, c, r, s] = x[b, c, y, xx] if 0 <= xx < ww else zero
                else:
                    for s in range(wp):
                        xp[b, c, r, s] = zero
        for p in range(hw):
            for o in range(cout):
                gt[b, p, o] = g[b, o, p]
            for o in range(cout, nc):
                gt[b, p, o] = zero


@njit(cache=True)
def _conv_db(gt, nc, cout, db):
    """db[o] = the float32 sum of gt[j, o] over j ascending, from +0.0 (channel_sum's order:
    images, then pixels), 16 channels a vector."""
    nj = gt.size // nc
    for o0 in range(0, nc, _CL):
        acc = _czero()
        for j in range(nj):
            acc = _cadd(acc, _cload(gt, j * nc + o0))
        tmp = np.empty(_CL, np.float32)
        _cstore(tmp, 0, acc)
        for o in range(o0, min(o0 + _CL, cout)):
            db[o] = tmp[o - o0]


@functools.lru_cache(maxsize=64)
def _conv_taps(cin: int, ks: int, hp: int, wp: int, rows: int) -> np.ndarray:
    """Each tap k = (c, kh, kw)'s offset in a zero-padded image of ``hp x wp``, then repeats of
    tap 0's up to a multiple of ``rows``."""
    k = np.arange(cin * ks * ks)
    offs = np.zeros(-(-k.size // rows) * rows, np.int64)
    offs[: k.size] = ((k // (ks * ks)) * hp + k // ks % ks) * wp + k % ks
    return offs


def conv2d_params_grad(x, g, ks, pad, dw, db):
    """The weight and bias gradients of :func:`conv2d_forward` for output gradient ``g`` (image,
    channel, row, column): dw[o, c, kh, kw] = sum over pixels j = (image, row, column) ascending
    of x[b, c, h + kh - pad, w + kw - pad] (+0.0 outside the image) * g[b, o, h, w], from +0.0
    (``im2col(x) @ G^T``, output by output); db as :func:`channel_sum`."""
    nb, cin, hh, ww = x.shape
    cout = g.shape[1]
    nc = -(-cout // _CL) * _CL
    hp, wp = hh + ks - 1, ww + ks - 1
    offs = _conv_taps(cin, ks, hp, wp, 4 if nc % (4 * _CL) == 0 else 8)
    xp = np.empty((nb, cin, hp, wp), np.float32)
    gt = np.empty((nb, hh * ww, nc), np.float32)
    _conv_dw_prep(x, g.reshape(nb, cout, hh * ww), pad, xp, gt)
    _conv_db(gt.reshape(-1), nc, cout, db)
    dwt = np.empty((offs.shape[0], nc), np.float32)
    _conv_dw(xp.reshape(-1), offs, gt.reshape(-1), dwt.reshape(-1), nc, nb, hh, ww, cin * hp * wp, wp)
    dw[...] = dwt[: cin * ks * ks, :cout].T.reshape(dw.shape)


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


@_parallel(_passes(1))
def embedding_bwd(idx, dy, dw):
    """dw[v] = sum of dy[n] over n with idx[n] == v, n ascending (dw starts at zero)."""
    n, e = dy.shape
    width = _col_width(e)
    for c in prange((e + width - 1) // width):
        j0 = c * width
        j1 = min(j0 + width, e)
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
def adam_update(p, g, m, v, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt, decay):
    """p = decay*p (AdamW's decoupled decay; ``decay`` 1: none); g' = g + wd*p;
    m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*g'*g'; p = p - step_size * (m / (sqrt(v)/bc2_sqrt + eps)).
    Every scalar is float32."""
    one = np.float32(1.0)
    for i in prange(p.shape[0]):
        pi = p[i]
        if decay != one:
            pi = pi * decay
        gi = g[i]
        if weight_decay != 0:
            gi = gi + weight_decay * pi
        mi = beta1 * m[i] + (one - beta1) * gi
        vi = beta2 * v[i] + (one - beta2) * (gi * gi)
        m[i] = mi
        v[i] = vi
        p[i] = pi - step_size * (mi / (np.sqrt(vi) / bc2_sqrt + eps))


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


# ------------------------------------------------------------------ repro-v2: the multiply-adds fused

#: repro-v2's one change: each term of a matmul's or a convolution's sum is ``acc = fma(a, b, acc)``,
#: one rounding, where repro-v1 rounds the product and then the sum.
_FUSED_OPS = {"_vmuladd": _WIDE.fma, "_nmuladd": _NARROW.fma, "_cmuladd": _WIDE.fma}


def _names(code: CodeType) -> set[str]:
    """The global names ``code`` reads, its nested functions' included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return names


def _fused_family() -> SimpleNamespace:
    """repro-v2's kernels: every function of this module that calls a multiply-add, directly or
    through another, compiled again from the same source with :data:`_FUSED_OPS` in its globals
    (named ``<name>_fma``, so that numba's disk cache keeps the two apart). The same tiles,
    blocks of k, tasks and threads; only each term's rounding differs. The rest of repro-v2
    (softmax, layer norm, GELU, the optimizers) is repro-v1's."""
    here = globals()
    sources: dict[str, FunctionType] = {}
    for name, obj in here.items():
        fn = getattr(obj, "py_func", obj)  # a numba dispatcher's or a _parallel kernel's source
        if isinstance(fn, FunctionType) and fn.__module__ == __name__:
            sources[name] = fn
    fused = set(_FUSED_OPS)
    while True:  # callers of a fused function, until none is added
        more = {name for name, fn in sources.items() if name not in fused and _names(fn.__code__) & fused}
        if not more:
            break
        fused |= more
    env = dict(here)
    env.update(_FUSED_OPS)
    for name in fused - set(_FUSED_OPS):
        obj, fn = here[name], sources[name]
        twin = FunctionType(fn.__code__, env, fn.__name__ + "_fma", fn.__defaults__, fn.__closure__)
        twin.__qualname__, twin.__doc__ = fn.__qualname__ + "_fma", fn.__doc__
        if isinstance(obj, numba.core.registry.CPUDispatcher):
            env[name] = njit(cache=True, **{k: v for k, v in obj.targetoptions.items() if k != "nopython"})(twin)
        elif hasattr(obj, "work"):
            env[name] = _parallel(obj.work)(twin)
        else:
            env[name] = twin
    return SimpleNamespace(**{name: env[name] for name in __all__ if name in fused})


#: repro-v2's contraction kernels: ``bmm`` and the direct convolution's three, with the names and
#: arguments of this module's.
FUSED = _fused_family()
