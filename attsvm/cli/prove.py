"""``attsvm prove``: prove a claim's region statement on a data file, with a certificate; re-check a certificate.

::

    attsvm prove [PATH ...] --only ID --data FILE [--region SPEC] [--boxes N] [--method mean-value|naive]
                 [--certificate FILE] [--json]
    attsvm prove --verify CERT [PATH ...]

The claim (found in PATHs, default the built-in collection) states "m(W) > 0 for every W in a region" through
``case.param`` (its ``hypotheses["region"]``, or ``--region``: ``ball:R``, ``annulus:R0,R1``, ``box:LO,HI``,
``cone:MU,R,R1`` around the direction the claim gives). The statement is proved on the data set of FILE by
branch and bound with ball arithmetic (:mod:`attsvm.prove.bnb`) within a budget of ``--boxes`` boxes.

Exit codes: **0** proved (``--verify``: the certificate holds); **1** refuted (a point of the region where the
margin's enclosure is below 0), unresolved within the budget, an error in the claim, or (``--verify``) a
certificate that does not hold — one line naming the leaf; **2** bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import InputError

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
    p.add_argument("--region", metavar="SPEC", help="ball:R | annulus:R0,R1 | box:LO,HI | cone:MU,R,R1")
    p.add_argument("--boxes", type=int, default=None, metavar="N", help="the budget of boxes (default 20000)")
    p.add_argument("--method", choices=("mean-value", "naive"), default="mean-value", help="the enclosure")
    p.add_argument("--certificate", metavar="FILE", help="write the certificate (JSON) of a proof")
    p.add_argument("--verify", metavar="CERT", help="re-check a certificate instead of proving")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return p


def _claim(paths: list[str], claim_id: str):
    from ..claims import discover, select

    (c,) = select(discover(paths or None), [claim_id])
    return c


def run(args) -> int:
    from ..outputs import check_output_file

    if args.verify:
        return _verify(args)
    if not args.only or not args.data:
        raise InputError("attsvm prove needs --only ID and --data FILE (or --verify CERT)")
    if args.boxes is not None and args.boxes < 1:
        raise InputError(f"--boxes must be a positive count, got {args.boxes}")
    check_output_file(args.certificate, "--certificate")
    from ..data import load
    from ..prove.certificate import write
    from ..prove.statement import DEFAULT_BOXES, StatementError, certificate, prove_claim

    ds = load(args.data)
    if getattr(ds, "batched", False):
        raise InputError(f"{args.data}: a batch of data sets; attsvm prove takes one")
    claim = _claim(args.paths, args.only)
    if args.region is not None:
        from ..prove.regions import parse

        parse(args.region, int(ds.d) ** 2, direction=[1] * int(ds.d) ** 2)  # its spelling, before anything runs
    try:
        rp = prove_claim(claim, ds, region=args.region, max_boxes=args.boxes or DEFAULT_BOXES, method=args.method)
    except StatementError as exc:
        print(f"error in the claim: {exc}", file=sys.stderr)
        return 1
    cert = certificate(rp)
    if args.certificate and rp.status == "proved":
        write(args.certificate, cert)
    if args.json:
        print(json.dumps({k: v for k, v in cert.items() if k not in ("leaves", "data")}, indent=1))
    else:
        print(rp.summary())
        cx = rp.proof.counterexample
        if cx is not None:
            print(f"  counterexample box: centre of {cx.lo} .. {cx.hi}: margin enclosure {cx.centre}")
        if args.certificate:
            print(f"  certificate: {args.certificate}" if rp.status == "proved" else "  no certificate (not proved)")
    return 0 if rp.status == "proved" else 1


def _verify(args) -> int:
    from ..prove.verify import verify_file

    ok, line = verify_file(args.verify, args.paths)
    print(line)
    return 0 if ok else 1
