r"""Benchmarks of the batched GD engine (issue 3), printed side by side with a straightforward baseline.

1. The paper's E3 setting (n=6, T=8, d=10, lr 0.1, 2000 normalised steps) for a sweep of ``--seeds`` data
   sets (default 1000) in one batched ``attsvm.gd.run`` — timed as a whole process (interpreter start,
   imports, data generation, run) — against a per-run autograd + ``torch.optim.SGD`` loop with the
   normalised gradient, timed on ``--baseline-runs`` runs and scaled to the sweep. Same for (K,Q).
2. Precision: from W0 = 0 on a paper-law instance, 1e5 normalised steps; 1 - corr(W, W^mm) with W^mm from
   cvxpy + Clarabel; and a plain float64 normalised-GD loop (numpy closed form) that stalls once the
   gradient underflows to zero.

The batched sweep runs with each kernel of ``attsvm.gd.run`` (``--kernels``, default both: ``fused``, the compiled
CPU kernel that ``kernel="auto"`` takes for these runs, and ``torch``), two ways each: one process with
``--threads`` threads, and sharded over ``--workers`` single-threaded processes of the pool
(:func:`attsvm.gd.shards.run_sharded` on :class:`attsvm.pool.Pool`, bit-identical to the one-process run). Each line
prints the speed-up over the loop and the achieved GFLOP/s of the engine: the arithmetic of the four contractions
per step and data set, $4Nd(d+T)$ for $W$ (logits $x^\top Wz$ and the gradient $\sum_t\omega_tx_tz^\top$) plus
$6d^2m$ for $(K,Q)$ ($KQ^\top$, $GQ$, $G^\top K$), over the engine's own wall time. The fused kernel's compiled
code is cached on disk by numba; ``--cold`` also times one fused process with an empty cache (the first run after
an install, compilation included).

3. ``--compile-probe``: one plain normalised-GD step on $W$ written as a single function, eager against
   ``torch.compile`` (inductor, CPU): compile time and ms per step (why the engine stays eager on CPU).

Run: ``python benchmarks/bench_gd.py`` (``--quick`` for a smaller smoke run).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
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
kw = dict(param="{param}", algo="ngd", lr={lr}, steps={steps}, kernel="{kernel}")
if {workers} > 1:
    from attsvm.gd.shards import run_sharded
    from attsvm.pool import Pool
    with Pool(workers={workers}) as pool:
        t1 = time.perf_counter()
        res = run_sharded(ds, pool, **kw)
        inner = time.perf_counter() - t1
else:
    res = run(ds, threads={threads}, **kw)
    inner = res.seconds
print(inner, float(res.max_softmax.mean()))
"""


def flops_per_step(param: str) -> int:
    """Arithmetic of one step's contractions per data set: $4Nd(d+T)$, plus $6d^2m$ for $(K,Q)$ ($m=d$)."""
    return 4 * N * D * (D + T) + (6 * D**3 if param == "KQ" else 0)


def batched_process(
    param: str, B: int, steps: int, threads: int, workers: int, kernel: str, env: dict | None = None
) -> tuple[float, float, float]:
    """Wall time of a whole process running the sweep, the engine's own time inside it, and a summary number
    (the mean final max softmax: the two ways of a kernel must print the same)."""
    code = BATCHED.format(
        n=N, T=T, d=D, B=B, param=param, lr=LR, steps=steps, threads=threads, workers=workers, kernel=kernel
    )
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    inner, summary = (float(x) for x in out.split())
    return time.perf_counter() - t0, inner, summary


def sweep(param: str, B: int, k: int, steps: int, threads: int, workers: int, kernels: list[str], cold: bool) -> None:
    ways = [("1 process", threads, 1)] + ([(f"{workers} processes", 1, workers)] if workers > 1 else [])
    runs = []
    if cold:
        with tempfile.TemporaryDirectory() as tmp:  # an empty numba cache: the kernel is compiled in this process
            env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
            runs.append((f"fused, 1 process, {threads} threads, empty cache", *batched_process(
                param, B, steps, threads, 1, "fused", env)))  # fmt: skip
    runs += [
        (f"{kern}, {label}{f', {thr} threads' if w == 1 else ''}", *batched_process(param, B, steps, thr, w, kern))
        for kern in kernels
        for label, thr, w in ways
    ]
    per = [baseline_run(generate.paper_law(N, T, D, seed=s), param, steps) for s in range(k)]
    base = float(np.mean(per)) * B
    print(
        f"E3 sweep param={param:2s} B={B} steps={steps}: per-run autograd+SGD loop {np.mean(per) * 1e3:7.1f} ms/run"
        f" (median {np.median(per) * 1e3:.1f}, {k} runs) x {B} = {base:8.1f} s"
    )
    for label, wall, inner, summary in runs:
        gflops = flops_per_step(param) * B * steps / inner / 1e9
        print(
            f"   {label:42s}: whole process {wall:6.2f} s (engine {inner:6.2f} s, {gflops:5.2f} GFLOP/s)"
            f" | speed-up {base / wall:6.1f}x | mean final max s {summary:.15f}"
        )


PROBE_B = 1000


def compile_probe(steps: int) -> None:
    """One plain normalised-GD step on W as a single function: eager vs torch.compile (inductor, CPU)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(PROBE_B, N, T, D, dtype=torch.float64, generator=g)
    Z = torch.randn(PROBE_B, N, D, dtype=torch.float64, generator=g)
    gam = torch.randn(PROBE_B, N, T, dtype=torch.float64, generator=g)

    def one_step(W: torch.Tensor) -> torch.Tensor:
        a = torch.matmul(X, torch.matmul(Z, W.transpose(-1, -2)).unsqueeze(-1)).squeeze(-1)
        s = torch.softmax(a, dim=-1)
        u = (s * gam).sum(-1)
        w = (-torch.sigmoid(-u) / N).unsqueeze(-1) * s * (gam - u.unsqueeze(-1))
        G = torch.matmul(torch.matmul(X.transpose(-1, -2), w.unsqueeze(-1)).squeeze(-1).transpose(-1, -2), Z)
        return W - LR * G / torch.linalg.vector_norm(G.flatten(1), dim=-1).view(-1, 1, 1)

    def per_step(f) -> float:
        W = f(torch.zeros(PROBE_B, D, D, dtype=torch.float64))
        t0 = time.perf_counter()
        for _ in range(steps):
            W = f(W)
        return (time.perf_counter() - t0) / steps * 1e3

    eager = per_step(one_step)
    t0 = time.perf_counter()
    try:
        compiled = torch.compile(one_step, dynamic=False)
        compiled(torch.zeros(PROBE_B, D, D, dtype=torch.float64))
    except Exception as exc:  # no C++ compiler, or inductor unsupported here
        print(f"compile probe: torch.compile failed here ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
        return
    ctime = time.perf_counter() - t0
    print(
        f"compile probe (B={PROBE_B}, one W step as one function, {torch.get_num_threads()} threads): eager"
        f" {eager:.2f} ms/step; torch.compile {per_step(compiled):.2f} ms/step after {ctime:.1f} s of compilation"
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
    res = run(ds, steps=steps, record_every=steps // 10, targets={"mm": Wm})  # the fused kernel (auto)
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
    ap.add_argument("--workers", type=int, default=2, help="processes of the sharded sweep (1: only one process)")
    ap.add_argument("--compile-probe", action="store_true", help="also time torch.compile on one W step")
    ap.add_argument("--kernels", default="fused,torch", help="kernels of the sweep, comma-separated (fused,torch)")
    ap.add_argument("--cold", action="store_true", help="also one fused process with an empty numba cache")
    ap.add_argument("--skip-precision", action="store_true", help="only the sweeps")
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
        sweep(param, a.seeds, a.baseline_runs, steps, a.threads, a.workers, a.kernels.split(","), a.cold)
    if a.compile_probe:
        compile_probe(50 if a.quick else 200)
    if not a.skip_precision:
        precision(a.precision_steps, a.precision_seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
