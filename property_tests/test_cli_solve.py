"""``attsvm solve``: JSON schema, exit codes, --alpha forms, batches, and every bad input (exit 2, one
``error:`` line, nothing on stdout)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from attsvm import generate
from attsvm.cli import main
from attsvm.tolerances import tol

KEYS = {"status", "norm", "W", "objective", "margin_min", "support", "locally_optimal", "delta", "kkt", "certificate"}


def run_solve(capsys, *argv):
    try:
        rc = main(["solve", *map(str, argv)])
    except SystemExit as exc:  # argparse usage errors
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def small(tmp_path):
    return generate.paper_law(4, 5, 6, seed=3).save(tmp_path / "small.npz")


def test_json_solution(capsys, small):
    rc, out, err = run_solve(capsys, small, "--json", "--certify")
    assert rc == 0 and err == ""
    obj = json.loads(out)
    assert KEYS <= set(obj)
    assert obj["status"] == "optimal" and obj["norm_kind"] == "fro"
    assert np.array(obj["W"]).shape == (6, 6)
    assert obj["certificate"]["kind"] == "exact-rational" and obj["certificate"]["verified"] is True
    assert set(obj["kkt"]) == {
        "primal_feasibility",
        "dual_feasibility",
        "complementary_slackness",
        "stationarity",
        "objective_identity",
    }
    assert abs(obj["margin_min"] - 1) <= tol("kkt")
    assert abs(np.sum(np.array(obj["W"]) ** 2) - obj["objective"]) <= tol("kkt") * obj["objective"]


def test_human_summary(capsys, small):
    rc, out, err = run_solve(capsys, small)
    assert rc == 0 and "optimal" in out and "support tokens" in out


def test_infeasible_exit_1_with_farkas(capsys, tmp_path):
    ds = generate.centroid_infeasible(3, 6, 2, seed=4)
    f = ds.save(tmp_path / "inf.npz")
    rc, out, err = run_solve(capsys, f, "--json")
    assert rc == 1
    obj = json.loads(out)
    mu = np.array(obj["farkas"])
    assert obj["status"] == "infeasible" and mu.shape == (3, 6) and np.all(mu >= 0) and mu.sum() > 0
    assert np.all(mu[np.arange(3), ds.selection] == 0)


def test_batch_solutions(capsys, tmp_path):
    f = generate.paper_law(3, 4, 5, seed=1, B=3).save(tmp_path / "b.npz")
    rc, out, _ = run_solve(capsys, f, "--json")
    assert rc == 0
    sols = json.loads(out)["solutions"]
    assert len(sols) == 3 and all(s["status"] == "optimal" for s in sols)


@pytest.mark.parametrize("form", ["list", "npy", "txt", "json"])
def test_alpha_forms(capsys, tmp_path, small, form):
    alpha = [1, 0, 2, 4]
    arg = ",".join(map(str, alpha))
    if form == "npy":
        arg = tmp_path / "a.npy"
        np.save(arg, np.array(alpha))
    elif form == "txt":
        arg = tmp_path / "a.txt"
        arg.write_text("1 0 2 4\n")
    elif form == "json":
        arg = tmp_path / "a.json"
        arg.write_text(json.dumps(alpha))
    rc, out, _ = run_solve(capsys, small, "--alpha", arg, "--json")
    assert rc == 0 and json.loads(out)["alpha"] == alpha


def test_ties_allowed_with_explicit_alpha(capsys, tmp_path):
    ds = generate.equal_scores(3, 4, 3, seed=0)  # non-optimal scores equal, opt unique
    X = np.array(ds.X)
    X[0, 1, 0] = X[0, ds.opt[0], 0]  # now input 0 has a tie for the optimal score
    f = tmp_path / "tie.npz"
    np.savez(f, X=X, Y=ds.Y, Z=ds.Z, v=ds.v)
    rc, out, err = run_solve(capsys, f)
    assert rc == 2 and err.startswith("error:") and "tie" in err and out == ""
    rc, out, err = run_solve(capsys, f, "--alpha", ",".join(map(str, ds.opt)), "--json")
    assert rc in (0, 1) and err == "" and json.loads(out)["status"] in ("optimal", "infeasible")


def _bad_files(tmp_path):
    ds = generate.paper_law(3, 4, 5, seed=0)
    good = {"X": ds.X, "Y": ds.Y, "Z": ds.Z, "v": ds.v}
    cases = {}

    def npz(name, **over):
        f = tmp_path / f"{name}.npz"
        np.savez(f, **{**good, **over})
        cases[name] = f

    npz("shape_Z", Z=ds.Z[:, :3])
    npz("shape_v", v=np.ones(4))
    npz("nan", X=np.where(np.arange(5) == 0, np.nan, ds.X))
    npz("inf", Z=np.full_like(ds.Z, np.inf))
    npz("labels", Y=np.array([1.0, 0.0, -1.0]))
    npz("alpha_range", alpha=np.array([0, 9, 1]))
    (tmp_path / "empty.npz").write_bytes(b"")
    cases["empty"] = tmp_path / "empty.npz"
    (tmp_path / "garbage.npz").write_bytes(b"this is not a zip file at all")
    cases["garbage"] = tmp_path / "garbage.npz"
    cases["missing"] = tmp_path / "does_not_exist.npz"
    return cases


BAD = ["shape_Z", "shape_v", "nan", "inf", "labels", "alpha_range", "empty", "garbage", "missing"]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_exit_2(capsys, tmp_path, case):
    f = _bad_files(tmp_path)[case]
    rc, out, err = run_solve(capsys, f, "--json")
    assert rc == 2 and out == ""
    assert err.startswith("error:") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["--alpha", "0,1"],  # wrong count
        ["--alpha", "0,1,99,0"],  # out of range
        ["--alpha", "no_such_file.npy"],
        ["--norm", "lq"],  # lq needs --q
        ["--norm", "fro", "--q", "2"],
        ["--program", "seq"],  # cross data
        ["--norm", "bogus"],
    ],
)
def test_bad_arguments_exit_2(capsys, small, argv):
    rc, out, err = run_solve(capsys, small, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("error:") and err.count("\n") == 1


def test_console_script_subprocess(tmp_path):
    f = generate.paper_law(3, 4, 5, seed=2).save(tmp_path / "s.npz")
    p = subprocess.run([sys.executable, "-m", "attsvm", "solve", str(f), "--json"], capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["status"] == "optimal"
    bad = tmp_path / "bad.npz"
    bad.write_text("garbage")
    p = subprocess.run([sys.executable, "-m", "attsvm", "solve", str(bad)], capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.startswith("error:") and "Traceback" not in p.stderr
