"""``attsvm derive``: symbolic derivations verified by sympy, rendered as LaTeX / Markdown.

Usage::

    attsvm derive [NAME ...] [--path DIR] [--latex FILE] [--standalone] [--markdown FILE] [--check] [--json]
    attsvm derive --update-golden [NAME ...]         # rewrite proofs/tex/<name>.tex
    attsvm derive kkt --data DATA.npz [--alpha 0,2,1] [--latex FILE] [--standalone] [--markdown FILE] [--json]

Derivations are discovered by path (``proofs/derivations/*.py``; see :func:`attsvm.paths.proofs_dir`).
``--check`` re-verifies every selected derivation and exits 1 if any step fails. ``--json`` lists every step with
its ``name``, ``scope`` (``symbolic``: proved for general sizes; ``instances``: checked on concrete sizes;
``premise``: not checked) and ``verified`` (null without ``--check``). ``FILE`` may be ``-``
(standard output). Unknown names exit 2; a step reference to an unknown label (``{step:LABEL}`` in a derivation's
prose) is an error when the derivation is built (exit 2).

A page states per step whether its check ran in this run ("Checked in this run (how)" only with ``--check``, else
"Not checked in this run (run attsvm derive NAME --check)") and ends with a provenance block
(:class:`attsvm.provenance.Provenance`: the command, the attsvm version, the date and the checks that ran).
``--update-golden`` writes the pages as built (not checked), dated by ``SOURCE_DATE_EPOCH`` when set, else by
:data:`attsvm.symbolic.derivation.GOLDEN_SOURCE_DATE_EPOCH`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "derive",
        help="symbolic derivations (sympy-verified, LaTeX)",
        description="Build, verify (--check) and render the symbolic derivations; 'derive kkt --data F' solves "
        "one instance's Att-SVM KKT system in exact rationals.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="derivation names (default: all), or 'kkt'")
    p.add_argument("--path", action="append", default=None, help="derivation folder or file (repeatable)")
    p.add_argument("--latex", metavar="FILE", help="write LaTeX ('-' for stdout)")
    p.add_argument("--standalone", action="store_true", help="LaTeX as a complete document")
    p.add_argument("--markdown", metavar="FILE", help="write Markdown ('-' for stdout)")
    p.add_argument("--check", action="store_true", help="re-verify every step; exit 1 on a failure")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("--update-golden", action="store_true", help="rewrite the golden files proofs/tex/<name>.tex")
    p.add_argument("--golden-dir", metavar="DIR", help="golden folder (default: <proofs>/tex)")
    p.add_argument("--data", metavar="FILE", help="kkt: the data set (.npz or .json)")
    p.add_argument("--alpha", metavar="LIST", help="kkt: selection, comma-separated token indices (0-based)")
    return p


def _write(path: str, text: str) -> None:
    """Write atomically (:func:`attsvm.outputs.write_text`: nothing half-written); '-' is stdout."""
    from ..outputs import write_text

    if path == "-":
        sys.stdout.write(text)
        return
    write_text(path, text)


def _check_outputs(args) -> None:
    """Every output path (``--latex``, ``--markdown``, the ``--update-golden`` folder) checked writable before
    any derivation is built or solved (:mod:`attsvm.outputs`; bad input names the option)."""
    from ..outputs import check_output_dir, check_output_file

    check_output_file(args.latex, "--latex")
    check_output_file(args.markdown, "--markdown")
    if args.update_golden:
        check_output_dir(golden_dir(args.golden_dir), "--golden-dir" if args.golden_dir else "--update-golden")


def golden_dir(arg: str | None = None) -> Path:
    from ..paths import proofs_dir

    return Path(arg) if arg else proofs_dir() / "tex"


def run(args) -> int:
    from ..errors import InputError

    _check_outputs(args)
    if args.names and args.names[0] == "kkt":
        if len(args.names) > 1:
            raise InputError("derive kkt takes no derivation names")
        return _run_kkt(args)
    if args.data or args.alpha:
        raise InputError("--data/--alpha belong to 'attsvm derive kkt'")
    from ..symbolic.derivation import document, markdown_document
    from ..symbolic.registry import discover

    reg = discover([Path(p) for p in args.path] if args.path else None)
    names = args.names or list(reg)
    unknown = [n for n in names if n not in reg]
    if unknown:
        raise InputError(f"unknown derivation {unknown[0]!r} (known: {', '.join(reg)})")
    if args.update_golden:
        from ..outputs import check_output_file

        for n in names:
            check_output_file(golden_dir(args.golden_dir) / f"{n}.tex", "--update-golden")
    derivs = [reg[n].build() for n in names]
    if args.check:
        for d in derivs:
            d.verify()
    # render everything before writing anything
    outputs: list[tuple[str, str]] = []
    if args.latex:
        outputs.append((args.latex, document(derivs, standalone=args.standalone)))
    if args.markdown:
        outputs.append((args.markdown, markdown_document(derivs)))
    if args.update_golden:
        gd = golden_dir(args.golden_dir)
        from ..symbolic.derivation import golden_date

        # a golden is the page as built, not checked in this run (it must not depend on --check)
        outputs += [
            (str(gd / f"{d.name}.tex"), reg[d.name].build().latex(standalone=True, date=golden_date())) for d in derivs
        ]
    from ..outputs import transaction

    with transaction():  # all the files or none
        for path, text in outputs:
            _write(path, text)
    failed = [d for d in derivs if d.verified is False]
    to_stdout = any(p == "-" for p, _ in outputs)
    if args.json:
        print(json.dumps({"derivations": [d.to_json() for d in derivs]}, indent=2))
    elif not to_stdout:
        _table(derivs, args.check)
        if args.update_golden:
            print(f"wrote {len(derivs)} golden file(s) to {golden_dir(args.golden_dir)}")
    for d in failed:
        for step, detail in d.failures():
            sys.stderr.write(f"error: {d.name}: step {step!r} failed: {detail}\n")
    return 1 if failed else 0


def _table(derivs, checked: bool) -> None:
    w = max(len(d.name) for d in derivs) if derivs else 4
    for d in derivs:
        status = ("verified" if d.verified else "FAILED") if checked else "not checked"
        extra = f"{d.seconds:7.2f} s" if checked else ""
        sc = d.scopes()
        prem = f"{sc['premise']} premise" + ("" if sc["premise"] == 1 else "s")
        scopes = f"{sc['symbolic']} symbolic, {sc['instances']} on instances, {prem}"
        print(f"{d.name:<{w}}  {status:<11}  {len(d.steps):2d} steps ({scopes})  {extra}  {d.title}")


def _long(cert) -> bool:
    """Is some multiplier, entry of W or margin of ``cert`` printed as an enclosure rather than exactly?"""
    from ..symbolic.enclosure import is_short

    values = [q for _, _, q in cert["multipliers"]] + [q for row in cert["W"] for q in row]
    values += [cert["min_other_margin"]] if cert.get("min_other_margin") is not None else []
    return not all(is_short(q) for q in values)


def _run_kkt(args) -> int:
    """``derive kkt``: the exact certificate on stdout (long rationals as certified enclosures, ``--json`` exact),
    the instance derivation as LaTeX/Markdown, and beside the first document file its exact values
    (``out.tex`` -> ``out.exact.json``), all files in one transaction."""
    import os

    from ..data import load
    from ..errors import InputError
    from ..outputs import check_output_file, transaction
    from ..selection import parse_alpha
    from ..symbolic.enclosure import show
    from ..symbolic.kkt_instance import certify_exact, derivation_of, exact_path, exact_values, file_digest

    if not args.data:
        raise InputError("derive kkt needs --data FILE")
    docs = [(opt, p) for opt, p in (("--latex", args.latex), ("--markdown", args.markdown)) if p and p != "-"]
    exact = exact_path(docs[0][1]) if docs else None
    if exact is not None:
        if any(Path(p).resolve() == exact.resolve() for _, p in docs):
            raise InputError(f"{docs[0][0]} {docs[0][1]}: the exact values go to {exact}; name the document otherwise")
        check_output_file(exact, docs[0][0] + " (exact values)")
    # --alpha becomes the data set's selection (ties then allowed, the same loader as 'attsvm solve')
    ds = load(args.data, parse_alpha(args.alpha))
    cert, ex = certify_exact(ds, None)

    def build(doc: str | None):
        name = None if exact is None else (os.path.relpath(exact, Path(doc).parent) if doc else str(exact))
        d = derivation_of(ex, alpha=cert.get("alpha"), exact_file=name)
        # the data by file name (its path and digest are in the exact values file): a path would not fit the line
        d.tool = d.check_command = f"attsvm derive kkt --data {Path(args.data).name}" + (
            f" --alpha {args.alpha}" if args.alpha else ""
        )
        d.verify()
        return d

    d = build(docs[0][1] if docs else None)
    verified = bool(cert["verified"] and d.verified)
    cert["verified"] = verified
    outputs = []
    if args.latex:
        dl = d if not docs or docs[0][1] == args.latex or args.latex == "-" else build(args.latex)
        outputs.append((args.latex, dl.latex(standalone=args.standalone)))
    if args.markdown:
        dm = d if not docs or docs[0][1] == args.markdown or args.markdown == "-" else build(args.markdown)
        outputs.append((args.markdown, dm.markdown()))
    if exact is not None:
        values = exact_values(ex, cert.get("alpha"), {"path": str(args.data), "sha256": file_digest(args.data)})
        outputs.append((str(exact), json.dumps(values, indent=1) + "\n"))
        cert["exact_values_file"] = str(exact)
    with transaction():  # the documents and their exact values: all or none
        for path, text in outputs:
            _write(path, text)
    if args.json:
        print(json.dumps(cert, indent=2))
    elif not any(p == "-" for p, _ in outputs):
        print(f"Att-SVM exact KKT: {'verified' if verified else 'NOT verified'} ({cert['source']})")
        print(f"  active constraints (i,t): {cert['active']}")
        for i, t, q in cert["multipliers"]:
            print(f"  lambda[{i},{t}] {show(q)}")
        for r, row in enumerate(cert["W"]):
            for c, q in enumerate(row):
                print(f"  W[{r},{c}] {show(q)}")
        print(f"  min other margin {show(cert['min_other_margin'])}")
        if _long(cert):
            where = f"in {exact} and with --json" if exact is not None else "with --json"
            print(f"  (intervals are certified enclosures; the exact values are {where})")
    if not verified:
        bad = [k for k, v in cert.get("checks", {}).items() if not v] or d.failures()
        sys.stderr.write(f"error: exact KKT certificate failed: {bad}\n")
    return 0 if verified else 1
