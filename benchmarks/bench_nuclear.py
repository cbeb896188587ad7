"""Att-SVM* (nuclear) at (n,T,d) = (50,32,32): attsvm's barrier solver with a *proved* duality gap, side by side
with a plain cvxpy ``normNuc`` solve (Clarabel, default tolerances, no certificate).

Run: ``python benchmarks/bench_nuclear.py [--n 50 --T 32 --d 32 --seed 1] [--no-baseline]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--T", type=int, default=32)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-baseline", action="store_true")
    a = ap.parse_args()

    from attsvm.generate import paper_law
    from attsvm.svm.constraints import build
    from attsvm.svm.nuclear import solve_nuclear

    ds = paper_law(a.n, a.T, a.d, seed=a.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    sol = solve_nuclear(ds, certify=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cert = sol.certificate
    print(f"(n,T,d)=({a.n},{a.T},{a.d}) seed={a.seed}")
    print(
        f"attsvm  : {wall:7.2f} s wall {cpu:7.2f} s cpu  objective {sol.objective:.12g}  proved rel gap "
        f"{cert['rel_gap']:.2e} (verified={cert['verified']}; lower {cert['lower']:.12g}, upper {cert['upper']:.12g}; "
        f"{cert['newton_steps']} Newton steps, working set {cert['working_set']}, certificate {cert['seconds']:.2f} s, "
        f"Clarabel fallback used: {bool(cert.get('fallback', False))})"
    )
    if a.no_baseline:
        return
    import cvxpy as cp

    c = build(ds)
    t0, c0 = time.perf_counter(), time.process_time()
    W = cp.Variable((a.d, a.d))
    prob = cp.Problem(cp.Minimize(cp.normNuc(W)), [cp.sum(cp.multiply(c.D @ W, c.Zc), axis=1) >= 1])
    prob.solve(solver="CLARABEL")
    bwall, bcpu = time.perf_counter() - t0, time.process_time() - c0
    Wb = np.asarray(W.value)
    mb = c.margins(Wb).min()
    print(
        f"cvxpy   : {bwall:7.2f} s wall {bcpu:7.2f} s cpu  objective {prob.value:.12g}  status {prob.status}  "
        f"min margin {mb:.10f}  (no certificate)"
    )
    print(f"ratio   : cvxpy/attsvm wall {bwall / wall:.2f}x, cpu {bcpu / cpu:.2f}x")


if __name__ == "__main__":
    main()
