r"""``svm-kkt`` (THEORY §2–§3, derived).

The solutions of Att-SVM, Att-SVM⋆ and Gen-SVM satisfy their KKT conditions. Att-SVM:

.. math:: W=\sum_{it}\lambda_{it}A_{it},\quad\lambda\ge0,\quad\lambda_{it}(\langle W,A_{it}\rangle-1)=0,\quad
          \langle W,A_{it}\rangle\ge1,\quad\|W\|_F^2=\mathbf 1^\top\lambda .

Data: over-parameterised (``overparam``: every selection is feasible, and so is every Gen-SVM set
$\mathcal O_i$); a random selection $\alpha$ and random sets $\mathcal O_i\ni\alpha_i$ are drawn.

**Independent residuals.** The solvers' own ``sol.kkt`` are never read: every residual is recomputed in this
file from the data and the returned $(W,\lambda[,\nu])$ alone, with the constraint matrices
$A_{it}=(x_{i\alpha_i}-x_{it})z_i^\top$ formed here as one (n, T, d, d) array (not by
:mod:`attsvm.svm.constraints`, which the solvers share) and $\langle W,A\rangle$, $\sum\lambda A$ as tensor
contractions over it.

* Att-SVM (:func:`attsvm.svm.solve_fro`): primal feasibility $\max(0,1-\min\langle W,A_{it}\rangle)$, dual
  feasibility $\max(0,-\min\lambda)$ and $\lambda_{i\alpha_i}=0$, stationarity $\|W-\sum\lambda A\|_F/\|W\|_F$,
  complementary slackness $\max|\lambda_{it}(\langle W,A_{it}\rangle-1)|/\max(1,\max\lambda)$, the objective
  identity $|\|W\|_F^2-\mathbf 1^\top\lambda|/\|W\|_F^2$, all $\le$ ``tol('kkt')``; and the returned $W$ agrees
  with the exact-rational optimum of its certificate (:func:`attsvm.svm.certify_fro`, verified) to ``tol('kkt')``.
* Att-SVM⋆ (:func:`attsvm.svm.nuclear.solve_nuclear`, an interior-point solution): $\min\langle W,A\rangle\ge1$,
  $\lambda\ge0$, $\|M\|_2\le1$ for $M=\sum\lambda A$, $\langle M,W\rangle=\|W\|_\star$ (stationarity:
  $M\in\partial\|W\|_\star$), $\sum\lambda(\langle W,A\rangle-1)=0$, and the duality gap recomputed by weak
  duality, $\mathrm{lo}=\mathbf 1^\top\lambda_+/\|M(\lambda_+)\|_2\le\mathrm{OPT}\le
  \mathrm{up}=\|W\|_\star/\min\langle W,A\rangle$, $(\mathrm{up}-\mathrm{lo})/\mathrm{up}$, all relative and
  $\le$ ``tol('nuc_gap')``; the solver's proved duality-gap certificate must be verified with relative gap
  $\le$ ``tol('nuc_gap')`` *and* bracket the recomputed bounds (its lower bound $\le$ up, lo $\le$ its upper bound,
  to ``tol('nuc_gap')``), so a certificate that belongs to another point fails.
* Gen-SVM (:func:`attsvm.svm.gensvm.solve_gensvm`): the logits of every $\mathcal O_i$ equal (all pairs),
  $(x_{it}-x_{i\tau})^\top Wz_i\ge1$ for every $t\in\mathcal O_i$, $\tau\notin\mathcal O_i$, $\lambda\ge0$,
  stationarity $W=\sum\lambda_{i\tau}(x_{it_0}-x_{i\tau})z_i^\top+\sum\nu_k(x_{it_k}-x_{it_{k+1}})z_i^\top$
  (the multipliers' documented layout), complementary slackness and $\|W\|_F^2=\mathbf 1^\top\lambda$, all
  $\le$ ``tol('kkt')``.

Margin: the smallest normalised slack. Confirmation: the exact-rational certificate of
:func:`attsvm.svm.certify_fro` (the float solution must agree with the exact $W^{mm}_\alpha$ to ``tol('kkt')``)
and, for Att-SVM⋆, the returned point's upper bound $\|W\|_\star/\min\langle W,A\rangle$ at 50 digits against the
certificate's proved lower bound (relative gap $\le$ ``tol('nuc_gap')``); a solver's "infeasible" is refuted by an
exact Att-SVM certificate; a Gen-SVM residual failure has no exact re-evaluation (unconfirmed).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


def _constraint_tensor(X, Z, lead):
    r"""$A_{it}=(x_{i,\mathrm{lead}_i}-x_{it})z_i^\top$ for every $(i,t)$, shape (n, T, d, d) (zero at $t=$ lead)."""
    n = X.shape[0]
    return np.einsum("ntd,ne->ntde", X[np.arange(n), lead][:, None, :] - X, Z)


def _pair(A, W):
    r"""$\langle W,A_{it}\rangle$ for every $(i,t)$: (n, T)."""
    return np.tensordot(A, W, axes=([2, 3], [0, 1]))


def _comb(lam, A):
    r"""$\sum_{it}\lambda_{it}A_{it}$: (d, d)."""
    return np.tensordot(lam, A, axes=([0, 1], [0, 1]))


def _slacks(res, key):
    """Named residuals -> slacks 1 - r / tol(key) (1: exact, < 0: fails; a non-finite residual fails at -1)."""
    return {k: 1.0 - float(v) / tol(key) if np.isfinite(v) else -1.0 for k, v in res.items()}


def fro_residuals(X, Z, alpha, W, lam):
    r"""Att-SVM KKT residuals at $(W,\lambda)$, recomputed from the arrays (``lam``: (n, T), 0 at $\alpha_i$)."""
    n, T = lam.shape
    A = _constraint_tensor(X, Z, alpha)
    other = np.arange(T)[None, :] != alpha[:, None]
    g = _pair(A, W)[other] - 1.0
    lo = lam[other]
    w2 = float(np.sum(W * W))
    return {
        "primal_feasibility": max(0.0, -float(g.min())),
        "dual_feasibility": max(0.0, -float(lo.min()), float(np.abs(lam[~other]).max())),
        "stationarity": float(np.linalg.norm(W - _comb(np.where(other, lam, 0.0), A))) / np.sqrt(w2),
        "complementary_slackness": float(np.abs(lo * g).max()) / max(1.0, float(lo.max())),
        "objective_identity": abs(w2 - float(lo.sum())) / w2,
    }


def nuc_residuals(X, Z, alpha, W, lam):
    r"""Att-SVM⋆ KKT residuals and the weak-duality bounds (lo, up) at $(W,\lambda)$, from the arrays."""
    n, T = lam.shape
    A = _constraint_tensor(X, Z, alpha)
    other = np.arange(T)[None, :] != alpha[:, None]
    mg = _pair(A, W)[other]
    lo_l = lam[other]
    lp = np.where(other, np.maximum(lam, 0.0), 0.0)
    M = _comb(np.where(other, lam, 0.0), A)
    sM = float(np.linalg.norm(M, 2))
    nuc = float(np.linalg.svd(W, compute_uv=False).sum())
    dual = float(lo_l.sum())
    up = nuc / float(mg.min()) if mg.min() > 0 else np.inf
    lo = float(lp.sum()) / float(np.linalg.norm(_comb(lp, A), 2))
    res = {
        "primal_feasibility": max(0.0, 1.0 - float(mg.min())),
        "dual_feasibility": max(0.0, sM - 1.0, -float(lo_l.min()), float(np.abs(lam[~other]).max())),
        "stationarity": abs(float(np.sum(M * W)) - nuc) / nuc,
        "complementary_slackness": abs(float(np.sum(lo_l * (mg - 1.0)))) / max(dual, np.finfo(float).tiny),
        "duality_gap": (up - lo) / up if np.isfinite(up) else np.inf,
        "weak_duality": max(0.0, (lo - up) / up) if np.isfinite(up) else np.inf,
    }
    return res, lo, up


def gen_residuals(X, Z, selected, W, lam, nu):
    r"""Gen-SVM KKT residuals at $(W,\lambda,\nu)$ (``lam``, ``nu``: (n, T) in the layout of
    :func:`attsvm.svm.gensvm.solve_gensvm`), from the arrays. Feasibility is checked on *all* pairs."""
    n, T = selected.shape
    logit = np.einsum("ntd,de,ne->nt", X, W, Z)
    hi = np.where(selected, logit, -np.inf).max(1)
    lo_sel = np.where(selected, logit, np.inf).min(1)
    top_out = np.where(selected, -np.inf, logit).max(1)
    first = np.argmax(selected, axis=1)  # t_0 = min O_i
    A = _constraint_tensor(X, Z, first)  # (x_{i t_0} - x_{i tau}) z_i^T
    prev = np.zeros((n, T), dtype=np.int64)  # t_k of the pair (t_k, t_{k+1}) whose nu is stored at t_{k+1}
    for i in range(n):
        O = np.flatnonzero(selected[i])
        prev[i, O[1:]] = O[:-1]
    E = np.einsum("ntd,ne->ntde", X[np.arange(n)[:, None], prev] - X, Z)
    eq_at = np.zeros((n, T), dtype=bool)
    for i in range(n):
        eq_at[i, np.flatnonzero(selected[i])[1:]] = True
    out = ~selected
    g = _pair(A, W)[out] - 1.0
    lo_l = lam[out]
    comb = _comb(np.where(out, lam, 0.0), A) + _comb(np.where(eq_at, nu, 0.0), E)
    w2 = float(np.sum(W * W))
    has_out = bool(out.any())
    return {
        "equality_residual": float(np.max(hi - lo_sel)),
        "primal_feasibility": max(0.0, 1.0 - float(np.min(lo_sel - top_out))) if has_out else 0.0,
        "dual_feasibility": max(0.0, -float(lo_l.min())) if has_out else 0.0,
        "stationarity": float(np.linalg.norm(W - comb)) / np.sqrt(w2) if w2 > 0 else float(np.linalg.norm(comb)),
        "complementary_slackness": float(np.abs(lo_l * g).max()) / max(1.0, float(lo_l.max())) if has_out else 0.0,
        "objective_identity": abs(w2 - float(lo_l.sum())) / max(w2, 1.0),
    }


@claim(
    id="svm-kkt",
    title="Att-SVM, Att-SVM* and Gen-SVM solutions satisfy their KKT conditions (certified)",
    origin="derived",
    source="THEORY §2, §3 (svm-kkt)",
    hypotheses={"data": "overparam", "n": (1, 3), "T": (2, 4), "d_extra": (0, 2)},
)
def svm_kkt(case):
    """KKT residuals and certificates of the three programs at a random selection."""
    from attsvm import svm
    from attsvm.svm import gensvm, nuclear

    ds = case.data
    n, T = ds.n, ds.T
    alpha = np.array([case.draw_int(0, T - 1) for _ in range(n)], dtype=np.int64)
    dsa = ds.with_alpha(alpha)
    X, Z = np.asarray(ds.X), np.asarray(ds.Z)
    sl, res = {}, {}
    fro = svm.solve_fro(dsa, certify=True)
    if fro.status != "optimal":
        return Outcome(ok=False, margin=-1.0, detail={"failed": "Att-SVM infeasible", "alpha": alpha.tolist()})
    Wf = np.asarray(fro.W, dtype=float)
    res["fro"] = fro_residuals(X, Z, alpha, Wf, np.asarray(fro.multipliers, dtype=float))
    sl.update({f"fro_{k}": v for k, v in _slacks(res["fro"], "kkt").items()})
    fcert = fro.certificate or {}
    sl["fro_certificate"] = 1.0 if fcert.get("verified") else -1.0
    if fcert.get("verified") and fcert.get("W") is not None:
        Wex = np.array([[float(Fraction(x)) for x in r] for r in fcert["W"]])
        res["fro"]["vs_exact"] = float(np.linalg.norm(Wf - Wex) / np.linalg.norm(Wex))
        sl["fro_vs_exact"] = 1.0 - res["fro"]["vs_exact"] / tol("kkt")
    nuc = nuclear.solve_nuclear(dsa, certify=True)
    if nuc.status != "optimal":
        return Outcome(ok=False, margin=-1.0, detail={"failed": "Att-SVM* infeasible", "alpha": alpha.tolist()})
    Wn = np.asarray(nuc.W, dtype=float)
    res["nuc"], lo, up = nuc_residuals(X, Z, alpha, Wn, np.asarray(nuc.multipliers, dtype=float))
    sl.update({f"nuc_{k}": v for k, v in _slacks(res["nuc"], "nuc_gap").items()})  # interior point
    cert = nuc.certificate or {}
    gap = float(cert.get("rel_gap", np.inf))
    sl["nuc_gap_certificate"] = (1.0 - gap / tol("nuc_gap")) if cert.get("verified") else -1.0
    if cert.get("verified"):  # the proved bounds must belong to this point: lower <= up, lo <= upper
        br = max(float(cert["lower"]) - up, lo - float(cert["upper"]), 0.0) / up
        sl["nuc_certificate_brackets"] = 1.0 - br / tol("nuc_gap")
    selected = np.zeros((n, T), dtype=bool)
    selected[np.arange(n), alpha] = True
    for i in range(n):
        for t in range(T):
            if t != alpha[i] and case.draw_int(0, 3) == 0:
                selected[i, t] = True
    gen = gensvm.solve_gensvm(ds, selected)
    if gen.status != "optimal":
        sl["gen_status"] = -1.0
        res["gen"] = {"status": gen.status}
    else:
        nu = np.asarray(gen.extra["eq_multipliers"], dtype=float)
        res["gen"] = gen_residuals(X, Z, selected, np.asarray(gen.W), np.asarray(gen.multipliers, dtype=float), nu)
        sl.update({f"gen_{k}": v for k, v in _slacks(res["gen"], "kkt").items()})
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"slacks": sl, "worst": worst, "residuals": res, "alpha": alpha.tolist()}
    detail.update({"selected": selected.tolist(), "W_fro": Wf.tolist(), "nuc_cert": _plain(cert)})
    detail["W_nuc"] = Wn.tolist()
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


def _plain(cert):
    def plain(v):
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        return float(v) if isinstance(v, (int, float, np.floating, np.integer)) else v

    return {k: plain(v) for k, v in cert.items() if k != "dual"}


@svm_kkt.confirm
def _confirm(case, outcome):
    """Exact-rational Att-SVM certificate vs the float solution; proved Att-SVM* lower bound vs the returned
    point's upper bound at 50 digits."""
    import mpmath

    from attsvm import highprec as hp
    from attsvm import svm

    det = outcome.detail
    worst = det.get("worst", "")
    dsa = case.data.with_alpha(np.array(det["alpha"], dtype=np.int64))
    if "failed" in det:  # a solver reported infeasible: an exact certificate proves the program feasible
        cert = svm.certify_fro(dsa)
        if not cert.get("verified"):
            return Outcome(ok=True, margin=0.0, inconclusive="solver: no exact Att-SVM certificate found")
        return Outcome(ok=False, margin=-1.0, detail={"exact": "feasible (exact certificate)", **det})
    if worst.startswith("fro"):
        cert = svm.certify_fro(dsa)
        if not cert.get("verified") or cert.get("W") is None:
            return Outcome(ok=True, margin=0.0, inconclusive="solver: no exact Att-SVM certificate found")
        Wex = hp.to_numpy(hp.rationals(cert["W"]))
        err = float(np.linalg.norm(np.array(det["W_fro"]) - Wex) / np.linalg.norm(Wex))
        return Outcome(ok=err <= tol("kkt"), margin=1.0 - err / tol("kkt"), detail={"exact_vs_float": err})
    if worst.startswith("nuc"):
        cert = det.get("nuc_cert", {})
        if not (cert.get("verified") and "W_nuc" in det):
            return Outcome(ok=True, margin=0.0, inconclusive="solver: no proved duality gap for Att-SVM*")
        D = hp.data(dsa)
        a = [int(x) for x in det["alpha"]]
        with mpmath.workdps(hp.DPS):
            W = hp.as_mp(np.array(det["W_nuc"]))
            lg = hp.logits(D.X, W, D.Z)
            mmin = min(lg[i][a[i]] - lg[i][t] for i in range(D.N) for t in range(D.T) if t != a[i])
            if not mmin > 0:
                return Outcome(ok=False, margin=-1.0, detail={"m_min_50": float(mmin)})
            up = mpmath.fsum(hp.singular_values(W)) / mmin  # ||W/m_min||_*: an upper bound on OPT
            gap = (up - mpmath.mpf(cert["lower"])) / up  # against the proved lower bound
        margin = 1.0 - float(gap) / tol("nuc_gap")
        return Outcome(ok=margin >= 0, margin=margin, detail={"rel_gap_50": float(gap), "proved_lower": cert["lower"]})
    return Outcome(ok=True, margin=0.0, inconclusive="Gen-SVM residuals have no exact re-evaluation")
