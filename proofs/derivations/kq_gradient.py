r"""``kq-gradient``: chain rule for $W=KQ^\top$: $\nabla_K\mathcal L=\nabla_W\mathcal L\,Q$ and
$\nabla_Q\mathcal L=(\nabla_W\mathcal L)^\top K$, with $K,Q\in\mathbb R^{d\times m}$.

Proved for general $T,d,m$ in index notation: sympy differentiates the loss of one input, written out with
$w_{jl}=\sum_ck_{jc}q_{lc}$, in a general entry of $K$ (of $Q$) and the result is compared with the entry of
$\nabla_W\ell\,Q$ (of $(\nabla_W\ell)^\top K$) by :func:`attsvm.symbolic.sums.reduce`; the average over
the inputs is linear (derivation ``gradient``). Second evidence: the explicit loss differentiated in every entry
of $K$ and $Q$ on small instances."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Symbolic
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Elem, Ell, EllP, Grad, Partial, RealSpace, Times

CASES = ((2, 2, 1), (2, 2, 2), (3, 2, 1), (2, 3, 1))


def _cases(which: str, shapes=CASES):
    def cases():
        for T, dd, m in shapes:
            K, Q = matrix("k", dd, m), matrix("q", dd, m)
            W = K * Q.T
            inp = B.make_input(T, dd, W)
            L = B.loss_explicit([inp])
            lp = symbol("lp")
            G = B.grad_closed_form([inp], [lp])
            F = K if which == "K" else Q
            auto = B.name_loss_derivatives(B.exps_to_symbols(B.diff_entries(L, F), inp.a, inp.e), lp)
            closed = G * Q if which == "K" else G.T * K
            yield f"T={T}, d={dd}, m={m}", Equal(auto, closed, "cancel")

    return cases


def _entry_cases():
    def cases():
        for dd, m in ((2, 1), (2, 2), (3, 2)):
            K, Q = matrix("k", dd, m), matrix("q", dd, m)
            W = K * Q.T
            for a in range(dd):
                for b in range(m):
                    lhs = W.diff(K[a, b])
                    rhs = sp.zeros(dd, dd)
                    rhs[a, :] = Q[:, b].T
                    yield f"d={dd}, m={m}, K[{a + 1},{b + 1}]", Equal(lhs, rhs)

    return cases


def _shapes_prose(names, shapes) -> tuple:
    """Prose: every entry for the sizes ``names`` equal to each of ``shapes`` (separated by semicolons)."""
    out: list = ["every entry for "]
    for n_, shape in enumerate(shapes):
        out += ["; "] if n_ else []
        for k_, (nm, val) in enumerate(zip(names, shape)):
            out += ([", "] if k_ else []) + [Chain(nm, "=", val)]
    return tuple(out)


@derivation(
    name="kq-gradient", title="Gradients of the (K,Q) parametrisation", claim="grad-closed-form", ci={"full": False}
)
def kq_gradient(d: Derivation, full: bool = True) -> None:
    shapes = CASES if full else CASES[:2]
    T, dd, m = symbol("T"), symbol("d"), sp.Symbol("m", integer=True, positive=True)
    j, l, a, b, c, t, tau, u, p, r = (index(x) for x in ("j", "l", "a", "b", "c", "t", "tau", "u", "p", "r"))
    kk, qq, w, x, z, g = (indexed(x) for x in ("k", "q", "w", "x", "z", "gamma"))
    K, Q, W = matrix_symbol("K", "d", m), matrix_symbol("Q", "d", m), matrix_symbol("W", "d", "d")
    L, uu = symbol("L"), symbol("u")

    # the loss of one input in index notation, with w_{pr} = sum_c k_{pc} q_{rc}
    def w_of(jj, ll):
        return sp.Sum(kk[jj, c] * qq[ll, c], (c, 1, m))

    def logit(tt):
        return sp.Sum(x[tt, p] * w_of(p, r) * z[r], (r, 1, dd), (p, 1, dd))

    def soft(tt):
        return sp.exp(logit(tt)) / sp.Sum(sp.exp(logit(u)), (u, 1, T))

    score = sp.Sum(g[t] * soft(t), (t, 1, T))

    def grad_w(jj, ll):  # [grad_W l(u)]_{jj,ll}: derivation gradient, steps chain-rule and matrix-form
        mean = sp.Sum(soft(tau) * g[tau], (tau, 1, T))
        return EllP(score) * sp.Sum(x[t, jj] * soft(t) * (g[t] - mean) * z[ll], (t, 1, T))

    rng = {a: (1, dd), b: (1, m), j: (1, dd), l: (1, dd)}
    general = ("index notation, for every entry ", sp.Tuple(a, b))
    G, Gx = matrix_symbol("G", "d", "d"), indexed("G")
    d.define(((K, kk[a, b]), (Q, qq[a, b])), "the key and query factors and their entries.")
    d.define(*glossary.loss())
    d.define(*glossary.empirical_loss())
    d.define(*glossary.kronecker())
    d.premise(
        "parametrisation",
        Chain(W, "=", K * Q.T, where=Chain(sp.Tuple(K, Q), "in", RealSpace(dd, m))),
        (
            "THEORY section 1, the parametrisation by the pair ",
            sp.Tuple(K, Q),
            "; in entries ",
            Chain(w[j, l], "=", sp.Sum(Times(kk[j, c], qq[l, c]), (c, 1, m))),
            ". As the loss is an average over the inputs and differentiation is linear, it suffices to treat the loss ",
            Ell(uu),
            " of one input, with gradient ",
            Chain(G, "=", Grad(Ell(uu), W), "in", RealSpace(dd, dd)),
            " (derivation gradient).",
        ),
        label="parametrisation",
    )
    d.step(
        "entries of W",
        Chain(Partial(w[j, l], kk[a, b]), "=", Times(sp.KroneckerDelta(j, a), qq[l, b])),
        ("only the term ", Chain(c, "=", b), " of row ", Chain(j, "=", a), " depends on ", kk[a, b], "."),
        Symbolic(
            sp.diff(w_of(j, l), kk[a, b]),
            sp.KroneckerDelta(j, a) * qq[l, b],
            [m],
            method=sums.reducer(rng),
            what=general,
        ),
        evidence=All(_entry_cases(), _shapes_prose((dd, m), ((2, 1), (2, 2), (3, 2)))),
        label="entries",
    )
    d.step(
        "chain rule for K",
        Chain(
            Partial(Ell(uu), kk[a, b]),
            "=",
            sp.Sum(Times(Gx[j, l], sp.KroneckerDelta(j, a), qq[l, b]), (l, 1, dd), (j, 1, dd)),
            "=",
            sp.Sum(Times(Gx[a, l], qq[l, b]), (l, 1, dd)),
            "=",
            Elem(G * Q, sp.Tuple(a, b)),
            breaks=(2,),
        ),
        (
            "the chain rule through the entries of ",
            W,
            ", with step {step:entries}; so ",
            Chain(Grad(L, K), "=", Grad(L, W) * Q, "in", RealSpace(dd, m)),
            ". Sympy differentiates the loss of one input written out in index notation and compares with the "
            "entry of the gradient of derivation gradient (steps {step:gradient/chain-rule} and "
            "{step:gradient/matrix-form}) times ",
            Q,
            ".",
        ),
        Symbolic(
            sp.diff(Ell(score), kk[a, b]),
            sp.Sum(grad_w(a, l) * qq[l, b], (l, 1, dd)),
            [T, dd, m],
            method=sums.reducer(rng),
            what=general,
        ),
        evidence=All(_cases("K", shapes), _shapes_prose((T, dd, m), shapes)),
        label="chain-rule-k",
    )
    d.step(
        "chain rule for Q",
        Chain(
            Partial(Ell(uu), qq[a, b]),
            "=",
            sp.Sum(Times(Gx[j, a], kk[j, b]), (j, 1, dd)),
            "=",
            Elem(G.T * K, sp.Tuple(a, b)),
        ),
        (
            "the same computation with the roles of ",
            K,
            " and ",
            Q,
            " exchanged; so ",
            Chain(Grad(L, Q), "=", matrix_symbol("gradL", "d", "d").T * K, "in", RealSpace(dd, m)),
            ".",
        ),
        Symbolic(
            sp.diff(Ell(score), qq[a, b]),
            sp.Sum(grad_w(j, a) * kk[j, b], (j, 1, dd)),
            [T, dd, m],
            method=sums.reducer(rng),
            what=general,
        ),
        evidence=All(_cases("Q", shapes), _shapes_prose((T, dd, m), shapes)),
        label="chain-rule-q",
    )
