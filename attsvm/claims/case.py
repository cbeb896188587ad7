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

A case has a ``precision``: ``"float64"`` (search, empirical runs), ``"ball"`` (the automatic confirmation's
rigorous re-run in arb balls of ``prec`` bits) or ``"mp"`` (its high-precision fallback at ``dps`` digits);
``case.kit`` is the :mod:`attsvm.kit` of that precision, so a conclusion written against it is evaluated in all
three without a second implementation.

**A confirming case has no float64 data.** In a ball or mp case (:attr:`Case.confirming`) ``case.data`` is a
:class:`ConfirmingData` view whose number arrays (``X``, ``Y``, ``Z``, ``v``, ``scores``) are arrays of the
confirming precision, the draws (``draw_matrix``, ``draw_float``, recorded floats of ``draw``) come back in that
precision, and ``case.kit`` is *strict* (it rejects a float that looks computed: :class:`attsvm.kit.Bypass`). A
numpy float64 computation on the data therefore stays in the confirming precision or fails, and a conclusion
that computes in float64 anyway cannot hand its result to the kit: the failure stays unconfirmed.

**Constants are strict.** ``case.hypotheses`` is a :class:`Constants` mapping of the claim's hypotheses and
``params``: reading a key that the claim did not declare raises :class:`UndeclaredConstant` (also through
``.get(key, default)``: a default never stands in for a misspelt name), and the run records which ``params`` were
read, so that a declared constant that is never read is reported as an error in the claim
(:meth:`Constants.unread`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..data import Dataset


def _exact_vector(x: Any) -> list[Any]:
    """The entries of ``x`` flattened, exactly: a ball by its (exact, dyadic) midpoint, an mpf by its binary value,
    others as they are (floats are exact binary numbers)."""
    from fractions import Fraction

    import mpmath

    out = []
    for v in np.asarray(x, dtype=object).reshape(-1):
        if type(v).__name__ == "arb":
            man, exp = v.mid().man_exp()
            out.append(Fraction(int(man)) * Fraction(2) ** int(exp))
        elif isinstance(v, mpmath.mpf):
            sign, man, exp, _ = v._mpf_
            out.append(Fraction((-1) ** sign * int(man)) * Fraction(2) ** int(exp))
        else:
            out.append(v)
    return out


class ReplayError(RuntimeError):
    """A replayed case asked for a draw that was not recorded (or of another kind)."""


class UndeclaredConstant(Exception):
    """A conclusion read a constant its claim does not declare (a misspelt name, a missing ``params`` entry)."""


class Constants(Mapping):
    """The strict, read-tracking mapping behind ``case.hypotheses`` (module docstring).

    ``values``: the hypotheses and the claim's constants; ``params``: the names of the claim's own constants
    (whose reads are recorded). Every case of one claim run shares one ``Constants`` (:meth:`for_case`), so the
    reads of the search, the confirmation and the replays add up. An undeclared read is remembered too
    (``undeclared``), so a claim that catches the exception is still reported."""

    def __init__(self, values: Mapping[str, Any] | None = None, params: Any = ()) -> None:
        self._values = dict(values or {})
        self.params = tuple(params)
        self.read: set[str] = set()
        self.undeclared: list[str] = []

    def _miss(self, key: Any) -> UndeclaredConstant:
        self.undeclared.append(str(key))
        return UndeclaredConstant(self._miss_text(str(key)))

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            raise self._miss(key)
        self.read.add(key)
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        """Like ``[key]``: an undeclared key is an error even with a default (module docstring)."""
        return self[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self):
        self.read.update(self._values)  # handing every constant on reads them all
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Constants({self._values!r})"

    def unread(self) -> list[str]:
        """The claim's own constants (``params``) that no case read."""
        return [k for k in self.params if k not in self.read]

    def problem(self, also_read: Any = (), decided: bool = True) -> str | None:
        """The error in the claim this run's reads show (None when there is none): an undeclared read first, then
        the ``params`` never read (names in ``also_read`` count as read; not asked when no case was ``decided``:
        every case stopped at a premise, before the conclusion reads its params)."""
        if self.undeclared:
            return self._miss_text(self.undeclared[0])
        unread = [k for k in self.unread() if k not in set(also_read)] if decided else []
        if unread:
            names = ", ".join(repr(k) for k in unread)
            return f"declared constant{'s' if len(unread) > 1 else ''} {names} never read (a misspelt name?)"
        return None

    def _miss_text(self, key: str) -> str:
        known = ", ".join(sorted(map(str, self._values))) or "none"
        return f"case.hypotheses[{key!r}]: the claim declares no constant {key!r} (declared: {known})"

    @staticmethod
    def for_case(hypotheses: Any) -> Constants:
        """``hypotheses`` as a :class:`Constants` (a ``Constants`` is shared as it is, a dict is wrapped)."""
        return hypotheses if isinstance(hypotheses, Constants) else Constants(hypotheses)


FLOAT_FIELDS = ("X", "Y", "Z", "v", "scores")  # a data set's number arrays
FLOAT64_METHODS = ("flat", "to_dict", "save")  # give float64 arrays: not available on a confirming view


class ConfirmingData:
    """A :class:`~attsvm.data.Dataset` seen in a confirming precision (module docstring): ``X``, ``Y``, ``Z``, ``v``,
    ``scores`` are arrays of ``kit``'s precision (float64 values taken exactly), ``raw`` is the data set itself
    (what :mod:`attsvm.kit`'s helpers use), everything else (sizes, ``kind``, ``selection``, masks, tokens) is the
    data set's."""

    def __init__(self, raw: Dataset, kit: Any) -> None:
        self.raw = raw
        self._kit = kit
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in FLOAT_FIELDS:
            if name not in self._cache:
                val = getattr(self.raw, name)
                self._cache[name] = None if val is None else self._kit.exact(val)
            return self._cache[name]
        if name in FLOAT64_METHODS:
            raise AttributeError(
                f"case.data.{name}() gives float64 arrays: while confirming use case.kit (k.data(case.data))"
            )
        if name == "with_alpha":
            return lambda alpha: ConfirmingData(self.raw.with_alpha(alpha), self._kit)
        return getattr(self.raw, name)

    def __repr__(self) -> str:
        return f"ConfirmingData({self.raw!r}, {self._kit!r})"


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
        prec: int | None = None,
        runs: int | None = None,
    ) -> None:
        self.precision = precision
        self.dps = dps
        self.prec = prec
        self._data = data
        self.batch = batch
        self.hypotheses = Constants.for_case(hypotheses)
        self.seed = int(seed)
        self.device = device
        self.budget = float(budget)
        self.index = int(index)
        #: empirical claims: the number of runs of the sweep (the batch's size; ``Outcome.runs`` has this length)
        self.runs = None if runs is None else int(runs)
        #: while proving (:mod:`attsvm.prove.statement`): ``prover(region, shape)`` gives :meth:`param`'s value
        self.prover: Any = None
        self._hd = hypothesis_data
        self._replay = None if replay is None else list(replay)
        self._cursor = 0
        self.draws: list[Any] = []  # values drawn by the conclusion, in order
        self._rng: np.random.Generator | None = None
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
    def confirming(self) -> bool:
        """Whether this case re-runs a conclusion in a confirming precision (``"ball"`` or ``"mp"``)."""
        return self.precision != "float64"

    @property
    def kit(self) -> Any:
        """The helpers of :mod:`attsvm.kit` in this case's precision: float64 while searching; when the automatic
        confirmation re-runs the conclusion, the strict ball kit (``prec`` bits) or mpmath kit (``dps`` digits)."""
        from .. import kit

        if self.precision == "float64":
            return kit.FLOAT64
        size = self.prec if self.precision == "ball" else self.dps
        return kit.for_precision(self.precision, size, strict=True)

    @property
    def data(self) -> Any:
        """The data set (universal claims): a :class:`~attsvm.data.Dataset`, or in a confirming case its
        :class:`ConfirmingData` view."""
        if self._data is None or not self.confirming:
            return self._data
        if not isinstance(self._data, ConfirmingData):
            self._data = ConfirmingData(self._data, self.kit)
        return self._data

    @property
    def raw_data(self) -> Dataset | None:
        """The data set as stored (float64), whatever the precision (for reports and counterexample files)."""
        return getattr(self._data, "raw", self._data)

    def replayed(self, precision: str = "float64", dps: int | None = None, prec: int | None = None) -> Case:
        """A fresh case with the same data and the draws of this one, replayed in order (in ``precision``)."""
        return Case(
            precision=precision,
            dps=dps,
            prec=prec,
            data=self.raw_data,
            batch=self.batch,
            hypotheses=self.hypotheses,
            seed=self.seed,
            device=self.device,
            budget=self.budget,
            index=self.index,
            replay=list(self.draws),
            runs=self.runs,
        )

    def _next_recorded(self) -> Any:
        if self._cursor >= len(self._replay):
            raise ReplayError(f"replay asked for draw #{self._cursor + 1}, only {len(self._replay)} recorded")
        val = self._replay[self._cursor]
        self._cursor += 1
        self.draws.append(val)
        return val

    def _exact(self, val: Any) -> Any:
        """A recorded float draw in the confirming precision (float64 values taken exactly); others unchanged."""
        if not self.confirming:
            return val
        if isinstance(val, (float, np.floating)) or (isinstance(val, np.ndarray) and val.dtype.kind == "f"):
            return self.kit.exact(val)
        return val

    # ------------------------------------------------------------------ draws
    def draw(self, strategy: Any) -> Any:
        """Draw from a Hypothesis strategy (universal claims; recorded for replay)."""
        if self._replay is not None:
            return self._exact(self._next_recorded())
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
            return self._exact(val)
        self._live()
        if self._hd is None:
            val = self.rng().uniform(-scale, scale, size=(rows, cols))
            self.draws.append(val)
            return val
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp

        el = st.floats(-scale, scale, allow_nan=False, allow_infinity=False, width=64)
        return self.draw(hnp.arrays(np.float64, (rows, cols), elements=el))

    def param(self, region: Any = None, direction: Any = None, shape: tuple[int, ...] | None = None) -> np.ndarray:
        r"""The parameter the claim quantifies over, $\theta\in\mathcal R$, as a (d, d) array (region statements,
        :mod:`attsvm.prove`), or of ``shape`` (e.g. ``(1,)`` for a radius $r$ in ``box:R,R1``).

        ``region``: a :class:`attsvm.prove.regions.Region` or a spec (``"ball:3"``, ``"annulus:1,5"``,
        ``"cone:MU,R,R1"``, ``"box:LO,HI"``); default the claim's ``hypotheses["region"]``. ``direction``: the
        cone's axis $W^\circ$ (taken exactly: a ball by its midpoint). While searching (and in empirical runs) a
        float64 point drawn in the region (shrinkable, recorded); in a replay the recorded point; while proving, the
        prover's box — jets on the box, or balls at its centre."""
        from ..prove.regions import Region, parse

        spec = self.hypotheses["region"] if region is None else region
        raw = self.raw_data
        if raw is None:
            raise ValueError("case.param needs a data set (the region's dimension is d*d)")
        shape = (int(raw.d), int(raw.d)) if shape is None else tuple(int(x) for x in shape)
        if isinstance(spec, Region):
            reg = spec
        else:
            axis = None if direction is None else _exact_vector(direction)
            reg = parse(str(spec), int(np.prod(shape)), direction=axis, shape=shape)
        if self.prover is not None:
            return self.prover(reg, shape)
        return np.asarray(reg.draw(self, shape))

    def draw_float(self, lo: float, hi: float) -> float:
        """A float in [lo, hi] (shrinks towards simple numbers)."""
        if self._replay is not None:
            return self._exact(float(self._next_recorded()))
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
        ds = self.batch if self.batch is not None else self.raw_data
        shape = None if ds is None else ds.X.shape
        return f"Case({what}={shape}, seed={self.seed}, mode={self.mode}, draws={len(self.draws)})"
