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


def _vector_pointer(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [index]), _LLVM_VECTOR.as_pointer())


def _broadcast(builder, x, vector=_LLVM_VECTOR):
    one = builder.insert_element(ir.Constant(vector, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vector, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, LANES), [0] * LANES))


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


@intrinsic
def vstore_first(typingctx, a, i, v, n):
    """a[i : i + n] = the first n lanes of v (0 <= n <= LANES; a masked store: nothing past them is
    touched)."""
    def codegen(context, builder, sig, args):
        a, i, v, n = args
        lanes = ir.Constant(ir.VectorType(_I32, LANES), list(range(LANES)))
        count = builder.trunc(n, _I32) if n.type.width > 32 else n
        mask = builder.icmp_signed("<", lanes, _broadcast(builder, count, lanes.type))
        ptr = _vector_pointer(context, builder, sig.args[0], a, i)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [_LLVM_VECTOR, ptr.type, _I32, mask.type]),
            f"llvm.masked.store.v{LANES}f32.p0")
        builder.call(fn, [v, ptr, ir.Constant(_I32, 4), mask])
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
