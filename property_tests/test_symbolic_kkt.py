"""Instance-level KKT of Att-SVM in exact rationals (``attsvm derive kkt``)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from attsvm.cli import main
from attsvm.data import Dataset, load, save
from attsvm.symbolic.kkt_instance import agrees, certify, derivation_of, exact_data, solve_exact


def tiny() -> Dataset:
    """Two inputs with one constraint each: w11 >= 1 and 2 w22 >= 1, so W = diag(1, 1/2), lambda = (1, 1/4)."""
    X = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]]])
    return Dataset(X=X, Y=np.array([1.0, 1.0]), Z=np.array([[1.0, 0.0], [0.0, 1.0]]), v=np.array([1.0, 1.0]))


# the certificate dict built by hand (sympy Rationals), independently of any solver
HAND = {
    "active": [[0, 1], [1, 1]],
    "multipliers": [[0, 1, str(sp.Rational(1))], [1, 1, str(sp.Rational(1, 4))]],
    "W": [["1", "0"], ["0", str(sp.Rational(1, 2))]],
    "verified": True,
}


def line() -> Dataset:
    """n=1, T=3, d=1, tokens 2, 0, 1: constraints 2w >= 1 and w >= 1, so W = 1 with only t=2 active."""
    return Dataset(X=np.array([[[2.0], [0.0], [1.0]]]), Y=np.array([1.0]), Z=np.array([[1.0]]), v=np.array([1.0]))


def test_exact_solve_reproduces_hand_certificate():
    labels, D, Z, _ = exact_data(tiny())
    ex = solve_exact(labels, D, Z, HAND["active"])
    assert ex.verified and agrees(HAND, ex)
    assert ex.lam == [Fraction(1), Fraction(1, 4)] and ex.W == [[1, 0], [0, Fraction(1, 2)]]
    wrong = dict(HAND, multipliers=[[0, 1, "1"], [1, 1, "1/3"]])
    assert not agrees(wrong, ex)


def test_certify_matches_hand_certificate():
    out = certify(tiny())
    assert out["verified"] is True and out["kind"] == "exact-rational"
    assert out["multipliers"] == HAND["multipliers"] and out["W"] == HAND["W"]
    assert out["active"] == out["support"] == HAND["active"] and out["min_other_margin"] is None


def test_wrong_active_sets_fail():
    labels, D, Z, _ = exact_data(line())
    good = solve_exact(labels, D, Z, [(0, 2)])
    assert good.verified and good.W == [[1]] and good.min_other_margin() == 2
    low = solve_exact(labels, D, Z, [(0, 1)])  # W = 1/2 violates the other constraint
    assert not low.verified and not low.checks()["other_margins_at_least_one"]
    sing = solve_exact(labels, D, Z, [(0, 1), (0, 2)])  # parallel features: singular system
    assert not sing.verified and not sing.checks()["solvable"]


def test_floats_are_taken_exactly():
    ds = Dataset(X=np.array([[[0.1], [0.0]]]), Y=np.array([1.0]), Z=np.array([[1.0]]), v=np.array([1.0]))
    out = certify(ds)
    # constraint 0.1 w >= 1 with 0.1 the binary float: W = 1 / fl(0.1) exactly
    assert Fraction(out["W"][0][0]) == 1 / Fraction(0.1) != 10


@given(st.integers(0, 2**32 - 1))
def test_random_instances_certify(seed):
    rng = np.random.default_rng(seed)
    n, T, d = 2, 3, 3  # d >= max(T-1, n): generic data are feasible for every selection
    ds = Dataset(
        X=rng.normal(size=(n, T, d)), Y=rng.choice([-1.0, 1.0], size=n), Z=rng.normal(size=(n, d)), v=rng.normal(size=d)
    )
    out = certify(ds)
    assert out["verified"], out["checks"]
    W = np.array([[float(Fraction(q)) for q in row] for row in out["W"]])
    # independent float re-evaluation of the margins of the exact W
    a = ds.opt
    for i in range(n):
        for t in range(T):
            if t != a[i]:
                assert (ds.X[i, a[i]] - ds.X[i, t]) @ W @ ds.Z[i] >= 1 - 1e-9
    lam_sum = sum(Fraction(q) for _, _, q in out["multipliers"])
    np.testing.assert_allclose(np.sum(W * W), float(lam_sum), rtol=1e-12)


def test_instance_derivation_renders_and_verifies():
    labels, D, Z, a = exact_data(tiny())
    d = derivation_of(solve_exact(labels, D, Z, HAND["active"]), alpha=a)
    assert d.verify(), d.failures()
    tex = d.latex()
    assert r"\frac{1}{4}" in tex and r"\lambda_{1,1}" in tex


class _R:
    def __init__(self, rc, out, err):
        self.returncode, self.stdout, self.stderr = rc, out, err


@pytest.fixture
def _cli(capsys):
    """Run ``attsvm derive kkt ...`` in-process (the same ``main`` as the console script)."""

    def run(*args):
        capsys.readouterr()
        rc = main(["derive", "kkt", *args])
        out = capsys.readouterr()
        return _R(rc, out.out, out.err)

    return run


def test_console_script_entry_point(tmp_path):
    f = save(tiny(), tmp_path / "tiny.npz")
    r = subprocess.run(
        [sys.executable, "-m", "attsvm", "derive", "kkt", "--data", str(f), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and json.loads(r.stdout)["verified"] is True


def test_cli_kkt(tmp_path, _cli):
    f = save(tiny(), tmp_path / "tiny.npz")
    tex = tmp_path / "kkt.tex"
    r = _cli("--data", str(f), "--json", "--latex", str(tex), "--standalone")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verified"] is True and out["multipliers"] == HAND["multipliers"] and out["W"] == HAND["W"]
    assert tex.read_text().startswith(r"\documentclass")


def test_cli_kkt_errors(tmp_path, _cli):
    r = _cli()
    assert r.returncode == 2 and r.stderr.startswith("error:") and "--data" in r.stderr
    f = save(line(), tmp_path / "line.npz")
    r = _cli("--data", str(f), "--alpha", "x")
    assert r.returncode == 2 and r.stderr.startswith("error: --alpha")
    r = _cli("--data", str(f), "--alpha", "7")
    assert r.returncode == 2 and r.stderr.startswith("error:")
    r = _cli("--data", str(f), "--alpha", "2")  # token 1 lies between tokens 0 and 2: infeasible
    assert r.returncode == 1 and r.stderr.startswith("error:")
    r = _cli("--data", str(tmp_path / "missing.npz"))
    assert r.returncode == 2


@pytest.mark.parametrize("alpha", ["0", "2"])
def test_cli_kkt_alpha_changes_the_program(tmp_path, alpha, _cli):
    f = save(line(), tmp_path / "line.npz")
    r = _cli("--data", str(f), "--alpha", alpha, "--json")
    if alpha == "0":
        assert r.returncode == 0 and json.loads(r.stdout)["alpha"] == [0]
    else:
        assert r.returncode == 1


def test_disagreeing_solver_certificate_is_rejected(monkeypatch):
    """The exact re-solve is independent: a solver certificate with a wrong multiplier is caught."""
    import attsvm.svm as svm

    wrong = dict(HAND, multipliers=[[0, 1, "1"], [1, 1, "1/3"]], kind="exact-rational")
    monkeypatch.setattr(svm, "certify_fro", lambda ds, alpha=None, sol=None: wrong, raising=False)
    out = certify(tiny())
    assert out["agrees"] is False and out["verified"] is False
    assert out["multipliers"] == HAND["multipliers"]  # the exact values, not the solver's


def test_solver_reporting_infeasible_raises(monkeypatch):
    import attsvm.svm as svm
    from attsvm.errors import InfeasibleError

    monkeypatch.setattr(
        svm, "certify_fro", lambda ds, alpha=None, sol=None: {"verified": False, "reason": "infeasible"}, raising=False
    )
    with pytest.raises(InfeasibleError):
        certify(tiny())


# ---------------------------------------------------------------------- a real float instance: enclosures + exact file
SMALL = Path(__file__).resolve().parents[1] / "examples" / "small.npz"
ENCLOSED = re.compile(r"(\\lambda|w)_\{(\d+),(\d+)\} &(\\in|=) (\\left\[(\S+),\\,(\S+)\\right\]|\S+)")


def _enclosures_in(tex: str) -> dict[tuple[str, int, int], tuple[Fraction, Fraction]]:
    """Every displayed multiplier and entry of W of an instance document, read back as exact fractions."""
    out = {}
    for m in ENCLOSED.finditer(tex):
        name = "lam" if m.group(1) == "\\lambda" else "w"
        if m.group(4) == "=":
            v = m.group(5).replace("\\frac{", "").replace("}{", "/").rstrip("}")
            out[(name, int(m.group(2)), int(m.group(3)))] = (Fraction(v), Fraction(v))
        else:
            out[(name, int(m.group(2)), int(m.group(3)))] = (Fraction(m.group(6)), Fraction(m.group(7)))
    return out


def test_cli_kkt_real_instance_writes_exact_values_beside_the_document(tmp_path, _cli):
    tex = tmp_path / "small.tex"
    r = _cli("--data", str(SMALL), "--json", "--latex", str(tex), "--standalone")
    assert r.returncode == 0, r.stderr
    cert = json.loads(r.stdout)
    exact_file = tmp_path / "small.exact.json"
    assert cert["exact_values_file"] == str(exact_file)
    exact = json.loads(exact_file.read_text())
    assert exact["multipliers"] == cert["multipliers"] and exact["W"] == cert["W"]
    assert exact["data"]["sha256"] == hashlib.sha256(SMALL.read_bytes()).hexdigest()
    doc = tex.read_text()
    assert "small.exact.json" in doc
    # every margin in the file, recomputed here from the data floats and the exact W
    ds = load(SMALL)
    W = [[Fraction(q) for q in row] for row in exact["W"]]
    a = ds.opt
    for i, t, q in exact["margins"]:
        D = [Fraction(float(ds.X[i, a[i], k])) - Fraction(float(ds.X[i, t, k])) for k in range(ds.d)]
        z = [Fraction(float(ds.Z[i, k])) for k in range(ds.d)]
        assert sum(D[r] * W[r][c] * z[c] for r in range(ds.d) for c in range(ds.d)) == Fraction(q)
    # every printed value contains the exact one, and no 2900-digit fraction is printed
    shown = _enclosures_in(doc)
    values = {("lam", i, t): Fraction(q) for i, t, q in exact["multipliers"]}
    values |= {("w", r, c): Fraction(q) for r, row in enumerate(exact["W"]) for c, q in enumerate(row)}
    assert set(shown) == set(values)
    for key, (lo, hi) in shown.items():
        assert lo <= values[key] <= hi and hi - lo <= abs(values[key]) * Fraction(1, 10**11), key
    assert max(len(w) for w in re.findall(r"\d+", doc)) < 40


def test_cli_kkt_stdout_prints_enclosures_of_the_exact_values(tmp_path, _cli):
    exact = json.loads(_cli("--data", str(SMALL), "--json").stdout)
    r = _cli("--data", str(SMALL))
    assert r.returncode == 0 and "certified enclosures" in r.stdout and "with --json" in r.stdout
    lines = dict(re.findall(r"^  lambda\[(\d+,\d+)\] in (\[.*\])$", r.stdout, re.M))
    assert len(lines) == len(exact["multipliers"])
    for i, t, q in exact["multipliers"]:
        lo, hi = (Fraction(x) for x in lines[f"{i},{t}"].strip("[]").split(", "))
        assert lo <= Fraction(q) <= hi
    values = [ln for ln in r.stdout.splitlines() if ln.startswith(("  lambda[", "  W[", "  min other"))]
    assert len(values) == len(exact["multipliers"]) + len(exact["W"]) ** 2 + 1
    assert max(len(ln) for ln in values) < 80


def test_cli_kkt_exact_values_and_document_are_all_or_none(tmp_path, _cli):
    f = save(tiny(), tmp_path / "tiny.npz")
    (tmp_path / "out.exact.json").mkdir()  # the exact values cannot be written
    r = _cli("--data", str(f), "--latex", str(tmp_path / "out.tex"))
    assert r.returncode == 2 and r.stderr.startswith("error:") and "exact" in r.stderr
    assert not (tmp_path / "out.tex").exists()


def test_instance_prose_has_no_ascii_math():
    from attsvm.symbolic.derivation import prose_problems

    labels, D, Z, a = exact_data(tiny())
    d = derivation_of(solve_exact(labels, D, Z, HAND["active"]), alpha=a, exact_file="out.exact.json")
    assert d.prose_problems() == []
    assert prose_problems(d.summary) == []
