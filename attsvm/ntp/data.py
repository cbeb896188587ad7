r"""Next-token data (kind ``"ntp"``): a vocabulary, sequences of token ids and one label per sequence.

Li, Huang, Ildiz, Rawat, Oymak (arXiv 2403.08081), THEORY §7. A vocabulary of $K$ embeddings
$e_1,\dots,e_K\in\mathbb R^d$; sequence $i$ is a list of $T$ token ids $\tau_{i1},\dots,\tau_{iT}\in[K]$ with
tokens $x_{it}=e_{\tau_{it}}$, query the last token $z_i=x_{iT}$ and label $y_i\in[K]$, an id that occurs in the
sequence. Attention $s_i=\mathbb S(X_iWz_i)$; the probability of item $k$ is the attention mass on its
occurrences and the loss the negative log-mass on the label:

.. math:: p_i(k)=\sum_{t:\,\tau_{it}=k}s_{it},\qquad \mathcal L(W)=-\frac1n\sum_i\log p_i(y_i).

=================  ===============  ==========================================================================
field              shape            meaning
=================  ===============  ==========================================================================
``E``              (K, d)           vocabulary embeddings, row $k$ is $e_k^\top$
``tokens``         (n, T) int       token ids $\tau_{it}\in[0,K)$
``labels``         (n,) int         label ids $y_i\in[0,K)$
``query_visible``  bool             False: the last position (the query) is not attended (linear-NTP control)
=================  ===============  ==========================================================================

A *batch* carries a leading axis ``B`` on ``E``, ``tokens`` and ``labels``.

**Repeated ids.** An id may occur several times in one sequence: its probability is the mass summed over its
occurrences (``label_mask`` marks every visible occurrence of the label). The fixed token scores the GD engine
reads (``scores``) are 1 on those occurrences and 0 elsewhere, so the correlation $\gamma_i^\top s_i=p_i(y_i)$.

**Validation** (:class:`~attsvm.errors.InputError`, one line naming the field): ``E`` finite, real, numeric, of
shape (K, d) with $K\ge2$, $d\ge1$, and no two vocabulary items with equal embeddings (the label would be
ambiguous: the message names both ids); ``tokens``/``labels`` integer arrays (a float array is rejected even
when integral) with ids in $[0,K)$ and consistent shapes; $T\ge2$ ($T\ge3$ when the query is not visible); every
label occurs at a visible position of its sequence (the message names the sample). Every array is read-only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..arrays import as_float, frozen
from ..data import FlatView, flat_once
from ..errors import InputError

KIND = "ntp"
FIELDS = ("E", "tokens", "labels", "kind", "query_visible")


def _ids(name: str, a: Any) -> np.ndarray:
    """``a`` as an integer array (no cast from float, bool or object arrays); an InputError names the field."""
    try:
        raw = np.asarray(a)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise InputError(f"field {name!r} is not a rectangular array of integer ids") from exc
    if raw.dtype.kind not in "iu":
        raise InputError(f"field {name!r} must hold integer token ids (integer dtype), got dtype {raw.dtype}")
    return raw


def _is_bool(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_)) or (isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind == "b")


@dataclass(frozen=True, eq=False, repr=False)
class NTPData:
    r"""Validated, immutable next-token data (or a batch of them, leading axis B); see the module docstring."""

    E: np.ndarray
    tokens: np.ndarray
    labels: np.ndarray
    query_visible: bool = True

    def __post_init__(self) -> None:
        set_ = lambda k, val: object.__setattr__(self, k, val)  # noqa: E731
        E = as_float("E", self.E)
        if E.ndim not in (2, 3):
            raise InputError(f"field 'E' must have shape (K,d) or (B,K,d), got {E.shape}")
        if 0 in E.shape:
            raise InputError(f"field 'E' is empty (shape {E.shape})")
        lead = E.shape[:-2]
        K, d = E.shape[-2:]
        if K < 2:
            raise InputError(f"field 'E' must hold K >= 2 vocabulary items, got K={K}")
        if not _is_bool(self.query_visible):
            raise InputError(f"field 'query_visible' must be a boolean, got {self.query_visible!r}")
        qv = bool(self.query_visible)
        tok = _ids("tokens", self.tokens)
        if tok.ndim != len(lead) + 2 or tok.shape[: len(lead)] != lead:
            raise InputError(f"field 'tokens' must have shape {(*lead, 'n', 'T')}, got {tok.shape}")
        n, T = tok.shape[-2:]
        if n < 1:
            raise InputError("field 'tokens' holds no sequence (n = 0)")
        tmin = 2 if qv else 3
        if T < tmin:
            why = "" if qv else " when the query is not visible"
            raise InputError(f"field 'tokens': sequences need T >= {tmin} tokens{why}, got T={T}")
        if np.any(tok < 0) or np.any(tok >= K):
            raise InputError(f"field 'tokens' out of range (ids must lie in [0,{K}))")
        lab = _ids("labels", self.labels)
        if lab.shape != (*lead, n):
            raise InputError(f"field 'labels' must have shape {(*lead, n)}, got {lab.shape}")
        if np.any(lab < 0) or np.any(lab >= K):
            raise InputError(f"field 'labels' out of range (ids must lie in [0,{K}))")
        tok = tok.astype(np.int64)
        lab = lab.astype(np.int64)
        _check_distinct(E)
        vis = None
        if not qv:
            vis = np.ones((*lead, n, T), dtype=bool)
            vis[..., -1] = False
        mask = tok == lab[..., None]
        if vis is not None:
            mask &= vis
        missing = ~np.any(mask, axis=-1)
        if np.any(missing):
            where = tuple(int(j) for j in np.argwhere(missing)[0])
            i = where[-1]
            item = f" of batch item {where[0]}" if lead else ""
            at = "a visible position of" if not qv else "in"
            raise InputError(
                f"field 'labels': the label {int(lab[where])} of sample {i}{item} does not occur {at} its sequence"
            )
        if lead:
            X = E[np.arange(lead[0])[:, None, None], tok]
        else:
            X = E[tok]
        set_("E", frozen(E))
        set_("tokens", frozen(tok))
        set_("labels", frozen(lab))
        set_("query_visible", qv)
        set_("_X", frozen(X))
        set_("_visible", None if vis is None else frozen(vis))
        set_("_label_mask", frozen(mask))
        set_("_label_position", frozen(np.argmax(mask, axis=-1).astype(np.int64)))

    # ------------------------------------------------------------------ shapes
    @property
    def kind(self) -> str:
        """``"ntp"`` (what :func:`attsvm.data.load` dispatches on)."""
        return KIND

    @property
    def batched(self) -> bool:
        return self.E.ndim == 3

    @property
    def batch_size(self) -> int | None:
        return self.E.shape[0] if self.batched else None

    @property
    def n(self) -> int:
        """Number of sequences."""
        return self.tokens.shape[-2]

    @property
    def T(self) -> int:
        """Sequence length (the query, the last token, included)."""
        return self.tokens.shape[-1]

    @property
    def d(self) -> int:
        """Embedding dimension."""
        return self.E.shape[-1]

    @property
    def K(self) -> int:
        """Vocabulary size."""
        return self.E.shape[-2]

    # ------------------------------------------------------------------ derived
    @property
    def X(self) -> np.ndarray:
        r"""Tokens $x_{it}=e_{\tau_{it}}$, shape (..., n, T, d) (``E[tokens]``)."""
        return self._X

    @property
    def Z(self) -> np.ndarray:
        r"""Queries $z_i=x_{iT}$ (the last token), shape (..., n, d)."""
        return self._X[..., -1, :]

    @property
    def v(self) -> np.ndarray:
        """No head: zeros (..., d), as in :meth:`flat` (for code that reads a data set's ``X``, ``Z``, ``v``)."""
        return np.zeros((*self.E.shape[:-2], self.d))

    @property
    def query_ids(self) -> np.ndarray:
        """The query token ids ``tokens[..., -1]``, shape (..., n)."""
        return self.tokens[..., -1]

    @property
    def visible(self) -> np.ndarray | None:
        """The attended positions (..., n, T) bool (all but the last when the query is not visible), or None when
        every position is attended."""
        return self._visible

    @property
    def label_mask(self) -> np.ndarray:
        r"""(..., n, T) bool: the visible positions holding the label, $\tau_{it}=y_i$."""
        return self._label_mask

    @property
    def label_position(self) -> np.ndarray:
        """(..., n) int64: the first visible position holding the label."""
        return self._label_position

    @property
    def opt(self) -> np.ndarray:
        """Alias of :attr:`label_position` (the selection the GD engine reads)."""
        return self._label_position

    @property
    def scores(self) -> np.ndarray:
        r"""The fixed token scores $\gamma_{it}=[\tau_{it}=y_i]$ on visible positions, (..., n, T) float64 (so
        $\gamma_i^\top s_i=p_i(y_i)$)."""
        return self._label_mask.astype(np.float64)

    # ------------------------------------------------------------------ batching
    def __len__(self) -> int:
        if not self.batched:
            raise TypeError("len() of a single data set; use .n")
        return self.E.shape[0]

    def __getitem__(self, b: int) -> NTPData:
        if not self.batched:
            raise TypeError("indexing a single data set; use .tokens[i] etc.")
        return NTPData(self.E[b], self.tokens[b], self.labels[b], self.query_visible)

    def __iter__(self):
        for b in range(len(self)):
            yield self[b]

    @staticmethod
    def stack(items: list[NTPData]) -> NTPData:
        """Stack single data sets of one shape (and one ``query_visible``) into a batch."""
        if not items:
            raise InputError("cannot stack an empty list of data sets")
        f = items[0]
        for it in items:
            if (
                not isinstance(it, NTPData)
                or it.batched
                or it.E.shape != f.E.shape
                or it.tokens.shape != f.tokens.shape
                or it.query_visible != f.query_visible
            ):
                raise InputError("next-token data sets to stack must be single, of one shape and one query_visible")
        return NTPData(
            np.stack([it.E for it in items]),
            np.stack([it.tokens for it in items]),
            np.stack([it.labels for it in items]),
            f.query_visible,
        )

    # ------------------------------------------------------------------ flat view
    @flat_once
    def flat(self) -> FlatView:
        """The cross-attention view: one row per sequence, tokens ``X``, queries ``Z``, labels ``Y = 1``, head
        ``v = 0``, visibility ``mask`` (None: all visible), selection ``alpha`` = :attr:`label_position`. Built
        once per data set, read-only (:func:`attsvm.data.flat_once`)."""
        lead = self.E.shape[:-2]
        n = self.n
        return FlatView(
            self.X,
            np.ones((*lead, n)),
            self.Z,
            self.v,
            self.visible,
            self.label_position,
            np.arange(n),
            np.zeros(n, dtype=np.int64),
        )

    # ------------------------------------------------------------------ io
    def to_dict(self) -> dict[str, Any]:
        """The fields as saved (``kind`` ``"ntp"`` included)."""
        return {
            "E": self.E,
            "tokens": self.tokens,
            "labels": self.labels,
            "kind": KIND,
            "query_visible": self.query_visible,
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``.npz`` (default) or ``.json`` atomically (:func:`attsvm.data.save`); loadable by
        :func:`attsvm.data.load`."""
        from ..data import save

        return save(self, path)

    # ------------------------------------------------------------------ display
    def _sizes(self) -> str:
        lead = f"B={self.batch_size}, " if self.batched else ""
        return f"{lead}n={self.n}, T={self.T}, K={self.K}, d={self.d}"

    def __repr__(self) -> str:
        q = "" if self.query_visible else ", query_visible=False"
        return f"NTPData({self._sizes()}{q})"


def _check_distinct(E: np.ndarray) -> None:
    """No two vocabulary items (rows of E, per batch item) with equal embeddings; the error names both ids."""
    lead = E.shape[:-2]
    flat = E.reshape(-1, *E.shape[-2:])
    for b, Eb in enumerate(flat):
        order = np.lexsort(Eb.T[::-1])  # rows sorted lexicographically: equal rows are adjacent
        S = Eb[order]
        same = np.all(S[1:] == S[:-1], axis=-1)
        if np.any(same):
            j = int(np.flatnonzero(same)[0])
            a, c = sorted((int(order[j]), int(order[j + 1])))
            item = f" (batch item {b})" if lead else ""
            raise InputError(
                f"field 'E': vocabulary items {a} and {c} have equal embeddings{item}; the label would be ambiguous"
            )


def from_mapping(m: dict[str, Any], source: str = "input") -> NTPData:
    """Next-token data from a mapping of field names (as in a ``.npz`` or ``.json`` file of kind ``"ntp"``)."""
    if not isinstance(m, dict):
        raise InputError(f"{source}: expected a mapping of fields {', '.join(FIELDS)}")
    unknown = sorted(set(m) - set(FIELDS))
    if unknown:
        raise InputError(f"{source}: unknown field {unknown[0]!r} for next-token data (fields: {', '.join(FIELDS)})")
    for req in ("E", "tokens", "labels"):
        if req not in m:
            raise InputError(f"{source}: field {req!r} is missing")
    kind = m.get("kind", KIND)
    if not (isinstance(kind, str) or (isinstance(kind, np.ndarray) and kind.ndim == 0)) or str(kind) != KIND:
        raise InputError(f"{source}: field 'kind' must be {KIND!r}, got {kind!r}")
    qv = m.get("query_visible", True)
    if not _is_bool(qv):
        raise InputError(f"{source}: field 'query_visible' must be a boolean, got {qv!r}")
    try:
        return NTPData(m["E"], m["tokens"], m["labels"], bool(qv))
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


__all__ = ["FIELDS", "KIND", "NTPData", "from_mapping"]
