"""``attsvm prove``: prove a claim's region statement on a data file, with a certificate; re-check a certificate.

::

    attsvm prove [PATH ...] --only ID --data FILE [--region SPEC] [--boxes N] [--method mean-value|naive]
                 [--set KEY=VALUE ...] [-n N|auto] [--certificate FILE] [--json]
    attsvm prove --verify CERT [PATH ...]

The claim (found in PATHs, default the built-in collection) states "m(W) > 0 for every W in a region" through
``case.param`` (its ``hypotheses["region"]``, or ``--region``: ``ball:R``, ``annulus:R0,R1``, ``box:LO,HI``,
``cone:MU,R,R1`` around the direction the claim gives; ``cone:MU,R,inf`` for a claim that declares a tail lemma,
:mod:`attsvm.prove.tail`). The statement is proved on the data set of FILE by branch and bound with ball arithmetic
(:mod:`attsvm.prove.bnb`) within a budget of ``--boxes`` boxes. ``--set KEY=VALUE`` changes a declared param of the
claim (recorded in the certificate; ``--verify`` uses it). ``-n N|auto`` decides the boxes on N worker processes of
the package's pool (:class:`attsvm.pool.Pool`, as ``attsvm check -n``), in rounds whose result — leaves, status,
counterexample, box count, certificate — is the one of ``-n 1`` (:mod:`attsvm.prove.bnb`,
:mod:`attsvm.prove.parallel`); only the seconds differ.

Exit codes: **0** proved (``--verify``: the certificate holds); **1** refuted (a point of the region where the
margin's enclosure is below 0), unresolved within the budget, a data set that does not meet the claim's hypotheses
(nothing to prove), an error in the claim, or (``--verify``) a
certificate that does not hold — one line naming the leaf; **2** bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..errors import InputError
from .options import parse_assignments

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "prove",
        help="prove a claim's region statement on a data set (ball-arithmetic branch and bound, with a certificate)",
        description="Prove 'm(W) > 0 for every W in a region' for one data set; write or re-check a certificate.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="claim files or folders (default: the built-in claims)")
    p.add_argument("--only", metavar="ID", help="the claim to prove")
    p.add_argument("--data", metavar="FILE", help="the data set (.npz or .json, one data set)")
    p.add_argument(
        "--region", metavar="SPEC", help="ball:R | annulus:R0,R1 | box:LO,HI | cone:MU,R,R1[,axes] | cone:MU,R,inf"
    )
    p.add_argument("--boxes", type=int, default=None, metavar="N", help="the budget of boxes (default 20000)")
    p.add_argument("--method", choices=("mean-value", "naive"), default="mean-value", help="the enclosure")
    p.add_argument(
        "--set",
        dest="params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a declared param of the claim set to VALUE (a number or a word; repeatable); recorded in the certificate",
    )
    p.add_argument(
        "-n",
        "--workers",
        dest="workers",
        default=None,
        metavar="N|auto",
        help="decide the boxes on N worker processes (auto: the usable cores; default 1); the same result, "
        "certificate and all, for every N (not used by --verify)",
    )
    p.add_argument("--certificate", metavar="FILE", help="write the certificate (JSON) of a proof")
    p.add_argument("--verify", metavar="CERT", help="re-check a certificate instead of proving")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return p


def _claim(paths: list[str], claim_id: str):
    from ..claims import discover, select

    (c,) = select(discover(paths or None), [claim_id])
    return c


def parse_params(items: list[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` items (:func:`~attsvm.cli.options.parse_assignments`) as a dict: VALUE an int, else a
    finite float, else the word itself."""
    out: dict[str, object] = {}
    for key, text in parse_assignments(items).items():
        text = text.strip()
        if not text:
            raise InputError(f"--set {key}=: write KEY=VALUE")
        value: object = text
        for kind in (int, float):
            try:
                value = kind(text)
                break
            except ValueError:
                continue
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"--set {key}={text}: the value must be finite")
        out[key] = value
    return out


def run(args) -> int:
    from ..outputs import check_output_file
    from ..pool import workers_of

    workers = workers_of(args.workers)  # -n as attsvm check spells and checks it, before anything runs
    if args.verify:
        return _verify(args)
    if not args.only or not args.data:
        raise InputError("attsvm prove needs --only ID and --data FILE (or --verify CERT)")
    if args.boxes is not None and args.boxes < 1:
        raise InputError(f"--boxes must be a positive count, got {args.boxes}")
    check_output_file(args.certificate, "--certificate")
    from ..data import load
    from ..prove.certificate import write
    from ..prove.statement import DEFAULT_BOXES, NotApplicable, StatementError, certificate, prove_claim
    from ..prove.tail import unbounded

    ds = load(args.data)
    if getattr(ds, "batched", False):
        raise InputError(f"{args.data}: a batch of data sets; attsvm prove takes one")
    claim = _claim(args.paths, args.only)
    params = parse_params(args.params)
    region, tp = args.region, None
    if unbounded(args.region) is not None:  # cone:MU,R,inf: the compact part by boxes, the tail by the tail lemma
        from ..claims import discover
        from ..prove.tail import compact_part

        region, tp = compact_part(claim, discover(args.paths or None), ds, args.region)
        if region is None:
            print(f"{claim.id}: unresolved on {args.region}: {tp.describe()}")
            return 1
    if region is not None:
        from ..prove.regions import parse

        parse(region, int(ds.d) ** 2, direction=[1] * int(ds.d) ** 2)  # its spelling, before anything runs
    try:
        rp = prove_claim(
            claim,
            ds,
            region=region,
            params=params,
            max_boxes=args.boxes or DEFAULT_BOXES,
            method=args.method,
            workers=workers,
        )
    except NotApplicable as exc:
        print(exc)
        return 1
    except StatementError as exc:
        print(f"error in the claim: {exc}", file=sys.stderr)
        return 1
    cert = certificate(rp)
    if tp is not None:
        from ..prove.tail import cone_mismatch, record

        why = cone_mismatch(tp.mu, rp.region)
        if why is not None:
            print(f"error in the claim: {tp.claim}: {why}", file=sys.stderr)
            return 1
        cert["tail"] = record(tp)
        cert["region_text"] += f"; {tp.describe()}"
    if args.certificate and rp.status == "proved":
        write(args.certificate, cert)
    if args.json:
        print(json.dumps({k: v for k, v in cert.items() if k not in ("leaves", "data")}, indent=1))
    else:
        print(rp.summary())
        if tp is not None:
            print(f"  compact part R ≤ ‖W‖_F ≤ {tp.R1} by boxes (above); {tp.describe()}")
        cx = rp.proof.counterexample
        if cx is not None:
            from ..prove.certificate import box_text

            print(f"  counterexample box {box_text(cx.lo, cx.hi)}: margin enclosure at its centre {cx.centre}")
            if getattr(rp.region, "frame", None) is not None:  # the box is in the frame's coordinates: W = M theta
                W = rp.region.embed([(a + b) / 2 for a, b in zip(cx.lo, cx.hi)])
                print(f"  (frame coordinates) its centre is W = [{', '.join(f'{float(x):.6g}' for x in W)}]")
        if args.certificate:
            print(f"  certificate: {args.certificate}" if rp.status == "proved" else "  no certificate (not proved)")
    return 0 if rp.status == "proved" else 1


def _verify(args) -> int:
    from ..prove.verify import verify_file

    ok, line = verify_file(args.verify, args.paths)
    print(line)
    return 0 if ok else 1
