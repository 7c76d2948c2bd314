"""sin, cos, exp and the logistic function of float32 values as straight-line float32 arithmetic, so
that a loop of them vectorises (numba lowers math.sin or math.exp to one libm call per element, which
no loop vectoriser can widen).

sin and cos, for |x| <= NEAR_LIMIT (2^17):
- x = n·π/2 + r with n = rint(x·2/π). π/2 is split in three float32 parts, the first two of 22
  significant bits (Cody and Waite), so that x − n·p₁ is exact and each FMA after it rounds once.
- |r| <= π/4 + 0.008: sin r = r + r³·S(r²) and cos r = 1 − r²/2 + r⁴·C(r²), S and C of degree 2,
  fitted (least squares, reweighted towards the minimax of the relative error, on [0, 0.8]) to
  (sin r − r)/r³ and (cos r − 1 + r²/2)/r⁴: relative errors of the fits 4.4e-9 and 1.4e-10.
- n mod 4 picks ±sin r or ±cos r. |x| < 2^-12 gives sin x = x (the correctly rounded value; it keeps
  −0.0), and cos 0 = 1 exactly.
Measured against float64 sin / cos rounded to float32 (tests/backends/jit/test_vmath.py): within
1.6 ulp over |x| <= 2^17 (the rounding of r and of the last FMA; numpy's own float32 SIMD sin: 1.5
ulp); the conformance tolerance is rtol 1e-5 (~80 ulp). Beyond NEAR_LIMIT, and for ±inf, sin32 /
cos32 call libm's sinf / cosf, as LiteRT's kernels do; NaN gives NaN.

exp: x = n·ln2 + r, n = rint(x·log2 e), ln 2 in two float32 parts of 22 bits (x − n·l₁ exact);
exp r on |r| <= ln2/2 by its Taylor polynomial to r⁷ (truncation 5e-9 relative); 2^n in two factors
of the exponent field (pow2_of), so that results below FLT_MIN round once into the subnormals. x is
first clamped to [−104, 89] (results 0 and inf beyond; NaN stays NaN). Within 1 ulp of float64 exp
(0.9 measured; numpy's float32 exp: 2.4). logistic(x) = 1/(1 + e) for x >= 0, e/(1 + e) below, with e = exp(−|x|)
(no overflow; x far below 0 gives exp(x)'s subnormals): within 2.5 ulp (tests).

Kernels that want the vector speed evaluate sin_near / cos_near over a whole array and redo the
elements above NEAR_LIMIT afterwards (jit/elementwise.py's SIN / COS kernel); sin32 / cos32 are the
same values one element at a time, for generated code that is not vectorised anyway.
"""
from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np

from onert_py.backends.cpu.activations import _ERFC_COEFFS
from onert_py.backends.jit._numba import kernel
from onert_py.backends.jit._simd import fma32, pow2_of

_HALF_PI = Fraction(Decimal("3.14159265358979323846264338327950288419716939937510582097494459")) / 2


def _leading_bits(v: Fraction, bits: int) -> Fraction:
    """v rounded to `bits` significant bits."""
    e = math.floor(math.log2(abs(v)))
    return Fraction(round(v * 2 ** (bits - 1 - e))) / 2 ** (bits - 1 - e)


_P1 = _leading_bits(_HALF_PI, 22)
_P2 = _leading_bits(_HALF_PI - _P1, 22)
P1, P2, P3 = np.float32(_P1), np.float32(_P2), np.float32(float(_HALF_PI - _P1 - _P2))
TWO_OVER_PI = np.float32(float(1 / _HALF_PI))
NEAR_LIMIT = np.float32(2.0 ** 17)
_TINY = np.float32(2.0 ** -12)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_ZERO = np.float32(0.0)
S3, S5, S7 = (np.float32(c) for c in (-0.16666653752326965, 0.008332070894539356, -0.00019503061776049435))
C4, C6, C8 = (np.float32(c) for c in (0.04166664183139801, -0.0013887194218114018, 2.4419185137958266e-05))


@kernel
def _reduced(x):
    """(r, odd, upper): x = n·π/2 + r, and n's bits 0 and 1 as booleans (float tests, so that NaN
    takes no integer conversion)."""
    n = np.rint(x * TWO_OVER_PI) + _ZERO    # + 0: n = -0.0 would turn r = x = -0.0 into +0.0
    r = fma32(-n, P1, x)
    r = fma32(-n, P2, r)
    r = fma32(-n, P3, r)
    h = n * _HALF
    fh = np.floor(h)
    q = fh * _HALF
    return r, h != fh, q != np.floor(q)


@kernel
def _poly(r, r2, cosine):
    """sin r (cosine False) or cos r (True): r·(1 + r²·S(r²)) or 1 + r²·(−½ + r²·C(r²)), one Horner
    chain whose coefficients a lane selects (both polynomials would cost a lane twice the FMAs)."""
    p = C8 if cosine else _ZERO
    p = fma32(p, r2, C6 if cosine else S7)
    p = fma32(p, r2, C4 if cosine else S5)
    p = fma32(p, r2, -_HALF if cosine else S3)
    return fma32(r2, p, _ONE) if cosine else fma32(r * r2, p, r)


@kernel
def sin_near(x):
    """sin(x) for |x| <= NEAR_LIMIT (float32; NaN gives NaN; larger values: not sin)."""
    r, odd, upper = _reduced(x)
    v = _poly(r, r * r, odd)     # quadrants: sin r, cos r, -sin r, -cos r
    v = -v if upper else v
    return x if abs(x) < _TINY else v


@kernel
def cos_near(x):
    """cos(x) for |x| <= NEAR_LIMIT (as sin_near)."""
    r, odd, upper = _reduced(x)
    v = _poly(r, r * r, not odd)     # quadrants: cos r, -sin r, -cos r, sin r
    return -v if upper != odd else v


@kernel
def sin32(x):
    """sin of a float32: sin_near's value up to NEAR_LIMIT, libm's sinf beyond."""
    return sin_near(x) if abs(x) <= NEAR_LIMIT else math.sin(x)


@kernel
def cos32(x):
    """cos of a float32: cos_near's value up to NEAR_LIMIT, libm's cosf beyond."""
    return cos_near(x) if abs(x) <= NEAR_LIMIT else math.cos(x)


_LN2 = Fraction(Decimal("0.693147180559945309417232121458176568075500134360255254120680009"))
_L1 = _leading_bits(_LN2, 22)
LN2_1, LN2_2 = np.float32(_L1), np.float32(float(_LN2 - _L1))
LOG2E = np.float32(float(1 / _LN2))
EXP_LO, EXP_HI = np.float32(-104.0), np.float32(89.0)
# 1/k! for k = 7 .. 2 (Horner from the top)
E7, E6, E5, E4, E3, E2 = (np.float32(1.0 / math.factorial(k)) for k in range(7, 1, -1))


@kernel
def exp32(x):
    """exp of a float32 (see the module's docstring)."""
    x = EXP_LO if x < EXP_LO else (EXP_HI if x > EXP_HI else x)    # NaN passes
    n = np.rint(x * LOG2E)
    n = n if n == n else _ZERO                                       # NaN: no undefined conversion
    r = fma32(-n, LN2_1, x)
    r = fma32(-n, LN2_2, r)
    p = fma32(fma32(fma32(fma32(fma32(E7, r, E6), r, E5), r, E4), r, E3), r, E2)
    p = fma32(fma32(p, r, _ONE), r, _ONE)
    low = np.floor(n * _HALF)
    return p * pow2_of(low) * pow2_of(n - low)


@kernel
def logistic32(x):
    """1 / (1 + exp(-x)) of a float32, without overflow (see the module's docstring)."""
    e = exp32(-abs(x))
    return (_ONE if x >= _ZERO else e) / (_ONE + e)     # NaN: e is NaN


# expm1 of x <= 0 (ELU's negative side, tanh): 1/k! for k = 8 .. 2 (the series of expm1 on the reduced
# argument), and the bound below which the float32 result is -1
N8, N7, N6, N5, N4, N3, N2 = (np.float32(1.0 / math.factorial(k)) for k in range(8, 1, -1))
_EXPM1_LO = np.float32(-25.0)


@kernel
def expm1_32(x):
    """exp(x) - 1 of a float32 x <= 0 in one path (no select between two evaluations, so a loop of it
    costs about one exp): x = n·ln2 + t as in exp32, expm1(t) by its series to t^8 (truncation below
    1e-9 relative on |t| <= ln2/2), then 2^n·expm1(t) + (2^n - 1), 2^n - 1 exact. Within 1.5 ulp of
    float64 expm1 (tests; numpy's float32 expm1: 2.3). x below -25 gives -1 (the float32 value), -0.0
    stays -0.0, NaN gives NaN. Not for x > 0."""
    x = _EXPM1_LO if x < _EXPM1_LO else x                   # NaN passes
    n = np.rint(x * LOG2E)
    n = n if n == n else _ZERO                                # NaN: no undefined conversion
    t = fma32(-n, LN2_1, x)
    t = fma32(-n, LN2_2, t)
    p = fma32(fma32(fma32(fma32(fma32(fma32(N8, t, N7), t, N6), t, N5), t, N4), t, N3), t, N2)
    p = fma32(t * t, p, t)                                    # expm1(t)
    s = pow2_of(n)
    return x if x == _ZERO else fma32(s, p, s - _ONE)         # -0.0: the reduction gives +0.0


_TWO, _MINUS_TWO = np.float32(2.0), np.float32(-2.0)


@kernel
def tanh32(x):
    """tanh of a float32 as -e / (e + 2) with e = expm1_32(-2|x|) (in (-1, 0]), the sign of x copied
    on: within 2.5 ulp of float64 tanh (tests; numpy's float32 tanh: 1.4), where libm's tanhf is one
    call per element that no loop vectorises (32768 values: 12.6 us, numba's np.tanh 480, numpy's 14.6).
    -0.0 stays -0.0, NaN gives NaN, ±inf ±1."""
    e = expm1_32(_MINUS_TWO * abs(x))
    return math.copysign(-e / (e + _TWO), x)


ERFC_C0, ERFC_C1, ERFC_C2, ERFC_C3, ERFC_C4, ERFC_C5, ERFC_C6, ERFC_C7, ERFC_C8, ERFC_C9 = _ERFC_COEFFS


@kernel
def erfc32(x):
    """erfc of a float32: the cpu kernel's (cpu/activations.py `_erfc`) rational approximation, the
    same float32 steps in the same order, with exp32 for np.exp (within an ulp or two of it)."""
    z = abs(x)
    t = _ONE / (_ONE + _HALF * z)
    p = ERFC_C0 * t + ERFC_C1
    p = p * t + ERFC_C2
    p = p * t + ERFC_C3
    p = p * t + ERFC_C4
    p = p * t + ERFC_C5
    p = p * t + ERFC_C6
    p = p * t + ERFC_C7
    p = p * t + ERFC_C8
    p = p * t + ERFC_C9
    r = t * exp32(p - z * z)
    return r if x >= _ZERO else _TWO - r
