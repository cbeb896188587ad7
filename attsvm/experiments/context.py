"""What a spec's ``run`` receives (:class:`Context`): its sizes and options, the device, the progress display, a
timing log, and the run's pool of workers (:meth:`Context.map`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..pool import Pool
from ..progress import Progress


@dataclass
class Context:
    """What a spec's ``run`` receives: its sizes, the device, the progress display and a timing log."""

    name: str
    size: dict[str, Any]
    smoke: bool
    device: str = "cpu"
    progress: Progress = field(default_factory=lambda: Progress("", enabled=False))
    timings: dict[str, float] = field(default_factory=dict)
    workers: int = 1
    errors: dict[str, list[str]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # the spec's OPTIONS, resolved (resolve_options)
    pool: Pool | None = None  # the workers of the run (reproduce); ``workers`` is its size

    @property
    def seeds(self) -> int:
        return int(self.size["seeds"])

    @contextlib.contextmanager
    def timed(self, what: str):
        """Accumulate the wall time of a block into ``timings[what]`` (reported in the manifest)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[what] = self.timings.get(what, 0.0) + time.perf_counter() - t0

    def map(
        self, fn: Callable[[Any], Any], items: Sequence[Any], stage: str, min_items: int | None = None
    ) -> list[Any]:
        """``[fn(x) for x in items]`` with progress, on the run's :class:`~attsvm.pool.Pool` (``pool``).

        Local processes are used when there are at least ``min_items`` items (default ``4 * workers``; fewer run
        here, in a loop); a cluster gets every item. The results are in the order of ``items`` whatever the
        backend (:meth:`attsvm.pool.Pool.map`): the same numbers serially, on processes and on a cluster.
        Without a ``pool`` (a ``Context`` built by hand) a pool of ``workers`` local processes serves this call.

        ``fn`` must be importable by name in a fresh process (a function of :mod:`attsvm`, not of a spec)."""
        items = list(items)
        done = [0]

        def tick(i: int, r: Any) -> None:
            done[0] += 1
            self.progress.update(stage, done[0], len(items))

        pool = self.pool
        if pool is None or pool.kind != "dask":
            threshold = 4 * self.workers if min_items is None else min_items
            if self.workers <= 1 or len(items) < threshold:
                pool = None
            elif pool is None:
                with Pool(self.workers) as own:
                    return own.map(fn, items, on_result=tick)
        if pool is None:
            out = []
            for i, x in enumerate(items):
                out.append(fn(x))
                tick(i, out[-1])
            return out
        return pool.map(fn, items, on_result=tick)
