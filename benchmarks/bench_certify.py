"""Rigorous Att-SVM certificates: time to certify paper-law instances (targets: (50,32,32) <= 30 s,
(100,32,64) <= 120 s), and, for comparison on a small instance, the exact-rational path vs the enclosure.

    python benchmarks/bench_certify.py
"""

from __future__ import annotations

import time

import attsvm.svm.certificate as C
from attsvm import generate
from attsvm.svm import certify_fro, solve_fro


def main() -> None:
    print(f"{'case':30s} {'solve s':>8s} {'certify s':>9s} {'kind':>20s} {'verified':>8s} {'|S|':>5s} {'repairs':>7s}")
    for shape, target in [((50, 32, 32), 30), ((100, 32, 64), 120)]:
        ds = generate.paper_law(*shape, seed=0)
        t0 = time.perf_counter()
        sol = solve_fro(ds)
        ts = time.perf_counter() - t0
        t0 = time.perf_counter()
        c = certify_fro(ds, sol=sol)
        tc = time.perf_counter() - t0
        print(
            f"{str(shape) + f' (<= {target} s)':30s} {ts:8.2f} {tc:9.2f} {c['kind']:>20s} {c['verified']!s:>8s} "
            f"{c.get('support_size', 0):5d} {c['repairs']:7d}"
        )
    ds = generate.paper_law(12, 16, 16, seed=0)
    sol = solve_fro(ds)
    for label, cap in [("exact-rational", 10**9), ("rigorous-enclosure", 0)]:
        C.EXACT_MAX_SUPPORT = cap
        t0 = time.perf_counter()
        c = certify_fro(ds, sol=sol)
        print(
            f"{'(12,16,16) ' + label:30s} {'':8s} {time.perf_counter() - t0:9.2f} "
            f"{c['kind']:>20s} {c['verified']!s:>8s}"
        )


if __name__ == "__main__":
    main()
