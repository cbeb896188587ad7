"""Plain-text serialisation shared by every report: JSON values and LaTeX-escaped prose."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def tex_escape(text: Any) -> str:
    """Escape LaTeX special characters of prose (text mode)."""
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def jsonable(x: Any, nonfinite: str = "str") -> Any:
    """Numpy arrays/scalars, mpmath numbers, fractions, ... to plain JSON values.

    ``nonfinite``: how non-finite floats come out — ``"str"`` (``"inf"``, ``"nan"``), ``"null"`` (strict JSON),
    or ``"keep"`` (Python floats). Exact or high-precision numbers (mpf, Fraction, fmpq) become their text."""
    if isinstance(x, dict):
        return {str(k): jsonable(v, nonfinite) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v, nonfinite) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist(), nonfinite)
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        if math.isfinite(f) or nonfinite == "keep":
            return f
        return None if nonfinite == "null" else str(f)
    if x is None or isinstance(x, str):
        return x
    if type(x).__name__ in ("mpf", "mpc"):  # print every digit the number carries, whatever mp.dps is now
        import mpmath

        return mpmath.nstr(x, max(15, mpmath.libmp.prec_to_dps(mpmath.mp.prec), _MP_DIGITS), strip_zeros=True)
    return str(x)


_MP_DIGITS = 50  # the high-precision confirmations run at >= 50 digits
