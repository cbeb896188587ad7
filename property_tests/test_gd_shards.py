"""A batched GD run split into shards of data sets (:func:`attsvm.gd.shards.run_sharded`, issue 15).

The claim: every run of a batch depends on its own data set and its own rows of the per-run arguments only, so
the shards, run apart and concatenated in order, give ``run(ds)`` on the whole batch bit for bit — every field
but ``seconds``, including the trajectory (also where the runs of a shard all stop early and the whole run keeps
recording them frozen) and a random initial point (drawn once for the batch).

Two exceptions were found by these tests and are fixed in the engine: the logistic loss went through
``torch.logaddexp``, whose CPU kernel rounds the vectorised body of a tensor and its scalar tail differently
(about 1 ulp), so a data set's numbers depended on where its rows fell in the batch (now
:func:`attsvm.gd.model_torch.softplus_t`, from ``exp`` and ``log1p``); and ``lr="1/L"`` with the exponential loss
bounded the scores by their maximum over the whole batch (now per data set, :func:`attsvm.model.smoothness_constant`).
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from attsvm import generate, save
from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.gd import GDResult, run
from attsvm.gd.shards import plan, run_sharded, shard_bounds
from attsvm.ntp.generate import ntp
from attsvm.pool import Pool


def differences(a: GDResult, b: GDResult) -> list[str]:
    """The fields (and trajectory series) of two results that are not identical: same shape, dtype and bits
    (NaN equal to NaN); ``seconds`` excluded."""
    bad = []
    for f in fields(GDResult):
        if f.name == "seconds":
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "trajectory":
            if set(x) != set(y):
                bad.append(f"trajectory keys {sorted(x)} != {sorted(y)}")
            bad += [f"trajectory[{k}]" for k in set(x) & set(y) if not _same(x[k], y[k])]
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not _same(x, y):
                bad.append(f.name)
        elif x != y:
            bad.append(f.name)
    return bad


def _same(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")


DS = generate.paper_law(4, 5, 6, seed=3, B=7)
NTP = ntp(n=3, T=4, K=5, d=6, seed=1, B=7)
W_DIR = run(DS, param="W", algo="ngd", lr=0.1, steps=200, loss="exponential").W  # (B, d, d) targets


def case(ds, marks=(), id=None, **kw):
    return pytest.param(ds, kw, marks=marks, id=id)


CASES = [
    case(DS, id="W-ngd-exp-targets", param="W", algo="ngd", lr=0.1, steps=300, loss="exponential", record_every=25,
         targets={"a": W_DIR, "eye": np.eye(6)}),
    case(DS, id="KQ-ngd-random-exp", param="KQ", algo="ngd", lr=0.05, steps=300, loss="exponential", init="random",
         seed=5, record_every=50, record_params=True),
    case(DS, id="W-ngd-exp-stop-corr", param="W", algo="ngd", lr=0.1, steps=2000, loss="exponential",
         record_every=5, targets={"a": W_DIR}, stop_corr=1e-3),
    case(DS, id="p-gd-relu-head", param="p", algo="gd", lr=np.linspace(0.05, 0.2, 7), steps=200, loss="exponential",
         head=("relu", np.random.default_rng(0).standard_normal((7, 6, 6))), init="random", seed=2),
    case(NTP, id="ntp-W-ngd", param="W", algo="ngd", lr=0.1, steps=300, record_every=50),
    case(NTP, id="ntp-KQ-gd-1/L-random", param="KQ", algo="gd", lr="1/L", steps=300, init="random", record_every=60),
    case(DS, id="W-ngd-logistic", param="W", algo="ngd", lr=0.1, steps=300, record_every=25,
         targets={"a": W_DIR}),
    case(DS, id="KQ-ngd-random-logistic", param="KQ", algo="ngd", lr=0.05, steps=300, init="random",
         seed=5),
    case(DS, id="W-gd-1/L-logistic", param="W", algo="gd", lr="1/L", steps=300, record_every=30,
         targets={"a": W_DIR}),
    case(DS, id="W-gd-1/L-exponential", param="W", algo="gd", lr="1/L", steps=300, loss="exponential"),
]  # fmt: skip


@pytest.mark.parametrize("ds, kw", CASES)
def test_sharded_run_equals_the_whole_run_bit_for_bit(ds, kw):
    whole = run(ds, **kw)
    with Pool(1) as pool:  # the serial pool: the shards run one after the other in this process
        for shards in (2, 3, 7):
            parts = plan(ds, shards, **kw)
            assert [p[0].batch_size for p in parts] == [b - a for a, b in shard_bounds(7, shards)]
            got = run_sharded(ds, pool, shards, **kw)
            assert differences(whole, got) == [], shards


def test_the_stop_corr_case_does_pad_a_shards_trajectory():
    """The early-stop case above is a real test of the trajectory alignment: some single-run shards stop (and
    stop recording) before the whole batch does."""
    kw = dict(CASES[2].values[1])
    lengths = {len(run(shard, **skw).trajectory["step"]) for shard, skw in plan(DS, 7, **kw)}
    assert len(lengths) > 1 and max(lengths) == len(run(DS, **kw).trajectory["step"])


def test_sharded_run_on_processes_equals_the_whole_run():
    kw = dict(CASES[1].values[1])
    ss = []
    with Pool(2) as pool:
        got = run_sharded(DS, pool, on_shard=lambda done, total: ss.append((done, total)), **kw)
    assert differences(run(DS, **kw), got) == []
    assert ss == [(1, 2), (2, 2)]  # default: one shard per worker


def test_bad_input_is_the_whole_batchs_error():
    """A per-run argument that is bad for one data set: the same message as the whole run (batch indices)."""
    lr = np.full(7, 0.1)
    lr[5] = -1.0
    with pytest.raises(InputError) as whole:
        run(DS, lr=lr, steps=5)
    with Pool(1) as pool, pytest.raises(InputError) as sharded:
        run_sharded(DS, pool, 3, lr=lr, steps=5)
    assert str(sharded.value) == str(whole.value)
    with Pool(1) as pool, pytest.raises(InputError, match="shards must be a positive integer"):
        run_sharded(DS, pool, 0, steps=5)


def test_gd_runs_shards_a_large_job_the_same_way_on_every_backend(monkeypatch):
    """``attsvm.experiments.gd_runs`` cuts a job of more than GD_SHARD_ROWS data sets into shards fixed by the
    batch alone: the same numbers serially and on processes, equal to the unsplit run."""
    from attsvm.experiments import Context, gd_runs, stages

    monkeypatch.setattr(stages, "GD_SHARD_ROWS", 3)  # where gd_runs reads it  # 7 data sets -> 3 shards
    kw = dict(CASES[0].values[1])
    whole = run(DS, **kw)
    for workers in (1, 2):
        with Pool(workers) as pool:
            ctx = Context(name="t", size={"seeds": 1}, smoke=True, workers=workers, pool=pool)
            (got,) = gd_runs(ctx, [dict(ds=DS, **kw)], "gd")
        assert differences(whole, got) == [], workers


# --------------------------------------------------------------------------------------------- CLI
def _cli_json(argv, cwd: Path, capsys) -> dict:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        rc = main(argv)
    finally:
        os.chdir(old)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    out.pop("seconds")
    return out


def test_gd_cli_with_n_prints_the_serial_output(tmp_path, capsys):
    f = save(generate.paper_law(4, 5, 6, seed=4, B=7), tmp_path / "batch.npz")
    argv = ["gd", str(f), "--steps", "200", "--record-every", "50", "--json", "--quiet"]
    argv += ["--param", "KQ", "--init", "random", "--seed", "3"]
    serial = _cli_json(argv, tmp_path, capsys)
    assert _cli_json([*argv, "-n", "2"], tmp_path, capsys) == serial
    assert len(serial["runs"]) == 7 and all(np.isfinite(r["loss"]) for r in serial["runs"])
