"""``attsvm reproduce NAME``: run one of the papers' experiments (``numerics/NAME.py``) or ``all``.

Writes the figure in each ``--format`` (default ``png,pdf``; PNG at ``--dpi``, default 200) as ``DIR/NAME.png``,
``DIR/NAME.pdf``, ``DIR/NAME.svg``, its caption ``DIR/NAME.caption.md`` (what every line, band and marker shows,
and the sizes run), ``DIR/NAME.json`` (the numbers behind it) and ``DIR/NAME.manifest.json`` (package versions,
device, seeds, git revision, wall time, options, the figure files with format and dpi), all or none. Exit 0 when
the paper's qualitative claims hold on the run, 1 when a check failed, 2 on bad input (an unknown name or format,
a ``--dpi`` outside 50..1200, a spec that does not import, an unknown option or a value it does not allow, an
``--out`` folder that cannot be written, a bad ``-n`` or ``--cluster``, an unreachable scheduler: checked before
anything runs). Ctrl-C stops the run and its worker
processes (``error: interrupted``, exit 130) and leaves no partial file.

Options: ``--set KEY=VALUE`` (repeatable) sets an option that the experiment's spec declares (its ``OPTIONS``),
the value read as the type of the option's default; with ``all`` an option goes to the experiments that declare
it, and a key that none of them declares is an error. ``--reference scs`` is short for ``--set reference=scs``
(``rank``: also solve Att-SVM* as the authors' cvxpy model with SCS and compare the ranks).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from ..experiments import NAMES  # stdlib + numpy only at import time; the built-in specs, sorted by name
from ..figures import DEFAULT_DPI, DEFAULT_FORMATS, FORMATS, MAX_DPI, MIN_DPI
from .options import add_pool_options


def _fill(text: str) -> str:
    """A paragraph of this docstring for ``--help``: rewrapped, never inside an option name (``--set``)."""
    return textwrap.fill(" ".join(text.split()).replace("``", "'"), width=79, break_on_hyphens=False)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "reproduce",
        help="reproduce an experiment of the papers (figure, numbers, manifest)",
        description=_fill(__doc__.split("\n\n")[0]),
        epilog=_fill(__doc__.split("\n\n")[2]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", metavar="NAME", help=f"experiment: {', '.join(NAMES)}, or all")
    p.add_argument("--smoke", action="store_true", help="small sizes (CI) that still show the qualitative result")
    p.add_argument("--out", default="reproduce-out", help="output folder (default: ./reproduce-out)")
    p.add_argument(
        "--format",
        default=",".join(DEFAULT_FORMATS),
        metavar="LIST",
        help=f"figure formats, a comma list of {', '.join(FORMATS)} (default: {','.join(DEFAULT_FORMATS)})",
    )
    p.add_argument(
        "--dpi",
        default=str(DEFAULT_DPI),
        metavar="N",
        help=f"PNG resolution, {MIN_DPI}..{MAX_DPI} (default: {DEFAULT_DPI})",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set an option of the experiment (repeatable; the error for an unknown key lists the experiment's "
        "options; rank: reference=none|scs)",
    )
    p.add_argument(
        "--reference",
        default=None,
        metavar="SOLVER",
        help="short for --set reference=SOLVER (rank: scs also solves Att-SVM* with cvxpy + SCS, the authors' "
        "model, and compares the ranks)",
    )
    p.add_argument("--seeds", type=int, default=None, metavar="N", help="number of independent runs/instances")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    add_pool_options(
        p,
        "local worker processes for the parallel stages, auto = the usable cores (default: min(2, cores))",
        "the parallel stages",
        "",
    )
    p.add_argument("--numerics", default=None, metavar="DIR", help="folder of experiment specs (default: numerics/)")
    p.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    return p


def run(args) -> int:
    from ..errors import InputError
    from ..experiments import (
        check_outputs,
        discover,
        experiment_pool,
        load_spec,
        reproduce,
        select_options,
    )
    from ..figures import check_dpi, parse_formats
    from .options import parse_assignments

    if args.device not in ("cpu", "cuda") and not str(args.device).startswith("cuda:"):
        raise InputError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.seeds is not None and args.seeds < 1:
        raise InputError(f"--seeds must be a positive integer, got {args.seeds}")
    pool = experiment_pool(args.workers, args.cluster)  # validates -n and --cluster (connects later)
    formats = parse_formats(args.format)
    dpi = check_dpi(args.dpi)
    known = discover(args.numerics)
    if args.name == "all":
        names = [n for n in NAMES if n in known] + sorted(set(known) - set(NAMES))
    elif args.name in known:
        names = [args.name]
    elif args.name.replace("-", "_") in known:  # rank-dynamics names numerics/rank_dynamics.py
        names = [args.name.replace("-", "_")]
    else:
        raise InputError(f"unknown experiment {args.name!r} (known: {', '.join(sorted(known))}, all)")
    given = parse_assignments(args.set)
    if args.reference is not None:
        if given.get("reference", args.reference) != args.reference:
            raise InputError(f"--reference {args.reference} contradicts --set reference={given['reference']}")
        given["reference"] = args.reference
    options = select_options({n: load_spec(n, args.numerics) for n in names}, given)  # before anything runs
    check_outputs(names, args.out, formats=formats)  # every output path, before the first experiment runs
    reports = []
    # one pool for every experiment of the command (a cluster is reached before the first one runs)
    with pool:
        for name in names:
            rep = reproduce(
                name,
                args.out,
                smoke=args.smoke,
                seeds=args.seeds,
                device=args.device,
                progress=not args.quiet,
                folder=args.numerics,
                argv=sys.argv,
                formats=formats,
                dpi=dpi,
                options=options[name],
                pool=pool,
            )
            reports.append(rep)
            if not args.json:
                status = "ok" if rep.ok else "FAILED: " + "; ".join(rep.failures)
                shown = [rep.files[f] for f in formats] + [rep.files["caption"]]
                print(f"{name:10s} {rep.wall_s:8.1f}s  {' '.join(shown)}  {status}")
    ok = all(r.ok for r in reports)
    if args.json:
        print(json.dumps({"ok": ok, "experiments": [r.to_json() for r in reports]}, indent=1))
    return 0 if ok else 1
