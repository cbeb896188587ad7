r"""Exact power-of-two rescaling of the data, so that every program sees entries of order one.

The attention SVMs are homogeneous in the data: with $X=2^{e_X}X'$ and $Z=2^{e_Z}Z'$ the constraints
$(x_{i\alpha_i}-x_{it})^\top Wz_i\ge1$ become $(x'_{i\alpha_i}-x'_{it})^\top W'z'_i\ge1$ with
$W'=2^{e_X+e_Z}W$, so

.. math:: W^{mm}(X,Z)=2^{-(e_X+e_Z)}\,W^{mm}(X',Z'),\qquad \|W\|=2^{-k}\|W'\|,\qquad k=e_X+e_Z,

for every norm (Frobenius, nuclear, entrywise $\ell_q$), and likewise for Gen-SVM ($W^{svm}$ and $W^{fin}$)
and the sequence/causal SVMs. The prompt, head and relaxed SVMs involve $X$ only: $p=2^{-e_X}p'$, $v=2^{-e_X}v'$
($k=e_X$). Margins, support sets, local optimality, $\delta_\alpha$ and Farkas vectors are unchanged; the
multipliers scale like the objective: $\lambda=2^{-2k}\lambda'$ for the quadratic programs (objective
$\|W\|_F^2=\mathbf 1^\top\lambda$), $\lambda=2^{-k}\lambda'$ for the norm programs (objective
$\|W\|=\mathbf 1^\top\lambda$). For self-attention and causal data $Z$ is made of tokens, so $e_Z=e_X$.

Multiplying by a power of two is exact in binary floating point (unless it under- or overflows, which
:func:`normalised` checks), so the rescaled program is *the same* program: its exact certificates are mapped
back exactly (rationals times powers of two, :func:`unscale_certificate`) and still prove optimality for the
data as given.

Data whose largest entries lie in $[2^{-20},2^{20}]$ (``BAND``) are solved as given; otherwise $X$ (and/or $Z$)
is scaled by $2^{-e}$ so that its largest entry lies in $[\frac12,1)$. A mapped-back value that is not
representable in float64 is handled as follows: the solution itself ($W$, $p$ or $v$) must be representable
(largest entry finite and normal), else :class:`~attsvm.errors.InputError` says why; a derived value that is not
(the squared norm, the multipliers) is reported as ``None`` and named in ``extra["unrepresentable"]``.
The KKT residuals reported are those of the rescaled program (on which the acceptance test ran; they are
relative residuals of the same program), and ``extra["rescaled"]`` records the exponents used.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..data import Dataset
from ..errors import InputError
from .exact import pow2
from .solution import SVMSolution
from .spectral import round_down, round_up

#: data with max |entry| in [2**-BAND, 2**BAND] are solved as given
BAND = 20
_TINY = float(np.finfo(np.float64).tiny)


@dataclass(frozen=True)
class Scale:
    r"""$X=2^{e_X}X'$, $Z=2^{e_Z}Z'$ (exactly). ``ex``/``ez`` are 0 when that array is solved as given."""

    ex: int = 0
    ez: int = 0

    @property
    def identity(self) -> bool:
        return self.ex == 0 and self.ez == 0

    def k(self, vector: bool = False) -> int:
        """The exponent of the solution: $W=2^{-k}W'$ with $k=e_X+e_Z$, or $k=e_X$ for the prompt/head vectors."""
        return self.ex if vector else self.ex + self.ez

    def to_json(self) -> dict[str, int]:
        return {"log2_X": -self.ex, "log2_Z": -self.ez}


def exponent(a: np.ndarray) -> int:
    """$e$ with $\\max|a|\\,2^{-e}\\in[\\frac12,1)$, or 0 when $\\max|a|$ is 0 or already within the band."""
    mx = float(np.max(np.abs(a), initial=0.0))
    if mx == 0.0 or 2.0**-BAND <= mx <= 2.0**BAND:
        return 0
    return int(np.frexp(mx)[1])


def exact_ldexp(a: np.ndarray, e: int, name: str) -> np.ndarray:
    """$a\\,2^{-e}$, refused (:class:`InputError` naming the field ``name``) unless it is exact in float64."""
    out = np.ldexp(a, -e)
    if not np.array_equal(np.ldexp(out, e), a):
        lo = float(np.min(np.abs(a[a != 0])))
        hi = float(np.max(np.abs(a)))
        raise InputError(
            f"field {name!r} spans too many binary orders of magnitude ({lo:.3g} to {hi:.3g}) to be rescaled "
            "exactly into float64; its smallest entries would lose bits"
        )
    return out


def normalised(ds: Dataset) -> tuple[Dataset, Scale]:
    """``(ds', scale)`` with ``ds'`` the exactly rescaled data set (module docstring); ``ds`` itself when no
    rescaling is needed. The selection is carried over explicitly (ties stay allowed where they were)."""
    ex = exponent(ds.X)
    derived_Z = ds.kind in ("self", "causal")
    ez = ex if derived_Z else exponent(ds.Z)
    if ex == 0 and ez == 0:
        return ds, Scale()
    X = exact_ldexp(ds.X, ex, "X") if ex else ds.X
    Z = None if derived_Z else (exact_ldexp(ds.Z, ez, "Z") if ez else ds.Z)
    scaled = Dataset(X, ds.Y, Z, ds.v, np.asarray(ds.selection), ds.kind, ds.query_index, ds.mask)
    return scaled, Scale(ex, ez)


def _array(a: np.ndarray | None, e: int) -> tuple[np.ndarray | None, bool]:
    """$a\\,2^{-e}$ and whether it is representable (finite, largest entry normal, NaN kept as NaN)."""
    if a is None:
        return None, True
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        out = np.ldexp(a, -e)
    fin = ~np.isnan(a)
    if not np.all(np.isfinite(out[fin])):
        return out, False
    mx = float(np.max(np.abs(a[fin]), initial=0.0))
    return out, mx == 0.0 or float(np.max(np.abs(out[fin]))) >= _TINY


def _scalar(x: float | None, e: int) -> tuple[float | None, bool]:
    if x is None:
        return None, True
    with np.errstate(over="ignore", under="ignore"):
        out = float(np.ldexp(float(x), -e))
    return out, (x == 0 or (math.isfinite(out) and abs(out) >= _TINY))


def _solution_value(a: np.ndarray, e: int, what: str) -> np.ndarray:
    out, ok = _array(a, e)
    if not ok:
        top = float(np.max(np.abs(a)))
        dec = math.log10(top) - e * math.log10(2.0) if top > 0 else 0.0
        raise InputError(
            f"{what} is not representable in float64 for this data (its largest entry is about 1e{dec:.0f}); "
            "rescale the data"
        )
    return out


def _fraction_str(s: str | None, e: int) -> str | None:
    return None if s is None else str(Fraction(str(s)) * pow2(-e))


def _bound(x: Any, e: int, down: bool) -> Any:
    """A float bound $x\\,2^{-e}$ rounded outwards (``down``: the largest float below); overflow refuses."""
    if x is None or not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return x
    q = Fraction(x) * pow2(-e)
    try:
        return round_down(q) if down else round_up(q)
    except OverflowError as exc:
        raise InputError(f"a certified bound (about 2^{math.log2(abs(x)) - e:.0f}) overflows float64") from exc


def unscale_certificate(cert: dict[str, Any], k: int, p: int) -> dict[str, Any]:
    r"""Map a certificate of the rescaled program back: exact ``"p/q"`` strings of the solution (``W``, ``p``)
    times $2^{-k}$, exact multipliers and the exact optimum (``value``, ``value_str``) times $2^{-pk}$ ($p=2$ for
    the quadratic programs, 1 for the norm programs), float bounds rounded outwards; margins
    (``min_other_margin``), active sets and Farkas vectors are unchanged."""
    if not cert or k == 0:
        return cert
    out = dict(cert)
    if isinstance(out.get("W"), list):
        out["W"] = [[_fraction_str(v, k) for v in row] for row in out["W"]]
    if isinstance(out.get("p"), list):
        out["p"] = [_fraction_str(v, k) for v in out["p"]]
    if isinstance(out.get("multipliers"), list):
        out["multipliers"] = [[i, t, _fraction_str(v, p * k)] for i, t, v in out["multipliers"]]
    if "radius" in out:
        out["radius"] = _bound(out["radius"], p * k, down=False)
    for key, down in (("lower", True), ("upper", False)):  # bounds on the objective (duality gap, lq)
        if key in out:
            out[key] = _bound(out[key], p * k, down=down)
    if isinstance(out.get("value"), Fraction):  # the exact optimum (the LP certificates)
        out["value"] = out["value"] * pow2(-p * k)
    if isinstance(out.get("value_str"), str):
        out["value_str"] = _fraction_str(out["value_str"], p * k)
    out["rescaled"] = True
    return out


def unscale_solution(sol: SVMSolution, scale: Scale) -> SVMSolution:
    r"""The solution of the data as given, from the solution ``sol`` of the rescaled data (module docstring).

    ``sol.norm`` decides the powers: ``"fro"``/``"l2"`` objective and multipliers $2^{-2k}$, ``"nuc"``/``"lq"``
    $2^{-k}$; ``sol.program`` in prompt/head/relaxed uses $k=e_X$."""
    if scale.identity:
        return sol
    vector = sol.program in ("prompt", "head", "relaxed")
    k = scale.k(vector)
    p = 2 if sol.norm in ("fro", "l2") else 1
    bad: list[str] = []
    W = None if sol.W is None else _solution_value(sol.W, k, "W")
    extra = dict(sol.extra)
    for key in ("p", "v"):
        if extra.get(key) is not None:
            extra[key] = _solution_value(extra[key], k, f"the solution vector {key}")
    if extra.get("W_fin") is not None:
        extra["W_fin"] = _solution_value(extra["W_fin"], k, "W^fin")
    obj, ok = _scalar(sol.objective, p * k)
    if not ok:
        bad.append("objective")
        obj = None
    lam, ok = _array(sol.multipliers, p * k)
    if not ok:
        bad.append("multipliers")
        lam = None
    if extra.get("eq_multipliers") is not None:
        eqm, ok = _array(extra["eq_multipliers"], p * k)
        if not ok:
            bad.append("eq_multipliers")
        extra["eq_multipliers"] = eqm if ok else None
    if bad:
        extra["unrepresentable"] = bad
    extra["rescaled"] = scale.to_json()
    return dataclasses.replace(
        sol,
        W=W,
        objective=obj,
        multipliers=lam,
        certificate=unscale_certificate(sol.certificate, k, p),
        extra=extra,
    )


def rescale_solution(sol: SVMSolution, scale: Scale) -> SVMSolution | None:
    """The inverse map for a Frobenius solution of the data as given (used to certify a given solution on the
    rescaled data); None when a value does not fit in float64 after rescaling (then the caller re-solves)."""
    if scale.identity:
        return sol
    k = scale.k()
    if sol.W is None or sol.multipliers is None:
        return None if sol.status == "optimal" else sol
    W, ok1 = _array(sol.W, -k)
    lam, ok2 = _array(sol.multipliers, -2 * k)
    if not (ok1 and ok2):
        return None
    return dataclasses.replace(sol, W=W, multipliers=lam)
