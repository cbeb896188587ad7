"""The peers of ``benchmarks/bench_gd.py`` (issue 31): the JAX and batched torch programs compute attsvm's
trajectories; ``benchmarks/machine.py`` computes the float64 peak from a ``/proc/cpuinfo`` text; attsvm never
imports JAX."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import e3  # noqa: E402
import machine  # noqa: E402

from attsvm.gd import run  # noqa: E402
from attsvm.tolerances import tol  # noqa: E402

B, STEPS, EVERY = 4, 50, 10


def reference(param: str):
    """attsvm's fused kernel on the tiny case, its iterates every EVERY steps."""
    ds = e3.dataset(B)
    res = run(ds, param=param, algo="ngd", lr=e3.LR, steps=STEPS, kernel="fused", record_every=EVERY,
              record_params=True)  # fmt: skip
    return ds, res.trajectory


def worst(peer_rows: dict, tr: dict, param: str) -> float:
    """Max over the recorded steps, factors and data sets of max |peer - attsvm| / max |attsvm|."""
    out = 0.0
    for r, k in enumerate(tr["step"]):
        if k == 0:
            continue
        for p in ("W",) if param == "W" else ("K", "Q"):
            ref = tr[p][r].reshape(B, -1)
            got = np.asarray(peer_rows[int(k)][p]).reshape(B, -1)
            out = max(out, float((np.abs(got - ref).max(1) / np.abs(ref).max(1)).max()))
    return out


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_jax_peer_follows_attsvm_trajectory(param):
    pytest.importorskip("jax", reason="the JAX peer needs the optional extra bench: pip install '.[bench]'")
    import peer_jax as pj

    ds, tr = reference(param)
    th, X, Z, g = pj.device_args(e3.initial(param, B), *e3.problem(ds), param)
    runner = pj.make_runner(param, e3.LR)
    rows = {}
    for k in range(EVERY, STEPS + 1, EVERY):
        th, _ = runner(th, X, Z, g, EVERY)
        rows[k] = {p: np.asarray(a) for p, a in zip(("W",) if param == "W" else ("K", "Q"), th)}
    assert worst(rows, tr, param) <= tol("batch_rtol")


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_torch_peer_follows_attsvm_trajectory(param):
    import peer_torch
    import torch

    ds, tr = reference(param)
    X, Z, g = (torch.tensor(a) for a in e3.problem(ds))
    th = {k: torch.tensor(a) for k, a in e3.initial(param, B).items()}
    rows = {}
    for k in range(EVERY, STEPS + 1, EVERY):
        th = peer_torch.run(th, X, Z, g, e3.LR, EVERY)
        rows[k] = {p: a.numpy() for p, a in th.items()}
    assert worst(rows, tr, param) <= tol("batch_rtol")


# hand-written /proc/cpuinfo texts (first processor block, then a second one that must be ignored)
SERVER = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz
cpu MHz\t\t: 2000.000
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq

processor\t: 1
model name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz
cpu MHz\t\t: 800.000
flags\t\t: fpu sse sse2
"""
LSCPU = "Architecture:          x86_64\nCPU max MHz:           3200.0000\nCPU min MHz:           800.0000\n"
KVM = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2600.000
flags\t\t: fpu sse2 avx fma avx2 hypervisor
"""
OLD = "processor\t: 0\nmodel name\t: Old CPU\ncpu MHz\t\t: 3000.000\nflags\t\t: fpu sse sse2\n"


def test_peak_from_canned_cpuinfo():
    # 4 cores x 3.2 GHz (lscpu max) x 8 lanes (avx512f) x 2 (FMA) x 2 units = 409.6 GFLOP/s
    cpu = machine.this_cpu(SERVER, LSCPU, cores=4)
    assert (cpu.model, cpu.lanes, cpu.fma_units, cpu.mhz_source) == (
        "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 8, 2, "lscpu max MHz")  # fmt: skip
    assert cpu.peak_gflops == pytest.approx(409.6, rel=1e-12)
    # KVM, no max MHz: 2 cores x 2.6 GHz x 4 lanes (avx2) x 2 x 2 = 83.2
    cpu = machine.this_cpu(KVM, "Architecture: x86_64\n", cores=2)
    assert "nominal under KVM" in cpu.mhz_source
    assert cpu.peak_gflops == pytest.approx(83.2, rel=1e-12)
    # no FMA: 1 core x 3.0 GHz x 2 lanes (SSE2) x 2 (an add and a multiply) x 1 = 12
    assert machine.this_cpu(OLD, "", cores=1).peak_gflops == pytest.approx(12.0, rel=1e-12)
    with pytest.raises(ValueError, match="flags"):
        machine.parse_cpuinfo("processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: 1.0\n")


def test_attsvm_never_imports_jax():
    code = (
        "import sys, attsvm, attsvm.gd, attsvm.cli\n"
        "from attsvm import generate\n"
        "attsvm.gd.run(generate.paper_law(3, 4, 3, seed=0, B=2), steps=3)\n"
        "print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
