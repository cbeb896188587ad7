r"""``svm-kkt`` (THEORY §2–§3, derived).

The solutions of Att-SVM, Att-SVM⋆ and Gen-SVM satisfy their KKT conditions. Att-SVM:

.. math:: W=\sum_{it}\lambda_{it}A_{it},\quad\lambda\ge0,\quad\lambda_{it}(\langle W,A_{it}\rangle-1)=0,\quad
          \langle W,A_{it}\rangle\ge1,\quad\|W\|_F^2=\mathbf 1^\top\lambda .

Data: over-parameterised (``overparam``: every selection is feasible, and so is every Gen-SVM set
$\mathcal O_i$); a random selection $\alpha$ and random sets $\mathcal O_i\ni\alpha_i$ are drawn. Checked: the
named residuals ``sol.kkt`` $\le$ ``tol('kkt')`` (Att-SVM, Gen-SVM) and $\le$ ``tol('nuc_gap')`` (Att-SVM⋆, an
interior-point solution); the exact-rational Att-SVM certificate
verifies; the Att-SVM⋆ duality-gap certificate verifies with relative gap $\le$ ``tol('nuc_gap')``. Margin: the
smallest normalised slack. Confirmation: the exact-rational certificate of :func:`attsvm.svm.certify_fro`
(the float solution must agree with the exact $W^{mm}_\alpha$ to ``tol('kkt')``) and the proved duality gap
for Att-SVM⋆; a Gen-SVM residual failure has no exact re-evaluation (unconfirmed).
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


def _kkt_slack(sol, key="kkt"):
    vals = [float(v) for v in (sol.kkt or {}).values()]
    if not vals:
        return -1.0, "no KKT residuals reported"
    return 1.0 - max(vals) / tol(key), max(sol.kkt, key=lambda k: float(sol.kkt[k]))


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
    sl, where = {}, {}
    fro = svm.solve_fro(dsa, certify=True)
    if fro.status != "optimal":
        return Outcome(ok=False, margin=-1.0, detail={"failed": "Att-SVM infeasible", "alpha": alpha.tolist()})
    sl["fro_kkt"], where["fro_kkt"] = _kkt_slack(fro)
    sl["fro_certificate"] = 1.0 if fro.certificate.get("verified") else -1.0
    nuc = nuclear.solve_nuclear(dsa, certify=True)
    sl["nuc_kkt"], where["nuc_kkt"] = _kkt_slack(nuc, "nuc_gap")  # interior point: gap-level accuracy
    cert = nuc.certificate or {}
    gap = float(cert.get("rel_gap", np.inf))
    sl["nuc_gap"] = (1.0 - gap / tol("nuc_gap")) if cert.get("verified") else -1.0
    selected = np.zeros((n, T), dtype=bool)
    selected[np.arange(n), alpha] = True
    for i in range(n):
        for t in range(T):
            if t != alpha[i] and case.draw_int(0, 3) == 0:
                selected[i, t] = True
    gen = gensvm.solve_gensvm(ds, selected)
    if gen.status != "optimal":
        sl["gen_kkt"], where["gen_kkt"] = -1.0, f"Gen-SVM {gen.status}"
    else:
        sl["gen_kkt"], where["gen_kkt"] = _kkt_slack(gen)
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"slacks": sl, "worst": worst, "residual": where.get(worst), "alpha": alpha.tolist()}
    detail.update({"selected": selected.tolist(), "W_fro": np.asarray(fro.W).tolist(), "nuc_cert": _plain(cert)})
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


def _plain(cert):
    def plain(v):
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        return float(v) if isinstance(v, (int, float, np.floating, np.integer)) else v

    return {k: plain(v) for k, v in cert.items() if k != "dual"}


@svm_kkt.confirm
def _confirm(case, outcome):
    """Exact-rational Att-SVM certificate vs the float solution; proved Att-SVM* gap."""
    from attsvm import svm
    from attsvm.claims import highprec as hp

    det = outcome.detail
    worst = det.get("worst", "")
    dsa = case.data.with_alpha(np.array(det["alpha"], dtype=np.int64))
    if worst.startswith("fro") or "failed" in det:
        cert = svm.certify_fro(dsa)
        if not cert.get("verified"):
            return Outcome(ok=True, inconclusive="solver: no exact Att-SVM certificate found")
        Wex = hp.to_numpy(hp.rationals(cert["W"]))
        err = float(np.linalg.norm(np.array(det["W_fro"]) - Wex) / np.linalg.norm(Wex)) if "W_fro" in det else np.inf
        return Outcome(ok=err <= tol("kkt"), margin=1.0 - err / tol("kkt"), detail={"exact_vs_float": err})
    if worst.startswith("nuc"):
        cert = det.get("nuc_cert", {})
        if cert.get("verified") and float(cert.get("rel_gap", np.inf)) <= tol("nuc_gap"):
            return Outcome(ok=True, margin=1.0, detail={"proved_rel_gap": cert.get("rel_gap")})
        return Outcome(ok=True, inconclusive="solver: no proved duality gap for Att-SVM*")
    return Outcome(ok=True, inconclusive="Gen-SVM residuals have no exact re-evaluation")
