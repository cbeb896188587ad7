r"""``nuclear-variational`` (THEORY §3, derived).

.. math::
    \min_{KQ^\top=W}\tfrac12(\|K\|_F^2+\|Q\|_F^2)=\|W\|_\star\quad(m\ge\mathrm{rank}\,W),\qquad
    \text{attained at }K=U\Sigma^{1/2},\ Q=V\Sigma^{1/2}.

A random $W=AB^\top$ of rank $\le r$ is drawn. Attainment: for the SVD factors, $KQ^\top=W$ and
$\frac12(\|K\|_F^2+\|Q\|_F^2)=\|W\|_\star$ (relative error $\le$ ``tol('rounding')``$\cdot d$). Lower bound: random
factorizations $K'=KR$, $Q'=QR^{-\top}$ ($R$ invertible, $m\times m$, $m\ge r$, also with $m>d$ by zero padding) satisfy
$\frac12(\|K'\|_F^2+\|Q'\|_F^2)\ge\|\mathrm{fl}(K'Q'^\top)\|_\star$ (the inequality for the product actually
formed, so no condition number enters). Margin: the smallest relative slack plus the rounding allowance.
Confirmation: the same quantities at 50 digits (products and SVDs in mpmath).
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol

FACTORIZATIONS = 4


def _half(K, Q):
    return 0.5 * (float(np.sum(K * K)) + float(np.sum(Q * Q)))


@claim(
    id="nuclear-variational",
    title="min over K Q^T = W of (||K||^2 + ||Q||^2)/2 is the nuclear norm, attained by the SVD factors",
    origin="derived",
    source="THEORY §3 (nuclear-variational)",
    hypotheses={"data": "paper", "n": 1, "T": 2, "d": (2, 5)},
)
def nuclear_variational(case):
    """SVD factors attain ||W||_*; random factorizations K R, Q R^{-T} never go below."""
    d = case.data.d
    r = case.draw_int(1, d)
    W = case.draw_matrix(d, r, scale=2.0) @ case.draw_matrix(r, d, scale=2.0)
    big = float(np.max(np.abs(W)))
    W = W / big if big > 0 else W  # the identity is homogeneous; avoid subnormal products
    U, S, Vt = np.linalg.svd(W)
    K, Q = U * np.sqrt(S), Vt.T * np.sqrt(S)
    nuc = float(np.sum(S))
    rt = tol("rounding") * max(d, 1)
    sl = {}
    if nuc > 0:
        sl["attained"] = rt - abs(_half(K, Q) - nuc) / nuc
        sl["product"] = rt - float(np.linalg.norm(K @ Q.T - W)) / float(np.linalg.norm(W))
    facs = []
    for _ in range(FACTORIZATIONS):
        m = case.draw_int(d, d + 2)
        Kp, Qp = np.zeros((d, m)), np.zeros((d, m))
        Kp[:, :d], Qp[:, :d] = K, Q
        R = case.draw_matrix(m, m, scale=1.0) + 2.0 * np.eye(m)  # invertible when |entries| <= 1 ... usually
        if abs(np.linalg.det(R)) < 1e-8:
            continue
        K2, Q2 = Kp @ R, Qp @ np.linalg.inv(R).T
        lhs = _half(K2, Q2)
        rhs = float(np.sum(np.linalg.svd(K2 @ Q2.T, compute_uv=False)))
        facs.append((K2, Q2))
        sl.setdefault("lower_bound", np.inf)
        sl["lower_bound"] = min(sl["lower_bound"], (lhs - rhs) / lhs + rt if lhs > 0 else rt)
    if not sl:
        return Outcome(ok=True, inconclusive="W = 0 and no invertible R drawn")
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"slacks": {k: float(v) for k, v in sl.items()}, "worst": worst, "nuclear": nuc, "W": W.tolist()}
    detail["factors"] = [[a.tolist(), b.tolist()] for a, b in facs]
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@nuclear_variational.confirm
def _confirm(case, outcome):
    """SVD factors and every drawn factorization re-evaluated at 50 digits."""
    import mpmath

    from attsvm import highprec as hp

    W = np.array(outcome.detail["W"])
    ok, worst = True, mpmath.inf
    with mpmath.workdps(hp.DPS):
        Wm = hp.as_mp(W)
        nuc = mpmath.fsum(hp.singular_values(Wm))
        U, S, V = mpmath.svd_r(mpmath.matrix(Wm))
        d = W.shape[0]
        K = [[U[a, j] * mpmath.sqrt(S[j]) for j in range(d)] for a in range(d)]
        Q = [[V[j, a] * mpmath.sqrt(S[j]) for j in range(d)] for a in range(d)]
        half = (hp.inner(K, K) + hp.inner(Q, Q)) / 2
        if nuc > 0:
            worst = min(worst, mpmath.mpf(10) ** (-30) - abs(half - nuc) / nuc)
        for K2, Q2 in outcome.detail["factors"]:
            Km, Qm = hp.as_mp(np.array(K2)), hp.as_mp(np.array(Q2))
            lhs = (hp.inner(Km, Km) + hp.inner(Qm, Qm)) / 2
            rhs = mpmath.fsum(hp.singular_values(hp.matmul(Km, hp.transpose(Qm))))
            worst = min(worst, (lhs - rhs) / lhs + mpmath.mpf(10) ** (-30))
        ok = worst >= 0
    return Outcome(
        ok=bool(ok), margin=float(worst), detail={"worst_50": float(worst), "float64": outcome.detail["slacks"]}
    )
