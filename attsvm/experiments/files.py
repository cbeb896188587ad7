"""The files a reproduction writes into its folder (:func:`output_files`), checked writable before it runs
(:func:`check_outputs`), and the text of its caption (:func:`caption_text`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import figures, outputs
from .options import option_text
from .report import jsonable


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
    opts = "; options: " + ", ".join(f"{k} = {option_text(v)}" for k, v in options.items()) if options else ""
    return f"**{title}.** {body}\n\nRun: {kind}: {run}{opts}.\n"
