r"""The case a claim's conclusion is evaluated on.

A :class:`Case` carries the generated data (``data`` for universal claims, ``batch`` for empirical
ones), the claim's hypotheses, the seed, the device and the budget scale, and lets the conclusion draw
further values (a matrix $W$, a radius, a head $V$). Draws are *recorded* in order, so that a failing
case can be re-evaluated exactly (by the confirmer, or later by ``attsvm check --replay``): a case built
with ``replay=[...]`` returns the recorded values instead of drawing new ones.

Three modes:

* ``search`` — inside Hypothesis: draws go through ``data.draw`` (shrinkable);
* ``replay`` — draws return recorded values (confirmation, ``--replay``);
* ``empirical`` — no Hypothesis: ``draw_matrix``/``draw_float`` use the seeded :meth:`rng`;
  :meth:`draw` of a Hypothesis strategy is an error.

A case pickles (``attsvm check -n N`` sends results back from worker processes): its data, batch, recorded
draws, seed and index travel, the Hypothesis data of a search case does not (it cannot be pickled and is spent
once the search is over). Such a *spent* search case is a record: it reads and replays (:meth:`replayed`) like
the original, and a new draw from it is an error.

A case has a ``precision``: ``"float64"`` (search, empirical runs) or ``"mp"`` (the automatic confirmation
replays the case at ``dps`` digits); ``case.kit`` is the :mod:`attsvm.kit` of that precision, so a conclusion
written against it is evaluated in both without a second implementation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data import Dataset


class ReplayError(RuntimeError):
    """A replayed case asked for a draw that was not recorded (or of another kind)."""


class Case:
    """One generated case (see module docstring)."""

    def __init__(
        self,
        *,
        data: Dataset | None = None,
        batch: Dataset | None = None,
        hypotheses: dict[str, Any] | None = None,
        seed: int = 0,
        device: str = "cpu",
        budget: float = 1.0,
        index: int = 0,
        hypothesis_data: Any = None,
        replay: list[Any] | None = None,
        precision: str = "float64",
        dps: int | None = None,
    ) -> None:
        self.data = data
        self.batch = batch
        self.hypotheses = dict(hypotheses or {})
        self.seed = int(seed)
        self.device = device
        self.budget = float(budget)
        self.index = int(index)
        self._hd = hypothesis_data
        self._replay = None if replay is None else list(replay)
        self._cursor = 0
        self.draws: list[Any] = []  # values drawn by the conclusion, in order
        self._rng: np.random.Generator | None = None
        self.precision = precision
        self.dps = dps
        self._spent = False  # a search case whose Hypothesis data stayed behind (unpickled: __getstate__)

    def __getstate__(self) -> dict[str, Any]:
        """The state that pickles: everything but the Hypothesis data (module docstring)."""
        state = dict(self.__dict__)
        state["_spent"] = self._spent or self._hd is not None
        state["_hd"] = None
        return state

    def _live(self) -> None:
        if self._spent:
            raise RuntimeError("this search case came from another process without its Hypothesis data: use replayed()")

    # ------------------------------------------------------------------ mode
    @property
    def mode(self) -> str:
        if self._replay is not None:
            return "replay"
        if self._hd is not None or self._spent:
            return "search"
        return "empirical"

    @property
    def kit(self) -> Any:
        """The helpers of :mod:`attsvm.kit` in this case's precision: float64 while searching, mpmath (``dps``
        digits) when the automatic confirmation re-runs the conclusion."""
        from .. import kit

        return kit.for_precision(self.precision, self.dps or kit.CONFIRM_DPS[0])

    def replayed(self, precision: str = "float64", dps: int | None = None) -> Case:
        """A fresh case with the same data and the draws of this one, replayed in order (in ``precision``)."""
        return Case(
            precision=precision,
            dps=dps,
            data=self.data,
            batch=self.batch,
            hypotheses=self.hypotheses,
            seed=self.seed,
            device=self.device,
            budget=self.budget,
            index=self.index,
            replay=list(self.draws),
        )

    def _next_recorded(self) -> Any:
        if self._cursor >= len(self._replay):
            raise ReplayError(f"replay asked for draw #{self._cursor + 1}, only {len(self._replay)} recorded")
        val = self._replay[self._cursor]
        self._cursor += 1
        self.draws.append(val)
        return val

    # ------------------------------------------------------------------ draws
    def draw(self, strategy: Any) -> Any:
        """Draw from a Hypothesis strategy (universal claims; recorded for replay)."""
        if self._replay is not None:
            return self._next_recorded()
        self._live()
        if self._hd is None:
            raise RuntimeError("case.draw(strategy) needs a universal claim (empirical claims: use case.rng())")
        val = self._hd.draw(strategy)
        self.draws.append(val)
        return val

    def draw_matrix(self, rows: int, cols: int, scale: float = 3.0) -> np.ndarray:
        r"""A float64 (rows, cols) matrix with entries in $[-\mathrm{scale},\mathrm{scale}]$, shrinking to 0."""
        if self._replay is not None:
            val = np.asarray(self._next_recorded(), dtype=np.float64)
            if val.shape != (rows, cols):
                raise ReplayError(f"replayed matrix has shape {val.shape}, expected {(rows, cols)}")
            return val
        self._live()
        if self._hd is None:
            val = self.rng().uniform(-scale, scale, size=(rows, cols))
            self.draws.append(val)
            return val
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp

        el = st.floats(-scale, scale, allow_nan=False, allow_infinity=False, width=64)
        return self.draw(hnp.arrays(np.float64, (rows, cols), elements=el))

    def draw_float(self, lo: float, hi: float) -> float:
        """A float in [lo, hi] (shrinks towards simple numbers)."""
        if self._replay is not None:
            return float(self._next_recorded())
        self._live()
        if self._hd is None:
            val = float(self.rng().uniform(lo, hi))
            self.draws.append(val)
            return val
        from hypothesis import strategies as st

        return float(self.draw(st.floats(lo, hi, allow_nan=False, allow_infinity=False)))

    def draw_int(self, lo: int, hi: int) -> int:
        """An int in [lo, hi] (shrinks towards lo)."""
        if self._replay is not None:
            return int(self._next_recorded())
        self._live()
        if self._hd is None:
            val = int(self.rng().integers(lo, hi + 1))
            self.draws.append(val)
            return val
        from hypothesis import strategies as st

        return int(self.draw(st.integers(lo, hi)))

    def rng(self) -> np.random.Generator:
        """A numpy generator seeded from ``(seed, index)`` (the same object for the whole case)."""
        if self._rng is None:
            self._rng = np.random.default_rng([self.seed, self.index])
        return self._rng

    def torch_generator(self):
        """A ``torch.Generator`` seeded from ``(seed, index)`` on ``device``."""
        import torch

        g = torch.Generator(device=self.device)
        g.manual_seed(self.seed * 1_000_003 + self.index)
        return g

    def scaled(self, n: int, minimum: int = 1) -> int:
        """``n`` scaled by the budget (at least ``minimum``): steps, runs, grid sizes."""
        return max(int(minimum), int(round(n * self.budget)))

    def __repr__(self) -> str:
        what = "batch" if self.batch is not None else "data"
        ds = self.batch if self.batch is not None else self.data
        shape = None if ds is None else ds.X.shape
        return f"Case({what}={shape}, seed={self.seed}, mode={self.mode}, draws={len(self.draws)})"
