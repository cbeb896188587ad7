r"""``ntp-logloss-convex`` (derived, THEORY §7) and its expected-false control ``ntp-logloss-convex-control``.

The next-token log-loss of self-attention with vocabulary embeddings,

.. math:: \mathcal L(W)=\frac1n\sum_i\Big[\log\sum_{t\ \mathrm{visible}}e^{a_{it}}
   -\log\sum_{t:\,x_{it}=e_{y_i}}e^{a_{it}}\Big],\qquad a_{it}=x_{it}^\top Wz_i,

is convex in $W$. *Proof.* $a_i$ is linear in $W$; the first term is a log-sum-exp of linear functions (convex);
in the second every occurrence of the label carries the same embedding $e_{y_i}$, hence the same logit
$e_{y_i}^\top Wz_i$, so it equals $e_{y_i}^\top Wz_i+\log m_i$ ($m_i$ the number of occurrences): linear. $\square$

The proof uses that the label's occurrences share one embedding. The control replaces the label by a *set of
distinct embeddings* — the label and one other visible token $j_i$ of the sequence (the first one): then the
second term is $-\log(e^{a_{iy}}+e^{a_{ij}})$, concave, and convexity fails (e.g. logits $(t,-t,0)$ with the first
two in the set give $\log(1+1/(2\cosh t))$, concave at $t=0$). The checker must refute it.

Check (both, written once with ``case.kit``, so a float64 failure is confirmed automatically at 50 and 100 digits):
for ``pairs`` segments $[W_1,W_2]$ drawn entrywise in $[-\mathrm{scale},\mathrm{scale}]$ and
$\lambda\in\{\frac14,\frac12,\frac34\}$ the convexity gap
$\lambda\mathcal L(W_1)+(1-\lambda)\mathcal L(W_2)-\mathcal L(\lambda W_1+(1-\lambda)W_2)$, divided by
$1+|\mathcal L(W_1)|+|\mathcal L(W_2)|$; the margin is the smallest one plus ``tol("rounding")`` (an exactly affine
segment gives 0 up to rounding), and a case fails when it is negative.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from attsvm.claims import Outcome, claim

LAMBDAS = ("1/4", "1/2", "3/4")
DATA = {"data": "ntp", "n": (1, 4), "T": (2, 4), "K": (2, 6), "d": (2, 4)}
PARAMS = {"pairs": 16, "scale": 4.0}


def _label_sets(raw, control: bool) -> np.ndarray:
    """(n,T) bool: the label's occurrences, and for the control also those of the first other visible token."""
    lab = np.array(raw.label_mask)
    if not control:
        return lab
    vis = np.ones(lab.shape, bool) if raw.visible is None else np.asarray(raw.visible)
    tok = np.asarray(raw.tokens)
    for i in range(raw.n):
        other = np.flatnonzero(vis[i] & ~lab[i])
        if other.size:
            lab[i] |= vis[i] & (tok[i] == tok[i, other[0]])
    return lab


def _loss(k, D, W, vis: np.ndarray, sets: np.ndarray):
    r"""$\frac1n\sum_i[\mathrm{LSE}_{\mathrm{visible}}a_i-\mathrm{LSE}_{\mathrm{set}}a_i]$ in the kit's precision."""
    a = k.logits(D, W)
    terms = [k.logsumexp(a[i][vis[i]]) - k.logsumexp(a[i][sets[i]]) for i in range(a.shape[0])]
    return sum(terms[1:], terms[0]) / len(terms)


def convexity_gap(case, control: bool) -> Outcome:
    """The smallest normalised convexity gap over the drawn segments (module docstring)."""
    k = case.kit
    raw = case.data
    D = k.data(raw)
    vis = np.ones((raw.n, raw.T), bool) if raw.visible is None else np.asarray(raw.visible)
    sets = _label_sets(raw, control)
    if control and np.array_equal(sets, np.asarray(raw.label_mask)):
        return Outcome(ok=True, inconclusive="no sequence has a visible token besides its label")
    h = case.hypotheses
    P, d = int(h["pairs"]), raw.d
    W1 = k.array(case.draw_matrix(P * d, d, scale=float(h["scale"])).reshape(P, d, d))
    W2 = k.array(case.draw_matrix(P * d, d, scale=float(h["scale"])).reshape(P, d, d))
    worst, where = None, None
    for p in range(P):
        f1, f2 = _loss(k, D, W1[p], vis, sets), _loss(k, D, W2[p], vis, sets)
        for lam_s in LAMBDAS:
            lam = k.scalar(lam_s) if k.hp else float(Fraction(lam_s))
            fm = _loss(k, D, lam * W1[p] + (1 - lam) * W2[p], vis, sets)
            gap = (lam * f1 + (1 - lam) * f2 - fm) / (1 + abs(f1) + abs(f2))
            if worst is None or gap < worst:
                worst, where = gap, (p, lam_s)
    margin = worst + k.tol("rounding")  # a gap of rounding size is no violation
    return Outcome(
        ok=bool(margin >= 0),
        margin=margin,
        detail={"segment": where[0], "lambda": where[1], "normalised_gap": k.to_float(worst)},
    )


@claim(
    id="ntp-logloss-convex",
    title="With vocabulary embeddings the next-token log-loss of self-attention is convex in W",
    origin="derived",
    source="arXiv 2403.08081; THEORY §7",
    hypotheses=DATA,
    params=PARAMS,
)
def ntp_logloss_convex(case):
    return convexity_gap(case, control=False)


@claim(
    id="ntp-logloss-convex-control",
    title="(false) The log-loss of a label SET of distinct embeddings is convex in W",
    origin="expected-false",
    source="THEORY §7 (ntp-logloss-convex, control)",
    hypotheses={**DATA, "T": (3, 4), "K": (3, 6)},
    params=PARAMS,
    depends=("ntp-logloss-convex",),
)
def ntp_logloss_convex_control(case):
    return convexity_gap(case, control=True)
