r"""The two-part picture of next-token GD (arXiv 2403.08081; THEORY §7): $W_k\approx W^{fin}+R_kW^{svm}$.

With $S=\mathrm{span}\{(e_y-e_j)e_k^\top:\ y,j\text{ share an SCC of }\mathcal G^{(k)}\}$ (the equality directions
of the graph SVM), its orthogonal projector $P_S$ and $P_S^\perp=I-P_S$: the graph-SVM solution satisfies the
equalities, $\langle W^{svm},A\rangle=0$ on $S$, so $W^{svm}\perp S$ and $W^{fin}\in S$ — the decomposition is
orthogonal. The measures of an iterate $W$ (:func:`measures`, batched over leading axes):

.. math::
    1-\mathrm{corr}(W,W^{svm}),\qquad 1-\mathrm{corr}(P_S^\perp W,W^{svm}),\qquad
    \|P_SW-W^{fin}\|_F,\qquad \max_i\log\textstyle\sum_{t\notin\mathcal C_i}s_{it}(W),

$\mathcal C_i$ the visible positions of sample $i$ whose token lies in the label's SCC (the highest-priority SCC
present, :func:`~attsvm.ntp.graph.top_scc_mask`): the *hard retrieval* of the paper is the last quantity
$\to-\infty$, its *soft composition* the finite part $P_SW\to W^{fin}$. The attention mass outside
$\mathcal C_i$ is computed as a log-sum-exp of log-softmax values, exact far past float64 underflow.

:func:`reference` computes the objects once per data set: $W^{svm}$ (the certified Frobenius graph SVM,
:func:`~attsvm.ntp.svm.solve_graph_svm`), optionally the nuclear-norm one, $W^{fin}$ with its proved radius
(:func:`~attsvm.ntp.finite.finite_part_of`), an orthonormal basis of $S$ and the masks $\mathcal C_i$.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..tolerances import tol
from .data import NTPData


@dataclass(frozen=True)
class Reference:
    r"""What GD on one next-token data set is compared with (module docstring).

    ``W_svm`` (d,d) the Frobenius graph SVM (None when infeasible), ``svm`` its solution (status, certificate),
    ``W_nuc`` / ``nuc`` the nuclear-norm graph SVM (None unless asked for), ``W_fin`` (d,d) and ``fin`` its
    :class:`~attsvm.ntp.finite.FinitePart` (proved radius), ``basis`` (r, d*d) an orthonormal basis of $S$,
    ``top`` (n,T) bool the label-SCC positions $\mathcal C_i$."""

    W_svm: np.ndarray | None
    svm: Any
    W_nuc: np.ndarray | None
    nuc: Any
    W_fin: np.ndarray
    fin: Any
    basis: np.ndarray
    top: np.ndarray

    @property
    def feasible(self) -> bool:
        return self.W_svm is not None

    @property
    def certified(self) -> bool:
        """The Frobenius graph SVM carries a verified exact certificate and the finite part a proved radius."""
        cert = getattr(self.svm, "certificate", None) or {}
        return self.feasible and bool(cert.get("verified")) and bool(self.fin.verified)


def equality_basis(data: NTPData) -> np.ndarray:
    r"""An orthonormal basis (r, d*d) of $S$ (rows of the SVD of the flattened equality directions; singular values
    above ``tol("rank")`` relative)."""
    from .graph import graph_constraints

    gc = graph_constraints(data)
    d = data.d
    if len(gc.eq) == 0:
        return np.zeros((0, d * d))
    F = np.einsum("md,me->mde", gc.D_eq, gc.Z_eq).reshape(len(gc.eq), d * d)
    _, sv, Vt = np.linalg.svd(F, full_matrices=False)
    return Vt[: int(np.sum(sv > tol("rank") * sv[0]))]


def reference(data: NTPData, certify: bool = True, nuclear: bool = False) -> Reference:
    r"""The graph SVM(s), the finite part and the projector data of one next-token data set (module docstring)."""
    from .finite import finite_part_of
    from .graph import top_scc_mask
    from .svm import solve_graph_svm

    if getattr(data, "kind", None) != "ntp" or data.batched:
        raise InputError("reference: a single next-token data set is needed")
    sol = solve_graph_svm(data, "fro", certify=certify)
    W = sol.W if sol.status == "optimal" else None
    nuc = solve_graph_svm(data, "nuc", certify=certify) if nuclear else None
    Wn = None if nuc is None or nuc.status != "optimal" else nuc.W
    fin = finite_part_of(data, certify=certify)
    return Reference(W, sol, Wn, nuc, fin.W, fin, equality_basis(data), top_scc_mask(data))


def log_outside_mass(data: NTPData, W: np.ndarray, top: np.ndarray) -> np.ndarray:
    r"""$\max_i\log\sum_{t\notin\mathcal C_i}s_{it}(W)=\max_i[\mathrm{LSE}_{t\notin\mathcal C_i}a_{it}-
    \mathrm{LSE}_ta_{it}]$ over the visible $t$, for ``W`` (..., d, d) (natural log; $-\infty$ when every visible
    position is in $\mathcal C_i$)."""
    from ..model import logits
    from .loss import lse

    a = logits(data.X, W, data.Z)
    vis = np.ones(top.shape, bool) if data.visible is None else np.asarray(data.visible)
    return (lse(a, vis & ~top) - lse(a, vis)).max(axis=-1)


def split(ref: Reference, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""$(P_SW,\ P_S^\perp W)$ for ``W`` (..., d, d)."""
    W = np.asarray(W, dtype=np.float64)
    flat = W.reshape(*W.shape[:-2], -1)
    proj = ((flat @ ref.basis.T) @ ref.basis).reshape(W.shape)
    return proj, W - proj


def nuclear_excess(data: NTPData, ref: Reference, W: np.ndarray) -> np.ndarray:
    r"""$\|P_S^\perp W\|_\star/(m\cdot\mathrm{OPT}_\star)-1$ for ``W`` (..., d, d), $m$ the smallest inequality margin
    of $P_S^\perp W$ (which meets the equalities exactly): 0 exactly when its direction solves the nuclear-norm graph
    SVM, whichever of its solutions a solver returns (NaN without a certified optimum or with a non-positive margin)."""
    from .graph import graph_constraints

    W = np.asarray(W, dtype=np.float64)
    cert = (ref.nuc.certificate or {}) if ref.nuc is not None else {}
    if ref.W_nuc is None or not cert.get("verified"):
        return np.full(W.shape[:-2], np.nan)
    gc = graph_constraints(data)
    perp = split(ref, W)[1]
    marg = np.einsum("md,...de,me->...m", gc.D_in, perp, gc.Z_in).min(axis=-1)
    nuc = np.linalg.norm(perp, "nuc", axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(marg > 0, nuc / (marg * float(ref.nuc.objective)) - 1.0, np.nan)


def measures(data: NTPData, ref: Reference, W: np.ndarray) -> dict[str, np.ndarray]:
    r"""The measures of the module docstring for iterates ``W`` (..., d, d): ``one_minus_corr``,
    ``one_minus_corr_perp`` (NaN when $P_S^\perp W=0$), ``finite_distance``, ``log_outside_mass`` and
    ``R`` $=\langle W-W^{fin},W^{svm}\rangle/\|W^{svm}\|_F^2$ (arrays of the leading shape)."""
    from ..model import corr

    W = np.asarray(W, dtype=np.float64)
    proj, perp = split(ref, W)
    out = {
        "finite_distance": np.linalg.norm((proj - ref.W_fin).reshape(*W.shape[:-2], -1), axis=-1),
        "log_outside_mass": log_outside_mass(data, W, ref.top),
    }
    if ref.W_svm is not None:
        out["one_minus_corr"] = 1.0 - corr(W, ref.W_svm)
        out["one_minus_corr_perp"] = 1.0 - corr(perp, ref.W_svm)
        out["R"] = np.sum((W - ref.W_fin) * ref.W_svm, axis=(-2, -1)) / np.sum(ref.W_svm**2)
    return out


@dataclass(frozen=True)
class Sweep:
    r"""GD on every data set of a batch with the measures of the module docstring at the recorded iterates:
    ``steps`` (R,) the recorded iterations, ``measures`` name → (R, B) arrays (NaN for a data set without a
    feasible graph SVM), ``refs`` the B :class:`Reference` objects, ``result`` the engine's
    :class:`~attsvm.gd.engine.GDResult`, ``init`` the (B, d, d) initial points (for a replay)."""

    steps: np.ndarray
    measures: dict[str, np.ndarray]
    refs: list[Reference]
    result: Any
    init: np.ndarray


def sweep(
    batch: NTPData, *, record_every: int, certify: bool = True, seed: int = 0, init: str = "linear", **settings: Any
) -> Sweep:
    r"""Run :func:`attsvm.gd.run` on $W$ (``settings``: ``algo``, ``lr``, ``steps``, ...) from ``init`` drawn with
    ``seed``, for the whole batch at once, and measure every recorded iterate against its data set's
    :func:`reference`."""
    from .. import gd
    from ..gd.init import initial_params

    B, d = batch.batch_size, batch.d
    W0 = initial_params("W", init, B, d, d, seed)["W"]
    res = gd.run(batch, param="W", init=W0, record_every=record_every, record_params=True, **settings)
    Ws = np.asarray(res.trajectory["W"])  # (R, B, d, d)
    refs = [reference(batch[b], certify=certify) for b in range(B)]
    names = ("one_minus_corr", "one_minus_corr_perp", "finite_distance", "log_outside_mass", "R")
    out = {k: np.full(Ws.shape[:2], np.nan) for k in names}
    for b, ref in enumerate(refs):
        for k, v in measures(batch[b], ref, Ws[:, b]).items():
            out[k][:, b] = v
    return Sweep(np.asarray(res.trajectory["step"]), out, refs, res, np.asarray(W0))


def converged(values: np.ndarray, eps: float, rise: float) -> list[bool | None]:
    r"""Per run (columns of ``values`` (R, B)): True when the last value is $\le$ ``eps`` and no step between
    consecutive records of the second half increases it by more than ``rise``; None (undecided) for a NaN column."""
    v = np.asarray(values, dtype=np.float64)
    tail = v[v.shape[0] // 2 :]
    out: list[bool | None] = []
    for b in range(v.shape[1]):
        if not np.all(np.isfinite(tail[:, b]) | (tail[:, b] == -np.inf)):
            out.append(None)
            continue
        with np.errstate(invalid="ignore"):
            inc = np.diff(tail[:, b])
        up = float(np.nanmax(inc)) if inc.size and np.any(np.isfinite(inc)) else -np.inf
        out.append(bool(v[-1, b] <= eps and up <= rise))
    return out


def replayed(
    data: NTPData, ref: Reference, W0: np.ndarray, *, steps: int, record_every: int, **settings: Any
) -> tuple[dict[str, np.ndarray], float, float]:
    r"""The run from ``W0`` replayed at 50 digits (:func:`attsvm.highprec.replay`, the same algorithm written from its
    definition), its recorded iterates rounded to float64 and measured (:func:`measures`, (R,) arrays); with the
    largest relative difference of the recorded iterates from a second replay at 70 digits (the replay's own
    accuracy) and from the float64 engine (how far rounding moved the float64 run: normalised GD on next-token
    data amplifies it, as the chatter inside $S$ takes the sign of tiny gradient components)."""
    from .. import gd
    from .. import highprec as hp

    def rec(dps: int) -> np.ndarray:
        rep = hp.replay(data, W0, param="W", steps=steps, record_every=record_every, loss="nll", dps=dps, **settings)
        return np.stack([rep.array("W", j) for j in range(len(rep.recorded))])

    def rel(A: np.ndarray, B: np.ndarray) -> float:
        diff = np.linalg.norm((A - B).reshape(len(A), -1), axis=-1)
        return float(np.max(diff / np.maximum(np.linalg.norm(B.reshape(len(B), -1), axis=-1), 1e-300)))

    W50, W70 = rec(50), rec(70)
    res = gd.run(data, param="W", init=W0, steps=steps, record_every=record_every, record_params=True, **settings)
    return measures(data, ref, W50), rel(W50, W70), rel(np.asarray(res.trajectory["W"])[:, 0], W50)


#: records per run of :func:`sweep_outcome` (the trend test looks at the second half)
RECORDS = 8


def _gd_settings(h: dict[str, Any]) -> dict[str, Any]:
    return {"algo": h["algo"], "lr": h["lr"], "steps": int(h["steps"])}


def sweep_outcome(batch: NTPData, seed: int, h: dict[str, Any], measure: str) -> dict[str, Any]:
    r"""An empirical claim's outcome as the keyword arguments of :class:`attsvm.claims.Outcome`: :func:`sweep` with the
    hypotheses' GD settings (``algo``, ``lr`` a number or ``"1/L"``, ``steps``), one run per data set, passing by
    :func:`converged` on ``measure`` with ``eps`` and ``rise``; a run whose references are not certified is
    undecided."""
    st = _gd_settings(h)
    sw = sweep(batch, record_every=st["steps"] // RECORDS, seed=seed, **st)
    vals = sw.measures[measure]
    runs = converged(vals, float(h["eps"]), float(h["rise"]))
    for b, ref in enumerate(sw.refs):
        if not ref.certified:
            runs[b] = None
    fin = vals[-1][np.isfinite(vals[-1])]
    return dict(
        ok=all(r is not False for r in runs),
        margin=float(h["eps"] - np.max(fin)) if fin.size else 0.0,
        runs=runs,
        detail={
            "measured": f"per run: {measure} at {sw.steps.tolist()} of {st}; passes when it ends <= {h['eps']} and "
            f"rises by at most {h['rise']} between records of the second half",
            "final": np.round(vals[-1], 6).tolist(),
            "final_median": float(np.median(fin)) if fin.size else None,
            "certified_references": int(sum(r.certified for r in sw.refs)),
        },
    )


def confirm_outcome(data: NTPData, B: int, b: int, seed: int, h: dict[str, Any], measure: str) -> dict[str, Any]:
    r"""Confirm run ``b`` of :func:`sweep_outcome` (batch size ``B``; keyword arguments of
    :class:`attsvm.claims.Outcome`): replayed at 50 digits (:func:`replayed`; the 70-digit replay must agree to
    ``tol("replay_rtol")``), its records measured again, the failure required to persist by more than the proved
    radius of $W^{fin}$ (``finite_distance``) plus ``tol("rounding")``."""
    from ..gd.init import initial_params
    from .loss import smoothness_constant

    st = _gd_settings(h)
    W0 = initial_params("W", "linear", B, data.d, data.d, seed)["W"][b]
    ref = reference(data)
    lr = st.pop("lr")
    if lr == "1/L":
        lr = float(1.0 / smoothness_constant(data.X, data.Z, data.visible))
    vals, rel_hp, rel_f64 = replayed(data, ref, W0, record_every=st["steps"] // RECORDS, lr=lr, **st)
    if rel_hp > tol("replay_rtol"):
        return dict(ok=True, inconclusive=f"the 50- and 70-digit replays disagree (relative {rel_hp:.1e})")
    slack = (float(ref.fin.radius) if measure == "finite_distance" else 0.0) + tol("rounding")
    v = np.asarray(vals[measure], dtype=np.float64)
    lower = v - slack  # the measure can be smaller by at most the slack
    failed = converged(lower[:, None], float(h["eps"]), float(h["rise"]) + 2 * slack)[0] is False
    return dict(
        ok=not failed,
        margin=float(h["eps"] - lower[-1]),
        detail={"replayed": v.tolist(), "replay_50_vs_70": rel_hp, "float64_vs_replay": rel_f64, "slack": slack},
    )
