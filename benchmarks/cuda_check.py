"""CUDA check of the GD engine: CUDA results equal CPU results within ``tol("device_rtol")``, and a timed
100k-run sweep (paper's E3 setting, n=6, T=8, d=10, 2000 normalised steps) on the GPU.

Standalone: ``python benchmarks/cuda_check.py [--sweep-runs 100000] [--sweep-steps 2000]``.
Exit 0 when every comparison passes (or, with a SKIP line, when there is no CUDA device); 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from attsvm import generate
from attsvm.gd import run
from attsvm.tolerances import tol

CASES = [
    ("W-ngd", dict(param="W", algo="ngd")),
    ("W-gd-1/L", dict(param="W", algo="gd", lr="1/L")),
    ("W-md-q3", dict(param="W", algo="md", q=3.0, lr=0.5)),
    ("KQ-ngd", dict(param="KQ", algo="ngd", init="random")),
    ("p-ngd", dict(param="p", algo="ngd")),
    ("vp-gd", dict(param="vp", algo="gd", lr=0.5, init="random")),
    ("W-ngd-relu", dict(param="W", algo="ngd", head=("relu", np.eye(10) / np.sqrt(10)))),
]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b))))


def compare(B: int, steps: int) -> bool:
    ok = True
    rt = tol("device_rtol", device="cuda")
    for name, kw in CASES:
        ds = generate.paper_law(6, 8, 10, seed=0, B=B)
        c = run(ds, steps=steps, seed=3, device="cpu", **kw)
        g = run(ds, steps=steps, seed=3, device="cuda", **kw)
        errs = {k: _rel(g.params(b)[k], c.params(b)[k]) for b in range(B) for k in c.params(b)}
        err = max(errs.values())
        same_sel = bool(np.array_equal(c.selection, g.selection)) and c.stop_reason == g.stop_reason
        good = err <= rt and same_sel
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name:12s} B={B} steps={steps}: max rel diff {err:.2e} (tol {rt:.0e}),"
              f" selections/stop reasons equal: {same_sel}")  # fmt: skip
    # determinism on the device
    ds = generate.paper_law(6, 8, 10, seed=1, B=B)
    a, b = (run(ds, steps=steps, device="cuda") for _ in range(2))
    det = bool(np.array_equal(a.W, b.W))
    print(f"{'PASS' if det else 'FAIL'} determinism on cuda (two identical runs bitwise equal: {det})")
    return ok and det


def sweep(runs: int, steps: int, chunk: int) -> None:
    t0 = time.perf_counter()
    done, stats = 0, []
    while done < runs:
        B = min(chunk, runs - done)
        ds = generate.paper_law(6, 8, 10, seed=10_000 + done, B=B)
        res = run(ds, steps=steps, device="cuda")
        stats.append(float(res.max_softmax.mean()) * B)
        done += B
    torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    print(
        f"sweep: {runs} runs x {steps} normalised steps (n=6,T=8,d=10) on {torch.cuda.get_device_name()}:"
        f" {sec:.1f} s ({sec / runs * 1e3:.3f} ms/run); mean max softmax {sum(stats) / runs:.4f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare-runs", type=int, default=16)
    ap.add_argument("--compare-steps", type=int, default=300)
    ap.add_argument("--sweep-runs", type=int, default=100_000)
    ap.add_argument("--sweep-steps", type=int, default=2000)
    ap.add_argument("--chunk", type=int, default=100_000, help="data sets per batched call")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: torch.cuda.is_available() is False")
        print("SKIP cuda_check (nothing compared, nothing timed)")
        return 0
    ok = compare(a.compare_runs, a.compare_steps)
    sweep(a.sweep_runs, a.sweep_steps, a.chunk)
    print("cuda_check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
