"""Robustness of ``attsvm.svm`` and ``attsvm solve`` / ``attsvm derive kkt`` (issue 11): scale equivariance
(exact power-of-two rescaling), memory estimates and large instances, degenerate shapes (T=1, n=1, d=1, zero
constraint rows), explicit selections on tied data, the norm fields of the JSON, and the layered, acyclic
import graph of ``attsvm/svm``. Every CLI case checks the exact exit code, the one ``error:`` line and the
absence of a traceback."""

from __future__ import annotations

import ast
import json
import tracemalloc
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import attsvm.svm as svm
from attsvm import generate
from attsvm.cli import main
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.svm import budget, feasibility, solve, solve_fro
from attsvm.tolerances import tol

SVM_DIR = Path(svm.__file__).parent


# ---------------------------------------------------------------------------------------------- helpers
def _cli(capsys, *argv) -> tuple[int, str, str]:
    try:
        rc = main([*map(str, argv)])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def _one_error_line(err: str, *needles: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip() and "Warning" not in ln and "warn" not in ln]
    errs = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errs) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in errs[0], errs[0]


def _base() -> Dataset:
    return generate.paper_law(3, 4, 3, seed=0)


def _scaled(ds: Dataset, cx: float = 1.0, cz: float = 1.0) -> Dataset:
    """``ds`` with X*cx, Z*cz and the same selection (given explicitly: a rescaling does not change opt)."""
    return Dataset(ds.X * cx, ds.Y, ds.Z * cz, ds.v, np.asarray(ds.selection), ds.kind)


def _farkas_residual(ds: Dataset, mu: np.ndarray) -> float:
    r"""$\|\sum\mu_{it}(x_{i\alpha_i}-x_{it})z_i^\top\|_F/\sum\mu_{it}\|x_{i\alpha_i}-x_{it}\|\|z_i\|$ from the arrays
    (prescaled by powers of two so that nothing overflows)."""
    X = np.ldexp(ds.X, -int(np.frexp(np.abs(ds.X).max())[1]))
    Z = np.ldexp(ds.Z, -int(np.frexp(np.abs(ds.Z).max())[1]))
    D = X[np.arange(ds.n), ds.selection][:, None, :] - X  # (n, T, d), zero at alpha
    S = np.einsum("it,itd,ie->de", mu, D, Z)
    scale = np.sum(mu * np.linalg.norm(D, axis=-1) * np.linalg.norm(Z, axis=-1)[:, None])
    return float(np.linalg.norm(S) / scale)


def _exact_kkt(ds: Dataset, cert: dict) -> bool:
    r"""Independent exact check of an Att-SVM certificate on the data as given: with $D_{it}$, $z_i$ as Fractions of
    the stored floats, every margin of the certificate's $W$ is $\ge1$ (exactly 1 on the multipliers' support),
    every multiplier is $\ge0$, and $W=\sum\lambda_{it}D_{it}z_i^\top$ exactly (stationarity): the KKT conditions."""
    W = [[Fraction(s) for s in row] for row in cert["W"]]
    d = len(W)
    lam = {(int(i), int(t)): Fraction(q) for i, t, q in cert["multipliers"]}
    X = [[[Fraction(float(x)) for x in tok] for tok in inp] for inp in ds.X]
    Z = [[Fraction(float(z)) for z in q] for q in ds.Z]
    comb = [[Fraction(0)] * d for _ in range(d)]
    for i, a in enumerate(ds.selection):
        for t in range(ds.T):
            if t == a:
                continue
            D = [X[i][a][k] - X[i][t][k] for k in range(d)]
            m = sum(D[r] * W[r][c] * Z[i][c] for r in range(d) for c in range(d))
            if m < 1 or ((i, t) in lam and lam[(i, t)] != 0 and m != 1):
                return False
            li = lam.get((i, t), Fraction(0))
            if li < 0:
                return False
            for r in range(d):
                for c in range(d):
                    comb[r][c] += li * D[r] * Z[i][c]
    return comb == W


# ---------------------------------------------------------------------------------------------- 1. scale
POW2 = [2.0**-600, 2.0**-37, 2.0**-3, 2.0**5, 2.0**41, 2.0**500]


@pytest.mark.parametrize("c", POW2 + [1e300, 1e-300])
def test_frobenius_is_scale_equivariant(c):
    ds = _base()
    ref = solve_fro(ds)
    sol = solve_fro(_scaled(ds, c))
    assert sol.status == "optimal" and sol.certificate["verified"]
    exact = c in POW2  # X * 2^k is exactly the same program; X * 1e300 is a rounded copy
    rtol = tol("rounding") if exact else tol("kkt")
    assert np.allclose(sol.W * c, ref.W, rtol=rtol, atol=rtol * np.abs(ref.W).max())
    assert sol.norm_value == pytest.approx(ref.norm_value / c, rel=rtol)
    assert sorted(sol.support) == sorted(ref.support)
    assert sol.delta == pytest.approx(ref.delta, rel=rtol)
    if sol.objective is not None:  # ||W||_F^2 and the multipliers scale by 1/c^2 (may leave float64)
        assert sol.objective == pytest.approx(ref.objective / c**2, rel=rtol)
    else:
        assert {"objective", "multipliers"} <= set(sol.extra["unrepresentable"])


@pytest.mark.parametrize("k", [-600, -41, 7, 500])
def test_exact_certificate_maps_back_exactly(k):
    """The rescaled program's exact W is the original's times 2^-k, as rationals, and verifies exactly on the data
    as given (independent Fraction check)."""
    ds = _base()
    c = 2.0**k
    ref = svm.certify_fro(ds)
    big = _scaled(ds, c)
    cert = svm.certify_fro(big)
    assert cert["verified"] and ref["verified"]
    two = Fraction(2) ** k
    assert [[Fraction(s) * two for s in row] for row in cert["W"]] == [[Fraction(s) for s in row] for row in ref["W"]]
    assert _exact_kkt(big, cert)


@pytest.mark.parametrize("c", [1e300, 1e-300])
def test_certify_verifies_for_rescaled_data_through_the_cli(capsys, tmp_path, c):
    ds = _scaled(_base(), c)
    f = ds.save(tmp_path / "s.npz")
    rc, out, err = _cli(capsys, "solve", f, "--certify", "--json")
    assert rc == 0 and "Traceback" not in err
    obj = json.loads(out)
    assert obj["certificate"]["kind"] == "exact-rational" and obj["certificate"]["verified"] is True
    assert _exact_kkt(ds, obj["certificate"])
    ref = solve_fro(_base())
    assert obj["norm"] == pytest.approx(ref.norm_value / c, rel=tol("kkt"))
    assert obj["norm_sq"] is None and obj["objective"] is None  # 1e+-600: not a float64, reported as null
    assert obj["unrepresentable"] == ["objective", "multipliers"]


def test_planted_wrong_certificate_fails_the_exact_check():
    ds = _base()
    cert = svm.certify_fro(ds)
    bad = dict(cert, W=[[str(Fraction(s) * Fraction(1 + 2**-40)) for s in row] for row in cert["W"]])
    assert _exact_kkt(ds, cert) and not _exact_kkt(ds, bad)


@pytest.mark.parametrize(
    "norm, program, q",
    [("nuc", "attsvm", None), ("lq", "attsvm", 3.0), ("fro", "gensvm", None), ("fro", "head", None)],
)
@pytest.mark.parametrize("c", [2.0**-700, 1e300, 1e-300])
def test_other_programs_are_scale_equivariant(norm, program, q, c):
    ds = _base()
    ref = solve(ds, norm=norm, program=program, q=q)
    sol = solve(_scaled(ds, c), norm=norm, program=program, q=q)
    assert ref.status == sol.status == "optimal"
    assert sol.norm_value == pytest.approx(ref.norm_value / c, rel=1e3 * tol("kkt"))
    u, v = (sol.extra["v"], ref.extra["v"]) if program == "head" else (sol.W, ref.W)
    assert np.allclose(np.asarray(u) * c, v, rtol=1e3 * tol("kkt"), atol=1e3 * tol("kkt") * np.abs(v).max())


@pytest.mark.parametrize("c", [1e300, 1e-300, 2.0**-900])
def test_nuclear_certificate_and_seq_are_scale_equivariant(c):
    ds = _base()
    sol = solve(_scaled(ds, c), norm="nuc", certify=True)
    ref = solve(ds, norm="nuc", certify=True)
    assert sol.certificate["verified"] and ref.certificate["verified"]
    lo, up = sol.certificate["lower"], sol.certificate["upper"]
    assert lo <= sol.norm_value * (1 + tol("rounding")) and sol.norm_value <= up * (1 + tol("rounding"))
    assert lo * c == pytest.approx(ref.certificate["lower"], rel=1e3 * tol("kkt"))
    seq = generate.sequence(3, 4, 3, 2, seed=1)
    big = Dataset(seq.X * c, seq.Y, seq.Z, seq.v, np.asarray(seq.selection), seq.kind)
    a, b = solve(seq, program="seq"), solve(big, program="seq")
    assert b.norm_value == pytest.approx(a.norm_value / c, rel=tol("kkt"))


@pytest.mark.parametrize("c", [1e300, 1e-300, 2.0**-1000])
def test_infeasible_stays_infeasible_with_an_exact_farkas_vector(c):
    ds = generate.centroid_infeasible(3, 6, 2, seed=4)
    big = _scaled(ds, c)
    ok, mu = feasibility(big)
    assert not ok and np.all(mu >= 0) and mu.sum() > 0
    assert np.all(mu[np.arange(3), ds.selection] == 0) and _farkas_residual(big, mu) <= tol("kkt")
    sol = solve_fro(big)
    assert sol.status == "infeasible" and sol.certificate["kind"] == "farkas-exact"
    assert _farkas_residual(big, sol.farkas) <= tol("kkt")
    assert _farkas_residual(big, np.ones((3, 6))) > tol("kkt")  # the check can fail: a non-certificate


def test_unrepresentable_solution_is_refused(capsys, tmp_path):
    """X and Z scaled by 2^-600: W^mm = 2^1200 W, beyond float64 - refused with the reason, exit 2."""
    ds = _scaled(_base(), 2.0**-600, 2.0**-600)
    with pytest.raises(InputError, match="not representable in float64"):
        solve_fro(ds)
    rc, out, err = _cli(capsys, "solve", ds.save(tmp_path / "u.npz"))
    assert rc == 2 and out == ""
    _one_error_line(err, "W is not representable in float64")


def test_before_the_fix_tiny_data_was_undecided(capsys, tmp_path):
    """The issue's case through the CLI: X * 1e-300 solves (exit 0) with ||W||_F = 1e300 ||W^mm(X)||_F."""
    f = _scaled(_base(), 1e-300).save(tmp_path / "t.npz")
    rc, out, err = _cli(capsys, "solve", f)
    assert rc == 0 and "error" not in err
    assert "||W||_F = 3.27276469882e+300" in out and "||W||_F^2 = not representable in float64" in out


# ---------------------------------------------------------------------------------------------- 2. size
def _big_feasible(n: int) -> Dataset:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 4, 3))
    Z = rng.standard_normal((n, 3))
    Z[:, 0] = np.abs(Z[:, 0]) + 0.5
    X[:, 0, 0] = X[:, 1:, 0].max(1) + 0.5  # W = c e1 e1^T separates: feasible, opt = token 0
    return Dataset(X, np.ones(n), Z, np.array([1.0, 0.0, 0.0]))


def test_large_feasible_instance_solves_without_a_dense_gram():
    ds = _big_feasible(200_000)  # m = 600 000 constraints, d^2 = 9 unknowns
    tracemalloc.start()
    try:
        sol = solve_fro(ds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sol.status == "optimal" and sol.certificate["verified"] and abs(sol.margin_min - 1) <= tol("kkt")
    assert sol.extra["active_set_size"] <= 9
    assert peak < 600e6  # O(m d) arrays; a Gram block of all constraints would be 2.9 TB
    # the KKT identity, recomputed here from the arrays: ||W||_F^2 = sum(lambda)
    assert abs(np.sum(sol.W**2) - np.nansum(sol.multipliers)) <= tol("kkt") * sol.objective


def test_memory_limit_refuses_with_estimate_and_limit(capsys, tmp_path, monkeypatch):
    f = _big_feasible(20_000).save(tmp_path / "m.npz")
    monkeypatch.setenv(budget.ENV, str(10_000_000))
    rc, out, err = _cli(capsys, "solve", f)
    assert rc == 2 and out == ""
    _one_error_line(err, "needs about", "more than the limit of 9.5 MiB", budget.ENV)
    monkeypatch.setenv(budget.ENV, "lots")
    rc, out, err = _cli(capsys, "solve", f)
    assert rc == 2
    _one_error_line(err, budget.ENV, "positive integer")
    monkeypatch.delenv(budget.ENV)
    rc, out, _ = _cli(capsys, "solve", f)
    assert rc == 0


def test_memory_estimate_grows_with_the_problem(monkeypatch):
    small, large = _base(), _big_feasible(20_000)
    assert budget.estimate(large) > 100 * budget.estimate(small)
    assert budget.estimate(large, "nuc") > budget.estimate(large)  # |S|^2 barrier blocks
    monkeypatch.setenv(budget.ENV, str(int(budget.estimate(large)) - 1))
    with pytest.raises(InputError, match="needs about"):
        solve_fro(large)
    monkeypatch.setenv(budget.ENV, str(int(budget.estimate(large, certify=False)) + 1))
    assert solve_fro(large).status == "optimal"


def test_derive_kkt_refuses_large_instances_with_the_limit(capsys, tmp_path):
    f = _big_feasible(25_000).save(tmp_path / "k.npz")  # 75 000 constraints * 15 terms > 1e6
    rc, out, err = _cli(capsys, "derive", "kkt", "--data", f)
    assert rc == 2 and out == ""
    _one_error_line(err, "75000 constraints", "limit of 1e+06")


# ---------------------------------------------------------------------------------------------- 3. degenerate
def _t1() -> Dataset:
    return generate.paper_law(3, 1, 3, seed=0)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--certify"],
        ["--norm", "nuc", "--certify"],
        ["--norm", "lq", "--q", "3"],
        ["--program", "gensvm"],
        ["--program", "prompt"],
        ["--program", "relaxed"],
    ],
)
def test_no_constraints_give_w_zero(capsys, tmp_path, args):
    f = _t1().save(tmp_path / "t1.npz")
    rc, out, err = _cli(capsys, "solve", f, "--json", *args)
    assert rc == 0 and "Traceback" not in err
    obj = json.loads(out)
    assert obj["status"] == "optimal" and obj["objective"] == 0.0 and obj["norm"] == 0.0
    assert obj["support"] == [] and obj["margin_min"] is None and obj["certificate"]["verified"] is True
    if obj["W"] is not None:
        assert np.array_equal(np.array(obj["W"]), np.zeros((3, 3)))
    else:
        assert obj["p"] == [0.0, 0.0, 0.0]


def test_no_constraints_head_svm_still_has_its_constraints(capsys, tmp_path):
    ds = _t1()
    sol = solve(ds, program="head")
    F = ds.Y[:, None] * ds.X[:, 0]
    assert sol.status == "optimal" and np.min(F @ sol.extra["v"]) == pytest.approx(1.0, abs=tol("kkt"))


def test_no_constraints_derive_kkt(capsys, tmp_path):
    f = _t1().save(tmp_path / "t1.npz")
    rc, out, err = _cli(capsys, "derive", "kkt", "--data", f, "--json")
    assert rc == 0 and "Traceback" not in err
    obj = json.loads(out)
    assert obj["verified"] is True and obj["W"] == [["0"] * 3] * 3 and obj["active"] == []


def test_one_input_one_dimension_closed_form():
    """n=1, d=1, T=2: one constraint (x_a - x_t) w z >= 1, so w = 1/((x_a - x_t) z) (closed form)."""
    X = np.array([[[0.75], [-0.5]]])
    ds = Dataset(X, np.array([1.0]), np.array([[0.375]]), np.array([1.0]))
    sol = solve_fro(ds)
    assert sol.W[0, 0] == pytest.approx(1 / (1.25 * 0.375), rel=tol("rounding"))
    assert svm.certify_fro(ds)["W"] == [[str(Fraction(1) / (Fraction(5, 4) * Fraction(3, 8)))]]


@pytest.mark.parametrize("norm, q", [("fro", None), ("nuc", None), ("lq", 3.0)])
def test_equal_tokens_give_an_exact_farkas_vector(capsys, tmp_path, norm, q):
    """All tokens of input 1 equal: every constraint row of that input is 0 >= 1, so mu = e_(1,t) is exact."""
    ds0 = _base()
    X = ds0.X.copy()
    X[1] = X[1, 0]
    ds = Dataset(X, ds0.Y, ds0.Z, ds0.v, np.array([0, 0, 0]))
    sol = solve(ds, norm=norm, q=q)
    assert sol.status == "infeasible" and sol.certificate["verified"]
    mu = sol.farkas
    assert np.all(mu >= 0) and mu.sum() > 0 and np.all(mu[0] == 0) and np.all(mu[2] == 0)
    ok, _ = feasibility(ds)
    assert not ok
    args = ["--norm", norm] + (["--q", "3"] if q else [])
    rc, out, err = _cli(capsys, "solve", ds.save(tmp_path / "eq.npz"), *args)
    assert rc == 1 and "INFEASIBLE" in out and "Traceback" not in err


# ---------------------------------------------------------------------------------------------- 4. selection
def _tie(tmp_path) -> Path:
    ds = _base()
    X = ds.X.copy()
    X[0, 1, 0] = X[0, 0, 0] = 0.5
    m = {"X": X, "Y": ds.Y, "Z": ds.Z, "v": np.array([1.0, 0.0, 0.0])}
    np.savez(tmp_path / "tie.npz", **m)
    return tmp_path / "tie.npz"


def test_derive_kkt_accepts_alpha_on_tied_data(capsys, tmp_path):
    f = _tie(tmp_path)
    rc, out, err = _cli(capsys, "derive", "kkt", "--data", f, "--alpha", "1,0,2", "--json")
    assert rc == 0 and "Traceback" not in err
    obj = json.loads(out)
    assert obj["verified"] is True and obj["alpha"] == [1, 0, 2]
    rc, out, err = _cli(capsys, "solve", f, "--alpha", "1,0,2", "--json")
    assert rc == 0 and json.loads(out)["alpha"] == [1, 0, 2]
    rc, out, err = _cli(capsys, "derive", "kkt", "--data", f)  # no alpha: the tie is still an input error
    assert rc == 2 and out == ""
    _one_error_line(err, "tie")


@pytest.mark.parametrize("cmd", [["solve"], ["derive", "kkt", "--data"]])
@pytest.mark.parametrize("alpha", ["1.5,0,2", "2.0,0,1", "1,0,x", "1e0,0,2"])
def test_non_integer_alpha_is_refused(capsys, tmp_path, cmd, alpha):
    f = _base().save(tmp_path / "ok.npz")
    rc, out, err = _cli(capsys, *cmd, f, "--alpha", alpha)
    assert rc == 2 and out == ""
    _one_error_line(err, "--alpha")


def test_alpha_file_of_non_integers_is_refused(capsys, tmp_path):
    f = _base().save(tmp_path / "ok.npz")
    (tmp_path / "a.txt").write_text("1.5 0 2\n")
    for cmd in (["solve", f], ["derive", "kkt", "--data", f]):
        rc, out, err = _cli(capsys, *cmd, "--alpha", tmp_path / "a.txt")
        assert rc == 2 and out == ""
        _one_error_line(err, "integer token indices")


def test_parse_alpha_is_shared():
    from attsvm.cli.solve import parse_alpha as from_cli
    from attsvm.selection import parse_alpha

    assert from_cli is parse_alpha
    assert parse_alpha("opt") is None and parse_alpha(" 2, 0 ,1 ").tolist() == [2, 0, 1]


# ---------------------------------------------------------------------------------------------- 5. norms
@pytest.mark.parametrize("args", [[], ["--norm", "nuc"], ["--norm", "lq", "--q", "3"], ["--program", "head"]])
def test_json_norm_fields(capsys, tmp_path, args):
    f = _base().save(tmp_path / "ok.npz")
    rc, out, _ = _cli(capsys, "solve", f, "--json", *args)
    assert rc == 0
    o = json.loads(out)
    W = None if o["W"] is None else np.array(o["W"])
    if not args:
        assert o["norm_kind"] == "fro" and o["objective_formula"].startswith("||W||_F^2")
        assert o["norm"] == pytest.approx(np.sqrt(np.sum(W**2)), rel=tol("rounding"))
        assert o["norm_sq"] == o["objective"] == pytest.approx(o["norm"] ** 2, rel=tol("rounding"))
    elif args[1] == "nuc":
        assert o["norm_kind"] == "nuc" and o["norm_sq"] is None
        assert o["norm"] == pytest.approx(np.linalg.svd(W, compute_uv=False).sum(), rel=tol("rounding"))
        assert o["objective"] == pytest.approx(o["norm"], rel=tol("kkt"))
    elif args[1] == "lq":
        assert o["norm_kind"] == "lq(3)" and o["norm_sq"] is None
        assert o["norm"] == pytest.approx(np.sum(np.abs(W) ** 3) ** (1 / 3), rel=tol("rounding"))
    else:
        assert o["norm_kind"] == "l2" and o["objective_formula"].startswith("||v||_2^2")
        assert o["norm"] == pytest.approx(np.linalg.norm(o["v"]), rel=tol("rounding"))
        assert o["norm_sq"] == pytest.approx(o["norm"] ** 2, rel=tol("kkt"))


def test_table_labels_the_norms(capsys, tmp_path):
    f = _base().save(tmp_path / "ok.npz")
    _, out, _ = _cli(capsys, "solve", f)
    assert "||W||_F = 3.27276469882, ||W||_F^2 = 10.7109887738" in out
    _, out, _ = _cli(capsys, "solve", f, "--norm", "nuc")
    assert "||W||_* = " in out and "^2" not in out.split("(objective")[0]


# ---------------------------------------------------------------------------------------------- 6. imports
def _imports(tree: ast.Module, pkg_modules: set[str], package: str) -> list[tuple[str, list[str], bool]]:
    """(target module, imported names, at module level?) for every import of a sibling module of
    ``attsvm.<package>``, at any depth."""
    top = set(map(id, tree.body))
    absolute = f"attsvm.{package}."
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [a.name for a in node.names]
            if node.module is None:  # from . import a, b
                out += [(n, [], id(node) in top) for n in names if n in pkg_modules]
            else:
                out.append((node.module.split(".")[0], names, id(node) in top))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(absolute):
            out.append((node.module.split(".")[2], [a.name for a in node.names], id(node) in top))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(absolute):
                    out.append((a.name.split(".")[2], [], id(node) in top))
    return out


def import_problems(sources: dict[str, str], layers: tuple[tuple[str, ...], ...], package: str = "svm") -> list[str]:
    """Cycles, private names, function-level imports and imports against the layer order, in ``sources``
    (module name -> source text of the modules of ``attsvm.<package>``)."""
    mods = set(sources) - {"__init__"}
    layer = {m: k for k, names in enumerate(layers) for m in names}
    problems = [f"module {m} has no layer" for m in sorted(mods - set(layer))]
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m in mods:
        for target, names, at_top in _imports(ast.parse(sources[m]), mods, package):
            if target.startswith("_") or any(n.startswith("_") for n in names):
                problems.append(f"{m} imports a private name from .{target}: {names}")
            if not at_top:
                problems.append(f"{m} imports .{target} inside a function")
            if target in mods:
                graph[m].add(target)
                if m in layer and target in layer and layer[target] >= layer[m]:
                    problems.append(f"{m} (layer {layer[m]}) imports {target} (layer {layer[target]})")
    return problems + import_cycles(graph)


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """``import cycle: a -> b -> a`` for every cycle a depth-first walk of the import ``graph`` meets."""
    problems: list[str] = []
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                problems.append("import cycle: " + " -> ".join(path[path.index(t) :] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return problems


def test_svm_import_graph_is_layered_and_acyclic():
    sources = {p.stem: p.read_text() for p in SVM_DIR.glob("*.py")}
    assert import_problems(sources, svm.LAYERS) == []
    layered = {m for names in svm.LAYERS for m in names}
    assert layered == set(sources) - {"__init__"}


def test_import_checker_catches_planted_problems():
    planted = {
        "a": "from .b import f\n",
        "b": "def f():\n    from .a import g\n",
        "c": "from .a import _hidden\n",
    }
    found = import_problems(planted, (("a", "b", "c"),))
    assert any("cycle" in p for p in found)
    assert any("inside a function" in p for p in found)
    assert any("private" in p for p in found)
    assert any("layer 0) imports" in p for p in found)
