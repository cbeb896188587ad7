r"""A data file with an optional explicit selection $\alpha$ (shared by ``attsvm solve``, ``gd`` and ``derive kkt``).

``parse_alpha(text)`` reads a selection given on the command line: ``None``/``"opt"`` (no explicit selection),
a comma-separated list of integers (``"1,0,2"``), or a ``.npy``/``.json``/``.txt`` file of integers. Anything
else - a float such as ``1.5`` or ``2.0`` in a list, non-numeric text, a file of non-integers - is an
:class:`~attsvm.errors.InputError`.

The data set is then loaded with that selection by the one loader, ``attsvm.data.load(path, alpha)``
(reshaped to the data's ``(n,)``, ``(n, K)`` or batched form by :func:`attsvm.data.shape_selection`; row-major).
Data whose optimal token is tied (:class:`~attsvm.data.Dataset` refuses those without a selection) are accepted
when ``alpha`` names the selection, because then the tie does not matter.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

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
