r"""The comparison of GD runs with the max-margin SVMs they are predicted to approach (numpy, usable from Python;
``attsvm gd --target``): :class:`SVMTargets` solves the SVM of a data set and a selection once per distinct pair —
the Frobenius Att-SVM $W^{mm}_\alpha$ for ``W`` runs, the nuclear-norm Att-SVM$^\star$ for ``KQ``, the prompt SVM
$p^{mm}_\alpha$ for ``p`` (:data:`SVM_OF_PARAM`) — and compares a final iterate with it: the scale-safe
$\mathrm{corr}$ (:func:`attsvm.model.corr`) and, for the nuclear SVM, the gap of :meth:`SVMTargets.compare`, which
does not depend on which point of the solution set the solver returned.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..errors import SolverError
from ..model import corr
from ..norms import frobenius_norm, nuclear_norm
from ..svm import solve
from ..svm.constraints import build, program_of

__all__ = ["SVM_OF_PARAM", "SVMTargets"]


def _num(x: float) -> float | None:
    """A float, or None when not finite."""
    x = float(x)
    return x if np.isfinite(x) else None


#: the SVM whose solution --target compares with, by --param
SVM_OF_PARAM = {"W": "fro", "KQ": "nuc", "heads": "nuc", "p": "prompt"}


class SVMTargets:
    r"""SVM solutions to compare GD runs with (``attsvm gd --target``): the Frobenius Att-SVM $W^{mm}_\alpha$
    (``fro``), the nuclear-norm
        Att-SVM$^\star$ (``nuc``) or the prompt SVM $p^{mm}_\alpha$ (``prompt``) of one data set of the batch and a
        selection, each solved once per distinct (data set, selection) pair (:meth:`get`), and the comparison of a
        final iterate with it (:meth:`compare`)."""

    def __init__(self, ds, svm: str):
        self.items = list(ds) if ds.batched else [ds]
        self.svm = svm
        self.cache: dict[tuple[bytes, bytes], tuple[str, np.ndarray | None, float | None]] = {}
        self.errors: dict[int, str] = {}
        self._digest: dict[int, bytes] = {}

    def key(self, b: int, sel: np.ndarray) -> tuple[bytes, bytes]:
        """(digest of data set ``b``'s arrays, selection bytes): equal data sets of a batch share their solves."""
        if b not in self._digest:
            it = self.items[b]
            h = hashlib.sha256(it.kind.encode())
            for a in (it.X, it.Y, it.Z, it.v):
                h.update(repr(a.shape).encode())
                h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
            self._digest[b] = h.digest()
        return self._digest[b], np.ascontiguousarray(sel, dtype=np.int64).tobytes()

    def get(self, b: int, sel: np.ndarray) -> tuple[str, np.ndarray | None, float | None]:
        r"""``(status, solution, objective)``: ``"optimal"`` with the (d,d) matrix or (d,) vector and its norm
        ($\|W\|_F^2$, $\|W\|_\star$ or $\|p\|^2$); ``"infeasible"`` (Farkas-certified by the solver) or
        ``"solver-error"`` (:class:`~attsvm.errors.SolverError`, first message line in ``errors[b]``) with None."""
        k = self.key(b, sel)
        if k not in self.cache:
            it = self.items[b]
            sel = np.asarray(sel, dtype=np.int64).reshape(np.shape(it.opt))
            norm = "nuc" if self.svm == "nuc" else "fro"
            program = "prompt" if self.svm == "prompt" else program_of(it.kind)
            try:
                sol = solve(it, sel, norm, program)
            except SolverError as exc:
                self.errors.setdefault(b, str(exc).strip().splitlines()[0] if str(exc).strip() else "solver error")
                self.cache[k] = ("solver-error", None, None)
            else:
                if sol.status != "optimal":
                    self.cache[k] = ("infeasible", None, None)
                else:
                    vec = sol.extra["p"] if self.svm == "prompt" else sol.W
                    self.cache[k] = ("optimal", np.asarray(vec, dtype=np.float64), sol.objective)
        return self.cache[k]

    def compare(self, b: int, sel: np.ndarray, final: np.ndarray) -> tuple[str, float | None, float | None]:
        r"""``(status, corr, nuc_gap)`` of the final iterate against the SVM of selection ``sel``:
        $\mathrm{corr}=\langle W,W^{mm}\rangle/(\|W\|_F\|W^{mm}\|_F)$ (None unless optimal, or at a zero), and for the
        nuclear SVM $\|W\|_\star/(m(W)\,\mathrm{OPT}_\star)-1$ with $m(W)=\min_{i,t\ne\alpha_i}\langle W,A_{it}\rangle$:
        0 exactly when the direction of $W$ solves Att-SVM$^\star$, whose solution set may hold more than one point
        (None when $m(W)\le0$: $W$ does not separate the selection)."""
        status, sol, obj = self.get(b, sel)
        if status != "optimal" or sol is None:
            return status, None, None
        final = np.asarray(final, dtype=np.float64)
        c = _num(corr(final, sol, ndim=final.ndim))
        gap = None
        if self.svm == "nuc" and obj is not None and obj > 0:
            scale = frobenius_norm(final)
            it = self.items[b]
            cons = build(it, np.asarray(sel, dtype=np.int64).reshape(np.shape(it.opt)))
            if scale > 0 and np.isfinite(scale) and cons.m > 0:
                Wn = np.asarray(final, dtype=np.float64) / scale
                with np.errstate(all="ignore"):
                    m = float(np.min(cons.margins(Wn)))
                if m > 0 and np.isfinite(m):
                    gap = _num(nuclear_norm(Wn) / (m * obj) - 1.0)
        return status, c, gap
