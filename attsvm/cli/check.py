"""``attsvm check``: run executable claims and report verdicts.

::

    attsvm check [PATH ...] [--only ID ...] [-k EXPR] [--examples N] [--seed S] [--budget ci|default|thorough|X]
                 [--time-limit S] [--json FILE] [--markdown FILE] [--latex FILE] [--device cpu|cuda]
                 [--out DIR] [--replay FILE.npz] [--db DIR | --no-db] [--list] [-n N|auto | --cluster SPEC]
                 [--prove [--boxes N]] [--data FILE] [--region SPEC]

PATH: claim files or folders (default: the built-in ``proofs/`` collection). Exit 0 when every verdict
matches its expectation (the policy of :mod:`attsvm.claims.verdict`: true claims ``verified``, expected-false
claims ``refuted`` with a confirmed counterexample, pinned ones ``inconclusive``; an unconfirmed float64
failure, an error or an invalid ``Outcome`` in a claim never matches), 1 otherwise, 2 on bad input (unknown
``--only`` id, a path without claims, a claim file that fails to import, hypotheses a strategy does not take).
``--json -`` writes the JSON report to stdout instead of the table.

Every output is checked before anything runs (:mod:`attsvm.outputs`; exit 2, one line naming the option):
``--json``/``--markdown``/``--latex`` files, the ``--out`` counterexample folder (default included: a
counterexample that cannot be saved would be lost) and the ``--db`` folder. The database is a cache, so only a
``--db DIR`` given explicitly is an error when it cannot be written; when the default ``.attsvm/db`` cannot be,
one ``warning:`` line says so and the run goes on without a database. Reports and counterexamples are written
atomically; Ctrl-C stops the run (``error: interrupted``, exit 130) without partial files.

``--data FILE`` checks the selected universal claims on that one data set (the search draws only their
parameters; an empirical claim, a claim that draws no data set or a batch file is bad input); ``--region SPEC``
replaces the declared region of every selected claim (one that declares none is bad input). With ``--prove``, the
claims are proved on the given data set; ``cone:MU,R,inf`` (only with ``--prove --data``) is proved as
``attsvm prove`` does: the claim's tail lemma closes ``‖W‖ ≥ R₁`` first, the search and the boxes take the compact
part, and the report names both (a tail that does not close leaves the sampled verdict, saying so).

``-n N`` (``auto``: the usable cores) runs the claims in N worker processes, ``--cluster SPEC`` on a Dask cluster
(``local``, ``local:N``, ``tcp://HOST:PORT``; :mod:`attsvm.pool`): one claim per task, the same results in the
same order as serially (:mod:`attsvm.claims.runner`). A bad value, both options together or an unreachable
scheduler is bad input (exit 2) before anything runs. ``--replay`` and ``--list`` run in this process.
"""

from __future__ import annotations

import argparse
import math
import sys

from .options import add_pool_options


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "check",
        help="check claims (THEORY statements or your own conjectures)",
        description="Search each claim for a counterexample; report verified / refuted / inconclusive.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="claim files or folders (default: built-in proofs/)")
    p.add_argument("--only", nargs="+", metavar="ID", action="extend", help="run only these claim ids")
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="select claims by id/origin/kind words, as pytest -k")
    p.add_argument("--examples", type=int, metavar="N", help="examples (universal) or runs (empirical) per claim")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="base seed (default 0)")
    p.add_argument(
        "--budget",
        default=None,
        metavar="B",
        help="ci | default | thorough | a number (scales the example, run and shrink counts; env ATTSVM_CHECK_BUDGET)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="S",
        help="wall-clock limit of each claim's search in seconds (off by default; a search it cuts short is "
        "'inconclusive: time limit', never verified)",
    )
    p.add_argument("--json", metavar="FILE", help="write the JSON report to FILE ('-' for stdout)")
    p.add_argument("--markdown", metavar="FILE", help="write a Markdown report")
    p.add_argument("--latex", metavar="FILE", help="write a LaTeX report (plain tabular)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--out", default="attsvm-counterexamples", metavar="DIR", help="counterexample folder (.npz + .json)"
    )
    p.add_argument("--replay", metavar="FILE", help="re-evaluate a saved counterexample (.npz) instead of searching")
    p.add_argument(
        "--db",
        default=None,
        metavar="DIR",
        help="counterexample database: failures found are stored and replayed first next time. A DIR given here "
        "that cannot be written is bad input (exit 2); without --db the default .attsvm/db is used, or, when it "
        "cannot be written, skipped with a warning",
    )
    p.add_argument("--no-db", action="store_true", help="neither read nor write the counterexample database")
    p.add_argument(
        "--allow-inconclusive",
        action="store_true",
        help="exploratory runs: an inconclusive verdict (other than an unconfirmed failure) does not fail the run",
    )
    p.add_argument(
        "--prove",
        action="store_true",
        help="prove every claim that declares a region (hypotheses['region']) on the data sets its search draws "
        "(ball-arithmetic branch and bound; verdict 'proved'; where the box budget runs out, the sampled verdict "
        "stays)",
    )
    p.add_argument("--boxes", type=int, default=None, metavar="N", help="--prove: the box budget per data set")
    p.add_argument(
        "--data",
        metavar="FILE",
        help="check the selected universal claims on this one data set (.npz/.json, as attsvm solve reads): the "
        "search draws only their parameters (the counterexample database is not used)",
    )
    p.add_argument(
        "--region",
        metavar="SPEC",
        help="the region of every selected claim in place of its declared one (each must declare one): ball:R | "
        "annulus:R0,R1 | box:LO,HI | cone:MU,R,R1 | cone:MU,R,inf (with --prove --data: the claim's tail lemma "
        "closes the rest, as in attsvm prove)",
    )
    p.add_argument("--list", action="store_true", help="list the discovered claims and exit")
    add_pool_options(
        p,
        "run the claims in N worker processes (auto: the usable cores; default 1: serially, in this process)",
        "the claims",
        "",
    )
    return p


def _write(path: str, text: str) -> None:
    """``text`` to the file ``path`` atomically (:func:`attsvm.outputs.write_text`); ``-`` is stdout."""
    from ..outputs import write_text

    if path == "-":
        sys.stdout.write(text)
        return
    write_text(path, text)


def _check_args(args) -> None:
    """Bad input before anything runs: option values and every report file (:mod:`attsvm.outputs`)."""
    from ..errors import InputError
    from ..outputs import check_output_file
    from ..pool import Pool

    Pool(args.workers, args.cluster)  # -n, --cluster and their exclusion (nothing is started)
    for name in ("json", "markdown", "latex"):
        check_output_file(getattr(args, name), f"--{name}")
    if args.examples is not None and args.examples < 1:
        raise InputError(f"--examples must be >= 1, got {args.examples}")
    if args.boxes is not None and (args.boxes < 1 or not args.prove):
        raise InputError(f"--boxes N is the box budget of --prove (a positive count), got {args.boxes}")
    if args.replay and (args.data or args.region):
        raise InputError("--replay re-evaluates a saved case: --data and --region do not apply")
    if args.time_limit is not None and not (args.time_limit > 0 and math.isfinite(args.time_limit)):
        raise InputError(f"--time-limit must be a positive number of seconds, got {args.time_limit}")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda: no CUDA device available")


def _database(args):
    """The counterexample database of the run (``--db``/``--no-db``; the module docstring): a checked
    :class:`~attsvm.claims.database.Database`, or None."""
    from ..claims.database import DEFAULT, Database, open_database
    from ..errors import InputError
    from ..outputs import check_output_dir

    if args.no_db:
        return None
    if args.db is not None:
        return open_database(args.db)
    try:
        check_output_dir(DEFAULT, "--db")
    except InputError as exc:
        sys.stderr.write(f"warning: {exc}; running without the counterexample database (--no-db: no warning)\n")
        return None
    return Database(DEFAULT)


def _given(args, claims) -> tuple:
    """``--data`` and ``--region`` (module docstring), checked before anything runs: the data set (or None), the
    region spec per claim id and the tail record per claim id (``cone:MU,R,inf``: the tail closed on the data)."""
    from ..errors import InputError

    data, regions, tails = None, {}, {}
    if args.data:
        from ..claims.runner import takes_data
        from ..data import load

        data = load(args.data)
        if getattr(data, "batched", False):
            raise InputError(f"--data {args.data}: a batch of data sets; give one")
        for c in claims:  # before a tail lemma is closed on the data (check() asks again, for its other callers)
            takes_data(c)
    if args.region:
        from ..prove.regions import parse
        from ..prove.tail import compact_part, cone_parts, record, unbounded

        for c in claims:
            if "region" not in c.hypotheses:
                raise InputError(f"--region: claim {c.id} declares no region (select region claims with --only)")
        bounded = args.region
        if unbounded(args.region) is not None:  # checked, searched (a tail that does not close) as R <= |W| <= 2R
            from ..prove.boxes import fraction_text
            from ..prove.certificate import qparse

            mu, R, _ = cone_parts(args.region)
            bounded = f"cone:{mu},{R},{fraction_text(2 * qparse(R, 'R'))}"
        dim = 4 if data is None else int(data.d) ** 2
        parse(bounded, dim, direction=[1] * dim)  # its spelling, before anything runs
        regions = {c.id: bounded for c in claims}
        if bounded != args.region:
            if not (args.prove and data is not None):
                raise InputError("--region cone:MU,R,inf needs --prove and --data (its tail lemma is proved there)")
            from ..claims import discover

            everything = discover(args.paths or None)
            for c in claims:
                spec, tp = compact_part(c, everything, data, args.region)
                regions[c.id] = spec or bounded
                tails[c.id] = record(tp)
    return data, regions, tails


def run(args) -> int:
    from ..claims import discover, select
    from ..claims import report as rep
    from ..claims.runner import Progress, check, replay, resolve_budget
    from ..errors import InputError
    from ..outputs import check_output_dir
    from ..prove.statement import DEFAULT_BOXES

    budget = resolve_budget(args.budget)
    _check_args(args)
    db = None
    if not args.replay and not args.list:  # the search writes counterexamples and the database
        check_output_dir(args.out, "--out")
        db = _database(args)
    if args.replay:
        from ..claims.counterexample import load

        _, info = load(args.replay)
        paths = args.paths or ([info["file"]] if info.get("file") else None)
        claims = select(discover(paths), args.only or [info["claim"]], args.keyword)
        if len(claims) != 1:
            raise InputError("--replay needs exactly one claim (use --only ID)")
        results = [replay(claims[0], args.replay, device=args.device)]
    else:
        claims = select(discover(args.paths or None), args.only, args.keyword)
        if args.list:
            for c in claims:
                print(f"{c.id}\t{c.origin}\t{c.kind}\t{c.title}")
            return 0
        data, regions, tails = _given(args, claims)
        prog = Progress(sys.stderr)
        results = check(
            claims,
            examples=args.examples,
            seed=args.seed,
            budget=budget,
            device=args.device,
            out=args.out,
            time_limit=args.time_limit,
            progress=prog,
            allow_inconclusive=args.allow_inconclusive,
            db=db,
            workers=args.workers,
            cluster=args.cluster,
            prove=(args.boxes or DEFAULT_BOXES) if args.prove else None,
            data=data,
            regions=regions,
            tails=tails,
        )
    meta = {"seed": args.seed, "budget": budget, "device": args.device}
    if args.json:
        _write(args.json, rep.json_text(results, **meta) + "\n")
    if args.markdown:
        _write(args.markdown, rep.markdown(results))
    if args.latex:
        _write(args.latex, rep.latex(results))
    if args.json != "-":
        print(rep.table(results))
    return 0 if all(r.matches for r in results) else 1
