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
per-kernel overhead (docs/gd.md, "Speed of the step"). Here a group of :data:`LANES` data sets stays in the cache
for the whole run, and every operation runs across the group: the data sets are the innermost (SIMD) axis, so each
data set's arithmetic is the plain sequential formula, independent of its neighbours (no reassociation, no
fused multiply-add contraction). A run's numbers therefore do not depend on the batch, its order, the group it
falls in, the shards or the threads.

**Numbers.** The same formulas as the torch engine in the same order, but not the same bits: ``exp`` is
:func:`exp_lanes` (fdlibm's reduction and minimax polynomial, $<1$ ulp, vectorisable) where torch uses SLEEF,
and sums run in plain sequential order where torch's reductions use its own. The two agree to
``tol("batch_rtol")`` over short runs and both agree with the 50-digit replay (:func:`attsvm.highprec.replay`)
to ``tol("replay_rtol")`` (tested).

Threads: the groups are split into ``threads`` contiguous ranges run on Python threads (the kernel releases the
GIL; no threading layer of numba is used, so a forked worker is safe). Compiled code is cached on disk by numba in
:func:`cache_dir`: the first run after an install compiles the kernel (about 15 s on a 2-core machine).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ..errors import InputError
from ..model import scores
from .options import FUSED_LOSSES
from .result import NONFINITE, STOP_REASONS, GDResult
from .spec import Job
from .summary import Recorder, fields, record_row

#: data sets per group: the innermost (SIMD) axis of every array of the kernel
LANES = 32  # (a batch of fewer data sets is one group of that many lanes: no padded work)
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

# fdlibm's exp (e_exp.c): ln 2 split in a high part with trailing zero bits and the rest, and the minimax
# coefficients of R(r^2) on [0, (ln 2 / 2)^2] (error below 2^-59)
_INVLN2 = 1.44269504088896338700e00
_LN2HI = 6.93147180369123816490e-01
_LN2LO = 1.90821492927058770002e-10
_P1 = 1.66666666666666019037e-01
_P2 = -2.77777777770155933842e-03
_P3 = 6.61375632143793436117e-05
_P4 = -1.65339022054652515390e-06
_P5 = 4.13813679705723846039e-08
_TWOM1000 = 2.0**-1000

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


def _kernel(fn=None, *, inline: bool = False):
    """``numba.njit`` with :data:`_JIT`, its on-disk cache in :func:`cache_dir` (numba picks the cache folder when a
    function is decorated: the setting is made for this decoration only, and other numba code keeps its own)."""

    def deco(f):
        before = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = str(cache_dir())
        try:
            return njit(**({"inline": "always"} if inline else {}), **_JIT)(f)
        finally:
            numba.config.CACHE_DIR = before

    return deco if fn is None else deco(fn)


@intrinsic
def _f64_from_bits(typingctx, bits):
    """The float64 whose IEEE bit pattern is the int64 ``bits`` (an LLVM bitcast)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@_kernel(inline=True)
def exp_lanes(x: float) -> float:
    r"""$e^x$ for $x\le709$ or $x=-\infty$, within 1 ulp (fdlibm's algorithm), written without branches so that a
    loop over data sets vectorises: $x=k\ln2+r$, $|r|\le\frac12\ln2$ (Cody–Waite, $\ln2$ in two parts),
    $e^r=1+r+\frac{rc(r)}{2-c(r)}$ with $c(r)=r-r^2R(r^2)$, then $2^k$ from its bits — in two exact factors
    ($2^{k+1000}\cdot2^{-1000}$) when the result is subnormal, so it is rounded once. $e^0=1$ exactly; $x<-745.2$
    gives 0. (Checked against 50-digit mpmath in the tests.)"""
    x = min(max(x, -746.0), 709.0)
    kf = np.floor(x * _INVLN2 + 0.5)
    hi = x - kf * _LN2HI
    lo = kf * _LN2LO
    r = hi - lo
    t = r * r
    c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    sub = kf < -1020.0
    k1 = kf + 1000.0 if sub else kf
    return y * _f64_from_bits((np.int64(k1) + 1023) << 52) * (_TWOM1000 if sub else 1.0)


@_kernel
def exp_array(x: np.ndarray) -> np.ndarray:
    """:func:`exp_lanes` of every entry of a 1-d array (for the tests)."""
    out = np.empty_like(x)
    for j in range(x.shape[0]):
        out[j] = exp_lanes(x[j])
    return out


@_kernel
def _forward(W, X, Z, gam, mask, has_mask, Wz, a, e, lz, top, u, amax, acc):
    r"""Forward pass of one group at $W$ (d,d,L): ``a`` ← $\log s$ (N,T,L), ``e`` ← $e^{a-\max a}$, ``lz`` ←
    $\log Z$, ``top`` ← the first $\arg\max_ta_{it}$, ``u`` ← $u_i$ (:func:`~attsvm.gd.steps.forward`)."""
    N, T, d, L = X.shape
    for i in range(N):
        for j in range(d):
            _zero(Wz[i, j])
            for k in range(d):
                _fma(Wz[i, j], Z[i, k], W[j, k])
        for t in range(T):
            _zero(a[i, t])
            for j in range(d):
                _fma(a[i, t], X[i, t, j], Wz[i, j])
            if has_mask:
                _masked(a[i, t], mask[i, t])
        for ln in range(L):
            amax[ln] = a[i, 0, ln]
            top[i, ln] = 0
        for t in range(1, T):
            for ln in range(L):
                if a[i, t, ln] > amax[ln]:
                    amax[ln] = a[i, t, ln]
                    top[i, ln] = t
        _zero(acc)
        for t in range(T):
            _shift_exp(a[i, t], amax, e[i, t], acc)
        for ln in range(L):
            lz[i, ln] = math.log(acc[ln])
        for ln in range(L):
            amax[ln] = exp_lanes(-lz[i, ln])
        _zero(acc)
        for t in range(T):
            _log_softmax(a[i, t], lz[i])
            _output(e[i, t], amax, gam[i, t], acc)
        for ln in range(L):
            u[i, ln] = acc[ln]


@_kernel(inline=True)
def _masked(a, mask):
    for ln in range(a.shape[0]):
        a[ln] = a[ln] if mask[ln] else -np.inf


@_kernel(inline=True)
def _shift_exp(a, amax, e, acc):
    r"""$a\leftarrow a-\max a$, $e=e^{a}$, ``acc`` += $e$."""
    for ln in range(a.shape[0]):
        sh = a[ln] - amax[ln]
        a[ln] = sh
        ee = exp_lanes(sh)
        e[ln] = ee
        acc[ln] = acc[ln] + ee


@_kernel(inline=True)
def _log_softmax(a, lz):
    for ln in range(a.shape[0]):
        a[ln] = a[ln] - lz[ln]


@_kernel(inline=True)
def _output(e, inv_z, g, acc):
    r"""``acc`` += $s\gamma$ with $s=e\cdot e^{-\log Z}$."""
    for ln in range(e.shape[0]):
        acc[ln] = acc[ln] + e[ln] * inv_z[ln] * g[ln]


@_kernel
def _log_neg_dloss(u, loss):
    r"""$\log|\ell'(u)|$ (:func:`~attsvm.gd.model_torch.log_neg_loss_derivative_t`)."""
    if loss == 0:
        m = max(u, 0.0)
        return -(m + math.log1p(exp_lanes(u - 2.0 * m)))
    if loss == 1:
        return -u
    if loss == 2:
        return 0.0
    return -math.log(u)


@_kernel
def _direction(X, Z, gam, a, e, lz, top, u, loss, S, w, U, G, M, scale, lc):
    r"""$\hat G=2^{-e}\,e^{-M}\nabla\mathcal L(W)$ (d,d,L) with $\max|\hat G|\in[\frac12,1)$, or 0 (log-domain token
    weights, :func:`~attsvm.gd.model_torch.token_weights_logdomain`, then $\sum_{i,t}\tilde\omega_{it}x_{it}z_i^\top$).
    ``w`` holds $\delta_t=\hat\gamma_t-\hat\gamma_{t_1}$ first, then the weights."""
    N, T, d, L = X.shape
    for ln in range(L):
        M[ln] = -np.inf
    for i in range(N):
        for ln in range(L):
            lc[ln] = _log_neg_dloss(u[i, ln], loss) + (-lz[i, ln])
            scale[ln] = gam[i, top[i, ln], ln]
        for t in range(T):
            _pair_logs(gam[i, t], scale, a[i, t], lc, w[i, t], S[i, t], M)
    for ln in range(L):
        M[ln] = M[ln] if M[ln] > _NEG_MAX else _NEG_MAX
    inv_n = -1.0 / N
    for i in range(N):
        for ln in range(L):
            lc[ln] = 0.0  # rho_i
            scale[ln] = exp_lanes(lz[i, ln])
        for t in range(T):
            _pair_exp(S[i, t], M, w[i, t], lc)
        for t in range(T):
            _weight(S[i, t], scale, w[i, t], e[i, t], lc, inv_n)
        for j in range(d):
            _zero(U[i, j])
            for t in range(T):
                _fma(U[i, j], X[i, t, j], w[i, t])
    for j in range(d):
        for k in range(d):
            _zero(G[j, k])
            for i in range(N):
                _fma(G[j, k], U[i, j], Z[i, k])
    _normalise(G, scale)


@_kernel(inline=True)
def _zero(out):
    for ln in range(out.shape[0]):
        out[ln] = 0.0


@_kernel(inline=True)
def _fma(out, x, y):
    """``out += x * y`` (rounded twice: no contraction)."""
    for ln in range(out.shape[0]):
        out[ln] = out[ln] + x[ln] * y[ln]


@_kernel(inline=True)
def _pair_logs(g, gtop, logs, lc, delta, S, M):
    r"""$\delta=\hat\gamma-\hat\gamma_{t_1}$; $S=\log s+\log|\ell'|-\log Z$ off $A$ ($-\infty$ on $A$);
    $M\leftarrow\max(M,S)$."""
    for ln in range(g.shape[0]):
        da = g[ln] - gtop[ln]
        v = (logs[ln] if da != 0.0 else -np.inf) + lc[ln]
        delta[ln] = da
        S[ln] = v
        M[ln] = v if v > M[ln] else M[ln]


@_kernel(inline=True)
def _pair_exp(S, M, delta, rho):
    r"""$S\leftarrow e^{S-M}$, $\rho\mathrel{+}=e^{S-M}\delta$."""
    for ln in range(S.shape[0]):
        es = exp_lanes(S[ln] - M[ln])
        S[ln] = es
        rho[ln] = rho[ln] + es * delta[ln]


@_kernel(inline=True)
def _weight(eS, ez, w, e, rho, inv_n):
    r"""$\tilde\omega=(e^{S-M}e^{\log Z}\delta-e\,\rho)\cdot(-1/N)$ (``w`` holds $\delta$ on entry)."""
    for ln in range(w.shape[0]):
        w[ln] = (eS[ln] * ez[ln] * w[ln] - e[ln] * rho[ln]) * inv_n


@_kernel
def _normalise(A, scale):
    r"""$A\leftarrow2^{-e}A$ per lane with $\max|A|=f2^{e}$, $f\in[\frac12,1)$ (:func:`~attsvm.gd.numerics.normalise`;
    $e$ clamped to $[-1023,1074]$, an all-zero lane unchanged)."""
    p, q, L = A.shape
    _pow2_scales(A, scale)
    for j in range(p):
        for k in range(q):
            for ln in range(L):
                A[j, k, ln] = A[j, k, ln] * scale[ln]


@_kernel
def _pow2_scales(A, scale):
    r"""``scale`` ← $2^{-e}$ per lane, $\max|A|=f2^{e}$, $f\in[\frac12,1)$, $e$ clamped to $[-1023,1074]$ (1 for an
    all-zero lane)."""
    p, q, L = A.shape
    for ln in range(L):
        scale[ln] = 0.0
    for j in range(p):
        for k in range(q):
            for ln in range(L):
                scale[ln] = max(scale[ln], abs(A[j, k, ln]))
    for ln in range(L):
        if scale[ln] == 0.0:
            scale[ln] = 1.0
        else:
            ex = math.frexp(scale[ln])[1]
            scale[ln] = math.ldexp(1.0, -min(max(ex, -1023), 1074))


@_kernel
def _unit_factor(A, lr_k, fac):
    r"""``fac`` ← $\eta_k/\|A\|_F$ per lane, 0 where $A=0$ (:func:`~attsvm.gd.steps.unit_step`)."""
    p, q, L = A.shape
    for ln in range(L):
        fac[ln] = 0.0
    for j in range(p):
        for k in range(q):
            for ln in range(L):
                fac[ln] += A[j, k, ln] * A[j, k, ln]
    for ln in range(L):
        nrm = math.sqrt(fac[ln])
        fac[ln] = lr_k[ln] / max(nrm, _TINY) if nrm > 0.0 else 0.0


@_kernel
def _corr(A, Tn, tnorm, scale, dot, nn, out):
    r"""``out`` ← $\mathrm{corr}(A,T)$ per lane, with ``Tn`` the power-of-two normalised target and ``tnorm`` its norm
    (:func:`~attsvm.gd.model_torch.corr_t`; ``dot``, ``nn``: work rows)."""
    p, q, L = A.shape
    _pow2_scales(A, scale)
    _zero(dot)
    _zero(nn)
    for j in range(p):
        for k in range(q):
            for ln in range(L):
                x = A[j, k, ln] * scale[ln]
                dot[ln] += x * Tn[j, k, ln]
                nn[ln] += x * x
    for ln in range(L):
        out[ln] = dot[ln] / (math.sqrt(nn[ln]) * tnorm[ln])


@_kernel
def _finite_code(P1, P2, u, loss):
    """Per lane the :data:`~attsvm.gd.result.NONFINITE` code: 1 parameters, 2 outputs, 3 the loss, 0 finite."""
    L = u.shape[-1]
    code = np.zeros(L, np.int64)
    for ln in range(L):
        ok = True
        for j in range(P1.shape[0]):
            for k in range(P1.shape[1]):
                ok = ok and math.isfinite(P1[j, k, ln]) and math.isfinite(P2[j, k, ln])
        if not ok:
            code[ln] = 1
            continue
        lsum = 0.0
        for i in range(u.shape[0]):
            if not math.isfinite(u[i, ln]):
                ok = False
            elif loss == 1:
                lsum += math.exp(-u[i, ln])
        if not ok:
            code[ln] = 2
        elif loss == 1 and not math.isfinite(lsum):
            code[ln] = 3
    return code


@_kernel
def _groups(
    g0, g1, kq, P1, P2, X, Z, gam, Xs, Zs, gs, mask, has_mask, lr, schedule, loss, k0, k1, tgt, thr,
    active, taken, reason, nf_code, nf_step, logs_out, u_out,
):  # fmt: skip
    r"""Updates $k_0,\dots,k_1-1$ of groups $g_0\le g<g_1$ in place (the forward pass on ``X``, ``Z``, ``gam``,
    the direction on their power-of-two rescalings ``Xs``, ``Zs``, ``gs``). ``kq``: ``P1``, ``P2`` are $(K,Q)$
    (d,m,L) per group, else ``P1`` is $W$ (``P2`` unused). ``tgt`` (G,d,d,L) normalised first target and ``thr`` the
    ``target_corr`` threshold (``thr`` > 1: no rule), checked before every update and at $k_1$ (as the engine's loop
    does at each $k$). ``active`` etc.: the engine's per-data-set stop state, (G,L)."""
    N, T, d, L = X.shape[1:]
    m = P1.shape[2] if kq else d
    Wb, Wz, a, e, lz, top, u, M, sc = _forward_scratch(N, T, d, L)
    S = np.empty((N, T, L))
    w = np.empty((N, T, L))
    U = np.empty((N, d, L))
    G = np.empty((d, d, L))
    gK = np.empty((d, m, L))
    gQ = np.empty((d, m, L))
    n1 = np.empty((P1.shape[1], P1.shape[2], L))
    n2 = np.empty((P2.shape[1], P2.shape[2], L))
    lc = np.empty(L)
    lr_k = np.empty(L)
    f1 = np.empty(L)
    f2 = np.empty(L)
    cr = np.empty(L)
    tn = np.empty(L)
    dot = np.empty(L)
    nn = np.empty(L)
    check = thr <= 1.0
    for g in range(g0, g1):
        c1, c2 = P1[g], P2[g]
        act = active[g]
        if check:
            for ln in range(L):
                tn[ln] = 0.0
            for j in range(d):
                for k in range(d):
                    for ln in range(L):
                        tn[ln] += tgt[g, j, k, ln] * tgt[g, j, k, ln]
            for ln in range(L):
                tn[ln] = math.sqrt(tn[ln])
        _attention(kq, c1, c2, Wb)
        _forward(Wb, X[g], Z[g], gam[g], mask[g], has_mask, Wz, a, e, lz, top, u, M, sc)
        for k in range(k0, k1 + 1):
            if check:
                _corr(Wb, tgt[g], tn, sc, dot, nn, cr)
                for ln in range(L):
                    if act[ln] and cr[ln] >= thr:
                        act[ln] = False
                        reason[g, ln] = 2
            if k == k1:
                break
            alive = False
            for ln in range(L):
                alive = alive or act[ln]
            if not alive:
                break
            for ln in range(L):
                lr_k[ln] = lr[g, ln] if schedule == 0 else lr[g, ln] / math.sqrt(k + 1)
            _direction(Xs[g], Zs[g], gs[g], a, e, lz, top, u, loss, S, w, U, G, M, sc, lc)
            if kq:
                _product(G, c2, gK, False)
                _product(G, c1, gQ, True)
                _normalise(gK, sc)
                _normalise(gQ, sc)
                _unit_factor(gK, lr_k, f1)
                _unit_factor(gQ, lr_k, f2)
            else:
                _unit_factor(G, lr_k, f1)
                for ln in range(L):
                    f2[ln] = 0.0
            for ln in range(L):
                if act[ln] and f1[ln] == 0.0 and f2[ln] == 0.0:  # the direction is exactly zero: no 0/0 step
                    act[ln] = False
                    reason[g, ln] = 1
                if not act[ln]:
                    f1[ln] = 0.0
                    f2[ln] = 0.0
            if kq:
                _move(c1, gK, f1, n1)
                _move(c2, gQ, f2, n2)
            else:
                _move(c1, G, f1, n1)
            _attention(kq, n1, n2 if kq else c2, Wb)
            _forward(Wb, X[g], Z[g], gam[g], mask[g], has_mask, Wz, a, e, lz, top, u, M, sc)
            code = _finite_code(n1, n2 if kq else n1, u, loss)
            bad = False
            for ln in range(L):
                if act[ln] and code[ln] > 0:  # the proposed iterate overflowed: the run stops at its last one
                    act[ln] = False
                    reason[g, ln] = 3
                    nf_code[g, ln] = code[ln]
                    nf_step[g, ln] = k + 1
                    bad = True
            for ln in range(L):
                if act[ln]:
                    for j in range(c1.shape[0]):
                        for q in range(c1.shape[1]):
                            c1[j, q, ln] = n1[j, q, ln]
                    if kq:
                        for j in range(c2.shape[0]):
                            for q in range(c2.shape[1]):
                                c2[j, q, ln] = n2[j, q, ln]
                    taken[g, ln] += 1
            if bad:  # back to the last finite iterate of the stopped lanes (the others moved on)
                _attention(kq, c1, c2, Wb)
                _forward(Wb, X[g], Z[g], gam[g], mask[g], has_mask, Wz, a, e, lz, top, u, M, sc)
        for i in range(N):
            for ln in range(L):
                u_out[g, i, ln] = u[i, ln]
                for t in range(T):
                    logs_out[g, i, t, ln] = a[i, t, ln]


@_kernel
def _forward_scratch(N, T, d, L):
    r"""Work arrays of :func:`_forward` for one group: $W$, $Wz$, $\log s$, $e$, $\log Z$, top, $u$, two lane rows."""
    return (
        np.empty((d, d, L)),
        np.empty((N, d, L)),
        np.empty((N, T, L)),
        np.empty((N, T, L)),
        np.empty((N, L)),
        np.empty((N, L), np.int64),
        np.empty((N, L)),
        np.empty(L),
        np.empty(L),
    )


@_kernel
def _initial_codes(kq, P1, P2, X, Z, gam, mask, has_mask, loss, codes):
    """``codes`` (G,L) ← the :func:`_finite_code` of every initial point."""
    N, T, d, L = X.shape[1:]
    Wb, Wz, a, e, lz, top, u, s1, s2 = _forward_scratch(N, T, d, L)
    for g in range(X.shape[0]):
        _attention(kq, P1[g], P2[g], Wb)
        _forward(Wb, X[g], Z[g], gam[g], mask[g], has_mask, Wz, a, e, lz, top, u, s1, s2)
        codes[g] = _finite_code(P1[g], P2[g] if kq else P1[g], u, loss)


@_kernel
def _attention(kq, P1, P2, Wb):
    r"""``Wb`` ← $W$: ``P1`` itself, or $KQ^\top$ for ``kq`` (:func:`~attsvm.gd.steps.W_of`)."""
    d, L = Wb.shape[0], Wb.shape[2]
    if not kq:
        for j in range(d):
            for k in range(d):
                for ln in range(L):
                    Wb[j, k, ln] = P1[j, k, ln]
        return
    m = P1.shape[1]
    for j in range(d):
        for k in range(d):
            for ln in range(L):
                Wb[j, k, ln] = 0.0
            for r in range(m):
                for ln in range(L):
                    Wb[j, k, ln] += P1[j, r, ln] * P2[k, r, ln]


@_kernel
def _product(G, F, out, transpose):
    r"""``out`` ← $\hat GF$ (or $\hat G^\top F$): the factor gradients $\hat GQ$, $\hat G^\top K$."""
    d, m, L = F.shape
    for j in range(d):
        for r in range(m):
            for ln in range(L):
                out[j, r, ln] = 0.0
            for k in range(d):
                if transpose:
                    for ln in range(L):
                        out[j, r, ln] += G[k, j, ln] * F[k, r, ln]
                else:
                    for ln in range(L):
                        out[j, r, ln] += G[j, k, ln] * F[k, r, ln]


@_kernel
def _move(P, D, fac, out):
    r"""``out`` ← $P-\mathrm{fac}\cdot D$ per lane (the step of :func:`~attsvm.gd.steps.unit_step`), exactly $P$
    where ``fac`` is 0 (a frozen or zero-direction factor keeps its bits, signed zeros included)."""
    p, q, L = P.shape
    for j in range(p):
        for k in range(q):
            for ln in range(L):
                out[j, k, ln] = P[j, k, ln] if fac[ln] == 0.0 else P[j, k, ln] - fac[ln] * D[j, k, ln]


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
        Ln = min(LANES, B)
        Gn = -(-B // Ln)
        lanes = lambda a: to_lanes(a, Gn, Ln)  # noqa: E731
        kq = "K" in theta
        P1 = lanes(theta["K"] if kq else theta["W"]).astype(np.float64)
        P2 = lanes(theta["Q"]).astype(np.float64) if kq else np.zeros((Gn, 1, 1, Ln))
        msk = np.ones((Gn, N, T, Ln), dtype=np.bool_) if mask is None else lanes(np.asarray(mask, bool))
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
        _initial_codes(self.kq, self.P1, self.P2, self.X, self.Z, self.gam, self.mask, self.has_mask, self.loss, codes)
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
