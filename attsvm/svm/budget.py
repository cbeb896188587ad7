r"""Memory estimates, checked before a program allocates its working arrays.

The limit is the machine's physical memory, ``os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')``, or
the environment variable ``ATTSVM_MEMORY_BYTES`` when set (a positive integer number of bytes; tests use it).
:func:`require` raises :class:`~attsvm.errors.InputError` (exit 2 at the CLI) with the estimate and the limit.

The estimates (:func:`estimate`) are upper-bound style counts of the float64 arrays each program forms, with
$m$ constraints, $d$ the token dimension, $N$ the flat rows and $r=d\cdot\min(d,N)\ge\dim\mathrm{span}\{A_j\}$:

* every program: the constraints $D,Z_c$ and their index arrays, $\approx 8(6md+8m)$ bytes, plus the Farkas and
  max-margin LPs (dense $m\times(d^2+1)$, three copies) that decide infeasible or barely feasible instances;
* Frobenius (working set): $O(m)$ vectors and Gram blocks of at most $(r+2r+16)^2$ entries (the passive set is
  linearly independent, so $|P|\le r$) - never the $m\times m$ Gram matrix;
* nuclear (barrier on a working set $S$): about twelve $|S|\times|S|$ matrices, $|S|\le\min(m,\max(200,4r))$ at
  the start (the barrier checks its actual size again before it allocates, :func:`require`);
* cvxpy + Clarabel programs (ℓq, Gen-SVM, prompt/head/relaxed, the Frobenius fallback): about 400 bytes per
  nonzero of the $m\times d^2$ constraint matrix;
* ``certify``: Python integers for the exact data and the exact margins, about 64 bytes per integer.
"""

from __future__ import annotations

import os

from ..data import Dataset
from ..errors import InputError

ENV = "ATTSVM_MEMORY_BYTES"


def physical_memory() -> int | None:
    """Total physical memory in bytes (``sysconf``), or None where the platform does not say."""
    try:
        n = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None
    return n if n > 0 else None


def memory_limit() -> int | None:
    """The limit in bytes: ``ATTSVM_MEMORY_BYTES`` if set, else :func:`physical_memory` (None: unknown)."""
    env = os.environ.get(ENV)
    if env is not None and env.strip():
        try:
            n = int(env.strip())
        except ValueError as exc:
            raise InputError(f"{ENV} must be a positive integer number of bytes, got {env!r}") from exc
        if n <= 0:
            raise InputError(f"{ENV} must be a positive integer number of bytes, got {env!r}")
        return n
    return physical_memory()


def human(n: float) -> str:
    """Bytes with a binary unit (``1.5 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def require(nbytes: float, what: str) -> None:
    """Refuse (:class:`InputError`) when ``nbytes`` exceeds :func:`memory_limit`; one line with both numbers."""
    limit = memory_limit()
    if limit is not None and nbytes > limit:
        src = ENV if os.environ.get(ENV, "").strip() else "physical memory"
        raise InputError(f"{what} needs about {human(nbytes)} of memory, more than the limit of {human(limit)} ({src})")


def constraint_count(ds: Dataset) -> tuple[int, int]:
    """$(m, N)$: the number of Att-SVM constraints and flat rows of one data set (no arrays are built)."""
    n, T = ds.n, ds.T
    if ds.kind == "causal":
        return n * T * (T - 1) // 2, n * T
    N = n * (ds.K or 1)
    return N * (T - 1), N


def estimate(ds: Dataset, norm: str = "fro", program: str = "attsvm", certify: bool = False) -> float:
    """Estimated peak bytes of :func:`attsvm.svm.solve` for one data set (module docstring)."""
    m, N = constraint_count(ds)
    d = ds.d
    r = d * min(d, max(N, 1))
    data = 8.0 * ds.X.size * 3
    base = data + 8.0 * (6 * m * d + 8 * m)
    lp = 8.0 * 3 * m * (d * d + 1)
    if program in ("attsvm", "seq", "causal") and norm == "fro":
        block = min(m, 3 * r + 16)
        core = 8.0 * 6 * block * block
    elif program in ("attsvm", "seq", "causal") and norm == "nuc":
        s = min(m, max(200, 4 * r))
        core = 8.0 * 12 * s * s + 8.0 * 10 * m * d
    else:
        rows = m if program not in ("head",) else ds.n
        core = 400.0 * rows * d * d
    exact = 64.0 * (ds.X.size + 2 * m * d + m * min(r, m)) if certify else 0.0
    return base + lp + core + exact
