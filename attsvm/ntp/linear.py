r"""Linear next-token prediction (Thrampoulidis, arXiv 2402.18551, Thms 1–2) as next-token attention data
(claim ``ntp-linear-control``, THEORY §7).

The linear model
----------------
A decoder $W\in\mathbb R^{V\times d_h}$ on $m$ fixed contexts $h_1..h_m\in\mathbb R^{d_h}$; context $j$ occurs with
next tokens $z$ from its support $S_j\subseteq[V]$, $c_{j,z}>0$ times ($p_{j,z}=c_{j,z}/\sum_zc_{j,z}$ the empirical
distribution). The loss is the cross-entropy
$\mathrm{CE}(W)=-\frac1n\sum_j\sum_{z\in S_j}c_{j,z}\log\mathbb S(Wh_j)_z$, $n=\sum_{j,z}c_{j,z}$. The paper's
conditions and limits:

- *NTP-compatible*: some $W$ has $(e_z-e_{z'})^\top Wh_j=\log(p_{j,z}/p_{j,z'})$ for all $z,z'\in S_j$, all $j$.
  Then $W^\star$ is the unique such point of $\mathcal F=\mathrm{span}\{(e_z-e_{z'})h_j^\top:z,z'\in S_j\}$
  (the equations fix the component in $\mathcal F$, which is the row space of the equations).
- *NTP-separable*: some $W$ has $(e_z-e_{z'})^\top Wh_j=0$ ($z,z'\in S_j$) and $(e_z-e_v)^\top Wh_j\ge1$
  ($z\in S_j$, $v\notin S_j$). $W^{mm}$ is the minimum-Frobenius-norm such $W$ (the NTP-SVM).
- Thms 1–2 (reconstructed): under both, GD on CE has $W_k/\|W_k\|\to W^{mm}/\|W^{mm}\|$ and
  $P_{\mathcal F}(W_k)\to W^\star$.

With $m\le d_h$ linearly independent contexts both conditions hold for any counts ($Wh_j$ can be any vector of
$\mathbb R^V$ for each $j$ independently: take $(Wh_j)_z=\log p_{j,z}$, resp. $=[z\in S_j]$), which is the regime of
:func:`linear_ntp`; :func:`from_counts` builds any instance, :func:`is_compatible` and :func:`is_separable` decide
the conditions.

The encoding as attention data (:class:`~attsvm.ntp.data.NTPData`, ``query_visible=False``)
-------------------------------------------------------------------------------------------
Dimension $d=V+d_h$. Vocabulary: the $V$ output words $e_v=(\mathbf e_v,0)$ (unit vectors in the first $V$
coordinates), then the $m$ contexts $(0,h_j)$ (ids $V+j$). Each training sample (one per count) is the sequence
$(0,1,\dots,V-1,V+j)$ — all output words, then its context as the query, which is not attended — with label $z$.
For $W'\in\mathbb R^{d\times d}$ the logit of word $v$ is $e_v^\top W'(0,h_j)=(W'_{[:V,\,V:]}h_j)_v$: only the
block ``W'[:V, V:]`` (rows $<V$, columns $\ge V$) matters and it *is* the decoder $W$ (:meth:`LinearNTP.block`,
:meth:`LinearNTP.pad`), the attention loss is $\mathrm{CE}(W)$, the priority graph of context $j$ has $S_j$ as one
SCC above the other words (edges $z\to v$ for $z\in S_j$, every $v\ne z$), and the graph SVM is the NTP-SVM (its
equality directions are the $(e_z-e_{z'})(0,h_j)^\top$, so $S=\mathcal F$ padded and $W^{fin}=W^\star$ padded).

Exactness
---------
:func:`is_compatible` is exact: with $\log(p_{j,z}/p_{j,z'})=\sum_{\text{primes }\pi}\log\pi\,
[v_\pi(c_{j,z})-v_\pi(c_{j,z'})]$ ($v_\pi$ the $\pi$-adic valuation) and the logarithms of the primes linearly
independent over $\mathbb Q$, the right-hand side lies in the (rational) range of the equations iff each integer
vector $b^{(\pi)}$ does: an exact rank test per prime (python-flint ``fmpz_mat``, the contexts as exact integers
times a power of two). :func:`log_odds_solution` then solves the equations at 50 digits (mpmath, the minimum-norm
solution through an exactly independent subset of them) and checks every residual before rounding.
:func:`is_separable` is an LP (scipy HiGHS; a status other than optimal or infeasible is a
:class:`~attsvm.errors.SolverError`; a feasible point's residuals are checked).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, SolverError
from ..svm.exact import to_integers
from .data import NTPData

__all__ = [
    "LinearNTP",
    "decompose",
    "from_counts",
    "linear_ntp",
    "is_compatible",
    "is_separable",
    "log_odds_solution",
    "DPS",
]

DPS = 50


@dataclass(frozen=True)
class LinearNTP:
    r"""The linear-NTP instance behind encoded data: ``H`` (m, d_h) contexts, ``counts`` (m, V) int64 $c_{j,z}$."""

    H: np.ndarray
    counts: np.ndarray

    @property
    def V(self) -> int:
        return self.counts.shape[1]

    @property
    def dh(self) -> int:
        return self.H.shape[1]

    @property
    def m(self) -> int:
        return self.H.shape[0]

    @property
    def support(self) -> np.ndarray:
        r"""(m, V) bool: $z\in S_j$."""
        return self.counts > 0

    @property
    def probabilities(self) -> np.ndarray:
        r"""(m, V) $p_{j,z}$ (rows of unused contexts are zero)."""
        tot = self.counts.sum(axis=1, keepdims=True)
        return np.where(tot > 0, self.counts / np.where(tot > 0, tot, 1), 0.0)

    def block(self, W: np.ndarray) -> np.ndarray:
        """The decoder ``W[:V, V:]`` (V, d_h) of an attention matrix (V+d_h, V+d_h)."""
        W = np.asarray(W, dtype=np.float64)
        d = self.V + self.dh
        if W.shape != (d, d):
            raise InputError(f"expected a ({d},{d}) attention matrix, got {W.shape}")
        return W[: self.V, self.V :].copy()

    def pad(self, Wdec: np.ndarray) -> np.ndarray:
        """The attention matrix (V+d_h, V+d_h) that is ``Wdec`` (V, d_h) in the block ``[:V, V:]`` and 0 elsewhere."""
        Wdec = np.asarray(Wdec, dtype=np.float64)
        if Wdec.shape != (self.V, self.dh):
            raise InputError(f"expected a ({self.V},{self.dh}) decoder, got {Wdec.shape}")
        out = np.zeros((self.V + self.dh, self.V + self.dh))
        out[: self.V, self.V :] = Wdec
        return out

    def cross_entropy(self, Wdec: np.ndarray) -> float:
        r"""$\mathrm{CE}(W)=-\frac1n\sum_{j,z}c_{j,z}\log\mathbb S(Wh_j)_z$ (log-softmax, max-shifted)."""
        a = self.H @ np.asarray(Wdec, dtype=np.float64).T  # (m, V): a[j] = W h_j
        mx = a.max(axis=1, keepdims=True)
        logp = a - mx - np.log(np.sum(np.exp(a - mx), axis=1, keepdims=True))
        return float(-np.sum(np.where(self.counts > 0, self.counts * logp, 0.0)) / self.counts.sum())


def from_counts(H: np.ndarray, counts: np.ndarray) -> NTPData:
    r"""The attention encoding (module docstring) of contexts ``H`` (m, d_h) and counts ``counts`` (m, V) of
    nonnegative integers: one sample per count, context by context, labels in increasing order."""
    H = np.asarray(H, dtype=np.float64)
    c = np.asarray(counts)
    if H.ndim != 2 or c.ndim != 2 or c.shape[0] != H.shape[0]:
        raise InputError(f"expected H (m,dh) and counts (m,V), got {H.shape} and {c.shape}")
    if c.dtype.kind not in "iu" or np.any(c < 0) or c.sum() == 0:
        raise InputError("counts must be nonnegative integers, not all zero")
    if not np.all(np.isfinite(H)):
        raise InputError("H has a non-finite entry")
    m, dh = H.shape
    V = c.shape[1]
    if V < 2:
        raise InputError(f"linear NTP needs V >= 2 output words, got V={V}")
    E = np.zeros((V + m, V + dh))
    E[:V, :V] = np.eye(V)
    E[V:, V:] = H
    ctx, lab = np.nonzero(c)
    reps = c[ctx, lab].astype(np.int64)
    ctx, lab = np.repeat(ctx, reps), np.repeat(lab, reps)
    tokens = np.concatenate([np.tile(np.arange(V), (len(ctx), 1)), (V + ctx)[:, None]], axis=1).astype(np.int64)
    return NTPData(E, tokens, lab.astype(np.int64), query_visible=False)


def linear_ntp(V: int, dh: int, m: int, support: int = 2, samples_per_context: int | None = None, seed=0) -> NTPData:
    r"""Random linear-NTP data: $m\le d_h$ generic contexts ($h_j=g_j/\|g_j\|$, $g_j\sim\mathcal N(0,I)$), each with a
    uniformly random support of ``support`` words and counts $1+\mathrm{Multinomial}(N-|S|,\text{uniform})$ summing
    to $N=$ ``samples_per_context`` (default $3\cdot$``support``). Linearly independent contexts make the data
    NTP-compatible and NTP-separable whatever the counts (module docstring); $m>d_h$ is refused (neither holds
    generically then: build such data with :func:`from_counts`)."""
    for name, x, lo in (("V", V, 2), ("dh", dh, 1), ("m", m, 1), ("support", support, 1)):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or int(x) < lo:
            raise InputError(f"{name} must be an integer >= {lo}, got {x!r}")
    if support > V:
        raise InputError(f"support must be at most V={V}, got {support}")
    if m > dh:
        raise InputError(f"linear_ntp draws m <= dh generic contexts (compatible and separable), got m={m}, dh={dh}")
    N = 3 * support if samples_per_context is None else samples_per_context
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < support:
        raise InputError(f"samples_per_context must be an integer >= support={support}, got {N!r}")
    r = np.random.default_rng(seed)
    G = r.standard_normal((m, dh))
    H = G / np.linalg.norm(G, axis=1, keepdims=True)
    counts = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = r.choice(V, size=support, replace=False)
        counts[j, S] = 1 + r.multinomial(int(N) - support, np.full(support, 1.0 / support))
    return from_counts(H, counts)


def decompose(data: NTPData) -> LinearNTP:
    r"""Read the contexts and counts back from encoded data (the inverse of :func:`from_counts`); an
    :class:`InputError` when ``data`` is not of that form."""
    if not isinstance(data, NTPData) or data.batched:
        raise InputError("linear NTP takes a single next-token data set (attsvm.ntp.NTPData)")
    if data.query_visible:
        raise InputError("linear NTP data have an invisible query (query_visible=False)")
    V = data.T - 1
    K, d = data.K, data.d
    m, dh = K - V, d - V
    E = data.E
    if m < 1 or dh < 1:
        raise InputError(f"not linear-NTP data: T-1={V} output words need K > {V} and d > {V}")
    eye = np.zeros((V, d))
    eye[:, :V] = np.eye(V)
    if not (np.array_equal(E[:V], eye) and np.all(E[V:, :V] == 0)):
        raise InputError(
            "not linear-NTP data: the first V vocabulary items must be the unit vectors e_v, the rest (0, h)"
        )
    if not (np.array_equal(data.tokens[:, :V], np.tile(np.arange(V), (data.n, 1))) and np.all(data.tokens[:, V] >= V)):
        raise InputError("not linear-NTP data: every sequence must be (0, ..., V-1, context)")
    if np.any(data.labels >= V):
        raise InputError("not linear-NTP data: labels must be output words (< V)")
    counts = np.zeros((m, V), dtype=np.int64)
    np.add.at(counts, (data.tokens[:, V] - V, data.labels), 1)
    return LinearNTP(np.array(E[V:, V:]), counts)


# ---------------------------------------------------------------------- the equations
def _equations(lin: LinearNTP) -> tuple[list[tuple[int, int, int]], np.ndarray, int]:
    r"""Rows $(j,z_0,z)$, $z_0=\min S_j$, $z\in S_j\setminus\{z_0\}$ of the log-odds / equality equations
    $(e_{z_0}-e_z)^\top Wh_j$, and their exact integer matrix over $\mathrm{vec}\,W$ (row-major, (V, d_h)):
    row $=(e_{z_0}-e_z)\otimes h^{\mathbb Z}_j$, $h_j=h^{\mathbb Z}_j2^{e}$."""
    Hn, e = to_integers(lin.H)
    rows = []
    for j in range(lin.m):
        S = np.flatnonzero(lin.support[j])
        rows += [(j, int(S[0]), int(z)) for z in S[1:]]
    V, dh = lin.V, lin.dh
    M = np.zeros((len(rows), V * dh), dtype=object)
    M[:] = 0
    for r, (j, z0, z) in enumerate(rows):
        M[r, z0 * dh : (z0 + 1) * dh] = Hn[j]
        M[r, z * dh : (z + 1) * dh] = -Hn[j]
    return rows, M, e


def _fmpz(M: np.ndarray):
    from flint import fmpz_mat

    r, c = M.shape
    return fmpz_mat(r, c, [int(x) for x in M.ravel().tolist()])


def _valuation(c: int, p: int) -> int:
    k = 0
    while c % p == 0:
        c //= p
        k += 1
    return k


def _primes(n: int) -> list[int]:
    """The primes dividing the positive integer ``n``."""
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def is_compatible(data: NTPData) -> bool:
    r"""NTP-compatibility, decided exactly (module docstring: one rank test per prime dividing a count)."""
    lin = decompose(data)
    rows, M, _ = _equations(lin)
    if not rows:
        return True
    Mf = _fmpz(M)
    rank = Mf.rank()
    primes = sorted({p for c in lin.counts[lin.counts > 0].tolist() for p in _primes(int(c))})
    for p in primes:
        val = [_valuation(int(lin.counts[j, z0]), p) - _valuation(int(lin.counts[j, z]), p) for j, z0, z in rows]
        b = np.array(val, dtype=object).reshape(-1, 1)
        if _fmpz(np.concatenate([M, b], axis=1)).rank() != rank:
            return False
    return True


def log_odds_solution(data: NTPData) -> np.ndarray:
    r"""$W^\star$ padded to (V+d_h, V+d_h) (block ``[:V, V:]``): the unique point of $\mathcal F$ with
    $(e_z-e_{z'})^\top Wh_j=\log(p_{j,z}/p_{j,z'})$, solved at ``DPS`` digits as the minimum-norm solution of an
    exactly independent subset of the equations, every equation's residual checked before rounding.
    :class:`InputError` when the data are not NTP-compatible."""
    import mpmath

    lin = decompose(data)
    if not is_compatible(data):
        raise InputError("the data are not NTP-compatible: no W matches every log-odds ratio")
    rows, M, e = _equations(lin)
    V, dh = lin.V, lin.dh
    if not rows:
        return lin.pad(np.zeros((V, dh)))
    R, _, rank = _fmpz(M).transpose().rref()
    piv = []
    for r in range(rank):
        for c in range(len(rows)):
            if R[r, c] != 0:
                piv.append(c)
                break
    with mpmath.workdps(DPS):
        scale = mpmath.mpf(2) ** e

        def row(r):
            return [mpmath.mpf(int(x)) * scale for x in M[r]]

        def rhs(r):
            j, z0, z = rows[r]
            return mpmath.log(mpmath.mpf(int(lin.counts[j, z0])) / int(lin.counts[j, z]))

        A = mpmath.matrix([row(r) for r in piv])
        b = mpmath.matrix([rhs(r) for r in piv])
        w = A.T * mpmath.lu_solve(A * A.T, b)
        worst = mpmath.mpf(0)
        for r in range(len(rows)):
            res = mpmath.fsum(a * wi for a, wi in zip(row(r), w)) - rhs(r)
            worst = max(worst, abs(res))
        bound = mpmath.mpf(10) ** (-(DPS - 10)) * max(1, max(abs(rhs(r)) for r in range(len(rows))))
        if worst > bound:
            raise SolverError(f"log_odds_solution: residual {mpmath.nstr(worst, 3)} at {DPS} digits")
        Wdec = np.array([[float(w[v * dh + k]) for k in range(dh)] for v in range(V)])
    return lin.pad(Wdec)


def is_separable(data: NTPData) -> bool:
    r"""NTP-separability (= the graph SVM of the encoded data is feasible), by an LP in $\mathrm{vec}\,W$,
    $W\in\mathbb R^{V\times d_h}$: equalities $(e_{z_0}-e_z)^\top Wh_j=0$ and $(e_{z_0}-e_v)^\top Wh_j\ge1$,
    $v\notin S_j$ (scipy HiGHS; status checked, a feasible point's residuals checked)."""
    from scipy.optimize import linprog

    from ..tolerances import tol

    lin = decompose(data)
    V, dh = lin.V, lin.dh
    eq, ineq = [], []
    for j in range(lin.m):
        S = np.flatnonzero(lin.support[j])
        if len(S) == 0:
            continue
        for z in S[1:]:
            eq.append(np.kron(np.eye(V)[S[0]] - np.eye(V)[z], lin.H[j]))
        for v in np.flatnonzero(~lin.support[j]):
            ineq.append(np.kron(np.eye(V)[S[0]] - np.eye(V)[v], lin.H[j]))
    if not ineq:
        return True
    A_eq = np.array(eq) if eq else None
    A_ub = -np.array(ineq)
    res = linprog(
        np.zeros(V * dh),
        A_ub=A_ub,
        b_ub=-np.ones(len(ineq)),
        A_eq=A_eq,
        b_eq=np.zeros(len(eq)) if eq else None,
        bounds=[(None, None)] * (V * dh),
        method="highs",
    )
    if res.status == 2:
        return False
    if res.status != 0:
        raise SolverError(f"is_separable: HiGHS status {res.status} ({res.message})")
    w = res.x
    scale = max(1.0, float(np.abs(w).max()))
    slack = tol("kkt") * scale
    ok = np.all(-A_ub @ w >= 1 - slack) and (A_eq is None or np.all(np.abs(A_eq @ w) <= slack))
    if not ok:
        raise SolverError("is_separable: HiGHS returned a point that violates the constraints")
    return True
