r"""The attention model of THEORY §1 at high precision (mpmath): the independent re-evaluation behind every
confirmer (:mod:`attsvm.highprec`).

A float64 failure is not yet a counterexample (THEORY §5): the failing computation is re-evaluated here
with ``mp.dps`` $\ge 50$ digits. Inputs are numpy float64 arrays taken as *exact* binary numbers
(``mpmath.mpf(float)`` is exact), or exact rationals (``"p/q"`` strings, :class:`fractions.Fraction`), so a
result here is a statement about the very numbers the float64 check used.

Everything is written from the definitions, independently of the float64 code of :mod:`attsvm.model`:

.. math::
    a_{it}=x_{it}^\top Wz_i,\quad s_i=\mathbb S(a_i),\quad \gamma_{it}=Y_iv^\top x_{it},\quad
    u_i=\gamma_i^\top s_i,\quad \mathcal L(W)=\tfrac1n\textstyle\sum_i\ell(u_i),

.. math::
    \nabla\mathcal L(W)=\tfrac1n\textstyle\sum_i\ell'(u_i)\,X_i^\top(\mathrm{diag}(s_i)-s_is_i^\top)\gamma_i\,z_i^\top,

where $[(\mathrm{diag}(s)-ss^\top)\gamma]_t=s_t\sum_\tau s_\tau(\gamma_t-\gamma_\tau)$ (the same number; the
pairwise form keeps its relative precision even when $1-\max s<10^{-50}$). Prompt attention
$f(X)=v^\top X^\top\mathbb S(Xp)$ has $a_{it}=x_{it}^\top p$, the same $\gamma,u$, and

.. math::
    \nabla_p\mathcal L=\tfrac1n\textstyle\sum_i\ell'(u_i)\,X_i^\top(\mathrm{diag}(s_i)-s_is_i^\top)\gamma_i,\qquad
    \nabla_v\mathcal L=\tfrac1n\textstyle\sum_i\ell'(u_i)\,Y_iX_i^\top s_i .

Matrices and vectors are nested Python lists of ``mpf`` (``MP`` below); :func:`to_numpy` rounds back to
float64. Causal data (a visibility mask) are supported: invisible tokens are left out of every sum.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from ..data import Dataset

DPS = 50
mp = mpmath.mp
MP = list  # nested lists of mpmath.mpf

__all__ = [
    "DPS",
    "as_mp",
    "rational",
    "rationals",
    "to_numpy",
    "HPData",
    "data",
    "logits",
    "log_softmax",
    "softmax",
    "log_one_minus_softmax",
    "scores",
    "loss_value",
    "loss_derivative",
    "outputs",
    "loss",
    "loss_gap",
    "grad_W",
    "grad_KQ",
    "grad_diag",
    "heads_outputs",
    "loss_heads",
    "grad_heads",
    "twolayer_outputs",
    "loss_twolayer",
    "grad_twolayer",
    "gradient_shares",
    "prompt_outputs",
    "grad_p",
    "grad_vp",
    "hessian",
    "cov",
    "inner",
    "frob",
    "corr",
    "matvec",
    "matmul",
    "transpose",
    "projector",
    "smoothness_constant",
    "hessian_W",
    "sym_spectral_norm",
    "singular_values",
    "signed_float",
]


def _hp(fn):
    """Run ``fn`` at no less than ``DPS`` digits (the ambient precision if higher)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with mp.workdps(max(mp.dps, DPS)):
            return fn(*args, **kwargs)

    return wrapped


# ---------------------------------------------------------------------- conversion
def as_mp(a: Any) -> Any:
    """Exact conversion of a float64 array (any shape) or scalar to nested lists of ``mpf``."""
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], (list, tuple, mpmath.mpf)):
        return [as_mp(x) for x in a]
    if isinstance(a, mpmath.mpf):
        return a
    if isinstance(a, (str, Fraction)):
        return rational(a)
    arr = np.asarray(a)
    if arr.ndim == 0:
        if arr.dtype.kind in "iub":
            return mpmath.mpf(int(arr))
        return mpmath.mpf(float(arr))
    return [as_mp(x) for x in arr]


@_hp
def rational(q: str | Fraction | int) -> mpmath.mpf:
    """An exact rational (``"p/q"``, Fraction, int) rounded once to the working precision."""
    f = Fraction(q)
    return mpmath.mpf(f.numerator) / f.denominator


def rationals(rows: Any) -> MP:
    """Nested lists of rationals (e.g. ``certify_fro(...)["W"]``) to nested lists of ``mpf``."""
    if isinstance(rows, (list, tuple)):
        return [rationals(r) for r in rows]
    return rational(rows)


def to_numpy(a: Any) -> np.ndarray:
    """Round nested lists of ``mpf`` to a float64 array (a float64 array is returned as it is)."""
    if isinstance(a, np.ndarray):
        return a.astype(np.float64)
    if isinstance(a, (list, tuple)):
        return np.array([to_numpy(x) for x in a], dtype=np.float64)
    return np.float64(float(a))


def signed_float(x: Any) -> float:
    r"""``float(x)`` that keeps the sign of a number too small for float64 (a margin of $-10^{-400}$ becomes
    $-5\cdot10^{-324}$, not $-0.0$) and clips $\pm\infty$ to the largest finite float, so that an
    :class:`~attsvm.claims.Outcome` built from it has ``ok == (margin >= 0)``."""
    f = float(x)
    if f == 0.0 and x < 0:
        return -5e-324
    if f == 0.0:
        return 0.0
    return float(np.clip(f, -np.finfo(np.float64).max, np.finfo(np.float64).max))


# ---------------------------------------------------------------------- data
class HPData:
    r"""The flat view of a data set with exact ``mpf`` entries: ``X`` [N][T][d], ``Y`` [N], ``Z`` [N][d],
    ``v`` [d], ``vis`` [N] lists of visible token indices."""

    def __init__(self, ds: Dataset):
        if ds.batched:
            raise ValueError("highprec works on a single data set")
        f = ds.flat()
        self.N, self.T, self.d = f.X.shape
        self.X = as_mp(f.X)
        self.Y = as_mp(f.Y)
        self.Z = as_mp(f.Z)
        self.v = as_mp(f.v)
        mask = None if f.mask is None else np.asarray(f.mask)
        self.vis = [
            list(range(self.T)) if mask is None else [int(t) for t in np.nonzero(mask[i])[0]] for i in range(self.N)
        ]
        #: fixed token scores of next-token data ($1$ on the label's occurrences, else $0$); None: from $Y,v$
        self.gamma = as_mp(np.asarray(ds.scores, dtype=np.float64)) if ds.kind == "ntp" else None


def data(ds: Dataset | HPData) -> HPData:
    """An :class:`HPData` (cached conversion of a :class:`~attsvm.data.Dataset`)."""
    return ds if isinstance(ds, HPData) else HPData(ds)


# ---------------------------------------------------------------------- small linear algebra
@_hp
def matvec(W: MP, z: MP) -> MP:
    return [mp.fdot(row, z) for row in W]


@_hp
def matmul(A: MP, B: MP) -> MP:
    Bt = transpose(B)
    return [[mp.fdot(r, c) for c in Bt] for r in A]


def transpose(A: MP) -> MP:
    return [list(c) for c in zip(*A)]


def _flat(A: Any) -> list:
    return [y for x in A for y in _flat(x)] if isinstance(A, (list, tuple)) else [A]


@_hp
def inner(A: MP, B: MP) -> mpmath.mpf:
    r"""$\langle A,B\rangle=\sum_{jk}A_{jk}B_{jk}$ (matrices, vectors: any nesting of the same shape)."""
    return mp.fdot(_flat(A), _flat(B))


@_hp
def frob(A: MP) -> mpmath.mpf:
    r"""$\|A\|_F$."""
    return mp.sqrt(inner(A, A))


@_hp
def corr(A: MP, B: MP) -> mpmath.mpf:
    r"""$\mathrm{corr}(A,B)=\langle A,B\rangle/(\|A\|_F\|B\|_F)$ (the 50-digit :func:`attsvm.model.corr`)."""
    return inner(A, B) / (frob(A) * frob(B))


def projector(Z: Any, dps: int = DPS) -> MP:
    r"""$P_Z$, the orthogonal projector onto $\mathrm{span}\{z_i\}$ (rows of ``Z``), from an SVD at
    ``dps`` digits; singular values below $10^{-(dps/2)}\sigma_{\max}$ count as zero."""
    with mp.workdps(dps):
        Zm = mpmath.matrix(as_mp(np.asarray(Z)) if not isinstance(Z, list) else Z)
        U, S, _ = mp.svd_r(Zm.T)
        smax = max(abs(x) for x in S) if len(S) else mpmath.mpf(0)
        keep = [j for j in range(len(S)) if smax > 0 and abs(S[j]) > smax * mpmath.mpf(10) ** (-(dps // 2))]
        d = Zm.cols
        return [[mp.fsum(U[a, j] * U[b, j] for j in keep) for b in range(d)] for a in range(d)]


def singular_values(A: MP, dps: int = DPS) -> list:
    """Singular values of a matrix at ``dps`` digits (descending)."""
    with mp.workdps(dps):
        S = mp.svd_r(mpmath.matrix(A), compute_uv=False)
        return sorted((abs(S[j]) for j in range(len(S))), reverse=True)


def sym_spectral_norm(H: MP, dps: int = DPS) -> mpmath.mpf:
    r"""$\|H\|_2=\max|\lambda(H)|$ of a symmetric matrix (symmetrised first), at ``dps`` digits."""
    with mp.workdps(dps):
        k = len(H)
        Hs = mpmath.matrix(k, k)
        for a in range(k):
            for b in range(k):
                Hs[a, b] = (H[a][b] + H[b][a]) / 2
        E = mp.eigsy(Hs, eigvals_only=True)
        return max(abs(E[j]) for j in range(k))


# ---------------------------------------------------------------------- softmax and scores
@_hp
def logits(X: MP, W: MP, Z: MP) -> MP:
    r"""$a_{it}=x_{it}^\top Wz_i$ ([N][T])."""
    out = []
    for Xi, zi in zip(X, Z):
        w = matvec(W, zi)
        out.append([mp.fdot(x, w) for x in Xi])
    return out


@_hp
def _lse(vals: list) -> mpmath.mpf:
    m = max(vals)
    return m + mp.log(mp.fsum(mp.exp(x - m) for x in vals))


@_hp
def log_softmax(a: list, vis: list | None = None) -> list:
    r"""$\log\mathbb S(a)_t=a_t-\log\sum_\tau e^{a_\tau}$ (invisible tokens: $-\infty$)."""
    vis = list(range(len(a))) if vis is None else vis
    lse = _lse([a[t] for t in vis])
    return [a[t] - lse if t in vis else mpmath.mpf("-inf") for t in range(len(a))]


@_hp
def softmax(a: list, vis: list | None = None) -> list:
    r"""$\mathbb S(a)_t$ (invisible tokens: 0)."""
    return [mp.exp(x) if x != mpmath.mpf("-inf") else mpmath.mpf(0) for x in log_softmax(a, vis)]


@_hp
def log_one_minus_softmax(a: list, t: int, vis: list | None = None) -> mpmath.mpf:
    r"""$\log(1-s_t)=\log\sum_{\tau\ne t}e^{a_\tau}-\log\sum_\tau e^{a_\tau}$ (no cancellation)."""
    vis = list(range(len(a))) if vis is None else vis
    others = [a[u] for u in vis if u != t]
    if not others:
        return mpmath.mpf("-inf")
    return _lse(others) - _lse([a[u] for u in vis])


@_hp
def scores(X: MP, Y: list, v: list) -> MP:
    r"""$\gamma_{it}=Y_iv^\top x_{it}$ ([N][T])."""
    return [[y * mp.fdot(x, v) for x in Xi] for Xi, y in zip(X, Y)]


@_hp
def loss_value(u: mpmath.mpf, loss: str = "logistic") -> mpmath.mpf:
    r"""$\ell(u)$: logistic $\log(1+e^{-u})$, exponential $e^{-u}$, correlation $-u$, ``nll`` $-\log u$ (next-token
    data: $u$ the label's attention mass)."""
    if loss == "nll":
        return -mp.log(u)
    if loss == "logistic":
        return mp.log1p(mp.exp(-u))
    if loss == "exponential":
        return mp.exp(-u)
    if loss == "correlation":
        return -u
    raise ValueError(f"unknown loss {loss!r}")


@_hp
def loss_derivative(u: mpmath.mpf, loss: str = "logistic") -> mpmath.mpf:
    r"""$\ell'(u)$: logistic $-1/(1+e^{u})$, exponential $-e^{-u}$, correlation $-1$, ``nll`` $-1/u$."""
    if loss == "nll":
        return -1 / u
    if loss == "logistic":
        return -1 / (1 + mp.exp(u))
    if loss == "exponential":
        return -mp.exp(-u)
    if loss == "correlation":
        return mpmath.mpf(-1)
    raise ValueError(f"unknown loss {loss!r}")


@_hp
def cov(s: list, g: list, h: list) -> mpmath.mpf:
    r"""$\mathrm{Cov}_s(g,h)=\sum_ts_tg_th_t-(s^\top g)(s^\top h)
    =\tfrac12\sum_{t,\tau}s_ts_\tau(g_t-g_\tau)(h_t-h_\tau)$ (the pairwise form, exact at any saturation)."""
    k = len(s)
    return mp.fsum(s[t] * s[u] * (g[t] - g[u]) * (h[t] - h[u]) for t in range(k) for u in range(t + 1, k))


# ---------------------------------------------------------------------- loss and gradient
def outputs(ds: Dataset | HPData, W: Any, dps: int = DPS) -> tuple[MP, MP, list, MP]:
    r"""$(s,\gamma,u,a)$ at ``dps`` digits; ``W`` float64 array (exact) or nested ``mpf``."""
    D = data(ds)
    with mp.workdps(dps):
        Wm = as_mp(W) if not isinstance(W, list) else W
        a = logits(D.X, Wm, D.Z)
        s = [softmax(ai, vi) for ai, vi in zip(a, D.vis)]
        g = scores(D.X, D.Y, D.v) if D.gamma is None else D.gamma
        u = [mp.fsum(si[t] * gi[t] for t in vi) for si, gi, vi in zip(s, g, D.vis)]
        return s, g, u, a


def loss(ds: Dataset | HPData, W: Any, loss: str = "logistic", dps: int = DPS) -> mpmath.mpf:
    r"""$\mathcal L(W)=\frac1n\sum_i\ell(\gamma_i^\top s_i)$ at ``dps`` digits."""
    with mp.workdps(dps):
        _, _, u, _ = outputs(ds, W, dps)
        return mp.fsum(loss_value(x, loss) for x in u) / len(u)


def loss_gap(ds: Dataset | HPData, W: Any, alpha: Any = None, loss: str = "logistic", dps: int = DPS) -> mpmath.mpf:
    r"""$\mathcal L(W)-\frac1n\sum_i\ell(\gamma_{i\alpha_i})$ computed without cancellation:
    $\gamma_{i\alpha_i}-u_i=\sum_ts_{it}(\gamma_{i\alpha_i}-\gamma_{it})$, then $\ell(u)-\ell(g)$ (logistic:
    $\log(1+\mathrm{expm1}(g-u)/(1+e^{g}))$)."""
    D = data(ds)
    with mp.workdps(dps):
        s, g, u, _ = outputs(D, W, dps)
        if alpha is None:
            alpha = [max(D.vis[i], key=lambda t, i=i: g[i][t]) for i in range(D.N)]
        terms = []
        for i in range(D.N):
            ga = g[i][int(alpha[i])]
            delta = mp.fsum(s[i][t] * (ga - g[i][t]) for t in D.vis[i])
            if loss == "logistic":
                terms.append(mp.log1p(mp.expm1(delta) / (1 + mp.exp(ga))))
            else:
                terms.append(loss_value(ga - delta, loss) - loss_value(ga, loss))
        return mp.fsum(terms) / D.N


def _grad_rows(D: HPData, W: Any, loss: str, dps: int) -> list:
    r"""Row $i$'s term of the gradient is $g_iz_i^\top$; returns the vectors $g_i=\frac1n\ell'(u_i)X_i^\top r_i$."""
    s, g, u, _ = outputs(D, W, dps)
    rows = []
    for i in range(D.N):
        vis = D.vis[i]
        r = {t: s[i][t] * mp.fsum(s[i][k] * (g[i][t] - g[i][k]) for k in vis) for t in vis}
        c = loss_derivative(u[i], loss) / D.N
        rows.append([c * mp.fsum(r[t] * D.X[i][t][j] for t in vis) for j in range(D.d)])
    return rows


def _assemble(D: HPData, rows: list) -> MP:
    r"""$\sum_ig_iz_i^\top$ ([d][d]) from the vectors $g_i$ of :func:`_grad_rows`."""
    return [[mp.fsum(gi[j] * D.Z[i][k] for i, gi in enumerate(rows)) for k in range(D.d)] for j in range(D.d)]


def grad_W(ds: Dataset | HPData, W: Any, loss: str = "logistic", dps: int = DPS) -> MP:
    r"""$\nabla\mathcal L(W)$ ([d][d]) at ``dps`` digits, from the definition (see module docstring)."""
    D = data(ds)
    with mp.workdps(dps):
        return _assemble(D, _grad_rows(D, W, loss, dps))


def gradient_shares(ds: Dataset | HPData, W: Any, loss: str = "logistic", dps: int = DPS) -> list:
    r"""Each row's share of the gradient, $\log_{10}(\|\nabla_i\|_F/\|\nabla\mathcal L(W)\|_F)$ with
    $\nabla_i=\frac1n\ell'(u_i)X_i^\top r_iz_i^\top$ its term ($-\infty$ for a row with no contribution):
    the stuck-input measure of THEORY §5, exact far past float64 underflow."""
    D = data(ds)
    with mp.workdps(dps):
        rows = _grad_rows(D, W, loss, dps)
        tot = frob(_assemble(D, rows))
        out = []
        for gi, zi in zip(rows, D.Z):
            part = mp.sqrt(mp.fdot(gi, gi) * mp.fdot(zi, zi))
            out.append(mp.log10(part / tot) if part != 0 else mpmath.mpf("-inf"))
        return out


def grad_KQ(ds: Dataset | HPData, K: Any, Q: Any, loss: str = "logistic", dps: int = DPS) -> tuple[MP, MP]:
    r"""$(\nabla_K,\nabla_Q)=(\nabla\mathcal L(W)Q,\nabla\mathcal L(W)^\top K)$ at $W=KQ^\top$."""
    with mp.workdps(dps):
        Km, Qm = as_mp(K), as_mp(Q)
        G = grad_W(ds, matmul(Km, transpose(Qm)), loss, dps)
        return matmul(G, Qm), matmul(transpose(G), Km)


def grad_diag(ds: Dataset | HPData, k: Any, q: Any, loss: str = "logistic", dps: int = DPS) -> tuple[list, list]:
    r"""$(\nabla_k,\nabla_q)=(\mathrm{diag}(G)\odot q,\ \mathrm{diag}(G)\odot k)$, $G=\nabla\mathcal L(W)$ at the
    diagonal $W=\mathrm{diag}(k\odot q)$ (chain rule: $\partial W_{jj}/\partial k_j=q_j$), at ``dps`` digits."""
    with mp.workdps(dps):
        km = as_mp(k) if not isinstance(k, list) else k
        qm = as_mp(q) if not isinstance(q, list) else q
        d = len(km)
        W = [[km[a] * qm[a] if a == b else mpmath.mpf(0) for b in range(d)] for a in range(d)]
        G = grad_W(ds, W, loss, dps)
        return [G[a][a] * qm[a] for a in range(d)], [G[a][a] * km[a] for a in range(d)]


def heads_outputs(ds: Dataset | HPData, K: Any, Q: Any, dps: int = DPS) -> tuple[list, MP, list]:
    r"""The $H$-head model at ``dps`` digits, from its definition: $s_{ih}=\mathbb S(X_iK_hQ_h^\top z_i)$ per head,
    $\gamma_{it}=Y_iv^\top x_{it}$ and the outputs added over the heads, $u_i=\sum_h\sum_ts_{iht}\gamma_{it}$.
    ``K``, ``Q``: (H,d,m) float64 arrays (exact) or nested ``mpf``. Returns ``(s, gamma, u)``, ``s`` [H][N][T]."""
    D = data(ds)
    with mp.workdps(dps):
        Km, Qm = as_mp(K), as_mp(Q)
        g = scores(D.X, D.Y, D.v) if D.gamma is None else D.gamma
        s = []
        for Kh, Qh in zip(Km, Qm):
            a = logits(D.X, matmul(Kh, transpose(Qh)), D.Z)
            s.append([softmax(ai, vi) for ai, vi in zip(a, D.vis)])
        u = [mp.fsum(sh[i][t] * g[i][t] for sh in s for t in D.vis[i]) for i in range(D.N)]
        return s, g, u


def twolayer_outputs(
    ds: Dataset | HPData, W1: Any, W2: Any, residual: bool = False, causal: bool = False, dps: int = DPS
) -> dict[str, Any]:
    r"""The two-layer model (:mod:`attsvm.twolayer`) at ``dps`` digits, from its definition: per input $i$ and
    layer-1 query $t$ the keys $K_{it}=\{\tau\ \text{visible}:\ \tau\le t\ \text{if causal}\}$,
    $s^1_{i,t\cdot}=\mathbb S(x_{i\tau}^\top W_1x_{it})_{\tau\in K_{it}}$ (a row without keys: 0),
    $\bar h_{it}=\sum_{\tau}s^1_{i,t\tau}x_{i\tau}$, $h_{it}=\bar h_{it}+\rho x_{it}$; over the visible $t$
    $s^2_i=\mathbb S(h_{it}^\top W_2z_i)$, $g_{it}=Y_iv^\top h_{it}$, $u_i=\sum_ts^2_{it}g_{it}$. ``W1``, ``W2``
    float64 (d,d) (exact) or nested ``mpf``. Returns a dict of nested lists: ``s1`` [N][T][T], ``h_bar``, ``h``
    [N][T][d], ``s2``, ``g`` [N][T], ``u`` [N]."""
    D = data(ds)
    with mp.workdps(dps):
        A, B = as_mp(W1), as_mp(W2)
        rho = mpmath.mpf(1) if residual else mpmath.mpf(0)
        zero = mpmath.mpf(0)
        out: dict[str, Any] = {"s1": [], "h_bar": [], "h": [], "s2": [], "g": [], "u": []}
        for i in range(D.N):
            Xi, vis = D.X[i], D.vis[i]
            s1i, hbi, hi = [], [], []
            for t in range(D.T):
                keys = [k for k in vis if not causal or k <= t]
                if keys:
                    w = matvec(A, Xi[t])
                    row = softmax([mp.fdot(Xi[k], w) for k in range(D.T)], keys)
                else:
                    row = [zero] * D.T
                hb = [mp.fsum(row[k] * Xi[k][j] for k in keys) for j in range(D.d)]
                s1i.append(row)
                hbi.append(hb)
                hi.append([hb[j] + rho * Xi[t][j] for j in range(D.d)])
            Bz = matvec(B, D.Z[i])
            s2i = softmax([mp.fdot(hi[t], Bz) for t in range(D.T)], vis)
            gi = [D.Y[i] * mp.fdot(D.v, hi[t]) for t in range(D.T)]
            for name, val in (("s1", s1i), ("h_bar", hbi), ("h", hi), ("s2", s2i), ("g", gi)):
                out[name].append(val)
            out["u"].append(mp.fsum(s2i[t] * gi[t] for t in vis))
        return out


def loss_twolayer(
    ds: Dataset | HPData, W1: Any, W2: Any, loss: str = "logistic", residual: bool = False, causal: bool = False,
    dps: int = DPS,
) -> mpmath.mpf:  # fmt: skip
    r"""$\mathcal L(W_1,W_2)=\frac1N\sum_i\ell(u_i)$ of the two-layer model (:func:`twolayer_outputs`)."""
    with mp.workdps(dps):
        u = twolayer_outputs(ds, W1, W2, residual, causal, dps)["u"]
        return mp.fsum(loss_value(x, loss) for x in u) / len(u)


def grad_twolayer(
    ds: Dataset | HPData, W1: Any, W2: Any, loss: str = "logistic", residual: bool = False, causal: bool = False,
    dps: int = DPS,
) -> tuple[MP, MP]:  # fmt: skip
    r"""$(\nabla_{W_1}\mathcal L,\ \nabla_{W_2}\mathcal L)$ of the two-layer model at ``dps`` digits, by the chain
    rule through the softmax Jacobians $\partial s_t/\partial a_\tau=s_t(\delta_{t\tau}-s_\tau)$, written pairwise:
    layer 2 $\partial u_i/\partial a^2_{it}=s^2_{it}\sum_\sigma s^2_{i\sigma}(g_{it}-g_{i\sigma})$ and
    $\partial a^2_{it}/\partial W_2=h_{it}z_i^\top$; through $h$: $\partial u_i/\partial h_{it}=s^2_{it}Y_iv+
    (\partial u_i/\partial a^2_{it})W_2z_i$, $\partial h_{it}/\partial A^1_{i,t\tau}=s^1_{i,t\tau}\sum_\sigma
    s^1_{i,t\sigma}(x_{i\tau}-x_{i\sigma})$ and $\partial A^1_{i,t\tau}/\partial W_1=x_{i\tau}x_{it}^\top$; then
    $\nabla\mathcal L=\frac1N\sum_i\ell'(u_i)\nabla u_i$. Returns two [d][d] lists."""
    D = data(ds)
    with mp.workdps(dps):
        A, B = as_mp(W1), as_mp(W2)
        o = twolayer_outputs(D, A, B, residual, causal, dps)
        zero = mpmath.mpf(0)
        G1 = [[zero] * D.d for _ in range(D.d)]
        G2 = [[zero] * D.d for _ in range(D.d)]
        for i in range(D.N):
            Xi, vis = D.X[i], D.vis[i]
            s1, s2, g, h = o["s1"][i], o["s2"][i], o["g"][i], o["h"][i]
            c = loss_derivative(o["u"][i], loss) / D.N
            Bz = matvec(B, D.Z[i])
            for t in vis:
                da2 = s2[t] * mp.fsum(s2[k] * (g[t] - g[k]) for k in vis)  # du/da2_t
                for a in range(D.d):
                    for b in range(D.d):
                        G2[a][b] += c * da2 * h[t][a] * D.Z[i][b]
                dh = [s2[t] * D.Y[i] * D.v[j] + da2 * Bz[j] for j in range(D.d)]  # du/dh_t
                keys = [k for k in vis if not causal or k <= t]
                for tau in keys:
                    # du/dA1_{t,tau} = dh^T s1_tau sum_sigma s1_sigma (x_tau - x_sigma)
                    dx = [mp.fsum(s1[t][k] * (Xi[tau][j] - Xi[k][j]) for k in keys) for j in range(D.d)]
                    q = s1[t][tau] * mp.fdot(dh, dx)
                    for a in range(D.d):
                        for b in range(D.d):
                            G1[a][b] += c * q * Xi[tau][a] * Xi[t][b]
        return G1, G2


def loss_heads(ds: Dataset | HPData, K: Any, Q: Any, loss: str = "logistic", dps: int = DPS) -> mpmath.mpf:
    r"""$\mathcal L(K,Q)=\frac1n\sum_i\ell(u_i)$ of the $H$-head model (:func:`heads_outputs`) at ``dps`` digits."""
    with mp.workdps(dps):
        _, _, u = heads_outputs(ds, K, Q, dps)
        return mp.fsum(loss_value(x, loss) for x in u) / len(u)


def grad_heads(ds: Dataset | HPData, K: Any, Q: Any, loss: str = "logistic", dps: int = DPS) -> tuple[MP, MP]:
    r"""$(\nabla_{K_h}\mathcal L,\nabla_{Q_h}\mathcal L)_h=(G_hQ_h,\ G_h^\top K_h)$ of the $H$-head model at ``dps``
    digits, from the chain rule: $\partial u_i/\partial a_{iht}=s_{iht}(\gamma_{it}-s_{ih}^\top\gamma_i)$, so
    $G_h=\frac1n\sum_i\ell'(u_i)\,X_i^\top r_{ih}z_i^\top$ with $r_{iht}=s_{iht}\sum_\tau s_{ih\tau}(\gamma_{it}-
    \gamma_{i\tau})$ and the shared $u_i$. Returns two [H][d][m] lists."""
    D = data(ds)
    with mp.workdps(dps):
        Km, Qm = as_mp(K), as_mp(Q)
        s, g, u = heads_outputs(D, Km, Qm, dps)
        c = [loss_derivative(u[i], loss) / D.N for i in range(D.N)]
        gK, gQ = [], []
        for h, (Kh, Qh) in enumerate(zip(Km, Qm)):
            sh = s[h]
            G = [[mpmath.mpf(0)] * D.d for _ in range(D.d)]
            for i in range(D.N):
                vis = D.vis[i]
                r = {t: sh[i][t] * mp.fsum(sh[i][k] * (g[i][t] - g[i][k]) for k in vis) for t in vis}
                xr = [c[i] * mp.fsum(r[t] * D.X[i][t][j] for t in vis) for j in range(D.d)]
                for a in range(D.d):
                    for b in range(D.d):
                        G[a][b] += xr[a] * D.Z[i][b]
            gK.append(matmul(G, Qh))
            gQ.append(matmul(transpose(G), Kh))
        return gK, gQ


def prompt_outputs(ds: Dataset | HPData, p: Any, v: Any = None, dps: int = DPS) -> tuple[MP, MP, list]:
    r"""Prompt attention at ``dps`` digits: $(s,\gamma,u)$ with $s_i=\mathbb S(X_ip)$, $\gamma_{it}=Y_iv^\top x_{it}$
    (``v`` defaults to the data set's head)."""
    D = data(ds)
    with mp.workdps(dps):
        pm = as_mp(p) if not isinstance(p, list) else p
        vm = D.v if v is None else (as_mp(v) if not isinstance(v, list) else v)
        s = [softmax([mp.fdot(x, pm) for x in Xi], vi) for Xi, vi in zip(D.X, D.vis)]
        g = scores(D.X, D.Y, vm)
        u = [mp.fsum(si[t] * gi[t] for t in vi) for si, gi, vi in zip(s, g, D.vis)]
        return s, g, u


def grad_vp(ds: Dataset | HPData, v: Any, p: Any, loss: str = "logistic", dps: int = DPS) -> tuple[list, list]:
    r"""$(\nabla_v\mathcal L,\nabla_p\mathcal L)$ of prompt attention at ``dps`` digits (module docstring)."""
    D = data(ds)
    with mp.workdps(dps):
        vm = as_mp(v) if not isinstance(v, list) else v
        s, g, u = prompt_outputs(D, p, vm, dps)
        gv, gp = [mpmath.mpf(0)] * D.d, [mpmath.mpf(0)] * D.d
        for i in range(D.N):
            vis = D.vis[i]
            c = loss_derivative(u[i], loss) / D.N
            r = {t: s[i][t] * mp.fsum(s[i][k] * (g[i][t] - g[i][k]) for k in vis) for t in vis}
            for j in range(D.d):
                gv[j] += c * D.Y[i] * mp.fsum(s[i][t] * D.X[i][t][j] for t in vis)
                gp[j] += c * mp.fsum(r[t] * D.X[i][t][j] for t in vis)
        return gv, gp


def grad_p(ds: Dataset | HPData, p: Any, v: Any = None, loss: str = "logistic", dps: int = DPS) -> list:
    r"""$\nabla_p\mathcal L$ of prompt attention (head ``v`` fixed, default the data set's) at ``dps`` digits."""
    D = data(ds)
    return grad_vp(D, D.v if v is None else v, p, loss, dps)[1]


def hessian(grad: Any, x: list, dps: int = DPS) -> MP:
    r"""The Jacobian of ``grad`` (a function of a flat list of ``mpf`` returning one) at ``x``, by central
    differences with step $h=10^{-\lfloor 2dps/5\rfloor}$ at ``dps``+10 digits (error $O(h^2)$), symmetrised:
    the Hessian when ``grad`` is a gradient."""
    work = dps + 10
    with mp.workdps(work):
        h = mpmath.mpf(10) ** (-(2 * dps) // 5)
        cols = []
        for j in range(len(x)):
            xp, xq = list(x), list(x)
            xp[j] += h
            xq[j] -= h
            gp, gq = grad(xp), grad(xq)
            cols.append([(a - b) / (2 * h) for a, b in zip(gp, gq)])
        k = len(x)
        return [[(cols[b][a] + cols[a][b]) / 2 for b in range(k)] for a in range(k)]


def hessian_W(ds: Dataset | HPData, W: Any, loss: str = "logistic", dps: int = DPS) -> MP:
    r"""$\nabla^2\mathcal L(W)$ as a $d^2\times d^2$ matrix (row-major vec), by :func:`hessian` of :func:`grad_W`."""
    D = data(ds)
    d = D.d
    with mp.workdps(dps + 10):
        Wm = as_mp(W) if not isinstance(W, list) else W
        x = [Wm[a][b] for a in range(d) for b in range(d)]

        def g(y):
            G = grad_W(D, [y[a * d : (a + 1) * d] for a in range(d)], loss, dps + 10)
            return [G[a][b] for a in range(d) for b in range(d)]

        return hessian(g, x, dps)


def smoothness_constant(ds: Dataset | HPData, M0: float = 0.25, M1: float = 1.0, dps: int = DPS) -> mpmath.mpf:
    r"""$L_W=\frac1n\sum_i(M_0\|v\|^2\|z_i\|^2\|X_i\|^4+3M_1\|v\|\|z_i\|^2\|X_i\|^3)$, $\|X_i\|$ spectral, at
    ``dps`` digits (logistic defaults $M_0=\frac14$, $M_1=1$)."""
    D = data(ds)
    with mp.workdps(dps):
        nv = mp.sqrt(mp.fdot(D.v, D.v))
        tot = []
        for i in range(D.N):
            xs = singular_values(D.X[i], dps)[0]  # all T tokens, as attsvm.model.smoothness_constant
            z2 = mp.fdot(D.Z[i], D.Z[i])
            tot.append(mpmath.mpf(M0) * nv**2 * z2 * xs**4 + 3 * mpmath.mpf(M1) * nv * z2 * xs**3)
        return mp.fsum(tot) / D.N
