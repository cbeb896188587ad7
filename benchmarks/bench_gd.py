"""Benchmarks of the batched GD engine (issue 3), printed side by side with a straightforward baseline.

1. The paper's E3 setting (n=6, T=8, d=10, lr 0.1, 2000 normalised steps) for a sweep of ``--seeds`` data
   sets (default 1000) in one batched ``attsvm.gd.run`` — timed as a whole process (interpreter start,
   imports, data generation, run) — against a per-run autograd + ``torch.optim.SGD`` loop with the
   normalised gradient, timed on ``--baseline-runs`` runs and scaled to the sweep. Same for (K,Q).
2. Precision: from W0 = 0 on a paper-law instance, 1e5 normalised steps; 1 - corr(W, W^mm) with W^mm from
   cvxpy + Clarabel; and a plain float64 normalised-GD loop (numpy closed form) that stalls once the
   gradient underflows to zero.

Run: ``python benchmarks/bench_gd.py`` (``--quick`` for a smaller smoke run).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch

from attsvm import generate, model
from attsvm.gd import run

N, T, D, STEPS, LR = 6, 8, 10, 2000, 0.1


def baseline_run(ds, param: str, steps: int) -> float:
    """One straightforward run: autograd loss from the definition, normalised gradient, torch.optim.SGD."""
    X, Y, Z, v = (torch.tensor(np.array(a)) for a in (ds.X, ds.Y, ds.Z, ds.v))
    if param == "W":
        params = [torch.zeros(D, D, dtype=torch.float64, requires_grad=True)]
    else:
        g = torch.Generator().manual_seed(0)
        K = (0.1 * torch.randn(D, D, generator=g, dtype=torch.float64)).requires_grad_()
        params = [K, torch.zeros(D, D, dtype=torch.float64, requires_grad=True)]
    opt = torch.optim.SGD(params, lr=LR)
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        W = params[0] if param == "W" else params[0] @ params[1].T
        s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), dim=-1)
        u = Y * torch.einsum("nt,ntd,d->n", s, X, v)
        loss = torch.nn.functional.softplus(-u).mean()
        loss.backward()
        with torch.no_grad():
            for p in params:
                nrm = p.grad.norm()
                if nrm > 0:
                    p.grad /= nrm
        opt.step()
    return time.perf_counter() - t0


BATCHED = """
import time; t0 = time.perf_counter()
from attsvm import generate
from attsvm.gd import run
ds = generate.paper_law({n}, {T}, {d}, seed=0, B={B})
res = run(ds, param="{param}", algo="ngd", lr={lr}, steps={steps}, threads={threads})
print(res.seconds, float(res.max_softmax.mean()))
"""


def batched_process(param: str, B: int, steps: int, threads: int) -> tuple[float, float]:
    """Wall time of a whole process running the sweep, and the engine's own time inside it."""
    code = BATCHED.format(n=N, T=T, d=D, B=B, param=param, lr=LR, steps=steps, threads=threads)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t0, float(out.split()[0])


def sweep(param: str, B: int, k: int, steps: int, threads: int) -> None:
    wall, inner = batched_process(param, B, steps, threads)
    per = [baseline_run(generate.paper_law(N, T, D, seed=s), param, steps) for s in range(k)]
    base = float(np.mean(per)) * B
    print(
        f"E3 sweep param={param:2s} B={B} steps={steps} threads={threads}:"
        f" batched whole process {wall:7.2f} s (engine {inner:6.2f} s)"
        f" | per-run autograd+SGD {np.mean(per) * 1e3:7.1f} ms/run x {B} = {base:8.1f} s"
        f" | speed-up {base / wall:6.1f}x"
    )


def wmm(ds) -> np.ndarray:
    import cvxpy as cp

    X, Z, a = np.asarray(ds.X), np.asarray(ds.Z), ds.opt
    W = cp.Variable((D, D))
    cons = [(X[i, a[i]] - X[i, t]) @ W @ Z[i] >= 1 for i in range(N) for t in range(T) if t != a[i]]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), cons)
    prob.solve(solver=cp.CLARABEL)
    if prob.status != cp.OPTIMAL:
        raise RuntimeError(f"Att-SVM solve status {prob.status}")
    return W.value


def plain_float64_loop(ds, steps: int, Wm: np.ndarray) -> tuple[int, float, float]:
    """Normalised GD with the plain float64 closed form; stops when the gradient is exactly zero."""
    W = np.zeros((D, D))
    for k in range(steps):
        G = model.grad_W(ds, W)
        nrm = np.linalg.norm(G)
        if nrm == 0.0:
            return k, float(np.linalg.norm(W)), float(1 - model.corr(W, Wm))
        W = W - LR * G / nrm
    return steps, float(np.linalg.norm(W)), float(1 - model.corr(W, Wm))


def precision(steps: int, seed: int) -> None:
    ds = generate.paper_law(N, T, D, seed=seed)
    Wm = wmm(ds)
    t0 = time.perf_counter()
    res = run(ds, steps=steps, record_every=steps // 10, targets={"mm": Wm})
    sec = time.perf_counter() - t0
    gap = 1 - res.trajectory["corr:mm"][:, 0]
    ok = bool(np.array_equal(res.selection[0], ds.opt))
    print(
        f"precision (paper law n={N} T={T} d={D} seed={seed}, W0=0): {steps} normalised steps in {sec:.1f} s,"
        f" ||W||={res.norm[0]:.1f}, 1-corr(W,W^mm)={gap[-1]:.2e} (selection = opt: {ok})"
    )
    print("   1-corr every", steps // 10, "steps:", " ".join(f"{g:.1e}" for g in gap[1:]))
    k, nrm, g = plain_float64_loop(ds, steps, Wm)
    print(f"   plain float64 normalised-GD loop: gradient exactly 0 after {k} steps at ||W||={nrm:.1f}, 1-corr={g:.2e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--baseline-runs", type=int, default=5)
    ap.add_argument("--precision-steps", type=int, default=100_000)
    ap.add_argument("--precision-seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="torch threads for both sides (default: every core; the engine's own default is 1)",
    )
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    steps = STEPS
    if a.quick:
        a.seeds, a.baseline_runs, a.precision_steps, steps = 50, 2, 10_000, 200
    for param in ("W", "KQ"):
        sweep(param, a.seeds, a.baseline_runs, steps, a.threads)
    precision(a.precision_steps, a.precision_seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
