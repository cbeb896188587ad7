r"""Digits — the max-margin theory of attention on real images (THEORY §1, §2; claims ``gd-selects-locally-optimal``,
``kq-gd-nuclear``), on scikit-learn's 8x8 handwritten digits (``sklearn.datasets.load_digits``: 1797 images that
ship with scikit-learn, nothing downloaded).

**Data.** Two digits (option ``pair``, default ``3-8``; the first digit is $Y=+1$, the second $Y=-1$), pixel
values divided by 16 (so in $[0,1]$). Each image becomes $T$ tokens (option ``tokens``):

* ``patch`` (default): the $T=16$ patches of $2\times2$ pixels in row-major order of the $4\times4$ patch grid;
  token $x_t=(\text{its 4 pixels};\,e_t)\in\mathbb R^{20}$, $e_t$ the one-hot position code;
* ``row``: the $T=8$ pixel rows; $x_t=(\text{its 8 pixels};\,e_t)\in\mathbb R^{16}$.

The position code is what makes the theory's objects well defined on these images: without it two blank
patches of an image are the same vector, so a constraint feature $A_{it}=(x_{i\alpha_i}-x_{it})z_i^\top$ vanishes
and Att-SVM($\alpha$) is infeasible for every $\alpha$ that selects a blank patch (THEORY §2, Farkas), and their
scores tie, so $\mathrm{opt}_i$ is undefined; with it every token of an image is distinct, and $z_i\ne0$ always.

**Query.** Self-attention as in THEORY §1, $z_i=x_{iq}$, with $q$ = option ``query`` (default 5: the patch of
pixel rows 2–3 and columns 2–3, one of the four central patches; for ``row``, pixel row 5). The option takes 0..7,
a token of either tokenisation, so that every value is checked before anything runs (for patches: the top two
rows of the patch grid, which hold the central patches 5 and 6). A self-attention query
differs from image to image (its pixels), so the queries span more than one direction ($\mathrm{rank}\,Z=5$ for
patches: 4 pixels and $e_q$) and $W$ is not reduced to one prompt vector, as a fixed CLS query $z_i=z$ would
reduce it ($W^{mm}_\alpha=p^{mm}_\alpha z^\top/\|z\|^2$, the prompt SVM, a different claim). A query at a corner
(``query=0``) is such a constant query: the corner patch is blank in (almost) every image, so $z_i=e_0$.

**Head.** A fixed linear head $v$, fit *first* and then frozen: scikit-learn's ``LogisticRegression`` (L2,
$C=1$, no intercept — the one-hot codes sum to 1, so an intercept is one of the position weights) on the
individual tokens of the training images, each token labelled with its image's label. So $v^\top x_{it}$ is the
head's log-odds that a token with this content at this position belongs to a $+1$ image, the score
$\gamma_{it}=Y_iv^\top x_{it}$ is positive when token $t$ votes for the true class, and $\mathrm{opt}_i$ is the
token with the strongest evidence for it. (A head fit on the mean token would see only the constant position
part $\frac1T\mathbf 1$: equal position weights, and every blank patch of an image would tie.) The model is the
attention model of THEORY §1, $f(X_i)=v^\top X_i^\top\mathbb S(X_iWz_i)$, classifying by $\mathrm{sign}\,f$; with
$W=0$ (uniform attention) it is the mean of the token votes, the baseline reported.

**Runs.** ``seeds`` independent runs, batched in one engine call per parametrisation: run $b$ has its own
seeded train/test split (``train_frac`` of the pair's images for training; the smoke size trains on fewer), its
own head fit on that split, and its own initialisation. Normalised GD $\theta\leftarrow\theta-\eta\,g/(\|g\|+\epsilon)$,
$\eta=0.1$, on $W$ and on $(K,Q)$ ($m=d$, per-factor normalisation) with the authors' settings as E3
(``numerics/local.py``) runs them and with the same options: PyTorch's ``nn.Linear`` initialisation
(``init``), $\epsilon=2^{-52}$ (``grad_eps``), the ridge $2^{-52}(\|K\|_F^2+\|Q\|_F^2)$ on $(K,Q)$
(``ridge``), ``normalize``. Longer than E3's 2000 steps: on these data the selection settles only after several
thousand steps.

**Measured** (every recorded iteration $k$, each run): the selection $\alpha^{(k)}_i=\arg\max_ts_{it}$, whether
Att-SVM($\alpha^{(k)}$) is feasible and $\alpha^{(k)}$ locally optimal (Frobenius solve, support tokens within
``tol('active')``); $\mathrm{corr}(W_k,W^{mm}_\alpha)$ and $\mathrm{corr}(K_kQ_k^\top,W^{mm}_{\star,\alpha})$ (and,
for contrast, $\mathrm{corr}(K_kQ_k^\top,W^{mm}_\alpha)$) against the SVMs of the selection $\alpha$ each run
*ends* on; the saturation $1-\max_ts_{it}$ computed in the log domain (mean, median, 90% quantile and maximum over
the training images); the train and test accuracy. At the end: $W^{mm}_\alpha$ of the final selection with its
exact rational certificate (``attsvm.svm.solve_fro(certify=True)``: exact support set, hence exact local
optimality), the nuclear-norm SVM (``attsvm.svm.solve(norm="nuc")``), ranks, how often $\alpha=\mathrm{opt}$,
whether Att-SVM($\mathrm{opt}$) is feasible at all (Farkas), and the selected token of a few test images.

**What it found** (full sizes, defaults; the numbers are the gallery's ``digits.json``): Att-SVM($\mathrm{opt}$)
is infeasible for every training set (3750 constraints), so the loss cannot approach its infimum; GD instead
ends on a selection that attends mostly to the central patches 9 and 5, which is feasible (exactly certified) in
every run and locally optimal in most, with $\mathrm{corr}(W_k,W^{mm}_\alpha)\approx0.99$ and $K_kQ_k^\top$
closer to $W^{mm}_{\star,\alpha}$ than to $W^{mm}_\alpha$ in every run. With ``tokens=row`` (``--set tokens=row
--set query=3``) the theory's picture does not hold within 20000 steps: no $W$ run's selection is locally
optimal, some images still split their attention between two rows ($1-\max_ts_{it}$ up to 0.5), $\|W_k\|_F$
grows to only about 250, and the spec's check fails; its nuclear-norm solves (1750 constraints) also take about
20 minutes in all, against seconds for patches.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from attsvm.experiments import AUTHORS_EPS, Option, authors_options

EPS = AUTHORS_EPS
PAIRS = tuple(f"{a}-{b}" for a, b in combinations(range(10), 2))  #: the class pairs a-b, a < b
TOKENS = {"patch": (16, 4), "row": (8, 8)}  #: tokenisation -> (T, pixels per token)
OPTIONS = {
    "pair": Option("3-8", PAIRS, help="the two digits a-b: a is label +1, b is label -1"),
    "tokens": Option("patch", tuple(TOKENS), help="tokens: 16 patches of 2x2 pixels, or the 8 pixel rows"),
    "query": Option(5, minimum=0, maximum=7, help="query token q, z_i = x_iq (0..7: a token of either tokenisation)"),
    **authors_options(),
}

TITLE = (
    "Digits: normalised GD on W and (K,Q) over real 8x8 digit images — the selection it ends on, its local "
    "optimality, corr with the Att-SVM / Att-SVM* of that selection, saturation and accuracy"
)
CLAIMS = ("gd-selects-locally-optimal", "kq-gd-nuclear")
SIZES = {
    "full": {"seeds": 8, "steps": 20000, "record_every": 1000, "train_frac": 0.7},
    "smoke": {"seeds": 2, "steps": 2000, "record_every": 250, "train_frac": 0.1},
}
SHOW = 6  #: test images of run 0 drawn in the image panel (half of each class)
PARAMS = ("W", "KQ")


# ---------------------------------------------------------------------------------------------- data
def load_pair(pair: str) -> tuple[np.ndarray, np.ndarray]:
    r"""The images of the two digits of ``pair`` (``"a-b"``), pixels $/16\in[0,1]$, shape (n, 8, 8), and labels
    $Y=+1$ for digit a, $-1$ for digit b (scikit-learn's bundled copy of the UCI digits; no download)."""
    from sklearn.datasets import load_digits

    a, b = (int(c) for c in pair.split("-"))
    data = load_digits()
    keep = (data.target == a) | (data.target == b)
    return np.asarray(data.images[keep], dtype=np.float64) / 16.0, np.where(data.target[keep] == a, 1.0, -1.0)


PATCH = {"patch": (2, 2), "row": (1, 8)}  #: tokenisation -> pixel block (height, width) of one token


def tokenise(images: np.ndarray, tokens: str) -> np.ndarray:
    r"""Tokens $x_{it}=(\text{pixels of token }t;\,e_t)$, shape (n, T, p+T) (:func:`attsvm.patches.patch_tokens`):
    ``patch`` — the $2\times2$ patches in row-major order of the $4\times4$ patch grid (p = 4, T = 16); ``row`` —
    the pixel rows (p = 8, T = 8)."""
    from attsvm.patches import patch_tokens

    return patch_tokens(images, PATCH[tokens])


def token_box(tokens: str, t: int) -> tuple[float, float, float, float]:
    """The pixel rectangle ``(x0, y0, width, height)`` of token ``t`` in image coordinates (pixel centres at
    integers, as ``imshow`` draws them)."""
    from attsvm.patches import patch_box

    ph, pw = PATCH[tokens]
    return patch_box(t, 8 // pw, (ph, pw))


def fit_head(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    r"""The head $v$: L2 logistic regression ($C=1$, no intercept) of the image label on each token,
    $\min_v\frac12\|v\|^2+\sum_{i,t}\log(1+e^{-Y_iv^\top x_{it}})$ (:func:`attsvm.realdata.fit_token_head`)."""
    from attsvm.realdata import fit_token_head

    return fit_token_head(X, Y)


def splits(n: int, frac: float, seeds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded train/test splits of ``n`` images (seed ``b`` for run ``b``), ``round(frac * n)`` for training
    (:func:`attsvm.realdata.splits`)."""
    from attsvm.realdata import splits as seeded_splits

    return seeded_splits(n, frac, seeds)


def attention(X: np.ndarray, W: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Log-softmax $\log s_{it}$ of $a_i=X_iWx_{iq}$ and $\log_{10}(1-\max_ts_{it})$, computed without cancellation
    as $\log\sum_{t\ne\alpha_i}e^{a_{it}}-\log\sum_te^{a_{it}}$ (``X`` (..., n, T, d), ``W`` (..., d, d);
    :func:`attsvm.realdata.log_attention`)."""
    from attsvm.model import logits
    from attsvm.realdata import log_attention

    return log_attention(logits(X, W, X[..., q, :]))


def accuracy(X: np.ndarray, Y: np.ndarray, v: np.ndarray, W: np.ndarray, q: int) -> np.ndarray:
    r"""Fraction of images with $Y_if(X_i)>0$, $f(X_i)=v^\top X_i^\top\mathbb S(X_iWx_{iq})$ (leading axes kept)."""
    from attsvm.realdata import accuracy as attention_accuracy

    return attention_accuracy(attention(X, W, q)[0], X, Y, v)


# ---------------------------------------------------------------------------------------------- run
def run(ctx) -> dict:
    import sklearn

    from attsvm import svm
    from attsvm.data import Dataset
    from attsvm.experiments import call_each, corr_trajectory, gd_runs, stack, summary
    from attsvm.figures import band_stats
    from attsvm.realdata import nanmean_rows
    from attsvm.tolerances import tol

    s, o = ctx.size, ctx.options
    B, steps = ctx.seeds, int(s["steps"])
    T, npix = TOKENS[o["tokens"]]
    q = int(o["query"])
    images, labels = load_pair(o["pair"])
    Xall = tokenise(images, o["tokens"])
    n_all, _, d = Xall.shape
    sp = splits(n_all, float(s["train_frac"]), B)
    tr = np.stack([a for a, _ in sp])
    te = np.stack([b for _, b in sp])
    Xtr, Ytr, Xte, Yte = Xall[tr], labels[tr], Xall[te], labels[te]
    with ctx.timed("head"):
        v = np.stack([fit_head(Xtr[b], Ytr[b]) for b in range(B)])
    ds = Dataset(Xtr, Ytr, None, v, kind="self", query_index=q)
    n = ds.n
    gam = np.asarray(ds.scores)  # (B, n, T)
    proj = np.stack([np.linalg.pinv(ds.Z[b]) @ ds.Z[b] for b in range(B)])  # P_Z, onto span{z_i}
    zero = np.zeros((B, d, d))
    out: dict[str, Any] = {
        "settings": dict(
            s, pair=o["pair"], tokens=o["tokens"], query=q, T=T, d=d, n_images=n_all, n_train=n, n_test=te.shape[1],
            init=o["init"], algo="ngd", lr=0.1, loss="logistic", grad_eps=o["grad_eps"], ridge_KQ=o["ridge"],
            normalize_KQ=o["normalize"], m=d, head="sklearn LogisticRegression(C=1, no intercept) on the tokens",
            sklearn=sklearn.__version__, split_seeds=f"0..{B - 1}", gd_seed=1,
        ),
        "baseline": {
            "uniform_train_acc": summary(accuracy(Xtr, Ytr, v, zero, q)),
            "uniform_test_acc": summary(accuracy(Xte, Yte, v, zero, q)),
        },
    }  # fmt: skip
    with ctx.timed("svm opt feasibility"):
        opt_feasible = [bool(svm.feasibility(ds[b])[0]) for b in range(B)]
    out["opt"] = {
        "feasible": int(sum(opt_feasible)),
        "runs": B,
        "constraints": n * (T - 1),
        "params": d * d,
        "rank_Z": int(np.max([np.linalg.matrix_rank(ds.Z[b]) for b in range(B)])),
    }

    ctx.progress.note(f"normalised GD on W and (K,Q): {B} runs x {steps} steps, n = {n} images, T = {T}, d = {d}")
    common = dict(algo="ngd", lr=0.1, steps=steps, m=d, init=o["init"], seed=1, grad_eps=o["grad_eps"])
    common.update(record_every=int(s["record_every"]), record_params=True)
    jobs = [dict(ds=ds, param="W", **common)]
    jobs.append(dict(ds=ds, param="KQ", ridge=o["ridge"], normalize=o["normalize"], **common))
    runs = dict(zip(PARAMS, gd_runs(ctx, jobs, "gd")))

    # local optimality of the selection at every recorded step (Frobenius solves, float support decision)
    sel_traj = {p: np.asarray(runs[p].trajectory["selection"]) for p in PARAMS}  # (R, B, n)
    R = sel_traj["W"].shape[0]
    work = [((ds[b], sel_traj[p][k, b]), {}) for p in PARAMS for k in range(R) for b in range(B)]
    loc = call_each(ctx, "attsvm.svm:solve_fro", work, "local optimality (trajectory)")
    loc_grid = {p: np.full((R, B), np.nan) for p in PARAMS}  # NaN: the solver failed (counted, not a value)
    feas_grid = {p: np.full((R, B), np.nan) for p in PARAMS}
    for j, r in enumerate(loc):
        p, k, b = PARAMS[j // (R * B)], (j // B) % R, j % B
        if isinstance(r, dict) and r.get("status") in ("optimal", "infeasible"):
            ok = r["status"] == "optimal"
            feas_grid[p][k, b] = float(ok)
            loc_grid[p][k, b] = float(ok and bool(r.get("locally_optimal")))

    # the SVMs of the final selections: Frobenius with an exact certificate, nuclear for (K,Q)
    finals = {p: np.asarray(runs[p].selection) for p in PARAMS}
    fro = {
        p: call_each(
            ctx, "attsvm.svm:solve_fro", [((ds[b], finals[p][b]), {"certify": True}) for b in range(B)], f"svm fro {p}"
        )
        for p in PARAMS
    }
    nuc = call_each(
        ctx,
        "attsvm.svm:solve",
        [((ds[b], finals["KQ"][b]), {"norm": "nuc", "certify": True}) for b in range(B)],
        "svm nuclear",
    )
    for p in PARAMS:
        r = runs[p]
        traj = r.trajectory
        step = np.asarray(traj["step"])
        Wt = np.asarray(traj["W"])  # (R, B, d, d)
        Wfro, ok_fro = stack(fro[p], (d, d))
        target, ok_t = (Wfro, ok_fro) if p == "W" else stack(nuc, (d, d))
        corr = corr_trajectory(Wt, target)
        _, lo_tr = attention(Xtr[None], Wt, q)  # (R, B, n) log10(1 - max_t s_it)
        sat = 10.0**lo_tr
        acc_tr = accuracy(Xtr[None], Ytr[None], v[None], Wt, q)  # (R, B)
        acc_te = accuracy(Xte[None], Yte[None], v[None], Wt, q)
        lo_final = lo_tr[-1]
        alpha = finals[p]
        g_sel = np.take_along_axis(gam, alpha[..., None], axis=-1)[..., 0]
        certs = [x.get("certificate", {}) if isinstance(x, dict) else {} for x in fro[p]]
        lo_flags = [bool(x.get("locally_optimal")) if isinstance(x, dict) else False for x in fro[p]]
        sv = np.linalg.svd(np.asarray(r.W), compute_uv=False)
        rank_final = np.sum(sv > tol("rank") * sv[:, :1], axis=1)
        svz = np.linalg.svd(np.asarray(r.W) @ proj, compute_uv=False)  # W_k P_Z: the part GD moves
        rank_span = np.sum(svz > tol("rank") * svz[:, :1], axis=1)
        with np.errstate(invalid="ignore"):
            svt = np.linalg.svd(np.nan_to_num(target), compute_uv=False)
        rank_t = np.where(ok_t, np.sum(svt > tol("rank") * svt[:, :1], axis=1), -1)
        res_p: dict[str, Any] = {
            "runs": B,
            "svm_feasible": int(ok_t.sum()),
            "fro_feasible": int(ok_fro.sum()),
            "certified": int(sum(bool(c.get("verified")) for c in certs)),
            "certificate_kinds": sorted({str(c.get("kind")) for c in certs if c}),
            "support_size": [int(c["support_size"]) if "support_size" in c else None for c in certs],
            "locally_optimal": lo_flags,
            "frac_locally_optimal": float(np.mean(lo_flags)),
            "frac_alpha_is_opt": summary(np.mean(alpha == np.asarray(ds.opt), axis=-1)),
            "frac_selected_votes_true_class": summary(np.mean(g_sel > 0, axis=-1)),
            "final_corr": summary(corr[-1]),
            "final_corr_runs": corr[-1],
            "final_norm": summary(np.asarray(r.norm)),
            "final_rank": summary(rank_final),
            "final_rank_on_span": summary(rank_span),
            "svm_rank": summary(rank_t[ok_t]) if ok_t.any() else summary([]),
            "final_max_softmax_mean": float(np.mean(1.0 - sat[-1])),
            "final_one_minus_max_s": {
                "mean": float(np.mean(sat[-1])),
                "median": float(np.median(10.0 ** np.median(lo_final, axis=-1))),
                "q90": float(np.median(10.0 ** np.quantile(lo_final, 0.9, axis=-1))),
                "max": float(np.max(10.0 ** np.max(lo_final, axis=-1))),
                "note": "over the training images of each run; median/q90 of a run, then the median over runs; "
                "max over all",
            },
            "final_train_acc": summary(acc_tr[-1]),
            "final_test_acc": summary(acc_te[-1]),
            "stop_reasons": sorted({str(x) for x in np.atleast_1d(r.stop_reason)}),
            "selected_tokens": np.bincount(alpha.ravel(), minlength=T),
            "curves": {
                "step": step,
                "one_minus_corr": band_stats(1.0 - corr, log=True),
                "saturation": band_stats(np.mean(sat, axis=-1), log=True),
                "saturation_worst": band_stats(np.max(sat, axis=-1), log=True),
                "train_acc": band_stats(acc_tr),
                "test_acc": band_stats(acc_te),
                "frac_locally_optimal": nanmean_rows(loc_grid[p]),
                "frac_feasible": nanmean_rows(feas_grid[p]),
                "solver_errors": np.sum(np.isnan(loc_grid[p]), axis=1),
            },
        }
        if p == "KQ":
            cf = corr_trajectory(Wt, Wfro)
            res_p["final_corr_fro"] = summary(cf[-1])
            res_p["final_corr_fro_runs"] = cf[-1]
            both = np.isfinite(corr[-1]) & np.isfinite(cf[-1])  # runs with both SVMs solved
            res_p["paired_runs"] = int(both.sum())
            res_p["nuclear_closer_runs"] = int(np.sum(corr[-1][both] > cf[-1][both]))
            res_p["paired_corr_gain"] = summary(corr[-1][both] - cf[-1][both])
            res_p["curves"]["one_minus_corr_fro"] = band_stats(1.0 - cf, log=True)
            nc = [x.get("certificate", {}) if isinstance(x, dict) else {} for x in nuc]
            res_p["nuclear_certified"] = int(sum(bool(c.get("verified")) for c in nc))
            res_p["nuclear_solver_errors"] = int(
                sum(isinstance(x, dict) and x.get("status") == "solver-error" for x in nuc)
            )
            K, Q = np.asarray(r.K), np.asarray(r.Q)
            half = 0.5 * (np.sum(K**2, axis=(1, 2)) + np.sum(Q**2, axis=(1, 2)))
            res_p["final_balance_mean"] = float(np.mean(half / np.linalg.norm(np.asarray(r.W), "nuc", axis=(1, 2))))
        out[p] = res_p

    # the image panel: a few test images of run 0 and the token each model attends to
    pick = np.concatenate([np.flatnonzero(Yte[0] > 0)[: SHOW // 2], np.flatnonzero(Yte[0] < 0)[: SHOW - SHOW // 2]])
    a, b = (int(c) for c in o["pair"].split("-"))
    shown: dict[str, Any] = {"images": images[te[0][pick]], "label": [a if y > 0 else b for y in Yte[0][pick]]}
    for p in PARAMS:
        Wf = np.asarray(runs[p].W)[0]
        logs, lo = attention(Xte[0][pick], Wf, q)
        f = np.einsum("nt,ntd,d->n", np.exp(logs), Xte[0][pick], v[0])
        shown[p] = {
            "selected": np.argmax(logs, axis=-1),
            "max_softmax": np.exp(np.max(logs, axis=-1)),
            "predicted": [a if x > 0 else b for x in f],
        }
    out["shown"] = shown
    return out


# ---------------------------------------------------------------------------------------------- figure
def plot(res: dict):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    from attsvm.figures import COLORS, TEXT_IN, band, image_panel, new_canvas

    s = res["settings"]
    fig = new_canvas(TEXT_IN, 7.4)
    outer = fig.add_gridspec(2, 1, height_ratios=[4.6, 1.55])
    top = outer[0].subgridspec(2, 2)
    ax = [fig.add_subplot(top[i, j]) for i in range(2) for j in range(2)]
    lab = {"W": "GD on $W$", "KQ": "GD on $(K,Q)$"}
    for p in PARAMS:
        cur, c = res[p]["curves"], COLORS[p]
        band(ax[0], cur["step"], cur["one_minus_corr"], color=c, logy=True, label=lab[p])
        band(ax[1], cur["step"], cur["saturation"], color=c, logy=True)
        band(ax[1], cur["step"], cur["saturation_worst"], color=c, logy=True, linestyle=":")
        band(ax[2], cur["step"], cur["test_acc"], color=c)
        band(ax[2], cur["step"], cur["train_acc"], color=c, linestyle="--")
        wide = p == "W"  # drawn under the (K,Q) line, which it would otherwise hide
        ax[3].plot(cur["step"], cur["frac_locally_optimal"], color=c, marker="o" if wide else "s",
                   lw=3.2 if wide else 1.3, ms=6 if wide else 3.5, alpha=0.7 if wide else 1.0)  # fmt: skip
    kq = res["KQ"]["curves"]
    band(ax[0], kq["step"], kq["one_minus_corr_fro"], color=COLORS["KQ"], logy=True, linestyle=":")
    base = res["baseline"]["uniform_test_acc"]["mean"]
    if base is not None:
        ax[2].axhline(base, color=COLORS["reference"], linestyle="-.", linewidth=1.0)
    ax[0].set(xlabel="iteration $k$", ylabel=r"$1-\mathrm{corr}$", title=r"distance to the SVM of the final $\alpha$")
    ax[1].set(xlabel="iteration $k$", ylabel=r"$1-\max_t s_{it}$", title="softmax saturation (training images)")
    ax[2].set(xlabel="iteration $k$", ylabel="accuracy", title="accuracy of the attention model")
    ax[2].set_ylim(min(0.4, (base or 0.4) - 0.05), 1.02)
    ax[3].set(xlabel="iteration $k$", ylabel="fraction of runs", title=r"$\alpha^{(k)}$ locally optimal")
    ax[3].set_ylim(-0.05, 1.05)
    # the image panel
    sh = res["shown"]
    bottom = outer[1].subgridspec(1, len(sh["images"]))
    for j, im in enumerate(sh["images"]):
        a = fig.add_subplot(bottom[0, j])
        image_panel(a, im, cmap="gray_r", vmin=0, vmax=1)
        x0, y0, w, h = token_box(s["tokens"], s["query"])
        a.add_patch(Rectangle((x0, y0), w, h, fill=False, edgecolor=COLORS["reference"], linestyle="--", lw=1.2))
        for p, inset in (("W", 0.0), ("KQ", 0.18)):
            x0, y0, w, h = token_box(s["tokens"], sh[p]["selected"][j])
            a.add_patch(
                Rectangle(
                    (x0 + inset, y0 + inset), w - 2 * inset, h - 2 * inset, fill=False, edgecolor=COLORS[p], lw=1.8
                )
            )
        a.set_title(f"{sh['label'][j]}: W {sh['W']['predicted'][j]}, KQ {sh['KQ']['predicted'][j]}", fontsize=8)
    grey = COLORS["reference"]
    handles = [
        Line2D([], [], color=COLORS["W"], label=lab["W"]),
        Line2D([], [], color=COLORS["KQ"], label=lab["KQ"]),
        Line2D([], [], color=COLORS["KQ"], linestyle=":", label=r"$(K,Q)$ vs Frobenius $W^{mm}_\alpha$"),
        Line2D([], [], color="0.3", linestyle=":", label="least saturated image"),
        Line2D([], [], color="0.3", linestyle="--", label="train (solid: test)"),
        Line2D([], [], color=grey, linestyle="-.", label="uniform attention, test"),
        Line2D([], [], color=grey, linestyle="--", label="query token (images)"),
    ]
    shade = (Patch(facecolor="0.5", alpha=0.25, linewidth=0), Line2D([], [], color="0.35"))
    labels = [h.get_label() for h in handles] + ["mean ± 1 s.d. over the seeds"]
    fig.legend([*handles, shade], labels, loc="outside lower center", ncols=4, fontsize=8, columnspacing=1.0)
    a_, b_ = s["pair"].split("-")
    fig.suptitle(
        f"Digits {a_} vs {b_}: {s['tokens']} tokens (T={s['T']}, d={s['d']}), query token {s['query']}, "
        f"{s['n_train']} training images, {res['W']['runs']} seeds, {s['steps']} steps\n"
        "images: test images of run 0, the token each model attends to; title: label: predictions"
    )
    return fig


# ---------------------------------------------------------------------------------------------- text
def _near1(x: float | None) -> str:
    if x is None:
        return "n/a"
    return "1" if x >= 1 else f"1 − {1 - x:.1e}" if x > 0.9999 else f"{x:.4f}"


def _pm(st: dict, digits: int = 3) -> str:
    if st.get("mean") is None:
        return "n/a"
    return f"{st['mean']:.{digits}f} ± {st['std']:.{digits}f} (min {st['min']:.{digits}f})"


def caption(res: dict) -> str:
    s, W, K, op, bl = res["settings"], res["W"], res["KQ"], res["opt"], res["baseline"]
    a, b = s["pair"].split("-")
    tok = (
        "2×2-pixel patches (T = 16), each the 4 pixels and a one-hot position code (d = 20)"
        if s["tokens"] == "patch"
        else "pixel rows (T = 8), each the 8 pixels and a one-hot row code (d = 16)"
    )
    ridge = s.get("ridge_KQ", 0.0)
    rtxt = (
        "no ridge" if not ridge else (r"ridge $2^{-52}(\|K\|_F^2+\|Q\|_F^2)$" if ridge == EPS else f"ridge {ridge:.3g}")
    )
    geps = s.get("grad_eps", 0.0)
    etxt = r"$\epsilon=2^{-52}$" if geps == EPS else f"$\\epsilon$ = {geps:.3g}"
    feas_opt = (
        f"Att-SVM(opt) — every image on its best-scoring token — is feasible in {op['feasible']} of {op['runs']} runs"
    )
    return (
        rf"scikit-learn's 8×8 digits, {a} (label +1) against {b} (−1): {s['n_images']} images, pixels / 16, split "
        rf"at random per run into {s['n_train']} training and {s['n_test']} test images. Tokens: {tok}; "
        rf"self-attention with query $z_i=x_{{iq}}$, q = {s['query']}; head $v$ fit first (L2 logistic regression "
        rf"of the image label on every token, scikit-learn {s['sklearn']}) and frozen, scores "
        rf"$\gamma_{{it}}=Y_iv^\top x_{{it}}$. {W['runs']} seeds (split, head and initialisation), normalised GD "
        rf"$\theta\leftarrow\theta-\eta g/(\|{{g}}\|+\epsilon)$, $\eta$ = {s['lr']}, {etxt}, nn.Linear "
        rf"initialisation, {s['steps']} steps on $W$ (blue) and on $(K,Q)$, $m=d$ (vermillion; "
        rf"{s.get('normalize_KQ', 'per-factor')} normalisation, {rtxt}), recorded every {s['record_every']} steps. "
        rf"$\alpha$ = the selection ($\arg\max_ts_{{it}}$ per training image) each run ends on. Top left: "
        rf"$1-\mathrm{{corr}}(W_k,W^{{mm}}_\alpha)$ and $1-\mathrm{{corr}}(K_kQ_k^\top,W^{{mm}}_{{\star,\alpha}})$ "
        rf"(dotted: $(K,Q)$ against the Frobenius $W^{{mm}}_\alpha$); top right: $1-\max_ts_{{it}}$, mean over the "
        rf"training images (dotted: the least saturated image), computed in the log domain; bottom left: test "
        rf"(solid) and train (dashed) accuracy of $\mathrm{{sign}}\,f$, dash-dot: uniform attention ($W=0$) on the "
        rf"test images; lines mean over the seeds, shades ± 1 s.d. (×/÷ one geometric s.d. on log axes); bottom "
        rf"right: the fraction of runs whose current selection $\alpha^{{(k)}}$ is locally optimal (Frobenius "
        rf"Att-SVM, support within the active tolerance{_traj_errors(res)}). Images: test images of run 0, dashed "
        rf"grey the query token, blue / vermillion (inner) the token each model attends to most. "
        rf"**Found.** The training set has n(T−1) = {op['constraints']} Att-SVM constraints against d² = "
        rf"{op['params']} entries of $W$ (rank of the queries {op['rank_Z']}); {feas_opt}. The selection "
        rf"GD ends on is feasible in {W['fro_feasible']} / {K['fro_feasible']} of {W['runs']} runs ($W$ / $(K,Q)$), "
        rf"with an exact rational certificate in {W['certified']} / {K['certified']}, and locally optimal (exact "
        rf"support) in {W['frac_locally_optimal']:.0%} / {K['frac_locally_optimal']:.0%}. It attends mostly to "
        rf"tokens {_top(W['selected_tokens'])}; the selected token equals opt for {W['frac_alpha_is_opt']['mean']:.0%} "
        rf"of the training images and votes for the true class for "
        rf"{W['frac_selected_votes_true_class']['mean']:.0%} ($W$). Final $\mathrm{{corr}}(W_k,W^{{mm}}_\alpha)$ "
        rf"{_pm(W['final_corr'], 4)}; $\mathrm{{corr}}(K_kQ_k^\top,W^{{mm}}_{{\star,\alpha}})$ "
        rf"{_pm(K['final_corr'], 4)} over the {K['svm_feasible']} runs whose nuclear SVM was solved "
        rf"({K['nuclear_certified']} with a proved duality gap; {K['nuclear_solver_errors']} solver failures, not "
        rf"used), against {_pm(K['final_corr_fro'], 4)} with the Frobenius $W^{{mm}}_\alpha$ (all runs): on the "
        rf"{K['paired_runs']} runs with both, $K_kQ_k^\top$ is closer to the nuclear SVM in "
        rf"{K['nuclear_closer_runs']}. "
        rf"Saturation at the end: mean $1-\max_ts_{{it}}$ {W['final_one_minus_max_s']['mean']:.1e} / "
        rf"{K['final_one_minus_max_s']['mean']:.1e}, median image {W['final_one_minus_max_s']['median']:.1e} / "
        rf"{K['final_one_minus_max_s']['median']:.1e}, least saturated image {W['final_one_minus_max_s']['max']:.1e} "
        rf"/ {K['final_one_minus_max_s']['max']:.1e}. Test accuracy {_pm(W['final_test_acc'])} / "
        rf"{_pm(K['final_test_acc'])} (train {W['final_train_acc']['mean']:.3f} / "
        rf"{K['final_train_acc']['mean']:.3f}) against {bl['uniform_test_acc']['mean']:.3f} with uniform attention. "
        rf"Mean ranks (tolerance $10^{{-7}}$): $W^{{mm}}_\alpha$ {_num(W['svm_rank']['mean'])}, "
        rf"$W^{{mm}}_{{\star,\alpha}}$ {_num(K['svm_rank']['mean'])}; final $W_kP_Z$ "
        rf"{_num(W['final_rank_on_span']['mean'])} and $K_kQ_k^\top P_Z$ {_num(K['final_rank_on_span']['mean'])} "
        rf"($P_Z$ the projector onto $\mathrm{{span}}\{{z_i\}}$; the full $W_k$, of mean rank "
        rf"{_num(W['final_rank']['mean'])}, keeps the part of its initialisation outside that span, which GD never "
        rf"moves)."
    )


def _traj_errors(res: dict) -> str:
    n = {p: int(np.sum(res[p]["curves"].get("solver_errors", [0]))) for p in PARAMS}
    if not any(n.values()):
        return ""
    return f"; {n['W']} / {n['KQ']} of these solves failed, left out of the fractions"


def _top(counts: list[int], k: int = 2) -> str:
    c = np.asarray(counts, dtype=float)
    idx = np.argsort(-c)[:k]
    tot = max(c.sum(), 1.0)
    return " and ".join(f"{int(i)} ({c[i] / tot:.0%})" for i in idx if c[i] > 0)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def check(res: dict) -> list[str]:
    from attsvm.figures import band_falls

    fails = []
    W, K = res["W"], res["KQ"]
    if not (W["final_corr"]["mean"] or 0) >= 0.95:
        fails.append(f"W: mean final corr with W^mm_alpha {W['final_corr']['mean']} < 0.95")
    for p in PARAMS:  # the title's claim: the distance to the SVM of the final selection falls
        if not band_falls(res[p]["curves"]["one_minus_corr"]):
            fails.append(f"{p}: 1-corr does not fall over the run")
    if not W["frac_locally_optimal"] >= 0.5:
        fails.append(f"W: only {W['frac_locally_optimal']:.2f} of the final selections are locally optimal")
    gain = K["paired_corr_gain"]["mean"]  # corr with W^mm_* minus corr with W^mm, on the runs with both solved
    if gain is None or not gain > 0:
        fails.append(f"KQ: K Q^T not closer to W^mm_* than to the Frobenius W^mm (mean corr gain {gain})")
    base = res["baseline"]["uniform_test_acc"]["mean"]
    for p in PARAMS:
        if not res[p]["final_test_acc"]["mean"] > base:
            fails.append(f"{p}: test accuracy {res[p]['final_test_acc']['mean']} not above uniform attention's {base}")
    return fails
