r"""In-context classification data of Frei & Vardi (arXiv 2410.01774) and its exact encodings (kind ``"icl"``).

**The law** (the authors' generator, ``spencerfrei/icl_classification``, read for the facts). Task $\tau\le B$
draws a mean $\mu_\tau$ uniform on the sphere $R\,\mathbb S^{d-1}$ and $N+1$ fair labels $y_{\tau i}=\pm1$;
the inputs are $x_{\tau i}=y_{\tau i}\mu_\tau+z_{\tau i}$, $z_{\tau i}\sim\mathcal N(0,I_d)$; the first $N$ pairs
are the context, the last the query $(x_\tau,y_\tau)$. With flip rate $p$ every label (context and query) is
then flipped independently with probability $p$ *after* the inputs are drawn (label noise; $p=0$ in training).

**The model.** The one-layer linear transformer of the paper predicts the query's label by the sign of

.. math:: f_\tau(W)=\hat\mu_\tau^\top Wx_\tau=\langle W,\hat\mu_\tau x_\tau^\top\rangle,\qquad
    \hat\mu_\tau=\frac1N\sum_{i\le N}y_{\tau i}x_{\tau i},

and is trained by GD from $W_0=0$ on $\mathcal L(W)=\frac1B\sum_\tau\log(1+e^{-y_\tau f_\tau(W)})$. Its margins
$y_\tau f_\tau(W)=\langle W,A_\tau\rangle$ are linear in $W$ with rank-one constraint matrices
$A_\tau=(y_\tau\hat\mu_\tau)x_\tau^\top$ (:func:`factors`); the max-margin problem is
$\min\|W\|$ s.t. $\langle W,A_\tau\rangle\ge1$ for all $\tau$.

**Two exact encodings** into the project's containers, so that the engine and the certified programs run unchanged:

* :func:`as_attention` — the Att-SVM data: task $\tau$ has the two tokens $x_{\tau0}=y_\tau\hat\mu_\tau$,
  $x_{\tau1}=0$, the query $z_\tau=x_\tau$ and the given selection $\alpha_\tau=0$, so that the Att-SVM constraint
  $\langle W,(x_{\tau0}-x_{\tau1})z_\tau^\top\rangle\ge1$ *is* $\langle W,A_\tau\rangle\ge1$ (logits
  $x_{\tau t}^\top Wz_\tau$, :func:`attsvm.model.logits`: $W$ acts on the same sides as in $f_\tau$).
* :func:`as_ntp` — the next-token data: a vocabulary of the $B$ vectors $y_\tau\hat\mu_\tau$, the $B$ queries and
  $0$; sequence $\tau$ is (its $y_\tau\hat\mu_\tau$, $0$, its query) with the query not attended and label the
  first token. Attention puts $s_{\tau0}=\sigma(\langle W,A_\tau\rangle)$ on the label ($\sigma$ the logistic
  function: the other logit is $0^\top Wx_\tau=0$), so the engine's loss ``nll``
  $-\frac1B\sum_\tau\log s_{\tau0}=\frac1B\sum_\tau\log(1+e^{-\langle W,A_\tau\rangle})$ is the paper's loss,
  with the same $W$ and the same step size: :func:`attsvm.gd.run` with ``algo="gd", loss="nll"`` on it is the
  authors' training, and :func:`attsvm.highprec.replay` replays it at 50 digits.

**Validation** (:class:`~attsvm.errors.InputError`, one line naming the field): arrays finite, real, of consistent
shapes (an optional leading axis of runs), labels exactly $\pm1$, $R>0$ finite, $0\le p<\frac12$.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import as_float, frozen
from .data import Dataset
from .errors import InputError

__all__ = [
    "FIELDS",
    "KIND",
    "ICLData",
    "accuracy",
    "as_attention",
    "as_ntp",
    "factors",
    "from_mapping",
    "generate",
    "in_context_predictions",
    "logits",
    "margins",
    "memorised",
    "stationarity",
]

KIND = "icl"
FIELDS = ("contexts", "labels", "queries", "query_labels", "R", "p_flip", "kind")


def _signs(name: str, a: Any, shape: tuple[int, ...]) -> np.ndarray:
    y = as_float(name, a)
    if y.shape != shape:
        raise InputError(f"field {name!r} must have shape {shape}, got {y.shape}")
    if y.size and not np.all(np.abs(y) == 1.0):
        raise InputError(f"field {name!r}: labels must be +1 or -1")
    return y


def _scalar(name: str, a: Any) -> float:
    x = as_float(name, a)
    if x.ndim != 0:
        raise InputError(f"field {name!r} must be a number, got shape {x.shape}")
    return float(x)


@dataclass(frozen=True, eq=False, repr=False)
class ICLData:
    r"""Validated, immutable in-context classification data: ``contexts`` (..., B, N, d), ``labels`` (..., B, N),
    ``queries`` (..., B, d), ``query_labels`` (..., B), the radius ``R`` and flip rate ``p_flip`` of its law
    (module docstring; ``...``: at most one leading axis of runs)."""

    contexts: np.ndarray
    labels: np.ndarray
    queries: np.ndarray
    query_labels: np.ndarray
    R: float
    p_flip: float = 0.0

    def __post_init__(self) -> None:
        set_ = lambda k, val: object.__setattr__(self, k, val)  # noqa: E731
        X = as_float("contexts", self.contexts)
        if X.ndim not in (3, 4) or 0 in X.shape:
            raise InputError(f"field 'contexts' must have shape (B,N,d) or (runs,B,N,d), non-empty, got {X.shape}")
        lead, (B, N, d) = X.shape[:-3], X.shape[-3:]
        y = _signs("labels", self.labels, (*lead, B, N))
        q = as_float("queries", self.queries)
        if q.shape != (*lead, B, d):
            raise InputError(f"field 'queries' must have shape {(*lead, B, d)}, got {q.shape}")
        yq = _signs("query_labels", self.query_labels, (*lead, B))
        R = _scalar("R", self.R)
        if not R > 0:
            raise InputError(f"field 'R' must be positive, got {R}")
        p = _scalar("p_flip", self.p_flip)
        if not 0 <= p < 0.5:
            raise InputError(f"field 'p_flip' must lie in [0, 1/2), got {p}")
        for k, val in (("contexts", X), ("labels", y), ("queries", q), ("query_labels", yq)):
            set_(k, frozen(val))
        set_("R", R)
        set_("p_flip", p)

    @property
    def kind(self) -> str:
        """``"icl"`` (what :func:`attsvm.data.load` dispatches on)."""
        return KIND

    @property
    def batched(self) -> bool:
        return self.contexts.ndim == 4

    @property
    def batch_size(self) -> int | None:
        return self.contexts.shape[0] if self.batched else None

    @property
    def tasks(self) -> int:
        """$B$, the number of tasks."""
        return self.contexts.shape[-3]

    @property
    def N(self) -> int:
        """The context length."""
        return self.contexts.shape[-2]

    @property
    def d(self) -> int:
        return self.contexts.shape[-1]

    # the attention view (the tokens and queries of the Att-SVM encoding, built here once and read by
    # :func:`as_attention`), for code that reads a data set's sizes and tokens: n inputs (the tasks), T = 2 tokens
    # (y mu_hat and 0), the queries, no per-input query count
    @property
    def n(self) -> int:
        """The tasks $B$: the inputs of the attention encoding."""
        return self.tasks

    @property
    def T(self) -> int:
        r"""2: the tokens $y_\tau\hat\mu_\tau$ and $0$ of the attention encoding."""
        return 2

    @property
    def K(self) -> None:
        """No per-input query count."""
        return None

    @property
    def X(self) -> np.ndarray:
        r"""The tokens of the attention encoding, (..., B, 2, d): $x_{\tau0}=y_\tau\hat\mu_\tau$, $x_{\tau1}=0$."""
        a = factors(self)[0]
        return np.stack([a, np.zeros_like(a)], axis=-2)

    @property
    def Z(self) -> np.ndarray:
        """The queries of the attention encoding, (..., B, d)."""
        return self.queries

    @property
    def mu_hat(self) -> np.ndarray:
        r"""$\hat\mu_\tau=\frac1N\sum_iy_{\tau i}x_{\tau i}$, shape (..., B, d)."""
        return np.einsum("...n,...nd->...d", self.labels, self.contexts) / self.N

    def __len__(self) -> int:
        if not self.batched:
            raise TypeError("len() of a single data set; use .tasks")
        return self.contexts.shape[0]

    def __getitem__(self, b: int) -> ICLData:
        if not self.batched:
            raise TypeError("indexing a single data set")
        return ICLData(self.contexts[b], self.labels[b], self.queries[b], self.query_labels[b], self.R, self.p_flip)

    def to_dict(self) -> dict[str, Any]:
        """The fields as saved (``kind`` ``"icl"`` included)."""
        return {
            "contexts": self.contexts,
            "labels": self.labels,
            "queries": self.queries,
            "query_labels": self.query_labels,
            "R": np.float64(self.R),
            "p_flip": np.float64(self.p_flip),
            "kind": KIND,
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``.npz`` (default) or ``.json`` atomically through :func:`attsvm.data.save`."""
        from .data import save

        return save(self, path)

    def __repr__(self) -> str:
        lead = f"runs={self.batch_size}, " if self.batched else ""
        return f"ICLData({lead}B={self.tasks}, N={self.N}, d={self.d}, R={self.R:g}, p_flip={self.p_flip:g})"


def from_mapping(m: dict[str, Any], source: str = "input") -> ICLData:
    """In-context data from a mapping of fields (a ``.npz`` or ``.json`` file of kind ``"icl"``)."""
    if not isinstance(m, dict):
        raise InputError(f"{source}: expected a mapping of fields {', '.join(FIELDS)}")
    unknown = sorted(set(m) - set(FIELDS))
    if unknown:
        raise InputError(f"{source}: unknown field {unknown[0]!r} for in-context data (fields: {', '.join(FIELDS)})")
    for req in FIELDS[:-2]:
        if req not in m:
            raise InputError(f"{source}: field {req!r} is missing")
    if str(np.asarray(m.get("kind", KIND))) != KIND:
        raise InputError(f"{source}: field 'kind' must be {KIND!r}")
    try:
        return ICLData(m["contexts"], m["labels"], m["queries"], m["query_labels"], m["R"], m.get("p_flip", 0.0))
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


# ---------------------------------------------------------------------- the law
def generate(d: int, B: int, N: int, R: float, p_flip: float = 0.0, seed: int = 0, runs: int | None = None) -> ICLData:
    """Seeded draw of the law of the module docstring (``runs``: a leading axis of independent draws)."""
    for name, val, lo in (("d", d, 1), ("B", B, 1), ("N", N, 1)):
        if isinstance(val, bool) or int(val) != val or val < lo:
            raise InputError(f"{name} must be a positive integer, got {val!r}")
    if not (np.isfinite(R) and R > 0) or not 0 <= p_flip < 0.5:
        raise InputError(f"need R > 0 and 0 <= p_flip < 1/2, got R={R}, p_flip={p_flip}")
    rng = np.random.default_rng(seed)
    lead = () if runs is None else (int(runs),)
    mu = rng.standard_normal((*lead, B, d))
    mu *= R / np.linalg.norm(mu, axis=-1, keepdims=True)
    y = rng.choice([-1.0, 1.0], size=(*lead, B, N + 1))
    x = y[..., None] * mu[..., None, :] + rng.standard_normal((*lead, B, N + 1, d))
    if p_flip > 0:
        y = np.where(rng.random((*lead, B, N + 1)) < p_flip, -y, y)
    return ICLData(x[..., :N, :], y[..., :N], x[..., N, :], y[..., N], R, p_flip)


# ---------------------------------------------------------------------- the model
def factors(data: ICLData) -> tuple[np.ndarray, np.ndarray]:
    r"""The rank-one constraint matrices $A_\tau=a_\tau b_\tau^\top$: ``(a, b)`` with $a_\tau=y_\tau\hat\mu_\tau$,
    $b_\tau=x_\tau$, each (..., B, d)."""
    return data.query_labels[..., None] * data.mu_hat, np.asarray(data.queries)


def logits(W: np.ndarray, data: ICLData) -> np.ndarray:
    r"""$f_\tau(W)=\hat\mu_\tau^\top Wx_\tau$, shape (..., B) (``W`` (d,d), or one per run)."""
    return np.einsum("...bi,...ij,...bj->...b", data.mu_hat, np.asarray(W), data.queries)


def margins(W: np.ndarray, data: ICLData) -> np.ndarray:
    r"""$y_\tau f_\tau(W)=\langle W,A_\tau\rangle$, shape (..., B)."""
    return data.query_labels * logits(W, data)


def accuracy(W: np.ndarray, data: ICLData) -> np.ndarray:
    r"""The fraction of tasks whose query label is $\mathrm{sign}\,f_\tau(W)$ (a zero logit counts as wrong)."""
    return np.mean(margins(W, data) > 0, axis=-1)


def in_context_predictions(W: np.ndarray, data: ICLData) -> np.ndarray:
    r"""$\mathrm{sign}(\hat\mu_\tau^\top Wx_{\tau k})$ for every in-context example $k$ used as the query,
    shape (..., B, N) (0 where the logit is 0)."""
    return np.sign(np.einsum("...bi,...ij,...bkj->...bk", data.mu_hat, np.asarray(W), data.contexts))


def memorised(W: np.ndarray, data: ICLData) -> np.ndarray:
    """Per task, whether every in-context example (flipped or not) is predicted as its label, shape (..., B)."""
    return np.all(in_context_predictions(W, data) == data.labels, axis=-1)


# ---------------------------------------------------------------------- encodings
def as_attention(data: ICLData) -> Dataset:
    """The Att-SVM data of the max-margin programs (module docstring), with the selection ``alpha = 0`` given."""
    if data.batched:
        raise InputError("as_attention takes a single in-context data set (index the runs)")
    B, d = data.tasks, data.d
    v = np.zeros(d)
    v[0] = 1.0  # any head: the selection is the given alpha
    return Dataset(X=data.X, Y=np.ones(B), Z=data.Z, v=v, alpha=np.zeros(B, dtype=np.int64))


def as_ntp(data: ICLData):
    """The next-token data on which GD with loss ``nll`` is the paper's training (module docstring)."""
    from .ntp.data import NTPData

    a, b = factors(data)
    B, d = a.shape[-2:]
    E = np.concatenate([a, b, np.zeros((*a.shape[:-2], 1, d))], axis=-2)
    tok = np.stack([np.arange(B), np.full(B, 2 * B), B + np.arange(B)], axis=1)
    labels = np.arange(B)
    if data.batched:
        tok = np.broadcast_to(tok, (len(data), B, 3))
        labels = np.broadcast_to(labels, (len(data), B))
    return NTPData(E, tok, labels, query_visible=False)


# ---------------------------------------------------------------------- KKT at a finite step
def stationarity(W: np.ndarray, data: ICLData, active: float) -> dict[str, Any]:
    r"""How far the direction of $W$ is from a KKT point of $\min\frac12\|W\|_F^2$ s.t. $\langle W,A_\tau\rangle\ge1$.

    With $\hat W=W/\min_\tau\langle W,A_\tau\rangle$ (min margin 1) and the *active* set
    $S=\{\tau:\langle\hat W,A_\tau\rangle\le1+\mathtt{active}\}$, the KKT conditions (stationarity
    $\hat W=\sum_\tau\lambda_\tau A_\tau$, $\lambda\ge0$, complementary slackness $\lambda_\tau=0$ off $S$) hold to
    tolerance $r$ where

    .. math:: r=\min_{\lambda\ge0}\Big\|\hat W-\sum_{\tau\in S}\lambda_\tau A_\tau\Big\|_F\big/\|\hat W\|_F

    (non-negative least squares, scipy). Returns ``residual`` $r$ (``inf`` when some margin is $\le0$: not
    feasible), ``active`` $|S|$, ``tasks`` $B$, ``lambda`` the fitted multipliers on $S$. The lower bound of $r$
    used to confirm a refutation is :func:`stationarity_lower_bound`."""
    from scipy.optimize import nnls

    if data.batched:
        raise InputError("stationarity takes a single in-context data set")
    W = np.asarray(W, dtype=np.float64)
    m = margins(W, data)
    if not np.min(m) > 0:
        return {"residual": float("inf"), "active": 0, "tasks": data.tasks, "lambda": []}
    Wh = W / np.min(m)
    S = np.flatnonzero(margins(Wh, data) <= 1.0 + active)
    a, b = factors(data)
    A = np.einsum("si,sj->ijs", a[S], b[S]).reshape(-1, len(S))
    lam, res = nnls(A, Wh.reshape(-1))
    return {
        "residual": float(res / np.linalg.norm(Wh)),
        "active": int(len(S)),
        "tasks": data.tasks,
        "lambda": lam.tolist(),
    }


def stationarity_lower_bound(W: np.ndarray, data: ICLData, active: float, prec: int = 200) -> float:
    r"""A rigorous lower bound (ball arithmetic, :mod:`attsvm.ball.linalg`) of the residual $r$ of
    :func:`stationarity`, with $W$ (float64 entries, or nested ``mpf`` of a 50-digit replay) and the data taken as
    exact: the cone
    $\{\sum_S\lambda_\tau A_\tau:\lambda\ge0\}$ lies in the span of the $A_\tau$, $\tau\in S$, so
    $r\ge\mathrm{dist}(\hat W,\mathrm{span})/\|\hat W\|_F$ (scale-free: computed for $W$), the least-squares
    residual, enclosed by solving the normal equations in balls. $S$ is taken as large as rounding allows (every
    task whose margin ratio to the least margin is not proved $>1+\mathtt{active}$), which only lowers the bound.
    Raises :class:`attsvm.kit.Undecidable` when the balls do not decide (a Gram matrix not proved invertible, a
    least margin not proved positive)."""
    from flint import arb

    from .ball.linalg import frob, solve
    from .ball.numbers import arbs, workprec
    from .kit import Undecidable

    if data.batched:
        raise InputError("stationarity_lower_bound takes a single in-context data set")
    a, b = factors(data)
    with workprec(prec):
        Wb, ab, bb = arbs(W), arbs(a), arbs(b)
        marg = [sum((ab[t, i] * Wb[i, j] * bb[t, j] for i in range(data.d) for j in range(data.d)), arb(0))
                for t in range(data.tasks)]  # fmt: skip
        low = min(marg, key=lambda x: float(x.mid()))
        if not all(x >= 0 for x in marg) or not low > 0:
            raise Undecidable("the least margin is not proved positive")
        S = [t for t, m in enumerate(marg) if not (m > low * (1 + arb(active)))]
        A = np.array([np.outer(ab[t], bb[t]).ravel() for t in S], dtype=object).T  # (d*d, |S|)
        w = Wb.ravel()
        c = solve(A.T @ A, A.T @ w, prec).ravel()
        res = w - A @ c
        r = frob(res, prec) / frob(w, prec)
    lo = float(r.lower())
    return max(lo, 0.0)
