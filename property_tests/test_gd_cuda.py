"""CUDA runs of the GD engine equal CPU runs within ``tol("device_rtol")`` (skipped visibly without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from attsvm import generate
from attsvm.gd import regularization_path, run
from attsvm.tolerances import tol


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b))))


@pytest.mark.cuda
@pytest.mark.parametrize(
    "kw",
    [
        dict(param="W", algo="ngd"),
        dict(param="W", algo="gd", lr="1/L"),
        dict(param="W", algo="md", q=3.0, lr=0.5),
        dict(param="KQ", algo="ngd", init="random"),
        dict(param="p", algo="ngd"),
        dict(param="vp", algo="gd", lr=0.5, init="random"),
        dict(param="W", algo="signum", lr=0.05, minibatch=3),
    ],
    ids=["W-ngd", "W-gd", "W-md", "KQ-ngd", "p-ngd", "vp-gd", "W-signum-minibatch"],
)
def test_cuda_equals_cpu(kw):
    ds = generate.causal(2, 5, 4, seed=0, B=4)
    c = run(ds, steps=200, seed=1, device="cpu", record_every=50, **kw)
    g = run(ds, steps=200, seed=1, device="cuda", record_every=50, **kw)
    for b in range(4):
        for k, v in c.params(b).items():
            assert _rel(g.params(b)[k], v) <= tol("device_rtol", device="cuda"), k
    assert np.array_equal(c.selection, g.selection) and c.stop_reason == g.stop_reason
    assert np.allclose(c.trajectory["loss"], g.trajectory["loss"], rtol=tol("device_rtol", device="cuda"))


@pytest.mark.cuda
def test_cuda_regularization_path_equals_cpu():
    ds = generate.paper_law(3, 4, 4, seed=2, B=2)
    c = regularization_path(ds, [1.0, 5.0], steps_per_radius=100, device="cpu")
    g = regularization_path(ds, [1.0, 5.0], steps_per_radius=100, device="cuda")
    assert _rel(g.W, c.W) <= tol("device_rtol", device="cuda")


@pytest.mark.cuda
def test_cuda_runs_far_past_underflow_deterministically():
    ds = generate.paper_law(2, 3, 4, seed=0, B=8)
    a = run(ds, steps=12000, device="cuda")
    b = run(ds, steps=12000, device="cuda")
    assert np.array_equal(a.W, b.W) and np.all(np.isfinite(a.W)) and np.all(a.norm > 1000)
