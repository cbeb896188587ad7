r"""Batched gradient descent on attention (THEORY §1 algorithms, §5 numerical traps), in torch.

Main entry point::

    from attsvm import gd
    res = gd.run(ds, param="W", algo="ngd", lr=0.1, steps=2000)      # ds single or batched
    res.W            # (B,d,d) final iterates;  res.stop_reason  # ["steps", ...]

* :func:`run` / :class:`GDResult` — the engine (:mod:`.engine`, :mod:`.result`): parametrisations ``W``, ``KQ``,
  ``p``, ``vp``, ``diag``, ``heads`` and the two-layer ``twolayer`` ($W_1$, $W_2$; :mod:`attsvm.twolayer`)
  (``PARAMS``); the declared algorithms (``ALGORITHMS``, one module each in :mod:`.algos`)
  ``gd``, ``ngd`` (direction in the log domain, runs far past underflow), ``md`` ($\ell_q$ mirror descent),
  ``nsd`` (normalised steepest descent in a norm of ``NORMS``: ``fro``, ``linf``, ``l1``, ``spec``, ``lq``;
  THEORY §6), ``adam`` (bias-corrected, scale-safe moments), ``nmd`` (normalised $\ell_q$ mirror descent),
  ``signum`` (sign descent with momentum), ``muon`` (momentum with the exact polar step), each with a step
  schedule (``SCHEDULES``: ``constant``, ``rsqrt``) and deterministic cyclic mini-batches (``minibatch``: the
  step on $\frac1b\sum_{i\in B_k}\ell_i$, records and stops on the full data); how the steps are taken is
  :class:`Settings` (:func:`settings_of`, :mod:`.spec`; ``GDResult.settings``); nonlinear heads; stop
  rules (``STOP_REASONS``: ``steps``, ``underflow``, ``target_corr``, ``non-finite`` — an overflow freezes the
  run at its last finite iterate); trajectories.
* :func:`steepest_direction` — $\arg\max_{\|\Delta\|\le1}\langle G,\Delta\rangle$ per data set (:mod:`.steepest`).
* scale safety (:mod:`.numerics`): exact power-of-two rescaling of every gradient, scale-safe norms, and the
  up-front refusal (:func:`~attsvm.gd.ranges.check_ranges`) of runs whose scores, logits or parameters could
  leave float64.
* :func:`cone_init`, :func:`initial_params` — initial points (:mod:`.init`).
* :func:`regularization_path` / :class:`PathResult` — $\bar W_R\in\arg\min_{\|W\|\le R}\mathcal L$ (:mod:`.regpath`).
* :func:`fit_power`, :func:`fit_log_rate` — rates of recorded trajectories (:mod:`.trajectory`).
* stuck inputs and traps are a claims helper, :mod:`attsvm.claims.trap` (outside the engine).
* :func:`ngd_reference`, :func:`gd_reference`, :func:`log_gradient` — a numpy reference stepper on $W$, the
  engine's independent oracle in the tests (:mod:`.reference`).
* the same runs at 50 digits: :func:`attsvm.highprec.replay` — the independent check every parameterisation,
  algorithm, norm, schedule, loss and kernel declares where it is defined (``PARAM_CHECKS`` in :mod:`.init`,
  ``ALGO_CHECKS`` in :mod:`.algos`, :mod:`attsvm.registries`).
* torch closed forms (:mod:`.model_torch`): :func:`grad_W_torch`, :func:`grad_KQ_torch`, :func:`grad_p_torch`,
  :func:`grad_vp_torch`, :func:`loss_W_torch`, :func:`loss_p_torch`, :func:`token_weights_logdomain`, ...
"""

from importlib import import_module
from typing import Any

from .algos import ALGORITHMS, ALGOS
from .engine import KERNELS, run
from .init import PARAMS, cone_init, initial_params
from .options import NORMS, SCHEDULES
from .reference import gd_reference, log_gradient, ngd_reference
from .result import STOP_REASONS, GDResult
from .spec import Settings, settings_of
from .summary import SATURATED
from .trajectory import fit_log_rate, fit_power

# the names below live in modules that import torch: loaded on first use, so that ``from attsvm.gd import run`` and a
# run of the fused kernel never import torch
_LAZY = {
    **dict.fromkeys(
        (
            "TorchData",
            "corr_t",
            "grad_from_weights_p",
            "grad_from_weights_W",
            "grad_KQ_torch",
            "grad_p_torch",
            "grad_vp_torch",
            "grad_W_torch",
            "head_outputs",
            "log_softmax_t",
            "logits_p",
            "logits_W",
            "loss_p_torch",
            "loss_value_t",
            "loss_W_torch",
            "token_weights",
            "token_weights_logdomain",
            "token_weights_logdomain_pairwise",
        ),
        ".model_torch",
    ),
    "PathResult": ".regpath",
    "regularization_path": ".regpath",
    "steepest_direction": ".steepest",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'attsvm.gd' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name], __name__), "direction" if name == "steepest_direction" else name)
    globals()[name] = value
    return value


__all__ = [
    "ALGORITHMS",
    "ALGOS",
    "KERNELS",
    "GDResult",
    "NORMS",
    "PARAMS",
    "PathResult",
    "SATURATED",
    "SCHEDULES",
    "STOP_REASONS",
    "Settings",
    "TorchData",
    "cone_init",
    "corr_t",
    "fit_log_rate",
    "fit_power",
    "gd_reference",
    "grad_KQ_torch",
    "grad_W_torch",
    "grad_from_weights_W",
    "grad_from_weights_p",
    "grad_p_torch",
    "grad_vp_torch",
    "head_outputs",
    "initial_params",
    "log_softmax_t",
    "log_gradient",
    "logits_W",
    "logits_p",
    "loss_W_torch",
    "loss_p_torch",
    "loss_value_t",
    "ngd_reference",
    "regularization_path",
    "run",
    "settings_of",
    "steepest_direction",
    "token_weights",
    "token_weights_logdomain",
    "token_weights_logdomain_pairwise",
]
