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
(:class:`TargetSolver`, one solve per distinct data set and selection). The Att-SVM$^\star$ solution set may
hold more than one point, so ``KQ`` runs also get ``nuc_gap_target`` / ``nuc_gap_final``
(:meth:`TargetSolver.compare`), which do not depend on the solver's choice. The table's columns and the exit
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

EPILOG = """\
algorithms (--algo; every one with --schedule constant lr_k = LR or rsqrt lr_k = LR/sqrt(k+1)):
  gd    W_k+1 = W_k - lr_k grad L(W_k)                         (plain float gradient)
  ngd   W_k+1 = W_k - lr_k G/||G||_F, per factor               (log-domain direction G)
  nsd   W_k+1 = W_k - lr_k Delta_k, Delta_k = argmax_{||Delta|| <= 1} <G, Delta> in --norm:
        fro G/||G||_F, linf sign(G), l1 the largest |G_ij| (ties share it evenly), spec U V^T
        (reduced SVD, nonzero singular values only), lq sign(G)|G|^(q*-1)/||G||_q*^(q*-1)
  md    D_k+1 = D_k - lr_k grad L(W_k), D = sign(W)|W|^(q-1), W = sign(D)|D|^(1/(q-1))
  nmd   D_k+1 = D_k - lr_k G/||G||_q*, q* = q/(q-1), same D and W
  adam  m_k = B1 m_k-1 + (1-B1) g_k, v_k = B2 v_k-1 + (1-B2) g_k^2 (entrywise),
        W_k+1 = W_k - lr_k m_k/(1-B1^(k+1)) / (sqrt(v_k/(1-B2^(k+1))) + EPS)
  (KQ, vp: each factor separately; the header line names the norm, q, schedule and Adam settings, and --json
  gives them under "settings" and the kernel that computed the steps under "kernel": --kernel auto takes the
  compiled CPU kernel "fused" for ngd on W or KQ, linear head, float64 — several times faster, equal to the
  torch kernel to rounding — and the torch kernel "torch" for everything else)

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
    p = subparsers.add_parser(
        "gd",
        help="run gradient descent on attention (batched)",
        description="Run GD / normalised GD / normalised steepest descent / Adam / mirror descent on W, (K,Q), p or "
        "(v,p); batch files run concurrently.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="data set file (.npz or .json; a leading batch axis runs them all)")
    p.add_argument(
        "--param",
        choices=["W", "KQ", "p", "vp", "diag"],
        default="W",
        help="what is trained: W (attention matrix), KQ (W = K Q^T, width --m), p (prompt), vp (head v and "
        "prompt p jointly), diag (diagonal K, Q: W = diag(k * q)) (default: %(default)s)",
    )
    p.add_argument(
        "--algo",
        choices=["gd", "ngd", "md", "nsd", "adam", "nmd"],
        default="ngd",
        help="gd: plain gradient descent; ngd: normalised GD (unit-norm steps per factor, direction in the log "
        "domain); md: l_q mirror descent (W and p; needs --q); nsd: normalised steepest descent in --norm "
        "(W_k+1 = W_k - lr_k Delta_k, Delta_k = argmax_{||Delta|| <= 1} <grad, Delta>, per factor; log-domain "
        "direction); adam: bias-corrected Adam (--adam-betas, --adam-eps; scale-safe moments); nmd: normalised "
        "l_q mirror descent, dual D_k+1 = D_k - lr_k grad/||grad||_q* (W and p; needs --q) (default: %(default)s)",
    )
    p.add_argument(
        "--norm",
        choices=["fro", "linf", "l1", "spec", "lq"],
        default=None,
        help="--algo nsd: the norm of the steepest direction: fro G/||G||_F (= ngd), linf sign(G) (entrywise), "
        "l1 the largest-magnitude entry (exact ties share the step evenly), spec U V^T of the reduced SVD "
        "(Muon-like; nonzero singular directions only), lq sign(G)|G|^(q*-1)/||G||_q*^(q*-1) (needs --q) "
        "(default: none; required by --algo nsd)",
    )
    p.add_argument(
        "--q", type=float, default=None, help="q > 1: exponent of the mirror-descent potential ||W||_q^q/q "
        "(--algo md, nmd) or of the l_q norm (--algo nsd --norm lq) (default: none; required there)"
    )  # fmt: skip
    p.add_argument(
        "--schedule",
        choices=["constant", "rsqrt"],
        default="constant",
        help="step sizes: constant lr_k = LR, or rsqrt lr_k = LR/sqrt(k+1) for update k = 0, 1, ... (every "
        "--algo) (default: %(default)s)",
    )
    p.add_argument(
        "--adam-betas",
        default="0.9,0.999",
        metavar="B1,B2",
        help="--algo adam: the moment decay rates, 0 <= B1 < sqrt(B2) < 1 (default: %(default)s)",
    )
    p.add_argument(
        "--adam-eps",
        type=float,
        default=0.0,
        metavar="EPS",
        help="--algo adam: step lr m_hat/(sqrt(v_hat) + EPS); 0 is the algorithm of the theory (the moments are "
        "kept on a running log-scale, so tiny gradients never give 0/0); torch.optim.Adam uses 1e-8 "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--lr", default="0.1", help="step size eta (a positive number), or '1/L' for 1/L_W of each data set "
        "(default: %(default)s)"
    )  # fmt: skip
    p.add_argument(
        "--steps", type=int, default=2000, metavar="N", help="number of updates per run (default: %(default)s)"
    )
    p.add_argument("--m", type=int, default=None, help="width of K and Q for --param KQ (default: d)")
    p.add_argument(
        "--ridge",
        type=float,
        default=0.0,
        metavar="LAMBDA",
        help="ridge penalty lambda on the squared parameter norms, all factors; the paper's (K,Q) runs use "
        "2.220446049250313e-16, the float64 machine epsilon (default: %(default)s)",
    )
    p.add_argument(
        "--normalize",
        choices=["per-factor", "joint"],
        default="per-factor",
        help="--algo ngd with several factors (KQ, vp): normalise each factor's gradient (the paper's code) or "
        "the whole gradient (g_K, g_Q)/||(g_K, g_Q)|| (default: %(default)s)",
    )
    p.add_argument(
        "--grad-eps",
        type=float,
        default=0.0,
        metavar="EPS",
        help="--algo ngd: step eta g/(||g|| + EPS), the authors' normaliser (their EPS is 2.220446049250313e-16) "
        "(default: %(default)s, exactly g/||g||)",
    )
    p.add_argument(
        "--loss",
        choices=["logistic", "exponential", "correlation", "nll"],
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
        choices=["auto", "torch", "fused"],
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


def _betas(text: str) -> tuple[float, float]:
    from ..errors import InputError

    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError(text)
        return float(parts[0]), float(parts[1])
    except ValueError as exc:
        raise InputError(f"--adam-betas must be two numbers B1,B2, got {text!r}") from exc


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


#: the SVM whose solution --target compares with, by --param
SVM_OF_PARAM = {"W": "fro", "KQ": "nuc", "p": "prompt"}


class TargetSolver:
    r"""SVM solutions for ``--target``: the Frobenius Att-SVM $W^{mm}_\alpha$ (``fro``), the nuclear-norm
    Att-SVM$^\star$ (``nuc``) or the prompt SVM $p^{mm}_\alpha$ (``prompt``) of one data set of the batch and a
    selection, each solved once per distinct (data set, selection) pair (:meth:`get`), and the comparison of a
    final iterate with it (:meth:`compare`)."""

    def __init__(self, ds, svm: str):
        self.items = list(ds) if ds.batched else [ds]
        self.svm = svm
        self.cache: dict[tuple[bytes, bytes], tuple[str, np.ndarray | None, float | None]] = {}
        self.errors: dict[int, str] = {}
        self._digest: dict[int, bytes] = {}

    def key(self, b: int, sel: np.ndarray) -> tuple[bytes, bytes]:
        """(digest of data set ``b``'s arrays, selection bytes): equal data sets of a batch share their solves."""
        if b not in self._digest:
            import hashlib

            it = self.items[b]
            h = hashlib.sha256(it.kind.encode())
            for a in (it.X, it.Y, it.Z, it.v):
                h.update(repr(a.shape).encode())
                h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
            self._digest[b] = h.digest()
        return self._digest[b], np.ascontiguousarray(sel, dtype=np.int64).tobytes()

    def get(self, b: int, sel: np.ndarray) -> tuple[str, np.ndarray | None, float | None]:
        r"""``(status, solution, objective)``: ``"optimal"`` with the (d,d) matrix or (d,) vector and its norm
        ($\|W\|_F^2$, $\|W\|_\star$ or $\|p\|^2$); ``"infeasible"`` (Farkas-certified by the solver) or
        ``"solver-error"`` (:class:`~attsvm.errors.SolverError`, first message line in ``errors[b]``) with None."""
        from ..errors import SolverError
        from ..svm import solve
        from ..svm.constraints import program_of

        k = self.key(b, sel)
        if k not in self.cache:
            it = self.items[b]
            sel = np.asarray(sel, dtype=np.int64).reshape(np.shape(it.opt))
            norm = "nuc" if self.svm == "nuc" else "fro"
            program = "prompt" if self.svm == "prompt" else program_of(it.kind)
            try:
                sol = solve(it, sel, norm, program)
            except SolverError as exc:
                self.errors.setdefault(b, str(exc).strip().splitlines()[0] if str(exc).strip() else "solver error")
                self.cache[k] = ("solver-error", None, None)
            else:
                if sol.status != "optimal":
                    self.cache[k] = ("infeasible", None, None)
                else:
                    vec = sol.extra["p"] if self.svm == "prompt" else sol.W
                    self.cache[k] = ("optimal", np.asarray(vec, dtype=np.float64), sol.objective)
        return self.cache[k]

    def compare(self, b: int, sel: np.ndarray, final: np.ndarray) -> tuple[str, float | None, float | None]:
        r"""``(status, corr, nuc_gap)`` of the final iterate against the SVM of selection ``sel``:
        $\mathrm{corr}=\langle W,W^{mm}\rangle/(\|W\|_F\|W^{mm}\|_F)$ (None unless optimal, or at a zero), and for the
        nuclear SVM $\|W\|_\star/(m(W)\,\mathrm{OPT}_\star)-1$ with $m(W)=\min_{i,t\ne\alpha_i}\langle W,A_{it}\rangle$:
        0 exactly when the direction of $W$ solves Att-SVM$^\star$, whose solution set may hold more than one point
        (None when $m(W)\le0$: $W$ does not separate the selection)."""
        status, sol, obj = self.get(b, sel)
        if status != "optimal" or sol is None:
            return status, None, None
        import torch

        from ..gd import corr_t

        t = lambda x: torch.as_tensor(np.asarray(x, dtype=np.float64)[None])  # noqa: E731
        corr = _num(corr_t(t(final), t(sol))[0])
        gap = None
        if self.svm == "nuc" and obj is not None and obj > 0:
            from ..norms import frobenius_norm, nuclear_norm
            from ..svm.constraints import build

            scale = frobenius_norm(final)
            it = self.items[b]
            cons = build(it, np.asarray(sel, dtype=np.int64).reshape(np.shape(it.opt)))
            if scale > 0 and np.isfinite(scale) and cons.m > 0:
                Wn = np.asarray(final, dtype=np.float64) / scale
                with np.errstate(all="ignore"):
                    m = float(np.min(cons.margins(Wn)))
                if m > 0 and np.isfinite(m):
                    gap = _num(nuclear_norm(Wn) / (m * obj) - 1.0)
        return status, corr, gap


def run(args: argparse.Namespace) -> int:
    """Run ``attsvm gd`` (module docstring): print the runs; return 0, 1 when a run stopped non-finite or a
    ``--target`` solve failed, 2 (InputError) on bad input."""
    from ..data import load
    from ..errors import InputError
    from ..gd.shards import run_sharded
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
    if args.algo in ("md", "nmd") and args.q is None:
        raise InputError(f"--algo {args.algo} needs --q (the l_q potential, q > 1)")
    if args.algo == "nsd" and args.norm is None:
        raise InputError("--algo nsd needs --norm (fro, linf, l1, spec or lq)")
    if args.norm is not None and args.algo != "nsd":
        raise InputError(f"--norm applies to --algo nsd only, got --algo {args.algo}")
    if args.algo == "nsd" and args.norm == "lq" and args.q is None:
        raise InputError("--norm lq needs --q (q > 1)")
    if args.q is not None and not (args.algo in ("md", "nmd") or args.norm == "lq"):
        raise InputError("--q applies to --algo md, nmd and to --algo nsd --norm lq only")
    betas = _betas(args.adam_betas)
    if args.algo != "adam" and (betas != (0.9, 0.999) or args.adam_eps != 0.0):
        raise InputError("--adam-betas and --adam-eps apply to --algo adam only")
    if args.record_every is not None:  # before anything is allocated or solved
        from ..gd.engine import require_trajectory_memory, trajectory_bytes

        nbytes = OUTPUT_FACTOR * trajectory_bytes(ds, args.steps, args.record_every, param=args.param, m=args.m)
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
        solver = TargetSolver(ds, SVM_OF_PARAM[args.param])
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
                param=args.param,
                algo=args.algo,
                lr=_lr(args.lr),
                steps=args.steps,
                q=args.q,
                m=args.m,
                ridge=args.ridge,
                normalize=args.normalize,
                grad_eps=args.grad_eps,
                norm=args.norm,
                schedule=args.schedule,
                adam_betas=betas,
                adam_eps=args.adam_eps,
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


def _settings_json(st) -> dict[str, Any]:
    """The run's :class:`~attsvm.gd.settings.Settings` as JSON (``adam_betas`` a list; ``null`` for unset)."""
    import dataclasses

    d = dataclasses.asdict(st)
    d["adam_betas"] = list(d["adam_betas"])
    return d


def _solver_line(solver: TargetSolver | None) -> str | None:
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

    svm = {"fro": "Att-SVM (Frobenius)", "nuc": "Att-SVM* (nuclear norm)", "prompt": "prompt SVM"}
    extra = f" target={args.target} svm={svm[SVM_OF_PARAM[args.param]]}" if target else ""
    st = res.settings
    how = "".join(
        f" {k}={v}"
        for k, v in (
            ("norm", st.norm),
            ("q", st.q),
            ("schedule", None if st.schedule == "constant" else st.schedule),
            ("betas", f"{st.adam_betas[0]:g},{st.adam_betas[1]:g}" if st.algo == "adam" else None),
            ("eps", f"{st.adam_eps:g}" if st.algo == "adam" else None),
        )
        if v is not None
    )
    w(f"attsvm gd: param={args.param} algo={args.algo}{how} runs={res.B} ({res.seconds:.2f} s){extra}\n")
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
