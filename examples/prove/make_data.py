"""Regenerate the data files of the proved region lemmas (deterministic): ``python examples/prove/make_data.py``.

See ``README.md`` here for what each file is for and the ``attsvm prove`` command that proves its lemma.

* ``eq_n1.npz``      — Assumption B by hand, n=1, T=3, d=2: a non-support token far behind the support token
* ``eq_n2.npz``      — Assumption B by hand, n=2, T=3, d=2 (two inputs, independent queries)
* ``visual.npz``     — E1's 2-D instance (``generate.visual``, seed 3), alpha = opt
* ``local_d2.npz``   — strategy ``locally_optimal`` (n=2, T=3, d=2; batch of 6, seed 0, data set 2): alpha != opt
* ``local_d3.npz``   — strategy ``locally_optimal`` (n=2, T=3, d=3; batch of 6, seed 0, data set 2)
* ``e3_d2.npz``      — E3's sizes at d=2: paper law n=6, T=8, d=2, seed 27, alpha a locally optimal selection != opt
* ``e3_d3.npz``      — E3's sizes at d=3: paper law n=6, T=8, d=3, seed 46, alpha a locally optimal selection != opt
* ``notlocal_d2.npz`` — strategy ``not_locally_optimal`` (n=2, T=3, d=2; batch of 6, seed 0, data set 2)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attsvm import generate, strategies
from attsvm.data import Dataset

HERE = Path(__file__).resolve().parent


def assumption_b(n: int) -> Dataset:
    r"""Bit-exact Assumption B ($v=e_1$) with dyadic tokens: input $i$'s optimal token $(\pm\frac14, 0)$, its two
    other tokens $(0,\pm\frac1{16})$ (the support token) and $(0,\pm1)$ (a non-support token, margin $32/17$), so the
    covariance bound of ``no-stationary-equal-scores`` has slack; queries $e_1$ and $(0.6, 0.8)$."""
    X = np.array([[[0.25, 0.0], [0.0, 0.0625], [0.0, 1.0]], [[-0.25, 0.0], [0.0, -0.0625], [0.0, -1.0]]])[:n]
    Y = np.array([1.0, -1.0])[:n]
    Z = np.array([[1.0, 0.0], [0.6, 0.8]])[:n]
    return Dataset(X, Y, Z, np.array([1.0, 0.0]))


def from_strategy(name: str, d: int, index: int = 2) -> Dataset:
    """Data set ``index`` of a seeded batch of 6 of strategy ``name`` (n=2, T=3), with its selection ``alpha``."""
    b = strategies.batch(name, 6, seed=0, n=2, T=3, d=d)
    return Dataset(b.X[index], b.Y[index], b.Z[index], b.v[index], alpha=b.alpha[index])


# E3's sizes (n=6, T=8): the locally optimal selections alpha != opt with the largest mu_alpha among those induced
# by 200 random W (argmax_t x_it^T W z_i) on each of the seeds 0..79 (found once; recorded here)
E3 = {2: (27, (7, 1, 3, 6, 4, 1)), 3: (46, (6, 7, 6, 7, 3, 4))}


def e3(d: int) -> Dataset:
    """Paper-law data of E3's sizes (n=6, T=8) at dimension ``d`` with its recorded locally optimal ``alpha``."""
    seed, alpha = E3[d]
    ds = generate.paper_law(6, 8, d, seed=seed)
    return Dataset(ds.X, ds.Y, ds.Z, ds.v, alpha=np.array(alpha))


def main() -> None:
    assumption_b(1).save(HERE / "eq_n1.npz")
    assumption_b(2).save(HERE / "eq_n2.npz")
    generate.visual(seed=3).save(HERE / "visual.npz")
    from_strategy("locally_optimal", 2).save(HERE / "local_d2.npz")
    from_strategy("locally_optimal", 3).save(HERE / "local_d3.npz")
    e3(2).save(HERE / "e3_d2.npz")
    e3(3).save(HERE / "e3_d3.npz")
    from_strategy("not_locally_optimal", 2).save(HERE / "notlocal_d2.npz")


if __name__ == "__main__":
    main()
