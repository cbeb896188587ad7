r"""``attsvm gd DATA.npz``: run (normalised) gradient descent, normalised steepest descent (``--algo nsd --norm
fro|linf|l1|spec|lq``), Adam, or (normalised) mirror descent on a data set or a batch, with constant or
$\eta_0/\sqrt{k+1}$ step sizes (``--schedule``); the algorithms and their equations are listed in the epilog
(:data:`EPILOG`, ``attsvm gd --help``) and in docs/gd.md.

A batch file (leading axis B) runs all its data sets concurrently; ``-n N`` (or ``auto``) splits it into N
shards of consecutive data sets run on N local processes, ``--cluster SPEC`` on a Dask cluster
(:func:`attsvm.gd.shards.run_sharded`), merged in file order: the serial output, bit for bit
(docs/scale.md); ``--json`` prints
``{"runs": [{"W", "loss", "norm", "selection", "steps", "stop_reason", ...}, ...]}`` in file order
(``K``, ``Q`` for ``--param KQ``; ``p`` (and ``v``) for the prompt parametrisations; ``trajectory``
with ``--record-every``). Every number printed is finite (a non-finite value would be ``null``).

``--alpha SEL`` names the data's selection, as ``attsvm solve --alpha`` (:func:`attsvm.selection.parse_alpha`,
also exported as ``attsvm.cli.solve.parse_alpha``; loading by :func:`attsvm.data.load` with that selection):
``opt`` (the file's ``alpha`` if any, else the optimal tokens), ``i0,i1,...`` (one token per input; n*K for
sequence/causal data, row-major; broadcast over a batch, or B*n of them) or a ``.npy``/``.txt``/``.json`` file.
It also admits data with a tie for the optimal token (without it a tie is bad input, and the message says to
pass ``--alpha``). Each run then reports ``selection_matches_alpha``: whether GD's final selection
$\arg\max_ts_{it}$ equals the target in every row (a column ``=alpha`` in the table).

``--target SEL`` (``opt``: $\arg\max_t\gamma_{it}$ per input, whatever the file's ``alpha``, a tie being bad
input; ``i0,i1,...`` or a file as for ``--alpha``: :func:`attsvm.selection.selection_for`) adds per run
``corr_target`` $=\mathrm{corr}(W,W^{mm}_{\rm target})=\langle W,W^{mm}\rangle/(\|W\|_F\|W^{mm}\|_F)$ and
``corr_final`` (the same with the SVM of the selection GD ended on), with ``target_status`` / ``final_status``
``optimal``, ``infeasible`` (then the corr is null, never a number) or ``solver-error``, plus
``target_selection`` and ``selection_matches_target``. The SVM is the Frobenius Att-SVM for ``--param W``, the
nuclear-norm Att-SVM$^\star$ for ``KQ`` ($W=KQ^\top$) and the prompt SVM $p^{mm}$ for ``p``
(:class:`attsvm.gd.targets.SVMTargets`, one solve per distinct data set and selection). The Att-SVM$^\star$
solution set may
hold more than one point, so ``KQ`` runs also get ``nuc_gap_target`` / ``nuc_gap_final``
(:meth:`attsvm.gd.targets.SVMTargets.compare`), which do not depend on the solver's choice. The table's columns
and the exit
codes are explained in ``attsvm gd --help`` (:data:`EPILOG`). A progress display goes to stderr once a run has
taken ``ATTSVM_PROGRESS_DELAY`` seconds (default 2; :mod:`attsvm.progress`), unless ``--quiet``.

Exit 0 on success (an infeasible ``--target`` SVM included); 1 when some run stopped ``non-finite`` (its output
is that of its last finite iterate, and one ``error:`` line names the runs, e.g. ``error: run 0: non-finite
values at step 3 (parameters overflowed; lower --lr or rescale the data)``) or a ``--target`` SVM solve failed
(the same line names those runs too); 2 on bad input, including data or settings whose scores,
logits or parameters would leave float64 (one ``error:`` line naming the field and the bound) and a
``--record-every`` trajectory that would not fit in memory (refused before anything runs: the estimate,
:data:`OUTPUT_FACTOR` times :func:`attsvm.gd.engine.trajectory_bytes`, against
:func:`attsvm.svm.budget.memory_limit`, with a ``--record-every`` that fits).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .options import add_pool_options

#: peak memory of a recorded run per byte of its recorded arrays: the arrays, the rows as Python lists and the JSON
#: text (measured: ``attsvm gd --record-every 1`` grows by 7.5–9 times the arrays, 10–12 times with ``--json``)
OUTPUT_FACTOR = 12


def _algorithms_text() -> str:
    """The algorithms section of the epilog, written from the registry (:mod:`attsvm.gd.algos`)."""
    from ..gd.algorithm import OPTIONS
    from ..gd.algos import ALGORITHMS
    from ..gd.init import PARAMS

    out = ["algorithms (--algo; every one with --schedule constant lr_k = LR or rsqrt lr_k = LR/sqrt(k+1)):"]
    for a in ALGORITHMS.values():
        lines = a.equation.splitlines()
        if len(a.title) + len(lines[0]) < 100:  # title and first line of the equation on one line
            lines = [f"{a.title}: {lines[0]}", *lines[1:]]
        else:
            lines = [a.title, *lines]
        out += [f"  {a.name:<7}{lines[0]}", *(f"         {x}" for x in lines[1:])]
        opts = ", ".join(OPTIONS[o].flag for o in a.options)
        params = "" if len(a.params) == len(PARAMS) else f"; --param {' and '.join(a.params)} only"
        out.append(f"         options: {opts or 'none'}{params}; independent check: {a.replay}")
    out.append(
        """  (KQ, vp, diag: each factor separately; the header line names the options the algorithm reads, and --json
  gives them under "settings" and the kernel that computed the steps under "kernel": --kernel auto takes the
  compiled CPU kernel "fused" for ngd on W or KQ, linear head, float64 — several times faster, equal to the
  torch kernel to rounding — and the torch kernel "torch" for everything else)
"""
    )
    return "\n".join(out) + "\n"


EPILOG_REST = """\
output columns (one row per run; run b is data set b of the file, in file order):
  run           index of the data set in the file (0 for a single data set)
  steps         updates taken (fewer than --steps when the run stopped early)
  stop          why the run stopped: 'steps' (all --steps taken); 'underflow' (the update is lost in
                floating point for every factor: gd/md reached a fixed point of the float iteration, ngd a
                true stationary point); 'non-finite' (update k+1 overflowed: the row shows the last finite
                iterate, and the exit code is 1)
  loss          training loss (1/N) sum_i l(u_i) at the final iterate (N = inputs, or queries for sequence
                and causal data)
  norm          ||W||_F of the final iterate (W = K Q^T for KQ), ||p|| for p and vp
  stuck         the number of inputs (query rows) GD has locked onto a wrong token: the final selection
                argmax_t s_it is not opt_i (the highest-score token gamma_it; with --alpha on tied data, the
                first tied token) while the softmax is saturated, 1 - max_t s_it < 1e-8 (evaluated as
                log sum_{t != argmax} s_it < log 1e-8, exact far past underflow). Such an input adds only
                ~exp(-c ||W||) to the gradient, so further steps hardly move it: a trap (docs/gd.md).
  =alpha        (with --alpha) the final selection equals the --alpha selection in every row
  corr(target)  (with --target) corr(W, W^mm_target) = <W, W^mm>/(||W||_F ||W^mm||_F), W the final
                iterate and W^mm the SVM solution of the target selection: the Frobenius Att-SVM for
                --param W, the nuclear-norm Att-SVM* for KQ (W = K Q^T), the prompt SVM p^mm for p
                (vectors); 'infeasible' when that SVM is infeasible (Farkas-certified; never a number),
                'solver-err' when the solver failed, '-' when W or W^mm is zero (no direction). The
                Att-SVM* solution set may hold more than one point, so for KQ corr is with the solver's
                point; --json adds nuc_gap_target / nuc_gap_final = ||W||_*/(m(W) OPT_*) - 1 with
                m(W) = min_{i,t} <W, A_it> (0 exactly when W's direction solves Att-SVM*; null when
                m(W) <= 0, i.e. W does not select that selection)
  =target       (with --target) the final selection equals the target selection in every row
  corr(final)   (with --target) the same correlation with the SVM solution of the final selection, the
                selection GD ended on (same rules)
  selection     the final selection argmax_t s_it, one token index per input (query row)
--target costs one SVM solve per distinct (data set, selection) pair (about 1 ms Frobenius, 10 ms nuclear
for n=6, T=8, d=10), so correlations are computed only when it is given. Runs longer than a few seconds
show progress on stderr (one updating line on a terminal, a line per 10% otherwise; the delay before it
appears is ATTSVM_PROGRESS_DELAY seconds, default 2; --quiet turns it off). It never changes the numbers.

exit codes: 0 success (an infeasible target SVM is an answer, shown per run, not an error); 1 some run
stopped non-finite, or an SVM solve for --target failed (one error: line on stderr naming the runs; the
table or JSON is printed first); 2 bad input (one error: line, nothing on stdout).
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    from ..gd.algorithm import OPTIONS
    from ..gd.algos import ALGORITHMS
    from ..gd.engine import KERNELS
    from ..gd.init import PARAMS
    from ..gd.options import LOSSES, SCHEDULES

    p = subparsers.add_parser(
        "gd",
        help="run gradient descent on attention (batched)",
        description="Run GD / normalised GD / normalised steepest descent / Adam / mirror descent on W, (K,Q), p or "
        "(v,p); batch files run concurrently.",
        epilog=_algorithms_text() + EPILOG_REST,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="data set file (.npz or .json; a leading batch axis runs them all)")
    p.add_argument(
        "--param",
        choices=list(PARAMS),
        default="W",
        help="what is trained: W (attention matrix), KQ (W = K Q^T, width --m), p (prompt), vp (head v and "
        "prompt p jointly), diag (diagonal K, Q: W = diag(k * q)), heads (--heads H heads K_h, Q_h whose outputs "
        "add up; W reported = sum_h K_h Q_h^T; --algo gd or ngd), twolayer (layer-1 self-attention W1, layer-2 "
        "attention W2 with the query z and head v; W reported = W2; --freeze, --residual, --causal; --algo gd or "
        "ngd; --init FILE an .npz with W1, W2) (default: %(default)s)",
    )
    p.add_argument(
        "--algo",
        choices=list(ALGORITHMS),
        default="ngd",
        help="; ".join(f"{a.name}: {a.title}" for a in ALGORITHMS.values())
        + " (equations and options below) (default: %(default)s)",
    )
    for o in OPTIONS.values():  # each algorithm option, with the algorithms that read it (the registry)
        who = [a.name for a in ALGORITHMS.values() if o.name in a.options]
        kind: dict[str, Any] = {"choices": list(o.choices)} if o.choices else {"type": o.text}
        shown = o.default if not isinstance(o.default, tuple) else ",".join(map(str, o.default))
        p.add_argument(
            o.flag,
            dest=o.name,
            default=None,
            metavar=o.metavar,
            help=f"--algo {', '.join(who)}: {o.help} (default: {shown})",
            **kind,
        )
    p.add_argument(
        "--schedule",
        choices=list(SCHEDULES),
        default="constant",
        help="step sizes: constant lr_k = LR, or rsqrt lr_k = LR/sqrt(k+1) for update k = 0, 1, ... (every "
        "--algo) (default: %(default)s)",
    )
    p.add_argument(
        "--lr", default="0.1", help="step size eta (a positive number), or '1/L' for 1/L_W of each data set "
        "(default: %(default)s)"
    )  # fmt: skip
    p.add_argument(
        "--steps", type=int, default=2000, metavar="N", help="number of updates per run (default: %(default)s)"
    )
    p.add_argument("--m", type=int, default=None, help="width of K and Q for --param KQ or heads (default: d)")
    p.add_argument(
        "--heads",
        type=int,
        default=None,
        metavar="H",
        help="number of heads of --param heads, a positive integer; ngd --normalize per-factor normalises each "
        "head's K_h, Q_h separately (default: 2)",
    )
    p.add_argument(
        "--freeze",
        choices=["W1", "W2"],
        default=None,
        help="--param twolayer: the layer that takes no step (default: train W1 and W2 jointly)",
    )
    p.add_argument(
        "--residual",
        action="store_true",
        help="--param twolayer: residual layer 1, h = sum_tau s1_tau x_tau + x_t (default: h without x_t)",
    )
    p.add_argument(
        "--causal", action="store_true", help="--param twolayer: causal layer 1, keys tau <= t (default: all keys)"
    )
    p.add_argument(
        "--minibatch",
        type=int,
        default=None,
        metavar="B",
        help="deterministic cyclic mini-batches, every --algo: update k steps on (1/B) sum_{i in B_k} l_i with "
        "B_k = {(k B + j) mod n : j < B}, 1 <= B <= n (n: inputs, or query rows); the loss, records and stops "
        "stay on the full data set; the torch kernel (default: the full batch)",
    )
    p.add_argument(
        "--ridge",
        type=float,
        default=0.0,
        metavar="LAMBDA",
        help="ridge penalty lambda on the squared parameter norms, all factors; the paper's (K,Q) runs use "
        "2.220446049250313e-16, the float64 machine epsilon (default: %(default)s)",
    )
    p.add_argument(
        "--loss",
        choices=list(LOSSES),
        default=None,
        help="l(u): log(1+e^-u), e^-u, -u, or -log u (nll: the next-token loss, -log of the label's attention mass) "
        "(default: logistic; nll for next-token data)",
    )
    p.add_argument(
        "--alpha",
        default=None,
        metavar="SEL",
        help="the data's selection: opt (the file's alpha, else the optimal tokens) | i0,i1,... | FILE; admits "
        "data with a tie for the optimal token, and adds the column =alpha (default: the file's alpha, if any)",
    )
    p.add_argument(
        "--target",
        default=None,
        metavar="SEL",
        help="report corr(W, W^mm) with the SVM of this selection and of the final one: opt (argmax_t gamma_it "
        "per input; a tie is bad input) | i0,i1,... (one token per input, n*K row-major for sequence/causal "
        "data, broadcast over a batch or B*n of them) | FILE (.npy, .json or .txt of integers, same layout) "
        "(default: none, no correlations)",
    )
    p.add_argument(
        "--init",
        default="zero",
        help="initial point: zero | random | linear (PyTorch's nn.Linear default, U(-1/sqrt(d), 1/sqrt(d)) "
        "entrywise, the authors' code) | FILE (.npy array W0/p0, or .npz with W | K,Q | p | v,p) "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--init-scale",
        type=float,
        default=None,
        metavar="S",
        help="standard deviation of the random factors (default: 0.1; also K0 for --init zero with KQ)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the random initialisation (numpy; device-independent) "
        "(default: %(default)s)"
    )  # fmt: skip
    p.add_argument(
        "--record-every",
        type=int,
        default=None,
        metavar="K",
        help="record a trajectory every K steps into the JSON output; a trajectory that would not fit in memory is "
        "refused before the run, with the estimate (default: none)",
    )
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default: %(default)s)")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64", help="(default: %(default)s)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads for the run; more help big batches (default: %(default)s)",
    )
    p.add_argument(
        "--kernel",
        choices=list(KERNELS),
        default="auto",
        help="how the steps are computed: the compiled CPU kernel (fused: ngd on W or (K,Q), linear head, float64), "
        "the torch loop (every algorithm, device and dtype), or auto = fused where it applies; docs/gd.md "
        "(default: %(default)s)",
    )
    add_pool_options(
        p,
        "split a batch file into N shards of data sets run on N local processes, auto = the usable cores; "
        "results merged in file order, see docs/scale.md (default: 1)",
        "the shards",
        " (default: none, no cluster)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress display on stderr (default: shown after 2 s)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout (default: a table)")
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
    from ..gd.init import INITS

    if text in INITS:
        return text
    path = Path(text)
    if not path.is_file():
        raise InputError(f"--init: {text!r} is neither one of {', '.join(INITS)} nor an existing file")
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
    """Run ``attsvm gd`` (module docstring): print the runs; return 0, 1 when a run stopped non-finite or a
    ``--target`` solve failed, 2 (InputError) on bad input."""
    from ..data import load
    from ..errors import InputError
    from ..gd.algorithm import OPTIONS
    from ..gd.shards import run_sharded
    from ..gd.spec import require_trajectory_memory, settings_of, trajectory_bytes
    from ..gd.targets import SVM_OF_PARAM, SVMTargets
    from ..pool import Pool
    from ..progress import Progress, delay_from_env
    from ..selection import parse_alpha, selection_for
    from . import release_warnings

    pool = Pool(args.workers, args.cluster)  # validates -n and --cluster; started below, before any work
    alpha = parse_alpha(args.alpha)
    ds = load(args.data, alpha)
    if args.steps < 0:
        raise InputError(f"--steps must be non-negative, got {args.steps}")
    if args.record_every is not None and args.record_every < 1:
        raise InputError(f"--record-every must be positive, got {args.record_every}")
    if args.threads < 1:
        raise InputError("--threads must be a positive integer")
    settings = settings_of(
        args.algo, args.param, ridge=args.ridge, schedule=args.schedule, minibatch=args.minibatch,
        freeze=args.freeze, residual=args.residual, causal=args.causal,
        **{o: getattr(args, o) for o in OPTIONS if getattr(args, o) is not None},
    )  # fmt: skip
    if args.record_every is not None:  # before anything is allocated or solved
        nbytes = OUTPUT_FACTOR * trajectory_bytes(
            ds, args.steps, args.record_every, param=args.param, m=args.m, heads=args.heads
        )
        what = "the recorded trajectory and its output"
        require_trajectory_memory(nbytes, args.steps, args.record_every, option="--record-every", what=what)
    solver = None
    if args.target is not None:
        if args.param not in SVM_OF_PARAM:
            raise InputError(f"--target is available for --param W, KQ and p, got {args.param}")
        if args.param == "p" and ds.kind not in ("cross", "self"):
            raise InputError(
                f"--target with --param p needs cross- or self-attention data (the prompt SVM), got {ds.kind}"
            )
        tsel = selection_for(ds, args.target, "--target")
        tflat = tsel.reshape(ds.batch_size or 1, -1)  # flat rows, as GD's selection
        solver = SVMTargets(ds, SVM_OF_PARAM[args.param])
    prog = Progress("gd", enabled=not args.quiet, delay=delay_from_env(), min_interval=0.2, eta=True)
    B = ds.batch_size or 1
    stage = f"{B} run{'s' if B != 1 else ''}, steps"
    try:
        with pool:  # a cluster is reached (or refused) before the SVM solves and the runs
            if solver is not None:
                for b in range(B):
                    prog.update("SVM solves (target)", b, B)
                    solver.get(b, tflat[b])
                prog.update("SVM solves (target)", B, B)
            res = run_sharded(
                ds,
                pool,
                on_shard=lambda done, total: prog.update(f"{B} runs in {total} shards", done, total),
                settings=settings,
                param=args.param,
                lr=_lr(args.lr),
                steps=args.steps,
                m=args.m,
                heads=args.heads,
                loss=args.loss,
                init=_init(args.init, args.param),
                init_scale=args.init_scale,
                seed=args.seed,
                record_every=args.record_every,
                device=args.device,
                dtype=args.dtype,
                threads=args.threads,
                kernel=args.kernel,
                progress=prog.stage(stage),  # also shows the first compilation of the fused kernel (no ETA then)
            )
    finally:
        prog.close()  # also on an error or Ctrl-C: no display timer left behind
    release_warnings()  # the data were accepted: their warnings (a near-tie) come before the output
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
        if solver is not None:
            final = res.p[b] if args.param == "p" else res.W[b]
            st, corr, gap = solver.compare(b, tflat[b], final)
            r.update(target_selection=tflat[b].tolist(), target_status=st, corr_target=corr)
            r["selection_matches_target"] = bool(np.array_equal(res.selection[b], tflat[b]))
            prog.update("SVM solves (final selection)", b, res.B)
            st_f, corr_f, gap_f = solver.compare(b, res.selection[b], final)
            r.update(final_status=st_f, corr_final=corr_f)
            if solver.svm == "nuc":
                r.update(nuc_gap_target=gap, nuc_gap_final=gap_f)
        if res.trajectory:
            tr = res.trajectory
            r["trajectory"] = {"step": tr["step"].tolist()}
            for k, v in tr.items():
                if k != "step":
                    r["trajectory"][k] = _tolist(v[:, b])
        runs.append(r)
    if solver is not None:
        prog.update("SVM solves (final selection)", res.B, res.B)
    prog.close()
    lines = [x for x in (_nonfinite_line(res), _solver_line(solver)) if x is not None]
    if args.json:
        out = {"param": args.param, "algo": args.algo, "device": args.device, "seconds": res.seconds}
        if args.param == "heads":
            out["heads"] = int(res.K.shape[1])
        out["settings"] = _settings_json(res.settings)
        out["kernel"] = res.kernel
        if solver is not None:
            out.update(target=args.target, svm=solver.svm)
        out["runs"] = runs
        sys.stdout.write(json.dumps(out, allow_nan=False) + "\n")
    else:
        _table(args, res, runs, target is not None, solver is not None)
    if lines:
        sys.stdout.flush()
        sys.stderr.write(f"error: {'; '.join(lines)}\n")
        return 1
    return 0


#: settings at their defaults that the header line leaves out
QUIET = {("schedule", "constant"), ("ridge", 0.0), ("normalize", "per-factor"), ("grad_eps", 0.0)}


def _settings_json(st) -> dict[str, Any]:
    """The run's :class:`~attsvm.gd.spec.Settings` as JSON (``adam_betas`` a list; ``null`` for unset)."""
    import dataclasses

    d = dataclasses.asdict(st)
    d["adam_betas"] = list(d["adam_betas"])
    return d


def _solver_line(solver: Any) -> str | None:
    """One line naming the runs whose --target SVM solve failed (at most 5 listed), or None."""
    if solver is None or not solver.errors:
        return None
    bad = sorted(solver.errors)
    parts = [f"run {b}: SVM solve failed ({solver.errors[b]})" for b in bad[:5]]
    more = f"; and {len(bad) - 5} more runs" if len(bad) > 5 else ""
    return "; ".join(parts) + more


def _table(args: argparse.Namespace, res, runs: list[dict[str, Any]], alpha: bool, target: bool) -> None:
    """The text table (columns explained in the epilog of ``attsvm gd --help``)."""
    w = sys.stdout.write
    fmt = lambda x: f"{x:>12.6g}" if x is not None else f"{'-':>12}"  # noqa: E731

    def corr(r: dict[str, Any], status: str, value: str) -> str:
        if r[status] == "optimal":
            return f"{r[value]:>12.9f}" if r[value] is not None else f"{'-':>12}"
        return f"{'solver-err' if r[status] == 'solver-error' else r[status]:>12}"

    from ..gd.targets import SVM_OF_PARAM

    svm = {"fro": "Att-SVM (Frobenius)", "nuc": "Att-SVM* (nuclear norm)", "prompt": "prompt SVM"}
    extra = f" target={args.target} svm={svm[SVM_OF_PARAM[args.param]]}" if target else ""
    shown = {"adam_betas": "betas", "adam_eps": "eps"}  # the options the algorithm reads, by their short names
    how = "".join(
        f" {shown.get(k, k)}={','.join(f'{x:g}' for x in v) if isinstance(v, tuple) else v}"
        for k, v in res.settings.read().items()
        if v is not None and (k, v) not in QUIET
    )
    param = f"{args.param} heads={res.K.shape[1]}" if args.param == "heads" else args.param
    w(f"attsvm gd: param={param} algo={args.algo}{how} runs={res.B} ({res.seconds:.2f} s){extra}\n")
    head = f"{'run':>4} {'steps':>7} {'stop':>11} {'loss':>12} {'norm':>12} {'stuck':>5}"
    head += f" {'=alpha':>6}" if alpha else ""
    head += f" {'corr(target)':>12} {'=target':>7} {'corr(final)':>12}" if target else ""
    w(head + "  selection\n")
    for b, r in enumerate(runs):
        row = f"{b:>4} {r['steps']:>7} {r['stop_reason']:>11} {fmt(r['loss'])} {fmt(r['norm'])} "
        row += f"{sum(map(bool, r['stuck'])):>5}"
        row += f" {str(r['selection_matches_alpha']):>6}" if alpha else ""
        if target:
            row += f" {corr(r, 'target_status', 'corr_target')} {str(r['selection_matches_target']):>7}"
            row += f" {corr(r, 'final_status', 'corr_final')}"
        w(row + f"  {r['selection']}\n")
