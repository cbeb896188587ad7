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

Modules (``LAYERS``, lowest first): a module imports only modules of strictly lower layers, at module level, and no
private names (``property_tests/test_experiments_package.py`` checks both); every name below is re-exported here,
so ``from attsvm.experiments import X`` is the one way to use it::

    0  context  options  report  spec  stats    run context; OPTIONS; Report, jsonable; discovery, NAMES; summary
    1  files  manifests  stages                 output files, caption; manifest, provenance; parallel stages
    2  runner                                   reproduce, experiment_pool
"""

from ..data import subset  # what specs (numerics/gensvm.py) import from here: attsvm.data.subset
from .context import Context
from .files import caption_text, check_outputs, output_files
from .manifests import device_info, git_revision, manifest, provenance
from .options import AUTHORS_EPS, Option, OptionValue, authors_options, resolve_options, select_options, spec_options
from .report import Report, jsonable
from .runner import experiment_pool, reproduce
from .spec import NAMES, discover, load_spec, recheck, sizes_of
from .stages import GD_SHARD_ROWS, call_each, fro_batch, gd_runs, solver_errors, stack
from .stats import corr_trajectory, summary

LAYERS: tuple[tuple[str, ...], ...] = (
    ("context", "options", "report", "spec", "stats"),
    ("files", "manifests", "stages"),
    ("runner",),
)

__all__ = [
    "AUTHORS_EPS",
    "GD_SHARD_ROWS",
    "LAYERS",
    "NAMES",
    "Context",
    "Option",
    "OptionValue",
    "Report",
    "authors_options",
    "call_each",
    "caption_text",
    "check_outputs",
    "corr_trajectory",
    "device_info",
    "discover",
    "experiment_pool",
    "fro_batch",
    "gd_runs",
    "git_revision",
    "jsonable",
    "load_spec",
    "manifest",
    "output_files",
    "provenance",
    "recheck",
    "reproduce",
    "resolve_options",
    "select_options",
    "sizes_of",
    "solver_errors",
    "spec_options",
    "stack",
    "subset",
    "summary",
]
