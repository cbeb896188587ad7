"""``attsvm solve``: solve an attention SVM for a data file and report the certified solution.

::

    attsvm solve DATA.npz [--norm fro|nuc|lq|l1|linf|spec] [--q Q]
                 [--program attsvm|gensvm|seq|causal|prompt|head|relaxed|diagonal|ntp] [--alpha opt|i0,i1,...|FILE]
                 [--certify] [--json]

``--norm``: the minimised norm of the Att-SVM programs (attsvm, seq, causal; the others are Euclidean):
``fro`` Frobenius (default), ``nuc`` nuclear (Att-SVM*), ``lq`` entrywise l_q (with ``--q``), ``l1`` / ``linf``
entrywise l_1 / l_inf (linear programs; ``--certify``: an exact rational certificate, kind ``lp-basis``, or a
proved bracket, ``lp-bracket``), ``spec`` spectral, the largest singular value (an SDP; ``--certify``: a proved
duality gap, kind ``duality-gap``).

``--alpha``: ``opt`` (default: the file's ``alpha`` if any, else the optimal tokens), a comma-separated list
of token indices (n of them; n*K for sequence/causal data, row-major), or a ``.npy``/``.txt``/``.json``
file of integers. ``gensvm`` uses the singleton selected sets $\\mathcal O_i=\\{\\alpha_i\\}$. A batch file
(leading axis B) is solved item by item; ``--json`` then prints ``{"solutions": [...]}``.
``--program ntp``: the graph SVM of next-token prediction (:func:`attsvm.ntp.svm.solve_graph_svm`) for a
next-token data file (kind ``ntp``), norms ``fro`` / ``nuc`` only, no ``--alpha`` (the labels select).
In-context classification data (kind ``icl``, :mod:`attsvm.icl`) is solved through its exact Att-SVM encoding
(:func:`attsvm.icl.as_attention`, selection 0 given): the max-margin $W$ of the tasks' margin constraints.
Exit 0 solved, 1 infeasible (a Farkas certificate is reported) or a certificate that did not verify,
2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from ..errors import InputError
from ..selection import parse_alpha

__all__ = ["add_parser", "parse_alpha", "run"]

NORMS = ("fro", "nuc", "lq", "l1", "linf", "spec")
PROGRAMS = ("attsvm", "gensvm", "seq", "causal", "prompt", "head", "relaxed", "diagonal", "ntp")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "solve",
        help="solve an attention SVM (Att-SVM, Att-SVM*, lq/l1/linf/spectral, Gen-SVM, ...) with certificates",
        description="Solve a convex program of THEORY §2 for a data file; report KKT residuals and certificates.",
    )
    p.add_argument("data", metavar="DATA", help="data file (.npz or .json), single data set or batch")
    p.add_argument(
        "--norm",
        choices=NORMS,
        default="fro",
        help="objective norm: fro (Frobenius, default), nuc (nuclear), lq (entrywise, with --q), l1 / linf "
        "(entrywise, linear programs with exact certificates), spec (spectral, SDP with a proved duality gap)",
    )
    p.add_argument("--q", type=float, default=None, metavar="Q", help="exponent q > 1 for --norm lq")
    p.add_argument("--program", choices=PROGRAMS, default="attsvm", help="which program (default attsvm)")
    p.add_argument("--alpha", default=None, metavar="SEL", help="opt | i0,i1,... | FILE (.npy/.txt/.json)")
    p.add_argument("--certify", action="store_true", help="prove optimality rigorously (exact / enclosure)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def run(args: argparse.Namespace) -> int:
    from ..data import load
    from ..svm import solve

    ds = load(args.data, parse_alpha(args.alpha))
    items = list(ds) if ds.batched else [ds]
    if ds.kind == "icl":  # in-context data: the max-margin programs of its exact Att-SVM encoding (alpha = 0)
        from ..icl import as_attention

        items = [as_attention(it) for it in items]
    if args.program == "ntp" or ds.kind == "ntp":
        sols = _solve_ntp(args, ds, items)
    else:
        sols = [solve(it, None, args.norm, args.program, args.q, args.certify) for it in items]
    infeasible = any(s.status != "optimal" for s in sols)
    unverified = args.certify and any(s.status == "optimal" and not s.certificate.get("verified") for s in sols)
    if args.json:
        objs = [s.to_json() for s in sols]
        out = {"solutions": objs} if ds.batched else objs[0]
        sys.stdout.write(json.dumps(out) + "\n")
    else:
        for b, s in enumerate(sols):
            head = f"[{b}] " if ds.batched else ""
            sys.stdout.write(head + _summary(s) + "\n")
    return 1 if (infeasible or unverified) else 0


def _solve_ntp(args: argparse.Namespace, ds, items: list) -> list:
    """The graph SVM of every item of next-token data; a mismatch of data kind and program is an InputError."""
    from ..ntp.svm import solve_graph_svm

    if ds.kind != "ntp":
        raise InputError(f"{args.data}: --program ntp needs next-token data (kind 'ntp'), got kind {ds.kind!r}")
    if args.program != "ntp":
        raise InputError(f"{args.data}: next-token data (kind 'ntp') is solved by --program ntp, not {args.program!r}")
    if args.norm not in ("fro", "nuc"):
        raise InputError(f"--program ntp is defined for --norm fro or nuc (got {args.norm!r})")
    if args.q is not None:
        raise InputError("--q is only meaningful with --norm lq")
    return [solve_graph_svm(it, args.norm, args.certify) for it in items]


def _value(x: float | None, fmt: str = ".12g") -> str:
    return "not representable in float64" if x is None else format(x, fmt)


def _summary(s) -> str:
    if s.status != "optimal":
        mu = np.asarray(s.farkas)
        nz = int(np.count_nonzero(mu)) if s.farkas is not None else 0
        return (
            f"{s.program} ({s.norm_kind}): INFEASIBLE for this selection; Farkas certificate with {nz} nonzero "
            f"multipliers (sum mu_it A_it = 0)"
        )
    kkt = max(s.kkt.values()) if s.kkt else 0.0
    cert = s.certificate or {}
    norms = f"{s.norm_label} = {_value(s.norm_value)}"
    if s.norm_sq is not None or s.norm in ("fro", "l2"):
        norms += f", {s.norm_label}^2 = {_value(s.norm_sq)}"
    mm = "none (no constraints)" if s.margin_min is None else f"{s.margin_min:.3g}"
    lines = [
        f"{s.program} ({s.norm_kind}): optimal, {norms} (objective: {s.objective_formula}), margin_min {mm}, "
        f"max KKT residual {kkt:.1e}",
        f"  support tokens: {len(s.support)}; locally optimal: {s.locally_optimal}; delta: {s.delta}",
        f"  certificate: {cert.get('kind')} verified={cert.get('verified')}"
        + (f" ({cert['seconds']:.2f} s, {cert.get('repairs', 0)} repairs)" if "seconds" in cert else ""),
    ]
    if cert.get("value_str") is not None:
        v = cert["value_str"]
        lines.append(f"  exact optimum: {v if len(v) <= 200 else v[:90] + ' ... ' + v[-90:]} ({len(v)} characters)")
    elif cert.get("proved") and "lower" in cert:
        lines.append(f"  proved bracket: [{cert['lower']:.15g}, {cert['upper']:.15g}], rel. gap {cert['rel_gap']:.1e}")
    if s.extra.get("unrepresentable"):
        lines.append(f"  not representable in float64 (reported as null): {', '.join(s.extra['unrepresentable'])}")
    return "\n".join(lines)
