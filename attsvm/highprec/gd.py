r"""Gradient descent at high precision (mpmath, $\ge50$ digits): **the** replay of a GD run, and the points of
the regularisation path re-solved to their optimality conditions.

:func:`replay` runs the algorithms of :func:`attsvm.gd.run` from the same initial point with every gradient
computed from its definition (:mod:`attsvm.highprec.model`) and every direction written from its definition
(THEORY §1, §6), so a float64 run can be re-evaluated at 50 digits step for step. With
$g_k=\nabla_\theta\mathcal L(\theta_k)$ and the step size $\eta_k$ of the ``schedule`` (``"constant"``
$\eta_k=\eta$, ``"rsqrt"`` $\eta_k=\eta_0(k+1)^{-1/2}$, update $k=0,1,\dots$):

.. math::
    \texttt{gd}:\ \theta_{k+1}=\theta_k-\eta_k\,g_k,\qquad
    \texttt{ngd}:\ \theta_{k+1}=\theta_k-\eta_k\,g_k/\|g_k\|_F\ \text{(per factor)},

for $\theta=W$ (cross, self, sequence, causal data), $\theta=(K,Q)$ with $W=KQ^\top$ (both factors from the
gradients at $(K_k,Q_k)$), $\theta=p$ (prompt attention, head $v$ fixed), $\theta=(v,p)$ (both factors from the
gradients at $(v_k,p_k)$) and the diagonal factors $\theta=(k,q)$ with $W=\mathrm{diag}(k\odot q)$
(:func:`~attsvm.highprec.model.grad_diag`), and the two-layer model $\theta=(W_1,W_2)$
(:func:`~attsvm.highprec.model.grad_twolayer`, with the run's ``residual`` and ``causal``; a factor frozen by
``freeze`` has no gradient here, so it never moves and does not count in the joint norm). ``ngd`` with ``normalize="joint"`` divides every factor by the norm of
the whole gradient, $\|g_k\|=(\sum_j\|g_{k,j}\|_F^2)^{1/2}$. ``heads`` ($H$ heads, $K,Q$ (H,d,m), the outputs
$u_i=\sum_h\gamma_i^\top\mathbb S(X_iK_hQ_h^\top z_i)$ added, :func:`~attsvm.highprec.model.grad_heads`) is
replayed with every head's $K_h$, $Q_h$ a factor of its own (``K0``, ``Q0``, ``K1``, ...), so ``ngd`` per factor
normalises each head separately and ``joint`` by the norm of all heads' gradients; ``final`` and ``recorded`` hold
them as ``{"K", "Q"}`` [H][d][m] again. On every parameterisation, per factor:

.. math::
    \texttt{nsd}:\ \theta_{k+1}=\theta_k-\eta_k\Delta_k,\quad\Delta_k=\arg\max_{\|\Delta\|\le1}\langle g_k,\Delta\rangle

in ``norm`` (:func:`nsd_direction`: ``fro`` $g/\|g\|_F$, ``linf`` $\mathrm{sign}(g)$, ``l1``
$\frac1{|J|}\sum_{j\in J}\mathrm{sign}(g_j)e_j$ with $J=\arg\max_j|g_j|$ (exact ties share), ``spec``
$U_rV_r^\top$ over the singular values $\sigma_i>\rho\,\sigma_1$, $\rho$ = ``tol("spec_rank")`` of float64 — the
engine's threshold, so both follow one definition; a vector factor is a $d\times1$ matrix, $g/\|g\|_2$ —, ``lq``
$\mathrm{sign}(g)|g|^{q^*-1}/\|g\|_{q^*}^{q^*-1}$, $q^*=q/(q-1)$);

.. math::
    \texttt{adam}:\ m_k=\beta_1m_{k-1}+(1-\beta_1)g_k,\quad v_k=\beta_2v_{k-1}+(1-\beta_2)g_k^{2},\quad
    W_{k+1}=W_k-\eta_k\,\frac{m_k/(1-\beta_1^{k+1})}{\sqrt{v_k/(1-\beta_2^{k+1})}+\epsilon}

(entrywise per factor, $m_{-1}=v_{-1}=0$; an entry with $v_k=0$ — its gradient was zero so far — takes no step,
so $\epsilon=0$ is the scale-free direction $\hat m/\sqrt{\hat v}$); and, on $\theta=W$ and $\theta=p$ (the
parameterisations the engine runs them on), the $\ell_q$ mirror descents, with the dual iterate
$D_k=\mathrm{sign}(W_k)|W_k|^{q-1}$ and $W_k=\mathrm{sign}(D_k)|D_k|^{1/(q-1)}$:

.. math::
    \texttt{md}:\ D_{k+1}=D_k-\eta_k\,g_k,\qquad \texttt{nmd}:\ D_{k+1}=D_k-\eta_k\,g_k/\|g_k\|_{q^*}.

and the momentum methods, with $m_k=\beta m_{k-1}+(1-\beta)g_k$ ($m_{-1}=0$, $\beta$ = ``momentum``):

.. math::
    \texttt{signum}:\ \theta_{k+1}=\theta_k-\eta_k\,\mathrm{sign}(m_k),\qquad
    \texttt{muon}:\ \theta_{k+1}=\theta_k-\eta_k\,U_rV_r^\top,\ m_k=U\Sigma V^\top

(the ``linf`` and ``spec`` steepest directions of $m_k$, :func:`nsd_direction`, whose decisions are recorded as
for ``nsd``). Each algorithm's update is one function here (:data:`STEPS`, e.g. :func:`muon_step`), the replay step
the engine's declaration names (:mod:`attsvm.gd.algos`). A factor whose gradient is exactly zero takes no step
(as in the engine), and the run stops when every
factor's gradient is zero (``adam``, ``signum``, ``muon``: and its first moment). The float64 engine's other
stop, ``underflow`` of
plain ``gd`` / ``md`` (the update lost in float64 rounding), has no counterpart here: the replay goes on.
``lr="1/L"`` (``W``): $\eta_0=1/L_W$ with $L_W$ at ``dps`` digits.

**Discrete decisions.** The ``linf``, ``l1`` and ``spec`` directions jump where an entry $g_j$ crosses zero, two
$|g_j|$ cross at the top, or $\sigma_i/\sigma_1$ crosses $\rho$; there float64 rounding can take the other
branch. The replay records for every update its *decision* (the sign pattern, the set $J$, the kept rank $r$)
and its *margin* (a parameterisation of several factors: the decisions of all of them, ``{factor: decision}``,
and the smallest margin) — ``linf`` $\min_j|g_j|/\max_j|g_j|$, ``l1`` $1-m_2/m_1$ ($m_1$ the largest $|g_j|$, $m_2$ the
largest one below it; 1 when there is none), ``spec`` $\min_i|\sigma_i/\sigma_1-\rho|$ — the relative distance to
the nearest branch, which float64 resolves only when it is well above $\varepsilon_{64}$.
:meth:`Replay.agreement` compares a float64 trajectory with the replay *up to the first update whose float64
decision differs* and names that update (never a silent skip).

**Sensitivity of ``spec``.** Between decisions the ``spec`` direction $U_rV_r^\top$ is continuous but
ill-conditioned when $\sigma_r$ is small: a relative perturbation $\delta$ of $G$ moves it by about
$\kappa\,\delta$, $\kappa=\sigma_1/(\sigma_r-\sigma_{r+1})$ ($\sigma_{r+1}=0$ at full rank; the perturbation bound of
the polar factor), and spectral NSD *slides along the threshold* — its smallest kept $\sigma_r/\sigma_1$ sits just
above $\rho$ in most updates of a long run, so $\kappa\approx1/\rho$. The replay records $\kappa$ of every update
(``sensitivities``), and :meth:`Replay.agreement` the first-order rounding estimate
$e_k=\varepsilon_{64}\sum_{j<k}\eta_j\kappa_j/\|W_k\|_F$ of the float64 run's relative deviation, a worst case
(errors of every update adding up). Measured on $n=3$, $T=4$, $d=4$ over 2000 updates: $e_k$ reaches
$6\cdot10^{-9}$, the deviation $4\cdot10^{-11}$.

:func:`path_point` (:func:`best_path_point`: from several starts) re-solves one point of the regularisation
path (:func:`attsvm.gd.regularization_path`)

.. math:: \bar W_R\in\arg\min_{\|W\|_F\le R}\mathcal L(W)\qquad\text{or}\qquad
          (\bar K,\bar Q)\in\arg\min_{\frac12(\|K\|_F^2+\|Q\|_F^2)\le R}\mathcal L(KQ^\top)

from a starting point (the engine's solution) by Newton's method on the first-order conditions of the
active constraint, $x$ the flat parameters and $c=\frac12R^2$ (``W``) or $R$ (``KQ``):

.. math::
    \nabla f(x)+\lambda x=0,\quad\tfrac12\|x\|^2=c,\qquad
    \begin{pmatrix}\nabla^2f+\lambda I&x\\x^\top&0\end{pmatrix}\begin{pmatrix}\Delta x\\\Delta\lambda\end{pmatrix}
    =-\begin{pmatrix}\nabla f+\lambda x\\\tfrac12\|x\|^2-c\end{pmatrix},

the Hessian by central differences of the 50-digit gradient and the step from a pseudo-inverse (the $(K,Q)$
problem has a continuum of solutions $(KO,QO)$, $O$ orthogonal). The result is *a constrained local
minimiser* when the residuals are below $10^{-\lfloor dps/2\rfloor}$, $\lambda>0$ and the Hessian of the
Lagrangian is positive semidefinite on the tangent space $x^\perp$ (second-order necessary condition);
global optimality is not decided here.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import mpmath
import numpy as np

from ..data import Dataset
from ..tolerances import tol
from .model import (
    DPS,
    MP,
    HPData,
    as_mp,
    data,
    frob,
    grad_diag,
    grad_heads,
    grad_KQ,
    grad_twolayer,
    grad_vp,
    grad_W,
    hessian,
    matmul,
    smoothness_constant,
    to_numpy,
    transpose,
)
from .model import loss as loss_of

mp = mpmath.mp

__all__ = [
    "PARAMS",
    "ALGOS",
    "STEPS",
    "Step",
    "NORMS",
    "SCHEDULES",
    "Direction",
    "nsd_direction",
    "step_size",
    "Agreement",
    "Replay",
    "replay",
    "batch_data",
    "PathPoint",
    "path_point",
    "best_path_point",
]

#: the parameterisations replayed here (those of :data:`attsvm.gd.init.PARAMS`)
PARAMS = ("W", "KQ", "p", "vp", "diag", "heads", "twolayer")
#: how ``ngd`` normalises several factors, as :data:`attsvm.gd.options.NORMALIZE`
NORMALIZE = ("per-factor", "joint")
#: the norms of ``nsd`` (:func:`nsd_direction`), as :data:`attsvm.gd.NORMS`
NORMS = ("fro", "linf", "l1", "spec", "lq")
#: step-size schedules (:func:`step_size`), as :data:`attsvm.gd.SCHEDULES`
SCHEDULES = ("constant", "rsqrt")
#: the norms whose direction is a discrete choice (decisions and margins are recorded)
DISCRETE = ("linf", "l1", "spec")


class Direction(NamedTuple):
    r"""A steepest direction: ``delta`` $\Delta$ (nested ``mpf``, the shape of $g$), ``decision`` the discrete
    choice behind it (``linf``: the sign pattern, ``l1``: the flat indices $J$, ``spec``: the kept rank $r$;
    ``None`` for the continuous norms), ``margin`` its relative distance to the nearest other choice and, for
    ``spec``, ``sensitivity`` $\kappa=\sigma_1/(\sigma_r-\sigma_{r+1})$ (module docstring; ``None`` otherwise)."""

    delta: MP
    decision: Any
    margin: Any
    sensitivity: Any = None


def _flat(A: Any) -> list:
    return [y for x in A for y in _flat(x)] if isinstance(A, list) else [A]


def _shaped(flat: list, like: Any) -> Any:
    """``flat`` in the nesting of ``like`` (a matrix [r][c] or a vector)."""
    if like and isinstance(like[0], list):
        c = len(like[0])
        return [flat[a * c : (a + 1) * c] for a in range(len(like))]
    return list(flat)


def _sign(x: mpmath.mpf) -> int:
    return (x > 0) - (x < 0)


def nsd_direction(G: MP, norm: str, q: Any = None, dps: int = DPS) -> Direction:
    r"""$\Delta=\arg\max_{\|\Delta\|\le1}\langle G,\Delta\rangle$ of a matrix $G$ ([r][c] ``mpf``, or a float64 array
    taken exactly) in ``norm``, at ``dps`` digits (module docstring); $\Delta=0$ for $G=0$. ``q`` ($1<q<\infty$,
    float64 taken exactly): ``lq``. ``spec`` uses the singular value decomposition :func:`mpmath.svd_r` and
    $\rho$ = ``tol("spec_rank")``."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    if not isinstance(G, list):
        G = as_mp(np.asarray(G, dtype=np.float64))
    with mp.workdps(dps):
        g = _flat(G)
        mags = [abs(x) for x in g]
        m1 = max(mags)
        zero = mpmath.mpf(0)
        if norm == "linf":
            signs = [_sign(x) for x in g]
            margin = min(mags) / m1 if m1 > 0 else zero
            return Direction(_shaped([mpmath.mpf(s) for s in signs], G), tuple(signs), margin)
        if norm == "l1":
            J = tuple(j for j, a in enumerate(mags) if m1 > 0 and a == m1)
            below = [a for a in mags if a < m1]
            margin = (1 - max(below) / m1 if below else mpmath.mpf(1)) if m1 > 0 else zero
            delta = [zero] * len(g)
            for j in J:
                delta[j] = _sign(g[j]) * mpmath.mpf(1) / len(J)
            return Direction(_shaped(delta, G), J, margin)
        if norm == "fro":
            nrm = frob(G)
            return Direction(_shaped([x / nrm if nrm > 0 else zero for x in g], G), None, None)
        if norm == "lq":
            if q is None or not (1 < float(q) < float("inf")):
                raise ValueError(f"norm 'lq' needs a finite q > 1, got {q!r}")
            qm = q if isinstance(q, mpmath.mpf) else mpmath.mpf(float(q))
            qs = qm / (qm - 1)
            if m1 == 0:
                return Direction(_shaped([zero] * len(g), G), None, None)
            den = mp.fsum(a**qs for a in mags) ** ((qs - 1) / qs)  # ||g||_{q*}^{q*-1}
            return Direction(_shaped([_sign(x) * abs(x) ** (qs - 1) / den for x in g], G), None, None)
        # spec: the polar factor of G on the singular directions with sigma_i > rho sigma_1
        if m1 == 0:
            return Direction(_shaped([zero] * len(g), G), 0, zero, None)
        if not isinstance(G[0], list):  # a vector is a d x 1 matrix: one singular value, kept; Delta = g / ||g||_2
            nrm = frob(G)
            rho = mpmath.mpf(tol("spec_rank"))
            return Direction([x / nrm for x in g], 1, 1 - rho, mpmath.mpf(1))
        rows, cols = len(G), len(G[0])
        U, S, V = mp.svd_r(mpmath.matrix(G))
        sig = [abs(S[i]) for i in range(len(S))]
        s1 = max(sig)
        rho = mpmath.mpf(tol("spec_rank"))  # the float64 value, taken exactly: the engine's threshold
        keep = [i for i in range(len(sig)) if sig[i] > rho * s1]
        delta = [[mp.fsum(U[a, i] * V[i, b] for i in keep) for b in range(cols)] for a in range(rows)]
        margin = min(abs(s / s1 - rho) for s in sig)
        ordered = sorted(sig, reverse=True) + [zero]
        r = len(keep)
        return Direction(delta, r, margin, s1 / (ordered[r - 1] - ordered[r]))


def step_size(eta0: Any, k: int, schedule: str) -> Any:
    r"""$\eta_k$ of update $k=0,1,\dots$: ``"constant"`` $\eta_0$, ``"rsqrt"`` $\eta_0(k+1)^{-1/2}$ (at the working
    precision)."""
    if schedule == "constant":
        return eta0
    if schedule == "rsqrt":
        return eta0 / mp.sqrt(k + 1)
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


@dataclass
class Agreement:
    r"""A float64 trajectory against its replay (:meth:`Replay.agreement`): the iterates $W_0..W_{\texttt{compared}}$
    were compared; ``first_flip`` the first update $k$ whose float64 decision (read from the float64 step
    $W_k-W_{k+1}$) differs from the replay's (``None``: none differs; the two runs part there, so nothing after it is
    compared), ``flip_margin`` the replay's decision margin at that update, ``flip`` a sentence naming it;
    ``max_rel_dev`` $\max_k\|W^{64}_k-W^{hp}_k\|_F/\|W^{hp}_k\|_F$ over the recorded $k\le$ ``compared``
    (``deviations``: ``(k, dev)`` for each of them); ``estimates`` ``(k, e_k)`` alongside, the first-order rounding
    estimate of ``spec`` (module docstring; 0 for the other algorithms, whose float64 directions are accurate to a
    few $\varepsilon_{64}$ wherever the decisions agree)."""

    compared: int
    first_flip: int | None
    flip_margin: float | None
    flip: str
    max_rel_dev: float
    deviations: list[tuple[int, float]] = field(default_factory=list)
    estimates: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class Replay:
    r"""A replayed run: ``final`` the last iterate and ``recorded`` the iterates at ``steps`` (step 0 first), each a
    dict of nested ``mpf`` lists (``{"W"}``, ``{"K","Q"}``, ``{"p"}``, ``{"v","p"}``, ``{"k","q"}`` or
    ``{"W1","W2"}``); ``lr`` the
    step size $\eta_0$; ``taken`` the steps taken (fewer than asked when every gradient became exactly zero);
    ``algo``, ``norm``, ``q``, ``schedule``, ``minibatch`` how they were taken; for ``nsd`` in a discrete norm
    (``linf``, ``l1``, ``spec``) ``decisions`` and ``margins`` of every update, and for ``spec`` the
    ``sensitivities`` $\kappa_k$ (module docstring; empty otherwise; several factors: ``{factor: decision}``, the
    smallest margin and the largest $\kappa$ per update)."""

    param: str
    final: dict[str, Any]
    lr: Any
    taken: int
    steps: list[int] = field(default_factory=list)
    recorded: list[dict[str, Any]] = field(default_factory=list)
    algo: str = "ngd"
    norm: str | None = None
    q: Any = None
    schedule: str = "constant"
    decided: str | None = None
    minibatch: int | None = None
    decisions: list[Any] = field(default_factory=list)
    margins: list[Any] = field(default_factory=list)
    sensitivities: list[Any] = field(default_factory=list)

    def array(self, name: str | None = None, index: int | None = None) -> np.ndarray:
        """``name`` (default: ``W``, ``W2`` of ``twolayer``, or ``p``) of the final iterate, or of record ``index``, as float64."""
        name = name or {"W": "W", "twolayer": "W2"}.get(self.param, "p")
        src = self.final if index is None else self.recorded[index]
        return to_numpy(src[name])

    def min_margin(self) -> tuple[int, Any] | None:
        """``(k, margin)`` of the update closest to a branch (``None`` without discrete decisions)."""
        if not self.margins:
            return None
        k = min(range(len(self.margins)), key=lambda j: self.margins[j])
        return k, self.margins[k]

    def agreement(self, reference: Any) -> Agreement:
        r"""Compare the float64 iterates ``reference`` (shape (K+1,d,d) or (K+1,1,d,d): $W_0..W_K$ of the same run
        at *every* step, e.g. ``gd.run(..., record_every=1, record_params=True).trajectory["W"]``) with this replay
        (param ``W``; recorded with ``record_every``): the float64 decision of update $k$ is read from its step
        $(W_k-W_{k+1})/\eta_k$ — ``linf`` its signs, ``l1`` its nonzero entries, ``spec`` the number of its singular
        values above $\frac12$ (those of $U_rV_r^\top$ are 1 and 0) — and compared with :attr:`decisions`; the
        iterates are compared up to the first update that differs (:class:`Agreement`)."""
        if self.param != "W":
            raise ValueError("agreement compares param 'W' runs")
        ref = np.asarray(reference, dtype=np.float64)
        if ref.ndim == 4 and ref.shape[1] == 1:
            ref = ref[:, 0]
        if ref.ndim != 3:
            raise ValueError(f"reference must have shape (K+1,d,d), got {ref.shape}")
        K = min(len(ref) - 1, self.taken)
        flip, margin, text = None, None, ""
        if self.decisions:
            with mp.workdps(max(mp.dps, DPS)):
                for k in range(K):
                    eta = float(step_size(mpmath.mpf(self.lr), k, self.schedule))
                    st = ref[k] - ref[k + 1]
                    if self.decided == "linf":
                        got: Any = tuple(int(s) for s in np.sign(st).ravel())
                    elif self.decided == "l1":
                        got = tuple(int(j) for j in np.flatnonzero(st.ravel()))
                    else:
                        got = int(np.sum(np.linalg.svd(st / eta, compute_uv=False) > 0.5))
                    want = self.decisions[k]
                    if got != want:
                        flip, margin = k, float(self.margins[k])
                        text = _flip_text(self.decided, k, got, want, margin, ref.shape[1:])
                        break
        last = K if flip is None else flip
        eps64 = float(np.finfo(np.float64).eps)
        acc = [0.0]  # sum_{j<k} eta_j kappa_j
        for j, kap in enumerate(self.sensitivities[:last]):
            acc.append(acc[-1] + float(step_size(mpmath.mpf(self.lr), j, self.schedule)) * float(kap))
        devs, ests = [], []
        recs = list(zip(self.steps, self.recorded))
        if not recs or recs[-1][0] != self.taken:
            recs.append((self.taken, self.final))
        for k, th in recs:
            if k > last:
                break
            hpW = to_numpy(th["W"])
            nrm = float(np.linalg.norm(hpW))
            dev = float(np.linalg.norm(ref[k] - hpW)) / nrm if nrm > 0 else float(np.linalg.norm(ref[k]))
            devs.append((int(k), dev))
            ests.append((int(k), eps64 * acc[k] / nrm if k < len(acc) and nrm > 0 else 0.0))
        return Agreement(last, flip, margin, text, max((d for _, d in devs), default=0.0), devs, ests)


def _flip_text(norm: str | None, k: int, got: Any, want: Any, margin: float, shape: tuple) -> str:
    if norm == "linf":
        j = next(j for j, (a, b) in enumerate(zip(got, want)) if a != b)
        at = tuple(int(x) for x in np.unravel_index(j, shape))
        what = f"sign of entry {at}: float64 {got[j]:+d}, high precision {want[j]:+d}"
    elif norm == "l1":
        what = f"argmax set: float64 {list(got)}, high precision {list(want)} (flat indices)"
    else:
        what = f"kept rank: float64 {got}, high precision {want}"
    return f"update {k}: {what} (high-precision margin {margin:.3g})"


def batch_data(D: HPData, rows: list[int]) -> HPData:
    r"""The data set of the rows ``rows`` of ``D`` alone (in that order): its loss is
    $\frac1{|\text{rows}|}\sum_{i\in\text{rows}}\ell_i$, the mini-batch loss of :func:`replay`."""
    out = copy.copy(D)
    out.N = len(rows)
    out.X, out.Y, out.Z, out.vis = ([a[i] for i in rows] for a in (D.X, D.Y, D.Z, D.vis))
    if D.gamma is not None:
        out.gamma = [D.gamma[i] for i in rows]
    return out


def _init(param: str, init: Any, d: int) -> dict[str, Any]:
    def conv(a, shape):
        m = as_mp(a) if not (isinstance(a, list) and a and isinstance(a[0], (list, mpmath.mpf))) else a
        got = np.shape(to_numpy(m))
        if got != shape:
            raise ValueError(f"initial point has shape {got}, expected {shape}")
        return m

    if param == "vp":
        if not (isinstance(init, dict) and set(init) == {"v", "p"}):
            raise ValueError("param 'vp' needs init={'v': ..., 'p': ...}")
        return {"v": conv(init["v"], (d,)), "p": conv(init["p"], (d,))}
    if param == "KQ":
        if not (isinstance(init, dict) and set(init) == {"K", "Q"}):
            raise ValueError("param 'KQ' needs init={'K': ..., 'Q': ...}")
        m = np.shape(to_numpy(init["K"]))[-1]
        return {"K": conv(init["K"], (d, m)), "Q": conv(init["Q"], (d, m))}
    if param == "heads":
        if not (isinstance(init, dict) and set(init) == {"K", "Q"}):
            raise ValueError("param 'heads' needs init={'K': ..., 'Q': ...} of shape (H, d, m)")
        shape = np.shape(to_numpy(init["K"]))
        if len(shape) != 3:
            raise ValueError(f"param 'heads' needs K, Q of shape (H, d, m), got {shape}")
        K, Q = conv(init["K"], (*shape[:1], d, shape[2])), conv(init["Q"], (*shape[:1], d, shape[2]))
        return {f"{n}{h}": A[h] for h in range(shape[0]) for n, A in (("K", K), ("Q", Q))}
    if param == "twolayer":
        if not (isinstance(init, dict) and set(init) == {"W1", "W2"}):
            raise ValueError("param 'twolayer' needs init={'W1': ..., 'W2': ...} (d, d) each")
        return {"W1": conv(init["W1"], (d, d)), "W2": conv(init["W2"], (d, d))}
    if param == "diag":
        if not (isinstance(init, dict) and set(init) == {"k", "q"}):
            raise ValueError("param 'diag' needs init={'k': ..., 'q': ...} (the diagonal factors, W = diag(k q))")
        return {"k": conv(init["k"], (d,)), "q": conv(init["q"], (d,))}
    if isinstance(init, dict):
        init = init[param]
    return {param: conv(init, (d, d) if param == "W" else (d,))}


def _gradients(D: HPData, param: str, th: dict[str, Any], loss_: str, dps: int, S: Any = None) -> dict[str, Any]:
    if param == "twolayer":  # the frozen factor (S.freeze) has no gradient: it takes no step, nor counts in a norm
        g1, g2 = grad_twolayer(D, th["W1"], th["W2"], loss_, S.residual, S.causal, dps)
        return {n: g for n, g in (("W1", g1), ("W2", g2)) if n != S.freeze}
    if param == "W":
        return {"W": grad_W(D, th["W"], loss_, dps)}
    if param == "KQ":
        gK, gQ = grad_KQ(D, th["K"], th["Q"], loss_, dps)
        return {"K": gK, "Q": gQ}
    if param == "diag":
        gk, gq = grad_diag(D, th["k"], th["q"], loss_, dps)
        return {"k": gk, "q": gq}
    if param == "heads":
        H = len(th) // 2
        gK, gQ = grad_heads(D, [th[f"K{h}"] for h in range(H)], [th[f"Q{h}"] for h in range(H)], loss_, dps)
        return {n: g for h in range(H) for n, g in ((f"K{h}", gK[h]), (f"Q{h}", gQ[h]))}
    v = th.get("v", D.v)
    gv, gp = grad_vp(D, v, th["p"], loss_, dps)
    return {"p": gp} if param == "p" else {"v": gv, "p": gp}


def _axpy(x: Any, a: Any, y: Any) -> Any:
    """``x + a*y`` for nested lists."""
    if isinstance(x, list):
        return [_axpy(xi, a, yi) for xi, yi in zip(x, y)]
    return x + a * y


def _exact(x: Any) -> Any:
    """A float64 number (taken exactly) or an ``mpf`` as ``mpf``."""
    return x if isinstance(x, mpmath.mpf) else mpmath.mpf(float(x))


def _signed_power(A: Any, e: Any) -> Any:
    r"""$\mathrm{sign}(A)|A|^e$ entrywise (nested lists)."""
    if isinstance(A, list):
        return [_signed_power(a, e) for a in A]
    return _sign(A) * abs(A) ** e if A != 0 else mpmath.mpf(0)


@dataclass
class Step:
    r"""What one replayed update $k$ sees: the iterate ``th``, its gradients ``grads`` and their Frobenius ``norms``
    (per factor), the step size ``eta`` $=\eta_k$, the update number ``t`` $=k+1$, the run's settings (``q``,
    ``norm``, ``normalize``, ``betas``, ``eps``, ``momentum`` as ``mpf`` where numbers; float64 values taken
    exactly) and ``state``, the algorithm's own variables carried from update to update (a dict it fills)."""

    th: dict[str, Any]
    grads: dict[str, Any]
    norms: dict[str, Any]
    eta: Any
    t: int
    settings: dict[str, Any]
    state: dict[str, Any]
    dps: int


#: a replay step returns the next iterate's changed factors (``None``: a fixed point, the replay stops) and the
#: steepest directions it took per factor when they are discrete choices (recorded as decisions, ``{}`` otherwise)
StepResult = tuple[dict[str, Any] | None, dict[str, Direction]]


def _stationary(s: Step) -> bool:
    return all(nrm == 0 for nrm in s.norms.values())


def gd_step(s: Step) -> StepResult:
    r"""``gd``: $\theta-\eta_k g_k$ per factor."""
    if _stationary(s):
        return None, {}
    return {n: _axpy(s.th[n], -s.eta, g) for n, g in s.grads.items()}, {}


def ngd_step(s: Step) -> StepResult:
    r"""``ngd``: $\theta-\eta_k g_k/\|g_k\|_F$ per factor, or $/\|g_k\|$ of the whole gradient (``joint``)."""
    if _stationary(s):
        return None, {}
    joint = mp.sqrt(mp.fsum(nrm * nrm for nrm in s.norms.values()))
    den = {n: joint if s.settings["normalize"] == "joint" else s.norms[n] for n in s.grads}
    return {n: s.th[n] if s.norms[n] == 0 else _axpy(s.th[n], -s.eta / den[n], g) for n, g in s.grads.items()}, {}


def nsd_step(s: Step) -> StepResult:
    r"""``nsd``: $\theta-\eta_k\Delta_k$ per factor, $\Delta_k$ the steepest direction :func:`nsd_direction`."""
    if _stationary(s):
        return None, {}
    new, dirs = {}, {}
    for n, g in s.grads.items():
        if s.norms[n] == 0:
            new[n] = s.th[n]
            continue
        dirs[n] = dirn = nsd_direction(g, s.settings["norm"], s.settings["q"], s.dps)
        new[n] = _axpy(s.th[n], -s.eta, dirn.delta)
    return new, dirs if s.settings["norm"] in DISCRETE else {}


def _mirror(s: Step, normalised: bool) -> StepResult:
    if _stationary(s):
        return None, {}
    q = s.settings["q"]
    qs = q / (q - 1)
    if "dual" not in s.state:
        s.state["dual"] = {n: _signed_power(a, q - 1) for n, a in s.th.items()}
    new = {}
    for n, g in s.grads.items():
        if s.norms[n] == 0:
            new[n] = s.th[n]
            continue
        scale = s.eta / mp.fsum(abs(x) ** qs for x in _flat(g)) ** (1 / qs) if normalised else s.eta
        s.state["dual"][n] = _axpy(s.state["dual"][n], -scale, g)
        new[n] = _signed_power(s.state["dual"][n], 1 / (q - 1))
    return new, {}


def md_step(s: Step) -> StepResult:
    r"""``md``: $D_{k+1}=D_k-\eta_kg_k$, $D=\mathrm{sign}(\theta)|\theta|^{q-1}$,
    $\theta=\mathrm{sign}(D)|D|^{1/(q-1)}$."""
    return _mirror(s, normalised=False)


def nmd_step(s: Step) -> StepResult:
    r"""``nmd``: $D_{k+1}=D_k-\eta_kg_k/\|g_k\|_{q^*}$, the same mirror maps as ``md``."""
    return _mirror(s, normalised=True)


def adam_step(s: Step) -> StepResult:
    r"""``adam``: $m_k=\beta_1m_{k-1}+(1-\beta_1)g_k$, $v_k=\beta_2v_{k-1}+(1-\beta_2)g_k^2$, $\theta-\eta_k
    \hat m_k/(\sqrt{\hat v_k}+\epsilon)$ entrywise (an entry with $v_k=0$ takes no step); a fixed point when every
    gradient and first moment is zero."""
    B1, B2 = s.settings["betas"]
    EPS = s.settings["eps"]
    zero = mpmath.mpf(0)
    mom = s.state.setdefault("m", {n: [zero] * len(_flat(a)) for n, a in s.th.items()})
    sec = s.state.setdefault("v", {n: [zero] * len(_flat(a)) for n, a in s.th.items()})
    new_m = {n: [B1 * a + (1 - B1) * x for a, x in zip(mom[n], _flat(g))] for n, g in s.grads.items()}
    new_v = {n: [B2 * a + (1 - B2) * x * x for a, x in zip(sec[n], _flat(g))] for n, g in s.grads.items()}
    if _stationary(s) and all(x == 0 for m_ in new_m.values() for x in m_):
        s.state["m"], s.state["v"] = new_m, new_v  # no step; v still decays (a mini-batch replay goes on)
        return None, {}
    bc1, bc2 = 1 - B1**s.t, 1 - B2**s.t
    new = {}
    for n in s.grads:
        st = [(m_ / bc1) / (mp.sqrt(v_ / bc2) + EPS) if v_ > 0 else zero for m_, v_ in zip(new_m[n], new_v[n])]
        new[n] = _axpy(s.th[n], -s.eta, _shaped(st, s.th[n]))
    s.state["m"], s.state["v"] = new_m, new_v
    return new, {}


def _momentum_step(s: Step, norm: str) -> StepResult:
    r"""$m_k=\beta m_{k-1}+(1-\beta)g_k$ per factor, $\theta-\eta_k\Delta(m_k)$ with $\Delta$ the steepest direction
    of $m_k$ in ``norm`` (:func:`nsd_direction`); a fixed point when every gradient and average is zero."""
    beta = s.settings["momentum"]
    zero = mpmath.mpf(0)
    avg = s.state.setdefault("m", {n: _shaped([zero] * len(_flat(a)), a) for n, a in s.th.items()})
    new_avg = {n: _axpy(_scaled(avg[n], beta), 1 - beta, g) for n, g in s.grads.items()}
    if _stationary(s) and all(x == 0 for m_ in new_avg.values() for x in _flat(m_)):
        return None, {}
    s.state["m"] = new_avg
    new, dirs = {}, {}
    for n, m_ in new_avg.items():
        if all(x == 0 for x in _flat(m_)):
            new[n] = s.th[n]
            continue
        dirs[n] = dirn = nsd_direction(m_, norm, None, s.dps)
        new[n] = _axpy(s.th[n], -s.eta, dirn.delta)
    return new, dirs


def signum_step(s: Step) -> StepResult:
    r"""``signum``: $m_k=\beta m_{k-1}+(1-\beta)g_k$, $\theta-\eta_k\,\mathrm{sign}(m_k)$ (the decisions are the sign
    patterns of $m_k$, recorded as for ``nsd`` in ``linf``)."""
    return _momentum_step(s, "linf")


def muon_step(s: Step) -> StepResult:
    r"""``muon``: $m_k=\beta m_{k-1}+(1-\beta)g_k$, $\theta-\eta_k\,U_rV_r^\top$ with $U_rV_r^\top$ the polar factor of
    $m_k$ over its singular values above $\rho\,\sigma_1$ (the ``spec`` direction of :func:`nsd_direction`, from
    :func:`mpmath.svd_r`; kept rank and sensitivity recorded as for ``nsd`` in ``spec``)."""
    return _momentum_step(s, "spec")


#: the replayed algorithms and their steps, written here from the definitions (the engine declares each one's
#: step by name: :mod:`attsvm.gd.algos`)
STEPS = {
    "gd": gd_step,
    "ngd": ngd_step,
    "md": md_step,
    "nsd": nsd_step,
    "adam": adam_step,
    "nmd": nmd_step,
    "signum": signum_step,
    "muon": muon_step,
}
ALGOS = tuple(STEPS)
#: the steepest-descent norm of each algorithm's discrete decisions (:meth:`Replay.agreement`)
DECISION_NORM = {"signum": "linf", "muon": "spec"}


def _scaled(x: Any, a: Any) -> Any:
    """``a*x`` for nested lists."""
    if isinstance(x, list):
        return [_scaled(xi, a) for xi in x]
    return a * x


def replay(
    ds: Dataset | HPData,
    init: Any,
    *,
    param: str = "W",
    algo: str | None = None,
    lr: Any = 0.1,
    steps: int,
    loss: str = "logistic",
    record_every: int | None = None,
    dps: int = DPS,
    settings: Any = None,
    **options: Any,
) -> Replay:
    r"""Replay ``steps`` steps of ``algo`` on ``param`` from ``init`` at ``dps`` digits (module docstring).

    ``init``: the initial point as float64 arrays (taken as exact) or nested ``mpf`` — $W_0$ (d,d),
    ``{"K": K_0, "Q": Q_0}`` (d,m), $p_0$ (d,), ``{"v": v_0, "p": p_0}`` or ``{"k": k_0, "q": q_0}`` (d,)
    (``diag``); ``lr``: $\eta_0$, a number (float64 taken as exact) or ``"1/L"`` (``W`` only);
    ``record_every``: record the iterates $0,k,2k,\dots$ (as the engine's trajectories). ``settings``: a
    :class:`attsvm.gd.Settings`, or ``algo`` (default ``"ngd"``) and the settings as keyword ``options``
    (``norm``, ``q``, ``schedule``, ``adam_betas``, ``adam_eps``, ``normalize``, ``momentum``), validated by the
    engine's one rule :func:`attsvm.gd.settings_of` through :func:`attsvm.gd.spec.resolve_settings` (a
    ``ValueError`` naming the bad one); the ridge and the normaliser's epsilon are not replayed (refused). Each
    update is the algorithm's step written here (:data:`STEPS`).

    ``minibatch`` $b$ (a settings field): update $k$ takes the gradients of $\frac1b\sum_{i\in B_k}\ell_i$,
    $B_k=\{(kb+j)\bmod n\}_{j<b}$ — the loss of the data set of the rows $B_k$ alone (:func:`batch_data`), summed
    here at ``dps`` digits; an update whose gradients are all zero then takes no step (its state still decays), and
    the replay stops only after $n/\gcd(n,b)$ such updates in a row (a whole period of batches: a fixed point)."""
    from ..gd.spec import minibatch_of, resolve_settings

    if param not in PARAMS:
        raise ValueError(f"param must be one of {PARAMS}, got {param!r}")
    S = resolve_settings(settings, algo, param, options)
    if S.ridge or S.grad_eps:
        raise ValueError("the replay has no ridge and no normaliser epsilon (ridge 0, grad_eps 0)")
    if S.algo not in STEPS:
        raise ValueError(f"no 50-digit step of algo {S.algo!r}; replayed: {ALGOS}")
    D = data(ds)
    b = minibatch_of(S.minibatch, D.N)
    with mp.workdps(dps):
        th = _init(param, init, D.d)
        if isinstance(lr, str):
            if lr != "1/L" or param != "W" or loss != "logistic":
                raise ValueError("lr must be a number, or '1/L' for param 'W' with the logistic loss")
            eta0 = 1 / smoothness_constant(D, dps=dps)
        else:
            eta0 = _exact(lr)
        qm = None if S.q is None else _exact(S.q)
        values = {
            "q": qm,
            "norm": S.norm,
            "normalize": S.normalize,
            "betas": tuple(_exact(b) for b in S.adam_betas),
            "eps": _exact(S.adam_eps),
            "momentum": _exact(S.momentum),
        }
        decided = DECISION_NORM.get(S.algo, S.norm if S.algo == "nsd" else None)
        rep = Replay(param, th, eta0, 0, algo=S.algo, norm=S.norm, q=qm, schedule=S.schedule, decided=decided)
        rep.minibatch = b
        idle = 0  # consecutive updates without a step (mini-batch runs)
        if record_every:
            rep.steps.append(0)
            rep.recorded.append(th)
        state: dict[str, Any] = {}
        step = STEPS[S.algo]
        for k in range(steps):
            Dk = D if b is None else batch_data(D, [(k * b + j) % D.N for j in range(b)])
            grads = _gradients(Dk, param, th, loss, dps, S)
            norms = {name: frob(g) for name, g in grads.items()}
            new, dirs = step(Step(th, grads, norms, step_size(eta0, k, S.schedule), k + 1, values, state, dps))
            if new is None:
                idle += 1
                if b is None or idle >= D.N // math.gcd(D.N, b):
                    break
                new, dirs = {}, {}
            else:
                idle = 0
            if dirs and decided in DISCRETE:  # one entry per update (several factors: all their decisions)
                one = len(grads) == 1
                rep.decisions.append(
                    next(iter(dirs.values())).decision if one else {n: x.decision for n, x in dirs.items()}
                )
                rep.margins.append(min(x.margin for x in dirs.values()))
                if decided == "spec":
                    rep.sensitivities.append(max(x.sensitivity for x in dirs.values()))
            th = {**th, **new}
            rep.taken = k + 1
            if record_every and (k + 1) % record_every == 0:
                rep.steps.append(k + 1)
                rep.recorded.append(th)
        rep.final = th
        if param == "heads":  # the heads' factors as {"K", "Q"} [H][d][m] again
            rep.final = _stack_heads(th)
            rep.recorded = [_stack_heads(t) for t in rep.recorded]
        return rep


def _stack_heads(th: dict[str, Any]) -> dict[str, Any]:
    """``{"K0", "Q0", "K1", ...}`` to ``{"K": [K_0, K_1, ...], "Q": [...]}``."""
    H = len(th) // 2
    return {n: [th[f"{n}{h}"] for h in range(H)] for n in ("K", "Q")}


# ---------------------------------------------------------------------- the regularisation path at 50 digits
@dataclass
class PathPoint:
    r"""A re-solved point of the regularisation path: ``params`` (``{"W"}`` or ``{"K","Q"}``, nested ``mpf``),
    ``W`` ($W$ or $KQ^\top$), ``lam`` the multiplier $\lambda$, ``loss`` $\mathcal L$, ``residual`` the relative
    first-order residual $\max(\|\nabla f+\lambda x\|/\|\nabla f\|,\ |\frac12\|x\|^2-c|/c)$, ``curvature`` the
    smallest eigenvalue of the tangent Hessian of the Lagrangian relative to its largest $|\cdot|$ (the
    direction $x$ itself excluded), ``iterations`` Newton steps, ``local_min``: residual
    $\le10^{-\lfloor dps/2\rfloor}$, $\lambda>0$ and curvature $\ge-10^{-\lfloor dps/3\rfloor}$."""

    params: dict[str, Any]
    W: MP
    lam: Any
    loss: Any
    residual: Any
    curvature: Any
    iterations: int
    local_min: bool

    def summary(self) -> dict[str, Any]:
        """JSON-friendly numbers (floats) of this point."""
        return {
            "lambda": float(self.lam),
            "loss": float(self.loss),
            "residual": float(self.residual),
            "curvature": float(self.curvature),
            "iterations": self.iterations,
            "local_min": self.local_min,
        }


def _problem(D: HPData, param: str, d: int, m: int, loss_: str):
    """``(grad(x, dps), unpack(x))`` of the flat parameters ``x``."""

    def unpack(x):
        if param == "W":
            return {"W": [x[a * d : (a + 1) * d] for a in range(d)]}
        K = [x[a * m : (a + 1) * m] for a in range(d)]
        Q = [x[d * m + a * m : d * m + (a + 1) * m] for a in range(d)]
        return {"K": K, "Q": Q}

    def grad(x, dps):
        th = unpack(x)
        if param == "W":
            G = grad_W(D, th["W"], loss_, dps)
            return [G[a][b] for a in range(d) for b in range(d)]
        gK, gQ = grad_KQ(D, th["K"], th["Q"], loss_, dps)
        return [y for row in gK for y in row] + [y for row in gQ for y in row]

    return grad, unpack


def _pinv_solve(A: MP, b: list, dps: int) -> list:
    """Minimum-norm least-squares solution of ``A x = b`` (singular values below $10^{-dps/2}\\sigma_{max}$ cut)."""
    M = mpmath.matrix(A)
    U, S, V = mp.svd_r(M)
    smax = max(abs(S[j]) for j in range(len(S)))
    cut = smax * mpmath.mpf(10) ** (-(dps // 2))
    bv = mpmath.matrix(b)
    x = [mpmath.mpf(0)] * M.cols
    for j in range(len(S)):
        if abs(S[j]) <= cut:
            continue
        c = mp.fsum(U[i, j] * bv[i] for i in range(M.rows)) / S[j]
        for k in range(M.cols):
            x[k] += c * V[j, k]
    return x


def path_point(
    ds: Dataset | HPData,
    init: Any,
    R: Any,
    *,
    param: str = "W",
    loss: str = "logistic",
    dps: int = DPS,
    max_iter: int = 25,
) -> PathPoint:
    r"""Re-solve $\bar W_R$ (``param="W"``, ``init`` a (d,d) $W$) or $(\bar K,\bar Q)$ (``"KQ"``, ``init`` a dict
    ``{"K","Q"}`` of (d,m) arrays) at ``dps`` digits by Newton's method from ``init`` (module docstring).
    ``R`` is taken as exact (a float64 radius)."""
    if param not in ("W", "KQ"):
        raise ValueError(f"path_point supports param 'W' or 'KQ', got {param!r}")
    D = data(ds)
    d = D.d
    with mp.workdps(dps):
        if param == "W":
            W0 = as_mp(init) if not isinstance(init, list) else init
            x = [W0[a][b] for a in range(d) for b in range(d)]
            m = d
        else:
            K0, Q0 = (as_mp(init[k]) if not isinstance(init[k], list) else init[k] for k in ("K", "Q"))
            m = len(K0[0])
            x = [y for row in K0 for y in row] + [y for row in Q0 for y in row]
        Rm = as_mp(float(R)) if not isinstance(R, mpmath.mpf) else R
        c = Rm * Rm / 2 if param == "W" else Rm
        grad, unpack = _problem(D, param, d, m, loss)
        # start on the sphere of the active constraint
        nx = mp.sqrt(mp.fdot(x, x))
        x = [xi * mp.sqrt(2 * c) / nx for xi in x]
        g = grad(x, dps)
        lam = max(mpmath.mpf(0), -mp.fdot(g, x) / mp.fdot(x, x))
        tol_res = mpmath.mpf(10) ** (-(dps // 2))

        def residual(x_, g_, lam_):
            r1 = [gi + lam_ * xi for gi, xi in zip(g_, x_)]
            r2 = mp.fdot(x_, x_) / 2 - c
            ng = mp.sqrt(mp.fdot(g_, g_))
            return r1, r2, max(mp.sqrt(mp.fdot(r1, r1)) / ng, abs(r2) / c)

        r1, r2, res = residual(x, g, lam)
        it = 0
        while True:
            H = hessian(lambda y: grad(y, dps + 10), x, dps)
            if res <= tol_res or it == max_iter:
                break
            it += 1
            n = len(x)
            A = [[H[a][b] + (lam if a == b else 0) for b in range(n)] + [x[a]] for a in range(n)]
            A.append(list(x) + [mpmath.mpf(0)])
            step = _pinv_solve(A, [-y for y in r1] + [-r2], dps)
            t = mpmath.mpf(1)
            for _ in range(30):  # backtracking on the residual
                xn = [xi + t * si for xi, si in zip(x, step[:n])]
                ln = lam + t * step[n]
                gn = grad(xn, dps)
                r1n, r2n, resn = residual(xn, gn, ln)
                if resn < res or t < mpmath.mpf(10) ** -6:
                    break
                t /= 2
            x, lam, g, r1, r2, res = xn, ln, gn, r1n, r2n, resn
        # second order: the Lagrangian's Hessian on the tangent space x^perp
        n = len(x)
        xx = mp.fdot(x, x)
        P = [[(1 if a == b else 0) - x[a] * x[b] / xx for b in range(n)] for a in range(n)]
        HL = [[H[a][b] + (lam if a == b else 0) for b in range(n)] for a in range(n)]
        M = matmul(matmul(P, HL), P)
        Ms = mpmath.matrix(n, n)
        for a in range(n):
            for b in range(n):
                Ms[a, b] = (M[a][b] + M[b][a]) / 2
        ev = sorted(mp.eigsy(Ms, eigvals_only=True))
        # drop the eigenvalue of the direction x itself (P x = 0): the one closest to 0 along x
        big = max(abs(e) for e in ev)
        evs = list(ev)
        evs.remove(min(evs, key=abs))
        curv = (min(evs) / big) if big > 0 and evs else mpmath.mpf(0)
        th = unpack(x)
        W = th["W"] if param == "W" else matmul(th["K"], transpose(th["Q"]))
        ok = bool(res <= tol_res and lam > 0 and curv >= -(mpmath.mpf(10) ** -(dps // 3)))
        return PathPoint(th, W, lam, loss_of(D, W, loss, dps), res, curv, it, ok)


def best_path_point(
    ds: Dataset | HPData, starts: list, R: Any, *, param: str = "W", loss: str = "logistic", dps: int = DPS
) -> PathPoint:
    """:func:`path_point` from each of ``starts``: the local minimiser of lowest loss, or (none qualifying) the point
    with the smallest residual (``local_min`` False) — a better approximation of the argmin than one start."""
    pts = [path_point(ds, x0, R, param=param, loss=loss, dps=dps) for x0 in starts]
    good = [p for p in pts if p.local_min]
    return min(good, key=lambda p: p.loss) if good else min(pts, key=lambda p: p.residual)
