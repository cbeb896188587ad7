"""Frobenius Att-SVM speed, side by side with the straightforward baselines (paper-law data).

    python benchmarks/bench_frobenius.py [--quick]

1. (n,T,d)=(50,32,32): ``attsvm.svm.solve_fro`` vs a cvxpy model built one constraint at a time
   (a Python loop creating one constraint per (i,t)), solved by Clarabel.        target >= 50x
2. (100,32,64): the whole ``attsvm solve`` process vs a dense dual QP (full G, cvxpy + Clarabel), both run
   as subprocesses from a data file.                                                target >= 5x
3. (200,64,64): ``solve_fro`` wall time.                                            target <= 5 s
Objectives are compared (relative difference) so a fast wrong answer cannot win.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from attsvm import generate
from attsvm.svm import solve_fro
from attsvm.svm.constraints import build

DENSE_DUAL = r"""
import sys, json, numpy as np, cvxpy as cp
from attsvm.data import load
from attsvm.svm.constraints import build
c = build(load(sys.argv[1]))
G = c.gram(); G = (G + G.T) / 2
lam = cp.Variable(c.m)
prob = cp.Problem(cp.Maximize(cp.sum(lam) - 0.5 * cp.quad_form(lam, cp.psd_wrap(G))), [lam >= 0])
prob.solve(solver=cp.CLARABEL)
assert prob.status == cp.OPTIMAL, prob.status
print(json.dumps({"objective": float(np.sum(np.maximum(lam.value, 0)))}))
"""


def loop_cvxpy(ds) -> tuple[float, float]:
    """The straightforward model: one cvxpy constraint per (i, t)."""
    import cvxpy as cp

    t0 = time.perf_counter()
    W = cp.Variable((ds.d, ds.d))
    cons = []
    a = ds.selection
    for i in range(ds.n):
        for t in range(ds.T):
            if t != a[i]:
                cons.append((ds.X[i, a[i]] - ds.X[i, t]) @ W @ ds.Z[i] >= 1)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), cons)
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL, prob.status
    return time.perf_counter() - t0, float(prob.value)


def timed(f, repeat: int = 3):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the (200,64,64) case")
    args = ap.parse_args()
    rows = []

    ds = generate.paper_law(50, 32, 32, seed=0)
    tf, sol = timed(lambda: solve_fro(ds))
    assert sol.status == "optimal", "paper-law (50,32,32) instance infeasible"
    tl, obj_l = loop_cvxpy(ds)
    rows.append(("(50,32,32) solve_fro vs cvxpy loop", tf, tl, abs(sol.objective - obj_l) / obj_l, 50))

    ds = generate.paper_law(100, 32, 64, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        f = ds.save(Path(tmp) / "d.npz")
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "attsvm", "solve", str(f), "--json"], capture_output=True, text=True)
        ta = time.perf_counter() - t0
        assert p.returncode == 0, p.stderr
        obj_a = json.loads(p.stdout)["objective"]
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", DENSE_DUAL, str(f)], capture_output=True, text=True)
        td = time.perf_counter() - t0
        assert p.returncode == 0, p.stderr
        obj_d = json.loads(p.stdout)["objective"]
    rows.append(("(100,32,64) attsvm solve vs dense dual QP (processes)", ta, td, abs(obj_a - obj_d) / obj_d, 5))

    if not args.quick:
        ds = generate.paper_law(200, 64, 64, seed=0)
        t0 = time.perf_counter()
        sol = solve_fro(ds)
        t2 = time.perf_counter() - t0
        assert sol.status == "optimal"
        m = build(ds).m
        print(
            f"(200,64,64): {m} constraints, active set {sol.extra['active_set_size']}, "
            f"max KKT {max(sol.kkt.values()):.1e}"
        )
        rows.append(("(200,64,64) solve_fro (target <= 5 s)", t2, float("nan"), float("nan"), None))

    print(f"{'case':58s} {'attsvm s':>9s} {'baseline s':>10s} {'ratio':>8s} {'target':>7s} {'rel.obj.diff':>12s}")
    for name, a, b, diff, target in rows:
        ratio = b / a if np.isfinite(b) else float("nan")
        tgt = f">={target}x" if target else "<=5s"
        print(f"{name:58s} {a:9.3f} {b:10.3f} {ratio:8.1f} {tgt:>7s} {diff:12.1e}")


if __name__ == "__main__":
    main()
