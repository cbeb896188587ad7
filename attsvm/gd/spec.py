r"""A GD run as a declared object, as plain data (numpy; no torch): :class:`Settings` (how a step is taken),
validated once by :func:`settings_of` — used by :func:`attsvm.gd.run`, ``attsvm gd`` and the 50-digit replay
:func:`attsvm.highprec.replay` — and :class:`Job` (a validated run, :func:`prepare`), which a kernel of
:mod:`attsvm.gd.engine` computes into a :class:`~attsvm.gd.result.GDResult`.

The algorithms and the options each reads are declared in :mod:`attsvm.gd.algos`
(:class:`~attsvm.gd.algorithm.Algorithm`, :data:`~attsvm.gd.algorithm.OPTIONS`); every algorithm takes the
``schedule`` (:data:`~attsvm.gd.options.SCHEDULES`) and the ``ridge``; an option an algorithm does not read must keep
its default (a value given for it is refused, naming the algorithms that read it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..data import Dataset
from ..errors import InputError
from .algorithm import OPTIONS, Algorithm, finite_number
from .algos import ALGORITHMS, ALGOS
from .init import FREEZABLE, LAYERED_PARAMS, PARAMETERISATIONS, PARAMS, heads_of, initial_params
from .options import LOSSES, NTP_LOSS, NTP_SQUARE, SCHEDULES
from .ranges import check_ranges

#: the dtypes of a run, by name
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Settings:
    r"""How a step is taken (fixed during a run); validated by :func:`settings_of`.

    ``algo``: one of :data:`~attsvm.gd.algos.ALGOS` (its equation and options: :mod:`attsvm.gd.algos`).
    ``schedule``: :data:`~attsvm.gd.options.SCHEDULES` (:func:`~attsvm.gd.steps.step_size`). ``ridge``
    $\lambda$: the penalty $\lambda\sum_k\|\theta_k\|_F^2$ (the paper's $(K,Q)$ runs use
    $\lambda=\varepsilon_{64}=2^{-52}$). The algorithm options (:data:`~attsvm.gd.algorithm.OPTIONS`):
    ``normalize`` and ``grad_eps`` $\epsilon\ge0$ (``ngd``: ``"per-factor"`` $\theta_k\leftarrow\theta_k-\eta\,
    g_k/(\|g_k\|_F+\epsilon)$ or ``"joint"`` $\theta_k\leftarrow\theta_k-\eta\,g_k/(\|g\|+\epsilon)$; the authors'
    $\epsilon$ is $2^{-52}$); ``q`` (the $\ell_q$ potential of ``md`` / ``nmd``, the exponent of ``nsd`` with
    ``norm="lq"``); ``norm`` (``nsd``); ``adam_betas`` $(\beta_1,\beta_2)$, $0\le\beta_1<\sqrt{\beta_2}<1$, and
    ``adam_eps`` $\epsilon\ge0$ (``adam``; default 0, the $\epsilon\to0$ algorithm of the theory;
    ``torch.optim.Adam`` uses $10^{-8}$); ``momentum`` $\beta\in[0,1)$ (``signum``, ``muon``).

    ``minibatch`` $b$ (every algorithm; ``None``, the default: the full batch): update $k=0,1,\dots$ is the
    algorithm's step on the mini-batch loss of the cyclic, deterministic batch $B_k$ (:func:`batch_rows`),

    .. math:: \mathcal L_k(\theta)=\frac1b\sum_{i\in B_k}\ell_i(\theta),\qquad
              B_k=\{(kb+j)\bmod n:\ j=0,\dots,b-1\},

    instead of $\mathcal L(\theta)=\frac1n\sum_{i=1}^n\ell_i(\theta)$, $1\le b\le n$ ($n$ the flat rows of the
    data set: the inputs, the (input, query) rows of sequence / causal data, the rows of next-token data; $b=n$ is
    the full batch exactly). Only the step uses $B_k$: the records (loss, norm, selection, ...) and the stop rules
    are on the full data set; the ``underflow`` stop (a fixed point) needs the update lost for a whole period of
    $n/\gcd(n,b)$ consecutive updates (every batch of the cycle). The torch kernel only (``kernel="fused"`` is
    refused).

    The two-layer model (``param="twolayer"``, :mod:`attsvm.twolayer`; refused for every other parameterisation):
    ``freeze`` ``None`` (train $W_1,W_2$ jointly), ``"W1"`` or ``"W2"`` (that factor takes no step: its gradient
    is taken as exactly 0, so ``ngd`` normalises the other alone, per factor and joint alike; no ridge);
    ``residual`` $\rho=1$ ($h=\bar h+x$); ``causal`` (layer-1 keys $\tau\le t$). ``twolayer`` runs ``gd`` and
    ``ngd``, full batch."""

    algo: str = "ngd"
    ridge: float = 0.0
    q: float | None = None
    normalize: str = "per-factor"
    grad_eps: float = 0.0
    norm: str | None = None
    schedule: str = "constant"
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 0.0
    momentum: float = 0.9
    minibatch: int | None = None
    freeze: str | None = None
    residual: bool = False
    causal: bool = False

    @property
    def algorithm(self) -> Algorithm:
        """The declared :class:`~attsvm.gd.algorithm.Algorithm`."""
        return ALGORITHMS[self.algo]

    def read(self) -> dict[str, Any]:
        """The options this run's algorithm reads, then ``schedule`` and ``ridge`` (for reports: the others are at
        their defaults and mean nothing for it)."""
        names = (*self.algorithm.options, "schedule", "ridge", "minibatch")
        out = {n: getattr(self, n) for n in names}
        out.update({n: getattr(self, n) for n in MODEL_FIELDS if getattr(self, n) != MODEL_DEFAULTS[n]})
        return out


#: the settings fields (in order) and the keyword arguments :func:`settings_of` takes
SETTINGS_FIELDS = tuple(f.name for f in fields(Settings))
#: the settings of the two-layer model (:class:`Settings`), with their defaults
MODEL_DEFAULTS: dict[str, Any] = {"freeze": None, "residual": False, "causal": False}
MODEL_FIELDS = tuple(MODEL_DEFAULTS)


def model_settings(param: str, given: dict[str, Any]) -> dict[str, Any]:
    r"""The validated ``freeze``, ``residual``, ``causal`` of a run on ``param`` (:class:`Settings`): non-default
    values only for ``twolayer`` (:data:`~attsvm.gd.init.LAYERED_PARAMS`); ``freeze`` one of ``None``,
    ``"W1"``, ``"W2"``; ``residual`` and ``causal`` booleans (:class:`~attsvm.errors.InputError` otherwise)."""
    out = {}
    for name, default in MODEL_DEFAULTS.items():
        value = given.get(name, default)
        if name == "freeze":
            if value is not None and value not in FREEZABLE:
                raise InputError(f"freeze must be None or one of {FREEZABLE}, got {value!r}")
        elif not isinstance(value, bool | np.bool_):
            raise InputError(f"{name} must be True or False, got {value!r}")
        else:
            value = bool(value)
        if value != default and param not in LAYERED_PARAMS:
            raise InputError(f"{name} applies to param {' and '.join(map(repr, LAYERED_PARAMS))} only (got {param!r})")
        out[name] = value
    return out


def takers(option: str) -> list[str]:
    """The algorithms that read ``option``."""
    return [a.name for a in ALGORITHMS.values() if option in a.options]


def minibatch_of(value: Any, rows: int | None = None) -> int | None:
    r"""The one rule for ``minibatch`` (:class:`Settings`): ``None`` (the full batch) or an integer $b\ge1$ (not a
    bool), and with ``rows`` $n$ (the data set's flat rows, once the data are known) $b\le n$;
    :class:`~attsvm.errors.InputError` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InputError(f"minibatch must be a positive integer (the batch size b), got {value!r}")
    if rows is not None and value > rows:
        raise InputError(f"minibatch must be at most the number of samples n = {rows}, got {value!r}")
    return int(value)


def batch_rows(k: int, b: int, n: int) -> np.ndarray:
    r"""The samples $B_k=\{(kb+j)\bmod n: j=0,\dots,b-1\}$ of update $k$ with mini-batch $b$ (:class:`Settings`):
    (b,) int64 (distinct, as $b\le n$)."""
    return (int(k) * int(b) + np.arange(int(b), dtype=np.int64)) % int(n)


def batch_period(b: int, n: int) -> int:
    r"""$n/\gcd(n,b)$: the updates after which the batches $B_k$ repeat."""
    return int(n) // math.gcd(int(n), int(b))


def settings_of(algo: str, param: str, **given: Any) -> Settings:
    r"""Validated :class:`Settings` of ``algo`` on ``param`` (:class:`~attsvm.errors.InputError` naming the bad
    argument, also a ``ValueError``): ``param`` one of those declared for ``algo``; ``schedule`` in
    :data:`~attsvm.gd.options.SCHEDULES`; ``ridge`` finite $\ge0$; each option of
    :data:`~attsvm.gd.algorithm.OPTIONS` the algorithm reads parsed by the option, then the algorithm's rules
    between them; an option it does not read must be left at its default. ``None`` for an option means its
    default. ``minibatch``: :func:`minibatch_of` (its bound $b\le n$ is checked with the data, by
    :func:`prepare`)."""
    if algo not in ALGORITHMS:
        raise InputError(f"algo must be one of {ALGOS}, got {algo!r}")
    A = ALGORITHMS[algo]
    if param not in PARAMS:
        raise InputError(f"param must be one of {PARAMS}, got {param!r}")
    if param not in A.params:
        raise InputError(f"{A.title} (algo {algo!r}) is available for param {' and '.join(map(repr, A.params))} only")
    unknown = sorted(set(given) - set(SETTINGS_FIELDS) - {"algo"})
    if unknown:
        raise InputError(f"unknown settings {unknown}; expected some of {list(SETTINGS_FIELDS[1:])}")
    ridge = given.get("ridge", 0.0)
    if not finite_number(ridge) or ridge < 0:
        raise InputError("ridge must be a finite non-negative number")
    schedule = given.get("schedule", "constant")
    if schedule not in SCHEDULES:
        raise InputError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    values: dict[str, Any] = {}
    for name, opt in OPTIONS.items():
        value = given.get(name, opt.default)
        if value is None:
            value = opt.default
        if name in A.options:
            values[name] = opt.parse(value)
            continue
        if value is not opt.default and opt.parse(value) != opt.default:
            who = takers(name)
            raise InputError(f"{name} applies to algo {' and '.join(map(repr, who))} only (got algo {algo!r})")
        values[name] = opt.default
    if A.rules is not None:
        A.rules(values, param)
    minibatch = minibatch_of(given.get("minibatch"))
    if minibatch is not None and PARAMETERISATIONS[param].headed:
        raise InputError(f"minibatch is not available for param {param!r} (the heads' rows are not batched)")
    if minibatch is not None and PARAMETERISATIONS[param].layered:
        raise InputError(f"minibatch is not available for param {param!r} (full batch only)")
    model = model_settings(param, given)
    if model["freeze"] is not None and ridge > 0:
        raise InputError("freeze and ridge together: a frozen factor takes no step (set ridge 0)")
    return Settings(algo=algo, ridge=float(ridge), schedule=schedule, minibatch=minibatch, **values, **model)


def resolve_settings(settings: Any, algo: str | None, param: str, options: dict[str, Any]) -> Settings:
    """The validated settings of a run on ``param`` (:func:`attsvm.gd.run`, :func:`attsvm.highprec.replay`):
    ``settings`` (a :class:`Settings`, built by :func:`settings_of` or by hand, for this or another ``param``)
    checked again by :func:`settings_of` — the one rule — or, without it, ``settings_of(algo, param, **options)``
    (``algo`` default ``"ngd"``). Both at once is bad input."""
    if settings is None:
        return settings_of("ngd" if algo is None else algo, param, **options)
    if not isinstance(settings, Settings):
        raise InputError(f"settings must be attsvm.gd.Settings (attsvm.gd.settings_of), got {type(settings).__name__}")
    if algo is not None or options:
        raise InputError("give either settings or algo and its options, not both")
    return settings_of(settings.algo, param, **{f: getattr(settings, f) for f in SETTINGS_FIELDS if f != "algo"})


def lr_of(lr: Any, B: int, ds: Any, loss: str) -> np.ndarray:
    """The (B,) step sizes of ``lr`` (a positive number, (B,) positive numbers, or ``"1/L"`` per data set)."""
    if isinstance(lr, str):
        if lr != "1/L":
            raise InputError(f"lr must be a positive number or '1/L', got {lr!r}")
        f = ds.flat()
        if loss == NTP_LOSS:
            from ..ntp.loss import smoothness_constant as ntp_smoothness

            L = np.atleast_1d(ntp_smoothness(f.X, f.Z, f.mask))
        else:
            from ..model import Arrays, smoothness_constant

            L = np.atleast_1d(smoothness_constant(Arrays(f.X, f.Y, f.Z, f.v, f.mask), loss))
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            out = np.broadcast_to(1.0 / L, (B,)).astype(np.float64)
        if not np.all(np.isfinite(out) & (out > 0)):
            b = int(np.argmax(~(np.isfinite(out) & (out > 0))))
            raise InputError(
                f"lr='1/L' (data set {b}): the smoothness constant L_W = {L.flat[b]:.3g} is not a positive "
                "float64 number for these data; give lr as a number"
            )
        return out
    arr = np.asarray(lr, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(B, float(arr))
    if arr.shape != (B,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise InputError(f"lr must be a positive number, '1/L', or (B,) positive numbers (B={B})")
    return arr


def trajectory_bytes(
    ds: Any,
    steps: int,
    record_every: int | None,
    *,
    param: str = "W",
    m: int | None = None,
    targets: int = 0,
    record_params: bool = False,
    heads: int | None = None,
) -> int:
    r"""Bytes of the trajectory :func:`run` records for ``ds`` (B data sets of N flat rows, tokens of dimension d):
    $R=\lfloor\text{steps}/\text{record\_every}\rfloor+1$ rows (:class:`~attsvm.gd.summary.Recorder`), each
    the step (int64) and per data set ``loss``, ``norm`` and one ``corr:NAME`` per target (float64), per flat row
    ``selection`` (int64), ``max_softmax`` (float64) and ``stuck`` (bool), and with ``record_params`` the parameters
    (float64; $W$ too for ``KQ``, ``diag`` and ``heads``; ``m`` the width of ``KQ`` / ``heads``, ``heads`` their
    number). Exact for a float64 run that no stop
    rule ends early (tested), an upper bound otherwise; 0 without ``record_every``."""
    if record_every is None:
        return 0
    f = ds.flat()
    B = int(f.X.shape[0]) if ds.batched else 1
    N, d = int(f.X.shape[-3]), int(f.X.shape[-1])
    per_set = 8 * (2 + int(targets)) + N * (8 + 8 + 1)
    if record_params:
        P = PARAMETERISATIONS[param]
        shapes = list(P.shapes(d, d if m is None else int(m), heads_of(heads, param)).values())
        shapes += [(d, d)] if P.factored else []
        per_set += 8 * sum(int(np.prod(s)) for s in shapes)
    return (int(steps) // int(record_every) + 1) * (8 + B * per_set)


def require_trajectory_memory(
    nbytes: float, steps: int, record_every: int, option: str = "record_every", what: str = "the recorded trajectory"
) -> None:
    """Refuse (:class:`~attsvm.errors.InputError`, exit 2 at the CLI) a trajectory of ``nbytes``
    (:func:`trajectory_bytes`) that would not fit in memory, before anything is allocated: the limit is
    :func:`attsvm.svm.budget.memory_limit` (physical memory, or ``ATTSVM_MEMORY_BYTES``), and the one-line message
    gives the estimate, the limit and a power of ten for ``option`` (``record_every`` / ``--record-every``) whose
    trajectory fits in half of it."""
    from ..svm.budget import human, memory_limit, require

    rows = int(steps) // int(record_every) + 1
    try:
        require(nbytes, f"{what} ({rows} rows: every {record_every} of {steps} steps)")
    except InputError as exc:
        limit = memory_limit() or 0
        fix = f"record fewer rows (a larger {option}) or take fewer steps"
        for every in (10**j for j in range(1, 20)):
            keep = int(steps) // every + 1
            if every > record_every and keep * nbytes / rows <= limit / 2:
                fix = f"record fewer rows: {option} {every} keeps {keep} rows, about {human(keep * nbytes / rows)}"
                break
        raise InputError(f"{exc}; {fix}") from None


def targets_of(targets: dict | None, param: str, B: int, d: int) -> dict[str, np.ndarray]:
    """Validated targets, (B, ...) each (for the ``corr:`` records and the ``target_corr`` rule)."""
    if not targets:
        return {}
    shape = PARAMETERISATIONS[param].target_shape(d)
    out = {}
    for name, t in targets.items():
        a = np.asarray(t, dtype=np.float64)
        if a.shape == shape:
            a = np.broadcast_to(a, (B, *shape))
        if a.shape != (B, *shape) or not np.all(np.isfinite(a)):
            raise InputError(f"target {name!r} must be finite with shape {shape} or {(B, *shape)}")
        if np.any(np.all(a.reshape(B, -1) == 0, axis=-1)):
            raise InputError(f"target {name!r} is zero")
        out[str(name)] = a
    return out


def dtype_name_of(dtype: Any) -> str:
    """``"float64"`` / ``"float32"`` for a name or a torch dtype; InputError otherwise."""
    name = str(dtype).replace("torch.", "")
    if name not in DTYPES:
        raise InputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    return name


@dataclass
class Job:
    """A validated run (everything :func:`run` checks without torch), handed to a kernel."""

    ds: Any
    param: str
    settings: Settings
    loss: str
    head: Any
    steps: int
    lr: np.ndarray  # (B,)
    init: dict[str, np.ndarray]  # the initial factors, (B, ...)
    targets: dict[str, np.ndarray]
    stop_corr: float | None
    record_every: int | None
    record_params: bool
    device: Any
    dtype: str
    heads: int = 1  # the number of heads (param ``heads``; 1 otherwise)

    def check_ranges(self, head: Any = None) -> None:
        """:func:`~attsvm.gd.ranges.check_ranges` for this run (``head``: the head on the device, if any)."""
        f = self.ds.flat()
        lead = (lambda a: a) if self.ds.batched else (lambda a: np.asarray(a)[None])  # noqa: E731
        S = self.settings
        A = S.algorithm
        check_ranges(
            X=lead(f.X),
            Z=lead(f.Z),
            v=lead(f.v),
            param=self.param,
            lr=self.lr,
            steps=self.steps,
            init=self.init,
            head=head,
            dtype=self.dtype,
            batched=self.ds.batched,
            schedule=S.schedule,
            bound=lambda shape: A.step_bound(shape, S, self.steps),
            mirror_q=S.q if A.mirror else None,
        )


def prepare(
    ds: Any,
    settings: Settings,
    *,
    param: str = "W",
    lr: Any = 0.1,
    steps: int = 2000,
    m: int | None = None,
    heads: int | None = None,
    loss: str | None = None,
    head: Any = None,
    init: Any = "zero",
    init_scale: float | None = None,
    seed: int = 0,
    record_every: int | None = None,
    targets: dict | None = None,
    stop_corr: float | None = None,
    device: Any = "cpu",
    dtype: Any = "float64",
    record_params: bool = False,
) -> Job:
    """The validated :class:`Job` of a run of ``settings`` (validated for ``param``: :func:`resolve_settings`) on
    ``ds`` (every argument of
    :func:`attsvm.gd.run` that a kernel does not choose; :class:`~attsvm.errors.InputError` naming the bad one)."""
    ntp = getattr(ds, "kind", None) == "ntp"
    if not (isinstance(ds, Dataset) or ntp):
        raise InputError("ds must be an attsvm Dataset or next-token data (attsvm.ntp.NTPData)")
    if param not in PARAMS:
        raise InputError(f"param must be one of {PARAMS}, got {param!r}")
    H = heads_of(heads, param)
    if (PARAMETERISATIONS[param].headed or PARAMETERISATIONS[param].layered) and (ntp or head is not None):
        raise InputError(f"param {param!r} trains the linear head of the data (v fixed): no head, no next-token data")
    square = isinstance(head, str) and head == NTP_SQUARE
    if loss is None:
        loss = ("correlation" if square else NTP_LOSS) if ntp else "logistic"
    if loss not in LOSSES:
        raise InputError(f"loss must be one of {LOSSES}, got {loss!r}")
    if ntp and param in ("p", "vp"):
        raise InputError("next-token data train W, (K,Q) or diag")
    if ntp and not ((head is None and loss == NTP_LOSS) or (square and loss == "correlation")):
        raise InputError(
            f"next-token data take the loss {NTP_LOSS!r} (-log of the label's attention mass, no head), or "
            f"head={NTP_SQUARE!r} with loss 'correlation' (the squared loss of the vocabulary classifier)"
        )
    if not ntp and (loss == NTP_LOSS or square):
        raise InputError(f"loss {NTP_LOSS!r} and head {NTP_SQUARE!r} need next-token data (kind 'ntp')")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise InputError(f"steps must be a non-negative integer, got {steps!r}")
    steps = int(steps)
    if record_every is not None and (not isinstance(record_every, int | np.integer) or record_every < 1):
        raise InputError(f"record_every must be a positive integer, got {record_every!r}")
    if stop_corr is not None and not (isinstance(stop_corr, int | float) and np.isfinite(stop_corr) and stop_corr >= 0):
        raise InputError("stop_corr must be a finite non-negative number")
    if stop_corr is not None and not targets:
        raise InputError("stop_corr needs at least one target")
    dtype = dtype_name_of(dtype)
    f = ds.flat()
    minibatch_of(settings.minibatch, int(f.X.shape[-3]))
    B = int(f.X.shape[0]) if ds.batched else 1
    d = int(f.X.shape[-1])
    mw = d if m is None else int(m)
    if mw < 1:
        raise InputError(f"width m must be positive, got {m!r}")
    return Job(
        ds=ds,
        param=param,
        settings=settings,
        loss=loss,
        head=head,
        steps=steps,
        lr=lr_of(lr, B, ds, loss),
        init=initial_params(param, init, B, d, mw, seed, init_scale, H),
        targets=targets_of(targets, param, B, d),
        stop_corr=None if stop_corr is None else float(stop_corr),
        record_every=None if record_every is None else int(record_every),
        record_params=bool(record_params),
        device=device,
        dtype=dtype,
        heads=H,
    )
