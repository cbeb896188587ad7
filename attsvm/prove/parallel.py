r"""The boxes of a proof decided by the workers of the package's pool (:class:`attsvm.pool.Pool`, ``attsvm prove -n``).

:func:`attsvm.prove.bnb.prove` works its queue in rounds (its module docstring): the boxes of a round that need an
evaluation go to :func:`decide_all`, which maps :func:`decide_box` over them on the pool and returns their
:class:`~attsvm.prove.bnb.Decision`\ s in the order of the boxes (the pool merges by index).

**What travels.** A margin is a closure over a claim, a data set and constants, and closures do not pickle. A worker
gets a :class:`ClaimSource` instead — the claim's file and id (the worker imports the file, as a parallel
``attsvm check`` does: :func:`attsvm.claims.runner.claim_in_file`, checked by its
:func:`~attsvm.claims.runner.fingerprint`; a claim that is not in a file travels pickled when it pickles), the data
set, the region spec and params the constants were made of (:func:`attsvm.prove.statement.constants_with`), the
region the parent probed, and the precision — and rebuilds the margin
(:func:`attsvm.prove.statement.margin_function`) once per worker process and source (:func:`margin_of`: a small cache
keyed by :attr:`ClaimSource.key`), not once per box.

**Exact balls.** python-flint's ``arb`` does not pickle. A decision comes back with each ball as its midpoint and
radius, each the exact pair ``(mantissa, exponent)`` of ``mantissa * 2**exponent`` (``"+inf"``, ``"-inf"``,
``"nan"`` for the special values): :func:`ball_code`. :func:`ball_of` rebuilds the very same ball: the midpoint
exactly (an ``arf`` from the pair), the radius through arb's error term, whose conversion to a radius rounds up by
one unit in the last of its 30 bits, so the exact radius $r$ is given as $r-u/4$ ($u$ that unit), which rounds up to
$r$ exactly. Every rebuilt ball is checked (its code must be the one sent), so no rounding can slip in: a mismatch
is an error, never a wider ball. The leaves' enclosures, hence certificates, are those of the one-box loop.

**Errors** a box raises in a worker (an error in the claim) come back as the exception (made picklable as
:func:`attsvm.pool.run_task` does) in that box's place, and :func:`attsvm.prove.bnb.prove` raises it when it reaches
that box in queue order — where the one-box loop would raise it.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb, arf

from ..errors import InputError
from .bnb import Decision, decide

#: rebuilt margins kept per worker process (:func:`margin_of`; a proof uses one)
CACHE_SIZE = 4
_BUILT: dict[str, tuple[Callable[[np.ndarray], Any], Any]] = {}


# ------------------------------------------------------------------------------------------------ exact balls
def _exact_code(x: arb) -> tuple[int, int] | str:
    """An exact ball (a midpoint or a radius) as ``(mantissa, exponent)``, or ``"+inf"`` / ``"-inf"`` / ``"nan"``."""
    if x.is_finite():
        man, exp = x.man_exp()
        return int(man), int(exp)
    if x.is_nan():
        return "nan"
    return "+inf" if x > 0 else "-inf"


def ball_code(x: Any) -> tuple[Any, Any]:
    """The exact code ``(midpoint, radius)`` of an ``arb`` ball (module docstring); TypeError for anything else."""
    if not isinstance(x, arb):
        raise TypeError(f"ball_code: an arb ball, got {type(x).__name__}")
    return _exact_code(x.mid()), _exact_code(x.rad())


def _exact_of(code: Any) -> arb:
    if isinstance(code, str):
        if code not in ("+inf", "-inf", "nan"):
            raise ValueError(f"ball_of: not an exact number code: {code!r}")
        return arb(code)
    man, exp = code
    return arb(arf((int(man), int(exp))))


def ball_of(code: Any) -> arb:
    r"""The ``arb`` ball of :func:`ball_code`'s ``code``, exactly (module docstring): ValueError when the ball
    cannot be rebuilt bit for bit."""
    mid_code, rad_code = code
    mid = _exact_of(mid_code)
    if rad_code == (0, 0):
        out = mid
    elif isinstance(rad_code, str):
        out = arb(mid, _exact_of(rad_code))
    else:
        man, exp = (int(v) for v in rad_code)
        shift = 30 - man.bit_length()  # the radius as M * u with a 30-bit M (arb's radii have 30-bit mantissas)
        M, unit = man << shift, exp - shift
        out = arb(mid, arb(arf((4 * M - 1, unit - 2))))  # r - u/4: the error term rounds it up to r
    if ball_code(out) != (mid_code, rad_code):
        raise ValueError(f"ball_of: {code!r} does not rebuild exactly (got {ball_code(out)!r})")
    return out


def decision_code(d: Decision) -> tuple:
    """A :class:`~attsvm.prove.bnb.Decision` as picklable exact codes (:func:`ball_code`)."""

    def one(x: Any) -> Any:
        return None if x is None else ball_code(x)

    grad = None if d.gradient is None else [ball_code(g) for g in d.gradient]
    return d.status, one(d.centre), grad, one(d.value), one(d.lower), d.split


def decision_of(code: tuple) -> Decision:
    """The :class:`~attsvm.prove.bnb.Decision` of :func:`decision_code`'s ``code`` (the same balls, exactly; the
    gradient a 1-d object array)."""
    status, centre, grad, value, lower, split = code

    def one(c: Any) -> Any:
        return None if c is None else ball_of(c)

    gradient = None
    if grad is not None:
        gradient = np.empty(len(grad), dtype=object)
        gradient[:] = [ball_of(g) for g in grad]
    return Decision(status, one(centre), gradient, one(value), one(lower), split)


# ------------------------------------------------------------------------------------------------ the margin
@dataclass(frozen=True)
class ClaimSource:
    """What a worker needs to rebuild the margin of a claim's region statement (module docstring): the claim by
    ``file`` and ``claim_id`` (or the ``claim`` itself, pickled, when it is not in a file), its ``fingerprint``,
    the ``data`` set, the ``region_spec`` and ``params`` of :func:`~attsvm.prove.statement.constants_with`, the
    ``region`` the parent probed and ``prec``. ``key``: a digest of all of it (the worker's cache key)."""

    key: str
    claim_id: str
    file: str | None
    claim: Any
    fingerprint: str
    data: Any
    region_spec: str | None
    params: dict[str, Any]
    region: Any
    prec: int

    def build(self) -> tuple[Callable[[np.ndarray], Any], Any]:
        """``(margin, region)``: the claim found again (its fingerprint checked), its constants and
        :func:`~attsvm.prove.statement.margin_function` on the data and region."""
        from ..claims.runner import claim_in_file, fingerprint
        from .statement import constants_with, margin_function

        claim = self.claim if self.claim is not None else claim_in_file(self.file, self.claim_id)
        if fingerprint(claim) != self.fingerprint:
            raise InputError(f"claim {self.claim_id}: the worker found another claim in {self.file} than the prover's")
        consts = constants_with(claim, self.region_spec, self.params)
        return margin_function(claim, self.data, consts, self.region, self.prec), self.region


def claim_source(
    claim: Any, data: Any, region_spec: str | None, params: dict[str, Any] | None, region: Any, prec: int
) -> ClaimSource:
    """The :class:`ClaimSource` of a proof of ``claim`` on ``data``: by file and id when ``claim`` is the object its
    file defines (:attr:`~attsvm.claims.api.Claim.module`), else the claim itself when it pickles; otherwise an
    :class:`~attsvm.errors.InputError` (prove it with ``-n 1``)."""
    from ..claims.runner import fingerprint, travelling

    fp = fingerprint(claim)
    file, obj = travelling(
        claim,
        "a parallel proof (-n N) runs a claim found in a claim file, and this one is not the claim its file defines "
        "nor can it be pickled; prove it with -n 1",
    )
    params = dict(params or {})
    blob = pickle.dumps((claim.id, file, fp, data, region_spec, sorted(params.items()), region.to_dict(), int(prec)))
    key = hashlib.sha256(blob).hexdigest()
    return ClaimSource(key, claim.id, file, obj, fp, data, region_spec, params, region, int(prec))


def margin_of(source: Any) -> tuple[Callable[[np.ndarray], Any], Any]:
    """``source.build()``, once per process and ``source.key`` (the last :data:`CACHE_SIZE` kept)."""
    hit = _BUILT.get(source.key)
    if hit is None:
        hit = source.build()
        while len(_BUILT) >= CACHE_SIZE:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[source.key] = hit
    return hit


# ------------------------------------------------------------------------------------------------ the tasks
def _picklable(exc: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def decide_box(item: tuple[Any, tuple, tuple, str, int]) -> tuple[str, Any]:
    """One task of a round (in a worker): ``item = (source, lo, hi, method, prec)``; returns ``("ok", code)`` with
    the :func:`decision_code` of :func:`attsvm.prove.bnb.decide` on the box at precision ``prec``, or
    ``("error", exception)`` when the box raised. With one OpenBLAS thread when the claim loaded
    :mod:`attsvm.svm` (:func:`attsvm.svm.blas.blas_threads`; not imported here: that costs a fresh worker half a
    second of scipy imports, more than a round of boxes)."""
    from ..ball.numbers import workprec

    source, lo, hi, method, prec = item
    try:
        margin, region = margin_of(source)
        blas = sys.modules.get("attsvm.svm.blas")
        threads = blas.blas_threads(1) if blas is not None else contextlib.nullcontext()
        with workprec(prec), threads:
            return "ok", decision_code(decide(margin, region, lo, hi, method))
    except Exception as exc:  # noqa: BLE001 - raised in queue order by bnb.prove
        return "error", _picklable(exc)


def decide_all(pool: Any, source: Any, boxes: list[tuple[tuple, tuple]], method: str, prec: int) -> list[Any]:
    """The :class:`~attsvm.prove.bnb.Decision` of each box ``(lo, hi)`` of ``boxes`` (in their order), decided by
    ``pool``'s workers (:func:`decide_box`); a box that raised gives its exception in its place."""
    if not boxes:
        return []
    got = pool.map(decide_box, [(source, lo, hi, method, int(prec)) for lo, hi in boxes])
    return [decision_of(value) if tag == "ok" else value for tag, value in got]
