r"""Eight float64 lanes as one value in numba code: the vector type :data:`f64x8` (LLVM ``<8 x double>``, one
AVX-512 register) and the operations the fused kernel (:mod:`attsvm.gd.fused`) is written in.

Every operation is the IEEE operation of each lane on its own — ``add(a, b)`` is $a_l+b_l$ rounded once, for
$l=0,\dots,7$ — so a value computed in a lane does not depend on the other lanes (no reduction across lanes exists
here). A fused multiply-add is written out where it is wanted: :func:`fma` is IEEE fusedMultiplyAdd ($ab+c$ rounded
once, LLVM ``llvm.fma``: the same bits on every machine, a libm call where the CPU has no FMA instruction); the
compiler never contracts ``add(c, mul(a, b))`` (two roundings, as the scalar ``c + a * b`` without fastmath) and
never reassociates. A loop whose accumulator is an :data:`f64x8` local keeps it in a register: the compiled loop is
the vector instructions themselves, with no lane loop, no trip count to test and no alias check.

Arrays hold the lanes last and contiguous, ``(..., 8)``: :func:`load` and :func:`store` read and write the 8 lanes
at an index of the leading axes (a tuple, ``()`` for a 1-d array of 8); the lanes axis must have 8 entries (its
length is a constant in the address, so neighbouring vectors sit at offsets the compiler knows). :func:`exp` is
$e^x$ within 1 ulp (fdlibm's reduction; a polynomial instead of its rational step, so no division, evaluated by
Estrin's scheme with FMAs).
"""

from __future__ import annotations

import math
from fractions import Fraction

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

#: lanes of an :data:`f64x8`
WIDTH = 8

_VEC = ir.VectorType(ir.DoubleType(), WIDTH)
_IVEC = ir.VectorType(ir.IntType(64), WIDTH)
_MVEC = ir.VectorType(ir.IntType(1), WIDTH)


class F64x8(types.Type):
    """The numba type of 8 float64 lanes."""

    def __init__(self) -> None:
        super().__init__(name="f64x8")


class Mask8(types.Type):
    """The numba type of 8 booleans (the result of a lane-wise comparison)."""

    def __init__(self) -> None:
        super().__init__(name="mask8")


#: 8 float64 lanes (LLVM ``<8 x double>``)
f64x8 = F64x8()
#: 8 lane-wise booleans (LLVM ``<8 x i1>``)
mask8 = Mask8()


@register_model(F64x8)
class F64x8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VEC)


@register_model(Mask8)
class Mask8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _MVEC)


def _lane_pointer(context, builder, aryty, ary, idxty, idx):
    """Pointer to lane 0 of ``ary[idx]`` as ``<8 x double>*`` (``idx`` indexes the leading axes; the last axis of
    ``ary`` must have :data:`WIDTH` entries)."""
    arr = context.make_array(aryty)(context, builder, ary)
    if isinstance(idxty, types.BaseTuple):
        inds = [
            context.cast(builder, v, t, types.intp) for v, t in zip(cgutils.unpack_tuple(builder, idx), idxty.types)
        ]
    else:
        inds = [context.cast(builder, idx, idxty, types.intp)]
    inds.append(context.get_constant(types.intp, 0))
    shape = cgutils.unpack_tuple(builder, arr.shape, aryty.ndim)
    # the lanes axis has WIDTH entries (the arrays' contract): with the constant, the address of [..., c + 1, 0] is
    # that of [..., c, 0] plus 64 bytes, known to the compiler, so neighbouring vectors share one address register
    shape[-1] = context.get_constant(types.intp, WIDTH)
    strides = cgutils.unpack_tuple(builder, arr.strides, aryty.ndim)
    ptr = cgutils.get_item_pointer2(context, builder, arr.data, shape, strides, aryty.layout, inds)
    return builder.bitcast(ptr, _VEC.as_pointer())


def _index_ok(arr, idx) -> bool:
    if not (isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"):
        return False
    n = len(idx.types) if isinstance(idx, types.BaseTuple) else 1
    if isinstance(idx, types.BaseTuple) and not all(isinstance(t, types.Integer) for t in idx.types):
        return False
    if not isinstance(idx, (types.BaseTuple, types.Integer)):
        return False
    return arr.ndim == n + 1


@intrinsic
def load(typingctx, arr, idx):
    """The 8 lanes ``arr[idx + (0:8,)]`` of a C-contiguous float64 array with 8 lanes last."""
    if not _index_ok(arr, idx):
        return None

    def codegen(context, builder, sig, args):
        ptr = _lane_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        return builder.load(ptr, align=8)

    return f64x8(arr, idx), codegen


@intrinsic
def store(typingctx, arr, idx, v):
    """``arr[idx + (0:8,)] = v``."""
    if not _index_ok(arr, idx) or v != f64x8:
        return None

    def codegen(context, builder, sig, args):
        ptr = _lane_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        builder.store(args[2], ptr, align=8)
        return context.get_dummy_value()

    return types.none(arr, idx, v), codegen


@intrinsic
def splat(typingctx, x):
    """The float ``x`` in every lane."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.float64)
        one = builder.insert_element(ir.Constant(_VEC, ir.Undefined), v, ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(
            one, ir.Constant(_VEC, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), WIDTH), [0] * WIDTH)
        )

    return f64x8(x), codegen


def _binary(op: str, doc: str):
    @intrinsic
    def fn(typingctx, a, b):
        if a != f64x8 or b != f64x8:
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1])

        return f64x8(a, b), codegen

    fn.__doc__ = doc
    return fn


add = _binary("fadd", "Lane-wise $a+b$.")
sub = _binary("fsub", "Lane-wise $a-b$.")
mul = _binary("fmul", "Lane-wise $ab$ (never contracted with a following add; :func:`fma` is the fused form).")
div = _binary("fdiv", "Lane-wise $a/b$.")


def _compare(op: str, ordered: bool, doc: str):
    @intrinsic
    def fn(typingctx, a, b):
        if a != f64x8 or b != f64x8:
            return None

        def codegen(context, builder, sig, args):
            cmp = builder.fcmp_ordered if ordered else builder.fcmp_unordered
            return cmp(op, args[0], args[1])

        return mask8(a, b), codegen

    fn.__doc__ = doc
    return fn


gt = _compare(">", True, "Lane-wise $a>b$ (false where either is NaN, as Python's ``>``).")
lt = _compare("<", True, "Lane-wise $a<b$ (false where either is NaN, as Python's ``<``).")
eq = _compare("==", True, "Lane-wise $a=b$ (false where either is NaN, as Python's ``==``).")
ne = _compare("!=", False, "Lane-wise $a\\ne b$ (true where either is NaN, as Python's ``!=``).")


@intrinsic
def any_lane(typingctx, m):
    """Whether some lane of the mask ``m`` is true."""
    if m != mask8:
        return None

    def codegen(context, builder, sig, args):
        bits = builder.bitcast(args[0], ir.IntType(WIDTH))
        return builder.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(WIDTH), 0))

    return types.boolean(m), codegen


@intrinsic
def both(typingctx, m1, m2):
    """Lane-wise ``m1 and m2`` of two masks."""
    if m1 != mask8 or m2 != mask8:
        return None

    def codegen(context, builder, sig, args):
        return builder.and_(args[0], args[1])

    return mask8(m1, m2), codegen


@intrinsic
def where(typingctx, m, a, b):
    """Lane-wise ``a if m else b``."""
    if m != mask8 or a != f64x8 or b != f64x8:
        return None

    def codegen(context, builder, sig, args):
        return builder.select(args[0], args[1], args[2])

    return f64x8(m, a, b), codegen


def _unary_llvm(name: str, doc: str):
    @intrinsic
    def fn(typingctx, a):
        if a != f64x8:
            return None

        def codegen(context, builder, sig, args):
            f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [_VEC]), name)
            return builder.call(f, [args[0]])

        return f64x8(a), codegen

    fn.__doc__ = doc
    return fn


floor = _unary_llvm("llvm.floor.v8f64", "Lane-wise $\\lfloor a\\rfloor$ (exact).")
sqrt = _unary_llvm("llvm.sqrt.v8f64", "Lane-wise $\\sqrt a$ (correctly rounded).")
fabs = _unary_llvm("llvm.fabs.v8f64", "Lane-wise $|a|$ (exact).")


@intrinsic
def fma(typingctx, a, b, c):
    r"""Lane-wise $ab+c$ rounded once: IEEE 754 fusedMultiplyAdd (LLVM ``llvm.fma``; a libm ``fma`` call where the
    CPU has no FMA instruction), so the same bits on every machine. Written out where the kernel wants it: the
    compiler never contracts ``add(c, mul(a, b))`` (two roundings) into one."""
    if a != f64x8 or b != f64x8 or c != f64x8:
        return None

    def codegen(context, builder, sig, args):
        f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [_VEC, _VEC, _VEC]), "llvm.fma.v8f64")
        return builder.call(f, [args[0], args[1], args[2]])

    return f64x8(a, b, c), codegen


@intrinsic
def neg(typingctx, a):
    """Lane-wise $-a$ (exact; the sign bit flipped, $-0$ for $0$)."""
    if a != f64x8:
        return None

    def codegen(context, builder, sig, args):
        return builder.fneg(args[0])

    return f64x8(a), codegen


@intrinsic
def pow2(typingctx, k):
    r"""Lane-wise $2^k$ for integral $k\in[-1022,1023]$, from its bits (exact)."""
    if k != f64x8:
        return None

    def codegen(context, builder, sig, args):
        ki = builder.fptosi(args[0], _IVEC)
        ki = builder.add(ki, ir.Constant(_IVEC, [1023] * WIDTH))
        ki = builder.shl(ki, ir.Constant(_IVEC, [52] * WIDTH))
        return builder.bitcast(ki, _VEC)

    return f64x8(k), codegen


@intrinsic
def from_integer_bits(typingctx, v):
    r"""Lane-wise the float64 whose bit pattern is the integer $v$ ($0\le v<2^{63}$ integral): $v\cdot2^{-1074}$ for
    $v\le2^{52}$ (the subnormals and $2^{-1022}$), exact."""
    if v != f64x8:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(builder.fptosi(args[0], _IVEC), _VEC)

    return f64x8(v), codegen


@intrinsic
def lane(typingctx, v, i):
    """Lane ``i`` of ``v`` (a float64)."""
    if v != f64x8 or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.extract_element(args[0], args[1])

    return types.float64(v, i), codegen


@intrinsic
def with_lane(typingctx, v, i, x):
    """``v`` with lane ``i`` replaced by the float ``x``."""
    if v != f64x8 or not isinstance(i, types.Integer) or not isinstance(x, types.Float):
        return None

    def codegen(context, builder, sig, args):
        val = context.cast(builder, args[2], sig.args[2], types.float64)
        return builder.insert_element(args[0], val, args[1])

    return f64x8(v, i, x), codegen


# ---------------------------------------------------------------------- exp
# fdlibm's exp (e_exp.c): ln 2 split in a high part with trailing zero bits and the rest
INVLN2 = 1.44269504088896338700e00
LN2HI = 6.93147180369123816490e-01
LN2LO = 1.90821492927058770002e-10
#: $Q(r)=(e^r-1-r)/r^2\approx\sum_j Q_j r^j$ on $|r|\le\frac12\ln2$: a Chebyshev fit of degree 9 (mpmath.chebyfit,
#: 60 digits; error of $r^2Q$ below $1.3\cdot10^{-17}$), rounded to float64
EXP_Q = (
    0.5000000000000001,
    0.16666666666666669,
    0.041666666666624164,
    0.008333333333330065,
    0.0013888888917196719,
    0.00019841269863040545,
    2.4801521322368692e-05,
    2.7557268480310024e-06,
    2.7620075879983367e-07,
    2.5100375832561234e-08,
)
TWO52 = 2.0**52
#: below this $e^x<2^{-1075}$ rounds to 0 (the largest such $x$ is $-745.1332\ldots$)
UNDERFLOW = -745.2


def fma_scalar(a: float, b: float, c: float) -> float:
    """$ab+c$ rounded once, in plain Python (exact rationals, then one rounding: ``float`` of a ``Fraction`` rounds
    to nearest even), as :func:`fma` computes each lane; for finite arguments."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def exp_scalar_formula(x: float, q: tuple[float, ...] = EXP_Q) -> float:
    """:func:`exp` of one float in plain Python, with the polynomial ``q`` (the tests plant a wrong coefficient here
    to show the ulp check can fail): the same operations, each FMA as :func:`fma_scalar`."""
    if x < UNDERFLOW:
        return 0.0
    x = min(x, 709.0)
    kf = math.floor(x * INVLN2 + 0.5)
    hi = x - kf * LN2HI
    lo = kf * LN2LO
    r = hi - lo
    r2 = r * r
    r4 = r2 * r2
    pairs = [fma_scalar(r, q[j + 1], q[j]) for j in range(0, len(q), 2)]  # q_j + q_{j+1} r, rounded once
    p = fma_scalar(r4, fma_scalar(r2, pairs[3], pairs[2]), fma_scalar(r2, pairs[1], pairs[0]))
    p = fma_scalar(r4 * r4, pairs[4], p)
    y = 1.0 - ((lo - r2 * p) - hi)
    return math.ldexp(y, int(kf))


@njit(inline="always", nogil=True)
def exp(x):
    r"""Lane-wise $e^x$ for $x\le709$ or $x=-\infty$, within 1 ulp: $x=k\ln2+r$, $|r|\le\frac12\ln2$ (Cody–Waite,
    $\ln2$ in two parts, as fdlibm), $e^r=1+r+r^2Q(r)$ (:data:`EXP_Q`, by Estrin's scheme with :func:`fma`:
    $Q=(q_{01}+r^2q_{23})+r^4(q_{45}+r^2q_{67})+r^8q_{89}$, $q_{j,j+1}=q_j+q_{j+1}r$, each FMA rounded once; then
    fdlibm's $1-((\mathrm{lo}-r^2Q)-\mathrm{hi})$ so the small terms are added first), then $2^k$ from its bits —
    and a subnormal result $m\,2^{-1074}$ from the bits of its integer $m=y\,2^{k+1074}$ rounded to nearest even, so
    it is rounded once and no product underflows. $e^0=1$ exactly; $x<-745.2$ gives 0 (set, not computed). (Checked
    against 50-digit mpmath in the tests.)"""
    # a result that rounds to 0 is set, not computed: a product that underflows costs a microcode assist (over
    # 100 cycles for the whole vector), and e^{-inf} = 0 is common here (the pairs of the argmax, masked tokens)
    zero = lt(x, splat(UNDERFLOW))
    x = where(zero, splat(0.0), x)
    x = where(lt(x, splat(709.0)), x, splat(709.0))
    kf = floor(add(mul(x, splat(INVLN2)), splat(0.5)))
    hi = sub(x, mul(kf, splat(LN2HI)))
    lo = mul(kf, splat(LN2LO))
    r = sub(hi, lo)
    r2 = mul(r, r)
    r4 = mul(r2, r2)
    # Estrin's scheme (short dependency chains): pairs q_j + q_{j+1} r, then pairs of pairs in r^2, r^4, r^8
    p01 = fma(r, splat(EXP_Q[1]), splat(EXP_Q[0]))
    p23 = fma(r, splat(EXP_Q[3]), splat(EXP_Q[2]))
    p45 = fma(r, splat(EXP_Q[5]), splat(EXP_Q[4]))
    p67 = fma(r, splat(EXP_Q[7]), splat(EXP_Q[6]))
    p89 = fma(r, splat(EXP_Q[9]), splat(EXP_Q[8]))
    p = fma(r4, fma(r2, p67, p45), fma(r2, p23, p01))
    p = fma(mul(r4, r4), p89, p)
    y = sub(splat(1.0), sub(sub(lo, mul(r2, p)), hi))
    # a subnormal result m 2^-1074 is built from its integer m = y 2^(k+1074) rounded to nearest even (by adding and
    # subtracting 2^52, exact in the normal range), not by a product that underflows (a microcode assist)
    low = lt(kf, splat(-1021.0))
    if not any_lane(low):  # the common case: every result normal (or 0)
        return where(zero, splat(0.0), mul(y, pow2(kf)))
    scaled = mul(y, pow2(where(low, add(kf, splat(1074.0)), splat(0.0))))
    subn = both(low, lt(scaled, splat(TWO52)))
    m = sub(add(scaled, splat(TWO52)), splat(TWO52))
    kn = where(subn, splat(0.0), where(low, splat(-1022.0), kf))
    normal = mul(y, pow2(kn))
    return where(zero, splat(0.0), where(subn, from_integer_bits(m), normal))


# ---------------------------------------------------------------------- log
#: fdlibm's log (e_log.c): $\log\frac{1+s}{1-s}=2s+sR(s^2)$, $R(z)=\sum_jL_jz^j$ on $|s|\le0.1716$ (error below
#: $2^{-58.45}$)
LOG_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)
SQRT2 = 1.4142135623730951
TINY = 2.2250738585072014e-308
HUGE = 1.7976931348623157e308


@intrinsic
def split_exponent(typingctx, x):
    r"""Lane-wise $(m,k)$ with $x=2^km$, $m\in[1,2)$ (exact; for positive normal $x$), as two :data:`f64x8`."""
    if x != f64x8:
        return None
    pair = types.UniTuple(f64x8, 2)

    def codegen(context, builder, sig, args):
        bits = builder.bitcast(args[0], _IVEC)
        ex = builder.lshr(bits, ir.Constant(_IVEC, [52] * WIDTH))
        ex = builder.and_(ex, ir.Constant(_IVEC, [0x7FF] * WIDTH))
        k = builder.sitofp(builder.sub(ex, ir.Constant(_IVEC, [1023] * WIDTH)), _VEC)
        mbits = builder.and_(bits, ir.Constant(_IVEC, [(1 << 52) - 1] * WIDTH))
        mbits = builder.or_(mbits, ir.Constant(_IVEC, [1023 << 52] * WIDTH))
        m = builder.bitcast(mbits, _VEC)
        return context.make_tuple(builder, pair, [m, k])

    return pair(x), codegen


@njit(inline="always", nogil=True)
def log_core(f, k, c):
    r"""$k\ln2+\log(1+f)+c$ lane-wise for $1+f\in[\frac12\sqrt2,\sqrt2]$, integral $k$ and a small correction $c$:
    fdlibm's method — $s=f/(2+f)$, $\log(1+f)=f-(\frac{f^2}2-s(\frac{f^2}2+R(s^2)))$, $\ln2$ in two parts, the
    small terms added first."""
    s = div(f, add(splat(2.0), f))
    z = mul(s, s)
    w = mul(z, z)
    t1 = mul(w, add(splat(LOG_LG[1]), mul(w, add(splat(LOG_LG[3]), mul(w, splat(LOG_LG[5]))))))
    t2 = mul(
        z, add(splat(LOG_LG[0]), mul(w, add(splat(LOG_LG[2]), mul(w, add(splat(LOG_LG[4]), mul(w, splat(LOG_LG[6])))))))
    )
    r = add(t2, t1)
    hfsq = mul(mul(splat(0.5), f), f)
    inner = sub(hfsq, add(mul(s, add(hfsq, r)), add(mul(k, splat(LN2LO)), c)))
    return sub(mul(k, splat(LN2HI)), sub(inner, f))


@njit(inline="always", nogil=True)
def log(x):
    r"""Lane-wise $\log x$ within 1 ulp: $x=2^km$, $m\in[1,2)$ from the bits, $m$ halved (and $k$ raised) above
    $\sqrt2$, then :func:`log_core` of $f=m-1$ (exact); lanes that are not positive normal finite numbers (0,
    subnormal, $\infty$, NaN, negative) are computed by libm's scalar ``log`` instead. (Checked against 50-digit
    mpmath in the tests.)"""
    m, k = split_exponent(x)
    big = gt(m, splat(SQRT2))
    m = where(big, mul(m, splat(0.5)), m)
    k = where(big, add(k, splat(1.0)), k)
    out = log_core(sub(m, splat(1.0)), k, splat(0.0))
    if any_lane(lt(x, splat(TINY))) or any_lane(gt(x, splat(HUGE))) or any_lane(ne(x, x)):
        for ln in range(WIDTH):
            v = lane(x, ln)
            if not (TINY <= v <= HUGE):
                out = with_lane(out, ln, math.log(v))
    return out


@njit(inline="always", nogil=True)
def log1p(x):
    r"""Lane-wise $\log(1+x)$ for $0\le x\le1$, within 1 ulp: $u=1+x$ rounded; below $\sqrt2$ :func:`log_core` of
    $f=x$ itself, else of $f=u/2-1$ (exact) with $k=1$ and the rounding error of $u$ as the correction
    $c=(x-(u-1))/u$ (fdlibm's ``log1p``). (Checked against 50-digit mpmath in the tests.)"""
    u = add(splat(1.0), x)
    big = gt(u, splat(SQRT2))
    f = where(big, sub(mul(u, splat(0.5)), splat(1.0)), x)
    k = where(big, splat(1.0), splat(0.0))
    c = where(big, div(sub(x, sub(u, splat(1.0))), u), splat(0.0))
    return log_core(f, k, c)
