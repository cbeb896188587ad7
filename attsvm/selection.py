r"""A data file with an optional explicit selection $\alpha$ (shared by ``attsvm solve`` and ``attsvm derive kkt``).

``parse_alpha(text)`` reads a selection given on the command line: ``None``/``"opt"`` (no explicit selection),
a comma-separated list of integers (``"1,0,2"``), or a ``.npy``/``.json``/``.txt`` file of integers. Anything
else - a float such as ``1.5`` or ``2.0`` in a list, non-numeric text, a file of non-integers - is an
:class:`~attsvm.errors.InputError`.

``load_with_alpha(path, alpha)`` loads the data set and, when ``alpha`` is given, makes it the selection
(reshaped to the data's ``(n,)``, ``(n, K)`` or batched form; row-major). Data whose optimal token is tied
(:class:`~attsvm.data.Dataset` refuses those without a selection) are accepted when ``alpha`` names the
selection, because then the tie does not matter.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from . import data
from .errors import InputError

_LIST = re.compile(r"\s*[-+]?\d+(\s*,\s*[-+]?\d+)*\s*,?\s*")


def parse_alpha(value: str | None) -> np.ndarray | None:
    """``None``/``"opt"`` -> None; ``"i0,i1,..."`` -> int64 array; an existing file -> its integers (module
    docstring). Non-integers are refused (:class:`InputError`)."""
    if value is None or str(value).strip() == "opt":
        return None
    v = str(value).strip()
    if _LIST.fullmatch(v):
        return np.array([int(s) for s in v.split(",") if s.strip()], dtype=np.int64)
    p = Path(v)
    if not p.is_file():
        if re.fullmatch(r"[\s\d.,eE+-]+", v):
            raise InputError(f"--alpha must be integer token indices (comma-separated, 0-based), got {v!r}")
        raise InputError(f"--alpha: {v!r} is neither 'opt', a comma-separated list of integers, nor a file")
    try:
        if p.suffix.lower() == ".npy":
            a = np.load(p, allow_pickle=False)
        elif p.suffix.lower() == ".json":
            a = np.asarray(json.loads(p.read_text()))
        else:
            text = p.read_text()
            a = np.loadtxt(p, dtype=np.float64, delimiter="," if "," in text else None, ndmin=1)
    except Exception as exc:
        raise InputError(f"--alpha: cannot read integers from {p} ({exc.__class__.__name__})") from exc
    a = np.asarray(a)
    if a.size == 0:
        raise InputError(f"--alpha: {p} holds no indices")
    if a.dtype.kind not in "iuf" or (a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.round(a)))):
        raise InputError(f"--alpha: {p} must hold integer token indices")
    return a.astype(np.int64)


def shape_alpha(alpha: np.ndarray, X: np.ndarray, kind: str, Z: Any = None) -> np.ndarray:
    """Reshape a flat selection to the data's alpha shape: ``(n,)``, ``(n, K)`` (sequence/causal), with a leading
    batch axis when the data are a batch (one selection for every item, or one per item)."""
    lead = X.shape[:-3]
    n, T = X.shape[-3], X.shape[-2]
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
    raise InputError(f"--alpha: expected {size} token indices, got {alpha.size}")


def _raw_mapping(p: Path) -> dict[str, Any] | None:
    """The file's fields as stored, or None when the file cannot be read as such (then ``data.load``'s error
    stands)."""
    try:
        if p.suffix.lower() == ".json":
            raw = json.loads(p.read_text())
            return raw if isinstance(raw, dict) else None
        with np.load(p, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except Exception:
        return None


def load_with_alpha(path: str | os.PathLike, alpha: np.ndarray | None = None) -> data.Dataset:
    """The data set in ``path`` with the selection ``alpha`` (None: the file's own ``alpha``, else the optimal
    tokens). With ``alpha`` given, a tie for the optimal token is not an error (module docstring)."""
    if alpha is None:
        return data.load(path)
    try:
        ds = data.load(path)
    except InputError as first:
        m = _raw_mapping(Path(path))
        if m is None or "X" not in m:
            raise
        kind = str(np.asarray(m.get("kind", "cross")))
        if kind == "cross" and "Z" not in m and "query_index" in m:
            kind = "self"
        try:
            m["alpha"] = shape_alpha(alpha, np.asarray(m["X"]), kind, m.get("Z"))
        except InputError:
            raise
        except Exception:
            raise first from None
        return data.from_mapping(m, str(path))
    Z = None if ds.kind in ("self", "causal") else ds.Z
    return ds.with_alpha(shape_alpha(alpha, ds.X, ds.kind, Z))
