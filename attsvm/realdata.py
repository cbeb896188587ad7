r"""Attention trained on a real data set: the pieces the real-data experiments share (``numerics/digits.py``,
``numerics/text.py``, ``numerics/faces.py``).

* :func:`splits` — seeded train/test splits, one per run;
* :func:`fit_token_head` — the frozen linear head, fit *first*: L2 logistic regression ($C=1$, no intercept) of the
  input's label on each of its visible tokens, $\min_v\frac12\|v\|^2+\sum_{i,t:m_{it}}\log(1+e^{-Y_iv^\top
  x_{it}})$, so $\gamma_{it}=Y_iv^\top x_{it}$ is the token's log-odds vote for the true class;
* :func:`log_attention` — $\log s_{it}$ and $\log_{10}(1-\max_ts_{it})$ in the log domain (no cancellation when
  $s$ saturates), padding masked;
* :func:`accuracy` — the fraction of inputs with $Y_if(X_i)>0$, $f(X_i)=v^\top\sum_ts_{it}x_{it}$.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def splits(n: int, frac: float, seeds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded train/test splits of ``n`` inputs (seed ``b`` for run ``b``: ``default_rng(b).permutation(n)``),
    ``round(frac * n)`` for training, each part sorted."""
    ntr = int(round(frac * n))
    out = []
    for b in range(seeds):
        perm = np.random.default_rng(b).permutation(n)
        out.append((np.sort(perm[:ntr]), np.sort(perm[ntr:])))
    return out


def fit_token_head(X: np.ndarray, Y: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    r"""The head $v$: L2 logistic regression ($C=1$, no intercept) of the label on each visible token,
    $\min_v\frac12\|v\|^2+\sum_{i,t:m_{it}}\log(1+e^{-Y_iv^\top x_{it}})$ (scikit-learn, lbfgs, tol $10^{-10}$)."""
    from sklearn.linear_model import LogisticRegression

    n, T, d = X.shape
    lr = LogisticRegression(C=1.0, fit_intercept=False, max_iter=10000, tol=1e-10)
    if mask is None:
        lr.fit(X.reshape(n * T, d), np.repeat(Y, T))
    else:
        m = np.asarray(mask, dtype=bool)
        lr.fit(X[m], np.repeat(Y, m.sum(axis=1)))
    return np.asarray(lr.coef_[0], dtype=np.float64)


def log_attention(a: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""For logits ``a`` (..., n, T): $\log s_{it}=a_{it}-\log\sum_\tau e^{a_{i\tau}}$ over visible $\tau$ ($-\infty$
    on padding) and $\log_{10}(1-\max_ts_{it})=(\log\sum_{t\ne\alpha_i}e^{a_{it}}-\log\sum_te^{a_{it}})/\ln10$,
    $\alpha_i=\arg\max_ts_{it}$, computed without cancellation ($-\infty$ with one visible token)."""
    from scipy.special import logsumexp

    if mask is not None:
        a = np.where(mask, a, -np.inf)
    lz = logsumexp(a, axis=-1, keepdims=True)
    logs = a - lz
    top = np.argmax(a, axis=-1)
    rest = np.where(np.arange(a.shape[-1]) == top[..., None], -np.inf, a)
    with np.errstate(divide="ignore"):
        lo = (logsumexp(rest, axis=-1) - lz[..., 0]) / np.log(10.0)
    return logs, lo


def accuracy(logs: np.ndarray, X: np.ndarray, Y: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""Fraction of inputs with $Y_if(X_i)>0$, $f(X_i)=v^\top\sum_t s_{it}x_{it}$, from $\log s$ (..., n, T) (padding
    $-\infty$: weight 0); ``X`` (..., n, T, d), ``Y`` (..., n), ``v`` (..., d); leading axes kept."""
    f = np.einsum("...nt,...ntd,...d->...n", np.exp(logs), X, v)
    return np.mean(Y * f > 0, axis=-1)


# ---------------------------------------------------------------------------------------------- measurements
def nanmean_rows(a: np.ndarray) -> np.ndarray:
    """Mean of each row over its finite entries (NaN for a row with none)."""
    a = np.asarray(a, dtype=float)
    cnt = np.sum(np.isfinite(a), axis=1)
    return np.where(cnt > 0, np.nansum(a, axis=1) / np.maximum(cnt, 1), np.nan)


def saturation_summary(lo: np.ndarray) -> dict[str, Any]:
    r"""$1-\max_ts_{it}$ at the end from its $\log_{10}$ ``lo`` (B, n): mean, the median over runs of each run's
    median and 90% quantile, and the maximum over all inputs."""
    return {
        "mean": float(np.mean(10.0**lo)),
        "median": float(np.median(10.0 ** np.median(lo, axis=-1))),
        "q90": float(np.median(10.0 ** np.quantile(lo, 0.9, axis=-1))),
        "max": float(np.max(10.0 ** np.max(lo, axis=-1))),
        "note": "over the training inputs of each run; median/q90 of a run, then the median over runs; max over all",
    }


def local_optimality_grid(ctx, sets: list, stage: str) -> tuple[np.ndarray, np.ndarray]:
    r"""Feasibility and local optimality of Att-SVM($\alpha$) (Frobenius solves, support within ``tol('active')``)
    for ``sets`` [[data set with its selection, ...] per record] (R lists of B): two (R, B) arrays of 0/1, NaN where
    the solver failed (counted, never read as a value)."""
    from .experiments import call_each

    R, B = len(sets), len(sets[0])
    res = call_each(ctx, "attsvm.svm:solve_fro", [((s,), {}) for row in sets for s in row], stage)
    feas, loc = np.full((R, B), np.nan), np.full((R, B), np.nan)
    for j, r in enumerate(res):
        k, b = divmod(j, B)
        if isinstance(r, dict) and r.get("status") in ("optimal", "infeasible"):
            ok = r["status"] == "optimal"
            feas[k, b] = float(ok)
            loc[k, b] = float(ok and bool(r.get("locally_optimal")))
    return feas, loc


def certified_svms(ctx, sets: list, d: int, stage: str) -> tuple[np.ndarray, np.ndarray, list[dict], list[bool]]:
    r"""$W^{mm}_\alpha$ of each data set of ``sets`` (its stored selection) with the exact rational certificate
    (``solve_fro(certify=True)``): (B, d, d) NaN where infeasible or failed, the (B,) mask of optimal solves, the
    certificates and the (exact-support) local-optimality flags."""
    from .experiments import call_each, stack

    fro = call_each(ctx, "attsvm.svm:solve_fro", [((s,), {"certify": True}) for s in sets], stage)
    W, ok = stack(fro, (d, d))
    certs = [x.get("certificate", {}) if isinstance(x, dict) else {} for x in fro]
    lo = [bool(x.get("locally_optimal")) if isinstance(x, dict) else False for x in fro]
    return W, ok, certs, lo


def svm_summary(ok: np.ndarray, certs: list[dict], lo: list[bool]) -> dict[str, Any]:
    """Counts of the certified SVM solves of the final selections (:func:`certified_svms`)."""
    return {
        "runs": len(lo),
        "svm_feasible": int(np.sum(ok)),
        "certified": int(sum(bool(c.get("verified")) for c in certs)),
        "support_size": [int(c["support_size"]) if "support_size" in c else None for c in certs],
        "locally_optimal": lo,
        "frac_locally_optimal": float(np.mean(lo)),
    }


def measure_one_layer(ctx, ds, run, test, stage: str) -> dict[str, Any]:
    r"""Everything reported of a one-layer run (param ``W``, batched over B data sets) on training data ``ds`` and
    test data ``test`` (a Dataset of the same batch): at every recorded step the selection, whether Att-SVM of it
    is feasible / locally optimal, $\mathrm{corr}(W_k,W^{mm}_\alpha)$ to the certified SVM of the final selection
    $\alpha$, the saturation $1-\max_ts_{it}$ (log domain), the train and test accuracy; at the end the certificate
    counts, $\alpha=\mathrm{opt}$, the fraction of selected tokens voting for the true class, and the final train /
    test selections (``train_selection``, ``test_selection``)."""
    from .experiments import corr_trajectory, summary
    from .figures import band_stats
    from .model import logits

    B, d = ds.batch_size, ds.d
    traj = run.trajectory
    step = np.asarray(traj["step"])
    Wt = np.asarray(traj["W"])  # (R, B, d, d)
    sel = np.asarray(traj["selection"])  # (R, B, n)
    R = sel.shape[0]
    feas, loc = local_optimality_grid(ctx, [[ds[b].with_alpha(sel[k, b]) for b in range(B)] for k in range(R)], stage)
    alpha = np.asarray(run.selection)
    Wmm, ok, certs, lo_flags = certified_svms(ctx, [ds[b].with_alpha(alpha[b]) for b in range(B)], d, stage + " svm")
    corr = corr_trajectory(Wt, Wmm)
    logs_tr, lo_tr = log_attention(logits(ds.X[None], Wt, ds.Z[None]), ds.mask)
    logs_te, _ = log_attention(logits(test.X[None], Wt, test.Z[None]), test.mask)
    acc_tr = accuracy(logs_tr, ds.X[None], ds.Y[None], ds.v[None])
    acc_te = accuracy(logs_te, test.X[None], test.Y[None], test.v[None])
    g_sel = np.take_along_axis(np.asarray(ds.scores), alpha[..., None], axis=-1)[..., 0]
    return {
        **svm_summary(ok, certs, lo_flags),
        "frac_alpha_is_opt": summary(np.mean(alpha == np.asarray(ds.opt), axis=-1)),
        "frac_selected_votes_true_class": summary(np.mean(g_sel > 0, axis=-1)),
        "final_corr": summary(corr[-1]),
        "final_corr_runs": corr[-1],
        "final_norm": summary(np.asarray(run.norm)),
        "final_one_minus_max_s": saturation_summary(lo_tr[-1]),
        "final_train_acc": summary(acc_tr[-1]),
        "final_test_acc": summary(acc_te[-1]),
        "stop_reasons": sorted({str(x) for x in np.atleast_1d(run.stop_reason)}),
        "train_selection": alpha,
        "test_selection": np.argmax(logs_te[-1], axis=-1),
        "curves": {
            "step": step,
            "one_minus_corr": band_stats(1.0 - corr, log=True),
            "saturation": band_stats(np.mean(10.0**lo_tr, axis=-1), log=True),
            "train_acc": band_stats(acc_tr),
            "test_acc": band_stats(acc_te),
            "frac_locally_optimal": nanmean_rows(loc),
            "frac_feasible": nanmean_rows(feas),
            "solver_errors": np.sum(np.isnan(loc), axis=1),
        },
    }


def top_layer(ds, fw, alpha: np.ndarray, beta: np.ndarray, frozen: bool, residual: bool):
    r"""The top-layer data set of a two-layer model (twolayer spec): tokens $h_{it}$ (``frozen`` $W_1$) or the hard
    layer-1 outputs $H^\alpha_{it}=x_{i\alpha_{it}}+\rho x_{it}$ (joint training), the data set's $Y$, $z_i$, $v$
    and padding mask, selection $\beta$ (a single data set)."""
    from . import twolayer as tl

    H = np.asarray(fw.h) if frozen else tl.hard_outputs(ds, alpha, residual=residual)
    return tl.top_layer_dataset(ds, H, beta)


def measure_two_layer(ctx, ds, run, test, frozen: bool, residual: bool, stage: str) -> dict[str, Any]:
    r"""Everything reported of a two-layer run (param ``twolayer``; ``frozen``: $W_1$ frozen) on ``ds`` / ``test``:
    at every recorded step the layer-2 selection $\beta^{(k)}$ and top-layer data set (:func:`top_layer`); whether
    the top-layer Att-SVM of the final $\beta$ is feasible / locally optimal (certified), $\mathrm{corr}(W_{2,k},
    W^{mm}_\beta)$ to the certified top-layer SVM of the final $\beta$ over the final layer-1 outputs,
    $\|W_{1,k}\|_F$ and $\|W_{2,k}\|_F$, the saturation of layer 2 ($1-\max_ts^2_{it}$) and of layer 1 (mean over
    visible rows of $1-\max_\tau s^1_{i,t\tau}$), train and test accuracy; the final selections $\beta$ and
    $\alpha_{i\beta_i}$ (the token layer 1 mixes in most at the selected position)."""
    from . import twolayer as tl
    from .experiments import corr_trajectory, summary
    from .figures import band_stats

    B, d = ds.batch_size, ds.d
    traj = run.trajectory
    step = np.asarray(traj["step"])
    W1t, W2t = np.asarray(traj["W1"]), np.asarray(traj["W2"])
    R = W1t.shape[0]
    mask = ds.mask
    sets, sat2, sat1, acc_tr, acc_te = [], [], [], [], []
    for k in range(R):
        fw = tl.forward(ds, W1t[k], W2t[k], residual=residual)
        al, be = tl.selections(fw)
        sets.append([top_layer(ds[b], _item(fw, b), al[b], be[b], frozen, residual) for b in range(B)])
        _, lo2 = log_attention(fw.a2, mask)
        sat2.append(np.mean(10.0**lo2, axis=-1))
        sat1.append(_row_saturation(fw.log_s1, mask))
        acc_tr.append(np.mean(fw.u > 0, axis=-1))
        acc_te.append(np.mean(tl.forward(test, W1t[k], W2t[k], residual=residual).u > 0, axis=-1))
    # local optimality of the final selection only (certified): along the run the top-layer programs of the joint
    # model change with W1 and many are infeasible, whose Farkas solves took minutes each on two cores
    Wmm, ok, certs, lo_flags = certified_svms(ctx, sets[-1], d, stage + " svm")
    loc = np.full((R, B), np.nan)
    feas = np.full((R, B), np.nan)
    loc[-1] = [float(x) for x in lo_flags]
    feas[-1] = ok.astype(float)
    corr = corr_trajectory(W2t, Wmm)
    fw = tl.forward(ds, W1t[-1], W2t[-1], residual=residual)
    al, be = tl.selections(fw)
    _, lo2 = log_attention(fw.a2, mask)
    fte = tl.forward(test, W1t[-1], W2t[-1], residual=residual)
    al_te, be_te = tl.selections(fte)
    n1 = np.linalg.norm(W1t, axis=(-2, -1))
    n2 = np.linalg.norm(W2t, axis=(-2, -1))
    return {
        **svm_summary(ok, certs, lo_flags),
        "frac_beta_is_opt_of_top_layer": summary(
            [
                np.mean(be[b] == np.asarray(sets[-1][b].with_alpha(None).opt)) if _untied(sets[-1][b]) else np.nan
                for b in range(B)
            ]
        ),  # fmt: skip
        "final_corr": summary(corr[-1]),
        "final_corr_runs": corr[-1],
        "final_norm_W1": summary(n1[-1]),
        "final_norm_W2": summary(n2[-1]),
        "final_one_minus_max_s": saturation_summary(lo2),
        "final_layer1_one_minus_max_s": summary(sat1[-1]),
        "final_train_acc": summary(acc_tr[-1]),
        "final_test_acc": summary(acc_te[-1]),
        "stop_reasons": sorted({str(x) for x in np.atleast_1d(run.stop_reason)}),
        "train_selection": be,
        "train_layer1_at_selection": np.take_along_axis(al, be[..., None], axis=-1)[..., 0],
        "test_selection": be_te,
        "test_layer1_at_selection": np.take_along_axis(al_te, be_te[..., None], axis=-1)[..., 0],
        "curves": {
            "step": step,
            "one_minus_corr": band_stats(1.0 - corr, log=True),
            "saturation": band_stats(np.stack(sat2), log=True),
            "saturation_layer1": band_stats(np.stack(sat1), log=True),
            "norm_W1": band_stats(n1, log=True),
            "norm_W2": band_stats(n2, log=True),
            "train_acc": band_stats(np.stack(acc_tr)),
            "test_acc": band_stats(np.stack(acc_te)),
            "frac_locally_optimal": nanmean_rows(loc),
            "frac_feasible": nanmean_rows(feas),
            "solver_errors": np.zeros(R, dtype=int),
        },
    }


def _item(fw, b: int):
    """Item ``b`` of a batched :class:`attsvm.twolayer.Forward` (only ``h`` is read)."""
    from types import SimpleNamespace

    return SimpleNamespace(h=np.asarray(fw.h)[b])


def _untied(ds) -> bool:
    """Whether the highest score of every input of ``ds`` is unique (so $\\mathrm{opt}$ is defined)."""
    return not np.any(ds.tied)


def _row_saturation(log_s1: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    r"""Mean over the visible layer-1 rows $(i,t)$ of $1-\max_\tau s^1_{i,t\tau}$ (B,), from $\log s^1$ in the log
    domain ($1-\max s=\sum_{\tau\ne\arg\max}s_\tau$)."""
    from scipy.special import logsumexp

    top = np.argmax(log_s1, axis=-1)
    rest = np.where(np.arange(log_s1.shape[-1]) == top[..., None], -np.inf, log_s1)
    with np.errstate(divide="ignore"):
        one_minus = np.exp(logsumexp(rest, axis=-1))  # (B, n, T)
    if mask is None:
        return np.mean(one_minus, axis=(-2, -1))
    return np.sum(np.where(mask, one_minus, 0.0), axis=(-2, -1)) / np.sum(mask, axis=(-2, -1))


# ---------------------------------------------------------------------------------------------- figures
#: the models every real-data figure draws: key in the result -> (legend label, colour index in PALETTE)
MODELS = {
    "W": ("one layer, GD on $W$", 0),
    "joint": (r"two layers, joint $(W_1,W_2)$", 1),
    "frozen": (r"two layers, $W_1$ frozen", 2),
}


def curve_panels(ax: list, groups: dict[str, dict[str, Any]], styles: dict[str, str], baselines: dict[str, float]):
    r"""The four curve panels of a real-data figure on ``ax`` (4 axes): $1-\mathrm{corr}$ with the certified SVM of
    the final selection, saturation, test accuracy (dash-dot: uniform attention per group), and the fraction of runs
    whose current selection is locally optimal; ``groups`` {group: {model: measured dict}} drawn in linestyle
    ``styles[group]``, models coloured by :data:`MODELS`. The iteration axis is logarithmic (the two-layer runs are
    shorter); step 0 is not drawn."""
    from .figures import PALETTE, band

    for g, models in groups.items():
        ls = styles[g]
        for m, r in models.items():
            c = PALETTE[MODELS[m][1]]
            cur = r["curves"]
            x = np.asarray(cur["step"], dtype=float)
            keep = x > 0
            band(ax[0], x[keep], _points(cur["one_minus_corr"], keep), color=c, logy=True, linestyle=ls)
            band(ax[1], x[keep], _points(cur["saturation"], keep), color=c, logy=True, linestyle=ls)
            band(ax[2], x[keep], _points(cur["test_acc"], keep), color=c, linestyle=ls)
            ax[3].plot(x[keep], np.asarray(cur["frac_locally_optimal"], dtype=float)[keep], color=c, linestyle=ls,
                       marker="o", ms=3)  # fmt: skip
        if g in baselines and baselines[g] is not None:
            ax[2].axhline(baselines[g], color="0.45", linestyle=ls, linewidth=0.9, alpha=0.8)
    from matplotlib.ticker import NullFormatter

    for a in ax:
        a.set_xscale("log")
        a.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks of a short log range overlap
        a.set_xlabel("iteration $k$")
    ax[0].set(ylabel=r"$1-\mathrm{corr}$", title="distance to the certified SVM\nof the final selection")
    ax[1].set(ylabel=r"$1-\max_t s_{it}$", title="saturation (top layer,\nmean over training inputs)")
    ax[2].set(ylabel="test accuracy", title="test accuracy\n(grey: uniform attention)")
    ax[3].set(ylabel="fraction of runs", title="current selection\nlocally optimal")
    ax[3].set_ylim(-0.05, 1.05)


def _points(stats: dict[str, Any], keep: np.ndarray) -> dict[str, Any]:
    """A :func:`attsvm.figures.band_stats` line restricted to the points ``keep``."""
    return {k: (np.asarray(v)[keep] if isinstance(v, list | np.ndarray) and len(v) == len(keep) else v)
            for k, v in stats.items()}  # fmt: skip
