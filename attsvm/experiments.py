r"""Runner for the experiment specs of ``numerics/`` (THEORY §4): discovery, progress, manifests, output files.

A *spec* is a Python file ``numerics/<name>.py`` (discovered by path, as pytest discovers test files;
default folder :func:`attsvm.paths.numerics_dir`) defining

==============  ==========================================================================================
``TITLE``       one line: what the experiment shows
``CLAIMS``      tuple of THEORY claim ids it illustrates (optional)
``SIZES``       ``{"full": {...}, "smoke": {...}}`` — keyword sizes; ``SIZES[...]["seeds"]`` is the number of
                independent runs (what ``--seeds N`` overrides)
``run(ctx)``    computes the numbers; returns a JSON-serialisable dict (it is ``NAME.json``)
``plot(res)``   returns a matplotlib ``Figure`` built from that dict alone (``NAME.png``, ``NAME.pdf``, ...)
``check(res)``  the qualitative claims of the paper as a list of failure messages (empty: all hold)
``caption(res)`` the figure's caption (Markdown) written from that dict alone: what every line, marker, band
                and error bar shows, and the seeds, steps and sizes actually run. Required for the built-in
                specs (:data:`NAMES`); a user spec without it gets a generic caption from ``TITLE``
``OPTIONS``     the options the spec takes (optional): ``{"name": Option(default, choices)}`` or the shorthand
                ``{"name": (default, choices)}`` (:class:`Option`); ``run`` reads the values as
                ``ctx.options`` (every option, defaults filled in, converted to the default's type)
==============  ==========================================================================================

Options are set by ``reproduce(..., options={"reference": "scs"})`` or on the command line by
``attsvm reproduce NAME --set KEY=VALUE`` (:func:`attsvm.cli.options.parse_assignments`, :func:`resolve_options`,
:func:`select_options`); an unknown key or a value the spec does not allow is bad input, found before anything
runs. The values are recorded in ``NAME.json`` (``settings.options``), in the manifest (``options``) and in the
caption's run line.

:func:`reproduce` writes, into ``DIR``, the figure in every requested format (:data:`attsvm.figures.FORMATS`;
default PNG at 200 dpi and PDF), ``NAME.caption.md``, ``NAME.json`` and ``NAME.manifest.json`` (package
versions, device, seeds, git revision, wall time, the figure files with format and dpi), all or none: nothing
is half-written on failure. The figure is drawn and saved in the one publication style of
:mod:`attsvm.figures` (which also has the figure helpers :func:`~attsvm.figures.band`,
:func:`~attsvm.figures.new_figure`, ...).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import figures, outputs
from .data import subset
from .errors import InputError
from .pool import Pool, usable_cores
from .progress import Progress
from .provenance import Provenance
from .registries import Check, declare
from .serial import jsonable as _jsonable
from .userfile import load_module

_RECHECK = Check(
    "attsvm.experiments:recheck",
    "the spec's check (the paper's qualitative claims) on a smoke run and on the committed gallery numbers "
    "docs/gallery/<name>.json, whose figure is re-drawn from them",
)
#: the built-in experiments (``numerics/<name>.py``, in the order of docs/experiments.md), each with its
#: independent re-check (:mod:`attsvm.registries`): :func:`recheck` of a smoke run (``test_numerics_smoke.py``
#: ``test_smoke``) and of the committed gallery numbers, the gallery figure re-drawn and its caption checked
#: (``test_gallery_figures_are_for_print``); ``property_tests/test_registries.py`` checks that these names are
#: exactly the specs of ``numerics/`` and the figures of ``docs/gallery/``
NAMES = declare(
    "experiments.NAMES",
    {
        "visual": _RECHECK,
        "rank": _RECHECK,
        "local": _RECHECK,
        "gensvm": _RECHECK,
        "overparam": _RECHECK,
        "prompt": _RECHECK,
        "joint": _RECHECK,
        "mirror": _RECHECK,
        "causal": _RECHECK,
        "optgeom": _RECHECK,
        "ntp": _RECHECK,
        "digits": _RECHECK,
    },
)
_REQUIRED = ("TITLE", "SIZES", "run", "plot", "check")
_REQUIRED_BUILTIN = (*_REQUIRED, "caption")  # a spec named like a built-in one meets the built-ins' contract
_PACKAGES = ("attsvm", "numpy", "scipy", "torch", "cvxpy", "clarabel", "matplotlib", "sympy", "mpmath")


# ---------------------------------------------------------------------------------------------- discovery
def discover(folder: str | os.PathLike | None = None) -> dict[str, Path]:
    """Spec files of ``folder`` (default :func:`attsvm.paths.numerics_dir`), keyed by name (file stem)."""
    if folder is None:
        from .paths import numerics_dir

        folder = numerics_dir()
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{root}: no numerics folder (set ATTSVM_NUMERICS or run from the repository)")
    return {p.stem: p for p in sorted(root.glob("*.py")) if not p.name.startswith("_")}


def load_spec(name: str, folder: str | os.PathLike | None = None) -> ModuleType:
    """Import the spec ``name`` of ``folder`` by path (:func:`attsvm.userfile.load_module`: a module name of its
    own per file, so two folders with a spec of the same name are not confused) and check it defines the spec
    interface."""
    specs = discover(folder)
    if name not in specs:
        raise InputError(f"unknown experiment {name!r} (known: {', '.join(sorted(specs)) or 'none'})")
    path = specs[name]
    mod = load_module(path, "experiment spec")
    missing = [k for k in (_REQUIRED_BUILTIN if name in NAMES else _REQUIRED) if not hasattr(mod, k)]
    if missing:
        raise InputError(f"{path}: experiment spec lacks {', '.join(missing)}")
    return mod


def recheck(name: str, result: dict[str, Any], folder: str | os.PathLike | None = None) -> list[str]:
    """The failure messages of the spec ``name``'s ``check`` on a stored ``result`` (its ``NAME.json``, e.g. the
    committed gallery's): the paper's qualitative claims re-checked on those numbers (empty: all hold)."""
    return [str(m) for m in load_spec(name, folder).check(result)]


# ---------------------------------------------------------------------------------------------- context
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


# ---------------------------------------------------------------------------------------------- options
OptionValue = str | int | float | bool
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Option:
    """One option of a spec (``OPTIONS``): its ``default`` (a ``str``, ``int``, ``float`` or ``bool``, whose type
    is the option's type) and the values allowed: one of ``choices`` when given, else any value of that type
    within ``[minimum, maximum]`` (numbers; each bound optional). ``help`` is one line for error messages and
    docs."""

    default: OptionValue
    choices: tuple[OptionValue, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""

    @property
    def kind(self) -> type:
        """The option's type: that of its default."""
        return type(self.default)

    def describe(self) -> str:
        """The values allowed, in words (for error messages)."""
        if self.choices is not None:
            return "one of " + ", ".join(_show(c) for c in self.choices)
        bounds = [f">= {_show(self.minimum)}"] if self.minimum is not None else []
        bounds += [f"<= {_show(self.maximum)}"] if self.maximum is not None else []
        word = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}[self.kind]
        return word + (f" {' and '.join(bounds)}" if bounds else "")

    def convert(self, value: Any) -> OptionValue:
        """``value`` (text from the command line, or a value from Python) as a value of the option's type; a
        ``ValueError`` saying what is allowed when it is not one of the allowed values."""
        kind = self.kind
        out: OptionValue
        if kind is bool:
            text = str(value).strip().lower()
            if isinstance(value, bool):
                out = value
            elif text in _TRUE or text in _FALSE:
                out = text in _TRUE
            else:
                raise ValueError(self.describe())
        elif kind is int:
            if isinstance(value, bool) or isinstance(value, float):
                raise ValueError(self.describe())
            try:
                out = int(str(value).strip(), 10) if isinstance(value, str) else int(value)
            except (TypeError, ValueError):
                raise ValueError(self.describe()) from None
        elif kind is float:
            if isinstance(value, bool):
                raise ValueError(self.describe())
            try:
                out = float(value.strip() if isinstance(value, str) else value)
            except (TypeError, ValueError):
                raise ValueError(self.describe()) from None
            if not np.isfinite(out):
                raise ValueError(self.describe())
        else:
            if not isinstance(value, str):
                raise ValueError(self.describe())
            out = value
        if self.choices is not None and out not in self.choices:
            raise ValueError(self.describe())
        if (self.minimum is not None and out < self.minimum) or (self.maximum is not None and out > self.maximum):
            raise ValueError(self.describe())
        return out


#: the float64 machine epsilon, the authors' ``torch.finfo(torch.double).eps`` (their ridge and normaliser)
AUTHORS_EPS = 2.0**-52


def authors_options() -> dict[str, Option]:
    r"""The options of the authors' normalised-GD recipe (E3 ``local``, ``digits``): the $(K,Q)$ ridge, the initial
    law, the $(K,Q)$ normalisation and the normaliser's $\epsilon$, defaults as in their code."""
    return {
        "ridge": Option(
            AUTHORS_EPS, minimum=0.0, help="ridge lambda of lambda(|K|^2+|Q|^2) on the (K,Q) runs (paper: 2^-52)"
        ),
        "init": Option("linear", ("linear", "random"), help="initial law: PyTorch's nn.Linear default, or 0.1 N"),
        "normalize": Option("per-factor", ("per-factor", "joint"), help="(K,Q): normalise each factor or both"),
        "grad_eps": Option(
            AUTHORS_EPS, minimum=0.0, help="the normaliser's eps in g/(|g|+eps), both runs (paper: 2^-52)"
        ),
    }


def _show(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def spec_options(mod: ModuleType) -> dict[str, Option]:
    """The options a spec declares (its ``OPTIONS``; none without one), shorthand tuples made :class:`Option`.
    A malformed declaration (bad name or type, a default it does not allow) is bad input naming the spec."""
    raw = getattr(mod, "OPTIONS", None) or {}
    where = getattr(mod, "__file__", None) or getattr(mod, "__name__", "spec")
    if not isinstance(raw, dict):
        raise InputError(f"{where}: OPTIONS must be a dict name -> Option(default, choices)")
    out: dict[str, Option] = {}
    for key, val in raw.items():
        opt = val if isinstance(val, Option) else Option(*val) if isinstance(val, tuple) and val else None
        ok_name = isinstance(key, str) and key.isidentifier()
        if opt is None or not ok_name or type(opt.default) not in (str, int, float, bool):
            raise InputError(f"{where}: OPTIONS[{key!r}] must be Option(default, ...), default str, int, float or bool")
        if opt.choices is not None:
            opt = replace(opt, choices=tuple(opt.choices))
        try:
            if opt.convert(opt.default) != opt.default:
                raise ValueError(opt.describe())
        except ValueError as exc:
            raise InputError(f"{where}: OPTIONS[{key!r}]: default {_show(opt.default)} not allowed ({exc})") from None
        out[key] = opt
    return out


def _listing(opts: dict[str, Option]) -> str:
    return ", ".join(f"{k} ({o.describe()}; default {_show(o.default)})" for k, o in opts.items()) or "none"


def resolve_options(mod: ModuleType, name: str, given: dict[str, Any] | None = None) -> dict[str, OptionValue]:
    """Every option of the spec (:func:`spec_options`): the ``given`` values, converted to the default's type
    (:meth:`Option.convert`; ``"0"`` for a float option is ``0.0``), the defaults for the rest. A key the spec
    does not declare, or a value it does not allow, is bad input (:class:`~attsvm.errors.InputError`)."""
    opts = spec_options(mod)
    given = dict(given or {})
    unknown = sorted(set(given) - set(opts))
    if unknown:
        raise InputError(f"experiment {name!r} has no option {unknown[0]!r} (its options: {_listing(opts)})")
    out: dict[str, OptionValue] = {}
    for key, opt in opts.items():
        if key not in given:
            out[key] = opt.default
            continue
        try:
            out[key] = opt.convert(given[key])
        except ValueError as exc:
            raise InputError(f"option {key}={_show(given[key])} of experiment {name!r}: expected {exc}") from None
    return out


def select_options(specs: dict[str, ModuleType], given: dict[str, Any]) -> dict[str, dict[str, OptionValue]]:
    """The options of each experiment of ``specs`` (name -> spec) for a run of all of them: each given option
    applies to the experiments that declare it (:func:`resolve_options` checks its value for each); a key that
    none of them declares is bad input."""
    if len(specs) == 1:
        return {name: resolve_options(mod, name, given) for name, mod in specs.items()}
    declared = {name: spec_options(mod) for name, mod in specs.items()}
    unknown = sorted(k for k in given if not any(k in o for o in declared.values()))
    if unknown:
        known = "; ".join(f"{n}: {', '.join(o)}" for n, o in declared.items() if o) or "none"
        raise InputError(f"no selected experiment has an option {unknown[0]!r} (options: {known})")
    return {
        name: resolve_options(mod, name, {k: v for k, v in given.items() if k in declared[name]})
        for name, mod in specs.items()
    }


# ---------------------------------------------------------------------------------------------- manifest
def _version(pkg: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def git_revision(cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the repository holding ``cwd`` (default: next to the package), or Nones."""
    where = Path(cwd) if cwd is not None else Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return {"commit": commit, "dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def device_info(device: str) -> dict[str, Any]:
    """The device in words: CPU model and thread count, or the CUDA device name."""
    info: dict[str, Any] = {"requested": device, "platform": platform.platform(), "cpu_count": os.cpu_count()}
    info["cpu"] = platform.processor() or platform.machine()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["torch_threads_per_process"] = 1 if str(device).startswith("cpu") else torch.get_num_threads()
        if str(device).startswith("cuda") and torch.cuda.is_available():
            info["cuda_device"] = torch.cuda.get_device_name(torch.device(device))
    return info


def manifest(
    name: str,
    ctx: Context,
    wall_s: float,
    spec_path: Path,
    argv: Sequence[str] | None = None,
    figure_files: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The provenance record written next to every result; ``figure_files`` are the records of
    :func:`attsvm.figures.save_figure` (file, format, dpi, size)."""
    return {
        "experiment": name,
        "spec": str(spec_path),
        "smoke": ctx.smoke,
        "sizes": ctx.size,
        "options": ctx.options,
        "seeds": {"runs": ctx.seeds, "indices": f"0..{ctx.seeds - 1}", "base": "fixed seeds in the spec (settings)"}
        if "seeds" in ctx.size
        else None,
        "device": device_info(ctx.device),
        "workers": ctx.workers,
        "pool": ctx.pool.describe()
        if ctx.pool is not None
        else {"kind": "serial" if ctx.workers == 1 else "processes", "size": ctx.workers},
        "dtype": "float64",
        "git": git_revision(),
        "python": sys.version.split()[0],
        "packages": {p: _version(p) for p in _PACKAGES},
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - wall_s)),
        "wall_s": round(wall_s, 3),
        "timings_s": {k: round(v, 3) for k, v in ctx.timings.items()},
        "solver_failures": {k: {"count": len(v), "first": v[:3]} for k, v in ctx.errors.items()},
        "argv": list(argv) if argv is not None else sys.argv,
        "figures": list(figure_files),
        "caption": f"{name}.caption.md",
    }


def provenance(name: str, ctx: Context, failures: Sequence[str]) -> Provenance:
    """The provenance block of an experiment's caption, ``NAME.json`` and manifest: ``attsvm reproduce NAME``,
    the sizes as its budget (smoke or full, with the seeds), and the spec's ``check(result)`` that ran, with its
    outcome."""
    budget = ("smoke sizes" if ctx.smoke else "full sizes") + (f", {ctx.seeds} seeds" if "seeds" in ctx.size else "")
    outcome = "passed" if not failures else f"{len(failures)} failed: " + "; ".join(failures)
    check = f"{name}: the spec's check(result) {outcome}"
    return Provenance.of(f"attsvm reproduce {name}", budget=budget, checks=[check])


# ---------------------------------------------------------------------------------------------- json
def jsonable(x: Any) -> Any:
    """Numpy arrays/scalars to lists/numbers; non-finite floats to None (strict JSON)."""
    return _jsonable(x, nonfinite="null")


# ---------------------------------------------------------------------------------------------- helpers
def corr_trajectory(Ws: np.ndarray, targets: np.ndarray) -> np.ndarray:
    r"""$\mathrm{corr}(W_k^{(b)},W_\circ^{(b)})$ (:func:`attsvm.model.corr`) for a recorded trajectory ``Ws``
    (R, B, ...) and targets (B, ...). Zero matrices give NaN (no direction)."""
    from .model import corr

    Ws = np.asarray(Ws, dtype=float)
    return corr(Ws, np.asarray(targets, dtype=float)[None], ndim=Ws.ndim - 2)


def summary(x: Iterable[float]) -> dict[str, float | int | None]:
    """mean / std / min / max / count of the finite values."""
    a = np.asarray(list(x), dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"mean": None, "std": None, "min": None, "max": None, "count": 0}
    return {
        "mean": float(a.mean()),
        "std": float(a.std()),
        "min": float(a.min()),
        "max": float(a.max()),
        "count": int(a.size),
    }


# ---------------------------------------------------------------------------------------------- runner
@dataclass
class Report:
    """What one reproduction produced: result numbers, failed qualitative checks, files, wall time."""

    name: str
    title: str
    result: dict[str, Any]
    failures: list[str]
    files: dict[str, str]
    wall_s: float

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "ok": self.ok,
            "failures": self.failures,
            "files": self.files,
            "wall_s": round(self.wall_s, 3),
        }


def sizes_of(mod: ModuleType, smoke: bool, seeds: int | None) -> dict[str, Any]:
    """The spec's full or smoke sizes, with ``seeds`` overridden when given."""
    size = dict(mod.SIZES["smoke" if smoke else "full"])
    if seeds is not None:
        if seeds < 1:
            raise InputError(f"--seeds must be a positive integer, got {seeds}")
        size["seeds"] = int(seeds)
    return size


def output_files(
    name: str, out: str | os.PathLike, formats: str | Iterable[str] = figures.DEFAULT_FORMATS
) -> dict[str, str]:
    """The files :func:`reproduce` writes for experiment ``name`` into the folder ``out``: one figure per
    format (keys ``"png"``, ``"pdf"``, ``"svg"`` as requested, in that order), ``"caption"``, ``"json"``,
    ``"manifest"``."""
    outdir = Path(out)
    files = {f: str(outdir / f"{name}.{f}") for f in figures.parse_formats(formats)}
    files["caption"] = str(outdir / f"{name}.caption.md")
    files["json"] = str(outdir / f"{name}.json")
    files["manifest"] = str(outdir / f"{name}.manifest.json")
    return files


def check_outputs(
    names: Iterable[str],
    out: str | os.PathLike,
    option: str = "--out",
    formats: str | Iterable[str] = figures.DEFAULT_FORMATS,
) -> None:
    """Bad input (:class:`~attsvm.errors.InputError`, one line naming ``option``) unless the folder ``out`` and
    every file of every experiment in ``names`` (:func:`output_files`) can be written (:mod:`attsvm.outputs`);
    writes nothing."""
    outputs.check_output_dir(out, option)
    for name in names:
        for f in output_files(name, out, formats).values():
            outputs.check_output_file(f, option)


def caption_text(
    mod: ModuleType,
    name: str,
    result: dict[str, Any],
    size: dict[str, Any],
    smoke: bool,
    options: dict[str, Any] | None = None,
) -> str:
    """``NAME.caption.md``: the spec's ``TITLE`` in bold, its ``caption(result)`` (a generic sentence for a
    user spec without one), and the sizes the run used (``--smoke`` or full, after ``--seeds``) and the
    ``options`` (when the spec has any)."""
    title = str(mod.TITLE).strip().rstrip(".")
    if hasattr(mod, "caption"):
        body = str(mod.caption(result)).strip()
    else:
        body = f"(The spec defines no caption; every number behind the figure is in `{name}.json`.)"
    run = ", ".join(f"{k} = {json.dumps(jsonable(v))}" for k, v in size.items())
    kind = "smoke sizes (`--smoke`)" if smoke else "full sizes"
    opts = "; options: " + ", ".join(f"{k} = {_show(v)}" for k, v in options.items()) if options else ""
    return f"**{title}.** {body}\n\nRun: {kind}: {run}{opts}.\n"


def experiment_pool(workers: int | str | None = None, cluster: str | None = None) -> Pool:
    """The :class:`~attsvm.pool.Pool` of a reproduction (not yet entered): the Dask ``cluster`` when given,
    else ``workers`` local processes (:func:`attsvm.pool.workers_of`; default ``min(2, cores)``). Giving both
    is bad input (``--cluster local:N`` is the way to size a local cluster)."""
    if cluster is None and workers is None:
        workers = min(2, usable_cores())
    return Pool(workers, cluster)


def reproduce(
    name: str,
    out: str | os.PathLike,
    *,
    smoke: bool = False,
    seeds: int | None = None,
    device: str = "cpu",
    progress: bool = True,
    workers: int | str | None = None,
    folder: str | os.PathLike | None = None,
    argv: Sequence[str] | None = None,
    formats: str | Iterable[str] = figures.DEFAULT_FORMATS,
    dpi: int = figures.DEFAULT_DPI,
    options: dict[str, Any] | None = None,
    cluster: str | None = None,
    pool: Pool | None = None,
) -> Report:
    """Run experiment ``name`` and write its files (:func:`output_files`) into ``out``: the figure in each of
    ``formats`` (PNG at ``dpi``), ``NAME.caption.md``, ``NAME.json``, ``NAME.manifest.json``. ``options``
    sets options the spec declares (its ``OPTIONS``; :func:`resolve_options`: text or typed values).

    The run's parallel stages (:meth:`Context.map`, :func:`call_each`, :func:`gd_runs`, :func:`fro_batch`) go to
    ``pool`` (an entered :class:`~attsvm.pool.Pool`, e.g. one for several experiments), else to a pool made for
    this run: ``workers`` local processes (:func:`attsvm.pool.workers_of`: a number or ``"auto"``; default
    ``min(2, cores)``) or the Dask ``cluster`` (:func:`attsvm.pool.check_cluster`; not together with
    ``workers``). ``NAME.json`` is the same on every backend of the same size (every task is seeded by its
    inputs and the results are merged in order); the manifest records the backend (``pool``).

    The arguments, options and output paths are checked before the run (:func:`check_outputs`); the files are written
    all or none (:func:`attsvm.outputs.transaction`): a failure or Ctrl-C leaves no new file and no temporary
    one."""
    if not str(device).startswith(("cpu", "cuda")):
        raise InputError(f"--device must be cpu or cuda, got {device!r}")
    formats = figures.parse_formats(formats)
    dpi = figures.check_dpi(dpi)
    mod = load_spec(name, folder)
    path = discover(folder)[name]
    opts = resolve_options(mod, name, options)
    check_outputs([name], out, formats=formats)
    size = sizes_of(mod, smoke, seeds)
    own = None if pool is not None else experiment_pool(workers, cluster)
    if str(device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda requested but no CUDA device is available")
    import torch

    threads = torch.get_num_threads()
    with contextlib.ExitStack() as stack:
        if own is not None:
            pool = stack.enter_context(own)
        ctx = Context(
            name=name,
            size=size,
            smoke=smoke,
            device=str(device),
            progress=Progress(name, enabled=progress),
            workers=pool.size,
            options=opts,
            pool=pool,
        )
        if ctx.device.startswith("cpu"):
            torch.set_num_threads(1)  # tiny tensors: one thread per process, the cores go to parallel runs
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                result = mod.run(ctx)
        finally:
            torch.set_num_threads(threads)
        wall = time.perf_counter() - t0
    result = jsonable(result)
    if spec_options(mod):  # the options run, in the settings of NAME.json
        settings = result.get("settings")
        if not isinstance(settings, dict):
            settings = result["settings"] = {} if settings is None else {"value": settings}
        settings["options"] = dict(opts)
    failures = [str(f) for f in mod.check(result)]
    result["checks"] = {"failures": failures, "ok": not failures}
    prov = provenance(name, ctx, failures)
    result["provenance"] = prov.to_dict()
    files = output_files(name, out, formats)
    result_text = json.dumps(result, indent=1, allow_nan=False)
    caption = caption_text(mod, name, result, ctx.size, smoke, opts) + "\n" + prov.text() + "\n"
    with outputs.transaction(), figures.paper_style():
        fig = mod.plot(result)
        saved = figures.save_figure(fig, {f: files[f] for f in formats}, dpi)
        man = {"provenance": prov.to_dict(), **manifest(name, ctx, wall, path, argv, saved)}
        outputs.write_text(files["caption"], caption)
        outputs.write_text(files["json"], result_text)
        outputs.write_text(files["manifest"], json.dumps(jsonable(man), indent=1, allow_nan=False))
    ctx.progress.note(f"done in {wall:.1f}s" + ("" if not failures else f"; {len(failures)} check(s) FAILED"))
    return Report(name, str(mod.TITLE), result, failures, files, wall)


# ---------------------------------------------------------------------------------------------- solves
def _resolve_fn(dotted: str) -> Callable[..., Any]:
    mod, _, attr = dotted.rpartition(":")
    if mod.endswith(".py"):  # a function of a spec file: the module this process imported last from that file
        # (a forked worker: the parent's, even if the file has changed since), else loaded by path (spawned)
        have = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == mod]
        return getattr(have[-1] if have else load_module(mod, "experiment spec"), attr)
    return getattr(importlib.import_module(mod), attr)


def _trim(res: Any) -> Any:
    """Keep what an experiment needs of an SVM solution (cheap to send between processes)."""
    from .svm.solution import SVMSolution

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
    from .errors import InfeasibleError, SolverError

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
    from .gd.shards import combine, plan

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
    from .errors import SolverError
    from .svm import solve_fro_batch

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
