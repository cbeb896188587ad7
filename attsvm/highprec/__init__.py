r"""The model and gradient descent at high precision (mpmath, $\ge50$ digits), for confirming a failing check.

A float64 failure is not yet a counterexample (THEORY §5): a claim's confirmer re-evaluates the failing
computation with these functions. Inputs are float64 arrays taken as *exact* binary numbers, or exact rationals
(``"p/q"`` strings such as ``attsvm.svm.certify_fro(...)["W"]``); results are nested lists of ``mpf``
(:func:`to_numpy` rounds back). Written from the definitions, independently of the float64 code::

    from attsvm import highprec as hp
    G = hp.grad_W(ds, W)                                       # 50-digit gradient
    run = hp.replay(ds, W0, param="W", algo="ngd", lr=0.1, steps=2000, record_every=1000)
    run.final["W"], run.recorded                               # the float64 run, re-evaluated
    run = hp.replay(ds, W0, algo="nsd", norm="linf", lr=0.1, steps=300, schedule="rsqrt", record_every=1)
    run.agreement(res.trajectory["W"])      # a float64 run vs the replay, up to the first flipped sign / argmax
    pt = hp.path_point(ds, W_R, R)                             # a regularisation-path point, re-solved

* :mod:`.model` — logits, softmax, scores, losses, $\mathcal L$, the loss gap, $\nabla_W$, $\nabla_{(K,Q)}$,
  the diagonal factors ($\nabla_{(k,q)}$, :func:`grad_diag`), prompt attention ($\nabla_p$, $\nabla_{(v,p)}$),
  gradient shares, Hessians, $L_W$, small linear algebra;
* :mod:`.gd` — :func:`replay` (**the** high-precision replay of :func:`attsvm.gd.run`, of every (algorithm,
  parameterisation) the engine runs: ``gd``, ``ngd`` (per factor or ``normalize="joint"``), ``nsd`` in every norm
  of :data:`NORMS` (:func:`nsd_direction`), ``adam``, ``signum`` and ``muon`` on ``W`` / ``KQ`` / ``p`` / ``vp`` /
  ``diag``, ``md`` / ``nmd`` on ``W`` / ``p``; both step schedules of :data:`SCHEDULES` — each algorithm's update one
  function (``STEPS``), the independent check it declares, :data:`attsvm.gd.algos.ALGO_CHECKS`),
  :meth:`Replay.agreement` (a float64
  trajectory against the replay, up to the first update whose discrete decision float64 took differently), and
  :func:`path_point` / :func:`best_path_point` (Newton on the first-order conditions of
  $\min_{\|W\|\le R}\mathcal L$, or of the $(K,Q)$ ball).
"""

from .gd import (
    ALGOS,
    NORMS,
    PARAMS,
    SCHEDULES,
    Agreement,
    Direction,
    PathPoint,
    Replay,
    best_path_point,
    nsd_direction,
    path_point,
    replay,
    step_size,
)
from .model import (
    DPS,
    MP,
    HPData,
    as_mp,
    corr,
    cov,
    data,
    frob,
    grad_diag,
    grad_heads,
    grad_twolayer,
    loss_twolayer,
    twolayer_outputs,
    grad_KQ,
    grad_p,
    grad_vp,
    grad_W,
    gradient_shares,
    hessian,
    hessian_W,
    inner,
    log_one_minus_softmax,
    log_softmax,
    logits,
    loss,
    loss_derivative,
    loss_gap,
    loss_value,
    matmul,
    matvec,
    outputs,
    projector,
    prompt_outputs,
    rational,
    rationals,
    scores,
    signed_float,
    singular_values,
    smoothness_constant,
    softmax,
    sym_spectral_norm,
    to_numpy,
    transpose,
)

__all__ = [
    "ALGOS",
    "DPS",
    "MP",
    "NORMS",
    "PARAMS",
    "SCHEDULES",
    "Agreement",
    "Direction",
    "HPData",
    "PathPoint",
    "Replay",
    "as_mp",
    "best_path_point",
    "corr",
    "cov",
    "data",
    "frob",
    "grad_KQ",
    "grad_heads",
    "grad_twolayer",
    "loss_twolayer",
    "twolayer_outputs",
    "grad_W",
    "grad_diag",
    "grad_p",
    "grad_vp",
    "gradient_shares",
    "hessian",
    "hessian_W",
    "inner",
    "log_one_minus_softmax",
    "log_softmax",
    "logits",
    "loss",
    "loss_derivative",
    "loss_gap",
    "loss_value",
    "matmul",
    "matvec",
    "nsd_direction",
    "outputs",
    "path_point",
    "projector",
    "prompt_outputs",
    "rational",
    "rationals",
    "replay",
    "scores",
    "signed_float",
    "singular_values",
    "smoothness_constant",
    "softmax",
    "step_size",
    "sym_spectral_norm",
    "to_numpy",
    "transpose",
]
