"""The parallel stages of a spec's ``run``, on the run's pool (:attr:`Context.pool <attsvm.experiments.Context>`):
:func:`call_each` (any function on many arguments, SVM solves reduced to what an experiment needs),
:func:`gd_runs` (GD runs, large batches cut into shards), :func:`fro_batch` (batched Frobenius solves), and the
readers of their results :func:`stack` and :func:`solver_errors`.

Every task is seeded by its inputs and the results are merged in order, so the numbers are the same serially, on
processes and on a cluster."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..data import subset
from ..errors import InfeasibleError, SolverError
from ..userfile import load_module
from .context import Context


def _resolve_fn(dotted: str) -> Callable[..., Any]:
    mod, _, attr = dotted.rpartition(":")
    if mod.endswith(".py"):  # a function of a spec file: the module this process imported last from that file
        # (a forked worker: the parent's, even if the file has changed since), else loaded by path (spawned)
        have = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == mod]
        return getattr(have[-1] if have else load_module(mod, "experiment spec"), attr)
    return getattr(importlib.import_module(mod), attr)


def _trim(res: Any) -> Any:
    """Keep what an experiment needs of an SVM solution (cheap to send between processes)."""
    from ..svm.solution import SVMSolution

    if isinstance(res, SVMSolution):
        return {
            "status": res.status,
            "W": res.W,
            "objective": res.objective,
            "locally_optimal": res.locally_optimal,
            "extra": {k: v for k, v in res.extra.items() if isinstance(v, (np.ndarray, float, int, list, tuple))},
            "certificate": {k: v for k, v in res.certificate.items() if isinstance(v, (bool, int, float, str))},
        }
    return res


def _call_job(job: tuple[str, tuple, dict]) -> Any:
    """Run ``job = (dotted, args, kwargs)``; infeasibility becomes ``{"status": "infeasible"}``."""
    dotted, args, kw = job
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    try:
        return _trim(_resolve_fn(dotted)(*args, **kw))
    except InfeasibleError:
        return {"status": "infeasible", "W": None}
    except (SolverError, np.linalg.LinAlgError, FloatingPointError) as exc:
        msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return {"status": "solver-error", "W": None, "error": msg}


def call_each(ctx: Context, dotted: str, jobs: Sequence[tuple[tuple, dict]], stage: str) -> list[Any]:
    """Call ``dotted`` (``"module:function"``, or ``"path/to/spec.py:function"`` for a function of a spec
    file, e.g. ``f"{__file__}:fn"`` in a spec) on each ``(args, kwargs)``, on ``ctx.workers`` processes.

    SVM solutions are reduced to ``{"status", "W", "objective", "locally_optimal", "extra", "certificate"}``
    (the certificate's scalar entries); an
    :class:`~attsvm.errors.InfeasibleError` gives status ``"infeasible"``, a
    :class:`~attsvm.errors.SolverError` (or a numpy ``LinAlgError`` inside a solver) status ``"solver-error"``
    with the message in ``"error"`` (never a value; experiments count these and report them)."""
    with ctx.timed(stage):
        out = ctx.map(_call_job, [(dotted, a, k) for a, k in jobs], stage)
    errs = solver_errors(out)
    if errs:
        ctx.errors.setdefault(stage, []).extend(errs)
        ctx.progress.note(f"{stage}: {len(errs)} solver failure(s) (not used as values), e.g. {errs[0]}")
    return out


GD_SHARD_ROWS = 1024  # gd_runs: a job's batch with more data sets runs as shards of at most this many


def gd_runs(ctx: Context, jobs: Sequence[dict[str, Any]], stage: str) -> list[Any]:
    """Several :func:`attsvm.gd.run` calls (``{"ds": ..., **kwargs}`` each) on the run's pool, one result per job.

    Each run is batched over its data sets already; running independent runs side by side uses the cores
    that single-threaded torch leaves idle. A job of more than :data:`GD_SHARD_ROWS` data sets is cut into
    shards of consecutive data sets (:func:`attsvm.gd.shards.plan`: as many as that takes, a number that
    depends on the batch alone, never on the pool, so every backend runs the same shards) and merged back
    (:func:`attsvm.gd.shards.combine`), so that a large sweep keeps every worker busy. ``device`` defaults to
    ``ctx.device``; on CUDA the runs stay in this process."""
    from ..gd.shards import combine, plan

    groups, work = [], []
    for j in jobs:
        ds, kw = j["ds"], {"device": ctx.device, **{k: v for k, v in j.items() if k != "ds"}}
        B = ds.batch_size if ds.batched else 1
        pieces = plan(ds, -(-B // GD_SHARD_ROWS), **kw) if B > GD_SHARD_ROWS else [(ds, kw)]
        groups.append(pieces)
        work += [("attsvm.gd:run", (shard,), skw) for shard, skw in pieces]
    with ctx.timed(stage):
        if str(ctx.device).startswith("cuda"):
            out = [_call_job(w) for w in work]
        else:
            out = ctx.map(_call_job, work, stage, min_items=2)
    results, i = [], 0
    for pieces in groups:
        results.append(combine(out[i : i + len(pieces)], pieces))
        i += len(pieces)
    return results


def _fro_chunk(ds) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Batched Frobenius solve; when the batch solver fails, item by item, failures marked (never read)."""
    from ..svm import solve_fro_batch

    bad = (SolverError, np.linalg.LinAlgError, FloatingPointError)
    try:
        fb = solve_fro_batch(ds)
        return np.asarray(fb.W), np.asarray(fb.feasible), []
    except bad:
        pass
    B, d = ds.batch_size, ds.d
    W, ok, errs = np.full((B, d, d), np.nan), np.zeros(B, dtype=bool), []
    for b in range(B):
        try:
            fb = solve_fro_batch(subset(ds, np.array([b])))
            W[b], ok[b] = fb.W[0], bool(fb.feasible[0])
        except bad as exc:
            errs.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return W, ok, errs


def fro_batch(ctx: Context, ds, stage: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`attsvm.svm.solve_fro_batch` of a batched data set, split over ``ctx.workers`` processes:
    ``W`` (B, d, d) (NaN where infeasible) and ``feasible`` (B,). Items where the solver failed count as not
    feasible; their messages accumulate in ``ctx.errors[stage]``."""
    B = ds.batch_size
    k = min(B, 4 * ctx.workers) if ctx.workers > 1 and B >= 64 else 1
    bounds = np.linspace(0, B, k + 1).astype(int)
    parts = [subset(ds, np.arange(a, b)) for a, b in zip(bounds[:-1], bounds[1:])] if k > 1 else [ds]
    with ctx.timed(stage):
        res = ctx.map(_fro_chunk, parts, stage, min_items=2)
    errs = [e for r in res for e in r[2]]
    if errs:
        ctx.errors.setdefault(stage, []).extend(errs)
        ctx.progress.note(f"{stage}: {len(errs)} solver failure(s), e.g. {errs[0]}")
    return np.concatenate([r[0] for r in res]), np.concatenate([r[1] for r in res])


def solver_errors(results: Sequence[Any]) -> list[str]:
    """The messages of the :func:`call_each` results that are solver errors."""
    return [r["error"] for r in results if isinstance(r, dict) and r.get("status") == "solver-error"]


def stack(results: Sequence[Any], shape: tuple[int, ...], key: str = "W") -> tuple[np.ndarray, np.ndarray]:
    """Stack one field of :func:`call_each` results (``"W"`` or a key of ``extra``, e.g. ``"p"``):
    (B, *shape) with NaN where the solve was not optimal, and the (B,) mask of optimal solves."""
    B = len(results)
    out = np.full((B, *shape), np.nan)
    ok = np.zeros(B, dtype=bool)
    for b, r in enumerate(results):
        if isinstance(r, np.ndarray) and key == "W" and r.size == int(np.prod(shape)):
            out[b], ok[b] = r.reshape(shape), True
        elif isinstance(r, dict) and r.get("status") == "optimal":
            val = r.get("W") if key == "W" else r.get("extra", {}).get(key)
            if val is not None and np.size(val) == int(np.prod(shape)):
                out[b] = np.asarray(val, dtype=float).reshape(shape)
                ok[b] = True
    return out, ok
