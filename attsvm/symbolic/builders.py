r"""Builders of symbolic instances in the notation of THEORY §1 (explicit small $n,T,d$).

Conventions: vectors are sympy column matrices, indices 1-based in symbol names. The softmax is made
rational by naming the exponentials: $\epsilon_t=e^{a_t}>0$, $s_t=\epsilon_t/\sum_\tau\epsilon_\tau$, so
identities between softmax expressions become identities between rational functions, checked by
``cancel``/``expand`` instead of ``simplify``.

These builders are independent of :mod:`attsvm.model` (the tests make the two agree numerically).

For *general* sizes, identities are written in index notation (``IndexedBase`` entries, ``Sum`` with symbolic
bounds such as $\sum_{u=1}^T$, ``KroneckerDelta``; :func:`softmax_entry`) and proved by
:func:`attsvm.symbolic.sums.reduce`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy as sp

from .notation import matrix, symbol, vector
from .printer import Ell


# ---------------------------------------------------------------------- small algebra
def inner(A: sp.Matrix, B: sp.Matrix) -> sp.Expr:
    r"""$\langle A,B\rangle=\mathrm{tr}(A^\top B)=\sum_{jk}A_{jk}B_{jk}$."""
    return sum((a * b for a, b in zip(A, B)), sp.Integer(0))


def fro2(A: sp.Matrix) -> sp.Expr:
    r"""$\|A\|_F^2$."""
    return inner(A, A)


def softmax_of_exps(e: sp.Matrix) -> sp.Matrix:
    r"""$s_t=\epsilon_t/\sum_\tau\epsilon_\tau$ from the exponentials $\epsilon_t=e^{a_t}$."""
    tot = sum(e, sp.Integer(0))
    return e.applyfunc(lambda x: x / tot)


def softmax_exp(a: sp.Matrix) -> sp.Matrix:
    r"""$\mathbb S(a)_t=e^{a_t}/\sum_\tau e^{a_\tau}$ with explicit exponentials."""
    return softmax_of_exps(a.applyfunc(sp.exp))


def jacobian_closed(s: sp.Matrix) -> sp.Matrix:
    r"""$J=\mathrm{diag}(s)-ss^\top$."""
    return sp.diag(*s) - s * s.T


def cov(s: sp.Matrix, g: sp.Matrix, h: sp.Matrix) -> sp.Expr:
    r"""$\mathrm{Cov}_s(g,h)=\sum_ts_tg_th_t-(s^\top g)(s^\top h)$."""
    return sum((s[t] * g[t] * h[t] for t in range(len(s))), sp.Integer(0)) - (s.T * g)[0] * (s.T * h)[0]


def var(s: sp.Matrix, g: sp.Matrix) -> sp.Expr:
    r"""$\mathrm{Var}_s(g)=\mathrm{Cov}_s(g,g)$."""
    return cov(s, g, g)


def exps_to_symbols(expr, a: sp.Matrix, e: sp.Matrix):
    r"""Replace every $e^{k a_t}$ ($k$ an integer) by $\epsilon_t^k$, $\epsilon_t>0$ (exact: only names change).

    An exponential whose argument is not such a multiple is left as it is (so a check then fails loudly)."""
    a_list, e_list = list(a), list(e)
    direct = dict(zip(a_list, e_list))

    def rep(arg):
        if arg in direct:
            return direct[arg]
        coeff, rest = arg.as_coeff_Mul()
        if coeff.is_Integer and rest in direct:
            return direct[rest] ** coeff
        for at, et in zip(a_list, e_list):
            ratio = sp.cancel(arg / at)
            if ratio.is_Integer:
                return et**ratio
        terms = sp.Add.make_args(sp.expand(arg))
        if len(terms) > 1:
            parts = [rep(tt) for tt in terms]
            if not any(isinstance(p, sp.exp) for p in parts):
                return sp.Mul(*parts)
        return sp.exp(arg)

    f = lambda x: x.replace(sp.exp, rep)  # noqa: E731
    return expr.applyfunc(f) if isinstance(expr, sp.MatrixBase) else f(expr)


def residual_pairwise(s: sp.Matrix, g: sp.Matrix) -> sp.Matrix:
    r"""$r_t=s_t\sum_\tau s_\tau(\gamma_t-\gamma_\tau)$ (the stable form of THEORY §5)."""
    T = len(s)
    return sp.Matrix(T, 1, lambda t, _: s[t] * sum((s[u] * (g[t] - g[u]) for u in range(T)), sp.Integer(0)))


# ---------------------------------------------------------------------- one input
@dataclass(frozen=True)
class Input:
    r"""One input with explicit entries: tokens $X$ ($T\times d$), query $z$, scores $\gamma$, label $Y$,
    logits $a=XWz$, exponential names $\epsilon$, softmax $s=\epsilon/\mathbf 1^\top\epsilon$."""

    X: sp.Matrix
    z: sp.Matrix
    gamma: sp.Matrix
    Y: sp.Symbol
    a: sp.Matrix
    e: sp.Matrix
    s: sp.Matrix

    @property
    def T(self) -> int:
        return self.X.rows


def make_input(T: int, d: int, W: sp.Matrix, i: int | None = None, v: sp.Matrix | None = None) -> Input:
    r"""Input $i$ (``None``: no index) with generic entries; scores $\gamma_t=Yv^\top x_t$ when ``v`` is
    given, independent symbols $\gamma_t$ otherwise (they do not depend on $W$)."""
    pre = () if i is None else (i,)
    X = sp.Matrix(T, d, lambda t, j: symbol("x", *pre, t + 1, j + 1))
    z = vector("z", d, *pre)
    Y = symbol("Y", *pre)
    gamma = vector("gamma", T, *pre) if v is None else (X * v) * Y
    a = X * W * z
    e = vector("expo", T, *pre)
    return Input(X, z, gamma, Y, a, e, softmax_of_exps(e))


def weights(d: int, base: str = "w") -> sp.Matrix:
    r"""$W$ with entries $w_{jk}$."""
    return matrix(base, d, d)


def loss_explicit(inputs: list[Input]) -> sp.Expr:
    r"""$\mathcal L(W)=\frac1n\sum_i\ell(\gamma_i^\top\mathbb S(X_iWz_i))$ with explicit exponentials and an
    undefined loss $\ell$ (so the derivation holds for every differentiable loss)."""
    n = len(inputs)
    return sum((Ell((inp.gamma.T * softmax_exp(inp.a))[0]) for inp in inputs), sp.Integer(0)) / n


def grad_closed_form(inputs: list[Input], lp: list[sp.Expr]) -> sp.Matrix:
    r"""$\frac1n\sum_i\ell'_iX_i^\top(\mathrm{diag}(s_i)-s_is_i^\top)\gamma_iz_i^\top$ (claim ``grad-closed-form``)."""
    n = len(inputs)
    out = sp.zeros(inputs[0].X.cols, inputs[0].X.cols)
    for inp, l in zip(inputs, lp):
        out += l * inp.X.T * jacobian_closed(inp.s) * inp.gamma * inp.z.T
    return out / n


def lagrangian(W: sp.Matrix, A: list[sp.Matrix], lam: list[sp.Expr]) -> sp.Expr:
    r"""$\mathcal L(W,\lambda)=\frac12\|W\|_F^2-\sum_j\lambda_j(\langle W,A_j\rangle-1)$."""
    return fro2(W) / 2 - sum((l * (inner(W, Aj) - 1) for l, Aj in zip(lam, A)), sp.Integer(0))


def constraint_matrices(n: int, T: int, d: int, alpha: list[int] | None = None):
    r"""Generic $A_{it}=(x_{i\alpha_i}-x_{it})z_i^\top$ for $t\ne\alpha_i$ (default $\alpha_i=1$).

    Returns ``(labels, A, D, z)``: labels ``(i,t)`` 1-based, matrices, differences $D_{it}$, queries."""
    alpha = alpha or [1] * n
    labels, A, D, Zs = [], [], [], []
    for i in range(1, n + 1):
        X = sp.Matrix(T, d, lambda t, j, i=i: symbol("x", i, t + 1, j + 1))
        z = vector("z", d, i)
        for t in range(1, T + 1):
            if t == alpha[i - 1]:
                continue
            Dit = (X.row(alpha[i - 1] - 1) - X.row(t - 1)).T
            labels.append((i, t))
            D.append(Dit)
            Zs.append(z)
            A.append(Dit * z.T)
    return labels, A, D, Zs


def diff_entries(f: sp.Expr, M: sp.Matrix) -> sp.Matrix:
    r"""$[\partial f/\partial M_{jk}]_{jk}$, same shape as ``M``."""
    return M.applyfunc(lambda w: sp.diff(f, w))


def name_loss_derivatives(expr, lp: sp.Expr | None = None, lpp: sp.Expr | None = None):
    r"""Replace every $\ell'(\cdot)$ by ``lp`` and every $\ell''(\cdot)$ by ``lpp`` (one input: one argument)."""
    from .printer import EllP, EllPP

    def f(x):
        if lpp is not None:
            x = x.replace(EllPP, lambda *_: lpp)
        if lp is not None:
            x = x.replace(EllP, lambda *_: lp)
        return x

    return expr.applyfunc(f) if isinstance(expr, sp.MatrixBase) else f(expr)


# ---------------------------------------------------------------------- index notation, general sizes
def softmax_entry(a: sp.IndexedBase, t: Any, u: sp.Symbol, T: Any) -> sp.Expr:
    r"""$s_t=e^{a_t}/\sum_{u=1}^Te^{a_u}$ in index notation (``u`` the summation index; identities between such
    expressions are proved by :func:`attsvm.symbolic.sums.reduce`)."""
    return sp.exp(a[t]) / sp.Sum(sp.exp(a[u]), (u, 1, T))


# ---------------------------------------------------------------------- the two-layer model (issue 30)
@dataclass(frozen=True)
class TwoLayerInput:
    r"""One input of the two-layer model with explicit entries (T tokens, dimension d): tokens $X$, query $z$, head
    $v$, label $Y$, weights $W_1$ (entries $w^{(1)}_{jk}$), $W_2$ (entries $w^{(2)}_{jk}$), residual coefficient
    ``rho``, the visible (query, key) pairs ``keys`` (all pairs, or $\tau\le t$ when causal), the layer-1 logits
    ``A1`` $\{(t,\tau): x_\tau^\top W_1x_t\}$, and the exponential names $\epsilon^{(1)}_{t\tau}$,
    $\epsilon^{(2)}_t$."""

    X: sp.Matrix
    z: sp.Matrix
    v: sp.Matrix
    Y: sp.Symbol
    W1: sp.Matrix
    W2: sp.Matrix
    rho: Any
    keys: tuple
    A1: dict
    e1: dict
    e2: sp.Matrix


def make_twolayer_input(T: int, d: int, rho: Any = 0, causal: bool = False) -> TwoLayerInput:
    r"""A generic input of the two-layer model (docs/theory.md): $A^{(1)}_{t\tau}=x_\tau^\top W_1x_t$ over the
    visible keys ($\tau\le t$ when ``causal``), ``rho`` the residual coefficient."""
    X = sp.Matrix(T, d, lambda t, j: symbol("x", t + 1, j + 1))
    W1, W2 = matrix("wone", d, d), matrix("wtwo", d, d)
    keys = tuple((t, tau) for t in range(T) for tau in range(T) if tau <= t or not causal)
    A1 = {(t, tau): (X[tau, :] * W1 * X[t, :].T)[0] for t, tau in keys}
    e1 = {(t, tau): symbol("expone", t + 1, tau + 1) for t, tau in keys}
    return TwoLayerInput(
        X, vector("z", d), vector("v", d), symbol("Y"), W1, W2, sp.sympify(rho), keys, A1, e1, vector("exptwo", T)
    )


def twolayer_forward(inp: TwoLayerInput, E1: dict, E2: sp.Matrix | None = None) -> dict:
    r"""The forward pass from the layer-1 exponentials ``E1`` (and the layer-2 ones ``E2``, default $e^{a^{(2)}}$):
    $s^{(1)}_{t\tau}=E1_{t\tau}/\sum_{\tau'}E1_{t\tau'}$, $\bar h_t=\sum_\tau s^{(1)}_{t\tau}x_\tau$,
    $h_t=\bar h_t+\rho x_t$, $a^{(2)}_t=h_t^\top W_2z$, $s^{(2)}=E2/\mathbf 1^\top E2$, $g_t=Yv^\top h_t$,
    $u=\sum_ts^{(2)}_tg_t$. Returns a dict of ``s1 hbar h a2 s2 g u``."""
    T, d = inp.X.shape
    rows = {t: [tau for (tt, tau) in inp.keys if tt == t] for t in range(T)}
    s1 = {(t, tau): E1[(t, tau)] / sum(E1[(t, k)] for k in rows[t]) for t, tau in inp.keys}
    hbar = sp.Matrix(T, d, lambda t, j: sum((s1[(t, tau)] * inp.X[tau, j] for tau in rows[t]), sp.Integer(0)))
    h = hbar + inp.rho * inp.X
    a2 = h * inp.W2 * inp.z
    E2 = a2.applyfunc(sp.exp) if E2 is None else E2
    s2 = softmax_of_exps(E2)
    g = inp.Y * (h * inp.v)
    u = (s2.T * g)[0]
    return {"s1": s1, "hbar": hbar, "h": h, "a2": a2, "s2": s2, "g": g, "u": u}


def twolayer_loss_explicit(inp: TwoLayerInput) -> sp.Expr:
    r"""$\ell(u)$ of one input of the two-layer model with explicit exponentials ($\ell$ undefined)."""
    return Ell(twolayer_forward(inp, {k: sp.exp(a) for k, a in inp.A1.items()})["u"])


def twolayer_exps_to_symbols(expr: Any, inp: TwoLayerInput) -> Any:
    r"""Rename the exponentials of a two-layer expression: $e^{A^{(1)}_{t\tau}}\to\epsilon^{(1)}_{t\tau}$ first,
    then $e^{a^{(2)}_t}\to\epsilon^{(2)}_t$ with $a^{(2)}$ written in the $\epsilon^{(1)}$ (exact: only names change;
    an exponential that matches neither is left, and a check then fails loudly)."""
    keys = list(inp.keys)
    a2 = twolayer_forward(inp, {k: sp.exp(a) for k, a in inp.A1.items()})["a2"]
    direct = {sp.exp(a2[t]): inp.e2[t] for t in range(len(a2))} | {sp.exp(inp.A1[k]): inp.e1[k] for k in keys}
    named = expr.xreplace(direct)  # the forms the differentiation left as they were built (fast path)
    named = exps_to_symbols(named, sp.Matrix([inp.A1[k] for k in keys]), sp.Matrix([inp.e1[k] for k in keys]))
    return exps_to_symbols(named, twolayer_forward(inp, inp.e1, inp.e2)["a2"], inp.e2)


def twolayer_grad_closed_form(inp: TwoLayerInput, lp: sp.Expr) -> tuple[sp.Matrix, sp.Matrix]:
    r"""$(\nabla_{W_1}\ell,\nabla_{W_2}\ell)$ of one input from the closed forms (docs/theory.md), in the named
    exponentials: $r_t=s^{(2)}_t(g_t-u)$, $\nabla_{W_2}=\ell'\sum_tr_th_tz^\top$,
    $c_t=s^{(2)}_tYv+r_tW_2z$, $q_{t\tau}=s^{(1)}_{t\tau}c_t^\top(x_\tau-\bar h_t)$,
    $\nabla_{W_1}=\ell'\sum_{t,\tau}q_{t\tau}x_\tau x_t^\top$."""
    f = twolayer_forward(inp, inp.e1, inp.e2)
    T, d = inp.X.shape
    s2, g, u, h, hbar = f["s2"], f["g"], f["u"], f["h"], f["hbar"]
    r = [s2[t] * (g[t] - u) for t in range(T)]
    G2 = sum((r[t] * h[t, :].T * inp.z.T for t in range(T)), sp.zeros(d, d))
    c = [s2[t] * inp.Y * inp.v + r[t] * inp.W2 * inp.z for t in range(T)]
    G1 = sp.zeros(d, d)
    for t, tau in inp.keys:
        q = f["s1"][(t, tau)] * (c[t].T * (inp.X[tau, :] - hbar[t, :]).T)[0]
        G1 += q * inp.X[tau, :].T * inp.X[t, :]
    return lp * G1, lp * G2
