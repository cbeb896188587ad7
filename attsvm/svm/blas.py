"""Best-effort control of the BLAS thread count (no extra dependency).

The working-set solvers factor matrices of a few hundred to a few thousand rows many times; on a machine
whose cores are shared (CI with ``pytest -n 2``) a multi-threaded OpenBLAS then spends most of its time
spinning. :func:`blas_threads` sets the thread count of every OpenBLAS loaded in the process (numpy's and
scipy's bundled copies) for the duration of a ``with`` block and restores it afterwards. When no OpenBLAS
symbol is found it does nothing.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager

_NAMES = (
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)
_cache: list[tuple[object, object]] | None = None


def _libs() -> list[tuple[object, object]]:
    global _cache
    if _cache is not None:
        return _cache
    out: list[tuple[object, object]] = []
    try:
        with open("/proc/self/maps") as fh:
            paths = {ln.split()[-1] for ln in fh if "openblas" in ln.lower() and ln.split()[-1].startswith("/")}
    except OSError:
        paths = set()
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        for g, s in _NAMES:
            if hasattr(lib, g) and hasattr(lib, s):
                out.append((getattr(lib, g), getattr(lib, s)))
                break
    _cache = out
    return out


@contextmanager
def blas_threads(n: int | None = 1) -> Iterator[None]:
    """Run the block with ``n`` BLAS threads (``ATTSVM_BLAS_THREADS`` overrides; ``None``: unchanged)."""
    env = os.environ.get("ATTSVM_BLAS_THREADS")
    if env:
        n = int(env)
    if n is None:
        yield
        return
    libs = _libs()
    old = [int(g()) for g, _ in libs]
    try:
        for _, s in libs:
            s(int(n))
        yield
    finally:
        for (_, s), o in zip(libs, old):
            s(o)
