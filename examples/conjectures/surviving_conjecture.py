r"""A conjecture that survives ``attsvm check``: *the descent lemma with the smoothness constant* $L_W$.

.. math:: \eta=1/L_W,\ W_1=W-\eta\nabla\mathcal L(W)\quad\Longrightarrow\quad
          \mathcal L(W_1)\le\mathcal L(W)-\tfrac\eta2\|\nabla\mathcal L(W)\|_F^2 .

It follows from ``smoothness-bound`` ($\|\nabla^2\mathcal L\|_2\le L_W$), whose constant is reconstructed —
so a refutation here would be news about that constant too. Run::

    attsvm check examples/conjectures/surviving_conjecture.py

The verdict is ``verified`` (no confirmed counterexample within the budget). A float64 failure would be
re-evaluated at 50 digits before anything is called refuted.
"""

import mpmath
import numpy as np

from attsvm import model
from attsvm.claims import Outcome, claim


@claim(
    id="descent-lemma-LW",
    title="A GD step with eta = 1/L_W decreases the loss by at least (eta/2)||grad||^2",
    origin="derived",
    source="examples/conjectures (a worked example)",
    hypotheses={"data": "paper", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"loss": "logistic"},
    depends=("smoothness-bound",),
)
def descent_lemma(case):
    ds, loss = case.data, case.hypotheses["loss"]
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    eta = 1.0 / float(model.smoothness_constant(ds, loss))
    G = model.grad_W(ds, W, loss)
    drop = float(model.loss(ds, W, loss) - model.loss(ds, W - eta * G, loss))
    need = 0.5 * eta * float(np.sum(G * G))
    scale = max(need, 1e-300)
    return Outcome(ok=drop >= need, margin=(drop - need) / scale, detail={"drop": drop, "bound": need})


@descent_lemma.confirm
def _(case, outcome):
    from attsvm import highprec as hp

    ds, loss = case.data, case.hypotheses["loss"]
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)  # the same matrix (the case replays its draws)
    with mpmath.workdps(50):
        eta = 1 / hp.smoothness_constant(ds)
        G = hp.grad_W(ds, W, loss)
        W1 = [[mpmath.mpf(W[j][k]) - eta * G[j][k] for k in range(ds.d)] for j in range(ds.d)]
        drop = hp.loss(ds, W, loss) - hp.loss(ds, W1, loss)
        need = eta / 2 * mpmath.fsum(g * g for row in G for g in row)
        return Outcome(ok=drop >= need, margin=float(drop - need), detail={"drop": mpmath.nstr(drop, 30)})
