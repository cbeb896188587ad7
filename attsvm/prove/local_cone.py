r"""The cone of the local convergence lemma (THEORY §2, §4 ``gd-local-cone``), written with the kit so that a
claim computes it alike in float64, in balls and on the prover's boxes.

For a selection $\alpha$ with Att-SVM($\alpha$) feasible,

.. math::
    \mu_\alpha=\tfrac18\bigl(\min(\tfrac12,\delta_\alpha)/A\bigr)^2,\qquad
    A=\max_{i,t}\|x_{it}\|\|z_i\|\,\|W^{mm}_\alpha\|_F,\qquad
    \delta_\alpha=\tfrac12\min_i\min_{t\in\mathcal T_i,\tau\notin\mathcal T_i\cup\{\alpha_i\}}
    (x_{it}-x_{i\tau})^\top W^{mm}_\alpha z_i

($\min(\frac12,\delta_\alpha)=\frac12$ when no such pair exists), and the region
$\mathcal C_{\mu,R}(W^{mm}_\alpha)\cap\{\|W\|_F\le R_1\}$ with $\mu=\min(\mathrm{MU},\mu_\alpha^\downarrow)$ from a
spec ``cone:MU,R,R1`` ($\mu_\alpha^\downarrow$: $\mu_\alpha$ rounded down to three significant bits, an exact binary
number). Used by the claims ``cone-descent``, ``cone-descent-control``, ``cone-descent-tail`` and ``cone-invariance``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..claims.api import Outcome
from ..errors import InputError
from .frame import round_down
from .regions import Cone, parse

__all__ = ["lemma_cone", "mu_down"]


def mu_down(x: float, bits: int = 3) -> Fraction:
    """$x(1-2^{-30})$ rounded down to ``bits`` significant bits (:func:`attsvm.prove.frame.round_down`; $x>0$):
    exact, a little below $x$."""
    return round_down(Fraction(x) * (1 - Fraction(1, 2**30)), bits)


def lemma_cone(case: Any, locally_optimal: bool = True, every_input: bool = False) -> Any:
    r"""``(D, W^mm_alpha, cone spec, info)`` for the data set's selection, or an inconclusive :class:`Outcome` when the
    premises fail (Att-SVM($\alpha$) infeasible, $\alpha$ (not) locally optimal as ``locally_optimal`` asks).

    ``every_input``: $\delta_\alpha$ over every input, $\delta^{\mathrm{all}}_\alpha=\frac12\min_i
    \min_{\tau\notin\mathcal T_i\cup\{\alpha_i\}}((x_{i\alpha_i}-x_{i\tau})^\top W^{mm}_\alpha z_i-1)$, also the inputs
    without a support token (THEORY's $\delta_\alpha$ counts only inputs with one; the support margins are 1, so
    the two agree when every input has a support token)."""
    k = case.kit
    D = k.data(case.data)
    alpha = np.asarray(D.selection)
    mm = k.wmm(D, alpha)
    if mm.status != "optimal":
        return Outcome(ok=True, inconclusive=f"Att-SVM(alpha) {mm.status}: hypothesis not met")
    g = D.gamma
    above = [(i, t) for i, t in sorted(mm.support) if not bool(g[i, t] < g[i, alpha[i]])]
    if bool(above) == locally_optimal:
        want = "locally optimal" if locally_optimal else "not locally optimal"
        return Outcome(ok=True, inconclusive=f"alpha is not {want} (support tokens scoring >= alpha: {above})")
    M = k.margins(D, mm.W, alpha)
    gaps = [
        M[i, t] - 1
        for i in range(D.N)
        if every_input or any(j == i for j, _ in mm.support)
        for t in range(D.T)
        if t != alpha[i] and (i, t) not in mm.support and (D.mask is None or D.mask[i, t])
    ]
    half = k.scalar(0.5)
    delta = half * k.min(np.array(gaps, dtype=object)) if gaps else half
    xz = k.sqrt(np.sum(D.X * D.X, axis=-1) * np.sum(D.Z * D.Z, axis=-1)[:, None])
    A = k.max(xz) * k.norm(mm.W)
    q = k.min(np.array([half, delta], dtype=object)) / A
    mu_lemma = q * q / 8
    spec = parse(str(case.hypotheses["region"]), D.d * D.d, direction=np.ones(D.d * D.d), shape=(D.d, D.d))
    if not isinstance(spec, Cone):
        raise InputError(f"this claim's region is a cone (cone:MU,R,R1), got {spec.describe()}")
    mu = min(spec.mu, mu_down(k.to_float(mu_lemma)))
    if k.hp and not bool(k.scalar(mu) <= mu_lemma):
        return Outcome(ok=True, inconclusive="mu <= mu_alpha not proved in balls")
    # case.param(cone, direction=axis) takes the axis exactly; ",axes": proved in W's own coordinates
    cone = f"cone:{mu},{spec.R},{spec.R1}" + ("" if spec.framed else ",axes")
    info = {"mu": float(mu), "mu_alpha": k.to_float(mu_lemma), "R": float(spec.R), "R1": float(spec.R1)}
    # the axis: W^mm_alpha rounded to float64, the same at every precision (the prover's, the verifier's twice it)
    info["axis"] = np.array([k.to_float(x) for x in np.ravel(mm.W)]).reshape(D.d, D.d)
    return D, mm.W, cone, info
