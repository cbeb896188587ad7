r"""A data file with an optional explicit selection $\alpha$ (shared by ``attsvm solve``, ``gd`` and ``derive kkt``).

``parse_alpha(text)`` reads a selection given on the command line: ``None``/``"opt"`` (no explicit selection),
a comma-separated list of integers (``"1,0,2"``), or a ``.npy``/``.json``/``.txt`` file of integers. Anything
else - a float such as ``1.5`` or ``2.0`` in a list, non-numeric text, a file of non-integers - is an
:class:`~attsvm.errors.InputError`.

The data set is then loaded with that selection by the one loader, ``attsvm.data.load(path, alpha)``
(reshaped to the data's ``(n,)``, ``(n, K)`` or batched form by :func:`attsvm.data.shape_selection`; row-major).
Data whose optimal token is tied (:class:`~attsvm.data.Dataset` refuses those without a selection) are accepted
when ``alpha`` names the selection, because then the tie does not matter.

``selection_for(ds, text, flag)`` resolves a selection *for an already loaded data set* (``attsvm gd --target``):
``"opt"`` is always $\mathrm{opt}_i=\arg\max_t\gamma_{it}$ (never the file's ``alpha``; a tie for the highest
score is an :class:`~attsvm.errors.InputError`, since opt is then undefined), anything else is read by
:func:`parse_alpha` and shaped and range-checked as ``--alpha`` is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from .data import Dataset, shape_selection
from .errors import InputError

_LIST = re.compile(r"\s*[-+]?\d+(\s*,\s*[-+]?\d+)*\s*,?\s*")


def parse_alpha(value: str | None, flag: str = "--alpha") -> np.ndarray | None:
    """``None``/``"opt"`` -> None; ``"i0,i1,..."`` -> int64 array; an existing file -> its integers (module
    docstring). Non-integers are refused (:class:`InputError`; messages name the option ``flag``)."""
    if value is None or str(value).strip() == "opt":
        return None
    v = str(value).strip()
    if _LIST.fullmatch(v):
        return np.array([int(s) for s in v.split(",") if s.strip()], dtype=np.int64)
    p = Path(v)
    if not p.is_file():
        if re.fullmatch(r"[\s\d.,eE+-]+", v):
            raise InputError(f"{flag} must be integer token indices (comma-separated, 0-based), got {v!r}")
        raise InputError(f"{flag}: {v!r} is neither 'opt', a comma-separated list of integers, nor a file")
    try:
        if p.suffix.lower() == ".npy":
            a = np.load(p, allow_pickle=False)
        elif p.suffix.lower() == ".json":
            a = np.asarray(json.loads(p.read_text()))
        else:
            text = p.read_text()
            a = np.loadtxt(p, dtype=np.float64, delimiter="," if "," in text else None, ndmin=1)
    except Exception as exc:
        raise InputError(f"{flag}: cannot read integers from {p} ({exc.__class__.__name__})") from exc
    a = np.asarray(a)
    if a.size == 0:
        raise InputError(f"{flag}: {p} holds no indices")
    if a.dtype.kind not in "iuf" or (a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.round(a)))):
        raise InputError(f"{flag}: {p} must hold integer token indices")
    return a.astype(np.int64)


def selection_for(ds: Dataset, text: str, flag: str = "--target") -> np.ndarray:
    r"""The selection ``text`` names for the data set (or batch) ``ds``, in the shape of ``ds.opt`` ((..., n), or
    (..., n, K) for sequence/causal data): ``"opt"`` gives $\mathrm{opt}_i=\arg\max_t\gamma_{it}$ (a tie is an
    :class:`InputError`); ``i0,i1,...`` or a file is :func:`parse_alpha` shaped by
    :func:`attsvm.data.shape_selection` (one selection for every item of a batch, or one per item) and checked by
    the data set's own validation. Every message names ``flag``."""
    if str(text).strip() == "opt":
        tied = ds.tied
        if np.any(tied):
            idx = tuple(int(j) for j in np.argwhere(tied)[0])
            raise InputError(
                f"{flag} opt: tie for the optimal token at index {idx} (equal scores), so opt is not defined; "
                f"name the selection with {flag} i0,i1,... or {flag} FILE"
            )
        return np.asarray(ds.opt)
    a = parse_alpha(text, flag)
    assert a is not None  # None only for "opt", handled above
    shaped = shape_selection(a, ds.X.shape, ds.kind, ds.Z, flag)
    try:
        ds.with_alpha(shaped)
    except InputError as exc:
        raise InputError(f"{flag} {str(text).strip()}: {exc}") from exc
    return shaped
