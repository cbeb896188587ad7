r"""``twolayer-gradient``: $\nabla_{W_2}\mathcal L$ and $\nabla_{W_1}\mathcal L$ of the two-layer attention model
(issue 30, docs/theory.md), from the definition.

One input, index $i$ dropped: layer 1 $A^{(1)}_{t\tau}=x_\tau^\top W_1x_t$,
$s^{(1)}_{t\cdot}=\mathbb S(A^{(1)}_{t\cdot})$, $\bar h_t=\sum_\tau s^{(1)}_{t\tau}x_\tau$,
$h_t=\bar h_t+\rho x_t$; layer 2 $a^{(2)}_t=h_t^\top W_2z$,
$s^{(2)}=\mathbb S(a^{(2)})$; $g_t=Yv^\top h_t$, $u=\sum_ts^{(2)}_tg_t$. Each link of the chain rule is proved for
general $T,d$ in index notation (:func:`attsvm.symbolic.sums.reduce`): the layer-2 gradient with $h$ free (it does
not depend on $W_2$), the sensitivity $c_t=\partial u/\partial h_t$, the layer-1 softmax Jacobian of $\bar h$, the
layer-1 logits. The composition (the two softmaxes nested) is beyond the exact normal form of ``reduce``; it is
checked on explicit instances: the loss written out with $\ell$ undefined is differentiated by sympy in every entry
of $W_1$ and $W_2$ and compared exactly with the closed forms (options ``cases``: $(T,d,\rho,\text{causal})$).
"""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Symbolic
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Ell, EllP, Grad, Mean, Partial, Times, in_order

FULL_CASES = ((2, 2, 0, False), (2, 2, 1, False), (2, 2, 1, True))
CI_CASES = ((2, 2, 1, True),)


def _instance_cases(cases):
    def run():
        lp = symbol("lp")
        for T, dd, rho, causal in cases:
            inp = B.make_twolayer_input(T, dd, rho, causal)
            L = B.twolayer_loss_explicit(inp)
            G1, G2 = B.twolayer_grad_closed_form(inp, lp)
            for W, G, name in ((inp.W1, G1, "W_1"), (inp.W2, G2, "W_2")):
                auto = B.name_loss_derivatives(B.twolayer_exps_to_symbols(B.diff_entries(L, W), inp), lp)
                what = f"T={T}, d={dd}, rho={rho}, {'causal' if causal else 'all keys'}, {name}"
                yield what, Equal(auto, G, "cancel")

    return run


def _cases_prose(cases, T, dd, rho) -> tuple:
    out: list = ["the explicit loss of one input differentiated in every entry of both matrices, for "]
    for n_, (t_, d_, r_, causal) in enumerate(cases):
        out += ["; "] if n_ else []
        out += [Chain(sp.Tuple(T, dd, rho), "=", sp.Tuple(t_, d_, r_)), " with causal keys" if causal else ""]
    return tuple(out)


@derivation(
    name="twolayer-gradient",
    title="The gradients of the two-layer attention model from its definition",
    claim="hier-top-layer",
    ci={"cases": CI_CASES},
)
def twolayer_gradient(d: Derivation, cases: tuple = FULL_CASES) -> None:
    T, dd, n = symbol("T"), symbol("d"), symbol("n")
    i, t, tau, u, j, k, p, q, m = (index(c) for c in ("i", "t", "tau", "u", "j", "k", "p", "q", "m"))
    t0 = sp.Symbol("t'", integer=True, positive=True)
    tau0 = sp.Symbol(r"\tau'", integer=True, positive=True)
    x, z, v = indexed("x"), indexed("z"), indexed("v")
    w1, w2, A1, s1x, a2x, s2x = (indexed(b) for b in ("wone", "wtwo", "Aone", "sone", "atwo", "stwo"))
    hx, hbx, gx, cx, qx, rx = (indexed(b) for b in ("hl", "hlbar", "gl", "cl", "ql", "r"))
    Y, rho, uu, ui, L = symbol("Y"), symbol("res"), symbol("u"), symbol("u", "i"), symbol("L")
    W1, W2 = matrix_symbol("Wone", "d", "d"), matrix_symbol("Wtwo", "d", "d")
    xt, xtau = matrix_symbol("x", "d", 1, "t"), matrix_symbol("x", "d", 1, "tau")
    zv, vv = matrix_symbol("z", "d", 1), matrix_symbol("v", "d", 1)
    ht, hbt, ct = (
        matrix_symbol("hl", "d", 1, "t"),
        matrix_symbol("hlbar", "d", 1, "t"),
        matrix_symbol("cl", "d", 1, "t"),
    )
    rng = {j: (1, dd), k: (1, dd), t: (1, T), tau: (1, T), t0: (1, T), tau0: (1, T)}

    # ---------------------------------------------------------------- index notation, the objects sympy differentiates
    def soft(num, body):  # softmax entry: e^{num} / sum_u e^{body(u)}
        return sp.exp(num) / sp.Sum(sp.exp(body(u)), (u, 1, T))

    def a2_free(tt):  # layer-2 logit of a free layer-1 output h
        return sp.Sum(hx[tt, p] * w2[p, q] * z[q], (q, 1, dd), (p, 1, dd))

    def s2_free(tt):
        return soft(a2_free(tt), a2_free)

    def g_free(tt):
        return Y * sp.Sum(v[p] * hx[tt, p], (p, 1, dd))

    u_free = sp.Sum(s2_free(t) * g_free(t), (t, 1, T))

    def s1_free(tt, ta):  # layer-1 softmax of free logits A1
        return sp.exp(A1[tt, ta]) / sp.Sum(sp.exp(A1[tt, u]), (u, 1, T))

    def hbar_free(tt, jj):
        return sp.Sum(s1_free(tt, tau) * x[tau, jj], (tau, 1, T))

    def a1_of_w(tt, ta):
        return sp.Sum(x[ta, p] * w1[p, q] * x[tt, q], (q, 1, dd), (p, 1, dd))

    # printed forms
    mean_g = sp.Sum(Times(s2x[tau], gx[tau]), (tau, 1, T))
    w2z = sp.Sum(Times(w2[j, q], z[q]), (q, 1, dd))
    general = ("index notation, for every entry ", sp.Tuple(j, k))

    d.summary = (
        "The two-layer model of docs/theory.md: layer 1 is self-attention with weights ",
        W1,
        " (every position a query), layer 2 attends with the query ",
        zv,
        " and weights ",
        W2,
        " over the layer-1 outputs, and a linear head ",
        vv,
        " reads the result. The loss ",
        Ell(uu),
        " is an arbitrary differentiable function. Every link of the chain rule is proved for general sizes ",
        sp.Tuple(T, dd),
        "; their composition is checked exactly on explicit instances.",
    )
    d.define(
        (x[t, j], xt),
        ("the tokens of one input (index ", i, " dropped): token ", t, " and its entry ", j, "."),
    )
    d.define(((W1, w1[j, k]), (W2, w2[j, k])), "the layer-1 and layer-2 weights and their entries.")
    d.define((zv, vv, Y), "the layer-2 query, the linear head and the label.")
    d.define(rho, ("the residual coefficient: 1 with the residual connection, else 0.",))
    d.define(*glossary.loss())
    d.define(*glossary.softmax())
    d.define(*glossary.kronecker())
    d.premise(
        "definitions",
        Chain(
            A1[t, tau],
            "=",
            xtau.T * W1 * xt,
            where=Chain(s1x[t, tau], "=", sp.exp(A1[t, tau]) / sp.Sum(sp.exp(A1[t, u]), (u, 1, T))),
        ),
        (
            "the two-layer model of docs/theory.md for one input, with the layer-1 outputs ",
            Chain(ht, "=", hbt + rho * xt),
            ", ",
            Chain(hbt, "=", sp.Sum(Times(s1x[t, tau], xtau), (tau, 1, T))),
            ", ",
            Chain(a2x[t], "=", ht.T * W2 * zv),
            ", ",
            Chain(s2x[t], "=", sp.exp(a2x[t]) / sp.Sum(sp.exp(a2x[u]), (u, 1, T))),
            ", scores ",
            Chain(gx[t], "=", Times(Y, vv.T * ht)),
            " and the signed output ",
            Chain(uu, "=", sp.Sum(Times(s2x[t], gx[t]), (t, 1, T))),
            ". In entries ",
            Chain(A1[t, tau], "=", sp.Sum(Times(x[tau, p], w1[p, q], x[t, q]), (q, 1, dd), (p, 1, dd))),
            " and ",
            Chain(a2x[t], "=", sp.Sum(Times(hx[t, p], w2[p, q], z[q]), (q, 1, dd), (p, 1, dd))),
            ". A causal mask removes the keys ",
            Chain(tau, ">", t),
            " from every sum over keys; the sums below run over all keys.",
        ),
        label="definitions",
    )
    d.step(
        "layer-2 gradient",
        Chain(
            Partial(uu, w2[j, k]),
            "=",
            sp.Sum(Times(rx[t], hx[t, j], z[k]), (t, 1, T)),
            where=Chain(rx[t], "=", Times(s2x[t], in_order(gx[t], -mean_g))),
        ),
        (
            "the layer-1 outputs do not depend on ",
            W2,
            ", so this is the one-layer gradient (derivation gradient, step {step:gradient/chain-rule}) with tokens ",
            ht,
            " and scores ",
            gx[t],
            "; sympy differentiates the signed output written out in index notation with the entries ",
            hx[t, j],
            " free. In matrix form ",
            Chain(Grad(uu, W2), "=", sp.Sum(Times(rx[t], ht * zv.T), (t, 1, T))),
            ".",
        ),
        Symbolic(
            sp.diff(u_free, w2[j, k]),
            sp.Sum(s2_free(t) * (g_free(t) - u_free) * hx[t, j] * z[k], (t, 1, T)),
            [T, dd],
            method=sums.reducer(rng),
            what=general,
        ),
        label="layer-2",
    )
    d.step(
        "sensitivity to a layer-1 output",
        Chain(
            cx[t0, j],
            ":=",
            Partial(uu, hx[t0, j]),
            "=",
            Times(s2x[t0], Y, v[j]) + Times(rx[t0], w2z),
        ),
        (
            "the product rule: ",
            hx[t0, j],
            " enters the score ",
            gx[t0],
            " and the logit ",
            a2x[t0],
            "; the second term is the softmax Jacobian (derivation softmax-jacobian). In vector form ",
            Chain(ct, "=", Times(s2x[t], Y, vv) + Times(rx[t], W2 * zv)),
            ".",
        ),
        Symbolic(
            sp.diff(u_free, hx[t0, j]),
            s2_free(t0) * Y * v[j] + s2_free(t0) * (g_free(t0) - u_free) * sp.Sum(w2[j, q] * z[q], (q, 1, dd)),
            [T, dd],
            method=sums.reducer(rng),
            what=("index notation, for every ", Chain(1, "<=", t0, "<=", T), " and entry ", j),
        ),
        label="sensitivity",
    )
    d.step(
        "layer-1 softmax Jacobian",
        Chain(
            Partial(hbx[t, j], A1[t0, tau0]),
            "=",
            Times(sp.KroneckerDelta(t, t0), s1x[t, tau0], in_order(x[tau0, j], -hbx[t, j])),
        ),
        (
            "the attention average of row ",
            t,
            " depends only on the logits of its own row; the quotient rule as in derivation softmax-jacobian.",
        ),
        Symbolic(
            sp.diff(hbar_free(t, j), A1[t0, tau0]),
            sp.KroneckerDelta(t, t0) * s1_free(t, tau0) * (x[tau0, j] - hbar_free(t, j)),
            [T],
            method=sums.reducer(rng),
            what=("index notation, for all rows ", sp.Tuple(t, t0), ", keys ", tau0, " and entries ", j),
        ),
        label="layer-1-jacobian",
    )
    d.step(
        "layer-1 logits are linear in the weights",
        Chain(Partial(A1[t, tau], w1[j, k]), "=", Times(x[tau, j], x[t, k])),
        ("only the term ", Chain(sp.Tuple(p, q), "=", sp.Tuple(j, k)), " of the double sum depends on ", w1[j, k], "."),
        Symbolic(sp.diff(a1_of_w(t, tau), w1[j, k]), x[tau, j] * x[t, k], [dd], method=sums.reducer(rng), what=general),
        label="layer-1-logits",
    )
    q_def = Chain(qx[t, tau], "=", Times(s1x[t, tau], ct.T * in_order(xtau, -hbt)))
    d.step(
        "chain rule through both layers",
        Chain(
            Partial(Ell(uu), w1[j, k]),
            "=",
            Times(EllP(uu), sp.Sum(Times(qx[t, tau], x[tau, j], x[t, k]), (tau, 1, T), (t, 1, T))),
            where=q_def,
        ),
        (
            "the sensitivity ",
            qx[t, tau],
            " of the signed output to the layer-1 logit is the chain rule through ",
            uu,
            ", the layer-1 outputs by step {step:sensitivity}, the layer-1 softmax by step {step:layer-1-jacobian}"
            " with ",
            Chain(Partial(hx[t, m], A1[t, tau]), "=", Partial(hbx[t, m], A1[t, tau])),
            ", and the logits (step {step:layer-1-logits}); with step {step:layer-2}, ",
            Chain(Partial(Ell(uu), w2[j, k]), "=", Times(EllP(uu), sp.Sum(Times(rx[t], hx[t, j], z[k]), (t, 1, T)))),
            ". In matrix form ",
            Chain(
                Grad(Ell(uu), W1), "=", Times(EllP(uu), sp.Sum(Times(qx[t, tau], xtau * xt.T), (tau, 1, T), (t, 1, T)))
            ),
            ". Sympy differentiates the explicit loss (the two softmaxes written out, ",
            Ell(uu),
            " undefined) and compares with these closed forms exactly, the exponentials named by positive symbols.",
        ),
        All(_instance_cases(cases), _cases_prose(cases, T, dd, rho)),
        label="chain-rule",
    )
    d.premise(
        "average over the inputs",
        Chain(Grad(L, W1), "=", Mean(Times(EllP(ui), Grad(ui, W1)), i, n)),
        (
            "and likewise for ",
            W2,
            ": the empirical loss ",
            Chain(L, "=", Mean(Ell(ui), i, n)),
            " is an average and differentiation is linear (derivation gradient, step {step:gradient/average}); ",
            ui,
            " is the signed output of input ",
            i,
            ", whose gradients are those of step {step:chain-rule} without the loss derivative.",
        ),
        label="average",
    )
