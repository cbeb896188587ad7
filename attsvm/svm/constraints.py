r"""Constraint features of the attention SVMs, built vectorised (THEORY §2).

For a selection $\alpha$ the Att-SVM constraints are indexed by pairs $(i,t)$, $t\ne\alpha_i$ (and $t$
visible to the query, for causal data). With $D_{it}=x_{i\alpha_i}-x_{it}$ the constraint matrix is
$A_{it}=D_{it}z_i^\top$, $\langle W,A_{it}\rangle=D_{it}^\top Wz_i$, and the dual Gram matrix is

.. math:: G_{(it),(j\tau)}=(D_{it}^\top D_{j\tau})\,(z_i^\top z_j)=[(DD^\top)\circ(Z_cZ_c^\top)]_{(it),(j\tau)}.

Sequence/causal data enter through their flat view (one row per query), so the same builder serves
the sequence and causal SVMs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data import Dataset
from ..errors import InputError


@dataclass(frozen=True)
class Constraints:
    r"""All constraints of one selection. ``D`` (..., m, d) token differences, ``Zc`` (..., m, d) the query of
    each constraint, ``row`` (m,) flat row index $i$ (an input, or a query $(i,k)$ of sequence data),
    ``tok`` (..., m) token index $t$
    (differs across a batch when the selections differ); ``n_rows``, ``T`` the flat shape;
    ``alpha`` (..., N) the selection."""

    D: np.ndarray
    Zc: np.ndarray
    row: np.ndarray
    tok: np.ndarray
    n_rows: int
    T: int
    alpha: np.ndarray

    @property
    def m(self) -> int:
        return self.D.shape[-2]

    def margins(self, W: np.ndarray) -> np.ndarray:
        r"""$\langle W,A_{it}\rangle=D_{it}^\top Wz_i$ for every constraint, shape (..., m)."""
        return np.einsum("...md,...de,...me->...m", self.D, W, self.Zc)

    def combine(self, lam: np.ndarray) -> np.ndarray:
        r"""$\sum_j\lambda_jA_j=D^\top\mathrm{diag}(\lambda)Z_c$, shape (..., d, d)."""
        return np.einsum("...m,...md,...me->...de", lam, self.D, self.Zc)

    def gram(self, idx: np.ndarray | None = None) -> np.ndarray:
        r"""$G=(DD^\top)\circ(Z_cZ_c^\top)$, restricted to constraints ``idx`` if given (single data set)."""
        D, Zc = (self.D, self.Zc) if idx is None else (self.D[..., idx, :], self.Zc[..., idx, :])
        return (D @ np.swapaxes(D, -1, -2)) * (Zc @ np.swapaxes(Zc, -1, -2))

    def to_grid(self, vals: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """Scatter per-constraint values (..., m) into an (..., n_rows, T) array (``fill`` elsewhere)."""
        out = np.full((*vals.shape[:-1], self.n_rows, self.T), fill, dtype=np.result_type(vals, float))
        if self.m == 0:
            return out
        flat = out.reshape(-1, self.n_rows * self.T)
        idx = np.broadcast_to(self.row * self.T + self.tok, vals.shape).reshape(-1, self.m)
        np.put_along_axis(flat, idx, vals.reshape(-1, self.m), axis=-1)
        return flat.reshape(out.shape)


def program_of(kind: str) -> str:
    """The Att-SVM program of a data kind: ``seq`` for sequence data, ``causal`` for causal, else ``attsvm``."""
    return {"sequence": "seq", "causal": "causal"}.get(kind, "attsvm")


def build(ds: Dataset, alpha: np.ndarray | None = None) -> Constraints:
    r"""Constraints of Att-SVM($\alpha$) for ``ds`` (single or batch; default $\alpha$ = ``ds.selection``)."""
    f = ds.flat()
    a = f.alpha if alpha is None else np.asarray(alpha, dtype=np.int64)
    if alpha is not None:
        a = a.reshape(f.alpha.shape) if a.size == f.alpha.size else a
        if a.shape != f.alpha.shape:
            raise InputError(f"field 'alpha' must have shape {f.alpha.shape}, got {a.shape}")
        if np.any(a < 0) or np.any(a >= ds.T):
            raise InputError(f"field 'alpha' out of range (must lie in [0,{ds.T}))")
    N, T = f.X.shape[-3], f.X.shape[-2]
    valid = np.ones((N, T), dtype=bool) if f.mask is None else np.array(np.broadcast_to(f.mask, f.X.shape[:-1]))
    if f.mask is not None:
        valid = valid.reshape(-1, N, T)[0]
        sel_vis = np.take_along_axis(np.broadcast_to(valid, a.shape + (T,)), a[..., None], -1)[..., 0]
        if not np.all(sel_vis):
            raise InputError("field 'alpha' selects a token the query cannot see (causal: alpha[i,k] <= k)")
    # alpha may differ across the batch, but the count per row is the same: T-1 (or visible-1).
    lead = a.shape[:-1]
    t_all = np.broadcast_to(np.arange(T), (*lead, N, T))
    keep = (t_all != a[..., None]) & valid
    # order within a row by token index, skipping alpha: same pattern count per row across the batch
    counts = keep.sum(-1)
    if counts.ndim > 1 and not np.all(counts == counts.reshape(-1, N)[0]):
        raise InputError("batched constraints must have the same count per row")
    flat_keep = keep.reshape(-1, N * T)
    pos = np.nonzero(flat_keep)[1].reshape(*lead, -1)
    row, tok = pos // T, pos % T
    Xsel = np.take_along_axis(f.X, a[..., None, None], axis=-2)[..., 0, :]  # (..., N, d)
    Xflat = f.X.reshape(*f.X.shape[:-3], N * T, f.X.shape[-1])
    D = np.take_along_axis(Xsel, row[..., None], axis=-2) - np.take_along_axis(Xflat, pos[..., None], axis=-2)
    Zc = np.take_along_axis(np.broadcast_to(f.Z, (*lead, N, f.Z.shape[-1])), row[..., None], axis=-2)
    row0 = row[(0,) * len(lead)] if lead else row  # the same for every batch item (same count per row)
    return Constraints(D, Zc, row0, tok, N, T, a)
