"""The provenance of a reproduction: the manifest written next to its numbers (package versions, device, git
revision, seeds, wall time, the figure files) and the provenance block of its caption and ``NAME.json``."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..provenance import Provenance
from .context import Context

_PACKAGES = ("attsvm", "numpy", "scipy", "torch", "cvxpy", "clarabel", "matplotlib", "sympy", "mpmath")


def _version(pkg: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def git_revision(cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the repository holding ``cwd`` (default: next to the package), or Nones."""
    where = Path(cwd) if cwd is not None else Path(__file__).resolve().parents[2]
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
