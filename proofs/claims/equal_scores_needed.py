r"""``equal-scores-needed`` (THEORY §3, expected-false control).

The tempting statement: *on generic data,*

.. math:: \langle\nabla\mathcal L(W),W^{mm}\rangle<0\qquad\text{for every }W.

It is false without Assumption B:
$\langle\nabla\mathcal L,W^{mm}\rangle=\frac1n\sum_i\ell'_i\mathrm{Cov}_{s_i}(\gamma_i,h_i)$
($h_i=X_iW^{mm}z_i$) and among the non-optimal tokens scores and logits of $W^{mm}$ need not be ordered alike,
so a $W$ that puts its softmax mass there makes the covariance negative. The checker must *refute* it.
Data: paper-law, over-parameterised (so Att-SVM is feasible), $T\ge3$; per case 8 matrices
$W=a\,W^{mm}/\|W^{mm}\|_F+R\,U$, $a\in[-30,30]$, $R\in[0,30]$, $U\in[-1,1]^{d\times d}$, the worst counts (a
violation needs the softmax mass on non-optimal tokens; only about 0.5% of $W\in[-3,3]^{d\times d}$ violate
it). Margin: $-\langle\nabla\mathcal L(W),W^{mm}\rangle/\sum_{jk}|\nabla\mathcal L(W)_{jk}W^{mm}_{jk}|\in[-1,1]$
(``target()``-friendly); a sign below float64 resolution (``tol('grad_rtol')``) is an undecided case, so the
search never shrinks towards a rounding artefact. Confirmation: the exact-rational $W^{mm}$ of
:func:`attsvm.svm.certify_fro` (certificate verified) and the gradient at the same $W$ in ball arithmetic: the
sign of the enclosed inner product decides (rigorous); only a ball that contains 0 falls back to 50 digits.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol

TRIES = 8  # matrices W per case


@claim(
    id="equal-scores-needed",
    title="(false) On generic data <grad L(W), W^mm> < 0 for every W",
    origin="expected-false",
    source="THEORY §3 (equal-scores-needed)",
    hypotheses={"data": "overparam", "n": (1, 3), "T": (3, 5), "d_extra": (0, 2)},
    params={"loss": "logistic"},
    depends=("no-stationary-equal-scores",),
)
def equal_scores_needed(case):
    """Sign of <grad L(W), W^mm> at a random W."""
    from attsvm import model, svm

    ds, loss = case.data, case.hypotheses["loss"]
    sol = svm.solve_fro(ds)
    if sol.status != "optimal":
        return Outcome(ok=True, inconclusive=f"Att-SVM(opt) {sol.status}: hypothesis not met")
    Wmm = np.asarray(sol.W)
    # W = a W^mm/||W^mm|| + R U: violations need the softmax mass on non-optimal tokens (a < 0 puts it there);
    # TRIES such W per case, the worst one counts
    d = ds.d
    a = case.draw_matrix(TRIES, 1, scale=30.0)[:, 0]
    R = np.abs(case.draw_matrix(TRIES, 1, scale=30.0)[:, 0])
    U = case.draw_matrix(TRIES * d, d, scale=1.0).reshape(TRIES, d, d)
    Ws = a[:, None, None] * (Wmm / np.linalg.norm(Wmm)) + R[:, None, None] * U
    G = np.stack([model.grad_W(ds, W, loss) for W in Ws])
    ips = np.sum(G * Wmm, axis=(-2, -1))
    scales = np.sum(np.abs(G * Wmm), axis=(-2, -1))
    margins = np.where(scales > 0, -ips / np.where(scales > 0, scales, 1.0), 0.0)
    k = int(np.argmin(margins))
    ip, margin = float(ips[k]), float(margins[k])
    detail = {"inner": ip, "scale": float(scales[k]), "W": Ws[k].tolist(), "Wmm": Wmm.tolist(), "tries": TRIES}
    if abs(ip) <= tol("grad_rtol") * scales[k]:  # sign below float64 resolution: neither pass nor failure
        return Outcome(ok=True, margin=margin, detail=detail, inconclusive="sign of <grad L, W^mm> below rounding")
    return Outcome(ok=ip < 0, margin=float(margin), detail=detail)


@equal_scores_needed.confirm
def _confirm(case, outcome):
    """<grad L(W), W^mm> with the certified exact-rational W^mm: in ball arithmetic (rigorous) when the ball
    decides the sign, else at 50 digits (high precision)."""
    import mpmath

    from attsvm import highprec as hp
    from attsvm import kit, svm

    ds, loss = case.data, case.hypotheses["loss"]
    cert = svm.certify_fro(ds)
    if not cert.get("verified"):
        return Outcome(ok=True, inconclusive="no verified exact-rational certificate of W^mm")
    W = np.array(outcome.detail["W"])
    detail = {"certificate": cert.get("kind"), "W": outcome.detail["W"], "Wmm_exact": cert["W"]}
    k = kit.for_precision("ball", kit.BALL_PREC)
    with k.context():
        ip = np.sum(k.grad_W(ds, W, loss) * k.array(cert["W"]))
    if ip > 0 or ip < 0:  # the ball excludes 0: the sign is proved
        detail["inner_ball"] = ip.str(30, radius=True)
        bound = float(ip.lower()) if ip > 0 else float(ip.upper())
        return Outcome(ok=bool(ip < 0), margin=-bound, detail=detail, how="rigorous")
    with mpmath.workdps(hp.DPS):
        ip = hp.inner(hp.grad_W(ds, W, loss), hp.rationals(cert["W"]))
    detail["inner_50"] = mpmath.nstr(ip, 30)
    return Outcome(ok=bool(ip < 0), margin=float(-ip), detail=detail)
