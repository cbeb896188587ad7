r"""A claim's region statement, proved for one data set: the claim's own conclusion as the margin of
:mod:`attsvm.prove.bnb`, and the certificate of the proof.

A claim states a region statement by drawing its parameter with :meth:`attsvm.claims.case.Case.param` (the region
is ``hypotheses["region"]`` or given there, e.g. a cone around the $W^{mm}$ the conclusion computed). To prove it on
a data set, the conclusion runs in a ball case (the strict ball kit, the data as exact balls) whose
:attr:`~attsvm.claims.case.Case.prover` answers ``case.param``:

* a first *probe* run stops at ``case.param`` and returns the region (so a data-dependent region, such as the cone
  around $W^{mm}_\alpha$, is the one the conclusion builds);
* then each box of the branch and bound runs the conclusion with ``case.param`` returning jets on the box (or balls
  at its centre), and takes ``Outcome.margin`` — a jet whose value encloses the margin on the box and whose gradient
  encloses the margin's gradient there. An inconclusive outcome, or a helper that cannot enclose
  (:class:`attsvm.kit.Undecidable`), leaves the box undecided (it is split, or stays unresolved).

The conclusion may draw nothing but its parameter: any other draw is an error in the claim (a region statement
quantifies over the region only).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data import Dataset
from ..errors import InputError
from .bnb import Proof, prove
from .boxes import fraction_text

DEFAULT_BOXES = 20000  # the box budget of one proof at budget 1 (a count)


class _Probe(Exception):
    def __init__(self, region: Any) -> None:
        super().__init__("probe")
        self.region = region


class StatementError(Exception):
    """An error in the claim while proving (its conclusion raised, drew another value, never called case.param)."""


class NotApplicable(StatementError):
    """The data set does not meet the claim's hypotheses: the conclusion was inconclusive before it drew its
    parameter, so there is no region statement to prove on it (not an error in the claim)."""


@dataclass
class RegionProof:
    """A proof of one claim's region statement on one data set: the :class:`~attsvm.prove.bnb.Proof`, the region,
    the claim, the data and the settings."""

    claim: Any
    data: Dataset
    region: Any
    proof: Proof
    constants: dict[str, Any]
    prec: int
    seconds: float

    @property
    def status(self) -> str:
        return self.proof.status

    def summary(self) -> str:
        """One line: the status, the region, boxes, depth and seconds."""
        p = self.proof
        return (
            f"{self.claim.id}: {p.status} on {self.region.describe()} ({p.boxes} boxes evaluated, "
            f"{len(p.leaves)} leaves, depth {p.depth}, {self.seconds:.1f} s, {p.method} form): {p.reason}"
        )


def constants_with(claim: Any, region: str | None, params: dict[str, Any] | None = None) -> Any:
    """The claim's constants (:meth:`~attsvm.claims.api.Claim.new_constants`) with ``region`` (a spec) in place of its
    declared one and ``params`` (``attsvm prove --set KEY=VALUE``) in place of declared params; an InputError when
    there is no region to prove on."""
    if region is None and "region" not in claim.hypotheses:
        raise InputError(f"claim {claim.id} declares no region (hypotheses['region']); give one with --region")
    return claim.new_constants(region, params)


def _case(claim: Any, data: Dataset, consts: Any, prec: int) -> Any:
    from ..claims.case import Case

    return Case(data=data, hypotheses=consts, precision="ball", prec=prec, replay=[])


def _run(claim: Any, case: Any) -> Any:
    """The conclusion on ``case`` in its kit's working precision."""
    with case.kit.context():
        return claim.conclusion(case)


def run_in_balls(claim: Any, data: Dataset, consts: Any, prec: int = 256) -> Any:
    """The claim's outcome on ``data`` in a ball case with no prover (a statement that draws nothing, such as a
    tail lemma, :mod:`attsvm.prove.tail`)."""
    return _run(claim, _case(claim, data, consts, prec))


def probe_region(claim: Any, data: Dataset, consts: Any, prec: int = 256) -> Any:
    """The region the conclusion quantifies over on ``data`` (its first ``case.param``)."""
    from ..claims.case import ReplayError

    case = _case(claim, data, consts, prec)

    def stop(region: Any, shape: tuple) -> Any:
        raise _Probe(region)

    case.prover = stop
    try:
        out = _run(claim, case)
    except _Probe as p:
        return p.region
    except ReplayError as exc:
        raise StatementError(f"claim {claim.id}: the conclusion draws a value besides case.param ({exc})") from None
    except InputError:
        raise
    except Exception as exc:
        raise StatementError(f"claim {claim.id}: {type(exc).__name__}: {exc}") from exc
    if getattr(out, "inconclusive", None):
        why = out.inconclusive
        raise NotApplicable(f"{claim.id}: the data set does not meet the hypotheses ({why}): nothing to prove")
    raise StatementError(f"claim {claim.id}: the conclusion never calls case.param: it states nothing about a region")


def margin_function(claim: Any, data: Dataset, consts: Any, region: Any, prec: int = 256) -> Callable:
    """``margin(theta)`` for :func:`attsvm.prove.bnb.prove`: the conclusion's margin with ``case.param`` = the
    parameter of the region's coordinates ``theta`` (``region.embed(theta)``: theta itself, or $W=M\\theta$ for a
    framed region; None when the box is undecided: an inconclusive outcome or an :class:`~attsvm.kit.Undecidable`
    helper)."""
    from ..claims.case import ReplayError
    from ..kit import Undecidable

    def margin(theta: np.ndarray) -> Any:
        case = _case(claim, data, consts, prec)

        def give(reg: Any, shape: tuple) -> np.ndarray:
            if reg != region:
                raise StatementError(f"claim {claim.id}: the region changed between runs ({reg!r} vs {region!r})")
            return region.embed(theta).reshape(shape)  # W = M theta in a framed region's coordinates

        case.prover = give
        try:
            out = _run(claim, case)
        except (Undecidable, ZeroDivisionError):
            return None
        except ReplayError as exc:
            raise StatementError(f"claim {claim.id}: the conclusion draws a value besides case.param ({exc})") from None
        except StatementError:
            raise
        except Exception as exc:
            raise StatementError(f"claim {claim.id}: {type(exc).__name__}: {exc}") from exc
        if getattr(out, "inconclusive", None):
            return None
        return out.margin

    return margin


def prove_claim(
    claim: Any,
    data: Dataset,
    *,
    region: str | None = None,
    params: dict[str, Any] | None = None,
    max_boxes: int = DEFAULT_BOXES,
    method: str = "mean-value",
    prec: int = 256,
    progress: Callable[[int, int], None] | None = None,
    workers: Any = None,
) -> RegionProof:
    """Prove ``claim``'s region statement on ``data`` (``region``: a spec overriding the declared one; ``params``:
    values of declared params overriding the declared ones).

    ``workers``: the workers that decide the boxes — a count (``attsvm prove -n``: an int, a digit string or
    ``"auto"``, :func:`attsvm.pool.workers_of`; a pool is made for this proof and stopped after it), or an
    :class:`attsvm.pool.Pool` of the caller (used, not stopped). One worker (``None``, 1, a serial pool) is the
    one-box loop in this process; more give the rounds of :mod:`attsvm.prove.bnb` on the pool's workers, each
    rebuilding the margin from the claim's file (:mod:`attsvm.prove.parallel`). The result is the same for any
    number of workers (only ``seconds`` differ)."""
    from ..pool import Pool

    pool = workers if isinstance(workers, Pool) else Pool(workers)  # a bad count: InputError before anything runs
    t0 = time.perf_counter()
    consts = constants_with(claim, region, params)
    reg = probe_region(claim, data, consts, prec)
    margin = margin_function(claim, data, consts, reg, prec)

    def run(pool: Any = None, source: Any = None) -> Proof:
        return prove(
            margin,
            reg,
            max_boxes=max_boxes,
            method=method,
            prec=prec,
            progress=progress,
            pool=pool,
            source=source,
        )

    if pool.kind == "serial":
        proof = run()
    else:
        from .parallel import claim_source

        source = claim_source(claim, data, region, params, reg, prec)
        if pool is workers:
            proof = run(pool, source)
        else:
            with pool:
                proof = run(pool, source)
    values = {k: consts[k] for k in consts}
    return RegionProof(claim, data, reg, proof, values, prec, time.perf_counter() - t0)


# ------------------------------------------------------------------------------------------------ certificate
def _hex(a: Any) -> Any:
    arr = np.asarray(a)
    if arr.dtype.kind == "f":
        return np.vectorize(lambda x: float(x).hex(), otypes=[object])(arr).tolist()
    return arr.tolist()


def ball_text(x: Any) -> list[str] | None:
    """A ball as the exact decimal endpoints ``[lower, upper]`` (None for none)."""
    if x is None:
        return None
    from ..ball.jet import value

    v = value(x)
    if not v.is_finite():
        return ["-inf", "inf"]
    return [fraction_text(_exact(v.lower())), fraction_text(_exact(v.upper()))]


def _exact(x: Any) -> Any:
    """The exact rational of an exact ball (an endpoint)."""
    from fractions import Fraction

    man, exp = x.mid().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def certificate(rp: RegionProof) -> dict[str, Any]:
    """The certificate of a proof (:mod:`attsvm.prove.certificate`)."""
    from ..provenance import Provenance
    from .certificate import FORMAT

    p = rp.proof
    leaves = []
    for lf in p.leaves:
        rec: dict[str, Any] = {"path": lf.path, "splits": list(lf.splits), "status": lf.status}
        rec["lo"] = [fraction_text(q) for q in lf.lo]
        rec["hi"] = [fraction_text(q) for q in lf.hi]
        if lf.status == "proved":
            rec["centre"] = ball_text(lf.centre)
            rec["lower"] = ball_text(lf.lower)
            rec["gradient"] = None if lf.gradient is None else [ball_text(g) for g in lf.gradient]
        leaves.append(rec)
    data = {k: _hex(v) for k, v in rp.data.to_dict().items() if v is not None and k != "kind"}
    data["kind"] = rp.data.kind
    check = f"{rp.claim.id}: {p.status} on {rp.region.describe()} by {p.method} enclosures ({p.boxes} boxes)"
    prov = Provenance.of(f"attsvm prove {rp.claim.id}", budget=f"{p.boxes} boxes", checks=[check])
    return {
        "format": FORMAT,
        "claim": rp.claim.id,
        "file": rp.claim.module,
        "status": p.status,
        "reason": p.reason,
        "region": rp.region.to_dict(),
        "region_text": rp.region.describe(),
        "constants": {k: v for k, v in rp.constants.items() if isinstance(v, (str, int, float, bool, type(None)))},
        "data": data,
        "method": p.method,
        "prec": rp.prec,
        "root": {"lo": [fraction_text(q) for q in p.root[0]], "hi": [fraction_text(q) for q in p.root[1]]},
        "boxes": p.boxes,
        "depth": p.depth,
        "seconds": round(rp.seconds, 3),
        "counts": p.counts,
        "leaves": leaves,
        "provenance": prov.to_dict(),
    }
