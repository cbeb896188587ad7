r"""Re-checking a proof certificate (``attsvm prove --verify CERT``).

Nothing the prover computed is trusted. From the certificate's claim (its file and id), its exact data (every float
from its ``float.hex``) and its region, :func:`verify_file`

1. rebuilds the region from its record and checks that the claim's conclusion, probed again on the data, quantifies
   over exactly that region, and that the root box is the region's bounding box (for a framed cone the boxes are
   in the coordinates $\vartheta$ of its orthogonal frame $M$, which the region rebuilds from its exact axis — a
   frame is never read from the certificate — and the margin is evaluated at $W=M\vartheta$,
   :meth:`attsvm.prove.regions.Region.embed`, in the intervals below);
2. rebuilds every leaf box from the root by exact halving along its path and checks that the leaves tile the root
   box (:func:`attsvm.prove.certificate.coverage_problem`);
3. re-decides every leaf from scratch: an ``outside`` leaf by the region's exact exclusion test, a ``proved`` leaf
   by re-evaluating the margin in an *independent* arithmetic — mpmath's outward-rounded intervals and the
   forward-mode jets of :mod:`attsvm.prove.interval`, at twice the prover's precision: the margin at the box's
   centre $c$ (``iv_point``) and on the box $B$ (``iv_variables``) — and requiring the centred mean-value lower
   bound to be $>0$:

   .. math::
       \inf\Bigl([m](c)+\textstyle\sum_j[\partial_jm](B)\,[\ell_j-c_j,u_j-c_j]\ \cap\ [m](B)\Bigr)>0.

What is independent and what is shared. The prover's enclosures (python-flint ``arb`` balls, the jets of
:mod:`attsvm.ball.jet`, its lower bounds, the enclosures recorded in the certificate) play no part in step 3: the
interval arithmetic, the elementary functions, the chain rules and the mean-value form are separate code on
mpmath's ``iv``. Shared with the prover are the *definitions*: the claim's conclusion and the kit's formulas it calls
(:mod:`attsvm.ball.model`, the inner products and norms of :mod:`attsvm.ball.linalg`: which terms are summed and
multiplied), which run on the interval numbers; the region and its exact exclusion tests
(:mod:`attsvm.prove.regions`); and the quantities the conclusion derives from the data alone (such as $W^{mm}$),
which the ball kit computes in ``arb`` and which enter the interval evaluation as constants, converted exactly by
their endpoints.
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import InputError
from .certificate import check_leaves, qparse, read


def _data(rec: Any, where: str) -> Any:
    from ..data import from_mapping

    if not isinstance(rec, dict):
        raise InputError(f"{where}: 'data' must be an object")

    def unhex(v: Any) -> Any:
        if isinstance(v, list):
            return [unhex(x) for x in v]
        if isinstance(v, str):
            try:
                return float.fromhex(v)
            except ValueError:
                raise InputError(f"{where}: a data entry is not a float in hex: {v!r}") from None
        return v

    m = {k: (np.asarray(unhex(v)) if k != "kind" else v) for k, v in rec.items()}
    return from_mapping(m, source=where)


def _recorded(leaf: dict[str, Any], key: str) -> tuple[Fraction, Fraction] | None:
    """A leaf's recorded enclosure ``[lower, upper]`` as exact rationals (None when not recorded)."""
    rec = leaf.get(key)
    if rec is None:
        return None
    if not (isinstance(rec, list) and len(rec) == 2):
        raise InputError(f"leaf {leaf.get('path')!r}: {key!r} must be [lower, upper]")
    lo, hi = (qparse(x, f"leaf {leaf.get('path')!r} {key}") for x in rec)
    return lo, hi


def recorded_problem(leaf: dict[str, Any], centre: Any) -> str | None:
    r"""The recorded enclosures of a proved leaf against the independent re-evaluation: the recorded lower bound
    must lie above 0 (the decision the prover wrote down), and the recorded enclosure of $m(c)$ must meet the
    interval one (two enclosures of the same number always intersect: a recorded value moved off it is tampered)."""
    from .interval import iv_endpoints

    low = _recorded(leaf, "lower")
    if low is not None and not low[0] > 0:
        return f"its recorded lower bound [{low[0]}, {low[1]}] is not above 0"
    rec = _recorded(leaf, "centre")
    if rec is not None:
        a, b = iv_endpoints(centre)
        if rec[1] < a or b < rec[0]:
            return "its recorded enclosure of the margin at the centre misses the re-evaluated one"
    return None


def verify_file(path: str | os.PathLike, paths: list[str] | None = None) -> tuple[bool, str]:
    """``(holds, one line)`` for the certificate at ``path`` (module docstring); a malformed file is an
    :class:`~attsvm.errors.InputError`."""
    from ..ball.numbers import workprec
    from ..claims import discover, select
    from .boxes import as_box
    from .interval import iv_lower_bound, iv_point, iv_value, iv_variables, ivprec
    from .regions import from_dict
    from .statement import StatementError, constants_with, margin_function, probe_region

    cert = read(path)
    for key in ("claim", "file", "region", "data", "root", "leaves", "prec", "status", "constants"):
        if key not in cert:
            raise InputError(f"{path}: key {key!r} is missing")
    if cert["status"] != "proved":
        return False, f"{path}: the certificate records status {cert['status']!r}, not a proof"
    where = [cert["file"]] if not paths and cert.get("file") else (paths or None)
    (claim,) = select(discover(where), [cert["claim"]])
    data = _data(cert["data"], str(path))
    region = from_dict(cert["region"])
    prec = 2 * int(cert["prec"])
    recorded = cert["constants"] if isinstance(cert["constants"], dict) else {}
    params = {k: v for k, v in recorded.items() if k in claim.params and v != claim.params[k]}
    consts = constants_with(claim, recorded.get("region"), params)
    try:
        probed = probe_region(claim, data, consts, prec)
    except StatementError as exc:
        return False, f"{path}: {exc}"
    if probed != region:
        return False, f"{path}: the claim's region on this data is {probed.describe()}, not {region.describe()}"
    lo0, hi0 = as_box(*region.bounding_box())
    root = (
        tuple(qparse(x, "root.lo") for x in cert["root"]["lo"]),
        tuple(qparse(x, "root.hi") for x in cert["root"]["hi"]),
    )
    if root != (lo0, hi0):
        return False, f"{path}: the root box is not the region's bounding box"
    margin = margin_function(claim, data, consts, region, prec)

    def recheck(leaf: dict[str, Any], lo: tuple, hi: tuple) -> str | None:
        if leaf["status"] == "outside":
            return None if region.excludes(lo, hi) else "recorded outside the region, but the region meets it"
        c = tuple((a + b) / 2 for a, b in zip(lo, hi))
        try:
            m_c = margin(iv_point(c))
            m_b = margin(iv_variables(lo, hi))
            if m_c is None or m_b is None:
                return "the margin could not be evaluated there in intervals"
            lower = iv_lower_bound(iv_value(m_c), m_b, lo, hi)
        except (StatementError, TypeError, ValueError) as exc:
            return f"the interval re-evaluation failed: {exc}"
        if not lower > 0:
            return f"the margin's interval lower bound there is {lower.str(5)}, not > 0"
        return recorded_problem(leaf, iv_value(m_c))

    with workprec(prec), ivprec(prec):
        bad = check_leaves(cert, recheck)
    if bad is not None:
        return False, f"{path}: {bad}"
    tail_line = ""
    if "tail" in cert:
        from .tail import cone_parts
        from .tail import recheck as recheck_tail

        spec = recorded.get("region")
        parts = cone_parts(spec)
        if parts is None:
            return False, f"{path}: a tail needs a cone region (cone:MU,R,R1), the certificate's is {spec!r}"
        with workprec(prec):
            R1 = qparse(parts[2], "region R1")  # the compact part's outer radius (a cone's R1, or a radius box's HI)
            why = recheck_tail(cert["tail"], discover(where), data, parts[0], parts[1], R1, prec)
        if why is not None:
            return False, f"{path}: tail: {why}"
        tail_line = f"; the tail ‖W‖_F ≥ {parts[2]} re-decided by {cert['tail']['claim']} in {prec}-bit balls"
    n = len(cert["leaves"])
    return True, (
        f"{path}: verified: {claim.id} holds on {region.describe()} for the data in the certificate "
        f"({n} leaves tile the region's bounding box; every leaf re-decided in {prec}-bit intervals{tail_line})"
    )
