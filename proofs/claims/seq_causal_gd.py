r"""``seq-causal-gd`` (reconstructed): on sequence / causal data, normalised GD's direction converges to the
sequence / causal Att-SVM of its final selection (one constraint row per query, flat view).
Finite-horizon check: $1-\mathrm{corr}(W_k,W^{mm}_\alpha)$ falls by the factor ``shrink`` between the middle and
the end of the run and is $\le$ ``eps`` at the end (cases whose selection is infeasible are undecided).
Confirmer: the run replayed at 50 digits, against the exact $W^{mm}_\alpha$ of its selection.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="seq-causal-gd",
    title="Sequence / causal data: GD direction -> the sequence / causal SVM of its selection",
    origin="reconstructed",
    source="2308.16898 (sequence and causal attention); THEORY §4",
    hypotheses={"data": "sequence", "n": (1, 3), "T": (2, 4), "d": (2, 4), "K": (1, 3)},
    params={"steps": 2000, "eps": 0.05, "shrink": 0.9},
    depends=("gd-selects-locally-optimal",),
    examples=10,
)
def seq_causal_gd(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import corr
    from attsvm.svm import wmm

    h = case.hypotheses
    ds = case.data
    steps = int(h["steps"])
    res = gd.run(ds, param="W", algo="ngd", lr=0.1, steps=steps, record_every=steps // 2, record_params=True)
    alpha = res.selection[0].reshape(ds.selection.shape)
    Wa = wmm(ds, alpha)
    if Wa is None:
        return Outcome(ok=True, inconclusive="Att-SVM of the final selection infeasible")
    Ws = np.asarray(res.trajectory["W"])[:, 0]
    e = 1.0 - corr(Ws[1:], Wa[None])
    margin = min(h["eps"] - e[-1], h["shrink"] * e[0] - e[-1] + 1e-9)
    return Outcome(ok=margin >= 0, margin=float(margin), detail={"one_minus_corr": e.tolist(), "kind": ds.kind})


@seq_causal_gd.confirm
def _confirm(case, outcome):
    r"""Normalised GD replayed at 50 digits from $W_0=0$ (:func:`attsvm.highprec.replay`; flat view, invisible
    tokens left out); its final selection; $W^{mm}_\alpha$ from the exact rational certificate
    (:func:`attsvm.svm.certify_fro`); $1-\mathrm{corr}$ at the middle and the end and the margin at 50 digits."""
    import mpmath as mp
    import numpy as np

    from attsvm import highprec as hp
    from attsvm.svm import certify_fro

    h = case.hypotheses
    ds = case.data
    steps = int(h["steps"])
    with mp.workdps(hp.DPS):
        D = hp.data(ds)
        run = hp.replay(D, np.zeros((ds.d, ds.d)), param="W", algo="ngd", lr=0.1, steps=steps, record_every=steps // 2)
        W_mid, W_end = run.recorded[1]["W"], run.final["W"]
        a = hp.logits(D.X, W_end, D.Z)
        flat = [max(D.vis[i], key=lambda t, ai=a[i]: ai[t]) for i in range(D.N)]
        alpha = np.array(flat).reshape(ds.selection.shape)
        cert = certify_fro(ds, alpha)
        if cert.get("reason") == "infeasible":
            return Outcome(ok=True, inconclusive="Att-SVM of the 50-digit final selection infeasible")
        if not cert.get("verified") or cert.get("W") is None:
            return Outcome(ok=True, inconclusive="no exact certificate for W^mm_alpha")
        Wa = hp.rationals(cert["W"])
        e_mid, e_end = 1 - hp.corr(W_mid, Wa), 1 - hp.corr(W_end, Wa)
        m = min(mp.mpf(h["eps"]) - e_end, mp.mpf(h["shrink"]) * e_mid - e_end + mp.mpf("1e-9"))
    margin = hp.signed_float(m)
    detail = {"one_minus_corr": [float(e_mid), float(e_end)], "selection": alpha.tolist(), "dps": hp.DPS}
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)
