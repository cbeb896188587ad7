r"""Data sets: validated, immutable arrays in the notation of THEORY §1.

A data set holds $n$ inputs $(X_i, Y_i, z_i)$ and a fixed head $v$:

=========  ===============  ==========================================================
field      shape            meaning
=========  ===============  ==========================================================
``X``      (n, T, d)        tokens, row $t$ of $X_i$ is $x_{it}^\top$
``Y``      (n,)             labels $Y_i\in\{\pm1\}$
``Z``      (n, d)           queries $z_i$ (cross-attention)
``v``      (d,)             linear head
``alpha``  (n,) int         optional selection $\alpha\in[T]^n$ (default: $\mathrm{opt}$)
``mask``   (n, T) bool      optional visibility (cross/self data): token $t$ of input $i$ exists iff
                            ``mask[i, t]`` (padding of inputs of different lengths); default all visible
=========  ===============  ==========================================================

Other forms (``kind``):

* ``"self"``: $z_i = x_{iq}$ with ``query_index`` $q$ (``Z`` is derived, not stored).
* ``"sequence"``: ``Z`` (n, K, d) queries $z_{ik}$, ``Y`` (n, K) labels $Y_{ik}$, ``alpha`` (n, K).
* ``"causal"``: $z_{ik}=x_{ik}$, $K=T$, query $k$ sees tokens $t\le k$; ``Y`` (n, T), ``alpha`` (n, T).

A *batch* of same-shape data sets carries a leading axis ``B`` on every array (``v`` is (B, d)).

Scores $\gamma_{it}=Y_i\,v^\top x_{it}$; the optimal token $\mathrm{opt}_i=\arg\max_t\gamma_{it}$
must be unique unless ``alpha`` is given explicitly (a tie is an :class:`~attsvm.errors.InputError`); a
*near*-tie, a gap $\gamma_{i,\mathrm{opt}_i}-\max_{t\ne\mathrm{opt}_i}\gamma_{it}\le$ ``tol("near_tie")``
$\cdot\|v\|\max_t\|x_{it}\|$ (rounding of the scores could decide it), is accepted with a
:class:`~attsvm.errors.NearTieWarning`. Data are real: complex arrays, non-numeric arrays and float ``alpha``
(even integral floats) are input errors.

Every sequence/causal data set has a *flat view* (:meth:`Dataset.flat`): one row per query $(i,k)$,
with tokens $X_i$, query $z_{ik}$, label $Y_{ik}$ and a visibility mask, so that every program and
algorithm written for cross-attention serves the other forms too. It is built once per data set object and kept
(:func:`flat_once`), its arrays read-only like the data set's own: a data set is never changed after construction.

Next-token data (kind ``"ntp"``: a vocabulary, token ids and labels) is :class:`attsvm.ntp.data.NTPData`;
:func:`load` and :func:`from_mapping` return one for a file or mapping of that kind; in-context classification
data (kind ``"icl"``: contexts, labels, queries) is :class:`attsvm.icl.ICLData`, likewise.
"""

from __future__ import annotations

import functools
import json
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .arrays import as_float, frozen
from .errors import InputError

if TYPE_CHECKING:
    from .icl import ICLData
    from .ntp.data import NTPData

KINDS = ("cross", "self", "sequence", "causal")


@dataclass(frozen=True)
class FlatView:
    r"""One row per query: tokens ``X`` (..., N, T, d), queries ``Z`` (..., N, d), labels ``Y`` (..., N),
    visibility ``mask`` (..., N, T) bool or None (all visible), selection ``alpha`` (..., N) or None,
    ``owner`` (N,) the input index $i$ of each row, ``query`` (N,) its query index $k$."""

    X: np.ndarray
    Y: np.ndarray
    Z: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None
    alpha: np.ndarray | None
    owner: np.ndarray
    query: np.ndarray


#: the flat view of each live data container, built on first use (:func:`flat_once`); an entry goes with its object
_FLAT_VIEWS: weakref.WeakKeyDictionary[Any, FlatView] = weakref.WeakKeyDictionary()


def flat_once(build: Callable[[Any], FlatView]) -> Callable[[Any], FlatView]:
    """Decorator of a data container's ``flat`` method (:class:`Dataset`, :class:`attsvm.ntp.data.NTPData`): the
    view is built on the first call, its arrays made read-only (an in-place write is an error, as on the data set's
    own arrays), and the same object returned for the container's life.

    The view is kept beside the object, not in it (a table of weak references): pickles and copies of a data set
    (to worker processes) do not carry it, and its fields, equality and ``dataclasses.replace`` are untouched. This
    is sound because a data set never changes after construction (frozen dataclass, read-only arrays)."""

    @functools.wraps(build)
    def flat(self: Any) -> FlatView:
        view = _FLAT_VIEWS.get(self)
        if view is None:
            view = build(self)
            for f in fields(view):
                a = getattr(view, f.name)
                if isinstance(a, np.ndarray):
                    a.setflags(write=False)
            _FLAT_VIEWS[self] = view
        return view

    return flat


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    r"""An immutable, validated attention data set (or a batch of them, leading axis B).

    Construct with arrays; validation raises :class:`~attsvm.errors.InputError` with a one-line message
    naming the offending field.
    """

    X: np.ndarray
    Y: np.ndarray
    Z: np.ndarray | None = None
    v: np.ndarray | None = None
    alpha: np.ndarray | None = None
    kind: str = "cross"
    query_index: int = 0
    mask: np.ndarray | None = None
    _opt: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = lambda k, val: object.__setattr__(self, k, val)  # noqa: E731
        if self.kind not in KINDS:
            raise InputError(f"field 'kind' must be one of {KINDS}, got {self.kind!r}")
        X = as_float("X", self.X)
        if X.ndim not in (3, 4):
            raise InputError(f"field 'X' must have shape (n,T,d) or (B,n,T,d), got {X.shape}")
        if 0 in X.shape:
            raise InputError(f"field 'X' is empty (shape {X.shape})")
        batched = X.ndim == 4
        lead = X.shape[:-3]
        n, T, d = X.shape[-3:]
        if self.v is None:
            raise InputError("field 'v' is missing")
        v = as_float("v", self.v)
        if v.shape != (*lead, d):
            raise InputError(f"field 'v' must have shape {(*lead, d)}, got {v.shape}")
        Y = as_float("Y", self.Y)
        kind = self.kind
        if kind == "self":
            q = int(self.query_index)
            if not 0 <= q < T:
                raise InputError(f"field 'query_index' must lie in [0,{T}), got {q}")
            if self.Z is not None:
                raise InputError("field 'Z' must be absent for self-attention (it is X[:, query_index])")
            Z = X[..., q, :]
            qshape: tuple[int, ...] = ()
        elif kind == "causal":
            if self.Z is not None:
                raise InputError("field 'Z' must be absent for causal data (queries are the tokens)")
            Z = X
            qshape = (T,)
        else:
            if self.Z is None:
                raise InputError("field 'Z' is missing")
            Z = as_float("Z", self.Z)
            if kind == "cross" and Z.ndim == len(lead) + 3:
                kind = "sequence"
            if kind == "cross":
                if Z.shape != (*lead, n, d):
                    raise InputError(f"field 'Z' must have shape {(*lead, n, d)}, got {Z.shape}")
                qshape = ()
            else:
                if Z.ndim != len(lead) + 3 or Z.shape[:-2] != (*lead, n) or Z.shape[-1] != d:
                    raise InputError(f"field 'Z' must have shape {(*lead, n, 'K', d)}, got {Z.shape}")
                qshape = (Z.shape[-2],)
        if Y.shape != (*lead, n, *qshape):
            raise InputError(f"field 'Y' must have shape {(*lead, n, *qshape)}, got {Y.shape}")
        if not np.all((Y == 1.0) | (Y == -1.0)):
            raise InputError("field 'Y' must contain only +1 and -1 labels")
        alpha = None
        if self.alpha is not None:
            a = np.asarray(self.alpha)
            if a.dtype.kind not in "iu":  # a float index (even 1.0) is a malformed file, not a selection
                raise InputError(f"field 'alpha' must hold integer token indices (integer dtype), got dtype {a.dtype}")
            a = a.astype(np.int64)
            if a.shape != (*lead, n, *qshape):
                raise InputError(f"field 'alpha' must have shape {(*lead, n, *qshape)}, got {a.shape}")
            hi = np.broadcast_to(np.arange(T) if kind == "causal" else np.full(qshape, T - 1), a.shape)
            if np.any(a < 0) or np.any(a > hi):
                what = "alpha[i,k] <= k" if kind == "causal" else f"[0,{T})"
                raise InputError(f"field 'alpha' out of range (must lie in {what})")
            alpha = frozen(a)
        mask = None
        if self.mask is not None:
            mask = _check_mask(self.mask, kind, (*lead, n, T), self.query_index)
            if alpha is not None and not np.all(np.take_along_axis(mask, alpha[..., None], axis=-1)):
                raise InputError("field 'alpha' selects a token the mask hides")
        set_("X", frozen(X))
        set_("Y", frozen(Y))
        set_("Z", frozen(np.asarray(Z)))
        set_("v", frozen(v))
        set_("alpha", alpha)
        set_("kind", kind)
        set_("query_index", int(self.query_index))
        set_("mask", mask)
        gam, scale = self._unit_scores()
        opt, tied = _argmax_unique(gam, self.visible)
        if alpha is None and np.any(tied):
            idx = tuple(int(j) for j in np.argwhere(tied)[0])
            raise InputError(
                f"tie for the optimal token at index {idx} (equal scores); pass --alpha SEL at the command line "
                "(or the field 'alpha') to name the selection"
            )
        if alpha is None:
            _warn_near_tie(gam, self.visible, scale)
        set_("_opt", frozen(opt))
        del batched

    # ------------------------------------------------------------------ shapes
    @property
    def batched(self) -> bool:
        return self.X.ndim == 4

    @property
    def batch_size(self) -> int | None:
        return self.X.shape[0] if self.batched else None

    @property
    def n(self) -> int:
        return self.X.shape[-3]

    @property
    def T(self) -> int:
        return self.X.shape[-2]

    @property
    def d(self) -> int:
        return self.X.shape[-1]

    @property
    def K(self) -> int | None:
        """Queries per input for sequence/causal data, else None."""
        if self.kind == "sequence":
            return self.Z.shape[-2]
        if self.kind == "causal":
            return self.T
        return None

    # ------------------------------------------------------------------ derived
    @property
    def visible(self) -> np.ndarray | None:
        """Visibility: causal (K, T) (query k sees t <= k); cross/self the ``mask`` (..., n, T) or None."""
        if self.kind != "causal":
            return self.mask
        return np.tril(np.ones((self.T, self.T), dtype=bool))

    @property
    def scores(self) -> np.ndarray:
        r"""$\gamma_{it}=Y_i v^\top x_{it}$: shape (..., n, T), or (..., n, K, T) for sequence/causal."""
        vx = np.einsum("...ntd,...d->...nt", self.X, self.v)
        if self.kind in ("sequence", "causal"):
            return self.Y[..., None] * vx[..., None, :]
        return self.Y[..., None] * vx

    def _unit_scores(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Scores of the data rescaled by exact powers of two (per data set, max entry of $X$ and of $v$ in
        $[\frac12,1)$), which order the tokens as $\gamma$ does without overflowing, and
        $\|v\|\max_t\|x_{it}\|$ of the rescaled data (the size of the rounding error of those scores is a
        small multiple of $\varepsilon$ times it)."""
        lead = self.X.shape[:-3]
        mx = np.max(np.abs(self.X).reshape(*lead, -1), axis=-1)
        mv = np.max(np.abs(self.v), axis=-1)
        ex = np.frexp(np.where(mx > 0, mx, 1.0))[1]
        ev = np.frexp(np.where(mv > 0, mv, 1.0))[1]
        Xs = np.ldexp(self.X, -ex[..., None, None, None])
        vs = np.ldexp(self.v, -ev[..., None])
        vx = np.einsum("...ntd,...d->...nt", Xs, vs)
        scale = np.max(np.linalg.norm(Xs, axis=-1), axis=-1) * np.linalg.norm(vs, axis=-1)[..., None]
        if self.kind in ("sequence", "causal"):
            return self.Y[..., None] * vx[..., None, :], scale[..., None]
        return self.Y[..., None] * vx, scale

    @property
    def opt(self) -> np.ndarray:
        r"""$\mathrm{opt}_i=\arg\max_t\gamma_{it}$ (first index on ties; ties are rejected unless alpha)."""
        return self._opt

    @property
    def tied(self) -> np.ndarray:
        r"""Bool, shape of ``opt``: the highest visible score $\max_t\gamma_{it}$ is shared by two or more tokens
        (then $\mathrm{opt}_i$ is not defined; only data with an explicit ``alpha`` can have such rows)."""
        return _argmax_unique(self._unit_scores()[0], self.visible)[1]

    @property
    def selection(self) -> np.ndarray:
        """``alpha`` if given, else ``opt``."""
        return self.alpha if self.alpha is not None else self._opt

    def with_alpha(self, alpha: Any) -> Dataset:
        """A copy with another selection (None: back to opt; ties then raise)."""
        return Dataset(self.X, self.Y, self._stored_Z(), self.v, alpha, self.kind, self.query_index, self.mask)

    def _stored_Z(self) -> np.ndarray | None:
        return None if self.kind in ("self", "causal") else self.Z

    # ------------------------------------------------------------------ batching
    def __len__(self) -> int:
        if not self.batched:
            raise TypeError("len() of a single data set; use .n")
        return self.X.shape[0]

    def __getitem__(self, b: int) -> Dataset:
        if not self.batched:
            raise TypeError("indexing a single data set; use .X[i] etc.")
        pick = lambda a: None if a is None else a[b]  # noqa: E731
        return Dataset(
            self.X[b],
            self.Y[b],
            pick(self._stored_Z()),
            self.v[b],
            pick(self.alpha),
            self.kind,
            self.query_index,
            pick(self.mask),
        )

    def __iter__(self):
        for b in range(len(self)):
            yield self[b]

    @staticmethod
    def stack(items: list[Dataset]) -> Dataset:
        """Stack same-shape single data sets into a batch (alpha kept only if all have one)."""
        if not items:
            raise InputError("cannot stack an empty list of data sets")
        f = items[0]
        for it in items:
            if it.batched or it.X.shape != f.X.shape or it.kind != f.kind or it.Z.shape != f.Z.shape:
                raise InputError("data sets to stack must be single and of the same shape and kind")
            if (it.mask is None) != (f.mask is None):
                raise InputError("data sets to stack must all have a mask or none")
        alpha = np.stack([it.selection for it in items]) if any(it.alpha is not None for it in items) else None
        Z = None if f.kind in ("self", "causal") else np.stack([it.Z for it in items])
        return Dataset(
            np.stack([it.X for it in items]),
            np.stack([it.Y for it in items]),
            Z,
            np.stack([it.v for it in items]),
            alpha,
            f.kind,
            f.query_index,
            None if f.mask is None else np.stack([it.mask for it in items]),
        )

    # ------------------------------------------------------------------ flat view
    @flat_once
    def flat(self) -> FlatView:
        """One row per query (see module docstring). Cross/self data: the rows are the inputs. Built once per data
        set, read-only (:func:`flat_once`)."""
        lead = self.X.shape[:-3]
        n, T, d = self.X.shape[-3:]
        if self.kind in ("cross", "self"):
            return FlatView(
                self.X, self.Y, self.Z, self.v, self.mask, self.selection, np.arange(n), np.zeros(n, dtype=np.int64)
            )
        K = self.K
        Xf = np.broadcast_to(self.X[..., :, None, :, :], (*lead, n, K, T, d)).reshape(*lead, n * K, T, d)
        Zf = self.Z.reshape(*lead, n * K, d)
        Yf = self.Y.reshape(*lead, n * K)
        af = self.selection.reshape(*lead, n * K)
        mask = None
        if self.kind == "causal":
            mask = np.broadcast_to(self.visible[None], (n, K, T)).reshape(n * K, T)
            mask = np.broadcast_to(mask, (*lead, n * K, T))
        owner = np.repeat(np.arange(n), K)
        query = np.tile(np.arange(K), n)
        return FlatView(Xf, Yf, Zf, self.v, mask, af, owner, query)

    # ------------------------------------------------------------------ io
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"X": self.X, "Y": self.Y, "v": self.v, "kind": self.kind}
        if self._stored_Z() is not None:
            out["Z"] = self.Z
        if self.kind == "self":
            out["query_index"] = self.query_index
        if self.alpha is not None:
            out["alpha"] = self.alpha
        if self.mask is not None:
            out["mask"] = self.mask
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``.npz`` (default) or ``.json`` atomically (nothing half-written on failure)."""
        return save(self, path)

    # ------------------------------------------------------------------ display
    def _sizes(self) -> str:
        lead = f"B={self.batch_size}, " if self.batched else ""
        k = f", K={self.K}" if self.K is not None else ""
        return f"{lead}n={self.n}, T={self.T}, d={self.d}{k}"

    def __repr__(self) -> str:
        sel = "opt" if self.alpha is None else "alpha"
        return f"Dataset(kind={self.kind!r}, {self._sizes()}, selection={sel})"

    def _repr_html_(self) -> str:
        r"""Kind and sizes, labels, the selection (and $\mathrm{opt}$), the score gaps
        $\gamma_{i,\mathrm{opt}_i}-\max_{t\ne\mathrm{opt}_i}\gamma_{it}$, and the first inputs as tables (of item 0
        for a batch)."""
        from . import html
        from .tables import Math, input_tables, label, vector_math

        one = self[0] if self.batched else self
        y = np.asarray(self.Y)
        gaps = score_gap(np.asarray(one.scores), one.visible)
        sel = np.asarray(one.selection)
        differs = int(np.sum(np.any((sel != one.opt).reshape(one.n, -1), axis=-1)))
        fields = [
            ("sizes", self._sizes()),
            ("labels", f"{int(np.sum(y > 0))} x (+1), {int(np.sum(y < 0))} x (-1)"),
            ("selection", "opt (the highest-scoring tokens)" if self.alpha is None else "explicit alpha"),
            ("alpha" if self.alpha is not None else "opt", Math(vector_math(sel, 4, 8))),
            ("alpha = opt", None if self.alpha is None else ("yes" if not differs else f"no, at {differs} inputs")),
            ("score gaps", Math(vector_math(gaps, 4, 6))),
            ("head", Math(label("v") + "=" + vector_math(one.v, 4, 6))),
        ]
        if self.kind == "self":
            fields.append(("query index", self.query_index))
        what = "inputs 0-1" if one.n > 1 else "input 0"
        head = f"{what} of item 0 of the batch" if self.batched else what
        sections = [(head, html.data_tables(input_tables(one, inputs=2, digits=4)))]
        title = f"{self.kind} data" + (f", a batch of {self.batch_size}" if self.batched else "")
        return html.card("Dataset", title, fields, sections)


def _check_mask(mask: Any, kind: str, shape: tuple[int, ...], q: int) -> np.ndarray:
    """The validated visibility mask (read-only bool array of ``shape``): cross/self data only, every input with a
    visible token, and for self-attention the query token visible."""
    if kind not in ("cross", "self"):
        raise InputError(f"field 'mask' applies to cross/self data, not {kind!r} (its visibility is fixed)")
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise InputError(f"field 'mask' must be boolean, got dtype {m.dtype}")
    if m.shape != shape:
        raise InputError(f"field 'mask' must have shape {shape}, got {m.shape}")
    if not np.all(np.any(m, axis=-1)):
        raise InputError("field 'mask' hides every token of an input")
    if kind == "self" and not np.all(m[..., q]):
        raise InputError("field 'mask' hides the query token of an input (self-attention)")
    return frozen(m)


def _argmax_unique(gam: np.ndarray, visible: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    g = gam if visible is None else np.where(visible, gam, -np.inf)
    opt = np.argmax(g, axis=-1)
    mx = np.take_along_axis(g, opt[..., None], axis=-1)
    tied = np.sum(g == mx, axis=-1) > 1
    return opt.astype(np.int64), tied


def score_gap(gam: np.ndarray, visible: np.ndarray | None = None) -> np.ndarray:
    r"""$\gamma_{i,\mathrm{opt}_i}-\max_{t\ne\mathrm{opt}_i}\gamma_{it}$ over the visible tokens
    (inf with one visible token)."""
    g = gam if visible is None else np.where(visible, gam, -np.inf)
    if g.shape[-1] < 2:
        return np.full(g.shape[:-1], np.inf)
    top2 = -np.sort(-g, axis=-1)[..., :2]
    with np.errstate(invalid="ignore"):
        gap = top2[..., 0] - top2[..., 1]
    return np.where(np.isfinite(top2[..., 1]), gap, np.inf)


def _warn_near_tie(gam: np.ndarray, visible: np.ndarray | None, scale: np.ndarray) -> None:
    """Warn (:class:`~attsvm.errors.NearTieWarning`) when opt is decided by a gap within rounding of a tie."""
    from .tolerances import tol

    gap = score_gap(gam, visible)
    scale = np.broadcast_to(scale, gap.shape)
    near = gap <= tol("near_tie") * scale
    if np.any(near):
        import warnings

        from .errors import NearTieWarning

        idx = tuple(int(j) for j in np.argwhere(near)[0])
        warnings.warn(
            NearTieWarning(
                f"near-tie for the optimal token at index {idx}: score gap {gap[idx]:.2g} is within rounding "
                f"({tol('near_tie'):.0e} x {scale[idx]:.2g}) of a tie; opt is not robust, pass an explicit selection "
                "(field 'alpha' or --alpha)"
            ),
            stacklevel=4,
        )


# ---------------------------------------------------------------------- io
_FIELDS = {"X", "Y", "Z", "v", "alpha", "kind", "query_index", "mask"}


def shape_selection(alpha: Any, xshape: tuple[int, ...], kind: str, Z: Any = None, flag: str = "--alpha") -> np.ndarray:
    """A flat selection (row-major token indices) in the alpha shape of data whose ``X`` has shape ``xshape``:
    ``(n,)``, ``(n, K)`` for sequence/causal data, with a leading batch axis for a batch (one selection for every
    item, or one per item). A wrong count is an InputError naming the option ``flag``."""
    lead = tuple(xshape[:-3])
    n, T = xshape[-3], xshape[-2]
    if kind == "causal":
        K: int | None = T
    elif Z is not None and np.ndim(Z) == len(lead) + 3:
        K = int(np.shape(Z)[-2])
    else:
        K = None
    shape = (n,) if K is None else (n, K)
    size = int(np.prod(shape))
    alpha = np.asarray(alpha, dtype=np.int64)
    if alpha.size == size:
        a = alpha.reshape(shape)
        return np.broadcast_to(a, (*lead, *shape)).copy() if lead else a
    if lead and alpha.size == int(np.prod((*lead, *shape))):
        return alpha.reshape((*lead, *shape))
    raise InputError(f"{flag}: expected {size} token indices, got {alpha.size}")


def from_mapping(m: dict[str, Any], source: str = "input", alpha: Any = None) -> Dataset | NTPData | ICLData:
    """Build a data set from a mapping of field names (as in a .npz or .json file). ``alpha``: an explicit flat
    selection (:func:`shape_selection`) that replaces the file's own; then a tie for the optimal token is
    allowed (the selection is named, so the tie does not decide anything). A mapping of kind ``"ntp"`` is
    next-token data (:func:`attsvm.ntp.data.from_mapping`; ``alpha`` does not apply: the labels select), one of kind
    ``"icl"`` in-context classification data (:func:`attsvm.icl.from_mapping`)."""
    if _kind_of(m) == "icl":
        from .icl import from_mapping as icl_from_mapping  # lazy: attsvm.icl imports this module

        if alpha is not None:
            raise InputError(f"{source}: --alpha does not apply to in-context data (the selection is alpha = 0)")
        return icl_from_mapping(m, source)
    if _kind_of(m) == "ntp":
        from .ntp.data import from_mapping as ntp_from_mapping  # lazy: attsvm.ntp.data imports this module

        if alpha is not None:
            raise InputError(f"{source}: --alpha does not apply to next-token data (the labels name the tokens)")
        return ntp_from_mapping(m, source)
    unknown = set(m) - _FIELDS
    if unknown:
        raise InputError(f"{source}: unknown field {sorted(unknown)[0]!r}")
    for req in ("X", "Y", "v"):
        if req not in m:
            raise InputError(f"{source}: field {req!r} is missing")
    kind = m.get("kind", None)
    kind = str(np.asarray(kind)) if kind is not None else None
    q = m.get("query_index", None)
    if kind is None:
        kind = "self" if ("Z" not in m and q is not None) else "cross"
    if kind == "cross" and "Z" not in m:
        raise InputError(f"{source}: field 'Z' is missing")
    try:
        qi = int(np.asarray(q)) if q is not None else 0
    except (TypeError, ValueError) as exc:
        raise InputError(f"{source}: field 'query_index' is not an integer") from exc
    sel = m.get("alpha")
    if alpha is not None:
        try:
            xshape = np.shape(m["X"])
        except ValueError:  # a ragged X: the data set's own validation names it
            xshape = ()
        sel = shape_selection(alpha, xshape, kind, m.get("Z")) if len(xshape) in (3, 4) else alpha
    return Dataset(m["X"], m["Y"], m.get("Z"), m["v"], sel, kind, qi, m.get("mask"))


def _kind_of(m: dict[str, Any]) -> str | None:
    """The ``kind`` field of a mapping as a string (None when absent or not a single string)."""
    k = m.get("kind", None) if isinstance(m, dict) else None
    if isinstance(k, str):
        return k
    if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind == "U":
        return str(k)
    return None


def load(path: str | os.PathLike, alpha: Any = None) -> Dataset | NTPData | ICLData:
    """Load a data set from ``.npz`` (``allow_pickle=False``) or ``.json``; one-line errors. ``alpha``: an
    explicit flat selection replacing the file's own (:func:`from_mapping`)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a .npz or .json file")
    if p.stat().st_size == 0:
        raise InputError(f"{p}: empty file")
    if p.suffix.lower() == ".json":
        try:
            raw = json.loads(p.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{p}: not valid JSON ({exc.__class__.__name__})") from exc
        if not isinstance(raw, dict):
            raise InputError(f"{p}: expected a JSON object with fields X, Y, Z, v")
        return from_mapping(raw, str(p), alpha)
    with open(p, "rb") as fh:
        magic = fh.read(4)
    if magic != b"PK\x03\x04":
        raise InputError(f"{p}: not a valid .npz file (expected a zip archive of .npy arrays, or a .json file)")
    try:
        with np.load(p, allow_pickle=False) as f:
            m = {k: f[k] for k in f.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise InputError(f"{p}: contains object (pickled) arrays; only numeric arrays are accepted") from exc
        raise InputError(f"{p}: cannot read .npz ({str(exc).splitlines()[0]})") from exc
    except Exception as exc:  # zipfile.BadZipFile, OSError, EOFError, ...
        raise InputError(f"{p}: not a valid .npz file") from exc
    return from_mapping(m, str(p), alpha)


def save(ds: Dataset | NTPData | ICLData, path: str | os.PathLike) -> Path:
    """Save ``ds`` as ``.npz`` (default; another suffix gets ``.npz`` appended) or ``.json``, atomically
    (:func:`attsvm.outputs.atomic`: nothing half-written on failure); return the path written."""
    from . import outputs

    p = Path(path)
    d = ds.to_dict()
    if p.suffix.lower() == ".json":
        obj = {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
        outputs.write_text(p, json.dumps(obj))
        return p
    if p.suffix.lower() != ".npz":
        p = p.with_suffix(p.suffix + ".npz") if p.suffix else p.with_suffix(".npz")
    with outputs.atomic(p, "wb") as fh:
        np.savez(fh, **{k: np.asarray(v) for k, v in d.items()})
    return p


def subset(ds: Dataset | NTPData, idx: Any) -> Dataset | NTPData | ICLData:
    r"""The sub-batch $(\mathtt{ds}_b)_{b\in\mathtt{idx}}$ of a batched data set, in the order of ``idx`` (an index
    array, a boolean mask of length B or a slice): a batch again (also of one), of the same kind, query index,
    selection (a given ``alpha`` is kept) and, for next-token data (:class:`attsvm.ntp.NTPData`), the same
    ``query_visible``. ``subset(ds, slice(a, b))`` is a shard of :func:`attsvm.gd.shards.run_sharded`."""
    if not getattr(ds, "batched", False):
        raise InputError("subset takes a batch (leading axis B); index a single data set's arrays instead")
    if not isinstance(idx, slice):
        idx = np.asarray(idx)
        if idx.ndim != 1:
            raise InputError(f"subset: the index must be one-dimensional, got shape {idx.shape}")
    if ds.kind == "ntp":
        return type(ds)(ds.E[idx], ds.tokens[idx], ds.labels[idx], ds.query_visible)
    pick = lambda a: None if a is None else a[idx]  # noqa: E731
    Z = None if ds.kind in ("self", "causal") else ds.Z[idx]
    return Dataset(ds.X[idx], ds.Y[idx], Z, ds.v[idx], pick(ds.alpha), ds.kind, ds.query_index, pick(ds.mask))
