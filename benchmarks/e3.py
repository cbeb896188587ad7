r"""The paper's E3 setting as the GD benchmarks run it (``bench_gd.py`` and its peers): $n=6$, $T=8$, $d=10$,
``generate.paper_law(6, 8, 10, seed=0, B)``, normalised GD with $\eta=0.1$ for 2000 steps, the initial point of
``attsvm.gd.run``'s default ``init="zero"`` ($W_0=0$; $Q_0=0$, $K_0=0.1\,\mathcal N$ drawn with ``seed=0``), and the
arithmetic of one step."""

from __future__ import annotations

import numpy as np

from attsvm import generate
from attsvm.gd.init import initial_params

N, T, D, STEPS, LR = 6, 8, 10, 2000, 0.1


def dataset(B: int):
    """The sweep's B paper-law data sets (one batched data set, seed 0)."""
    return generate.paper_law(N, T, D, seed=0, B=B)


def problem(ds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``(X, Z, gam)`` float64 arrays (B,N,T,d), (B,N,d), (B,N,T) of a batched data set's flat view, with the
    scores $\gamma_{it}=Y_iv^\top x_{it}$."""
    f = ds.flat()
    X, Y, Z, v = (np.asarray(a, dtype=np.float64) for a in (f.X, f.Y, f.Z, f.v))
    return X, Z, Y[..., None] * np.einsum("bntd,bd->bnt", X, v)


def initial(param: str, B: int) -> dict[str, np.ndarray]:
    """attsvm's initial point of these runs (``init="zero"``, ``seed=0``, width $m=d$): ``{"W"}`` or ``{"K","Q"}``."""
    return initial_params(param, "zero", B, D, D, seed=0)


def flops_per_step(param: str) -> int:
    """Arithmetic of one step's contractions per data set: $4Nd(d+T)$, plus $6d^2m$ for $(K,Q)$ ($m=d$)."""
    return 4 * N * D * (D + T) + (6 * D**3 if param == "KQ" else 0)
