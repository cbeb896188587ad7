r"""The model, small linear algebra and GD in ball arithmetic (python-flint ``arb``): the ``"ball"`` precision of
:mod:`attsvm.kit`, whose every helper returns a *rigorous enclosure* — a ball (or an ``object`` array of balls)
that contains the exact value of the definition at the given (exact) inputs — or raises
:class:`attsvm.kit.Undecidable`. A float64 failure whose margin ball lies strictly below 0 is refuted rigorously.
Mirrors :mod:`attsvm.highprec` (which is 50-digit mpmath, not rigorous)::

    from attsvm import kit
    from attsvm.ball import model
    D = kit.Kit("ball").data(ds)                 # X, Z, gamma, ... as exact balls
    G = model.grad_W(D, W, "logistic", 256)      # (d,d) balls containing the exact gradient at 256 bits
    run = kit.Kit("ball").gd(ds, algo="ngd", lr=0.1, steps=200)    # the enclosed replay (or Undecidable)

* :mod:`.numbers` — exact conversion (:func:`~.numbers.to_arb`: float64, ints, ``mpf``, rationals), the working
  precision (:func:`~.numbers.workprec`), elementwise functions, log-sum-exp;
* :mod:`.linalg` — $\|\cdot\|_F$, inner products, ``inv`` / ``solve`` / ``det``, enclosed eigenvalues and singular
  values (Weyl and Ostrowski bounds around an mpmath decomposition), ``svd`` for simple positive singular
  values, the row-space projector (exact rationals);
* :mod:`.model` — logits, softmax, $u$, losses, $\nabla_W$, $\nabla_{(K,Q)}$, the analytic Hessian, $L_W$,
  margins;
* :mod:`.jet` — forward-mode differentiation: a :class:`~.jet.Jet` encloses a function and its gradient over a
  box (:func:`~.jet.variables`); the helpers above take jets wherever they take balls (not the decompositions or
  GD), and :func:`~.jet.lower_bound` is the centred mean-value form of the branch-and-bound prover;
* :mod:`.heads` — the multi-head model (``param="heads"``): its gradients and a short ball replay of ``gd`` /
  ``ngd`` (per head or joint normalisation);
* :mod:`.twolayer` — the two-layer model (issue 30): forward pass, loss, closed-form gradients, proved
  selections, hard outputs and the margins of a layer's selection;
* :mod:`.gd` — :func:`~.gd.replay`: ``gd`` / ``ngd`` on $W$ and $(K,Q)$, ``nsd`` in ``fro`` / ``linf`` / ``l1``
  on $W$, by the centred (mean-value) form, with every decision proved and the radii watched.
"""

from . import gd, heads, jet, linalg, model, numbers, twolayer
from .gd import RAD_LIMIT, BallRun, replay
from .jet import Jet
from .numbers import PREC, is_ball, to_arb, workprec

__all__ = [
    "PREC",
    "RAD_LIMIT",
    "BallRun",
    "Jet",
    "gd",
    "heads",
    "is_ball",
    "jet",
    "linalg",
    "model",
    "numbers",
    "replay",
    "twolayer",
    "to_arb",
    "workprec",
]
