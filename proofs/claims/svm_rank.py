r"""``svm-rank`` (THEORY §3; paper, Lemma 1).

Every constraint matrix is $A_{it}=(x_{i\alpha_i}-x_{it})z_i^\top$, so
$\langle WP_Z,A_{it}\rangle=\langle W,A_{it}\rangle$ and
$\|WP_Z\|\le\|W\|$ for both norms (strictly for $\|\cdot\|_F$ and $\|\cdot\|_\star$ unless $W(I-P_Z)=0$). Hence any
Att-SVM or Att-SVM⋆ solution has row space in $\mathrm{span}\{z_i\}$, and rank $\le\min(n,d)$.

Checks on ``feasible`` data with a random $\alpha$.

Frobenius, against an **independent** solution. The fast solver builds $W=\sum\lambda_{it}A_{it}$, so its row
space lies in $\mathrm{span}\{z_i\}$ by construction and checking it there proves nothing. Instead the primal
$\min\frac12\|W\|_F^2$ s.t. $(x_{i\alpha_i}-x_{it})^\top Wz_i\ge1$ is solved with cvxpy + Clarabel (named
explicitly) over a *full* $d\times d$ variable, with the constraints formed from the arrays
(:func:`attsvm.svm.primal.solve_primal`, which shares no code with the fast solver, its constraint builder or
its fallback): nothing in that program prefers the row space, only optimality does.
Its status must be ``optimal`` before any value is read (otherwise the case is inconclusive). On that
independent $W_{ind}$: feasibility (direct margins $\ge1-$``tol('kkt')``),
$\|W_{ind}(I-P_Z)\|_F\le$ ``tol('kkt')``$\|W_{ind}\|_F$ (the leak of any $W$ is at most its stationarity
residual $\|W-\sum\lambda A\|_F$, since $\sum\lambda A$ lies in the row space), numerical rank (cut
``tol('rank')``) $\le\min(n,d)$; and the fast solver (:func:`attsvm.svm.solve_fro`) must agree,
$\|W_{fast}-W_{ind}\|_F\le$ ``tol('svm_ref_rtol')``$\|W_{ind}\|_F$ (the minimiser is unique, so a fast $W$ off the
row space, or in it but wrong, fails here).

Nuclear (solution *set*, never compare matrices): the projection $W_\star P_Z$ of the returned point is feasible
(margins $\ge1-$``tol('kkt')``), has objective $\le(1+$``tol('nuc_gap')``$)\cdot$ the returned objective, and rank
$\le\min(n,d)$. Margin: the smallest slack in units of its tolerance (1: exact, < 0: fails). Confirmation:
exact-rational $W^{mm}_\alpha$ (certificate) and 50-digit $P_Z$, margins and nuclear norms; for a Frobenius
failure it also reports how far the fast and the independent $W$ are from the exact one.
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
    from attsvm.errors import SolverError
    from attsvm.svm import nuclear, primal

    ds = case.data
    n, d = ds.n, ds.d
    P = _projector(ds.Z)
    fro = svm.solve_fro(ds)
    nuc = nuclear.solve_nuclear(ds)
    if fro.status != "optimal" or nuc.status != "optimal":
        return Outcome(ok=True, inconclusive="Att-SVM(alpha) not feasible: hypothesis not met")
    W = np.asarray(fro.W)
    try:
        Wi = primal.solve_primal(ds)  # independent of the fast solver (attsvm.svm.primal)
    except SolverError as exc:
        return Outcome(ok=True, margin=0.0, inconclusive=str(exc))
    sl = {}
    D, Zc = primal.direct_rows(ds)
    sl["fro_independent_feasible"] = 1.0 + (float(np.min(np.einsum("md,de,me->m", D, Wi, Zc))) - 1.0) / tol("kkt")
    leak = float(np.linalg.norm(Wi - Wi @ P) / np.linalg.norm(Wi))
    sl["fro_rowspace"] = 1.0 - leak / tol("kkt")
    sl["fro_rank"] = 1.0 if _rank(Wi) <= min(n, d) else -1.0
    agree = float(np.linalg.norm(W - Wi) / np.linalg.norm(Wi))
    sl["fro_agree"] = 1.0 - agree / tol("svm_ref_rtol")
    Ws = np.asarray(nuc.W)
    Wp = Ws @ P
    obj = float(nuc.objective)
    sl["nuc_projection_feasible"] = 1.0 + (float(np.min(np.einsum("md,de,me->m", D, Wp, Zc))) - 1.0) / tol("kkt")
    nucp = float(np.sum(np.linalg.svd(Wp, compute_uv=False)))
    sl["nuc_projection_optimal"] = 1.0 + (obj - nucp) / (obj * tol("nuc_gap"))
    sl["nuc_rank"] = 1.0 if _rank(Wp) <= min(n, d) else -1.0
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"slacks": sl, "worst": worst, "fro_leak": leak, "fro_agree": agree, "nuc_objective": obj}
    detail.update({"nuc_projected": nucp, "W_nuc": Ws.tolist(), "W_fro": W.tolist(), "W_independent": Wi.tolist()})
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@svm_rank.confirm
def _confirm(case, outcome):
    """Exact W^mm_alpha and 50-digit P_Z (Frobenius); 50-digit margins and nuclear norm of W* P_Z."""
    import mpmath

    from attsvm import highprec as hp
    from attsvm import svm

    ds = case.data
    worst = outcome.detail["worst"]
    D = hp.data(ds)
    alpha = [int(a) for a in ds.selection]
    with mpmath.workdps(hp.DPS):
        P = hp.projector(ds.Z)
        lim = min(ds.n, ds.d)
        if worst.startswith("fro"):
            cert = svm.certify_fro(ds)
            if not cert.get("verified") or cert.get("W") is None:
                return Outcome(ok=True, margin=0.0, inconclusive="no exact Att-SVM certificate")
            W = hp.rationals(cert["W"])
            leak = hp.frob([[a - b for a, b in zip(r, s)] for r, s in zip(W, hp.matmul(W, P))]) / hp.frob(W)
            sv = hp.singular_values(W)
            rank = sum(1 for x in sv if x > sv[0] * mpmath.mpf(10) ** (-30))
            ok = leak <= mpmath.mpf(10) ** (-30) and rank <= lim
            det = {"leak_50": float(leak), "rank_50": rank}
            Wex = hp.to_numpy(W)
            for key in ("W_fro", "W_independent"):  # which float solution is off (a solver bug, not the lemma)
                if key in outcome.detail:
                    det[f"{key}_vs_exact"] = float(
                        np.linalg.norm(np.array(outcome.detail[key]) - Wex) / np.linalg.norm(Wex)
                    )
            return Outcome(ok=bool(ok), margin=1.0 if ok else -1.0, detail=det)
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
