r"""A false conjecture written **once**: no ``confirm`` function, yet ``attsvm check`` refutes it with a confirmed
counterexample.

*Normalised GD from* $W_0=0$ *selects the optimal tokens:* after $k$ steps of
$W\leftarrow W-\eta\nabla\mathcal L(W)/\|\nabla\mathcal L(W)\|_F$, every input attends most to its optimal token,

.. math:: \arg\max_t\,[\mathbb S(X_iW_kz_i)]_t=\mathrm{opt}_i\quad\text{for all } i .

It is false: GD converges in direction to $W^{mm}_\alpha$ of a *locally* optimal selection $\alpha$, which need
not be opt (THEORY §3, local convergence). The conclusion computes through ``case.kit``; ``attsvm check`` runs it
in float64 while searching (the batched engine), and re-runs the very same function on the shrunk counterexample
with the high-precision kit — the 50-digit GD replay, then 100 digits to check that the margin is stable::

    attsvm check examples/conjectures/written_once.py

The margin is the smallest gap $\log s_{i,\mathrm{opt}_i}-\max_{t\ne\mathrm{opt}_i}\log s_{it}$ (> 0: opt wins).
"""

import numpy as np

from attsvm.claims import Outcome, claim


@claim(
    id="ngd-selects-opt",
    title="Normalised GD from W=0 makes every input attend most to its optimal token",
    origin="expected-false",  # declared false: `attsvm check` exits 0 when it is refuted (and confirmed)
    source="examples/conjectures (written once)",
    hypotheses={"data": "paper", "n": (1, 4), "T": (2, 4), "d": (2, 4)},
    params={"lr": 0.1, "steps": 200},
    ci_examples=60,
)
def ngd_selects_opt(case):
    k, ds, h = case.kit, case.data, case.hypotheses
    run = k.gd(ds, algo="ngd", lr=h["lr"], steps=h["steps"])
    logs = k.log_softmax(k.logits(ds, run.W))
    is_opt = np.arange(ds.T)[None, :] == ds.opt[:, None]
    s_opt = np.take_along_axis(logs, ds.opt[:, None], 1)[:, 0]
    rival = np.max(np.where(is_opt, -np.inf, logs), axis=1)
    gap = s_opt - rival
    worst = gap.min()
    return Outcome(ok=bool(worst > 0), margin=worst, detail={"input": int(np.argmin(gap)), "steps": run.steps})
