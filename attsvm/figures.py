r"""The experiments' figures: one publication style, the band of runs, the file formats (``attsvm reproduce``).

**Style.** :data:`STYLE` is the one table of matplotlib settings for every figure of ``numerics/``; the runner
(:func:`attsvm.experiments.reproduce`) applies it with :func:`paper_style` around a spec's ``plot`` and the
saving. Sizes are physical: :func:`new_figure` makes a one-panel figure one journal column wide
(:data:`COLUMN_IN` inches) and a wider one the text width (:data:`TEXT_IN`), and every text of :data:`STYLE`
is at least :data:`MIN_FONT_PT` points *at that size*, so the figure is legible when printed at its own
width. Colours come from one colour-blind-safe palette (Okabe–Ito, :data:`PALETTE`), in a fixed order,
with :data:`COLORS` naming the colour of each recurring quantity (GD on $W$, GD on $(K,Q)$, ...).

**Bands.** :func:`band_stats` summarises $R\times B$ runs (B seeds) point by point: line $=\bar y$, shade
$=\bar y\pm s$ (mean and standard deviation over the seeds), or with ``log`` the geometric version
$10^{\bar\ell}$, $10^{\bar\ell\pm s_\ell}$ with $\ell=\log_{10}y$ (a factor $\times/\div\,10^{s_\ell}$, the
geometric standard deviation). It records the number of seeds behind each point, and :func:`band_note`
turns that into the words a legend or caption uses ("mean ± 1 s.d. over 100 seeds").

**Files.** :func:`save_figure` writes one figure in every requested format of :data:`FORMATS` (PDF and SVG are
vector; PNG is raster at ``dpi``, so its size in pixels is the figure size in inches times ``dpi``), through
:mod:`attsvm.outputs` (inside the runner's transaction: all files or none). Dates are left out of the PDF
and SVG metadata so that a re-run gives the same bytes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from . import outputs
from .errors import InputError

FORMATS = ("pdf", "png", "svg")  #: the figure formats ``--format`` accepts
DEFAULT_FORMATS = ("png", "pdf")  #: what ``attsvm reproduce`` writes unless told otherwise
DEFAULT_DPI = 200  #: resolution of the PNG (and of any raster part of a PDF/SVG)
MIN_DPI = 50  #: the smallest ``--dpi`` accepted (below it 8-pt text is a few pixels; at 1 dpi matplotlib fails)
MAX_DPI = 1200  #: the largest ``--dpi`` accepted (a 7-inch figure is then 8400 pixels wide)
COLUMN_IN = 3.4  #: width of a one-column figure, inches
TEXT_IN = 7.0  #: width of a full-text-width figure, inches
MIN_FONT_PT = 8.0  #: no text of a figure is smaller, at the figure's own size

#: Okabe & Ito's colour-blind-safe palette, in the order of the colour cycle (C0, C1, ...)
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
#: the colour of each recurring quantity, the same in every figure
COLORS = {
    "W": PALETTE[0],  # GD on W and its Att-SVM W^mm (Frobenius)
    "KQ": PALETTE[1],  # GD on (K,Q) and its Att-SVM* W^mm_* (nuclear)
    "input1": PALETTE[0],
    "input2": PALETTE[3],
    "global": PALETTE[2],
    "local": PALETTE[0],
    "neither": PALETTE[1],
    "reference": "0.45",  # reference lines and control quantities
}

#: the matplotlib settings of every figure (applied by :func:`paper_style`)
STYLE: dict[str, Any] = {
    "font.size": 9.0,
    "axes.titlesize": 9.0,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 8.0,
    "legend.title_fontsize": 8.0,
    "figure.titlesize": 9.5,
    "mathtext.fontset": "dejavusans",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.linewidth": 0.7,
    "lines.linewidth": 1.5,
    "lines.markersize": 4.0,
    "errorbar.capsize": 2.0,
    "legend.frameon": True,
    "legend.framealpha": 0.9,
    "legend.edgecolor": "0.8",
    "legend.handlelength": 1.8,
    "legend.borderaxespad": 0.4,
    "figure.constrained_layout.use": True,
    "figure.dpi": DEFAULT_DPI,
    "savefig.dpi": DEFAULT_DPI,
    "pdf.fonttype": 42,  # TrueType in the PDF: text stays text (searchable, editable)
    "svg.fonttype": "path",
    "svg.hashsalt": "attsvm",  # deterministic SVG ids
}


def _style() -> dict[str, Any]:
    """:data:`STYLE` with the colour cycle of :data:`PALETTE` (``cycler`` is imported only here)."""
    from cycler import cycler

    return {**STYLE, "axes.prop_cycle": cycler(color=list(PALETTE))}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def paper_style() -> Iterator[None]:
    """Apply :data:`STYLE` (matplotlib, Agg backend) for the duration of the block; the previous settings
    come back afterwards."""
    plt = _pyplot()
    with plt.rc_context(_style()):
        yield


# ---------------------------------------------------------------------------------------------- options
def parse_formats(formats: str | Iterable[str], option: str = "--format") -> tuple[str, ...]:
    """The figure formats of a comma list (``"png,pdf"``) or a sequence, lower-cased, duplicates dropped, in
    the order given. Bad input (:class:`~attsvm.errors.InputError`): an empty list or a format not in
    :data:`FORMATS`."""
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    out: list[str] = []
    for raw in items:
        f = str(raw).strip().lower().lstrip(".")
        if not f:
            continue
        if f not in FORMATS:
            raise InputError(f"{option}: unknown figure format {str(raw).strip()!r} (known: {', '.join(FORMATS)})")
        if f not in out:
            out.append(f)
    if not out:
        raise InputError(f"{option}: no figure format given (known: {', '.join(FORMATS)})")
    return tuple(out)


def check_dpi(dpi: Any, option: str = "--dpi") -> int:
    """``dpi`` (an ``int``, or a string of decimal digits as on the command line) as an ``int`` from
    :data:`MIN_DPI` to :data:`MAX_DPI`; anything else (a float, a bool, other text) is bad input
    (:class:`~attsvm.errors.InputError`)."""
    shown = dpi.strip() if isinstance(dpi, str) else repr(dpi)
    if isinstance(dpi, str) and re.fullmatch(r"[+-]?\d{1,6}", dpi.strip()):
        dpi = int(dpi)
    ok = isinstance(dpi, (int, np.integer)) and not isinstance(dpi, (bool, np.bool_))
    if not ok or not MIN_DPI <= int(dpi) <= MAX_DPI:
        raise InputError(f"{option} must be an integer from {MIN_DPI} to {MAX_DPI}, got {shown}")
    return int(dpi)


# ---------------------------------------------------------------------------------------------- figures
def new_figure(ncols: int = 1, nrows: int = 1, width: float | None = None, height: float | None = None, **kw):
    """A figure (Agg, constrained layout) with an ``(nrows, ncols)`` array of axes; ``width`` and ``height``
    are the whole figure's, in inches (default: :data:`COLUMN_IN` wide for one column, :data:`TEXT_IN` for
    more; 2.6 in high per row). Extra keywords go to :func:`matplotlib.pyplot.subplots`."""
    plt = _pyplot()
    w = float(width) if width is not None else (COLUMN_IN if ncols == 1 else TEXT_IN)
    h = float(height) if height is not None else 2.6 * nrows
    fig, axes = plt.subplots(nrows, ncols, figsize=(w, h), squeeze=False, layout="constrained", **kw)
    return fig, axes


def new_canvas(width: float, height: float):
    """An empty figure (Agg, constrained layout) of ``width`` x ``height`` inches, for layouts that
    :func:`new_figure`'s regular grid does not give (``fig.add_gridspec``)."""
    return _pyplot().figure(figsize=(float(width), float(height)), layout="constrained")


def image_panel(ax, image, **imshow: Any):
    """Draw ``image`` (a 2-d array, as float) on ``ax`` with ``imshow`` keywords, as a picture: no ticks, no grid.
    Returns the ``AxesImage`` (for a colour bar)."""
    im = ax.imshow(np.asarray(image, dtype=float), **imshow)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    return im


def band_stats(runs, log: bool = False) -> dict[str, Any]:
    r"""Mean $\pm$ one standard deviation over the runs of ``runs`` (R points, B seeds; NaNs ignored):
    ``{"mean", "lo", "hi"}`` of length R, plus ``"log"`` and ``"n_min"``/``"n"``, the fewest and most seeds
    with a finite value at a drawn point (one with at least one).

    With ``log`` the statistics are of $\ell=\log_{10}y$: line $10^{\bar\ell}$ (geometric mean), shade
    $10^{\bar\ell\pm s_\ell}$ (as for $1-\mathrm{corr}$); values $\le0$ count as $10^{-300}$."""
    from .serial import jsonable

    y = np.asarray(runs, dtype=float)
    if y.ndim == 1:
        y = y[:, None]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if log:
            ly = np.where(np.isnan(y), np.nan, np.log10(np.clip(y, 1e-300, None)))
            m, s = np.nanmean(ly, axis=1), np.nanstd(ly, axis=1)
            mean, lo, hi = 10**m, 10 ** (m - s), 10 ** (m + s)
        else:
            mean, s = np.nanmean(y, axis=1), np.nanstd(y, axis=1)
            lo, hi = mean - s, mean + s
    count = np.sum(np.isfinite(y), axis=1)
    drawn = count[count > 0] if np.any(count > 0) else count  # a point with no finite run is not drawn
    out = {k: jsonable(v, nonfinite="null") for k, v in (("mean", mean), ("lo", lo), ("hi", hi))}
    return {**out, "log": bool(log), "n_min": int(drawn.min()), "n": int(drawn.max())}


def band_falls(stats: Mapping[str, Any]) -> bool:
    """Whether a :func:`band_stats` line falls over the run: the mean of its last quarter of points is below the
    mean of its first quarter (for a title that says a distance "falls"; a spec's ``check`` tests it)."""
    m = np.array([np.nan if v is None else v for v in stats["mean"]], dtype=float)
    q = max(len(m) // 4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return bool(np.nanmean(m[-q:]) < np.nanmean(m[:q]))


def band_note(stats: Mapping[str, Any], what: str = "seeds") -> str:
    """What a :func:`band_stats` band shows, in words (for a legend or a caption), e.g.
    ``"line: mean, shade: ± 1 s.d. over 100 seeds"``."""
    n, n_min = stats.get("n"), stats.get("n_min", stats.get("n"))
    over = "" if n is None else f" over {n} {what}" if n_min == n else f" over {n_min}–{n} {what}"
    if stats.get("log"):
        return f"line: geometric mean, shade: ×/÷ 1 geometric s.d.{over}"
    return f"line: mean, shade: ± 1 s.d.{over}"


def band(ax, x, stats: Mapping[str, Any], label: str | None = None, color=None, logy: bool = False, **kw):
    """Draw a :func:`band_stats` band (line = mean, shade = mean $\\pm$ std); log y-axis with ``logy``."""
    f = lambda a: np.array([np.nan if v is None else v for v in a], dtype=float)  # noqa: E731
    x = np.asarray(x, dtype=float)
    (line,) = ax.plot(x, f(stats["mean"]), label=label, color=color, **kw)
    ax.fill_between(x, f(stats["lo"]), f(stats["hi"]), color=line.get_color(), alpha=0.2, linewidth=0)
    if logy:
        ax.set_yscale("log")
    return line


def band_key(stats: Mapping[str, Any], what: str = "seeds"):
    """A legend handle (a grey line on a grey shade) labelled with :func:`band_note`: add it to the legend of
    a panel with bands so that the figure itself says what the lines and shades are."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handle = (Patch(facecolor="0.5", alpha=0.25, linewidth=0), Line2D([], [], color="0.35"))
    return handle, band_note(stats, what)


# ---------------------------------------------------------------------------------------------- files
def figure_bytes(fig, fmt: str, dpi: int) -> bytes:
    """``fig`` rendered as ``fmt`` (:data:`FORMATS`) at ``dpi``, without dates in the metadata."""
    fmt = parse_formats([fmt])[0]
    meta = {"pdf": {"CreationDate": None}, "svg": {"Date": None}, "png": {}}[fmt]
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=check_dpi(dpi), metadata=meta)
    return buf.getvalue()


def save_figure(fig, paths: Mapping[str, str | os.PathLike], dpi: int = DEFAULT_DPI) -> list[dict[str, Any]]:
    """Write ``fig`` once per format, ``paths = {format: path}``, each atomically (:mod:`attsvm.outputs`;
    inside a :func:`~attsvm.outputs.transaction` all or none), then close it.

    Returns one record per file for the manifest: ``{"file", "format", "dpi", "width_in", "height_in"}`` and,
    for PNG, ``"width_px"``/``"height_px"`` (= inches $\\times$ dpi, rounded)."""
    dpi = check_dpi(dpi)
    w_in, h_in = (float(v) for v in fig.get_size_inches())
    records = []
    try:
        for fmt, path in paths.items():
            outputs.write_bytes(path, figure_bytes(fig, fmt, dpi))
            rec: dict[str, Any] = {"file": Path(path).name, "format": fmt, "dpi": dpi}
            rec.update(width_in=round(w_in, 4), height_in=round(h_in, 4))
            if fmt == "png":
                rec.update(width_px=int(round(w_in * dpi)), height_px=int(round(h_in * dpi)))
            records.append(rec)
    finally:
        _pyplot().close(fig)
    return records


__all__ = [
    "COLORS",
    "COLUMN_IN",
    "DEFAULT_DPI",
    "DEFAULT_FORMATS",
    "FORMATS",
    "MAX_DPI",
    "MIN_DPI",
    "MIN_FONT_PT",
    "PALETTE",
    "STYLE",
    "TEXT_IN",
    "band",
    "band_key",
    "band_note",
    "band_stats",
    "check_dpi",
    "figure_bytes",
    "new_figure",
    "paper_style",
    "parse_formats",
    "save_figure",
]
