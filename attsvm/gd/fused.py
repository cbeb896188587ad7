r"""The fused CPU kernel: normalised GD on $W$ and $(K,Q)$, every step of a whole run in one compiled loop.

For each data set of a batch it iterates, in float64 (THEORY §1, §5; the formulas of :mod:`.model_torch` and
:mod:`.steps`, the same order of operations),

.. math::
    a_{it}=x_{it}^\top Wz_i,\quad \log s_{it}=a_{it}-\max_\tau a_{i\tau}-\log Z_i,\quad
    u_i=\textstyle\sum_t s_{it}\gamma_{it},

.. math::
    \nabla\mathcal L(W)=e^{M}\sum_{i,t}\tilde\omega_{it}\,x_{it}z_i^\top\ \text{(log domain,
    :func:`~attsvm.gd.model_torch.token_weights_logdomain`)},\qquad
    W_{k+1}=W_k-\eta_k\,\frac{\hat G_k}{\|\hat G_k\|_F},\quad \hat G_k=2^{-e_k}\,e^{-M}\nabla\mathcal L(W_k),

and for $(K,Q)$ with $W=KQ^\top$ the per-factor steps $K\leftarrow K-\eta_k\hat g_K/\|\hat g_K\|_F$,
$Q\leftarrow Q-\eta_k\hat g_Q/\|\hat g_Q\|_F$, $g_K=\hat GQ$, $g_Q=\hat G^\top K$ (each power-of-two
normalised), with the engine's stop rules (``underflow``: the direction is exactly zero for every factor;
``non-finite``: the outputs or the loss overflowed at the proposed iterate, which is then not taken;
``target_corr``). It is the engine's ``ngd`` step (:mod:`attsvm.gd.algos.ngd`) for
``normalize="per-factor"``, ``ridge=0``,
``grad_eps=0``, a linear head and the losses logistic, exponential, correlation and ``nll``; the engine says
when (:func:`attsvm.gd.engine.fused_applies`), and :func:`attsvm.gd.run` takes this path for those runs
(``kernel="auto"``); :func:`run_fused` is that path, records and progress included.

**Why.** The batched torch step is about 65 kernels over (B,N,T) tensors per step, bound by memory traffic and
per-kernel overhead (docs/gd.md, "Speed of the step"). Here a group of :data:`LANES` = 8 data sets stays in the
cache for the whole run, and every operation runs across the group: the data sets are the lanes of one
:data:`~attsvm.gd.simd.f64x8` value (LLVM ``<8 x double>``, one AVX-512 register), every array holds its 8 lanes
last and contiguous, and the kernel is written in the lane-wise operations of :mod:`attsvm.gd.simd` (load, store,
add, fma, mul, exp, log, ...), so each data set's arithmetic is the plain sequential formula, independent of its
neighbours (no operation mixes lanes, no reassociation; every term of a sum is one explicit, correctly rounded
FMA :func:`~attsvm.gd.simd.fma` — IEEE fusedMultiplyAdd, the same bits on every machine — and the compiler
contracts nothing). A run's numbers therefore do not depend on the batch, its order, the group it falls in, the
shards, the threads or the CPU. Every sum is a register accumulator; a contraction computes four sums at once
(independent chains, so the FMAs' latency does not serialise the loop), and the forward pass runs its exps and
logs in passes over all $i$ so their long dependency chains overlap. ``exp`` has no division, and its results
that round to 0 or to a subnormal are set or built from integer bits instead of by a product that underflows (each
such product costs a microcode assist). The step's functions are compiled without numba's reference counting
(they borrow the arrays :func:`_groups` allocates; no atomic count updates per call) and the stop state of a group
is a vector (scalar lane loops only where a lane stops). Per data set and step (CPU time, E3's sizes): about
1150–1200 cycles for $W$ and 2350–2500 for $(K,Q)$, against 1430–1650 and 2950–3200 before issue 31's second
round and 3700–4000 and 8600–8800 for the 32-lane loop version (docs/gd.md).

**Numbers.** The same formulas as the torch engine in the same order, but not the same bits: ``exp``, ``log``
and ``log1p`` are :func:`attsvm.gd.simd.exp` (fdlibm's reduction, a degree-9 polynomial for $(e^r-1-r)/r^2$),
:func:`~attsvm.gd.simd.log` and :func:`~attsvm.gd.simd.log1p` (fdlibm's method), each within 1 ulp of 50-digit
mpmath (tested), where torch uses SLEEF and libm, and sums run in plain sequential order (a fused multiply-add per
term) where torch's reductions use their own. The two agree to ``tol("batch_rtol")`` over short runs and both agree
with the 50-digit replay (:func:`attsvm.highprec.replay`) to ``tol("replay_rtol")`` (tested).

Threads: the groups are split into ``threads`` contiguous ranges run on Python threads (the kernel releases the
GIL; no threading layer of numba is used, so a forked worker is safe). Compiled code is cached on disk by numba in
:func:`cache_dir` (a folder per version of :mod:`attsvm.gd.simd`): the first run after an install compiles the
kernel (about 15 s on a 2-core machine).
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from numba import njit

from ..errors import InputError
from ..model import scores
from . import simd
from .options import FUSED_LOSSES
from .result import NONFINITE, STOP_REASONS, GDResult
from .simd import (
    WIDTH,
    add,
    any_lane,
    both,
    div,
    eq,
    exp,
    fabs,
    fma,
    gt,
    lane,
    load,
    log,
    log1p,
    lt,
    mul,
    ne,
    neg,
    pow2,
    splat,
    split_exponent,
    sqrt,
    store,
    sub,
    where,
    with_lane,
)  # fmt: skip
from .spec import Job
from .summary import Recorder, fields, record_row

#: data sets per group: the innermost (SIMD) axis of every array of the kernel
LANES = WIDTH  # one f64x8 register (a batch is padded to a multiple of 8 with copies of its first data set)
#: the progress callback is called at least every 1/PROGRESS_PARTS of the run (and at the record steps)
PROGRESS_PARTS = 100
#: seconds of steps the kernel runs before it returns to Python (where a Ctrl-C is noticed and progress reported):
#: the length of each stretch of steps is measured on the previous ones (:class:`Stretches`)
STRETCH_SECONDS = 0.1
#: what :func:`run_fused` tells a progress object with a ``wait(text)`` method while the kernel is compiled (about 15 s,
#: once per install) or loaded from numba's cache (a fraction of a second: a display with a delay never shows it then)
COMPILING = "compiling or loading the GD kernel (compiling: about 15 s, once per install)"
#: the losses the kernel evaluates (:data:`~attsvm.gd.options.FUSED_LOSSES`), by code (``log|l'(u)|``: logistic
#: ``-softplus(u)``, exponential ``-u``, correlation 0, nll ``-log u``)
LOSS_CODES = {name: code for code, name in enumerate(FUSED_LOSSES)}
#: step-size schedules, by code (:func:`attsvm.gd.steps.step_size`)
SCHEDULE_CODES = {"constant": 0, "rsqrt": 1}

_TINY = float(np.finfo(np.float64).tiny)
_NEG_MAX = -float(np.finfo(np.float64).max)
_TWO1021 = 2.0**1021

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}


def cache_dir() -> Path:
    """Where the compiled kernel is cached: ``$NUMBA_CACHE_DIR`` when set, else ``attsvm/numba`` in the user's cache
    folder (``$XDG_CACHE_HOME``, default ``~/.cache``) — never inside the installed package, whose folder an
    uninstall would leave behind (numba's files are not in the package's record) as a namespace package that
    shadows a later install."""
    if numba.config.CACHE_DIR:
        return Path(numba.config.CACHE_DIR)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attsvm" / "numba"


def _simd_stamp() -> str:
    """A digest of :mod:`attsvm.gd.simd`'s source: numba's cache checks only the file of the cached function, and
    the kernel inlines simd's functions, so the cache lives in a folder named after simd's source (an edit of
    simd.py alone compiles afresh instead of loading stale code)."""
    return hashlib.sha256(Path(simd.__file__).read_bytes()).hexdigest()[:16]


def _kernel(fn=None, *, inline: bool = False, refcount: bool = True):
    """``numba.njit`` with :data:`_JIT`, its on-disk cache in :func:`cache_dir` (in a folder named after
    :func:`_simd_stamp`; numba picks the cache folder when a function is decorated: the setting is made for this
    decoration only, and other numba code keeps its own). ``refcount=False``: compiled without numba's reference
    counting (numba's ``_nrt=False``) — for the functions of the step, which allocate nothing and only borrow the
    arrays they are given: otherwise every call and array view costs atomic increments and decrements of the arrays'
    counts (about 5 % of the step's time)."""

    def deco(f):
        before = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = str(cache_dir() / f"simd-{_simd_stamp()}")
        opts = dict(_JIT, **({"inline": "always"} if inline else {}), **({} if refcount else {"_nrt": False}))
        try:
            return njit(**opts)(f)
        finally:
            numba.config.CACHE_DIR = before

    return deco if fn is None else deco(fn)


@_kernel
def exp_array(x: np.ndarray) -> np.ndarray:
    """:func:`attsvm.gd.simd.exp` of every entry of a 1-d array (for the tests)."""
    n = x.shape[0]
    m = -(-n // LANES)
    buf = np.zeros((m, LANES))
    out = np.empty((m, LANES))
    for j in range(n):
        buf[j // LANES, j % LANES] = x[j]
    for c in range(m):
        store(out, c, exp(load(buf, c)))
    res = np.empty(n)
    for j in range(n):
        res[j] = out[j // LANES, j % LANES]
    return res


@_kernel(inline=True)
def _log_neg_dloss(u, loss):
    r"""$\log|\ell'(u)|$ per lane (:func:`~attsvm.gd.model_torch.log_neg_loss_derivative_t`): logistic
    $-(m+\log(1+e^{u-2m}))$, $m=\max(u,0)$; exponential $-u$; correlation 0; nll $-\log u$."""
    zero = splat(0.0)
    if loss == 0:
        m = where(gt(u, zero), u, zero)
        return neg(add(m, log1p(exp(sub(u, add(m, m))))))
    if loss == 1:
        return neg(u)
    if loss == 2:
        return zero
    return neg(log(u))


@_kernel(refcount=False)
def _forward(W, X, Z, gam, gs, mask, g, has_mask, Wz, a, e, lz, gtop, u):
    r"""Forward pass of group ``g`` (of ``X``, ``Z``, ``gam``, ``gs``, ``mask``) at $W$ (d,d,8): ``a`` ← $\log s$
    (N,T,8), ``e`` ← $e^{a-\max a}$, ``lz`` ← $\log Z$, ``gtop`` ← the rescaled score ``gs`` at the first
    $\arg\max_ta_{it}$, ``u`` ← $u_i$ (:func:`~attsvm.gd.steps.forward`). Every sum runs in index order from $0$,
    one :data:`f64x8` accumulator per output held in a register, one FMA per term."""
    N, T, d = X.shape[1], X.shape[2], X.shape[3]
    zero = splat(0.0)
    ninf = splat(-np.inf)
    for i in range(N):
        j = 0
        while j + 4 <= d:  # four sums at once: independent chains keep both vector units busy
            s0 = s1 = s2 = s3 = zero
            for k in range(d):
                z = load(Z, (g, i, k))
                s0 = fma(z, load(W, (j, k)), s0)
                s1 = fma(z, load(W, (j + 1, k)), s1)
                s2 = fma(z, load(W, (j + 2, k)), s2)
                s3 = fma(z, load(W, (j + 3, k)), s3)
            store(Wz, j, s0)
            store(Wz, j + 1, s1)
            store(Wz, j + 2, s2)
            store(Wz, j + 3, s3)
            j += 4
        if j + 2 <= d:  # the rest: two chains, then one
            s0 = s1 = zero
            for k in range(d):
                z = load(Z, (g, i, k))
                s0 = fma(z, load(W, (j, k)), s0)
                s1 = fma(z, load(W, (j + 1, k)), s1)
            store(Wz, j, s0)
            store(Wz, j + 1, s1)
            j += 2
        if j < d:
            s = zero
            for k in range(d):
                s = fma(load(Z, (g, i, k)), load(W, (j, k)), s)
            store(Wz, j, s)
        t = 0
        while t + 4 <= T:
            s0 = s1 = s2 = s3 = zero
            for j in range(d):
                y = load(Wz, j)
                s0 = fma(load(X, (g, i, t, j)), y, s0)
                s1 = fma(load(X, (g, i, t + 1, j)), y, s1)
                s2 = fma(load(X, (g, i, t + 2, j)), y, s2)
                s3 = fma(load(X, (g, i, t + 3, j)), y, s3)
            store(a, (i, t), s0)
            store(a, (i, t + 1), s1)
            store(a, (i, t + 2), s2)
            store(a, (i, t + 3), s3)
            t += 4
        while t < T:
            s = zero
            for j in range(d):
                s = fma(load(X, (g, i, t, j)), load(Wz, j), s)
            store(a, (i, t), s)
            t += 1
        amax = ninf
        top = zero
        for t in range(T):
            s = load(a, (i, t))
            if has_mask:
                s = where(ne(load(mask, (g, i, t)), zero), s, ninf)
                store(a, (i, t), s)
            if t == 0:
                amax = s
                top = load(gs, (g, i, 0))
            else:
                up = gt(s, amax)
                amax = where(up, s, amax)
                top = where(up, load(gs, (g, i, t)), top)
        store(gtop, i, top)
        store(lz, i, amax)  # lz holds max_t a first, then the sum of the exps, then log Z
    # the rest in passes over all i: each pass's chains (exp, log) are independent across i and overlap
    for i in range(N):
        amax = load(lz, i)
        acc = zero
        for t in range(T):
            sh = sub(load(a, (i, t)), amax)
            store(a, (i, t), sh)
            ee = exp(sh)
            store(e, (i, t), ee)
            acc = add(acc, ee)
        store(lz, i, acc)
    for i in range(N):
        lzi = log(load(lz, i))
        store(lz, i, lzi)
        store(u, i, exp(neg(lzi)))  # u holds 1/Z = e^{-log Z} first, then u
    for i in range(N):
        lzi = load(lz, i)
        inv_z = load(u, i)
        acc = zero
        for t in range(T):
            store(a, (i, t), sub(load(a, (i, t)), lzi))
            acc = fma(mul(load(e, (i, t)), inv_z), load(gam, (g, i, t)), acc)
        store(u, i, acc)


@_kernel(refcount=False)
def _direction(Xs, Zs, gs, g, a, e, lz, gtop, u, loss, S, w, U, G):
    r"""$\hat G=2^{-e}\,e^{-M}\nabla\mathcal L(W)$ (d,d,8) of group ``g`` (of ``Xs``, ``Zs``, ``gs``) with
    $\max|\hat G|\in[\frac12,1)$, or 0 (log-domain token weights,
    :func:`~attsvm.gd.model_torch.token_weights_logdomain`, then $\sum_{i,t}\tilde\omega_{it}x_{it}z_i^\top$):
    $\delta_t=\hat\gamma_t-\hat\gamma_{t_1}$; $S=\log s+\log|\ell'|-\log Z$ off $A$ ($-\infty$ on $A$), $M=\max S$;
    $\rho_i=\sum_te^{S-M}\delta$; $\tilde\omega=(e^{S-M}e^{\log Z}\delta-e\,\rho)\cdot(-1/N)$. ``w`` holds $\delta$
    first, then the weights."""
    N, T, d = Xs.shape[1], Xs.shape[2], Xs.shape[3]
    zero = splat(0.0)
    ninf = splat(-np.inf)
    M = ninf
    for i in range(N):
        lc = add(_log_neg_dloss(load(u, i), loss), neg(load(lz, i)))
        g1 = load(gtop, i)
        for t in range(T):
            da = sub(load(gs, (g, i, t)), g1)
            v = add(where(ne(da, zero), load(a, (i, t)), ninf), lc)
            store(w, (i, t), da)
            store(S, (i, t), v)
            M = where(gt(v, M), v, M)
    M = where(gt(M, splat(_NEG_MAX)), M, splat(_NEG_MAX))
    inv_n = splat(-1.0 / N)
    for i in range(N):  # all exps first: independent chains that overlap
        for t in range(T):
            store(S, (i, t), exp(sub(load(S, (i, t)), M)))
    for i in range(N):
        rho = zero
        ez = exp(load(lz, i))
        for t in range(T):
            rho = fma(load(S, (i, t)), load(w, (i, t)), rho)
        for t in range(T):
            wt = sub(mul(mul(load(S, (i, t)), ez), load(w, (i, t))), mul(load(e, (i, t)), rho))
            store(w, (i, t), mul(wt, inv_n))
        j = 0
        while j + 4 <= d:
            s0 = s1 = s2 = s3 = zero
            for t in range(T):
                y = load(w, (i, t))
                s0 = fma(load(Xs, (g, i, t, j)), y, s0)
                s1 = fma(load(Xs, (g, i, t, j + 1)), y, s1)
                s2 = fma(load(Xs, (g, i, t, j + 2)), y, s2)
                s3 = fma(load(Xs, (g, i, t, j + 3)), y, s3)
            store(U, (i, j), s0)
            store(U, (i, j + 1), s1)
            store(U, (i, j + 2), s2)
            store(U, (i, j + 3), s3)
            j += 4
        if j + 2 <= d:
            s0 = s1 = zero
            for t in range(T):
                y = load(w, (i, t))
                s0 = fma(load(Xs, (g, i, t, j)), y, s0)
                s1 = fma(load(Xs, (g, i, t, j + 1)), y, s1)
            store(U, (i, j), s0)
            store(U, (i, j + 1), s1)
            j += 2
        if j < d:
            s = zero
            for t in range(T):
                s = fma(load(Xs, (g, i, t, j)), load(w, (i, t)), s)
            store(U, (i, j), s)
    for j in range(d):
        k = 0
        while k + 4 <= d:
            s0 = s1 = s2 = s3 = zero
            for i in range(N):
                x = load(U, (i, j))
                s0 = fma(x, load(Zs, (g, i, k)), s0)
                s1 = fma(x, load(Zs, (g, i, k + 1)), s1)
                s2 = fma(x, load(Zs, (g, i, k + 2)), s2)
                s3 = fma(x, load(Zs, (g, i, k + 3)), s3)
            store(G, (j, k), s0)
            store(G, (j, k + 1), s1)
            store(G, (j, k + 2), s2)
            store(G, (j, k + 3), s3)
            k += 4
        if k + 2 <= d:
            s0 = s1 = zero
            for i in range(N):
                x = load(U, (i, j))
                s0 = fma(x, load(Zs, (g, i, k)), s0)
                s1 = fma(x, load(Zs, (g, i, k + 1)), s1)
            store(G, (j, k), s0)
            store(G, (j, k + 1), s1)
            k += 2
        if k < d:
            s = zero
            for i in range(N):
                s = fma(load(U, (i, j)), load(Zs, (g, i, k)), s)
            store(G, (j, k), s)
    _normalise(G)


@_kernel(inline=True)
def _pow2_scales(A):
    r"""$2^{-e}$ per lane, $\max|A|=f2^{e}$, $f\in[\frac12,1)$, $e$ clamped to $[-1023,1074]$ (1 for an all-zero
    lane)."""
    p, q = A.shape[0], A.shape[1]
    mx = splat(0.0)
    for j in range(p):
        for k in range(q):
            x = fabs(load(A, (j, k)))
            mx = where(gt(x, mx), x, mx)
    _, k = split_exponent(mx)  # mx = 2^k m, m in [1, 2): e = k + 1, exact from the bits for a normal mx
    out = pow2(neg(add(k, splat(1.0))))
    odd = lt(mx, splat(_TINY))
    if any_lane(odd) or any_lane(gt(mx, splat(_TWO1021))) or any_lane(ne(mx, mx)):
        for ln in range(LANES):  # 0, subnormal, huge or not finite: frexp/ldexp lane by lane
            v = lane(mx, ln)
            if not (_TINY <= v < _TWO1021):
                sc = 1.0 if v == 0.0 else math.ldexp(1.0, -min(max(math.frexp(v)[1], -1023), 1074))
                out = with_lane(out, ln, sc)
    return out


@_kernel(refcount=False)
def _normalise(A):
    r"""$A\leftarrow2^{-e}A$ per lane with $\max|A|=f2^{e}$, $f\in[\frac12,1)$ (:func:`~attsvm.gd.numerics.normalise`;
    $e$ clamped to $[-1023,1074]$, an all-zero lane unchanged)."""
    sc = _pow2_scales(A)
    for j in range(A.shape[0]):
        for k in range(A.shape[1]):
            store(A, (j, k), mul(load(A, (j, k)), sc))


@_kernel(inline=True)
def _unit_factor(A, lr_k):
    r"""$\eta_k/\|A\|_F$ per lane, 0 where $A=0$ (:func:`~attsvm.gd.steps.unit_step`)."""
    ss = splat(0.0)
    for j in range(A.shape[0]):
        for k in range(A.shape[1]):
            x = load(A, (j, k))
            ss = fma(x, x, ss)
    nrm = sqrt(ss)
    return where(gt(nrm, splat(0.0)), div(lr_k, where(gt(nrm, splat(_TINY)), nrm, splat(_TINY))), splat(0.0))


@_kernel(refcount=False)
def _corr(A, Tn, tnorm):
    r"""$\mathrm{corr}(A,T)$ per lane, with ``Tn`` the power-of-two normalised target and ``tnorm`` its norm
    (:func:`~attsvm.gd.model_torch.corr_t`)."""
    sc = _pow2_scales(A)
    dot = splat(0.0)
    nn = splat(0.0)
    for j in range(A.shape[0]):
        for k in range(A.shape[1]):
            x = mul(load(A, (j, k)), sc)
            dot = fma(x, load(Tn, (j, k)), dot)
            nn = fma(x, x, nn)
    return div(dot, mul(sqrt(nn), tnorm))


@_kernel(inline=True)
def _nonfinite_sum(A, acc):
    r"""``acc`` $+\sum(A-A)$: 0 where every entry of the lane is finite, NaN otherwise."""
    for j in range(A.shape[0]):
        for k in range(A.shape[1]):
            x = load(A, (j, k))
            acc = add(acc, sub(x, x))
    return acc


@_kernel(refcount=False)
def _finite_code(P1, P2, u, loss):
    """Per lane the :data:`~attsvm.gd.result.NONFINITE` code, as a float: 1 parameters, 2 outputs, 3 the loss, 0
    finite."""
    zero = splat(0.0)
    fp = _nonfinite_sum(P2, _nonfinite_sum(P1, zero))
    fu = zero
    for i in range(u.shape[0]):
        x = load(u, i)
        fu = add(fu, sub(x, x))
    code = where(ne(fp, zero), splat(1.0), where(ne(fu, zero), splat(2.0), zero))
    if loss == 1:  # exponential loss: sum_i e^{-u_i} may overflow where u is finite
        for ln in range(LANES):
            if lane(code, ln) == 0.0:
                lsum = 0.0
                for i in range(u.shape[0]):
                    lsum += math.exp(-u[i, ln])
                if not math.isfinite(lsum):
                    code = with_lane(code, ln, 3.0)
    return code


@_kernel(refcount=False)
def _attention(kq, P1, P2, Wb):
    r"""``Wb`` ← $W$: ``P1`` itself, or $KQ^\top$ for ``kq`` (:func:`~attsvm.gd.steps.W_of`)."""
    d = Wb.shape[0]
    if not kq:
        for j in range(d):
            for k in range(d):
                store(Wb, (j, k), load(P1, (j, k)))
        return
    m = P1.shape[1]
    zero = splat(0.0)
    for j in range(d):
        k = 0
        while k + 4 <= d:
            s0 = s1 = s2 = s3 = zero
            for r in range(m):
                x = load(P1, (j, r))
                s0 = fma(x, load(P2, (k, r)), s0)
                s1 = fma(x, load(P2, (k + 1, r)), s1)
                s2 = fma(x, load(P2, (k + 2, r)), s2)
                s3 = fma(x, load(P2, (k + 3, r)), s3)
            store(Wb, (j, k), s0)
            store(Wb, (j, k + 1), s1)
            store(Wb, (j, k + 2), s2)
            store(Wb, (j, k + 3), s3)
            k += 4
        if k + 2 <= d:
            s0 = s1 = zero
            for r in range(m):
                x = load(P1, (j, r))
                s0 = fma(x, load(P2, (k, r)), s0)
                s1 = fma(x, load(P2, (k + 1, r)), s1)
            store(Wb, (j, k), s0)
            store(Wb, (j, k + 1), s1)
            k += 2
        if k < d:
            s = zero
            for r in range(m):
                s = fma(load(P1, (j, r)), load(P2, (k, r)), s)
            store(Wb, (j, k), s)


@_kernel(refcount=False)
def _product(G, F, out, transpose):
    r"""``out`` ← $\hat GF$ (or $\hat G^\top F$): the factor gradients $\hat GQ$, $\hat G^\top K$."""
    d, m = F.shape[0], F.shape[1]
    zero = splat(0.0)
    for j in range(d):
        r = 0
        while r + 4 <= m:
            s0 = s1 = s2 = s3 = zero
            for k in range(d):
                x = load(G, (k, j)) if transpose else load(G, (j, k))
                s0 = fma(x, load(F, (k, r)), s0)
                s1 = fma(x, load(F, (k, r + 1)), s1)
                s2 = fma(x, load(F, (k, r + 2)), s2)
                s3 = fma(x, load(F, (k, r + 3)), s3)
            store(out, (j, r), s0)
            store(out, (j, r + 1), s1)
            store(out, (j, r + 2), s2)
            store(out, (j, r + 3), s3)
            r += 4
        if r + 2 <= m:
            s0 = s1 = zero
            for k in range(d):
                x = load(G, (k, j)) if transpose else load(G, (j, k))
                s0 = fma(x, load(F, (k, r)), s0)
                s1 = fma(x, load(F, (k, r + 1)), s1)
            store(out, (j, r), s0)
            store(out, (j, r + 1), s1)
            r += 2
        if r < m:
            s = zero
            for k in range(d):
                x = load(G, (k, j)) if transpose else load(G, (j, k))
                s = fma(x, load(F, (k, r)), s)
            store(out, (j, r), s)


@_kernel(inline=True)
def _move(P, D, fac, out):
    r"""``out`` ← $P-\mathrm{fac}\cdot D$ per lane (the step of :func:`~attsvm.gd.steps.unit_step`), exactly $P$
    where ``fac`` is 0 (a frozen or zero-direction factor keeps its bits, signed zeros included)."""
    frozen = eq(fac, splat(0.0))
    for j in range(P.shape[0]):
        for k in range(P.shape[1]):
            p = load(P, (j, k))
            store(out, (j, k), where(frozen, p, sub(p, mul(fac, load(D, (j, k))))))


@_kernel(inline=True)
def _take(act, src, dst):
    """``dst`` ← ``src`` in the lanes where ``act`` is true."""
    for j in range(src.shape[0]):
        for k in range(src.shape[1]):
            store(dst, (j, k), where(act, load(src, (j, k)), load(dst, (j, k))))


@_kernel
def _groups(
    g0, g1, kq, P1, P2, X, Z, gam, Xs, Zs, gs, mask, has_mask, lr, schedule, loss, k0, k1, tgt, thr,
    active, taken, reason, nf_code, nf_step, logs_out, u_out,
):  # fmt: skip
    r"""Updates $k_0,\dots,k_1-1$ of groups $g_0\le g<g_1$ in place (the forward pass on ``X``, ``Z``, ``gam``,
    the direction on their power-of-two rescalings ``Xs``, ``Zs``, ``gs``). ``kq``: ``P1``, ``P2`` are $(K,Q)$
    (d,m,8) per group, else ``P1`` is $W$ (``P2`` unused). ``tgt`` (G,d,d,8) normalised first target and ``thr`` the
    ``target_corr`` threshold (``thr`` > 1: no rule), checked before every update and at $k_1$ (as the engine's loop
    does at each $k$). ``active`` etc.: the engine's per-data-set stop state, (G,8)."""
    N, T, d = X.shape[1], X.shape[2], X.shape[3]
    m = P1.shape[2] if kq else d
    Wb, Wz, a, e, lz, gtop, u = _forward_scratch(N, T, d)
    _steps(
        g0, g1, kq, P1, P2, X, Z, gam, Xs, Zs, gs, mask, has_mask, lr, schedule, loss, k0, k1, tgt, thr,
        active, taken, reason, nf_code, nf_step, logs_out, u_out,
        Wb, Wz, a, e, lz, gtop, u,
        np.empty((N, T, LANES)), np.empty((N, T, LANES)), np.empty((N, d, LANES)), np.empty((d, d, LANES)),
        np.empty((d, m, LANES)), np.empty((d, m, LANES)),
        np.empty((P1.shape[1], P1.shape[2], LANES)), np.empty((P2.shape[1], P2.shape[2], LANES)),
    )  # fmt: skip


@_kernel(refcount=False)
def _steps(
    g0, g1, kq, P1, P2, X, Z, gam, Xs, Zs, gs, mask, has_mask, lr, schedule, loss, k0, k1, tgt, thr,
    active, taken, reason, nf_code, nf_step, logs_out, u_out,
    Wb, Wz, a, e, lz, gtop, u, S, w, U, G, gK, gQ, n1, n2,
):  # fmt: skip
    """:func:`_groups` with its work arrays given (allocated by :func:`_groups`)."""
    N, T, d = X.shape[1], X.shape[2], X.shape[3]
    check = thr <= 1.0
    zero = splat(0.0)
    for g in range(g0, g1):
        c1, c2 = P1[g], P2[g]
        act = active[g]
        actv = zero  # 1 in the active lanes, else 0 (act as a vector)
        takenv = zero  # taken[g] as a vector (exact integers), written back after the group's steps
        for ln in range(LANES):
            if act[ln]:
                actv = with_lane(actv, ln, 1.0)
            takenv = with_lane(takenv, ln, float(taken[g, ln]))
        tn = zero
        if check:
            for j in range(d):
                for k in range(d):
                    x = load(tgt, (g, j, k))
                    tn = fma(x, x, tn)
            tn = sqrt(tn)
        _attention(kq, c1, c2, Wb)
        _forward(Wb, X, Z, gam, gs, mask, g, has_mask, Wz, a, e, lz, gtop, u)
        for k in range(k0, k1 + 1):
            if check:
                cr = _corr(Wb, tgt[g], tn)
                for ln in range(LANES):
                    if act[ln] and lane(cr, ln) >= thr:
                        act[ln] = False
                        reason[g, ln] = 2
                        actv = with_lane(actv, ln, 0.0)
            if k == k1:
                break
            if not any_lane(ne(actv, zero)):
                break
            lr_k = load(lr, g) if schedule == 0 else div(load(lr, g), splat(math.sqrt(k + 1)))
            _direction(Xs, Zs, gs, g, a, e, lz, gtop, u, loss, S, w, U, G)
            if kq:
                _product(G, c2, gK, False)
                _product(G, c1, gQ, True)
                _normalise(gK)
                _normalise(gQ)
                f1 = _unit_factor(gK, lr_k)
                f2 = _unit_factor(gQ, lr_k)
            else:
                f1 = _unit_factor(G, lr_k)
                f2 = zero
            live = ne(actv, zero)
            if any_lane(both(live, both(eq(f1, zero), eq(f2, zero)))):  # the direction is exactly zero
                for ln in range(LANES):
                    if act[ln] and lane(f1, ln) == 0.0 and lane(f2, ln) == 0.0:
                        act[ln] = False
                        reason[g, ln] = 1
                        actv = with_lane(actv, ln, 0.0)
                live = ne(actv, zero)
            f1 = where(live, f1, zero)
            f2 = where(live, f2, zero)
            if kq:
                _move(c1, gK, f1, n1)
                _move(c2, gQ, f2, n2)
            else:
                _move(c1, G, f1, n1)
            _attention(kq, n1, n2 if kq else c2, Wb)
            _forward(Wb, X, Z, gam, gs, mask, g, has_mask, Wz, a, e, lz, gtop, u)
            code = _finite_code(n1, n2 if kq else n1, u, loss)
            bad = any_lane(both(ne(actv, zero), gt(code, zero)))
            if bad:  # the proposed iterate overflowed: the run stops at its last one
                for ln in range(LANES):
                    if act[ln] and lane(code, ln) > 0.0:
                        act[ln] = False
                        reason[g, ln] = 3
                        nf_code[g, ln] = int(lane(code, ln))
                        nf_step[g, ln] = k + 1
                        actv = with_lane(actv, ln, 0.0)
            takenv = add(takenv, actv)
            moved = ne(actv, zero)
            _take(moved, n1, c1)
            if kq:
                _take(moved, n2, c2)
            if bad:  # back to the last finite iterate of the stopped lanes (the others moved on)
                _attention(kq, c1, c2, Wb)
                _forward(Wb, X, Z, gam, gs, mask, g, has_mask, Wz, a, e, lz, gtop, u)
        for ln in range(LANES):
            taken[g, ln] = int(lane(takenv, ln))
        for i in range(N):
            store(u_out, (g, i), load(u, i))
            for t in range(T):
                store(logs_out, (g, i, t), load(a, (i, t)))


@_kernel
def _forward_scratch(N, T, d):
    r"""Work arrays of :func:`_forward` for one group: $W$, $Wz$, $\log s$, $e$, $\log Z$, the top score, $u$."""
    return (
        np.empty((d, d, LANES)),
        np.empty((d, LANES)),
        np.empty((N, T, LANES)),
        np.empty((N, T, LANES)),
        np.empty((N, LANES)),
        np.empty((N, LANES)),
        np.empty((N, LANES)),
    )


@_kernel
def _initial_codes(kq, P1, P2, X, Z, gam, gs, mask, has_mask, loss, codes):
    """``codes`` (G,8) ← the :func:`_finite_code` of every initial point."""
    N, T, d = X.shape[1], X.shape[2], X.shape[3]
    Wb, Wz, a, e, lz, gtop, u = _forward_scratch(N, T, d)
    for g in range(X.shape[0]):
        _attention(kq, P1[g], P2[g], Wb)
        _forward(Wb, X, Z, gam, gs, mask, g, has_mask, Wz, a, e, lz, gtop, u)
        code = _finite_code(P1[g], P2[g] if kq else P1[g], u, loss)
        for ln in range(LANES):
            codes[g, ln] = int(lane(code, ln))


# ---------------------------------------------------------------------- the Python side
def pow2_normalised(a: np.ndarray) -> np.ndarray:
    r"""Each data set of ``a`` (B, ...) times $2^{-e_b}$, $\max|a_b|=f2^{e_b}$, $f\in[\frac12,1)$ (exact; an all-zero
    data set unchanged): the data of the direction, which is scale-free (:func:`~attsvm.gd.numerics.range_scaled`
    rescales the same way, only when out of range — the same normalised direction either way)."""
    a = np.asarray(a, dtype=np.float64)
    m = np.max(np.abs(a.reshape(a.shape[0], -1)), axis=-1)
    e = np.frexp(m)[1]
    return np.ldexp(a, -e.reshape(-1, *([1] * (a.ndim - 1))))


def to_lanes(a: np.ndarray, groups: int, lanes: int = LANES) -> np.ndarray:
    """(B, ...) → (G, ..., L): the batch padded with copies of its first data set, grouped, lanes last."""
    a = np.asarray(a)
    pad = groups * lanes - a.shape[0]
    if pad:
        a = np.concatenate([a, np.repeat(a[:1], pad, axis=0)])
    return np.ascontiguousarray(np.moveaxis(a.reshape(groups, lanes, *a.shape[1:]), 1, -1))


def from_lanes(a: np.ndarray, B: int) -> np.ndarray:
    """The inverse of :func:`to_lanes`: (G, ..., L) → (B, ...)."""
    a = np.moveaxis(a, -1, 1)
    return np.ascontiguousarray(a.reshape(a.shape[0] * a.shape[1], *a.shape[2:])[:B])


@dataclass
class State:
    """A fused run in progress: parameters, the stop state and the final forward pass, in lane layout."""

    kq: bool
    P1: np.ndarray
    P2: np.ndarray
    X: np.ndarray
    Z: np.ndarray
    gam: np.ndarray
    Xs: np.ndarray
    Zs: np.ndarray
    gs: np.ndarray
    mask: np.ndarray
    has_mask: bool
    lr: np.ndarray
    schedule: int
    loss: int
    tgt: np.ndarray
    thr: float
    active: np.ndarray
    taken: np.ndarray
    reason: np.ndarray
    nf_code: np.ndarray
    nf_step: np.ndarray
    logs: np.ndarray
    u: np.ndarray
    B: int

    @classmethod
    def start(cls, X, Z, gamma, mask, theta: dict, lr, *, schedule: str, loss: str, target, stop_corr) -> State:
        """From flat-view arrays with a leading batch axis (``X`` (B,N,T,d), ``Z`` (B,N,d), ``gamma`` (B,N,T),
        ``mask`` or None, ``theta`` {"W"} or {"K","Q"} (B,...), ``lr`` (B,)) and an optional first target (B,d,d)
        with its ``stop_corr``."""
        B, N, T, d = X.shape
        Ln = LANES
        Gn = -(-B // Ln)
        lanes = lambda a: to_lanes(a, Gn, Ln)  # noqa: E731
        kq = "K" in theta
        P1 = lanes(theta["K"] if kq else theta["W"]).astype(np.float64)
        P2 = lanes(theta["Q"]).astype(np.float64) if kq else np.zeros((Gn, 1, 1, Ln))
        msk = np.ones((Gn, N, T, Ln)) if mask is None else lanes(np.asarray(mask, bool).astype(np.float64))
        if target is None or stop_corr is None:
            tgt, thr = np.zeros((Gn, d, d, Ln)), 2.0
        else:
            tgt, thr = lanes(pow2_normalised(target)), 1.0 - float(stop_corr)
        zeros = lambda dt: np.zeros((Gn, Ln), dtype=dt)  # noqa: E731
        return cls(
            kq=kq,
            P1=P1,
            P2=P2,
            X=lanes(X).astype(np.float64),
            Z=lanes(Z).astype(np.float64),
            gam=lanes(gamma).astype(np.float64),
            Xs=lanes(pow2_normalised(X)),
            Zs=lanes(pow2_normalised(Z)),
            gs=lanes(pow2_normalised(gamma)),
            mask=msk,
            has_mask=mask is not None,
            lr=lanes(np.asarray(lr, np.float64)),
            schedule=SCHEDULE_CODES[schedule],
            loss=LOSS_CODES[loss],
            tgt=tgt,
            thr=thr,
            active=np.ones((Gn, Ln), dtype=np.bool_),
            taken=zeros(np.int64),
            reason=zeros(np.int64),
            nf_code=zeros(np.int64),
            nf_step=np.full((Gn, Ln), -1, dtype=np.int64),
            logs=np.zeros((Gn, N, T, Ln)),
            u=np.zeros((Gn, N, Ln)),
            B=B,
        )

    def advance(self, k0: int, k1: int, threads: int = 1) -> None:
        """Updates $k_0,\\dots,k_1-1$ of every active data set (then the ``target_corr`` check at $k_1$), on
        ``threads`` Python threads over contiguous ranges of groups."""
        Gn = self.P1.shape[0]
        nt = max(1, min(int(threads), Gn))
        cuts = [Gn * j // nt for j in range(nt + 1)]

        def part(j: int) -> None:
            _groups(
                cuts[j], cuts[j + 1], self.kq, self.P1, self.P2, self.X, self.Z, self.gam, self.Xs, self.Zs, self.gs,
                self.mask,
                self.has_mask, self.lr, self.schedule, self.loss, k0, k1, self.tgt, self.thr,
                self.active, self.taken, self.reason, self.nf_code, self.nf_step, self.logs, self.u,
            )  # fmt: skip

        if nt == 1:
            part(0)
            return
        with ThreadPoolExecutor(nt) as ex:
            list(ex.map(part, range(nt)))

    def initial_codes(self) -> np.ndarray:
        """(B,) :data:`~attsvm.gd.result.NONFINITE` codes of the initial points (0: finite)."""
        codes = np.zeros(self.active.shape, dtype=np.int64)
        _initial_codes(
            self.kq, self.P1, self.P2, self.X, self.Z, self.gam, self.gs, self.mask, self.has_mask, self.loss, codes
        )
        return from_lanes(codes, self.B)

    def any_active(self) -> bool:
        return bool(from_lanes(self.active, self.B).any())

    def last_iteration(self) -> int:
        """The iteration at which the engine's loop ends once every data set has stopped: a data set stopped by
        ``underflow`` or ``non-finite`` at update $k$ is seen stopped at $k+1$, by ``target_corr`` at $k$ itself."""
        st = self.stops()
        return int(np.max(st["taken"] + (st["reason"] != 2)))

    def params(self) -> dict[str, np.ndarray]:
        """The current iterate, (B, ...) per factor."""
        if self.kq:
            return {"K": from_lanes(self.P1, self.B), "Q": from_lanes(self.P2, self.B)}
        return {"W": from_lanes(self.P1, self.B)}

    def stops(self) -> dict[str, np.ndarray]:
        """(B,) arrays ``taken``, ``reason``, ``nf_code``, ``nf_step``, ``active``."""
        names = ("taken", "reason", "nf_code", "nf_step", "active")
        return {k: from_lanes(getattr(self, k), self.B) for k in names}

    def outputs(self) -> tuple[np.ndarray, np.ndarray]:
        """$\\log s$ (B,N,T) and $u$ (B,N) at the current iterate."""
        return from_lanes(self.logs, self.B), from_lanes(self.u, self.B)


def kernel_ready() -> bool:
    """Whether this process holds the kernel's machine code already (compiled, or loaded from numba's cache in
    :func:`cache_dir`); before the first fused run of a process the first calls compile or load it."""
    return bool(_initial_codes.signatures) and bool(_groups.signatures)


class Stretches:
    r"""The lengths of the stretches of steps :func:`run_fused` hands to the compiled kernel between returns to
    Python, where a Ctrl-C is noticed and the progress reported: about ``seconds`` (:data:`STRETCH_SECONDS`) of
    work each, by the time per step measured on the previous stretches — the first is one step, and a stretch is
    at most 4 times the longest before it (a first stretch that compiled the kernel, or a slow one, does not make
    the next one long). Only the lengths depend on the clock: :meth:`State.advance` over $[k_0,k_1)$ and then
    $[k_1,k_2)$ computes what it computes over $[k_0,k_2)$, bit for bit (tested), so the iterates do not depend on
    them."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = float(STRETCH_SECONDS if seconds is None else seconds)
        self.length = 1  # the next stretch's length
        self._longest = 1

    def took(self, steps: int, seconds: float) -> None:
        """Record that ``steps`` steps took ``seconds``; sets :attr:`length` for the next stretch."""
        if steps <= 0:
            return
        self._longest = max(self._longest, int(steps))
        fit = self.seconds * steps / seconds if seconds > 0 else math.inf
        self.length = int(max(1, min(fit, 4 * self._longest)))


def run_fused(job: Job, threads: int, progress: Callable[[int, int], None] | None, t0: float) -> GDResult:
    """:func:`attsvm.gd.run` of a validated ``job`` on the fused kernel (``threads`` Python threads); records
    (:func:`attsvm.gd.summary.fields` of the kernel's own forward pass at the record steps — the definition of the
    final fields too, so recording changes no reported number) and the progress callback at segment boundaries
    — the iterates do not depend on either. The
    kernel returns to Python after every stretch of about :data:`STRETCH_SECONDS` of steps (:class:`Stretches`),
    so a Ctrl-C stops a run of any length within a fraction of a second, and the progress callback is called
    there too (at least every 1/:data:`PROGRESS_PARTS` of the run). A ``progress`` object with a method
    ``wait(text)`` is told :data:`COMPILING` before the first calls of a process that has not the kernel's code
    yet (:func:`kernel_ready`), so that a display shows that instead of an estimate of the time left."""
    job.check_ranges()
    if progress is not None and not kernel_ready() and callable(getattr(progress, "wait", None)):
        progress.wait(COMPILING)  # type: ignore[attr-defined]
    ds, steps = job.ds, job.steps
    f = ds.flat()
    lead = (lambda a: np.asarray(a)) if ds.batched else (lambda a: np.asarray(a)[None])  # noqa: E731
    X, Y, Z, v = (lead(a).astype(np.float64) for a in (f.X, f.Y, f.Z, f.v))
    opt = lead(np.asarray(ds.opt).reshape(np.shape(f.Y)))
    gamma = lead(ds.scores).astype(np.float64) if job.loss == "nll" else scores(X, Y, v)
    mask = None if f.mask is None else lead(f.mask)
    first = next(iter(job.targets), None)
    target = None if first is None else job.targets[first]
    st = State.start(
        X, Z, gamma, mask, job.init, job.lr, schedule=job.settings.schedule, loss=job.loss, target=target,
        stop_corr=job.stop_corr,
    )  # fmt: skip
    code0 = st.initial_codes()
    if np.any(code0 > 0):
        b = int(np.argmax(code0 > 0))
        where = f" (data set {b})" if ds.batched else ""
        raise InputError(
            f"init{where}: {NONFINITE[int(code0[b])]} at the initial point (float64); rescale the data or change init"
        )
    rec = None
    if job.record_every is not None:
        pshapes = {k: tuple(a.shape[1:]) for k, a in job.init.items()} if job.record_params else {}
        if job.record_params and job.param == "KQ":
            pshapes["W"] = (X.shape[-1], X.shape[-1])
        rec = Recorder(job.record_every, steps, X.shape[0], X.shape[1], list(job.targets), pshapes)

    def summary_now() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
        th = st.params()
        W = th["W"] if "W" in th else np.matmul(th["K"], np.swapaxes(th["Q"], -1, -2))
        logs, u = st.outputs()
        return fields(logs, u, W, opt, job.loss), th, W

    every = job.record_every
    if rec is not None:  # the forward pass of the initial point, for row 0 (no update: k0 = k1)
        st.advance(0, 0, threads)
    part = max(1, -(-steps // PROGRESS_PARTS))
    stretch = Stretches()

    def boundary(k: int) -> None:
        if progress is not None:
            progress(k, steps)
        if rec is not None and k % every == 0:
            vals, th, W = summary_now()
            rec.add(k, record_row(vals, W, job.targets, th if job.record_params else None, job.param == "KQ"))

    k = 0
    while True:
        boundary(k)
        nxt = min(steps, k + stretch.length)
        if every is not None:
            nxt = min(nxt, (k // every + 1) * every)
        if progress is not None:
            nxt = min(nxt, (k // part + 1) * part)
        nxt = max(nxt, k)
        t = time.perf_counter()
        st.advance(k, nxt, threads)
        stretch.took(nxt - k, time.perf_counter() - t)
        if k == steps:
            break
        if not st.any_active():
            end = st.last_iteration()
            if end == nxt:
                boundary(nxt)
            elif end > k and progress is not None:
                progress(end, steps)
            break
        k = nxt
    final, th, W = summary_now()  # the same summaries as a record row's: recording changes no number
    stp = st.stops()
    return GDResult(
        param=job.param,
        algo=job.settings.algo,
        W=W,
        K=th.get("K"),
        Q=th.get("Q"),
        p=None,
        v=None,
        **final,
        steps=stp["taken"],
        stop_reason=[STOP_REASONS[i] for i in stp["reason"].tolist()],
        trajectory={} if rec is None else rec.result(),
        seconds=time.perf_counter() - t0,
        lr=job.lr,
        nonfinite=[NONFINITE[i] for i in stp["nf_code"].tolist()],
        nonfinite_step=stp["nf_step"],
        settings=job.settings,
        kernel="fused",
    )
