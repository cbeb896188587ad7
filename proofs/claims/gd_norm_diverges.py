r"""``gd-norm-diverges`` (paper): GD with $\eta=1/L_W$ on data with Att-SVM(opt) feasible has
$\|W_k\|_F\to\infty$ and $\mathcal L(W_k)\to\mathcal L^\star=\frac1n\sum_i\ell(\gamma_{i,\mathrm{opt}_i})$.
Finite-horizon check (can fail): at the recorded steps $\|W_k\|_F$ strictly increases and the loss gap
$\mathcal L(W_k)-\mathcal L^\star$ strictly decreases (GD with $\eta\le1/L_W$ is a descent method, and by
``loss-infimum`` no finite $W$ attains $\mathcal L^\star$). The step is ``lr`` (default $1/L_W$; a test plants another)
(a number: then the statement's hypothesis $\eta\le1/L_W$ may fail — how the tests plant a real failure).
Confirmer: the run replayed at 50 digits, the loss gap computed there without cancellation.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="gd-norm-diverges",
    title="GD with eta = 1/L_W: ||W_k|| -> infinity, loss -> its infimum",
    origin="paper",
    source="2308.16898 (GD diverges in norm); THEORY §4",
    hypotheses={"data": "feasible", "n": (1, 4), "T": (2, 4), "d": (2, 4), "alpha": "opt"},
    params={"steps": 4000, "records": 8, "lr": "1/L"},
    depends=("smoothness-bound", "loss-infimum"),
    examples=20,
)
def gd_norm_diverges(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import loss, loss_value

    ds = _data(case)
    h = case.hypotheses
    steps = int(h["steps"])
    lr = h["lr"]
    r = gd.run(ds, param="W", algo="gd", lr=lr, steps=steps, record_every=_every(h), record_params=True)
    Ws = _pad(list(r.trajectory["W"][:, 0]), r.W[0], h)  # a run stopped on an exactly zero gradient stays put
    norm = np.linalg.norm(np.asarray(Ws), axis=(-2, -1))
    g = ds.scores
    inf = float(np.mean(loss_value(np.take_along_axis(g, ds.selection[:, None], -1)[:, 0])))
    gaps = np.array([float(loss(ds, W)) - inf for W in Ws])
    margin = min(
        float(np.diff(norm).min()) / max(1.0, float(norm[-1])), float(-np.diff(gaps).max()) / max(gaps[0], 1e-300)
    )
    ok = margin > 0  # strictly increasing / decreasing: a zero change fails
    return Outcome(
        ok=ok,
        margin=margin if ok or margin < 0 else -5e-324,
        detail={"norm": norm.tolist(), "loss_gap": gaps.tolist(), "stopped": r.stop_reason[0]},
    )


def _data(case):
    import numpy as np

    d = case.data
    return d.with_alpha(None) if d.alpha is not None and np.all(d.alpha == d.opt) else d


def _every(h) -> int:
    return max(1, int(h["steps"]) // int(h["records"]))


def _pad(Ws: list, last, h) -> list:
    """The iterates at steps 0, every, 2 every, ... <= steps; after an exact stop they all equal the last one."""
    return Ws + [last] * (int(h["steps"]) // _every(h) + 1 - len(Ws))


@gd_norm_diverges.confirm
def _confirm(case, outcome):
    r"""The run replayed at 50 digits (:func:`attsvm.highprec.replay`, $\eta=1/L_W$ with $L_W$ at 50 digits, from
    $W_0=0$); $\|W_k\|_F$ and the loss gap $\mathcal L(W_k)-\mathcal L^\star$ (computed without cancellation,
    :func:`attsvm.highprec.loss_gap`) at the same recorded steps; the margin recomputed from them."""
    import mpmath as mp
    import numpy as np

    from attsvm import highprec as hp

    ds = _data(case)
    h = case.hypotheses
    with mp.workdps(hp.DPS):
        D = hp.data(ds)
        W0 = np.zeros((ds.d, ds.d))
        lr = h["lr"]
        run = hp.replay(D, W0, param="W", algo="gd", lr=lr, steps=int(h["steps"]), record_every=_every(h))
        Ws = _pad([th["W"] for th in run.recorded], run.final["W"], h)
        norm = [hp.frob(W) for W in Ws]
        gaps = [hp.loss_gap(D, W, alpha=ds.selection) for W in Ws]
        dn = min(norm[k + 1] - norm[k] for k in range(len(norm) - 1))
        dl = max(gaps[k + 1] - gaps[k] for k in range(len(gaps) - 1))
        m = min(dn / max(mp.mpf(1), norm[-1]), -dl / gaps[0])
    margin = hp.signed_float(m)
    ok = m > 0
    detail = {"norm": [float(x) for x in norm], "loss_gap": [float(x) for x in gaps], "steps_taken": run.taken}
    return Outcome(ok=ok, margin=margin if ok or margin < 0 else -5e-324, detail=detail)
