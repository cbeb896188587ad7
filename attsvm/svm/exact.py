r"""Exact integer forms of binary floating-point data (the one float -> integer converter of :mod:`attsvm.svm`).

Every finite float64 is a dyadic rational $m\,2^{e}$ ($m$ an integer, $|m|<2^{53}$), so an array of floats equals
an integer array times one power of two,

.. math:: a = N\,2^{e}\qquad(N\in\mathbb Z^{\text{shape}},\ e\in\mathbb Z\ \text{the smallest exponent needed}),

(:func:`to_integers`). The Att-SVM features $A_j=D_jz_j^\top$, $D_j=x_{j\alpha}-x_{jt}$, are then
$A_j=D^{\mathbb Z}_j(z^{\mathbb Z}_j)^\top\,2^{e_X+e_Z}$ with integer $D^{\mathbb Z}=N_X[\alpha]-N_X[t]$ and
$z^{\mathbb Z}=N_Z$ (:func:`exact_features`), and products of such arrays are computed exactly with python-flint
``fmpz_mat`` (:func:`fmpz_matrix`). Used by the exact certificates (:mod:`.certificate`), the exact Farkas test
(:mod:`.farkas`) and the spectral proofs (:mod:`.spectral`, :mod:`.nuclear`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..data import Dataset
from .constraints import Constraints


def to_integers(a: Any) -> tuple[np.ndarray, int]:
    r"""Exact integer form of a float array: ``(N, e)`` with ``a == N * 2**e`` exactly.

    ``N`` is an object array of Python ints (same shape as ``a``); $e$ is the smallest exponent of the nonzero
    entries after removing trailing zero bits (so $N$ is as small as possible); an all-zero array gives
    ``(zeros, 0)``. Non-finite entries raise :class:`ValueError`."""
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError("to_integers: non-finite entry")
    mant, ex = np.frexp(a)
    M = (mant * 2.0**53).astype(np.int64)  # exact: |mant| < 1, a = M * 2**(ex - 53)
    nz = M != 0
    if not np.any(nz):
        return np.zeros(a.shape, dtype=object), 0
    low = np.where(nz, np.abs(M) & -np.abs(M), 1)  # lowest set bit, a power of two <= 2**53 (exact in float64)
    tz = (np.frexp(low.astype(np.float64))[1] - 1).astype(np.int64)
    M = np.where(nz, M >> np.where(nz, tz, 0), 0)  # odd mantissas (arithmetic shift keeps the sign)
    e = np.where(nz, ex.astype(np.int64) - 53 + tz, 0)
    e0 = int(e[nz].min())
    shift = np.where(nz, e - e0, 0)
    bits = np.where(nz, 54 + shift, 0)
    if int(bits.max()) < 63:  # fits in int64: one vectorised shift, then Python ints
        return (M << shift).astype(object), e0
    out = np.array(
        [(int(m) << int(s)) if m else 0 for m, s in zip(M.ravel().tolist(), shift.ravel().tolist())], dtype=object
    )
    return out.reshape(a.shape), e0


def pow2(e: int) -> Fraction:
    """$2^e$ as an exact fraction."""
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def fmpz_matrix(rows: Any):
    """An ``flint.fmpz_mat`` from a 2-D array (object array of Python ints, or integer-valued)."""
    from flint import fmpz_mat

    rows = np.asarray(rows, dtype=object)
    if rows.ndim != 2:
        raise ValueError(f"fmpz_matrix: expected a 2-D array, got shape {rows.shape}")
    r, c = rows.shape
    return fmpz_mat(r, c, [int(x) for x in rows.ravel().tolist()])


def exact_features(ds: Dataset, c: Constraints) -> tuple[np.ndarray, int, np.ndarray, int]:
    r"""Exact integer features of the constraints ``c`` of ``ds``: ``(Dint, eD, Zint, eZ)`` with
    $D_j=D^{\mathbb Z}_j\,2^{e_D}$ and $z_j=z^{\mathbb Z}_j\,2^{e_Z}$ exactly, both (m, d) object arrays, so that
    $A_j=D^{\mathbb Z}_j(z^{\mathbb Z}_j)^\top 2^{e_D+e_Z}$. The differences are formed in integers (never as
    float subtractions)."""
    f = ds.flat()
    Xn, eD = to_integers(f.X)
    Zn, eZ = to_integers(f.Z)
    alpha = np.asarray(c.alpha).reshape(-1)
    tok = np.asarray(c.tok).reshape(-1)
    Dint = Xn[c.row, alpha[c.row]] - Xn[c.row, tok]
    return Dint, eD, Zn[c.row], eZ
