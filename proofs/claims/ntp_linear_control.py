r"""``ntp-linear-control`` (paper: Thrampoulidis, *Implicit optimization bias of next-token prediction in linear
models*, arXiv 2402.18551, Thms 1–2; THEORY §7): the convex control of the next-token claims.

A linear decoder $W\in\mathbb R^{V\times d_h}$ on $m$ fixed, linearly independent contexts $h_j$ with empirical
next-token distributions (NTP-compatible and NTP-separable data, :func:`attsvm.ntp.linear.linear_ntp`), trained
by GD with $\eta\le1/(2L)$: $W_k/\|W_k\|\to W^{mm}/\|W^{mm}\|$ (the NTP-SVM: equalities inside each context's
support, margins $\ge1$ to the words outside) and $P_{\mathcal F}W_k\to W^\star$ (the log-odds solution in the
equality subspace $\mathcal F$).

The data are encoded as next-token attention data (the decoder is the block ``W'[:V, V:]`` of the attention
matrix, :mod:`attsvm.ntp.linear`), so *the same pipeline* as the attention claims runs here: the batched engine,
the certified graph SVM (here: the NTP-SVM), the proved finite part (here $W^\star$, which
:func:`attsvm.ntp.linear.log_odds_solution` computes independently) and the measures and pass rule of
:mod:`attsvm.ntp.decomposition`. If it passes here and fails on attention, the attention statement is at fault,
not the pipeline. A run passes when both $1-\mathrm{corr}(W_k,W^{mm})\le$ ``eps_corr`` and
$\|P_{\mathcal F}W_k-W^\star\|_F\le$ ``eps_fin`` at the end of plain GD with $\eta=1/(2L)$, each non-increasing
(within ``rise``) over the records of the second half. Confirmation: the failing run replayed at 50 digits (70 to
check), as for the attention claims.
"""

from __future__ import annotations

from attsvm.claims import Outcome, claim

#: linear-NTP sizes: V words, context dimension dh, m contexts, support size, samples per context
SIZES = {"V": 6, "dh": 4, "m": 3, "support": 2, "samples": 6}
MEASURES = {"one_minus_corr": "eps_corr", "finite_distance": "eps_fin"}


def _batch(h: dict, runs: int, seed: int):
    from attsvm.ntp.data import NTPData
    from attsvm.ntp.linear import linear_ntp

    return NTPData.stack(
        [
            linear_ntp(int(h["V"]), int(h["dh"]), int(h["m"]), int(h["support"]), int(h["samples"]), seed=seed + b)
            for b in range(runs)
        ]
    )


def _half_lr(h: dict, batch):
    from attsvm.ntp.loss import smoothness_constant

    return 1.0 / (2.0 * smoothness_constant(batch.X, batch.Z, batch.visible))


@claim(
    id="ntp-linear-control",
    title="Linear NTP: GD's direction goes to the NTP-SVM and its F-projection to the log-odds solution W*",
    origin="paper",
    source="arXiv 2402.18551, Thms 1-2; THEORY §7",
    hypotheses={},
    params={**SIZES, "algo": "gd", "steps": 20000, "eps_corr": 0.05, "eps_fin": 0.01, "rise": 1e-4},
    kind="empirical",
    rate=0.8,
    examples=24,
    ci_examples=24,
    depends=("ntp-logloss-convex",),
)
def ntp_linear_control(case):
    import numpy as np

    from attsvm.ntp.decomposition import sweep_outcome

    h = dict(case.hypotheses)
    batch = _batch(h, case.runs, case.seed)
    h["lr"] = _half_lr(h, batch)
    parts = {m: sweep_outcome(batch, case.seed, {**h, "eps": h[e]}, m) for m, e in MEASURES.items()}
    both = [
        None if a is None or b is None else (a and b)
        for a, b in zip(parts["one_minus_corr"]["runs"], parts["finite_distance"]["runs"])
    ]
    return Outcome(
        ok=all(r is not False for r in both),
        margin=float(min(p["margin"] for p in parts.values())),
        runs=both,
        detail={m: p["detail"] for m, p in parts.items()} | {"lr": np.round(h["lr"], 6).tolist()},
    )


@ntp_linear_control.confirm
def _confirm(case, outcome):
    """Replay the failing run at 50 digits; either measure failing again confirms."""
    from attsvm.ntp.decomposition import confirm_outcome

    h = dict(case.hypotheses)
    batch = _batch(h, case.runs, case.seed)
    b = case.index
    h["lr"] = float(_half_lr(h, batch)[b])
    res = {
        m: confirm_outcome(batch[b], batch.batch_size, b, case.seed, {**h, "eps": h[e]}, m) for m, e in MEASURES.items()
    }
    failed = [m for m, r in res.items() if not r["ok"]]
    if failed:
        return Outcome(ok=False, margin=min(res[m]["margin"] for m in failed), detail={"failed": failed, **res})
    why = "; ".join(r["inconclusive"] for r in res.values() if r.get("inconclusive"))
    return Outcome(ok=True, inconclusive=why or None, detail=res) if why else Outcome(ok=True, margin=0.0, detail=res)
