r"""``gradient``: $\nabla_W\mathcal L$ from the definition, equal to the closed form of ``grad-closed-form``.

Proved for general $n,T,d$ in index notation: the loss of one input, $\ell(\sum_t\gamma_ts_t)$ with
$s_t=e^{a_t}/\sum_ue^{a_u}$ and $a_t=\sum_{p,q}x_{tp}w_{pq}z_q$, is differentiated by sympy in a general entry
$w_{jk}$ and reduced by :func:`attsvm.symbolic.sums.reduce`; the matrix form is sympy's entry of the
matrix product for symbolic shapes. The loss $\ell$ is an undefined function, so this holds for every
differentiable loss. Second evidence: the explicit loss differentiated in every entry for every $T\le4$, $d\le3$
(options ``max_T``, ``max_d``), compared exactly with the closed form.
"""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Symbolic
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import (
    Chain,
    Diag,
    Elem,
    Ell,
    EllP,
    Grad,
    Mean,
    Partial,
    RealSpace,
    Softmax,
    Times,
    in_order,
)


def _entry_cases(max_T: int, max_d: int):
    def cases():
        for T in range(1, max_T + 1):
            for d in range(1, max_d + 1):
                W = B.weights(d)
                inp = B.make_input(T, d, W)
                L = B.loss_explicit([inp])
                lp = symbol("lp")
                auto = B.name_loss_derivatives(B.exps_to_symbols(B.diff_entries(L, W), inp.a, inp.e), lp)
                closed = B.grad_closed_form([inp], [lp])
                yield f"T={T}, d={d}", Equal(auto, closed, "cancel")

    return cases


def _average_check(dd: int):
    W = B.weights(dd)
    inputs = [B.make_input(2, dd, W, i) for i in (1, 2)]
    L = B.loss_explicit(inputs)
    lps = [symbol("lp", i) for i in (1, 2)]
    auto = B.diff_entries(L, W)
    for inp in inputs:
        auto = B.exps_to_symbols(auto, inp.a, inp.e)

    # the loss derivative of each input: map each by the input whose exponentials its argument contains
    def rep(u):
        return lps[0] if inputs[0].e[0] in u.free_symbols else lps[1]

    auto = auto.applyfunc(lambda x: x.replace(EllP, rep))
    return Equal(auto, B.grad_closed_form(inputs, lps), "cancel")


def _logit_cases(max_T: int, max_d: int):
    def cases():
        for T in range(1, max_T + 1):
            for d in range(1, max_d + 1):
                W = B.weights(d)
                inp = B.make_input(T, d, W)
                for t in range(T):
                    rhs = inp.X[t, :].T * inp.z.T
                    yield f"T={T}, d={d}, t={t + 1}", Equal(B.diff_entries(inp.a[t], W), rhs)

    return cases


def _jacobian_cases(max_T: int):
    def cases():
        for T in range(1, max_T + 1):
            a = sp.Matrix(T, 1, lambda t, _: symbol("a", t + 1))
            e = sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1))
            J = B.exps_to_symbols(B.softmax_exp(a).jacobian(a), a, e)
            yield f"T={T}", Equal(J, B.jacobian_closed(B.softmax_of_exps(e)), "cancel")

    return cases


def _pairwise_cases(max_T: int):
    def cases():
        for T in range(1, max_T + 1):
            s = B.softmax_of_exps(sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1)))
            g = sp.Matrix(T, 1, lambda t, _: symbol("gamma", t + 1))
            yield f"T={T}", Equal(B.jacobian_closed(s) * g, B.residual_pairwise(s, g), "cancel")

    return cases


def _matrix_entry(T, d, j, k, t, tau):
    r"""Entry $(j,k)$ of $X^\top(\mathrm{diag}(s)-ss^\top)\gamma z^\top$ as sympy expands it for symbolic shapes
    (0-based entries of ``MatrixSymbol``\ s), and the same entry written as a sum (0-based too)."""
    X, s = sp.MatrixSymbol("X", T, d), sp.MatrixSymbol("s", T, 1)
    g, z = sp.MatrixSymbol("gamma", T, 1), sp.MatrixSymbol("z", d, 1)
    entry = (X.T * (sp.DiagMatrix(s) - s * s.T) * g * z.T)[j, k]
    mean = sp.Sum(s[tau, 0] * g[tau, 0], (tau, 0, T - 1))
    written = sp.Sum(X[t, j] * s[t, 0] * (g[t, 0] - mean) * z[k, 0], (t, 0, T - 1))
    return entry, written


@derivation(
    name="gradient",
    title="The gradient of the attention loss from its definition",
    claim="grad-closed-form",
    ci={"max_T": 3, "max_d": 2, "average_d": 1},
)
def gradient(d: Derivation, max_T: int = 4, max_d: int = 3, average_d: int = 2) -> None:
    T, dd, n = symbol("T"), symbol("d"), symbol("n")
    i, t, tau, u, j, k, p, q = (index(c) for c in ("i", "t", "tau", "u", "j", "k", "p", "q"))
    x, w, z, g, a, sx = (indexed(b) for b in ("x", "w", "z", "gamma", "a", "s"))
    L, uu, ui = symbol("L"), symbol("u"), symbol("u", "i")
    # matrices (for the statements in matrix form): input i, and one input with its index dropped
    Xi, zi = matrix_symbol("X", "T", "d", "i"), matrix_symbol("z", "d", 1, "i")
    gi, si, ai = (matrix_symbol(b, "T", 1, "i") for b in ("gamma", "s", "a"))
    X, zv, W = matrix_symbol("X", "T", "d"), matrix_symbol("z", "d", 1), matrix_symbol("W", "d", "d")
    gv, sv = matrix_symbol("gamma", "T", 1), matrix_symbol("s", "T", 1)
    xt = matrix_symbol("x", "d", 1, "t")
    J, Ji = in_order(Diag(sv), -sv * sv.T), in_order(Diag(si), -si * si.T)

    # index notation, the objects every check differentiates: logits, softmax, loss of one input / of input i
    def logit(tt, ii=None):
        pre = () if ii is None else (ii,)
        return sp.Sum(x[(*pre, tt, p)] * w[p, q] * z[(*pre, q)], (q, 1, dd), (p, 1, dd))

    def soft(tt, ii=None):
        return sp.exp(logit(tt, ii)) / sp.Sum(sp.exp(logit(u, ii)), (u, 1, T))

    def score(ii=None):
        pre = () if ii is None else (ii,)
        return sp.Sum(g[(*pre, t)] * soft(t, ii), (t, 1, T))

    def entry(ii=None):  # sum_t x_tj s_t (gamma_t - sum_tau s_tau gamma_tau) z_k
        pre = () if ii is None else (ii,)
        mean = sp.Sum(soft(tau, ii) * g[(*pre, tau)], (tau, 1, T))
        return sp.Sum(x[(*pre, t, j)] * soft(t, ii) * (g[(*pre, t)] - mean) * z[(*pre, k)], (t, 1, T))

    rng = {j: (1, dd), k: (1, dd), t: (1, T), tau: (1, T)}
    general = ("index notation, for every entry ", sp.Tuple(j, k))
    inst = ("every ", Chain(T, "<=", max_T), ", ", Chain(dd, "<=", max_d))
    mean_s = sp.Sum(Times(sx[tau], g[tau]), (tau, 1, T))
    entry_tex = sp.Sum(Times(x[t, j], sx[t], in_order(g[t], -mean_s), z[k]), (t, 1, T))
    logit_tex = sp.Sum(Times(x[t, p], w[p, q], z[q]), (q, 1, dd), (p, 1, dd))

    d.summary = (
        "The loss is an average of per-input terms; the loss ",
        Ell(uu),
        " is an arbitrary differentiable function, so the result holds for every loss of Assumption A. Every "
        "step is proved for general sizes ",
        sp.Tuple(n, T, dd),
        " in index notation.",
    )
    d.define(
        (Xi, xt, x[t, j]),
        (
            "the tokens of input ",
            i,
            " as the rows of a matrix; with the index ",
            i,
            " dropped, ",
            xt.T,
            " is row ",
            t,
            " and ",
            x[t, j],
            " its entry ",
            j,
            ".",
        ),
    )
    d.define((W, w[j, k]), "the attention weights and their entries.")
    d.define(*glossary.loss())
    d.define(*glossary.softmax())
    d.define(*glossary.kronecker())
    d.premise(
        "definitions",
        Chain(L, "=", Mean(Ell(gi.T * si), i, n), where=Chain(si, "=", Softmax(ai), "=", Softmax(Xi * W * zi))),
        (
            "THEORY section 1, with ",
            Chain(Xi, "in", RealSpace(T, dd)),
            ", ",
            Chain(W, "in", RealSpace(dd, dd)),
            ", ",
            Chain(zi, "in", RealSpace(dd)),
            " and scores ",
            Chain(gi, "in", RealSpace(T)),
            ". Steps {step:logits} to {step:matrix-form} fix one input and drop its index ",
            i,
            ": its loss is ",
            Ell(uu),
            " with ",
            Chain(uu, "=", sp.Sum(Times(g[t], sx[t]), (t, 1, T))),
            ", ",
            Chain(sx[t], "=", sp.exp(a[t]) / sp.Sum(sp.exp(a[u]), (u, 1, T))),
            " and ",
            Chain(a[t], "=", logit_tex),
            ".",
        ),
        label="definitions",
    )
    d.step(
        "logits are linear in W",
        Chain(Partial(a[t], w[j, k]), "=", Times(x[t, j], z[k]), where=Chain(1, "<=", sp.Tuple(j, k), "<=", dd)),
        (
            "only the term ",
            Chain(sp.Tuple(p, q), "=", sp.Tuple(j, k)),
            " of the double sum depends on ",
            w[j, k],
            "; in matrix form ",
            Chain(Partial(a[t], W), "=", xt * zv.T, "in", RealSpace(dd, dd)),
            ", with ",
            xt.T,
            " the row ",
            t,
            " of ",
            X,
            ".",
        ),
        Symbolic(sp.diff(logit(t), w[j, k]), x[t, j] * z[k], [dd], method=sums.reducer(rng), what=general),
        evidence=All(_logit_cases(max_T, max_d), ("every entry, ",) + inst),
        label="logits",
    )
    d.step(
        "softmax Jacobian",
        Chain(Partial(sx[t], a[tau]), "=", sx[t] * in_order(sp.KroneckerDelta(t, tau), -sx[tau])),
        "the quotient rule (derivation softmax-jacobian, step {step:softmax-jacobian/jacobian}).",
        Symbolic(
            sp.diff(B.softmax_entry(a, t, u, T), a[tau]),
            B.softmax_entry(a, t, u, T) * (sp.KroneckerDelta(t, tau) - B.softmax_entry(a, tau, u, T)),
            [T],
            method=sums.reducer(rng),
            what=("index notation, for all ", Chain(1, "<=", sp.Tuple(t, tau), "<=", T)),
        ),
        evidence=All(_jacobian_cases(max_T), ("the full Jacobian matrix for every ", Chain(T, "<=", max_T))),
        label="jacobian",
    )
    chain_rule = sp.Sum(
        Times(g[t], sx[t], in_order(sp.KroneckerDelta(t, tau), -sx[tau]), x[tau, j], z[k]), (tau, 1, T), (t, 1, T)
    )
    d.step(
        "chain rule, entry (j, k)",
        Chain(
            Partial(Ell(uu), w[j, k]),
            "=",
            Times(EllP(uu), chain_rule),
            "=",
            Times(EllP(uu), entry_tex),
            breaks=(2,),
        ),
        (
            "the chain rule through ",
            uu,
            ", the probabilities and the logits, with steps {step:logits} and {step:jacobian}; summing the Kronecker "
            "factor over ",
            tau,
            " and renaming the indices gives the second line. Sympy differentiates the loss written out in "
            "index notation directly.",
        ),
        Symbolic(
            sp.diff(Ell(score()), w[j, k]), EllP(score()) * entry(), [T, dd], method=sums.reducer(rng), what=general
        ),
        evidence=All(
            _entry_cases(max_T, max_d), ("every entry against the matrix form of step {step:matrix-form}, ",) + inst
        ),
        label="chain-rule",
    )
    mj, mk, mt, mtau = sp.symbols("j k t tau", integer=True, nonnegative=True)
    mat, written = _matrix_entry(T, dd, mj, mk, mt, mtau)
    d.step(
        "matrix form",
        Chain(Elem(X.T * J * gv * zv.T, sp.Tuple(j, k)), "=", entry_tex),
        (
            "the product of the matrices, entry by entry. With step {step:chain-rule} the gradient of the loss of one "
            "input is the ",
            RealSpace(dd, dd),
            " matrix ",
            Chain(Grad(Ell(uu), W), "=", EllP(uu) * X.T * J * gv * zv.T),
            ".",
        ),
        Symbolic(
            mat,
            written,
            [T, dd],
            method=sums.reducer({mj: (0, dd - 1), mk: (0, dd - 1)}),
            what=("the entry of the product as sympy expands it for symbolic shapes, numbered from 0",),
        ),
        label="matrix-form",
    )
    d.step(
        "average over the inputs",
        Chain(Grad(L, W), "=", Mean(EllP(ui) * Xi.T * Ji * gi * zi.T, i, n)),
        (
            "the derivative of an average is the average of the derivatives; checked entry by entry, with input ",
            i,
            " written out as in step {step:chain-rule} (entries ",
            x[i, t, j],
            ", ",
            z[i, k],
            ", ",
            g[i, t],
            ") and ",
            Chain(ui, "=", sp.Sum(Times(g[i, t], sx[i, t]), (t, 1, T))),
            ".",
        ),
        Symbolic(
            sp.diff(sp.Sum(Ell(score(i)), (i, 1, n)) / n, w[j, k]),
            sp.Sum(EllP(score(i)) * entry(i), (i, 1, n)) / n,
            [n, T, dd],
            method=sums.reducer(rng),
            what=general,
        ),
        evidence=All(
            lambda: [(f"n=2, T=2, d={average_d}", _average_check(average_d))],
            (
                "two inputs, ",
                Chain(sp.Tuple(n, T, dd), "=", sp.Tuple(2, 2, average_d)),
                ", with their own loss derivatives",
            ),
        ),
        label="average",
    )
    r_t = symbol("r", "t")
    S = B.softmax_entry
    d.step(
        "stable residual",
        Chain(
            r_t,
            ":=",
            Times(sx[t], sp.Sum(Times(sx[tau], in_order(g[t], -g[tau])), (tau, 1, T))),
            "=",
            Times(sx[t], in_order(g[t], -mean_s)),
            "=",
            Elem(J * gv, t),
            breaks=(3,),
        ),
        (
            "because the probabilities sum to one; this pairwise form avoids the cancellation of THEORY section 5. "
            "It is the factor of ",
            Times(x[t, j], z[k]),
            " in step {step:chain-rule}.",
        ),
        Symbolic(
            S(a, t, u, T) * sp.Sum(S(a, tau, u, T) * (g[t] - g[tau]), (tau, 1, T)),
            S(a, t, u, T) * (g[t] - sp.Sum(S(a, tau, u, T) * g[tau], (tau, 1, T))),
            [T],
            method=sums.reducer(rng),
            what=("index notation, for all ", Chain(1, "<=", t, "<=", T)),
        ),
        evidence=All(_pairwise_cases(max_T), ("every ", Chain(T, "<=", max_T))),
        label="residual",
    )
