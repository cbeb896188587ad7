"""``attsvm gd``: JSON output in file order, batch files, bad input → exit 2 with one ``error:`` line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attsvm import generate
from attsvm.cli import main
from attsvm.gd import run


def _call(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_runs_in_file_order_match_the_engine(tmp_path, capsys):
    ds = generate.paper_law(3, 4, 3, seed=1, B=3)
    path = ds.save(tmp_path / "b.npz")
    rc, out, err = _call(capsys, "gd", str(path), "--steps", "200", "--json")
    assert rc == 0 and err == ""
    runs = json.loads(out)["runs"]
    ref = run(ds, steps=200)
    assert len(runs) == 3
    for b, r in enumerate(runs):
        np.testing.assert_array_equal(np.array(r["W"]), ref.W[b])
        assert r["selection"] == ref.selection[b].tolist() and r["steps"] == 200 and r["stop_reason"] == "steps"
        assert r["loss"] == ref.loss[b] and r["norm"] == ref.norm[b]


def test_kq_json_has_factors_and_trajectory(tmp_path, capsys):
    path = generate.paper_law(2, 3, 3, seed=2).save(tmp_path / "s.npz")
    rc, out, _ = _call(capsys, "gd", str(path), "--param", "KQ", "--steps", "20", "--record-every", "10", "--json")
    r = json.loads(out)["runs"][0]
    K, Q, W = (np.array(r[k]) for k in ("K", "Q", "W"))
    np.testing.assert_allclose(W, K @ Q.T, rtol=1e-14, atol=1e-15)
    assert rc == 0 and r["trajectory"]["step"] == [0, 10, 20] and len(r["trajectory"]["loss"]) == 3


def test_init_file_and_plain_text_output(tmp_path, capsys):
    path = generate.paper_law(2, 3, 3, seed=2).save(tmp_path / "s.npz")
    W0 = np.eye(3)
    np.save(tmp_path / "w0.npy", W0)
    rc, out, _ = _call(capsys, "gd", str(path), "--init", str(tmp_path / "w0.npy"), "--steps", "0", "--json")
    assert rc == 0 and np.array_equal(np.array(json.loads(out)["runs"][0]["W"]), W0)
    rc, out, _ = _call(capsys, "gd", str(path), "--algo", "md", "--q", "3", "--steps", "5")
    assert rc == 0 and "stop" in out and "steps" in out


@pytest.mark.parametrize(
    "extra",
    [
        ["--lr", "fast"],
        ["--lr", "-1"],
        ["--steps", "-3"],
        ["--algo", "md"],
        ["--init", "nowhere.npy"],
        ["--record-every", "0"],
        ["--param", "Z"],
        ["--device", "tpu"],
    ],
)
def test_bad_input_exits_2_with_one_error_line(tmp_path, capsys, extra):
    path = generate.paper_law(2, 3, 3, seed=2).save(tmp_path / "s.npz")
    try:
        rc = main(["gd", str(path), *extra])
    except SystemExit as exc:  # argparse usage errors (one line, exit 2)
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1


def test_missing_or_malformed_data_file_exits_2(tmp_path, capsys):
    rc, out, err = _call(capsys, "gd", str(tmp_path / "none.npz"))
    assert rc == 2 and err.startswith("error: ") and out == ""
    bad = tmp_path / "bad.npz"
    np.savez(bad, X=np.zeros((2, 3)), Y=np.ones(2), v=np.zeros(3))
    rc, out, err = _call(capsys, "gd", str(bad))
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_cuda_without_a_device_exits_2(tmp_path, capsys):
    path = generate.paper_law(2, 3, 3, seed=2).save(tmp_path / "s.npz")
    rc, out, err = _call(capsys, "gd", str(path), "--device", "cuda", "--steps", "3")
    if torch.cuda.is_available():
        assert rc == 0
    else:
        assert rc == 2 and err == "error: device 'cuda' requested but no CUDA device is available\n" and out == ""
