"""Explicit SIMD vectors for numba kernels: a float32 vector type the width of the machine's registers
and the few operations a register-blocked kernel needs (load, store, broadcast, fused multiply-add, add,
clamp), as numba intrinsics that emit LLVM vector instructions.

Why: numba leaves LLVM's SLP vectoriser off, so a kernel that keeps a block of outputs in scalar
accumulators runs scalar (a register-blocked GEMM measured 0.1x OpenBLAS). Written with these vectors,
the same blocking is what LLVM compiles to AVX-512 / AVX2 / NEON registers directly.

`LANES` floats per vector: 16 with AVX-512, 8 with AVX, else 4 (SSE, NEON). A kernel holding
12 accumulators, 2 loaded vectors and a broadcast then fits the register file of each (32, 16, 32/16).
Loads and stores are unaligned and never masked: callers keep every vector inside its array.
"""
from __future__ import annotations

import llvmlite.binding as llb
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model


def _host_lanes() -> int:
    features = llb.get_host_cpu_features()
    if features.get("avx512f"):
        return 16
    if features.get("avx"):
        return 8
    return 4


LANES = _host_lanes()


class F32Vector(types.Type):
    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__(name=f"f32x{lanes}")


VECTOR = F32Vector(LANES)
_LLVM_VECTOR = ir.VectorType(ir.FloatType(), LANES)
_I32 = ir.IntType(32)


@register_model(F32Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(ir.FloatType(), fe_type.lanes))


def _vector_pointer(context, builder, array_type, array, index, vector=_LLVM_VECTOR):
    """A pointer to a `vector` (an LLVM vector type) starting at array[index]."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [index]), vector.as_pointer())


def _broadcast(builder, x, vector=_LLVM_VECTOR):
    one = builder.insert_element(ir.Constant(vector, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vector, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, vector.count), [0] * vector.count))


@intrinsic
def vload(typingctx, a, i):
    """a[i : i + LANES] as a vector (a: 1-D float32 array)."""
    def codegen(context, builder, sig, args):
        return builder.load(_vector_pointer(context, builder, sig.args[0], args[0], args[1]), align=4)
    return VECTOR(a, i), codegen


@intrinsic
def vstore(typingctx, a, i, v):
    """a[i : i + LANES] = v."""
    def codegen(context, builder, sig, args):
        builder.store(args[2], _vector_pointer(context, builder, sig.args[0], args[0], args[1]), align=4)
        return context.get_dummy_value()
    return types.none(a, i, v), codegen


@intrinsic
def vsplat(typingctx, x):
    """A vector of LANES copies of the float32 x."""
    def codegen(context, builder, sig, args):
        return _broadcast(builder, args[0])
    return VECTOR(types.float32), codegen


@intrinsic
def vsplat_at(typingctx, a, i):
    """A vector of LANES copies of a[i] (a: 1-D float32 array; i is not wrapped when negative)."""
    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return _broadcast(builder, builder.load(builder.gep(data, [args[1]]), align=4))
    return VECTOR(a, i), codegen


@intrinsic
def vzero(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_LLVM_VECTOR, [0.0] * LANES)
    return VECTOR(), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """a * b + c, rounded once (llvm.fma)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_LLVM_VECTOR, [_LLVM_VECTOR] * 3),
                                            f"llvm.fma.v{LANES}f32")
        return builder.call(fn, args)
    return VECTOR(a, b, c), codegen


@intrinsic
def vadd(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])
    return VECTOR(a, b), codegen


@intrinsic
def vclamp(typingctx, v, lo, hi):
    """v below lo -> lo, above hi -> hi, lane by lane; NaN stays NaN (np.clip's rule, comparisons and
    selects, not min/max)."""
    def codegen(context, builder, sig, args):
        v, lo, hi = args
        v = builder.select(builder.fcmp_ordered("<", v, lo), lo, v)
        return builder.select(builder.fcmp_ordered(">", v, hi), hi, v)
    return VECTOR(v, lo, hi), codegen


def _store_first(builder, v, ptr, n, element: str, align: int) -> None:
    """*ptr = the first n lanes of v (llvm.masked.store; lanes past n are not touched)."""
    width = v.type.count
    lanes = ir.Constant(ir.VectorType(_I32, width), list(range(width)))
    count = builder.trunc(n, _I32) if n.type.width > 32 else n
    mask = builder.icmp_signed("<", lanes, _broadcast(builder, count, lanes.type))
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [v.type, ptr.type, _I32, mask.type]),
        f"llvm.masked.store.v{width}{element}.p0")
    builder.call(fn, [v, ptr, ir.Constant(_I32, align), mask])


@intrinsic
def vstore_first(typingctx, a, i, v, n):
    """a[i : i + n] = the first n lanes of v (0 <= n <= LANES; a masked store: nothing past them is
    touched)."""
    def codegen(context, builder, sig, args):
        a, i, v, n = args
        _store_first(builder, v, _vector_pointer(context, builder, sig.args[0], a, i), n, "f32", 4)
        return context.get_dummy_value()
    return types.none(a, i, v, n), codegen


@intrinsic
def fma32(typingctx, a, b, c):
    """a * b + c for float32 scalars, rounded once (llvm.fma.f32: a loop of them vectorises)."""
    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32] * 3), "llvm.fma.f32")
        return builder.call(fn, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def pow2_of(typingctx, n):
    """2.0 ** n as a float32, for an integer-valued float32 n in [-126, 127] (the exponent field
    written directly: a loop of them vectorises, where ldexp is a libm call)."""
    def codegen(context, builder, sig, args):
        k = builder.fptosi(args[0], _I32)
        bits = builder.shl(builder.add(k, ir.Constant(_I32, 127)), ir.Constant(_I32, 23))
        return builder.bitcast(bits, ir.FloatType())
    return types.float32(types.float32), codegen


# ---------------------------------------------------------------- int32 vectors and int8 dot products
#
# The int8 GEMM (jit/_qgemm.py) multiplies four int8 pairs per int32 lane in one instruction (VNNI's
# vpdpbusd: unsigned bytes times signed bytes, summed into the lane without saturation), 4x the
# multiply-adds of a float32 FMA of the same width. Only AVX-512 VNNI is compiled for (the machine this
# project is measured on); `DOT_LANES` is 0 elsewhere and the int8 convolutions keep their float32 path.

def _host_dot_lanes() -> int:
    features = llb.get_host_cpu_features()
    return 16 if features.get("avx512vnni") and features.get("avx512f") else 0


DOT_LANES = _host_dot_lanes()


class I32Vector(types.Type):
    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__(name=f"i32x{lanes}")


_DOT = max(DOT_LANES, 1)             # a vector type exists (and compiles) on every machine
IVECTOR = I32Vector(_DOT)
_LLVM_IVECTOR = ir.VectorType(_I32, _DOT)
_BYTE_SIGNS = ir.Constant(_I32, -0x7F7F7F80)     # 0x80808080: flips each byte's sign bit (x + 128 as u8)


@register_model(I32Vector)
class _IVectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(_I32, fe_type.lanes))


@intrinsic
def ivload(typingctx, a, i):
    """a[i : i + DOT_LANES] as an int32 vector (a: 1-D int32 array)."""
    def codegen(context, builder, sig, args):
        return builder.load(_vector_pointer(context, builder, sig.args[0], args[0], args[1], _LLVM_IVECTOR), align=4)
    return IVECTOR(a, i), codegen


@intrinsic
def ivzero(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_LLVM_IVECTOR, [0] * _DOT)
    return IVECTOR(), codegen


@intrinsic
def ivsplat_unsigned(typingctx, a, i):
    """Every lane = the four int8 bytes packed in a[i] (a: 1-D int32 array), each plus 128 as an
    unsigned byte (the sign bits flipped): vpdpbusd's unsigned operand."""
    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        x = builder.xor(builder.load(builder.gep(data, [args[1]]), align=4), _BYTE_SIGNS)
        return _broadcast(builder, x, _LLVM_IVECTOR)
    return IVECTOR(a, i), codegen


@intrinsic
def vdot_bytes(typingctx, acc, a, b):
    """acc + per lane sum of the four products of a's unsigned bytes and b's signed bytes (vpdpbusd,
    wrapping: no saturation)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_LLVM_IVECTOR, [_LLVM_IVECTOR] * 3),
                                            f"llvm.x86.avx512.vpdpbusd.{_DOT * 32}")
        return builder.call(fn, args)
    return IVECTOR(acc, a, b), codegen


_I64 = ir.IntType(64)
_LLVM_I64VECTOR = ir.VectorType(_I64, _DOT)
_TIE_BOUND = -(1 << 30)
REQUANT_ROWS = 6      # rows of vrequantize's parameter table


def _narrowed(builder, v):
    return builder.sext(builder.trunc(v, _LLVM_IVECTOR), _LLVM_I64VECTOR)


@intrinsic
def vrequantize(typingctx, acc, qv, at, stride, zp, lo, hi):
    """The output stage of int8 kernels (cpu/_quant.OutputStage's fast path, bit-exact with LiteRT) on a
    vector of int32 sums: lane j, for column at + j of qv (int64 [REQUANT_ROWS, stride], flat: the
    bias, multiplier, left shift, tie fix, offset and total shift per column), becomes
    ((((acc + bias) << left) * multiplier - (fix if below -2**30)) + offset) >> shift, plus zp,
    clamped to [lo, hi]. Only for sums whose (acc + bias) << left stays below 2**30 in magnitude (the
    fast path's condition): the 64-bit product then never overflows."""
    def codegen(context, builder, sig, args):
        acc, qv, at, stride, zp, lo, hi = args
        def row(r):
            i = builder.add(at, builder.mul(stride, ir.Constant(stride.type, r)))
            return builder.load(_vector_pointer(context, builder, sig.args[1], qv, i, _LLVM_I64VECTOR), align=8)
        bias, mult, left, fix, offset, shift = (row(r) for r in range(REQUANT_ROWS))
        v = builder.shl(builder.add(builder.sext(acc, _LLVM_I64VECTOR), bias), left)
        # both factors fit int32 (the fast path's bound; Q31 multipliers): said so, LLVM multiplies
        # 32 x 32 -> 64 bits (vpmuldq) instead of a full 64-bit product
        v = builder.mul(_narrowed(builder, v), _narrowed(builder, mult))
        tie = builder.icmp_signed("<", v, ir.Constant(_LLVM_I64VECTOR, [_TIE_BOUND] * _DOT))
        v = builder.select(tie, builder.sub(v, fix), v)
        v = builder.ashr(builder.add(v, offset), shift)
        r = builder.add(builder.trunc(v, _LLVM_IVECTOR), _broadcast(builder, builder.trunc(zp, _I32), _LLVM_IVECTOR))
        low = _broadcast(builder, builder.trunc(lo, _I32), _LLVM_IVECTOR)
        high = _broadcast(builder, builder.trunc(hi, _I32), _LLVM_IVECTOR)
        r = builder.select(builder.icmp_signed("<", r, low), low, r)
        return builder.select(builder.icmp_signed(">", r, high), high, r)
    return IVECTOR(acc, qv, at, stride, zp, lo, hi), codegen


@intrinsic
def vstore_bytes_first(typingctx, a, i, v, n):
    """a[i : i + n] = the low bytes of the first n lanes of the int32 vector v (a: 1-D int8 array;
    0 <= n <= DOT_LANES; masked)."""
    def codegen(context, builder, sig, args):
        a, i, v, n = args
        bytes_ = ir.VectorType(ir.IntType(8), _DOT)
        ptr = _vector_pointer(context, builder, sig.args[0], a, i, bytes_)
        _store_first(builder, builder.trunc(v, bytes_), ptr, n, "i8", 1)
        return context.get_dummy_value()
    return types.none(a, i, v, n), codegen


_BYTES16 = ir.VectorType(ir.IntType(8), 16)


@intrinsic
def copy16(typingctx, dst, i, src, j):
    """dst[i : i + 16] = src[j : j + 16] (1-D int8 arrays; one unaligned 16-byte load and store): a
    short copy of n <= 16 bytes that may write past its end into what a later copy overwrites."""
    def codegen(context, builder, sig, args):
        value = builder.load(_vector_pointer(context, builder, sig.args[2], args[2], args[3], _BYTES16), align=1)
        builder.store(value, _vector_pointer(context, builder, sig.args[0], args[0], args[1], _BYTES16), align=1)
        return context.get_dummy_value()
    return types.none(dst, i, src, j), codegen
