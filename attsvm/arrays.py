"""Array helpers shared by the data containers (:mod:`attsvm.data`, :mod:`attsvm.ntp.data`).

* :func:`frozen` — a C-contiguous, read-only view or copy of an array (the containers are immutable).
* :func:`as_float` — a finite real float64 array, or an :class:`~attsvm.errors.InputError` naming the field:
  complex, non-numeric (strings, ragged lists), NaN or inf entries are rejected.
* :func:`real_objects` — whether an object array holds only real numbers (Python, mpmath, ``Fraction`` reals).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InputError


def frozen(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous array with the write flag cleared."""
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def as_float(name: str, a: Any) -> np.ndarray:
    """``a`` as a finite real float64 array; complex, non-numeric, NaN or inf entries are an InputError."""
    try:
        raw = np.asarray(a)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise InputError(f"field {name!r} is not numeric") from exc
    if raw.dtype.kind == "c":
        raise InputError(f"field {name!r} is complex; attsvm takes real data (split real and imaginary parts)")
    if raw.dtype.kind not in "biuf" and not (raw.dtype.kind == "O" and raw.size and real_objects(raw)):
        raise InputError(f"field {name!r} is not numeric (dtype {raw.dtype})")
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"field {name!r} is not numeric") from exc
    if arr.size and not np.all(np.isfinite(arr)):
        raise InputError(f"field {name!r} contains NaN or inf")
    return arr


def real_objects(raw: np.ndarray) -> bool:
    """An object array of real numbers (Python/mpmath/Fraction reals), not of complex or other values."""
    return all(
        not isinstance(x, (complex, np.complexfloating, str, bytes)) and type(x).__name__ != "mpc" for x in raw.flat
    )
