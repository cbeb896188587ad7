r"""``softmax-decay``: along $W=R\rho W^{\mathrm{mm}}$, with $\rho=1/\|W^{\mathrm{mm}}\|_F$: $s_t/s_\alpha=e^{-R\rho}$
for support tokens, $\le e^{-R\rho(1+2\delta)}$ otherwise, and $1-s_\alpha\le(T-1)e^{-R\rho}$ (claim
``softmax-decay``).

The logit gaps are proved for general $d$, the probability ratios, the mass off the selected token and the decay
bound for general $T$ (index notation, :func:`attsvm.symbolic.sums.reduce`); the monotonicity in the
margin is a one-variable inequality."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import sums
from attsvm.symbolic.checks import All, Equal, Nonneg, Symbolic, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Inner, Norm, RealSpace, SumOver, Times, in_order


def _logit_gap():
    d = 2
    W = matrix("w", d, d)
    R, rho = symbol("R"), symbol("rho")
    xa = sp.Matrix(d, 1, lambda k, _: symbol("x", 1, k + 1))
    xt = sp.Matrix(d, 1, lambda k, _: symbol("x", 2, k + 1))
    z = sp.Matrix(d, 1, lambda k, _: symbol("z", k + 1))
    A = (xa - xt) * z.T
    lhs = (xa.T * (R * rho * W) * z)[0] - (xt.T * (R * rho * W) * z)[0]
    return Equal(lhs, R * rho * sum((a * b for a, b in zip(W, A)), sp.Integer(0)))


def _ratio():
    R, rho, m = symbol("R"), symbol("rho"), symbol("m")
    a = symbol("a", 1)
    # a_t = a_alpha - R rho (1 + m): s_t / s_alpha = exp(a_t - a_alpha)
    return Equal(sp.exp(a - R * rho * (1 + m)) / sp.exp(a), sp.exp(-R * rho) * sp.exp(-R * rho * m), "simplify")


def _monotone():
    kap, w = symbol("kappa"), symbol("omega")
    # e^{-R rho (1 + 2 delta + omega')} = kappa' / (1 + w) with kappa' = e^{-R rho (1 + 2 delta)}, w >= 0
    return Nonneg(kap - kap / (1 + w))


def _cases(kind: str, max_T: int):
    def cases():
        kap = symbol("kappa")
        for T in range(2, max_T + 1):
            q = [kap / (1 + symbol("omega", t)) for t in range(2, T + 1)]  # ratios s_t/s_alpha <= kappa
            e = [sp.Integer(1)] + q  # exponentials relative to the selected token's
            s_a = 1 / sum(e, sp.Integer(0))
            if kind == "sum":
                yield f"T={T}", Equal(1 - s_a, s_a * sum(q, sp.Integer(0)), "cancel")
            else:
                yield f"T={T}", Nonneg((T - 1) * kap - (1 - s_a))

    return cases


@derivation(name="softmax-decay", title="Softmax decay along the max-margin direction", claim="softmax-decay")
def softmax_decay(d: Derivation, max_T: int = 5) -> None:
    T, dd = symbol("T"), symbol("d")
    t, u, j, k = (index(c) for c in ("t", "u", "j", "k"))
    alpha = index("alpha")
    W, Wmm, A = matrix_symbol("W", "d", "d"), matrix_symbol("Wmm", "d", "d"), matrix_symbol("A", "d", "d", "t")
    R, rho, kap, delta = symbol("R"), symbol("rho"), symbol("kappa"), symbol("delta")
    a, sx, x, z, wmm, m, om = (indexed(b) for b in ("a", "s", "x", "z", "Wmm", "m", "omega"))
    zeta = sp.Symbol("zeta", nonnegative=True)
    xa, xt, zv = matrix_symbol("x", "d", 1, "alpha"), matrix_symbol("x", "d", 1, "t"), matrix_symbol("z", "d", 1)
    rng = {t: (1, T), alpha: (1, T)}
    inst = ("every ", Chain(2, "<=", T, "<=", max_T), ", ratios ", kap / (1 + om[t]), " with ", Chain(om[t], ">=", 0))

    def S(v):
        return B.softmax_entry(a, v, u, T)

    d.define(((xt, x[t, j]), (zv, z[k])), ("token ", t, " of an input and the query, and their entries."))
    d.define(
        (Chain(Wmm, "in", RealSpace(dd, dd)), wmm[j, k]),
        ("the Att-SVM solution (THEORY section 3) and its entries; ", R, " is the norm of ", W, "."),
    )
    d.define(
        delta,
        ("the neighbour gap: a token that is not a support token has margin at least ", in_order(1, 2 * delta), "."),
    )
    d.define(
        om[t],
        (
            "the slack of the probability ratio of token ",
            t,
            ": ",
            Chain(sx[t] / sx[alpha], "=", kap / (1 + om[t])),
            ".",
        ),
    )
    d.define(
        zeta,
        (
            "the sum of the probability ratios of the tokens other than ",
            alpha,
            ", so that ",
            Chain(sx[alpha], "=", 1 / (1 + zeta)),
            ".",
        ),
    )
    d.premise(
        "the ray and the margins",
        Chain(W, "=", R * rho * Wmm, where=Chain(rho, "=", 1 / Norm(Wmm, "F"))),
        (
            "the constraint matrices are ",
            Chain(A, "=", (xa - xt) * zv.T, "in", RealSpace(dd, dd)),
            " for the tokens ",
            Chain(t, "!=", alpha),
            " of an input; support tokens have margin ",
            Chain(Inner(Wmm, A), "=", 1),
            ", the others at least ",
            in_order(1, 2 * delta),
            " (neighbour gap ",
            delta,
            "); ",
            Chain(kap, "=", sp.exp(-R * rho)),
            ".",
        ),
        label="ray",
    )
    d.step(
        "logit gaps are scaled margins",
        Chain(a[alpha] - a[t], "=", R * rho * Inner(Wmm, A)),
        ("the logits are linear in ", W, " (derivation gradient, step {step:gradient/logits})."),
        Symbolic(
            sp.Sum(x[alpha, j] * R * rho * wmm[j, k] * z[k], (k, 1, dd), (j, 1, dd))
            - sp.Sum(x[t, j] * R * rho * wmm[j, k] * z[k], (k, 1, dd), (j, 1, dd)),
            R * rho * sp.Sum(wmm[j, k] * (x[alpha, j] - x[t, j]) * z[k], (k, 1, dd), (j, 1, dd)),
            [dd],
            method=sums.reducer(),
            what=(
                "index notation, with ",
                Chain(a[t], "=", sp.Sum(Times(x[t, j], R, rho, wmm[j, k], z[k]), (k, 1, dd), (j, 1, dd))),
            ),
        ),
        evidence=Equal(_logit_gap().lhs, _logit_gap().rhs, what=("one input with ", Chain(dd, "=", 2), ", generic")),
        label="logit-gaps",
    )
    d.step(
        "probability ratios",
        Chain(
            sx[t] / sx[alpha],
            "=",
            sp.exp(in_order(a[t], -a[alpha])),
            "=",
            kap * sp.exp(-R * rho * m[t]),
            where=Chain(a[alpha] - a[t], "=", Times(R, rho, in_order(1, m[t]))),
        ),
        (
            "the normalisation cancels; for a margin ",
            in_order(1, m[t]),
            " the ratio is ",
            kap,
            " for support tokens (",
            Chain(m[t], "=", 0),
            ") and at most ",
            sp.exp(-Times(R, rho, in_order(1, 2 * delta))),
            " otherwise.",
        ),
        Symbolic(
            S(t),
            S(alpha) * sp.exp(a[t] - a[alpha]),
            [T],
            method=sums.reducer(rng),
            what=(
                "index notation, the first equality in the form ",
                Chain(sx[t], "=", Times(sx[alpha], sp.exp(in_order(a[t], -a[alpha])))),
                "; the second is the second evidence",
            ),
        ),
        evidence=_ratio(),
        label="ratios",
    )
    d.step(
        "ratios decrease with the margin",
        Chain(kap * sp.exp(-R * rho * m[t]), "<=", kap),
        (
            "as ",
            Chain(m[t], ">=", 0),
            " (and likewise beyond ",
            in_order(1, 2 * delta),
            "): the ratio is written as ",
            kap / (1 + om[t]),
            " with ",
            Chain(om[t], ">=", 0),
            ".",
        ),
        _monotone(),
        label="ratios-decrease",
    )
    ratio_sum = SumOver(sx[t] / sx[alpha], sp.Ne(t, alpha))
    d.step(
        "mass off the selected token",
        Chain(1 - sx[alpha], "=", Times(sx[alpha], ratio_sum)),
        ("the probabilities sum to one, ", Chain(sp.Sum(sx[t], (t, 1, T)), "=", 1), "."),
        Symbolic(
            1 - S(alpha),
            S(alpha) * (sp.Sum(S(t) / S(alpha), (t, 1, T)) - 1),
            [T],
            method=sums.reducer(rng),
            what=(
                "index notation; the sum over ",
                Chain(t, "!=", alpha),
                " is the sum over all tokens minus the term ",
                Chain(t, "=", alpha),
            ),
        ),
        evidence=All(_cases("sum", max_T), inst),
        label="mass-off",
    )
    s_sel = 1 / (1 + zeta)
    d.step(
        "decay bound",
        Chain(
            1 - sx[alpha],
            "=",
            Times(sx[alpha], ratio_sum),
            "<=",
            Times(in_order(T, -1), kap),
            "=",
            Times(in_order(T, -1), sp.exp(-R * rho)),
        ),
        (
            "step {step:mass-off}, then ",
            Chain(sx[alpha], "<=", 1),
            " and every ratio is at most ",
            kap,
            " by steps {step:ratios} and {step:ratios-decrease}.",
        ),
        SymbolicNonneg(
            (T - 1) * kap - s_sel * sp.Sum(kap - om[t], (t, 2, T)),
            zeta / (1 + zeta) * (T - 1) * kap + s_sel * sp.Sum(om[t], (t, 2, T)),
            [T],
            method=sums.reducer(),
            what=(
                "tokens numbered so that ",
                Chain(alpha, "=", 1),
                ", with ",
                Chain(sx[alpha], "=", s_sel),
                " and ratios ",
                Chain(sx[t] / sx[alpha], "=", in_order(kap, -om[t])),
                ", where ",
                Chain(sp.Tuple(zeta, om[t]), ">=", 0),
            ),
        ),
        evidence=All(_cases("bound", max_T), inst),
        label="bound",
    )
