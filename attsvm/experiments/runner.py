"""The runner of ``attsvm reproduce``: :func:`reproduce` runs one experiment spec on a pool of workers
(:func:`experiment_pool`) and writes its files, all or none."""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from .. import figures, outputs
from ..errors import InputError
from ..pool import Pool, usable_cores
from ..progress import Progress
from .context import Context
from .files import caption_text, check_outputs, output_files
from .manifests import manifest, provenance
from .options import resolve_options, spec_options
from .report import Report, jsonable
from .spec import discover, load_spec, sizes_of


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
