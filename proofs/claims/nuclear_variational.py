r"""``nuclear-variational`` (THEORY §3, derived).

.. math::
    \min_{KQ^\top=W}\tfrac12(\|K\|_F^2+\|Q\|_F^2)=\|W\|_\star\quad(m\ge\mathrm{rank}\,W),\qquad
    \text{attained at }K=U\Sigma^{1/2},\ Q=V\Sigma^{1/2}.

A random $W=AB^\top$ of rank $\le r$ is drawn. Attainment: for the SVD factors, $KQ^\top=W$ and
$\frac12(\|K\|_F^2+\|Q\|_F^2)=\|W\|_\star$ (relative error $\le$ ``tol('rounding')``$\cdot d$). Lower bound: random
factorizations $K'=KR$, $Q'=QR^{-\top}$ ($R$ invertible, $m\times m$, $m\ge r$, also with $m>d$ by zero padding) satisfy
$\frac12(\|K'\|_F^2+\|Q'\|_F^2)\ge\|\mathrm{fl}(K'Q'^\top)\|_\star$ (the inequality for the product actually
formed, so no condition number enters). Margin: the smallest relative slack plus the rounding allowance.
Written once with ``case.kit``: the automatic confirmation recomputes the same quantities at 50 digits (products
and SVDs in mpmath, the allowance then $10^{-30}d$).
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim

FACTORIZATIONS = 4


def _half(K, Q):
    return (np.sum(K * K) + np.sum(Q * Q)) / 2


@claim(
    id="nuclear-variational",
    title="min over K Q^T = W of (||K||^2 + ||Q||^2)/2 is the nuclear norm, attained by the SVD factors",
    origin="derived",
    source="THEORY §3 (nuclear-variational)",
    hypotheses={"data": "paper", "n": 1, "T": 2, "d": (2, 5)},
)
def nuclear_variational(case):
    """SVD factors attain ||W||_*; random factorizations K R, Q R^{-T} never go below."""
    k = case.kit
    d = case.data.d
    r = case.draw_int(1, d)
    W = k.array(case.draw_matrix(d, r, scale=2.0)) @ k.array(case.draw_matrix(r, d, scale=2.0))
    big = np.max(np.abs(W))
    W = W / big if big > 0 else W  # the identity is homogeneous; avoid subnormal products
    U, S, Vt = k.svd(W)
    K, Q = U * k.sqrt(S), Vt.T * k.sqrt(S)
    nuc = np.sum(S)
    rt = k.tol("rounding") * max(d, 1)
    sl = {}
    if nuc > 0:
        sl["attained"] = rt - abs(_half(K, Q) - nuc) / nuc
        sl["product"] = rt - k.norm(K @ Q.T - W) / k.norm(W)
    for _ in range(FACTORIZATIONS):
        m = case.draw_int(d, d + 2)
        Kp, Qp = k.zeros(d, m), k.zeros(d, m)
        Kp[:, :d], Qp[:, :d] = K, Q
        R = k.array(case.draw_matrix(m, m, scale=1.0)) + 2 * k.eye(m)  # invertible when |entries| <= 1 ... usually
        if abs(k.det(R)) < 1e-8:
            continue
        K2, Q2 = Kp @ R, Qp @ k.inv(R).T
        lhs = _half(K2, Q2)
        rhs = k.nuclear_norm(K2 @ Q2.T)
        bound = (lhs - rhs) / lhs + rt if lhs > 0 else rt
        sl["lower_bound"] = min(sl.get("lower_bound", bound), bound)
    if not sl:
        return Outcome(ok=True, inconclusive="W = 0 and no invertible R drawn")
    worst = min(sl, key=lambda key: sl[key])
    margin = sl[worst]
    detail = {"slacks": sl, "worst": worst, "nuclear": nuc, "W": W.tolist()}
    return Outcome(ok=bool(margin >= 0), margin=margin, detail=detail)
