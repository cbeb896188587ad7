r"""``seq-causal-gd`` (reconstructed): on sequence / causal data, normalised GD's direction converges to the
sequence / causal Att-SVM of its final selection (one constraint row per query, flat view).
Finite-horizon check: $1-\mathrm{corr}(W_k,W^{mm}_\alpha)$ falls by the factor ``shrink`` between the middle and
the end of the run and is $\le$ ``eps`` at the end (cases whose selection is infeasible are undecided).
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
    seconds=25,
)
def seq_causal_gd(case):
    import numpy as np

    from attsvm import gd
    from attsvm.claims import gdcheck

    h = case.hypotheses
    ds = case.data
    steps = int(h["steps"])
    res = gd.run(ds, param="W", algo="ngd", lr=0.1, steps=steps, record_every=steps // 2, record_params=True)
    alpha = res.selection[0].reshape(ds.selection.shape)
    Wa = gdcheck.wmm_single(ds, alpha)
    if Wa is None:
        return Outcome(ok=True, inconclusive="Att-SVM of the final selection infeasible")
    Ws = np.asarray(res.trajectory["W"])[:, 0]
    e = 1.0 - gdcheck.corr(Ws[1:], Wa[None])
    margin = min(h["eps"] - e[-1], h["shrink"] * e[0] - e[-1] + 1e-9)
    return Outcome(ok=margin >= 0, margin=float(margin), detail={"one_minus_corr": e.tolist(), "kind": ds.kind})
