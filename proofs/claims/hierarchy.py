r"""The hierarchy of SVMs in two-layer attention (issue 30; :mod:`attsvm.twolayer`, :mod:`attsvm.hierarchy`) on the
key-and-successor law ``twolayer`` (the label sits on the successor of a marked key; the layer-2 query finds the
marker), residual connection on ($h=\bar h+x$).

* ``hier-top-layer`` (paper, by composition): $W_1$ frozen at a random matrix, normalised GD on $W_2$ from 0 —
  the model *is* the one-layer model of THEORY §1 on the tokens $h_{it}$ (an exact reduction, tested in
  property_tests/test_hierarchy.py), so the one-layer theorem applies: $W_2$'s direction approaches the certified
  Att-SVM of its selection $\beta$ over $h$.
* ``hier-joint`` (conjecture, the "one SVM per layer" picture): trained jointly, $W_2\to$ the Att-SVM of $\beta$
  over the hard outputs $H^\alpha$ of the final layer-1 selection, *and* $W_1\to$ the layer-1 SVM of $\alpha$ over
  the rows $R_\beta=\{(i,\beta_i)\}$ whose outputs layer 2 selects.
* ``hier-norm-growth`` (conjecture): under plain GD from 0 the two layers grow together: $\|W_1\|_F/\|W_2\|_F$
  stays in $[\frac12,2]$ from step $K/10$ on and both norms still grow over $[K/2,K]$.
* ``hier-raw-tokens-control`` (expected-false): with $W_1$ frozen, $W_2\to$ the one-layer Att-SVM of the *raw*
  tokens — refuted, confirmed on the exact one-layer reduction.
"""

from __future__ import annotations

from attsvm.claims import Outcome, claim

DATA = {"data": "twolayer", "n": 4, "T": 4, "d_extra": 0}
FROZEN = {"w1_scale": 3.0, "lr": 0.1, "steps": 2000}


def _frozen_run(case):
    """NGD on W2 from 0 with W1 frozen at w1_scale * N(0, I) (one draw per run from the case's generator)."""
    import numpy as np

    from attsvm import gd

    h = case.hypotheses
    B, d = case.runs, case.batch.d
    W1 = float(h["w1_scale"]) * case.rng().standard_normal((B, d, d))
    init = {"W1": W1, "W2": np.zeros((B, d, d))}
    steps = int(h["steps"])
    return gd.run(
        case.batch, param="twolayer", algo="ngd", lr=float(h["lr"]), steps=steps, init=init, freeze="W1",
        residual=True, record_every=steps // 2, record_params=True,
    )  # fmt: skip


def _gap(W, S) -> float:
    from attsvm.model import corr

    return float("nan") if S is None else 1.0 - float(corr(W, S))


@claim(
    id="hier-top-layer",
    title="Two-layer attention, W1 frozen: W2's direction approaches the certified Att-SVM of its selection over "
    "the layer-1 outputs (1 - corr <= eps after the steps, and below its value at half the steps)",
    origin="paper",
    source="by composition: with W1 frozen the model is the one-layer model on the tokens h_it (exact), so the "
    "one-layer theorem (arXiv 2308.16898, locally optimal selection; THEORY gd-selects-locally-optimal) applies",
    hypotheses=DATA,
    params={**FROZEN, "eps": 0.02, "settled": 0.9},
    kind="empirical",
    rate=0.75,
    examples=16,
    ci_examples=12,
)
def hier_top_layer(case):
    import numpy as np

    from attsvm import twolayer
    from attsvm.svm import wmm

    h = case.hypotheses
    r = _frozen_run(case)
    W2h = np.asarray(r.trajectory["W2"])[1]
    margins, end, half, unsettled = [], [], [], 0
    for b in range(case.runs):
        D = case.batch[b]
        fw = twolayer.forward(D, r.W1[b], r.W2[b], residual=True)
        beta = twolayer.selections(fw)[1]
        moved = np.any(twolayer.selections(twolayer.forward(D, r.W1[b], W2h[b], residual=True))[1] != beta)
        moved = moved or float(np.exp(np.min(np.max(fw.log_s2, -1)))) < float(h["settled"])
        S = wmm(twolayer.top_layer_dataset(D, fw.h, beta))
        if S is None or moved:
            # Att-SVM(beta) infeasible, or the selection not settled (changing over [K/2, K], or some input's
            # largest layer-2 probability below `settled`: the theorem is about the selection a run ends on): the
            # hypothesis is not met, the run is undecided
            margins.append(float("nan"))
            unsettled += int(moved)
            continue
        e, c = _gap(r.W2[b], S), _gap(W2h[b], S)
        end.append(e)
        half.append(c)
        margins.append(min(float(h["eps"]) - e, c - e))
    return Outcome(
        run_margins=margins,
        detail={
            "measured": f"per run: 1 - corr(W2_K, Att-SVM(beta) over h) <= {h['eps']} and below its value at K/2",
            "one_minus_corr_end": np.round(end, 6).tolist(),
            "one_minus_corr_half": np.round(half, 6).tolist(),
            "runs_not_settled": unsettled,
        },
    )


@claim(
    id="hier-raw-tokens-control",
    title="(control) Two-layer attention, W1 frozen: the limit direction of W2 (the Att-SVM of its selection over "
    "the layer-1 outputs h) is the one-layer Att-SVM of the RAW tokens (1 - corr <= eps)",
    origin="expected-false",
    source="negative control of hier-top-layer: layer 2 separates the layer-1 outputs h, not the tokens x",
    hypotheses=DATA,
    params={**FROZEN, "eps": 0.01},
    depends=("hier-top-layer",),
    kind="empirical",
    rate=0.8,
    examples=16,
    ci_examples=12,
)
def hier_raw_tokens_control(case):
    import numpy as np

    from attsvm import twolayer
    from attsvm.svm import wmm

    h = case.hypotheses
    r = _frozen_run(case)
    margins, gaps, gaps_w2 = [], [], []
    for b in range(case.runs):
        D = case.batch[b]
        fw = twolayer.forward(D, r.W1[b], r.W2[b], residual=True)
        beta = twolayer.selections(fw)[1]
        S_h = wmm(twolayer.top_layer_dataset(D, fw.h, beta))
        S_x = wmm(twolayer.top_layer_dataset(D, D.X, beta))
        if S_h is None or S_x is None:
            margins.append(float("nan"))  # one of the two Att-SVM(beta) is infeasible: nothing to compare
            continue
        e = _gap(S_h, S_x)
        gaps.append(e)
        gaps_w2.append(_gap(r.W2[b], S_x))
        margins.append(float(h["eps"]) - e)
    return Outcome(
        run_margins=margins,
        detail={
            "measured": f"per run: 1 - corr(Att-SVM(beta) over h, Att-SVM(beta) over x) <= {h['eps']}, beta the "
            "selection of the frozen-W1 run",
            "one_minus_corr_svms": np.round(gaps, 6).tolist(),
            "one_minus_corr_W2_raw": np.round(gaps_w2, 6).tolist(),
            "W1": [r.W1[b].tolist() for b in range(case.runs)],
            "W2": [r.W2[b].tolist() for b in range(case.runs)],
        },
    )


@hier_raw_tokens_control.confirm
def _confirm_control(case, outcome):
    """The failing run, exactly: both Att-SVM(beta) by their exact rational Frobenius certificates (the top layer's
    tokens are the float64 layer-1 outputs h of the run's frozen W1, taken as exact data — the frozen-W1 model is
    the one-layer model on exactly these tokens), 1 - corr enclosed in balls (rigorous)."""
    import numpy as np

    from attsvm import svm, twolayer
    from attsvm.ball.linalg import corr
    from attsvm.ball.numbers import arbs

    h = case.hypotheses
    D, b = case.data, case.index
    fw = twolayer.forward(D, np.array(outcome.detail["W1"][b]), np.array(outcome.detail["W2"][b]), residual=True)
    beta = twolayer.selections(fw)[1]
    certs = [
        svm.certify_fro(twolayer.top_layer_dataset(D, fw.h, beta)),
        svm.certify_fro(twolayer.top_layer_dataset(D, D.X, beta)),
    ]
    if not all(c.get("verified") for c in certs):
        return Outcome(ok=True, inconclusive="a Frobenius certificate is not verified")
    S_h, S_x = (arbs(c["W"]).reshape(D.d, D.d) for c in certs)
    m = float(h["eps"]) - (1 - corr(S_h, S_x, 200))
    if m.contains(0):
        return Outcome(ok=True, inconclusive="the margin's ball contains 0")
    return Outcome(ok=bool(m > 0), margin=float(m.mid()), how="rigorous")


@claim(
    id="hier-joint",
    title="Two-layer attention trained jointly: W2 -> the Att-SVM of beta over the final hard layer-1 outputs AND "
    "W1 -> the layer-1 SVM of alpha over the rows (i, beta_i) (1 - corr <= eps for both)",
    origin="conjecture",
    source="issue 30: the 'hierarchy of max-margin token selectors' programme of arXiv 2308.16898 (its closing "
    "section), made precise here (rows R_beta, hard outputs H^alpha; attsvm.hierarchy)",
    hypotheses=DATA,
    params={"lr": 0.1, "steps": 2000, "eps": 0.01},
    kind="empirical",
    rate=0.8,
    examples=10,
    ci_examples=8,
    expect="false",
    finding=(
        "refuted (settled 2026-12-05, seed 0: 9/10 runs fail at K = 2000 joint normalised steps; the first failing "
        "run confirmed at high precision, its float64 iterate taken as exact against the exact certificates). Both "
        "halves fail, differently. W2: the Att-SVM of beta over the hard outputs H^alpha is missed by 1/10 runs here "
        "(1 - corr 0.034; 4/12 runs, up to 0.20, in a 12-run sweep at 3000 steps) because the layer-1 rows that layer "
        "2 does not select stay unsaturated (their gradient carries the factor s2_it, exponentially small), so h != "
        "H^alpha off beta; over the *soft* outputs h of the final W1 the gap is at most 8e-4 in 10/10 runs (1e-6 - "
        "1e-4 at 12000 steps, reproduce hierarchy): the top layer is the one-layer model on its current inputs. W1: "
        "the layer-1 SVM of alpha over R_beta = {(i, beta_i)} is missed by 9/10 runs (1 - corr 0.015-0.29), and the "
        "gap does not close with the steps (0.02-0.30 at 12000 steps; over all saturated rows 0.16-0.56, over all "
        "rows 0.27-0.68): the off-beta rows pull W1 through W2 (their weight s2_it ||W2 z_i|| is of the same "
        "exponential order as the row-beta weights s1 e^-margin), so layer 1 is not one SVM over any fixed row set."
    ),
)
def hier_joint(case):
    import numpy as np

    from attsvm import gd, hierarchy

    h = case.hypotheses
    r = gd.run(case.batch, param="twolayer", algo="ngd", lr=float(h["lr"]), steps=int(h["steps"]), residual=True,
               normalize="joint")  # fmt: skip
    margins, rows = [], []
    for b in range(case.runs):
        hi = hierarchy.compare(case.batch[b], r.W1[b], r.W2[b], residual=True)
        gaps = (hi.gap_top_hard, hi.gap_layer1)
        rows.append((hi.gap_top_hard, hi.gap_layer1, hi.gap_top_soft))
        margins.append(float("nan") if np.isnan(gaps).any() else float(h["eps"]) - max(gaps))
    g = np.array(rows)
    return Outcome(
        run_margins=margins,
        detail={
            "measured": f"per run: max(1 - corr(W2, Att-SVM(beta) over H^alpha), 1 - corr(W1, layer-1 SVM over "
            f"R_beta)) <= {h['eps']}",
            "one_minus_corr_W2_hard": g[:, 0].round(5).tolist(),
            "one_minus_corr_W1_rows_beta": g[:, 1].round(5).tolist(),
            "one_minus_corr_W2_soft": g[:, 2].round(6).tolist(),
            "W1": [r.W1[b].tolist() for b in range(case.runs)],
            "W2": [r.W2[b].tolist() for b in range(case.runs)],
        },
    )


@hier_joint.confirm
def _confirm_joint(case, outcome):
    """The failing run's float64 iterate (W1, W2) at step K taken as exact (labelled high precision, not rigorous
    about the path: a 50-digit replay of the K joint steps costs about 30 ms a step here; the engine's tests check
    float64 = 50-digit replay of twolayer runs): its selections proved in balls (the kit's two-layer model; the
    float64 argmax where a near tie leaves them undecidable), then both SVMs by their exact rational Frobenius
    certificates (the hard outputs H^alpha of this law are sums of dyadic tokens, exact in float64), and the two
    1 - corr gaps enclosed in balls."""
    import numpy as np

    from attsvm import hierarchy, svm, twolayer
    from attsvm.ball.linalg import corr
    from attsvm.ball.numbers import arbs
    from attsvm.kit import Kit, Undecidable

    h = case.hypotheses
    D, b = case.data, case.index
    W1, W2 = (np.array(outcome.detail[k][b]) for k in ("W1", "W2"))
    try:  # the selections of this iterate, proved in balls (attsvm.ball.twolayer)
        alpha, beta = Kit("ball").twolayer_selections(D, W1, W2, residual=True)
        proved = True
    except Undecidable:  # a near tie somewhere: the float64 argmax, said so in the detail
        alpha, beta = twolayer.selections(twolayer.forward(D, W1, W2, residual=True))
        proved = False
    top = twolayer.top_layer_dataset(D, twolayer.hard_outputs(D, alpha, residual=True), beta)
    rows = hierarchy.layer1_data(D, alpha, hierarchy.selected_rows(beta))
    certs = [svm.certify_fro(top), svm.certify_fro(rows)]
    if not all(c.get("verified") for c in certs):
        return Outcome(ok=True, inconclusive="a Frobenius certificate is not verified")
    S2, S1 = (arbs(c["W"]).reshape(D.d, D.d) for c in certs)
    g2, g1 = 1 - corr(arbs(W2), S2, 200), 1 - corr(arbs(W1), S1, 200)
    m = float(h["eps"]) - g2.max(g1)
    if m.contains(0):
        return Outcome(ok=True, inconclusive="the margin's ball contains 0")
    return Outcome(
        ok=bool(m > 0),
        margin=float(m.mid()),
        how="high precision",
        detail={"gap_W2_hard": float(g2.mid()), "gap_W1_rows_beta": float(g1.mid()), "selections_proved": proved},
    )


@claim(
    id="hier-norm-growth",
    title="Two-layer attention, plain GD from 0: the layers grow together — ||W1||/||W2|| stays in [1/2, 2] from "
    "step K/10 on, and both norms still grow over [K/2, K]",
    origin="conjecture",
    source="issue 30 (which layer saturates first?); the statement was chosen from measurements (attsvm reproduce "
    "hierarchy)",
    hypotheses=DATA,
    params={"lr": 1.0, "steps": 2000, "ratio": 2.0},
    kind="empirical",
    rate=0.75,
    examples=16,
    ci_examples=12,
)
def hier_norm_growth(case):
    import numpy as np

    from attsvm import gd

    h = case.hypotheses
    K = int(h["steps"])
    r = gd.run(case.batch, param="twolayer", algo="gd", lr=float(h["lr"]), steps=K, residual=True,
               record_every=K // 10, record_params=True)  # fmt: skip
    tr = r.trajectory
    n1 = np.linalg.norm(np.asarray(tr["W1"]), axis=(-2, -1))[1:]  # records K/10, ..., K
    n2 = np.linalg.norm(np.asarray(tr["W2"]), axis=(-2, -1))[1:]
    lr_ = np.log(n1 / n2)
    mid = len(n1) // 2 - 1  # the record at K/2
    bound = float(np.log(float(h["ratio"])))
    m = np.minimum(bound - np.max(np.abs(lr_), axis=0), np.minimum(n1[-1] - n1[mid], n2[-1] - n2[mid]))
    return Outcome(
        run_margins=m.tolist(),
        detail={
            "measured": f"per run: max_k |log(||W1_k|| / ||W2_k||)| <= log {h['ratio']} over k = K/10..K, and both "
            "norms larger at K than at K/2",
            "ratio_end": np.round(n1[-1] / n2[-1], 4).tolist(),
            "ratio_range": [float(np.exp(lr_.min())), float(np.exp(lr_.max()))],
            "norm_W1_end": np.round(n1[-1], 3).tolist(),
            "norm_W2_end": np.round(n2[-1], 3).tolist(),
        },
    )
