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


# ---------------------------------------------------------------------------------------------- --target
# The SVM solutions the CLI compares with are computed here independently: in closed form (n=1, T=2, where the
# one constraint <W, u z^T> >= 1, u = x_alpha - x_other, gives W^mm = u z^T / (|u|^2 |z|^2) for the Frobenius AND
# the nuclear norm: <W, u z^T> <= ||W||_* |u| |z| with equality only for W = c u z^T), or with cvxpy + Clarabel.


def _cross(tmp_path, name, X, Z, v, Y=None, alpha=None):
    from attsvm.data import Dataset

    X = np.asarray(X, dtype=float)
    Y = np.ones(X.shape[-3]) if Y is None else np.asarray(Y, dtype=float)
    return str(Dataset(X, Y, np.asarray(Z, dtype=float), np.asarray(v, dtype=float), alpha).save(tmp_path / name))


def _np_corr(A, B):
    A, B = np.asarray(A, dtype=float).ravel(), np.asarray(B, dtype=float).ravel()
    return float(A @ B / (np.linalg.norm(A) * np.linalg.norm(B)))


def _np_selection(X, Z, W):
    """argmax_t x_it^T W z_i per input (the softmax is monotone in the logits)."""
    return [int(np.argmax(X[i] @ W @ Z[i])) for i in range(X.shape[0])]


def _gd_json(capsys, *argv):
    rc, out, err = _call(capsys, "gd", *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("which", ["opt", "other"])
def test_target_corr_matches_the_closed_form_of_one_constraint(tmp_path, capsys, param, which):
    rng = np.random.default_rng(3)
    X, Z, v = rng.normal(size=(1, 2, 3)), rng.normal(size=(1, 3)), rng.normal(size=3)
    path = _cross(tmp_path, "one.npz", X, Z, v)
    opt = int(np.argmax(X[0] @ v))
    a = opt if which == "opt" else 1 - opt
    out = _gd_json(
        capsys, path, "--param", param, "--init", "random", "--steps", "7", "--target", which.replace("other", str(a))
    )
    r = out["runs"][0]
    W = np.array(r["W"])
    u, z = X[0, a] - X[0, 1 - a], Z[0]
    assert r["target_selection"] == [a] and r["target_status"] == "optimal"
    assert out["svm"] == ("fro" if param == "W" else "nuc")
    assert r["corr_target"] == pytest.approx(_np_corr(W, np.outer(u, z)), abs=1e-9)
    fin = _np_selection(X, Z, W)
    assert r["selection"] == fin and r["selection_matches_target"] == (fin == [a])
    uf = X[0, fin[0]] - X[0, 1 - fin[0]]
    assert r["final_status"] == "optimal"
    assert r["corr_final"] == pytest.approx(_np_corr(W, np.outer(uf, z)), abs=1e-9)
    if param == "KQ":  # ||W||_* / (m(W) OPT_*) - 1 with OPT_* = 1/(|u||z|), m(W) = u^T W z
        for key, uu in (("nuc_gap_target", u), ("nuc_gap_final", uf)):
            m = float(uu @ W @ z)
            want = np.linalg.svd(W, compute_uv=False).sum() * np.linalg.norm(uu) * np.linalg.norm(z) / m - 1
            assert (r[key] is None) if m <= 0 else r[key] == pytest.approx(want, rel=1e-6, abs=1e-8), (key, m)
    else:
        assert "nuc_gap_target" not in r


def _cvx_attsvm(X, Z, alpha, norm):
    """(||W||_F^2 or ||W||_*, W) of Att-SVM(alpha) in the Frobenius or nuclear norm (cross-attention), status
    checked."""
    import cvxpy as cp

    n, T, d = X.shape
    W = cp.Variable((d, d))
    cons = [(X[i, alpha[i]] - X[i, t]) @ W @ Z[i] >= 1 for i in range(n) for t in range(T) if t != alpha[i]]
    obj = cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)  # (the SOC form of ||W||_F is less accurate)
    prob = cp.Problem(cp.Minimize(obj), cons)
    tight = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12} if norm == "fro" else {}
    prob.solve(solver=cp.CLARABEL, **tight)
    assert prob.status == cp.OPTIMAL, prob.status
    return float(prob.value), np.asarray(W.value)


def test_target_corr_matches_an_independent_frobenius_solve(tmp_path, capsys):
    ds = generate.paper_law(3, 4, 4, seed=5)
    X, Z = np.asarray(ds.X), np.asarray(ds.Z)
    path = str(ds.save(tmp_path / "s.npz"))
    alpha = [(int(o) + 1) % 4 for o in ds.opt]  # an explicit, non-optimal selection
    W0 = np.random.default_rng(0).normal(size=(4, 4))
    np.save(tmp_path / "w0.npy", W0)
    np.save(tmp_path / "t.npy", np.array(alpha))
    (tmp_path / "t.json").write_text(json.dumps(alpha))
    argv = [path, "--init", str(tmp_path / "w0.npy"), "--steps", "40"]
    r = _gd_json(capsys, *argv, "--target", ",".join(map(str, alpha)))["runs"][0]
    W = np.array(r["W"])
    assert r["target_selection"] == alpha and r["target_status"] == "optimal"
    assert r["corr_target"] == pytest.approx(_np_corr(W, _cvx_attsvm(X, Z, alpha, "fro")[1]), abs=1e-9)
    fin = _np_selection(X, Z, W)
    assert r["selection"] == fin and r["final_status"] == "optimal"
    assert r["corr_final"] == pytest.approx(_np_corr(W, _cvx_attsvm(X, Z, fin, "fro")[1]), abs=1e-9)
    for f in ("t.npy", "t.json"):  # the same selection from a file
        rf = _gd_json(capsys, *argv, "--target", str(tmp_path / f))["runs"][0]
        assert {k: rf[k] for k in rf if "corr" in k or "target" in k} == {
            k: r[k] for k in r if "corr" in k or "target" in k
        }


def test_kq_nuclear_gap_matches_an_independent_nuclear_solve(tmp_path, capsys):
    ds = generate.paper_law(2, 3, 3, seed=2)
    X, Z = np.asarray(ds.X), np.asarray(ds.Z)
    path = str(ds.save(tmp_path / "s.npz"))
    r = _gd_json(capsys, path, "--param", "KQ", "--steps", "300", "--target", "opt")["runs"][0]
    W = np.array(r["W"])
    opt = [int(o) for o in ds.opt]
    assert r["target_selection"] == opt == r["selection"] and r["target_status"] == "optimal"
    val = _cvx_attsvm(X, Z, opt, "nuc")[0]
    m = min((X[i, opt[i]] - X[i, t]) @ W @ Z[i] for i in range(2) for t in range(3) if t != opt[i])
    want = np.linalg.svd(W, compute_uv=False).sum() / (m * val) - 1
    assert m > 0 and r["nuc_gap_target"] == pytest.approx(want, abs=1e-6) and r["nuc_gap_final"] == r["nuc_gap_target"]
    assert -1e-6 <= r["nuc_gap_target"] < 0.5 and 0.5 < r["corr_target"] <= 1 + 1e-12


@pytest.mark.parametrize("param", ["W", "KQ", "p"])
def test_infeasible_target_is_reported_never_a_number(tmp_path, capsys, param):
    # tokens 1 and 2 are equal: for alpha = 1 the constraint of t = 2 reads 0 >= 1 (W and p alike)
    X = [[[2.0, 0, 0], [0, 1, 0], [0, 1, 0]]]
    path = _cross(tmp_path, "inf.npz", X, [[1.0, 0.5, 0]], [1.0, 0.5, 0])
    r = _gd_json(capsys, path, "--param", param, "--steps", "30", "--target", "1")["runs"][0]
    assert r["target_status"] == "infeasible" and r["corr_target"] is None and r["selection"] == [0]
    assert r["final_status"] == "optimal" and isinstance(r["corr_final"], float)
    rc, out, err = _call(capsys, "gd", path, "--param", param, "--steps", "30", "--target", "1")
    assert rc == 0 and err == ""
    head, row = out.splitlines()[1:3]
    col = head.split().index("corr(target)")
    assert row.split()[col] == "infeasible" and row.split()[col + 1] == "False"


def test_target_opt_is_the_argmax_of_the_scores_not_the_files_alpha(tmp_path, capsys):
    ds = generate.paper_law(3, 4, 3, seed=7)
    X, v = np.asarray(ds.X), np.asarray(ds.v)
    best = [int(np.argmax(np.asarray(ds.Y)[i] * X[i] @ v)) for i in range(3)]
    other = [(b + 1) % 4 for b in best]
    path = _cross(tmp_path, "a.npz", X, ds.Z, v, ds.Y, alpha=np.array(other))
    r = _gd_json(capsys, path, "--steps", "5", "--target", "opt")["runs"][0]
    assert r["target_selection"] == best


@pytest.mark.parametrize(
    "extra",
    [
        ["--target", "1.5"],
        ["--target", "abc"],
        ["--target", "0,9,0"],  # out of range (T = 4)
        ["--target", "0,1"],  # wrong count (n = 3)
        ["--target", "nowhere.npy"],
        ["--target", "FLOATS"],
        ["--target", "opt", "--param", "vp"],
        ["--target", "opt", "TIED"],
    ],
)
def test_bad_target_exits_2_with_one_error_line(tmp_path, capsys, extra):
    path = str(generate.paper_law(3, 4, 3, seed=1).save(tmp_path / "s.npz"))
    np.save(tmp_path / "f.npy", np.array([0.5, 1.0, 2.0]))
    extra = [str(tmp_path / "f.npy") if e == "FLOATS" else e for e in extra]
    if "TIED" in extra:  # tokens 0 and 1 share the top score; the file's alpha admits the data, opt is undefined
        X = [[[1.0, 0, 0], [0, 1, 0], [0, 0, 1]]]
        path = _cross(tmp_path, "tie.npz", X, [[1.0, 0, 0]], [1.0, 1, 0], alpha=np.array([0]))
        extra = ["--target", "opt"]
    rc, out, err = _call(capsys, "gd", path, "--steps", "3", *extra)
    assert rc == 2 and out == ""
    assert err.startswith("error: --target") and err.count("\n") == 1, err


def test_target_svms_are_solved_once_per_data_set_and_selection(tmp_path, capsys, monkeypatch):
    import attsvm.gd.targets
    from attsvm.data import Dataset

    a, b = generate.paper_law(3, 4, 3, seed=1), generate.paper_law(3, 4, 3, seed=2)
    path = str(Dataset.stack([a, a, b]).save(tmp_path / "b.npz"))  # runs 0 and 1 share their data set
    calls = []
    real = attsvm.gd.targets.solve

    def counting(ds, alpha=None, *args, **kw):
        calls.append(0)
        return real(ds, alpha, *args, **kw)

    monkeypatch.setattr(attsvm.gd.targets, "solve", counting)
    runs = _gd_json(capsys, path, "--steps", "50", "--target", "opt")["runs"]
    pairs = {(d, tuple(r[k])) for d, r in zip("aab", runs) for k in ("target_selection", "selection")}
    assert runs[0] == runs[1] and len(calls) == len(pairs) <= 4


def test_a_failed_target_solve_exits_1_after_the_table(tmp_path, capsys, monkeypatch):
    import attsvm.gd.targets
    from attsvm.errors import SolverError

    def failing(*args, **kw):
        raise SolverError("planted failure\nsecond line")

    monkeypatch.setattr(attsvm.gd.targets, "solve", failing)
    path = str(generate.paper_law(2, 3, 3, seed=2).save(tmp_path / "s.npz"))
    rc, out, err = _call(capsys, "gd", path, "--steps", "5", "--target", "opt", "--json")
    r = json.loads(out)["runs"][0]
    assert rc == 1 and r["target_status"] == r["final_status"] == "solver-error" and r["corr_target"] is None
    assert err == "error: run 0: SVM solve failed (planted failure)\n"


# ---------------------------------------------------------------------------------------------- --help
def _gd_parser():
    import argparse

    from attsvm.cli import gd as gd_cli

    return gd_cli.add_parser(argparse.ArgumentParser().add_subparsers())


def test_help_documents_every_option_its_default_and_every_column(tmp_path, capsys):
    import re

    from attsvm.gd import SATURATED

    p = _gd_parser()
    text = "".join(p.format_help().split())  # argparse rewraps (and may break words at hyphens)
    for act in p._actions:  # argparse keeps no public list of a parser's options
        if not act.option_strings or act.dest == "help":
            continue
        assert act.help, act.dest
        assert "default" in act.help, act.dest
        assert "".join((act.help % {"default": act.default}).split()) in text, act.dest
    # every column the table prints is explained, the stuck rule with the engine's threshold
    path = str(generate.paper_law(2, 3, 3, seed=2).save(tmp_path / "s.npz"))
    rc, out, _ = _call(capsys, "gd", path, "--steps", "3", "--target", "opt", "--alpha", "opt")
    for col in out.splitlines()[1].split():
        assert re.search(rf"^  {re.escape(col)} ", p.epilog, re.M), col
    stuck = p.epilog[p.epilog.index("  stuck ") : p.epilog.index("  =alpha")]
    thr = re.search(r"1 - max_t s_it < ([0-9.e+-]+)", stuck)
    assert thr and float(thr.group(1)) == SATURATED and "opt_i" in stuck and "saturated" in stuck
    assert "exit codes: 0" in p.epilog and "1 some run" in p.epilog and "2 bad input" in p.epilog


# ---------------------------------------------------------------------------------------------- progress
class _TTY:
    """A stderr stand-in that says it is a terminal."""

    def __init__(self):
        self.parts = []

    def write(self, s):
        self.parts.append(s)

    def flush(self):
        pass

    def isatty(self):
        return True

    @property
    def text(self):
        return "".join(self.parts)


def test_the_engine_is_bit_identical_with_a_progress_callback():
    ds = generate.paper_law(3, 4, 3, seed=1, B=3)
    for kw in ({"param": "W"}, {"param": "KQ", "init": "random"}):
        calls: list[tuple[int, int]] = []
        a = run(ds, steps=60, **kw)
        b = run(ds, steps=60, progress=lambda k, n, seen=calls: seen.append((k, n)), **kw)
        for f in ("W", "K", "Q", "loss", "norm", "selection", "log_softmax", "stuck", "steps"):
            x, y = getattr(a, f), getattr(b, f)
            assert (x is None and y is None) or np.array_equal(x, y), f
        assert calls == [(k, 60) for k in range(61)]
    # every data set stopped at k = 0 (corr >= -1 always holds): the callback saw only k = 0
    calls = []
    res = run(
        ds, steps=60, init="random", targets={"t": np.eye(3)}, stop_corr=2.0, progress=lambda k, n: calls.append(k)
    )
    assert calls == [0] and res.stop_reason == ["target_corr"] * 3


def test_progress_shows_on_stderr_for_long_runs_and_changes_no_number(tmp_path, capsys, monkeypatch):
    path = str(generate.paper_law(3, 4, 3, seed=1, B=3).save(tmp_path / "b.npz"))
    argv = ("gd", path, "--steps", "300", "--target", "opt", "--json")
    rc, quiet, err = _call(capsys, *argv)  # default delay (2 s): a short run shows nothing
    assert rc == 0 and err == ""
    monkeypatch.setenv("ATTSVM_PROGRESS_DELAY", "0")
    rc, shown, err = _call(capsys, *argv)
    lines = err.splitlines()
    assert rc == 0 and lines[0].startswith("[gd] SVM solves (target): 0/3") and "[gd] 3 runs, steps: 0/300" in err
    assert any(x.startswith("[gd] 3 runs, steps: 300/300 (100%)") for x in lines)
    assert all(x.startswith("[gd] ") for x in lines) and len(lines) <= 3 * 11, err
    strip = lambda s: {k: v for k, v in json.loads(s).items() if k != "seconds"}  # noqa: E731
    assert strip(shown) == strip(quiet)
    rc, out, err = _call(capsys, *argv, "--quiet")
    assert rc == 0 and err == "" and strip(out) == strip(quiet)
    monkeypatch.setenv("ATTSVM_PROGRESS_DELAY", "soon")
    rc, out, err = _call(capsys, *argv)
    assert rc == 2 and out == "" and err.startswith("error: ATTSVM_PROGRESS_DELAY") and err.count("\n") == 1
    monkeypatch.setenv("ATTSVM_PROGRESS_DELAY", "0")
    tty = _TTY()  # a terminal: one line rewritten in place, ended by a newline
    monkeypatch.setattr("sys.stderr", tty)
    assert main(list(argv)) == 0
    assert strip(capsys.readouterr().out) == strip(quiet)
    assert "\r\033[K[gd] 3 runs, steps: " in tty.text and tty.text.endswith("\n") and "300/300 (100%)" in tty.text


def test_progress_display_delay_throttle_and_close():
    from attsvm.progress import Progress

    tty = _TTY()
    p = Progress("x", stream=tty, delay=1e9)
    for k in range(100):
        p.update("s", k, 100)
    p.update("s", 100, 100)
    p.close()
    assert tty.text == ""  # nothing before the delay, not even the end
    tty = _TTY()
    p = Progress("x", stream=tty, min_interval=1e9, eta=True)
    for k in range(51):
        p.update("s", k, 100)  # stops at 50 of 100 (a run that stopped early)
    assert tty.text == "\r\033[K[x] s: 0/100 (  0%)" + tty.text[len("\r\033[K[x] s: 0/100 (  0%)") :]
    assert tty.text.count("\r") == 1 and not tty.text.endswith("\n")  # throttled to the first draw
    p.close()
    assert tty.text.endswith("\n")
    import io

    plain = io.StringIO()
    p = Progress("x", stream=plain, eta=True)
    for k in range(1001):
        p.update("s", k, 1000)
    lines = plain.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("[x] s: 1000/1000 (100%)") and "ETA" in lines[5]
