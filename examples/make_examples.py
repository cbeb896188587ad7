"""Regenerate the bundled example data files (deterministic): ``python examples/make_examples.py``.

* ``small.npz``       — paper law, n=6, T=8, d=10 (Att-SVM feasible; ``attsvm solve examples/small.npz``)
* ``infeasible.npz``  — centroid construction, n=4, T=6, d=3 with ``alpha``: Att-SVM infeasible (exit 1)
* ``batch.npz``       — a batch of 4 paper-law data sets, n=3, T=4, d=5
* ``sequence.npz``    — sequence data, n=3, T=5, d=6, K=2 (``--program seq``)
* ``causal.npz``      — causal self-attention, n=2, T=4, d=6 (``--program causal``)
* ``ntp.npz``         — next-token data, the authors' law n=6, T=4, K=6, d=8 with a cycle (``--program ntp``)
"""

from __future__ import annotations

from pathlib import Path

from attsvm import generate
from attsvm.ntp.generate import ntp

HERE = Path(__file__).resolve().parent


def main() -> None:
    generate.paper_law(6, 8, 10, seed=0).save(HERE / "small.npz")
    generate.centroid_infeasible(4, 6, 3, seed=0).save(HERE / "infeasible.npz")
    generate.paper_law(3, 4, 5, seed=1, B=4).save(HERE / "batch.npz")
    generate.sequence(3, 5, 6, K=2, seed=2).save(HERE / "sequence.npz")
    generate.causal(2, 4, 6, seed=3).save(HERE / "causal.npz")
    ntp(6, 4, 6, 8, seed=3, graph="cyclic").save(HERE / "ntp.npz")


if __name__ == "__main__":
    main()
