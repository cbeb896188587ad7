r"""Token-priority graphs, their strongly connected components, and the graph-SVM constraints.

Li, Huang, Ildiz, Rawat, Oymak (arXiv 2403.08081), THEORY §7. For a query token $k$ the *token-priority graph*
$\mathcal G^{(k)}$ has the vocabulary as nodes and, over the sequences $i$ whose last token is $k$, an edge
$y_i\to j$ for every other token $j\ne y_i$ of the sequence (only attended, i.e. visible, positions count).
Every token of sequence $i$ is reachable from $y_i$, so the label's strongly connected component (SCC) is the
highest-priority SCC present in the sequence. The *graph SVM* (Frobenius) is

.. math:: \min_W\|W\|_F\quad\text{s.t.}\quad(e_y-e_j)^\top We_k\;\begin{cases}=0&y,j\text{ in one SCC of }
   \mathcal G^{(k)},\\ \ge1&\text{otherwise,}\end{cases}

over every sample $i$ (query $k$, label $y$) and token $j\ne y$ of it; :func:`graph_constraints` lists these
constraints (deduplicated) with their directions $e_y-e_j$ and queries $e_k$.

:func:`strongly_connected_components` is Tarjan's algorithm written iteratively (no recursion limit) with the
components numbered in topological order of the condensation: every edge $a\to b$ has
$\mathrm{id}(a)\le\mathrm{id}(b)$, with equality exactly inside a component, and id 0 is a source component.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:
    from .data import NTPData


def strongly_connected_components(adj: np.ndarray) -> np.ndarray:
    r"""Component ids (K,) int64 of the digraph ``adj`` (K, K) bool, ``adj[a, b]``: an edge $a\to b$.

    $a,b$ share an id iff each reaches the other. Ids run over $0,\dots,C-1$ in topological order of the
    condensation: an edge $a\to b$ has $\mathrm{id}(a)\le\mathrm{id}(b)$, so id 0 is a source component (the
    highest priority). Tarjan's algorithm, iterative, $O(K+|E|)$ after reading the edges; Tarjan completes the
    components in reverse topological order (a component is completed after every component it reaches), so the
    $c$-th completed one gets id $C-1-c$."""
    A = np.asarray(adj)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise InputError(f"adjacency must be a square (K,K) matrix, got shape {A.shape}")
    if A.dtype.kind != "b":
        raise InputError(f"adjacency must be a boolean array, got dtype {A.dtype}")
    K = A.shape[0]
    src, dst = np.nonzero(A)
    start = np.searchsorted(src, np.arange(K + 1))  # np.nonzero is row-major: the edges of a are contiguous
    succ = dst.tolist()
    start = start.tolist()
    index = [-1] * K  # discovery index
    low = [0] * K
    on_stack = [False] * K
    comp = [-1] * K
    stack: list[int] = []
    completed = 0
    counter = 0
    for root in range(K):
        if index[root] >= 0:
            continue
        work = [(root, start[root])]  # (node, next edge position to scan)
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, pos = work[-1]
            end = start[v + 1]
            descended = False
            while pos < end:
                w = succ[pos]
                pos += 1
                if index[w] < 0:
                    work[-1] = (v, pos)
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, start[w]))
                    descended = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            work.pop()
            if low[v] == index[v]:  # v is the root of a component: pop it
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = completed
                    if w == v:
                        break
                completed += 1
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
    ids = np.asarray(comp, dtype=np.int64)
    return (completed - 1 - ids).astype(np.int64)


@dataclass(frozen=True)
class PriorityGraphs:
    r"""The token-priority graphs $\mathcal G^{(q)}$ of the query ids ``queries`` (Kq,) int64 present (sorted):
    ``adjacency`` (Kq, K, K) bool (``adjacency[r, a, b]``: edge $a\to b$ in the graph of ``queries[r]``), ``scc``
    (Kq, K) int64 the component ids of :func:`strongly_connected_components` (every vocabulary item has one;
    items without edges are singletons)."""

    queries: np.ndarray
    adjacency: np.ndarray
    scc: np.ndarray

    def index(self, q: int) -> int:
        """The row of query id ``q`` (a KeyError when no sequence ends with ``q``)."""
        r = int(np.searchsorted(self.queries, q))
        if r >= len(self.queries) or int(self.queries[r]) != int(q):
            raise KeyError(f"no sequence ends with token {q} (queries present: {self.queries.tolist()})")
        return r


def _single(data: NTPData, what: str) -> None:
    if getattr(data, "kind", None) != "ntp":
        raise InputError(f"{what} takes next-token data (attsvm.ntp.NTPData)")
    if data.batched:
        raise InputError(f"{what} takes a single data set (index a batch first)")


def _query_rows(data: NTPData) -> tuple[np.ndarray, np.ndarray]:
    """``(queries, row of each sample)``: the sorted query ids present and the row index of each sample's."""
    queries, rows = np.unique(data.query_ids, return_inverse=True)
    return queries.astype(np.int64), rows.reshape(-1).astype(np.int64)


def _rows_in(g: PriorityGraphs, q: np.ndarray) -> np.ndarray:
    """The rows of ``g`` of the query ids ``q`` (a KeyError for an id without a graph)."""
    rows = np.searchsorted(g.queries, q).astype(np.int64)
    ok = rows < len(g.queries)
    ok[ok] = g.queries[rows[ok]] == q[ok]
    if not np.all(ok):
        g.index(int(q[~ok][0]))  # raises, naming the id
    return rows


def _edges(data: NTPData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sample, position, token)`` of every visible position whose token differs from the sample's label
    (each is an edge label -> token of the sample's graph), sample-major."""
    tok = data.tokens
    other = tok != data.labels[:, None]
    if data.visible is not None:
        other &= data.visible
    i, t = np.nonzero(other)
    return i.astype(np.int64), t.astype(np.int64), tok[i, t].astype(np.int64)


def priority_graphs(data: NTPData) -> PriorityGraphs:
    r"""The graphs $\mathcal G^{(q)}$ of a single data set: an edge $y_i\to\tau_{it}$ for every sample $i$ with
    query $q$ and every visible position $t$ with $\tau_{it}\ne y_i$; and their components."""
    _single(data, "priority_graphs")
    queries, rows = _query_rows(data)
    K = data.K
    adj = np.zeros((len(queries), K, K), dtype=bool)
    i, _, j = _edges(data)
    adj[rows[i], data.labels[i], j] = True
    scc = np.stack([strongly_connected_components(a) for a in adj]).astype(np.int64)
    for a in (queries, adj, scc):
        a.setflags(write=False)
    return PriorityGraphs(queries, adj, scc)


def top_scc_mask(data: NTPData, graphs: PriorityGraphs | None = None) -> np.ndarray:
    r"""(n, T) bool: the visible positions whose token shares a component of $\mathcal G^{(z_i)}$ with the label
    $y_i$ (the label's own occurrences included) — the highest-priority component present in sequence $i$."""
    _single(data, "top_scc_mask")
    g = priority_graphs(data) if graphs is None else graphs
    c = g.scc[_rows_in(g, data.query_ids)]  # (n, K)
    mine = np.take_along_axis(c, data.tokens, axis=1)
    lab = np.take_along_axis(c, data.labels[:, None], axis=1)
    out = mine == lab
    if data.visible is not None:
        out &= data.visible
    return out


@dataclass(frozen=True)
class GraphConstraints:
    r"""The graph-SVM constraints of one data set, deduplicated (see the module docstring).

    ``eq`` (m_e, 3) int64 triples $(q,y,j)$, $y<j$: $(e_y-e_j)^\top We_q=0$ (one per unordered pair of one
    component per query); ``ineq`` (m_i, 3) triples $(q,y,j)$: $(e_y-e_j)^\top We_q\ge1$ (unique). ``D_eq``,
    ``D_in`` the directions $e_y-e_j$, ``Z_eq``, ``Z_in`` the queries $e_q$ (rows, (m, d)); ``sample_eq``,
    ``sample_in`` the first sample that produced each constraint. Rows sorted by triple."""

    eq: np.ndarray
    ineq: np.ndarray
    D_eq: np.ndarray
    Z_eq: np.ndarray
    D_in: np.ndarray
    Z_in: np.ndarray
    sample_eq: np.ndarray
    sample_in: np.ndarray


def _unique_rows(trip: np.ndarray, sample: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique rows of ``trip`` (m, 3) sorted, with the first ``sample`` producing each (``trip`` sample-major)."""
    if len(trip) == 0:
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
    u, first = np.unique(trip, axis=0, return_index=True)
    return u.astype(np.int64), sample[first].astype(np.int64)


def graph_constraints(data: NTPData, graphs: PriorityGraphs | None = None) -> GraphConstraints:
    r"""The graph-SVM constraints: for each sample $i$ (query $q$, label $y$) and each visible token $j\ne y$ of
    it, $(e_y-e_j)^\top We_q=0$ if $y,j$ share a component of $\mathcal G^{(q)}$, else $\ge1$ (deduplicated:
    :class:`GraphConstraints`)."""
    _single(data, "graph_constraints")
    g = priority_graphs(data) if graphs is None else graphs
    i, _, j = _edges(data)
    q = data.query_ids[i]
    y = data.labels[i]
    rows = _rows_in(g, q)
    same = g.scc[rows, y] == g.scc[rows, j]
    lo, hi = np.minimum(y, j), np.maximum(y, j)
    eq, s_eq = _unique_rows(np.stack([q, lo, hi], axis=1)[same], i[same])
    ineq, s_in = _unique_rows(np.stack([q, y, j], axis=1)[~same], i[~same])
    E = data.E
    out = [eq, ineq, E[eq[:, 1]] - E[eq[:, 2]], E[eq[:, 0]], E[ineq[:, 1]] - E[ineq[:, 2]], E[ineq[:, 0]], s_eq, s_in]
    for a in out:
        a.setflags(write=False)
    return GraphConstraints(*out)


__all__ = [
    "GraphConstraints",
    "PriorityGraphs",
    "graph_constraints",
    "priority_graphs",
    "strongly_connected_components",
    "top_scc_mask",
]
