r"""What an algorithm of the GD engine declares (:class:`Algorithm`) and the options algorithms read (:data:`OPTIONS`).

The algorithms themselves are the modules of :mod:`attsvm.gd.algos`, one per algorithm, each declaring one
:class:`Algorithm`.

An algorithm module (``gd``, ``ngd``, ``md``, ``nsd``, ``nmd``, ``adam``, ``signum``, ``muon``) holds, next to each
other, everything the engine needs to know about it:

* its name, title and defining equation (``attsvm gd --help`` and docs/gd.md are written from them);
* the :data:`OPTIONS` it reads (the settings fields besides ``schedule`` and ``ridge``, which every algorithm takes)
  and its rules between them (:attr:`Algorithm.rules`, e.g. ``nsd`` needs ``norm``; ``q`` with ``norm="lq"`` only);
* the parameterisations it runs on (default :data:`attsvm.gd.init.SINGLE_HEAD_PARAMS`; ``gd`` and ``ngd`` also run
  the multi-head ``heads``: :data:`attsvm.gd.init.PARAMS`);
* its optimizer state and its torch step (imported lazily: a module of this package imports no torch at import
  time, so listing, validating and replaying never load torch);
* its step bound $c$, $\|\theta_{k+1}-\theta_k\|_F\le c\,\eta_k$ per factor, for the up-front range check
  (:func:`~attsvm.gd.ranges.check_ranges`), or ``None`` (no a-priori bound);
* whether the fused CPU kernel (:mod:`attsvm.gd.fused`) computes it;
* ``replay``: the ``"module:function"`` of its **independently written 50-digit step** in :mod:`attsvm.highprec.gd`.

An :class:`Algorithm` without a replay step is a ``TypeError`` at import; ``property_tests/test_registries.py``
resolves and runs every declared replay (:data:`attsvm.gd.algos.ALGO_CHECKS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..registries import Check
from .init import PARAMS, SINGLE_HEAD_PARAMS
from .options import NORMALIZE, NORMS

__all__ = ["OPTIONS", "Algorithm", "Option", "finite_number"]


def finite_number(x: Any) -> bool:
    """A finite real number (not a bool)."""
    return isinstance(x, int | float | np.number) and not isinstance(x, bool) and bool(np.isfinite(x))


def _q(x: Any) -> float | None:
    if x is None:
        return None
    if not finite_number(x) or not float(x) > 1.0:
        raise InputError(f"q must be a finite number > 1, got {x!r}")
    return float(x)


def _normalize(x: Any) -> str:
    if x not in NORMALIZE:
        raise InputError(f"normalize must be one of {NORMALIZE}, got {x!r}")
    return str(x)


def _nonneg(name: str) -> Callable[[Any], float]:
    def parse(x: Any) -> float:
        if not finite_number(x) or x < 0:
            raise InputError(f"{name} must be a finite non-negative number, got {x!r}")
        return float(x)

    return parse


def _norm(x: Any) -> str | None:
    if x is not None and x not in NORMS:
        raise InputError(f"norm must be one of {NORMS}, got {x!r}")
    return x


def _betas(x: Any) -> tuple[float, float]:
    if isinstance(x, str):  # "B1,B2" (the CLI)
        x = x.split(",")
        if len(x) != 2:
            raise InputError(f"adam_betas must be two numbers B1,B2, got {','.join(x)!r}")
    try:
        b1, b2 = (float(v) for v in x)
    except (TypeError, ValueError) as exc:
        raise InputError(f"adam_betas must be a pair of numbers (beta1, beta2), got {x!r}") from exc
    if not (math.isfinite(b1) and math.isfinite(b2) and 0.0 <= b1 and 0.0 < b2 < 1.0 and b1 * b1 < b2):
        raise InputError(f"adam_betas must satisfy 0 <= beta1 < sqrt(beta2) < 1, got {x!r}")
    return (b1, b2)


def _momentum(x: Any) -> float:
    if not finite_number(x) or not 0.0 <= float(x) < 1.0:
        raise InputError(f"momentum must be a number in [0, 1), got {x!r}")
    return float(x)


@dataclass(frozen=True)
class Option:
    """A setting some algorithms read: its :class:`~attsvm.gd.spec.Settings` field ``name``, ``default`` (the value
    every other algorithm must leave it at), ``parse`` (validate and normalise a given value,
    :class:`~attsvm.errors.InputError` naming it), the CLI ``flag``, one line of ``help``, and on the command line
    its ``choices`` or the ``text`` conversion of its argument, with ``metavar``."""

    name: str
    default: Any
    parse: Callable[[Any], Any]
    flag: str
    help: str
    choices: tuple[str, ...] = ()
    text: Callable[[str], Any] = float
    metavar: str | None = None


#: every algorithm-specific option, by :class:`~attsvm.gd.spec.Settings` field
OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        Option(
            "norm",
            None,
            _norm,
            "--norm",
            "the norm of the steepest direction: fro G/||G||_F (= ngd), linf sign(G) (entrywise), l1 the "
            "largest-magnitude entry (exact ties share the step evenly), spec U V^T of the reduced SVD (nonzero "
            "singular directions only), lq sign(G)|G|^(q*-1)/||G||_q*^(q*-1) (needs --q); required by nsd",
            choices=NORMS,
        ),
        Option(
            "q",
            None,
            _q,
            "--q",
            "q > 1: exponent of the mirror-descent potential ||W||_q^q/q (md, nmd; required) or of the l_q norm "
            "(nsd --norm lq)",
        ),
        Option(
            "normalize",
            "per-factor",
            _normalize,
            "--normalize",
            "with several factors (KQ, vp, diag): normalise each factor's gradient (the paper's code) or the whole "
            "gradient (g_K, g_Q)/||(g_K, g_Q)||",
            choices=NORMALIZE,
        ),
        Option(
            "grad_eps",
            0.0,
            _nonneg("grad_eps"),
            "--grad-eps",
            "step eta g/(||g|| + EPS), the authors' normaliser (their EPS is 2.220446049250313e-16; 0: exactly "
            "g/||g||)",
            metavar="EPS",
        ),
        Option(
            "adam_betas",
            (0.9, 0.999),
            _betas,
            "--adam-betas",
            "the moment decay rates, 0 <= B1 < sqrt(B2) < 1",
            text=str,
            metavar="B1,B2",
        ),
        Option(
            "adam_eps",
            0.0,
            _nonneg("adam_eps"),
            "--adam-eps",
            "step lr m_hat/(sqrt(v_hat) + EPS); 0 is the algorithm of the theory (the moments are kept on a running "
            "log-scale, so tiny gradients never give 0/0); torch.optim.Adam uses 1e-8",
            metavar="EPS",
        ),
        Option(
            "momentum",
            0.9,
            _momentum,
            "--momentum",
            "the momentum B in [0, 1) of the averaged gradient m_k = B m_k-1 + (1-B) g_k",
            metavar="B",
        ),
    )
}


@dataclass(frozen=True)
class Algorithm:
    r"""One algorithm of the engine (module docstring). ``step(S, P, th, fw, lr_k, state, k)`` (torch) returns the
    proposed next iterate, the next optimizer state and the (B,) bool "fixed point" flag (the ``underflow`` stop);
    ``initial_state(S, th)`` the state at $\theta_0$ (``None`` for a stateless algorithm); ``step_bound(shape, S,
    steps)`` the constant $c$ or ``None``; ``rules(S_values, param)`` the checks between options (after each option
    was parsed), raising :class:`~attsvm.errors.InputError`; ``log_domain``: the step needs only the direction of
    the gradient (taken in the log domain, far past underflow) rather than its float value; ``mirror``: the iterate
    is the mirror image of a dual iterate (the range check bounds the dual)."""

    name: str
    title: str
    equation: str
    replay: str
    step: Callable[..., Any]
    step_bound: Callable[..., float | None]
    options: tuple[str, ...] = ()
    params: tuple[str, ...] = SINGLE_HEAD_PARAMS
    initial_state: Callable[..., Any] | None = None
    rules: Callable[[dict[str, Any], str], None] | None = None
    log_domain: bool = True
    fused: bool = False
    mirror: bool = False
    stops: str = "its direction is exactly zero for every factor (a true stationary point)"
    check: Mapping[str, Check] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.replay, str) and self.replay.count(":") == 1 and self.replay.startswith("attsvm.")):
            raise TypeError(
                f"algorithm {self.name!r} declares no independent 50-digit replay step ('module:function'), got "
                f"{self.replay!r}"
            )
        unknown = [o for o in self.options if o not in OPTIONS]
        bad = [p for p in self.params if p not in PARAMS]
        if unknown or bad or not self.params:
            raise TypeError(f"algorithm {self.name!r}: unknown options {unknown} or parameterisations {bad}")
        checks = {
            p: Check(self.replay, f"the 50-digit replay step of {self.name!r} on {p!r}, step for step")
            for p in self.params
        }
        object.__setattr__(self, "check", checks)
