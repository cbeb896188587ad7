r"""A tempting conjecture that ``attsvm check`` refutes: *one gradient step from* $W_0=0$ *raises every
input's optimal-token probability.*

.. math:: W_1=-\eta\nabla\mathcal L(0)\quad\Longrightarrow\quad s_{i,\mathrm{opt}_i}(W_1)>\tfrac1T\ \text{for all } i.

At $W=0$ the softmax is uniform and $\nabla\mathcal L(0)=\frac1n\sum_i\ell'_i X_i^\top r_iz_i^\top$ with
$r_i=(\gamma_i-\bar\gamma_i)/T$: each input pulls $W$ towards its own optimal token, but through the shared
$W$ the pulls of the other inputs (and the geometry $X_iX_i^\top$ of its own tokens) can push an optimal
token's logit below the average. Run::

    attsvm check examples/conjectures/refuted_conjecture.py

The search shrinks a failing data set to the smallest sizes, the confirmer recomputes the step and the
probabilities at 50 digits (:mod:`attsvm.highprec`), and the verdict is ``refuted`` with the
counterexample saved under ``attsvm-counterexamples/``.
"""

import mpmath
import numpy as np

from attsvm import model
from attsvm.claims import Outcome, claim


@claim(
    id="first-step-raises-opt",
    title="One GD step from W=0 raises every optimal-token probability above 1/T",
    origin="expected-false",  # declared false: `attsvm check` exits 0 when it is refuted
    source="examples/conjectures (a worked example)",
    hypotheses={"data": "paper", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"lr": 0.1},
)
def first_step_raises_opt(case):
    ds, lr = case.data, case.hypotheses["lr"]
    W1 = -lr * model.grad_W(ds, np.zeros((ds.d, ds.d)))
    logp = model.log_softmax(np.einsum("ntd,de,ne->nt", ds.X, W1, ds.Z))
    gain = np.take_along_axis(logp, ds.opt[:, None], 1)[:, 0] + np.log(ds.T)  # log(T s_opt) > 0 ?
    worst = float(gain.min())
    return Outcome(ok=worst > 0, margin=worst, detail={"input": int(gain.argmin()), "log_T_s_opt": worst})


@first_step_raises_opt.confirm
def _(case, outcome):
    from attsvm import highprec as hp

    ds, lr = case.data, case.hypotheses["lr"]
    with mpmath.workdps(50):
        G = hp.grad_W(ds, np.zeros((ds.d, ds.d)))
        W1 = [[-mpmath.mpf(lr) * g for g in row] for row in G]
        s, _, _, _ = hp.outputs(ds, W1)
        worst = min(mpmath.log(ds.T * s[i][int(ds.opt[i])]) for i in range(ds.n))
        return Outcome(ok=worst > 0, margin=float(worst), detail={"log_T_s_opt": mpmath.nstr(worst, 30)})
