r"""Seeded generators of next-token data (the law of Li, Huang, Ildiz, Rawat, Oymak, arXiv 2403.08081, and of
their code ``yixiao-huang/next-token-prediction``, ``data_utils.data_generator``).

* :func:`vocabulary` — $K$ embeddings in $\mathbb R^d$: ``random`` (Gaussian rows normalised), ``ortho``
  (orthonormal rows, $K\le d$), ``equicorr`` (unit rows, pairwise inner products $\rho$, $K\le d-1$).
* :func:`ntp` — $n$ sequences of $T$ distinct ids drawn uniformly ($T\le K$), the query the last token. Labels by
  ``graph``:

  - ``"any"`` (the authors' law): $y_i$ uniform over $[K]$, replaced by a uniform (visible) token of the sequence
    when it does not occur there;
  - ``"cyclic"``: the law of ``"any"``, then one sample $i_2$ is rearranged (:func:`plant_cycle`) so that with
    another sample $i_1$ of label $y$ and a token $b\ne y$ of $i_1$: $i_2$ ends with $i_1$'s query $q$, contains
    $y$ and $b$, and has label $b$ — edges $y\to b$ and $b\to y$ in $\mathcal G^{(q)}$, an SCC of two items by
    construction (needs $n\ge2$);
  - ``"acyclic"``: a uniformly random priority order of the vocabulary per query id; $y_i$ is the visible token of
    highest priority in its sequence. Every edge of $\mathcal G^{(q)}$ then descends the order of $q$, so every
    graph is acyclic by construction.

Defaults of the paper experiments: $n=6$, $T=4$, $K=6$, $d=8$, ``vocab="random"``. The generator is a seeded
:class:`numpy.random.Generator` (an int seed or a generator); the same seed gives the same arrays, and a batch
(``B``) draws its items one after the other from one generator, so item 0 of a batch is the unbatched data set of
the same seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import InputError
from .data import NTPData

VOCABS = ("random", "ortho", "equicorr")
GRAPHS = ("any", "cyclic", "acyclic")


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _positive(name: str, x, lo: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or int(x) < lo:
        raise InputError(f"{name} must be an integer >= {lo}, got {x!r}")
    return int(x)


def _check_rho(rho) -> float:
    if isinstance(rho, bool) or not isinstance(rho, (int, float, np.floating, np.integer)) or not 0 <= rho < 1:
        raise InputError(f"rho must be a number in [0, 1), got {rho!r}")
    return float(rho)


def _orthonormal_columns(d: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m <= d`` orthonormal columns (d, m): Q of the QR factorisation of a Gaussian, signs fixed by R's diagonal
    (Haar-distributed)."""
    Q, R = np.linalg.qr(rng.standard_normal((d, m)))
    s = np.sign(np.diag(R))
    return Q * np.where(s == 0, 1.0, s)


def vocabulary(K: int, d: int, vocab: str = "random", rho: float = 0.5, rng=0) -> np.ndarray:
    r"""$K$ embeddings (K, d): ``random`` $e_k=g_k/\|g_k\|$, $g_k\sim\mathcal N(0,I_d)$; ``ortho`` orthonormal rows
    ($K\le d$, QR of a Gaussian); ``equicorr`` $e_k=\sqrt\rho\,c_0+\sqrt{1-\rho}\,c_k$ from orthonormal
    $c_0,\dots,c_K$ ($K\le d-1$): unit rows with $e_k^\top e_l=\rho$ ($k\ne l$) up to rounding. ``rng``: a seed or a
    :class:`numpy.random.Generator`."""
    K = _positive("K", K, 2)
    d = _positive("d", d)
    rho = _check_rho(rho)
    r = _rng(rng)
    if vocab == "random":
        G = r.standard_normal((K, d))
        return G / np.linalg.norm(G, axis=-1, keepdims=True)
    if vocab == "ortho":
        if K > d:
            raise InputError(f"vocab 'ortho' needs K <= d, got K={K}, d={d}")
        return np.ascontiguousarray(_orthonormal_columns(d, K, r).T)
    if vocab == "equicorr":
        if K > d - 1:
            raise InputError(f"vocab 'equicorr' needs K <= d - 1, got K={K}, d={d}")
        C = _orthonormal_columns(d, K + 1, r).T  # rows c_0, ..., c_K
        return np.sqrt(rho) * C[0] + np.sqrt(1.0 - rho) * C[1:]
    raise InputError(f"vocab must be one of {', '.join(VOCABS)}, got {vocab!r}")


def plant_cycle(
    seq: np.ndarray, q: int, y: int, b: int, query_visible: bool = True, pick: Callable[[int], int] | None = None
) -> np.ndarray:
    r"""A copy of the sequence ``seq`` (distinct ids) rearranged to end with ``q`` and to hold ``y`` and ``b``
    ($y\ne b$) at visible positions, changing as few ids as possible: ``q`` is swapped to the end (or written there),
    and each of ``y``, ``b`` that is missing replaces the id at a visible position that holds none of $q,y,b$ — the
    ``pick(m)``-th of the $m$ candidates (default the first). The result has distinct ids. With a sample $i_1$
    (query $q$, label $y$, token $b$) and this sequence labelled $b$, $\mathcal G^{(q)}$ has the edges $y\to b$ and
    $b\to y$. Needs $T\ge2$, and $T\ge3$ with $q\notin\{y,b\}$ visible positions when the query is not visible."""
    s = np.array(seq, dtype=np.int64)
    T = len(s)
    if y == b:
        raise ValueError("plant_cycle needs two different tokens y != b")
    if not query_visible and q in (y, b):
        raise ValueError("with an invisible query, y and b must differ from the query token")
    at = np.flatnonzero(s == q)
    if at.size:
        p = int(at[0])
        s[p], s[T - 1] = s[T - 1], s[p]
    else:
        s[T - 1] = q
    tv = T if query_visible else T - 1
    for x in (y, b):
        if x in s[:tv]:
            continue
        cand = [t for t in range(T - 1) if s[t] not in (q, y, b)]
        if not cand:
            raise ValueError("plant_cycle: no position left for the planted tokens (T too small)")
        s[cand[0 if pick is None else int(pick(len(cand)))]] = x
    return s


def _one(rng, n, T, K, d, vocab, rho, graph, query_visible):
    E = vocabulary(K, d, vocab, rho, rng)
    tokens = np.argsort(rng.random((n, K)), axis=1)[:, :T].astype(np.int64)  # T distinct ids, uniform, in order
    tv = T if query_visible else T - 1
    vis = tokens[:, :tv]
    if graph == "acyclic":
        rank = np.argsort(rng.random((K, K)), axis=1).argsort(axis=1)  # rank[q, k]: priority of k for query q
        r = np.take_along_axis(rank[tokens[:, -1]], vis, axis=1)  # (n, tv)
        labels = np.take_along_axis(vis, np.argmin(r, axis=1)[:, None], axis=1)[:, 0]
        return E, tokens, labels
    labels = rng.integers(0, K, size=n)
    fallback = vis[np.arange(n), rng.integers(0, tv, size=n)]
    labels = np.where(np.any(vis == labels[:, None], axis=1), labels, fallback)
    if graph == "cyclic":
        i1, i2 = (int(x) for x in rng.choice(n, size=2, replace=False))
        y = int(labels[i1])
        others = [int(x) for x in vis[i1] if x != y]
        b = others[int(rng.integers(0, len(others)))]
        tokens[i2] = plant_cycle(tokens[i2], int(tokens[i1, -1]), y, b, query_visible, lambda m: rng.integers(0, m))
        labels[i2] = b
    return E, tokens, labels


def ntp(
    n: int = 6,
    T: int = 4,
    K: int = 6,
    d: int = 8,
    vocab: str = "random",
    rho: float = 0.5,
    graph: str = "any",
    seed=0,
    B: int | None = None,
    query_visible: bool = True,
) -> NTPData:
    """Next-token data of the module docstring's law (``B``: a batch of ``B`` data sets, drawn in turn from one
    generator). ``query_visible=False``: the query position is not attended (labels among the other tokens)."""
    n, T, K, d = (_positive(k, v, lo) for k, v, lo in (("n", n, 1), ("T", T, 2), ("K", K, 2), ("d", d, 1)))
    if vocab not in VOCABS:
        raise InputError(f"vocab must be one of {', '.join(VOCABS)}, got {vocab!r}")
    if graph not in GRAPHS:
        raise InputError(f"graph must be one of {', '.join(GRAPHS)}, got {graph!r}")
    if not isinstance(query_visible, (bool, np.bool_)):
        raise InputError(f"query_visible must be a boolean, got {query_visible!r}")
    if T > K:
        raise InputError(f"sequences of T distinct ids need T <= K, got T={T}, K={K}")
    if not query_visible and T < 3:
        raise InputError(f"an invisible query needs T >= 3, got T={T}")
    if graph == "cyclic" and n < 2:
        raise InputError(f"graph 'cyclic' needs n >= 2 sequences, got n={n}")
    r = _rng(seed)
    if B is None:
        return NTPData(*_one(r, n, T, K, d, vocab, rho, graph, query_visible), bool(query_visible))
    B = _positive("B", B)
    items = [_one(r, n, T, K, d, vocab, rho, graph, query_visible) for _ in range(B)]
    return NTPData(*(np.stack([it[k] for it in items]) for k in range(3)), bool(query_visible))


__all__ = ["GRAPHS", "VOCABS", "ntp", "plant_cycle", "vocabulary"]
