r"""``kq-balancedness`` (derived; gradient flow: Marcotte et al., arXiv 2506.06194, Cor. 3.9): the imbalance
$D(K,Q)=K^\top K-Q^\top Q$ is conserved by gradient flow on $(K,Q)$, and one GD step moves it by $O(\eta^2)$.

Derivation. With $G=\nabla\mathcal L(W)$, $W=KQ^\top$, the factor gradients are $g_K=GQ$, $g_Q=G^\top K$
(claim ``grad-closed-form``). One step $K'=K-\eta g_K$, $Q'=Q-\eta g_Q$ gives
$K'^\top K'=K^\top K-\eta(K^\top GQ+Q^\top G^\top K)+\eta^2g_K^\top g_K$ and
$Q'^\top Q'=Q^\top Q-\eta(Q^\top G^\top K+K^\top GQ)+\eta^2g_Q^\top g_Q$: the first-order terms are equal, so

.. math:: D(K',Q')-D(K,Q)=\eta^2\,(g_K^\top g_K-g_Q^\top g_Q),\qquad
   \|D_k-D_0\|_F\le\eta^2\sum_{j<k}\big(\|g_{K,j}\|_F^2+\|g_{Q,j}\|_F^2\big)

($\|A^\top A\|_F\le\|A\|_F^2$). For the flow ($\eta\to0$ at a fixed horizon $k\eta$) the bound is $O(\eta)\to0$.
Checked: ``steps`` plain GD steps from a drawn $(K_0,Q_0)$, the drift against that bound with the gradients at
every iterate (the engine's steps; the kit's $\nabla_{(K,Q)}$), margin = bound - drift.
A refutation would be confirmed on the 50-digit replay (the kit). The control ``kq-balancedness-control``
(expected-false) asks the same of per-factor normalised GD, whose first-order terms do not cancel.
"""

from attsvm.claims import Outcome, claim


def imbalance(k, K, Q):
    r"""$D=K^\top K-Q^\top Q$ in the kit's precision."""
    return K.T @ K - Q.T @ Q


@claim(
    id="kq-balancedness",
    title="GD on (K,Q) moves K^T K - Q^T Q by at most eta^2 sum(|g_K|^2 + |g_Q|^2): conserved by the flow",
    origin="derived",
    source="Marcotte et al., arXiv 2506.06194, Cor. 3.9 (gradient flow); THEORY §6",
    hypotheses={"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)},
    params={"lr": 0.05, "steps": 20, "scale": 1.0},
    depends=("grad-closed-form",),
    examples=12,
)
def kq_balancedness(case):
    h = case.hypotheses
    k, ds = case.kit, case.data
    d = ds.d
    K = k.array(case.draw_matrix(d, d, float(h["scale"])))
    Q = k.array(case.draw_matrix(d, d, float(h["scale"])))
    eta = k.scalar(float(h["lr"]))
    D0 = imbalance(k, K, Q)
    bound = k.scalar(0.0)
    for _ in range(int(h["steps"])):
        gK, gQ = k.grad_KQ(ds, K, Q)
        bound = bound + eta * eta * (k.norm(gK) ** 2 + k.norm(gQ) ** 2)
        run = k.gd(ds, algo="gd", lr=float(h["lr"]), steps=1, K0=K, Q0=Q)
        K, Q = run.K, run.Q
    drift = k.norm(imbalance(k, K, Q) - D0)
    allowance = k.tol("grad_rtol") * (k.norm(K) ** 2 + k.norm(Q) ** 2)  # rounding of the steps themselves
    margin = bound + allowance - drift  # absolute (K = Q = 0 is a fixed point: everything is 0 there)
    return Outcome(
        ok=bool(margin >= 0),
        margin=margin,
        detail={"drift": k.to_float(drift), "bound": k.to_float(bound), "steps": int(h["steps"])},
    )


@claim(
    id="kq-balancedness-control",
    title="(control) per-factor normalised GD keeps K^T K - Q^T Q within 1% of (|K|^2+|Q|^2)",
    origin="expected-false",
    source="THEORY §6 kq-balancedness (negative control)",
    hypotheses={"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)},
    params={"lr": 0.1, "steps": 40, "scale": 0.3, "rel": 0.01},
    depends=("kq-balancedness",),
    examples=12,
)
def kq_balancedness_control(case):
    r"""Per-factor normalised steps $K'=K-\eta g_K/\|g_K\|$, $Q'=Q-\eta g_Q/\|g_Q\|$ leave the first-order
    term $-\eta(K^\top GQ+Q^\top G^\top K)(1/\|g_K\|-1/\|g_Q\|)$ of $D$, which cancels only when $\|g_K\|=\|g_Q\|$:
    the relative drift $\|D_k-D_0\|_F/(\|K_k\|_F^2+\|Q_k\|_F^2)$ is of order one, not $O(\eta)$."""
    h = case.hypotheses
    k, ds = case.kit, case.data
    d = ds.d
    K0 = k.array(case.draw_matrix(d, d, float(h["scale"])))
    Q0 = k.array(case.draw_matrix(d, d, float(h["scale"])))
    run = k.gd(ds, algo="ngd", lr=float(h["lr"]), steps=int(h["steps"]), K0=K0, Q0=Q0)
    K, Q = run.K, run.Q
    size = k.norm(K) ** 2 + k.norm(Q) ** 2
    if k.to_float(size) == 0:  # K = Q = 0 stays put (zero gradients take no step): nothing drifts
        return Outcome(ok=True, margin=k.scalar(float(h["rel"])), detail={"relative_drift": 0.0})
    rel = k.norm(imbalance(k, K, Q) - imbalance(k, K0, Q0)) / size
    return Outcome(
        ok=bool(rel <= h["rel"]), margin=k.scalar(float(h["rel"])) - rel, detail={"relative_drift": k.to_float(rel)}
    )
