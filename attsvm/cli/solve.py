"""``attsvm solve``: solve an attention SVM for a data file and report the certified solution.

::

    attsvm solve DATA.npz [--norm fro|nuc|lq --q Q] [--program attsvm|gensvm|seq|causal|prompt|head|relaxed]
                 [--alpha opt|i0,i1,...|FILE] [--certify] [--json]

``--alpha``: ``opt`` (default: the file's ``alpha`` if any, else the optimal tokens), a comma-separated list
of token indices (n of them; n*K for sequence/causal data, row-major), or a ``.npy``/``.txt``/``.json``
file of integers. ``gensvm`` uses the singleton selected sets $\\mathcal O_i=\\{\\alpha_i\\}$. A batch file
(leading axis B) is solved item by item; ``--json`` then prints ``{"solutions": [...]}``.
Exit 0 solved, 1 infeasible (a Farkas certificate is reported) or a certificate that did not verify,
2 bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from ..errors import InputError

NORMS = ("fro", "nuc", "lq")
PROGRAMS = ("attsvm", "gensvm", "seq", "causal", "prompt", "head", "relaxed")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "solve",
        help="solve an attention SVM (Att-SVM, Att-SVM*, lq, Gen-SVM, ...) with certificates",
        description="Solve a convex program of THEORY §2 for a data file; report KKT residuals and certificates.",
    )
    p.add_argument("data", metavar="DATA", help="data file (.npz or .json), single data set or batch")
    p.add_argument("--norm", choices=NORMS, default="fro", help="objective norm (default fro)")
    p.add_argument("--q", type=float, default=None, metavar="Q", help="exponent q > 1 for --norm lq")
    p.add_argument("--program", choices=PROGRAMS, default="attsvm", help="which program (default attsvm)")
    p.add_argument("--alpha", default=None, metavar="SEL", help="opt | i0,i1,... | FILE (.npy/.txt/.json)")
    p.add_argument("--certify", action="store_true", help="prove optimality rigorously (exact / enclosure)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def parse_alpha(value: str | None) -> np.ndarray | None:
    """``opt``/None -> None; ``i0,i1,...`` -> ints; an existing file -> its integers."""
    if value is None or value.strip() == "opt":
        return None
    v = value.strip()
    if re.fullmatch(r"\s*-?\d+(\s*,\s*-?\d+)*\s*,?\s*", v):
        return np.array([int(s) for s in v.split(",") if s.strip()], dtype=np.int64)
    p = Path(v)
    if not p.is_file():
        raise InputError(f"--alpha: {v!r} is neither 'opt', a comma-separated list of integers, nor a file")
    try:
        if p.suffix.lower() == ".npy":
            a = np.load(p, allow_pickle=False)
        elif p.suffix.lower() == ".json":
            a = np.asarray(json.loads(p.read_text()))
        else:
            a = np.loadtxt(p, dtype=np.float64, delimiter=None if "," not in p.read_text() else ",", ndmin=1)
    except Exception as exc:
        raise InputError(f"--alpha: cannot read integers from {p} ({exc.__class__.__name__})") from exc
    a = np.asarray(a)
    if a.size == 0:
        raise InputError(f"--alpha: {p} holds no indices")
    if a.dtype.kind not in "iuf" or (a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.round(a)))):
        raise InputError(f"--alpha: {p} must hold integer token indices")
    return a.astype(np.int64)


def _load(path: str, alpha: np.ndarray | None):
    from .. import data

    try:
        return data.load(path)
    except InputError as exc:
        if alpha is None or "tie" not in str(exc):
            raise
    # ties are allowed when the caller names the selection: rebuild with alpha
    p = Path(path)
    if p.suffix.lower() == ".json":
        m = json.loads(p.read_text())
    else:
        with np.load(p, allow_pickle=False) as f:
            m = {k: f[k] for k in f.files}
    m["alpha"] = _shape_alpha(alpha, np.asarray(m["X"]), m)
    return data.from_mapping(m, str(p))


def _shape_alpha(alpha: np.ndarray, X: np.ndarray, m: dict) -> np.ndarray:
    """Reshape a flat selection to the data's alpha shape ((n,), (n,K) or with a batch axis)."""
    lead = X.shape[:-3]
    n, T = X.shape[-3], X.shape[-2]
    kind = str(np.asarray(m.get("kind", "cross")))
    Z = m.get("Z")
    K = T if kind == "causal" else (np.asarray(Z).shape[-2] if Z is not None and np.ndim(Z) == len(lead) + 3 else None)
    shape = (n,) if K is None else (n, K)
    if alpha.size == int(np.prod(shape)):
        a = alpha.reshape(shape)
        return np.broadcast_to(a, (*lead, *shape)).copy() if lead else a
    if alpha.size == int(np.prod((*lead, *shape))):
        return alpha.reshape((*lead, *shape))
    raise InputError(f"--alpha: expected {int(np.prod(shape))} token indices, got {alpha.size}")


def run(args: argparse.Namespace) -> int:
    from ..svm import solve

    alpha = parse_alpha(args.alpha)
    ds = _load(args.data, alpha)
    if alpha is not None:
        X = ds.X
        m = {"kind": ds.kind, "Z": None if ds.kind in ("self", "causal") else ds.Z}
        ds = ds.with_alpha(_shape_alpha(alpha, X, m))
    items = list(ds) if ds.batched else [ds]
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


def _summary(s) -> str:
    if s.status != "optimal":
        mu = np.asarray(s.farkas)
        nz = int(np.count_nonzero(mu)) if s.farkas is not None else 0
        return (
            f"{s.program} ({s.norm}): INFEASIBLE for this selection; Farkas certificate with {nz} nonzero "
            f"multipliers (sum mu_it A_it = 0)"
        )
    kkt = max(s.kkt.values()) if s.kkt else float("nan")
    cert = s.certificate or {}
    lines = [
        f"{s.program} ({s.norm}): optimal, objective {s.objective:.12g}, margin_min {s.margin_min:.3g}, "
        f"max KKT residual {kkt:.1e}",
        f"  support tokens: {len(s.support)}; locally optimal: {s.locally_optimal}; delta: {s.delta}",
        f"  certificate: {cert.get('kind')} verified={cert.get('verified')}"
        + (f" ({cert['seconds']:.2f} s, {cert.get('repairs', 0)} repairs)" if "seconds" in cert else ""),
    ]
    return "\n".join(lines)
