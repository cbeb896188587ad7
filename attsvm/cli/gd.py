r"""``attsvm gd DATA.npz``: run (normalised) gradient descent / mirror descent on a data set or a batch.

A batch file (leading axis B) runs all its data sets concurrently; ``--json`` prints
``{"runs": [{"W", "loss", "norm", "selection", "steps", "stop_reason", ...}, ...]}`` in file order
(``K``, ``Q`` for ``--param KQ``; ``p`` (and ``v``) for the prompt parametrisations; ``trajectory``
with ``--record-every``). Every number printed is finite (a non-finite value would be ``null``).

``--alpha SEL`` names the target selection, as ``attsvm solve --alpha`` (:func:`attsvm.selection.parse_alpha`,
also exported as ``attsvm.cli.solve.parse_alpha``; loading by :func:`attsvm.data.load` with that selection):
``opt`` (the file's ``alpha`` if any, else the optimal tokens), ``i0,i1,...`` (one token per input; n*K for
sequence/causal data, row-major; broadcast over a batch, or B*n of them) or a ``.npy``/``.txt``/``.json`` file.
It also admits data with a tie for the optimal token (without it a tie is bad input, and the message says to
pass ``--alpha``). Each run then reports ``selection_matches_alpha``: whether GD's final selection
$\arg\max_ts_{it}$ equals the target in every row (a column ``=alpha`` in the table).

Exit 0 on success; 1 when some run stopped ``non-finite`` (its output is that of its last finite iterate,
and one ``error:`` line names the runs, e.g. ``error: run 0: non-finite values at step 3 (parameters
overflowed; lower --lr or rescale the data)``); 2 on bad input, including data or settings whose scores,
logits or parameters would leave float64 (one ``error:`` line naming the field and the bound).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "gd",
        help="run gradient descent on attention (batched)",
        description="Run GD / normalised GD / mirror descent on W, (K,Q), p or (v,p); batch files run concurrently.",
    )
    p.add_argument("data", metavar="DATA", help="data set file (.npz or .json; a leading batch axis runs them all)")
    p.add_argument("--param", choices=["W", "KQ", "p", "vp"], default="W")
    p.add_argument("--algo", choices=["gd", "ngd", "md"], default="ngd")
    p.add_argument("--q", type=float, default=None, help="l_q potential of mirror descent (q > 1)")
    p.add_argument("--lr", default="0.1", help="step size, or '1/L' for 1/L_W per data set (default 0.1)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--m", type=int, default=None, help="width of K, Q (default d)")
    p.add_argument("--ridge", type=float, default=0.0, help="ridge lambda on the squared parameter norms")
    p.add_argument("--loss", choices=["logistic", "exponential", "correlation"], default="logistic")
    p.add_argument(
        "--alpha", default=None, metavar="SEL", help="target selection: opt | i0,i1,... | FILE (admits tied data)"
    )
    p.add_argument("--init", default="zero", help="zero | random | FILE (.npy array W0/p0, or .npz with W|K,Q|p|v,p)")
    p.add_argument("--init-scale", type=float, default=None, help="scale of the random initialisation (0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--record-every", type=int, default=None, metavar="K", help="record a trajectory every K steps")
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads for the run (default 1; all cores for big batches)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def _lr(text: str) -> Any:
    from ..errors import InputError

    if text == "1/L":
        return text
    try:
        return float(text)
    except ValueError as exc:
        raise InputError(f"--lr must be a number or '1/L', got {text!r}") from exc


def _init(text: str, param: str) -> Any:
    from ..errors import InputError

    if text in ("zero", "random"):
        return text
    path = Path(text)
    if not path.is_file():
        raise InputError(f"--init: {text!r} is neither 'zero', 'random' nor an existing file")
    try:
        if path.suffix.lower() == ".npy":
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as f:
            m = {k: f[k] for k in f.files}
    except Exception as exc:  # unreadable / pickled / not numpy
        raise InputError(f"--init: cannot read {path} as .npy/.npz") from exc
    if param in ("W", "KQ") and set(m) == {"W"}:
        return m["W"]
    if param == "p" and set(m) == {"p"}:
        return m["p"]
    return m


def _num(x: Any) -> float | None:
    """A float for JSON, or None (null) when not finite."""
    x = float(x)
    return x if np.isfinite(x) else None


def _nonfinite_line(res) -> str | None:
    """One line naming every run that stopped ``non-finite`` (at most 5 listed), or None."""
    bad = [b for b in range(res.B) if res.stop_reason[b] == "non-finite"]
    if not bad:
        return None
    parts = [f"run {b}: non-finite values at step {int(res.nonfinite_step[b])} ({res.nonfinite[b]}" for b in bad[:5]]
    more = f"; and {len(bad) - 5} more runs" if len(bad) > 5 else ""
    if len(parts) == 1 and not more:
        return parts[0] + "; lower --lr or rescale the data)"
    return "; ".join(p + ")" for p in parts) + more + " (lower --lr or rescale the data)"


def _tolist(a):
    """Nested lists for JSON (non-finite floats, e.g. corr at W=0, become null)."""
    a = np.asarray(a)
    if a.dtype.kind != "f" or np.all(np.isfinite(a)):
        return a.tolist()
    out = a.astype(object)
    out[~np.isfinite(a)] = None
    return out.tolist()


def run(args: argparse.Namespace) -> int:
    """Run ``attsvm gd`` (module docstring): print the runs; return 0, or 1 when a run stopped non-finite."""
    from ..data import load
    from ..errors import InputError
    from ..gd import run as gd_run
    from ..selection import parse_alpha

    alpha = parse_alpha(args.alpha)
    ds = load(args.data, alpha)
    if args.steps < 0:
        raise InputError(f"--steps must be non-negative, got {args.steps}")
    if args.record_every is not None and args.record_every < 1:
        raise InputError(f"--record-every must be positive, got {args.record_every}")
    if args.threads < 1:
        raise InputError("--threads must be a positive integer")
    if args.algo == "md" and args.q is None:
        raise InputError("--algo md needs --q (the l_q potential, q > 1)")
    res = gd_run(
        ds,
        param=args.param,
        algo=args.algo,
        lr=_lr(args.lr),
        steps=args.steps,
        q=args.q,
        m=args.m,
        ridge=args.ridge,
        loss=args.loss,
        init=_init(args.init, args.param),
        init_scale=args.init_scale,
        seed=args.seed,
        record_every=args.record_every,
        device=args.device,
        dtype=args.dtype,
        threads=args.threads,
    )
    target = None
    if args.alpha is not None:
        sel = np.asarray(ds.flat().alpha)
        target = sel if ds.batched else sel[None]
    runs = []
    for b in range(res.B):
        r: dict[str, Any] = {k: _tolist(v) for k, v in res.params(b).items()}
        r.update(
            loss=_num(res.loss[b]),
            norm=_num(res.norm[b]),
            selection=res.selection[b].tolist(),
            max_softmax=_tolist(res.max_softmax[b]),
            stuck=res.stuck[b].tolist(),
            steps=int(res.steps[b]),
            stop_reason=res.stop_reason[b],
        )
        if target is not None:
            r["selection_matches_alpha"] = bool(np.array_equal(res.selection[b], target[b]))
        if res.trajectory:
            tr = res.trajectory
            r["trajectory"] = {"step": tr["step"].tolist()}
            for k, v in tr.items():
                if k != "step":
                    r["trajectory"][k] = _tolist(v[:, b])
        runs.append(r)
    line = _nonfinite_line(res)
    if args.json:
        out = {"param": args.param, "algo": args.algo, "device": args.device, "seconds": res.seconds, "runs": runs}
        sys.stdout.write(json.dumps(out, allow_nan=False) + "\n")
    else:
        w = sys.stdout.write
        fmt = lambda x: f"{x:>12.6g}" if x is not None else f"{'-':>12}"  # noqa: E731
        col = f" {'=alpha':>6}" if target is not None else ""
        w(f"attsvm gd: param={args.param} algo={args.algo} runs={res.B} ({res.seconds:.2f} s)\n")
        w(f"{'run':>4} {'steps':>7} {'stop':>11} {'loss':>12} {'norm':>12} {'stuck':>5}{col}  selection\n")
        for b, r in enumerate(runs):
            match = f" {str(r['selection_matches_alpha']):>6}" if target is not None else ""
            w(
                f"{b:>4} {r['steps']:>7} {r['stop_reason']:>11} {fmt(r['loss'])} {fmt(r['norm'])} "
                f"{sum(map(bool, r['stuck'])):>5}{match}  {r['selection']}\n"
            )
    if line is not None:
        sys.stdout.flush()
        sys.stderr.write(f"error: {line}\n")
        return 1
    return 0
