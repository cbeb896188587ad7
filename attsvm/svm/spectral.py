r"""Rigorous (exact rational) checks on binary floating-point data: spectral-norm bounds and PSD tests.

Every float64 is a dyadic rational $m\,2^{e}$, so an array of floats equals an integer array times one
power of two, $a=N\,2^{e}$ (:func:`attsvm.svm.exact.to_integers`). Products and sums of
such arrays are then computed exactly in integers (python-flint ``fmpz_mat``), and a symmetric integer matrix
is proved positive definite by Sylvester's criterion: all leading principal minors $>0$, read off the diagonal
of a fraction-free LU factorisation without row exchanges (:func:`is_positive_definite`).

The spectral-norm certificate of Att-SVM$^\star$ (THEORY §2) is
$\|M\|_2\le1\iff I-M^\top M\succeq0$, with $M=\sum_j\lambda_jA_j$ built exactly from the data
(:func:`prove_spectral_le_one`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .exact import fmpz_matrix

__all__ = [
    "combine_exact",
    "is_positive_definite",
    "proved_bracket",
    "prove_spectral_le_one",
    "round_down",
    "round_up",
]


def is_positive_definite(S) -> bool:
    r"""Exact test that the symmetric integer matrix ``S`` (``fmpz_mat``) is positive definite.

    Sylvester: $S\succ0$ iff every leading principal minor is $>0$; in a fraction-free LU without row
    exchanges, $U_{kk}$ is the leading minor of order $k+1$. A row exchange means a leading minor vanished,
    so $S$ is not positive definite."""
    n = S.nrows()
    if n == 0:
        return True
    P, _L, _D, U = S.fflu()
    for i in range(n):
        for j in range(n):
            if int(P[i, j]) != (1 if i == j else 0):
                return False
    return all(int(U[k, k]) > 0 for k in range(n))


def combine_exact(Dn, Zn, lam_n: np.ndarray):
    r"""Exact $N=\sum_j\lambda_jD_jz_j^\top=D^\top\mathrm{diag}(\lambda)Z$ in integers (``fmpz_mat``).

    ``Dn``, ``Zn``: object arrays (m, d) of ints; ``lam_n``: object array (m,) of ints."""
    DL = np.asarray(Dn, dtype=object) * np.asarray(lam_n, dtype=object)[:, None]
    return fmpz_matrix(DL).transpose() * fmpz_matrix(Zn)


def prove_spectral_le_one(N, e: int) -> bool:
    r"""Prove $\|M\|_2\le1$ for $M=N\,2^{e}$ (``N`` an integer ``fmpz_mat``), exactly.

    Checks $I-M^\top M\succ0$, i.e. $2^{-2e}I-N^\top N\succ0$ ($e<0$) or $I-2^{2e}N^\top N\succ0$ ($e\ge0$).
    Strict definiteness is what Sylvester's criterion decides; it implies the claim."""
    import flint

    d = N.ncols()
    G = N.transpose() * N
    I = flint.fmpz_mat(d, d)
    for k in range(d):
        I[k, k] = 1
    S = I * (1 << (-2 * e)) - G if e < 0 else I - G * (1 << (2 * e))
    return is_positive_definite(S)


def round_down(x: Fraction) -> float:
    """The largest float $\\le x$."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def round_up(x: Fraction) -> float:
    """The smallest float $\\ge x$."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def proved_bracket(lower: Fraction, upper: Fraction | None, gap: float) -> dict:
    r"""The summary of a proved bracket $\text{lower}\le\mathrm{OPT}\le\text{upper}$ (``upper`` None: no primal
    bound was proved): ``proved`` (an upper bound exists and lower $\le$ upper), ``lower`` / ``upper`` rounded
    outwards to floats (``inf`` without an upper bound), ``rel_gap`` $=(\text{upper}-\text{lower})/\text{upper}$
    (0 when both are 0, ``inf`` when not proved) and ``verified`` (proved and ``rel_gap <= gap``)."""
    proved = upper is not None and lower <= upper
    lo = round_down(lower)
    up = round_up(upper) if upper is not None else math.inf
    rel = (up - lo) / up if proved and up > 0 else (0.0 if proved else math.inf)
    return {"verified": bool(proved and rel <= gap), "proved": bool(proved), "lower": lo, "upper": up,
            "rel_gap": float(rel)}  # fmt: skip
