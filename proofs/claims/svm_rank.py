r"""``svm-rank`` (THEORY §3; paper, Lemma 1).

Every constraint matrix is $A_{it}=(x_{i\alpha_i}-x_{it})z_i^\top$, so
$\langle WP_Z,A_{it}\rangle=\langle W,A_{it}\rangle$ and
$\|WP_Z\|\le\|W\|$ for both norms (strictly for $\|\cdot\|_F$ and $\|\cdot\|_\star$ unless $W(I-P_Z)=0$). Hence any
Att-SVM or Att-SVM⋆ solution has row space in $\mathrm{span}\{z_i\}$, and rank $\le\min(n,d)$.

Checks on ``feasible`` data with a random $\alpha$: Frobenius — $\|W(I-P_Z)\|_F\le$ ``tol('rowspace')``$\|W\|_F$ and
numerical rank (cut ``tol('rank')``) $\le\min(n,d)$; nuclear (solution *set*, never compare matrices) — the
projection $W_\star P_Z$ of the returned point is feasible (margins $\ge1-$``tol('kkt')``), has objective
$\le(1+$``tol('nuc_gap')``$)\cdot$ the returned objective, and rank $\le\min(n,d)$. Margin: the smallest
slack in units of its tolerance (1: exact, < 0: fails). Confirmation: exact-rational $W^{mm}_\alpha$
(certificate) and 50-digit $P_Z$, margins and nuclear norms.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


def _projector(Z):
    U, S, Vt = np.linalg.svd(Z)
    # exact span: cut only at rounding level (tiny but genuine directions of Z must stay in)
    r = int(np.sum(S > max(Z.shape) * np.finfo(float).eps * S.max())) if S.size and S.max() > 0 else 0
    return Vt[:r].T @ Vt[:r]


def _rank(W):
    S = np.linalg.svd(W, compute_uv=False)
    return int(np.sum(S > tol("rank") * S.max())) if S.max() > 0 else 0


@claim(
    id="svm-rank",
    title="Att-SVM and Att-SVM* solutions have row space in span{z_i}, rank <= min(n, d)",
    origin="paper",
    source="THEORY §3 (svm-rank); Tarzanagh et al. 2308.16898, Lemma 1",
    hypotheses={"data": "feasible", "alpha": "random", "n": (1, 4), "T": (2, 4), "d": (2, 5)},
)
def svm_rank(case):
    """Row space and rank of the Frobenius solution; optimality of the projected nuclear solution."""
    from attsvm import svm
    from attsvm.svm import constraints, nuclear

    ds = case.data
    n, d = ds.n, ds.d
    P = _projector(ds.Z)
    C = constraints.build(ds)
    fro = svm.solve_fro(ds)
    nuc = nuclear.solve_nuclear(ds)
    if fro.status != "optimal" or nuc.status != "optimal":
        return Outcome(ok=True, inconclusive="Att-SVM(alpha) not feasible: hypothesis not met")
    W = np.asarray(fro.W)
    sl = {}
    leak = float(np.linalg.norm(W - W @ P) / np.linalg.norm(W))
    sl["fro_rowspace"] = 1.0 - leak / tol("rowspace")
    sl["fro_rank"] = 1.0 if _rank(W) <= min(n, d) else -1.0
    Ws = np.asarray(nuc.W)
    Wp = Ws @ P
    obj = float(nuc.objective)
    sl["nuc_projection_feasible"] = 1.0 + (float(np.min(C.margins(Wp))) - 1.0) / tol("kkt")
    nucp = float(np.sum(np.linalg.svd(Wp, compute_uv=False)))
    sl["nuc_projection_optimal"] = 1.0 + (obj - nucp) / (obj * tol("nuc_gap"))
    sl["nuc_rank"] = 1.0 if _rank(Wp) <= min(n, d) else -1.0
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"slacks": sl, "worst": worst, "fro_leak": leak, "nuc_objective": obj, "nuc_projected": nucp}
    detail.update({"W_nuc": Ws.tolist()})
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@svm_rank.confirm
def _confirm(case, outcome):
    """Exact W^mm_alpha and 50-digit P_Z (Frobenius); 50-digit margins and nuclear norm of W* P_Z."""
    import mpmath

    from attsvm import svm
    from attsvm.claims import highprec as hp

    ds = case.data
    worst = outcome.detail["worst"]
    D = hp.data(ds)
    alpha = [int(a) for a in ds.selection]
    with mpmath.workdps(hp.DPS):
        P = hp.projector(ds.Z)
        lim = min(ds.n, ds.d)
        if worst.startswith("fro"):
            cert = svm.certify_fro(ds)
            if not cert.get("verified"):
                return Outcome(ok=True, inconclusive="no exact Att-SVM certificate")
            W = hp.rationals(cert["W"])
            leak = hp.frob([[a - b for a, b in zip(r, s)] for r, s in zip(W, hp.matmul(W, P))]) / hp.frob(W)
            sv = hp.singular_values(W)
            rank = sum(1 for x in sv if x > sv[0] * mpmath.mpf(10) ** (-30))
            ok = leak <= mpmath.mpf(10) ** (-30) and rank <= lim
            return Outcome(ok=bool(ok), margin=1.0 if ok else -1.0, detail={"leak_50": float(leak), "rank_50": rank})
        Wp = hp.matmul(hp.as_mp(np.array(outcome.detail["W_nuc"])), P)
        a = hp.logits(D.X, Wp, D.Z)
        mmin = min(a[i][alpha[i]] - a[i][t] for i in range(D.N) for t in range(D.T) if t != alpha[i])
        sv = hp.singular_values(Wp)
        rank = sum(1 for x in sv if x > sv[0] * mpmath.mpf(10) ** (-30))
        # W* P_Z / m_min is feasible; its nuclear norm must not exceed the returned objective (within the gap)
        ratio = mpmath.fsum(sv) / mmin / mpmath.mpf(outcome.detail["nuc_objective"])
        ok = mmin > 0 and ratio <= 1 + tol("nuc_gap") + tol("kkt") and rank <= lim
    detail = {"m_min_50": float(mmin), "objective_ratio_50": float(ratio), "rank_50": rank}
    return Outcome(ok=bool(ok), margin=float(1 + tol("nuc_gap") + tol("kkt") - ratio), detail=detail)
