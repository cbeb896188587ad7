r"""``cone-descent`` (THEORY "Region statements"; paper, the local convergence lemma) and its control.

For a selection $\alpha$ (the data set's: ``alpha`` of the file, else opt) with Att-SVM($\alpha$) feasible and
$\alpha$ **locally optimal**, with $\mu\le\mu_\alpha=\frac18(\min(\frac12,\delta_\alpha)/A)^2$,
$A=\max_{i,t}\|x_{it}\|\|z_i\|\|W^{mm}_\alpha\|_F$ and
$\delta_\alpha=\frac12\min_i\min_{t\in\mathcal T_i,\tau\notin\mathcal T_i\cup\{\alpha_i\}}(x_{it}-x_{i\tau})^\top
W^{mm}_\alpha z_i$ (THEORY §2; $\min(\frac12,\delta_\alpha)=\frac12$ when no such pair exists):

.. math::
    \langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle<0\quad\text{for every }W\in\mathcal C_{\mu,R}(W^{mm}_\alpha)
    \text{ with }R\le\|W\|_F\le R_1 .

Region: ``hypotheses["region"]`` $=$ ``cone:MU,R,R1`` (or ``--region`` of ``attsvm prove``) gives the radii $R<R_1$
(absolute, Frobenius) and a cap MU; the cone's $\mu$ is $\min(\mathrm{MU},\mu_\alpha^{\downarrow})$, where
$\mu_\alpha^{\downarrow}\le\mu_\alpha$ is $\mu_\alpha$ rounded down to three significant bits (an exact binary
number: the region is taken exactly). ``MU = 1`` therefore means "the lemma's $\mu$". In balls (the prover) the
premises are proved: $W^{mm}_\alpha$ from its exact rational certificate, $\alpha$ locally optimal by the exact
active set, and $\mu\le\mu_\alpha$ by a certain ball comparison (else the case is inconclusive). The cone's axis
$W^\circ$ is $W^{mm}_\alpha$ rounded entrywise to float64 (exact for the dyadic $e_1e_d^\top$ of the
``locally_optimal`` data; else within $2^{-53}$ relative), so that the region is the same at every precision (the
verifier re-runs at twice the prover's); the margin uses the exact $W^{mm}_\alpha$ (its enclosure).
Margin: $-\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle$ in the covariance pair form (:func:`descent_margin`), which
must be $>0$.

The lemma needs $R$ large: near the apex the descent can fail. The default region ``cone:1,4,16`` is for the
search's ``locally_optimal`` data ($W^{mm}_\alpha=e_1e_d^\top$, $\|W^{mm}_\alpha\|_F=1$); on other data give the radii
with ``--region`` (``examples/prove/README.md`` lists the regions proved on the example files).

``cone-descent-control`` (expected-false): the same statement for an $\alpha$ that is **not** locally optimal
(data ``not_locally_optimal``): far out in the cone the softmax sits on $\alpha$ and its support tokens, and a
support token scoring above $\alpha$ makes $\langle\nabla\mathcal L,W^{mm}_\alpha\rangle>0$. The search refutes it
and ``attsvm prove`` finds a point of the region whose margin's enclosure lies below 0.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.prove.local_cone import lemma_cone
from attsvm.prove.tail import cone_parts

#: the data of the lemmas here: the strategy's locally optimal alpha != opt, small sizes
LOCAL = {"data": "locally_optimal", "n": (1, 3), "T": (3, 4), "d": (2, 3)}


def descent_margin(k, D, W, Wa, loss: str):
    r"""$-\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle$ in the covariance pair form (THEORY §3)

    .. math::
        -\langle\nabla\mathcal L(W),V\rangle=\frac1n\sum_i(-\ell'(u_i))\sum_{t<\tau}s_{it}s_{i\tau}
        (\gamma_{it}-\gamma_{i\tau})(h_{it}-h_{i\tau}),\qquad h_{it}=x_{it}^\top Vz_i,

    a sum of products with no cancellation between near-equal numbers (the form
    $\sum_ts_t(\gamma_t-u)h_t$ of ``k.grad_W`` subtracts $u\approx\gamma_\alpha$ from $\gamma_\alpha$ where the softmax
    sits on $\alpha$, and its enclosures on a box are wide). Masked tokens ($s_t=0$) drop out of the pairs.
    ``property_tests/test_prove_lemmas.py`` checks it against ``-sum(k.grad_W(D, W) * V)``."""
    T = D.T
    ti, tj = np.triu_indices(T, 1)
    s = k.softmax(D, W)
    h = k.logits(D, Wa)
    g = D.gamma
    c = (g[:, ti] - g[:, tj]) * (h[:, ti] - h[:, tj])
    if D.mask is not None:
        c = np.where(D.mask[:, ti] & D.mask[:, tj], c, 0)
    cov = np.sum(s[:, ti] * s[:, tj] * c, axis=-1)
    _, _, u = k.outputs(D, W)
    return -np.sum(k.loss_derivative(u, loss) * cov) / D.N


def _descent(case, locally_optimal: bool, every_input: bool = False):
    setup = lemma_cone(case, locally_optimal, every_input)
    if isinstance(setup, Outcome):
        return setup
    D, Wa, cone, info = setup
    W = case.param(cone, direction=info.pop("axis"))
    m = descent_margin(case.kit, D, W, Wa, case.hypotheses["loss"])
    return Outcome(ok=bool(m > 0), margin=m, detail=info)


@claim(
    id="cone-descent",
    title="alpha locally optimal: <grad L(W), W^mm_alpha> < 0 on the cone C_{mu,R}(W^mm_alpha), R <= |W| <= R1",
    origin="paper",
    source="THEORY §8 Region statements (cone-descent); 2308.16898, local convergence lemma",
    hypotheses={**LOCAL, "region": "cone:1,4,16"},
    params={"loss": "logistic"},
    depends=("gd-local-cone", "softmax-decay"),
    examples=20,
)
def cone_descent(case):
    """Descent along W^mm_alpha at every W of the lemma's cone (W = case.param(cone))."""
    return _descent(case, locally_optimal=True)


@claim(
    id="cone-descent-every-input",
    title="cone-descent with delta_alpha over every input (also those without a support token)",
    origin="derived",
    source="THEORY §8 Region statements (cone-descent-every-input); the correction of cone-descent's mu",
    hypotheses={**LOCAL, "region": "cone:1,4,16", "tail": "cone-descent-tail"},
    params={"loss": "logistic"},
    depends=("cone-descent",),
    examples=20,
)
def cone_descent_every_input(case):
    r"""The descent statement of cone-descent on the cone of
    $\mu\le\frac18(\min(\frac12,\delta^{\mathrm{all}}_\alpha)/A)^2$, $\delta^{\mathrm{all}}_\alpha$ the gap of every
    non-support token over every input
    (:func:`attsvm.prove.local_cone.lemma_cone`, ``every_input=True``)."""
    return _descent(case, locally_optimal=True, every_input=True)


@claim(
    id="cone-descent-control",
    title="(control) <grad L(W), W^mm_alpha> < 0 on the cone of a NOT locally optimal alpha",
    origin="expected-false",
    source="THEORY §8 cone-descent (negative control); THEORY §4 gd-local-cone",
    hypotheses={"data": "not_locally_optimal", "n": (1, 3), "T": (3, 4), "d": (2, 3), "region": "cone:1,4,16"},
    params={"loss": "logistic"},
    depends=("cone-descent",),
    examples=20,
)
def cone_descent_control(case):
    """The descent statement of cone-descent, for an alpha that is not locally optimal."""
    return _descent(case, locally_optimal=False)


def others(D, i: int) -> list[int]:
    """The visible tokens of input ``i`` other than its selected $\alpha_i$."""
    a = int(np.asarray(D.selection)[i])
    return [t for t in range(D.T) if t != a and (D.mask is None or D.mask[i, t])]


def gap_bounds(k, D, axis, mu):
    r"""``(lo, up)``: for every input $i$ and visible token $t\ne\alpha_i$, the bounds
    $\ell_{it}\le e_{it}/r\le u_{it}$ of the score gap $e_{it}=(x_{i\alpha_i}-x_{it})^\top Wz_i$ over the cone's
    sphere $\{W=rU:\ \|U\|_F=1,\ \mathrm{corr}(U,W^\circ)\ge1-\mu\}$:
    $\ell,u=(x_{i\alpha_i}-x_{it})^\top\hat W^\circ z_i\mp\sqrt{2\mu}\,\|x_{i\alpha_i}-x_{it}\|\|z_i\|$
    ($\|U-\hat W^\circ\|_F^2=2-2\,\mathrm{corr}\le2\mu$, then Cauchy–Schwarz), keyed ``(i, t)``."""
    alpha = np.asarray(D.selection)
    Ax = k.array(np.array([[Fraction(float(x)) for x in row] for row in np.asarray(axis)], dtype=object))
    an = k.norm(Ax)
    root = k.sqrt(k.scalar(2 * Fraction(mu)))
    ho = k.logits(D, Ax)
    zn = k.sqrt(np.sum(D.Z * D.Z, axis=-1))
    lo, up = {}, {}
    for i in range(D.N):
        a = int(alpha[i])
        for t in others(D, i):
            dx = D.X[i, a] - D.X[i, t]
            b = k.sqrt(np.sum(dx * dx)) * zn[i]
            lo[i, t] = (ho[i, a] - ho[i, t]) / an - root * b
            up[i, t] = (ho[i, a] - ho[i, t]) / an + root * b
    return lo, up


def tail_bound(k, D, Wa, axis, mu, R1):
    r"""``(margin, detail)`` of the tail lemma of ``cone-descent-every-input`` (``cone-descent-tail``, below) at
    radius ``R1``, for the logistic loss.

    Write $W=rU$ with $\|U\|_F=1$, $\mathrm{corr}(U,W^\circ)\ge1-\mu$ (so $\|U-\hat W^\circ\|_F\le\sqrt{2\mu}$) and
    $r\ge R_1$. For a token $t\ne\alpha_i$, $e_{it}=(x_{i\alpha_i}-x_{it})^\top Wz_i\in[r\ell_{it},ru_{it}]$ with
    $\ell,u=(x_{i\alpha_i}-x_{it})^\top\hat W^\circ z_i\mp\sqrt{2\mu}\,\|x_{i\alpha_i}-x_{it}\|\|z_i\|$, and
    $\rho_{it}=s_{it}/s_{i\alpha_i}=e^{-e_{it}}$. With $c_{t\tau}=(\gamma_t-\gamma_\tau)(h_t-h_\tau)$,
    $h=X_iW^{mm}_\alpha z_i$,
    $w_i=-\ell'(u_i)\in[w_i^-,w_i^+]=[(1+e^{\max_t\gamma_{it}})^{-1},(1+e^{\min_t\gamma_{it}})^{-1}]$,
    $s_{i\alpha_i}\ge\sigma_i=(1+\sum_te^{-R_1\ell_{it}})^{-1}$, and any reference pair $(j,s)$ with
    $c_{\alpha s}>0$ (a support token of a locally optimal $\alpha$):

    .. math::
        \frac{-n\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle}{e^{-ru_{js}}}
        =\frac{\sum_iw_is_{i\alpha_i}^2\bigl(\sum_t\rho_{it}c_{\alpha t}
        +\sum_{t<\tau}\rho_{it}\rho_{i\tau}c_{t\tau}\bigr)}{e^{-ru_{js}}}
        \ge w_j^-\sigma_j^2c_{\alpha s}-\sum_iw_i^+\Bigl(\sum_t[c_{\alpha t}]_-e^{-r(\ell_{it}-u_{js})}
        +\sum_{t<\tau}[c_{t\tau}]_-e^{-r(\ell_{it}+\ell_{i\tau}-u_{js})}\Bigr)

    ($t,\tau\ne\alpha_i$; the other positive terms dropped), which does not decrease in $r$ when every exponent
    with a non-zero coefficient is positive and every $\ell_{it}>0$: its value at $r=R_1$ (the best reference) is
    the margin; ``-1`` when no reference satisfies the exponent conditions (the lemma does not apply). An input
    without a support token is covered (its terms are the negative ones), which a per-input bound cannot do: there
    $\mathrm{Cov}_{s_i}(\gamma_i,h_i)$ can be negative for every large $r$."""
    g = D.gamma
    alpha = np.asarray(D.selection)
    R1 = k.scalar(Fraction(R1))
    h = k.logits(D, Wa)
    lo, up = gap_bounds(k, D, axis, mu)
    one = k.scalar(1)
    neg, refs, w_hi, sig = [], [], [], []
    for i in range(D.N):
        a = int(alpha[i])
        vis = others(D, i)
        for t in vis:
            if not bool(lo[i, t] > 0):
                return k.scalar(-1), {"why": f"token ({i}, {t}) is not separated from alpha on the cone"}
            c = (g[i, a] - g[i, t]) * (h[i, a] - h[i, t])
            if bool(c > 0):
                refs.append((i, t, c))
            elif not bool(c >= 0):
                neg.append((i, (lo[i, t],), -c))
        for j, t in enumerate(vis):
            for tau in vis[j + 1 :]:
                c = (g[i, t] - g[i, tau]) * (h[i, t] - h[i, tau])
                if not bool(c >= 0):
                    neg.append((i, (lo[i, t], lo[i, tau]), -c))
        gi = [g[i, t] for t in range(D.T) if D.mask is None or D.mask[i, t]]
        w_hi.append(one / (1 + k.exp(k.min(np.array(gi, dtype=object)))))
        sig.append(one / (1 + sum((k.exp(-R1 * lo[i, t]) for t in vis), k.scalar(0))))
    w_lo = [one / (1 + k.exp(k.max(np.array([g[i, t] for t in range(D.T)], dtype=object)))) for i in range(D.N)]
    best, ref = None, None
    for j, s, c in refs:
        m = w_lo[j] * sig[j] * sig[j] * c
        for i, ls, q in neg:
            expo = sum(ls, k.scalar(0)) - up[j, s]
            if not bool(expo > 0):
                m = None
                break
            m = m - w_hi[i] * q * k.exp(-R1 * expo)
        if m is not None and (best is None or bool(m > best)):
            best, ref = m, (j, s)
    if best is None:
        return k.scalar(-1), {"why": "no reference token: an exponent is not positive (R1 cannot help)"}
    return best, {"reference": ref}


def radial_bound(k, D, Wa, axis, mu, r):
    r"""$B(r)$: a lower bound of $-\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle\,e^{rc_0}$ over the cone's sphere
    $\{W\in\mathcal C_{\mu}(W^\circ):\|W\|_F=r\}$ (logistic loss), so that $B(r)>0$ for every $r\in[R,R_1]$ proves
    ``cone-descent-every-input`` on $R\le\|W\|_F\le R_1$ (the *radial reduction*: nine or four coordinates become
    one).

    With $\rho_{it}=s_{it}/s_{i\alpha_i}=e^{-e_{it}}$, $e_{it}\in[r\ell_{it},ru_{it}]$ (:func:`gap_bounds`),
    $c_{t\tau}=(\gamma_{it}-\gamma_{i\tau})(h_{it}-h_{i\tau})$, $h=X_iW^{mm}_\alpha z_i$, the pair form of
    :func:`descent_margin` reads

    .. math::
        -n\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle=\sum_iw_is_{i\alpha_i}^2\Bigl(\sum_{t}\rho_{it}c_{\alpha t}
        +\sum_{t<\tau}\rho_{it}\rho_{i\tau}c_{t\tau}\Bigr)\qquad(t,\tau\ne\alpha_i).

    Every term with $c>0$ is bounded below with $\rho\ge e^{-ru}$ (products: the sum of the $u$), $s_{i\alpha_i}\ge
    \sigma_i(r)=(1+\sum_te^{-r\ell_{it}})^{-1}$ and $w_i=-\ell'(u_i)\ge(1+e^{\gamma_{i\alpha_i}+\epsilon_i})^{-1}$;
    every term with $c<0$ above with $\rho\le e^{-r\ell}$, $s_{i\alpha_i}\le1$ and
    $w_i\le(1+e^{\gamma_{i\alpha_i}-\epsilon_i})^{-1}$, where $|u_i-\gamma_{i\alpha_i}|\le\epsilon_i=
    (1-\sigma_i(r))\max_t|\gamma_{it}-\gamma_{i\alpha_i}|$ ($u_i=\sum_ts_{it}\gamma_{it}$). Each bound holds for every
    $W$ of the sphere separately (the tokens' worst cases need not be attained together: a relaxation). The common
    factor $e^{rc_0}$ ($c_0$: the smallest upper gap of a positive term, rounded down to $2^{-6}$; any constant keeps
    the sign) is folded into the exponents, so that the bound is of order 1 at every radius. Written with the kit, so
    that on an interval of radii $[a,b]$ its enclosure is the bound of the slab and the prover's mean-value form in
    $r$ tightens it."""
    g = D.gamma
    alpha = np.asarray(D.selection)
    h = k.logits(D, Wa)
    lo, up = gap_bounds(k, D, axis, mu)
    one = k.scalar(1)
    terms = []  # (i, c, lower exponent, upper exponent) of each token and pair term
    for i in range(D.N):
        a = int(alpha[i])
        vis = others(D, i)
        for j, t in enumerate(vis):
            terms.append((i, (g[i, a] - g[i, t]) * (h[i, a] - h[i, t]), lo[i, t], up[i, t]))
            for tau in vis[j + 1 :]:
                c = (g[i, t] - g[i, tau]) * (h[i, t] - h[i, tau])
                terms.append((i, c, lo[i, t] + lo[i, tau], up[i, t] + up[i, tau]))
    ups = [k.to_float(u) for _, c, _, u in terms if bool(c > 0)]
    if not ups:
        return k.scalar(-1), {"why": "no term with a positive coefficient (no support token scores below alpha)"}
    c0 = k.scalar(Fraction(int(np.floor(min(ups) * 64)), 64))
    pos = [k.scalar(0)] * D.N
    neg = [k.scalar(0)] * D.N
    for i, c, el, eu in terms:
        if bool(c > 0):
            pos[i] = pos[i] + c * k.exp(-r * (eu - c0))
        elif not bool(c == 0):  # negative, or of undecided sign: bounded by |c|
            neg[i] = neg[i] + k.max(np.array([c, -c], dtype=object)) * k.exp(-r * (el - c0))
    total = k.scalar(0)
    for i in range(D.N):
        a = int(alpha[i])
        vis = others(D, i)
        sig = one / (1 + sum((k.exp(-r * lo[i, t]) for t in vis), k.scalar(0)))
        spread = k.max(np.array([x for t in vis for x in (g[i, t] - g[i, a], g[i, a] - g[i, t])], dtype=object))
        eps = (1 - sig) * spread
        w_lo = one / (1 + k.exp(g[i, a] + eps))
        w_hi = one / (1 + k.exp(g[i, a] - eps))
        total = total + w_lo * sig * sig * pos[i] - w_hi * neg[i]
    return total / D.N, {"c0": k.to_float(c0)}


@claim(
    id="cone-descent-radial",
    title="the radial bound B(r) > 0 on R <= r <= R1: cone-descent-every-input on that shell, one coordinate",
    origin="derived",
    source="THEORY §8 Region statements (cone-descent-radial); the softmax-saturation step of 2308.16898's local lemma",
    hypotheses={**LOCAL, "region": "cone:1,4,64", "tail": "cone-descent-tail"},
    params={"loss": "logistic"},
    depends=("cone-descent-every-input",),
    examples=20,
)
def cone_descent_radial(case):
    r"""$B(r)>0$ (:func:`radial_bound`) for every radius $r\in[R,R_1]$ of the cone ``cone:MU,R,R1`` of
    ``cone-descent-every-input`` (the parameter: ``case.param("box:R,R1", shape=(1,))``). It implies
    $\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle<0$ for every $W$ of that cone with $R\le\|W\|_F\le R_1$; with
    ``cone:MU,R,inf`` the tail lemma ``cone-descent-tail`` closes $\|W\|_F\ge R_1$, so the whole cone."""
    if case.hypotheses["loss"] != "logistic":
        return Outcome(ok=True, inconclusive="the radial bound is written for the logistic loss")
    setup = lemma_cone(case, every_input=True)
    if isinstance(setup, Outcome):
        return setup
    D, Wa, cone, info = setup
    _, R, R1 = cone_parts(cone)
    r = case.param(f"box:{R},{R1}", shape=(1,))[0]
    m, detail = radial_bound(case.kit, D, Wa, info.pop("axis"), Fraction(info["mu"]), r)
    return Outcome(ok=bool(m > 0), margin=m, detail={**info, **detail})


@claim(
    id="cone-descent-tail",
    title="tail lemma of cone-descent: Cov_s(gamma, h) > 0 for every input on the cone past R1 (closed-form bound)",
    origin="derived",
    source="THEORY §8 Region statements (cone-descent-tail); the softmax-saturation step of 2308.16898's local lemma",
    hypotheses={**LOCAL, "region": "cone:1,4,64"},
    params={"loss": "logistic"},
    depends=("cone-descent-every-input",),
    examples=20,
)
def cone_descent_tail(case):
    r"""The bound of :func:`tail_bound` at $R_1$ of the region (``cone:MU,R,R1``): $>0$ proves
    $\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle<0$ for every $W$ of $\mathcal C_{\mu,R}(W^{mm}_\alpha)$ with
    $\|W\|_F\ge R_1$ (every input's covariance is positive there and $\ell'<0$)."""
    if case.hypotheses["loss"] != "logistic":
        return Outcome(ok=True, inconclusive="the tail bound is written for the logistic loss")
    setup = lemma_cone(case, every_input=True)
    if isinstance(setup, Outcome):
        return setup
    D, Wa, _, info = setup
    m, detail = tail_bound(case.kit, D, Wa, info["axis"], Fraction(info["mu"]), Fraction(info["R1"]))
    return Outcome(ok=bool(m > 0), margin=m, detail={**detail, "mu": info["mu"], "R1": info["R1"]})
