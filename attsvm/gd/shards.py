r"""A batched GD run split into shards of data sets, run on a :class:`attsvm.pool.Pool`.

:func:`attsvm.gd.run` treats the data sets of a batch independently: run $b$ of the batch depends on data set
$b$ and on row $b$ of every per-run argument (the initial point, the step sizes, the head, the targets) only.
:func:`run_sharded` cuts the batch into contiguous shards $[a_0,a_1),[a_1,a_2),\dots$, runs each shard as a batch
of its own on the pool's workers and concatenates the results in shard order,

.. math:: \mathrm{run\_sharded}(\mathtt{ds})_b = \mathrm{run}(\mathtt{ds}[a_j{:}a_{j+1}])_{b-a_j}
          = \mathrm{run}(\mathtt{ds})_b,\qquad a_j\le b<a_{j+1},

so the result equals ``run(ds, **kwargs)`` on the whole batch bit for bit (every field but ``seconds``; the test
suite checks it for several parametrisations, algorithms and options). The random initial point is drawn once,
for the whole batch, from ``seed`` (:func:`attsvm.gd.initial_params`: data set by data set) and handed to the
shards as an explicit initial point, so a shard starts where its rows of the whole run start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import numpy as np

from ..data import subset
from ..errors import InputError
from ..model import corr
from ..pool import Pool
from .engine import run
from .init import PARAMETERISATIONS, PARAMS, initial_params
from .options import REGRESSION
from .result import GDResult
from .spec import require_trajectory_memory, trajectory_bytes


def run_shard(job: tuple[Any, dict[str, Any]]) -> GDResult:
    """One shard in a worker: ``run(shard, **kwargs)`` for ``job = (shard, kwargs)``."""
    shard, kwargs = job
    return run(shard, **kwargs)


def shard_bounds(B: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous index ranges ``[a, b)`` covering ``0..B-1``, sizes differing by at most one."""
    edges = np.linspace(0, B, shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _rows(x: Any, B: int, ndim: int, a: int, b: int) -> Any:
    """Rows ``a:b`` of a per-run argument given with a leading batch axis (``ndim`` + 1 axes, length B);
    anything else (one value for every run, or malformed: :func:`run` reports it) as it is."""
    if isinstance(x, str) or x is None:
        return x
    arr = np.asarray(x)
    if arr.dtype.kind in "biuf" and arr.ndim == ndim + 1 and arr.shape[0] == B:
        return arr[a:b]
    return x


def _shard_kwargs(kwargs: dict[str, Any], th0: dict[str, np.ndarray], B: int, a: int, b: int) -> dict[str, Any]:
    kw = {k: v for k, v in kwargs.items() if k not in ("seed", "init_scale", "progress")}
    kw["init"] = {k: v[a:b] for k, v in th0.items()}
    kw["lr"] = _rows(kwargs.get("lr", 0.1), B, 0, a, b)
    head = kwargs.get("head")
    if isinstance(head, tuple | list) and len(head) == 2 and head[0] == "relu":
        kw["head"] = (head[0], _rows(head[1], B, 2, a, b))
    if isinstance(head, tuple | list) and len(head) == 2 and head[0] == REGRESSION and len(head[1]) == 2:
        kw["head"] = (head[0], (_rows(head[1][0], B, 3, a, b), _rows(head[1][1], B, 2, a, b)))
    if kwargs.get("targets"):
        shape_nd = 1 if kwargs.get("param", "W") in ("p", "vp") else 2
        kw["targets"] = {k: _rows(t, B, shape_nd, a, b) for k, t in kwargs["targets"].items()}
    return kw


def _trajectory(parts: list[GDResult], targets: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    r"""The shards' trajectories side by side (R, B, ...). A shard whose runs all stopped early has fewer rows
    (:class:`~attsvm.gd.summary.Recorder`); in the whole run those runs stay frozen at their final iterate, so
    its missing rows are the summaries of its final iterate (the fields of its :class:`GDResult`; ``targets``:
    each shard's targets, for the ``corr:NAME`` series)."""
    if not parts[0].trajectory:
        return {}
    longest = max(parts, key=lambda r: len(r.trajectory["step"]))
    R = len(longest.trajectory["step"])
    out: dict[str, list[np.ndarray]] = {k: [] for k in parts[0].trajectory if k != "step"}
    for r, tg in zip(parts, targets):
        tr = r.trajectory
        missing = R - len(tr["step"])
        for key in out:
            rows = tr[key]
            if missing:
                final = _final_summary(r, key, tg)
                rows = np.concatenate([rows, np.broadcast_to(final, (missing, *final.shape))])
            out[key].append(rows)
    merged = {"step": longest.trajectory["step"]}
    merged.update({k: np.concatenate(v, axis=1) for k, v in out.items()})
    return merged


def _final_summary(r: GDResult, key: str, targets: dict[str, Any]) -> np.ndarray:
    """What the recorder writes for the final iterate of the runs of ``r`` (``key`` one of its series)."""
    if key in ("loss", "norm", "selection", "max_softmax", "stuck"):
        return getattr(r, key)
    primary = r.W if PARAMETERISATIONS[r.param].attention else r.p
    if key.startswith("corr:"):  # the recorder's corr (:func:`attsvm.gd.summary.record_row`)
        t = np.asarray(targets[key[5:]], dtype=np.float64)
        return corr(primary, np.broadcast_to(t, primary.shape), ndim=primary.ndim - 1)
    # recorded parameters: W, K, Q, p, v (KQ), k, q (diag: the factors are GDResult.K and .Q)
    return getattr(r, {"k": "K", "q": "Q"}.get(key, key))


def plan(ds: Any, shards: int, **kwargs: Any) -> list[tuple[Any, dict[str, Any]]]:
    """The jobs ``(shard, kwargs)`` of ``run(ds, **kwargs)`` cut into ``shards`` contiguous shards of data sets
    (:func:`shard_bounds`; at most B): each shard's rows of the per-run arguments, and the initial point drawn for
    the whole batch (module docstring). One job ``(ds, kwargs)`` when there is nothing to split (a single data set,
    one shard). Raises :class:`~attsvm.errors.InputError` for a bad initial point (as :func:`run` would)."""
    B = ds.batch_size if getattr(ds, "batched", False) else 1
    k = min(B, int(shards))
    param = kwargs.get("param", "W")
    if k <= 1 or param not in PARAMS:
        return [(ds, kwargs)]
    m = kwargs.get("m")
    th0 = initial_params(
        param, kwargs.get("init", "zero"), B, ds.d, ds.d if m is None else int(m), kwargs.get("seed", 0),
        kwargs.get("init_scale"), kwargs.get("heads"),
    )  # fmt: skip
    return [(subset(ds, slice(a, b)), _shard_kwargs(kwargs, th0, B, a, b)) for a, b in shard_bounds(B, k)]


def combine(parts: list[GDResult], jobs: list[tuple[Any, dict[str, Any]]]) -> GDResult:
    """The :class:`GDResult` of the whole batch from those of the shard ``jobs`` of :func:`plan` (in order):
    :func:`merge` with the shards' trajectories aligned (:func:`_trajectory`)."""
    if len(parts) == 1:
        return parts[0]
    targets = [kw.get("targets") or {} for _, kw in jobs]
    return merge(parts, _trajectory(parts, targets))


def run_sharded(
    ds: Any,
    pool: Pool,
    shards: int | None = None,
    *,
    on_shard: Callable[[int, int], None] | None = None,
    **kwargs: Any,
) -> GDResult:
    """``run(ds, **kwargs)`` (:func:`attsvm.gd.run`) with the data sets of a batched ``ds`` (a
    :class:`~attsvm.data.Dataset` or batched next-token data) split into ``shards`` contiguous shards (default:
    the pool's size; at most B; :func:`plan`) run on ``pool`` and merged in data-set order (:func:`combine`;
    module docstring: the same numbers bit for bit). ``seconds`` is the wall time of the whole; ``settings``
    those of the first shard (the same for all). ``on_shard(done, shards)`` is called here as each shard
    finishes; ``progress`` (a per-step callback of :func:`run`) applies only to a run that is not split (a
    single data set, one shard), which runs here.

    Bad input is reported as :func:`run` reports it for the whole batch (data-set indices of the batch, not of
    a shard): on an :class:`~attsvm.errors.InputError` the whole batch is validated again here."""
    t0 = time.perf_counter()
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise InputError(f"shards must be a positive integer, got {shards!r}")
    if min(pool.size if shards is None else shards, getattr(ds, "batch_size", None) or 1) > 1:
        _require_memory(ds, kwargs)  # outside the try: the whole batch alone might fit, but not twice
    try:
        jobs = plan(ds, pool.size if shards is None else shards, **kwargs)
        if len(jobs) == 1:
            return run(ds, **kwargs)
        done = [0]

        def tick(i: int, r: GDResult) -> None:
            done[0] += 1
            if on_shard is not None:
                on_shard(done[0], len(jobs))

        parts = pool.map(run_shard, jobs, on_result=tick)
    except InputError:
        return run(ds, **kwargs)  # raises the whole batch's error (or, if none, is the whole run)
    return replace(combine(parts, jobs), seconds=time.perf_counter() - t0)


def _require_memory(ds: Any, kwargs: dict[str, Any]) -> None:
    """Refuse (:func:`~attsvm.gd.spec.require_trajectory_memory`) a sharded run whose trajectories, the shards'
    and their concatenation (twice the whole batch's), would not fit in memory; malformed arguments are left to
    :func:`run` to report."""
    steps, every, m = kwargs.get("steps", 2000), kwargs.get("record_every"), kwargs.get("m")
    count = lambda x: isinstance(x, int | np.integer) and not isinstance(x, bool) and x >= 1  # noqa: E731
    targets = kwargs.get("targets") or {}
    param = kwargs.get("param", "W")
    if not (count(steps) and count(every) and (m is None or count(m)) and isinstance(targets, dict)):
        return
    if param not in PARAMS:
        return
    nbytes = trajectory_bytes(
        ds, int(steps), int(every), param=param, m=None if m is None else int(m),
        targets=len(targets), record_params=bool(kwargs.get("record_params", False)),
    )  # fmt: skip
    require_trajectory_memory(2 * nbytes, int(steps), int(every), what="the shards' recorded trajectories, merged")


def merge(parts: list[GDResult], trajectory: dict[str, np.ndarray] | None = None) -> GDResult:
    """The :class:`GDResult` of a batch from those of its consecutive shards: every (B, ...) field and the
    per-run lists concatenated in order, ``param``, ``algo``, ``settings`` and ``kernel`` of the first shard,
    ``seconds`` summed, the ``trajectory`` given (:func:`run_sharded` aligns the shards' rows)."""
    values: dict[str, Any] = {}
    for f in fields(GDResult):
        vals = [getattr(r, f.name) for r in parts]
        if f.name in ("param", "algo", "settings", "kernel"):
            values[f.name] = vals[0]
        elif f.name in ("stop_reason", "nonfinite"):
            values[f.name] = [x for v in vals for x in v]
        elif f.name == "seconds":
            values[f.name] = float(sum(vals))
        elif f.name == "trajectory":
            values[f.name] = {} if trajectory is None else trajectory
        elif vals[0] is None:
            values[f.name] = None
        else:
            values[f.name] = np.concatenate([np.asarray(v) for v in vals], axis=0)
    return GDResult(**values)
