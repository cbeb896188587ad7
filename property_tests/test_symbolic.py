"""The symbolic machinery: notation table, printer (also in index notation), checks and their prose, Derivation
objects, discovery, the derive CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sympy as sp

from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.symbolic import All, Chain, Derivation, Equal, Nonneg, Predicate, derivation, discover, latex
from attsvm.symbolic import builders as B
from attsvm.symbolic.derivation import prose_problems
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Cov, Diag, Ell, EllP, Inner, Norm, RealSpace, Softmax, SumOver, Times, in_order

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------- notation and printer
def test_symbols_carry_table_assumptions_and_print_with_indices():
    s = symbol("s", 1, 2)
    assert s.is_positive and latex(s) == "s_{1,2}"
    assert symbol("lam", "i", "t").is_nonnegative
    assert latex(symbol("gamma", "i", "tau")) == r"\gamma_{i,\tau}"
    assert latex(symbol("expo", 3)) == r"\epsilon_{3}"
    with pytest.raises(KeyError, match="notation table"):
        symbol("nonexistent")


def test_printer_objects():
    s, a = matrix_symbol("s", "T", 1), matrix_symbol("a", "T", 1)
    W = matrix_symbol("W", "d", "d")
    assert latex(Softmax(a)) == r"\mathbb{S}\left(a\right)"
    assert latex(Diag(s)) == r"\mathrm{diag}\left(s\right)"
    assert latex(Norm(W, "F") ** 2) == r"\left\|W\right\|_F^{2}"
    assert latex(Norm(W, "*")) == r"\left\|W\right\|_\star"
    assert latex(Inner(W, W)) == r"\left\langle W, W\right\rangle"
    assert latex(s.T) == r"s^{\top}"
    assert latex(Cov(s, s, a)) == r"\mathrm{Cov}_{s}\left(s, a\right)"
    assert latex(EllP(symbol("u"))) == r"\ell'\left(u\right)"
    assert latex(Chain(symbol("u"), "<=", 1, where=Chain(symbol("R"), ">", 0))) == r"u \le 1,\qquad R > 0"
    assert latex(SumOver(symbol("lam", "j"), sp.Symbol("j"))) == r"\sum_{j}\lambda_{j}"
    with pytest.raises(ValueError):
        Chain(1, "~", 2)
    with pytest.raises(ValueError):
        Norm(W, "max")


# ---------------------------------------------------------------------- checks
def test_equal_detects_a_wrong_identity():
    x, y = sp.symbols("x y")
    assert Equal((x + y) ** 2, x**2 + 2 * x * y + y**2).run().ok
    bad = Equal((x + y) ** 2, x**2 + y**2).run()
    assert not bad.ok and "2*x*y" in bad.detail
    assert Equal(x / (x + y) + y / (x + y), 1, "cancel").run().ok
    assert not Equal(sp.Matrix([x, y]), sp.Matrix([x])).run().ok


def test_wrong_softmax_jacobian_fails():
    e = sp.Matrix(3, 1, lambda t, _: symbol("expo", t + 1))
    s = B.softmax_of_exps(e)
    a = sp.Matrix(3, 1, lambda t, _: symbol("a", t + 1))
    auto = B.exps_to_symbols(B.softmax_exp(a).jacobian(a), a, e)
    assert Equal(auto, B.jacobian_closed(s), "cancel").run().ok
    assert not Equal(auto, sp.diag(*s), "cancel").run().ok  # missing -ss^T


def test_nonneg_certificates():
    a, b = sp.Symbol("a", real=True), sp.Symbol("b", real=True)
    assert Nonneg(a**2 + b**2 - 2 * a * b, (a - b) ** 2).run().ok
    assert not Nonneg(a**2 + b**2 - 3 * a * b, (a - b) ** 2).run().ok  # certificate differs
    p, q = sp.Symbol("p", nonnegative=True), sp.Symbol("q", positive=True)
    assert Nonneg(p * q / (1 + q)).run().ok
    assert not Nonneg(p - q).run().ok
    assert not Nonneg(a).run().ok  # sign unknown


def test_all_reports_the_failing_case():
    x = sp.Symbol("x")
    chk = All([("good", Equal(x, x)), ("bad", Equal(x, 2 * x))], "two cases")
    r = chk.run()
    assert not r.ok and r.detail.startswith("bad:")
    assert Predicate(lambda: True, "trivially").run().ok
    assert not Predicate(lambda: False, "never").run().ok


# ---------------------------------------------------------------------- derivation objects
def _toy() -> Derivation:
    x, y = sp.Symbol("x"), sp.Symbol("y")
    d = Derivation("toy", "A toy derivation", claim="none")
    d.premise("definition", Chain(y, "=", x + 1), "by definition")
    d.step(
        "square",
        Chain(y**2, "=", x**2 + 2 * x + 1),
        ("expand ", y**2, " & done"),
        Equal(y**2, x**2 + 2 * x + 1, subs={y: x + 1}),
    )
    return d


def test_derivation_verify_and_render():
    d = _toy()
    assert d.verified is None
    assert d.verify() and d.verified and d.failures() == []
    tex = d.latex()
    assert r"\section*{A toy derivation}" in tex and r"y^{2} = x^{2} + 2 x + 1" in tex
    assert r"expand $y^{2}$ \& done" in tex  # prose escaped, math from the printer
    doc = d.latex(standalone=True)
    assert doc.startswith(r"\documentclass") and doc.rstrip().endswith(r"\end{document}")
    md = d.markdown()
    assert "## A toy derivation" in md and "$$\ny^{2} = x^{2} + 2 x + 1\n$$" in md and "ok" in md
    assert d._repr_latex_().startswith("$$") and d.to_json()["verified"] is True
    j = d.to_json()
    assert [s["name"] for s in j["steps"]] == [st.name for st in d.steps] and j["checked_steps"] == 1
    assert [s["scope"] for s in j["steps"]] == ["premise", "instances"] and j["steps"][1]["verified"] is True


def test_failing_and_crashing_steps_are_reported():
    d = _toy()
    x = sp.Symbol("x")
    d.step("wrong", Chain(x, "=", 2 * x), "false", Equal(x, 2 * x))

    def boom():
        raise ZeroDivisionError("nope")

    d.step("crash", Chain(x, "=", x), "raises", Predicate(boom, "crashes"))
    assert d.verify() is False
    names = [n for n, _ in d.failures()]
    assert names == ["wrong", "crash"] and "ZeroDivisionError" in d.failures()[1][1]
    with pytest.raises(TypeError):
        d.step("no check", Chain(x, "=", x), "", check="yes")  # type: ignore[arg-type]


def test_decorator_builds_fresh_derivations():
    @derivation(name="tmp", title="T", claim="c")
    def tmp(d: Derivation, k: int = 1) -> None:
        d.premise("p", Chain(sp.Integer(k), "=", k), "")

    a, b = tmp(), tmp.build(k=2)
    assert a is not b and a.name == "tmp" and a.claim == "c" and len(a.steps) == 1
    assert latex(b.steps[0].statement) == "2 = 2"


# ---------------------------------------------------------------------- discovery and CLI
BAD = textwrap.dedent(
    """
    import sympy as sp
    from attsvm.symbolic import Chain, Derivation, Equal, derivation

    @derivation(name="broken", title="A false step")
    def broken(d: Derivation) -> None:
        x = sp.Symbol("x")
        d.step("false", Chain(x + x, "=", 3 * x), "wrong on purpose", Equal(x + x, 3 * x))
    """
)


def test_discovery(tmp_path):
    reg = discover([REPO / "proofs" / "derivations"])
    want = {
        "gradient",
        "softmax-jacobian",
        "grad-covariance",
        "kq-gradient",
        "hessian",
        "smoothness-bound",
        "attsvm-kkt",
        "attsvm-dual",
        "attsvm-nuc-dual",
        "gensvm-kkt",
        "equal-scores-bound",
        "overparam-certificate",
        "nuclear-variational",
        "softmax-decay",
    }
    assert want <= set(reg)
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text(BAD)
    with pytest.raises(InputError, match="defined twice"):
        discover([tmp_path])
    with pytest.raises(InputError, match="no derivation folder"):
        discover([tmp_path / "missing"])
    (tmp_path / "b.py").write_text("raise RuntimeError('bad file')\n")
    with pytest.raises(InputError, match="failed to import"):
        discover([tmp_path / "b.py"])


class _R:
    def __init__(self, rc, out, err):
        self.returncode, self.stdout, self.stderr = rc, out, err


@pytest.fixture
def _cli(capsys, monkeypatch):
    """Run ``attsvm derive ...`` in-process (the same ``main`` as the console script)."""

    def run(*args, cwd=None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        rc = main(["derive", *args])
        out = capsys.readouterr()
        return _R(rc, out.out, out.err)

    return run


def test_cli_unknown_name_exits_2(_cli):
    r = _cli("no-such-derivation", "--path", str(REPO / "proofs" / "derivations"))
    assert r.returncode == 2 and r.stderr.startswith("error: unknown derivation") and len(r.stderr.splitlines()) == 1


def test_cli_check_failure_exits_1(tmp_path, _cli):
    (tmp_path / "bad.py").write_text(BAD)
    r = _cli("--path", str(tmp_path), "--check", "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["derivations"][0]["name"] == "broken" and out["derivations"][0]["verified"] is False
    assert "step 'false' failed" in r.stderr


def test_cli_outputs(tmp_path, _cli):
    tex, md = tmp_path / "o.tex", tmp_path / "o.md"
    r = _cli(
        "softmax-decay",
        "nuclear-variational",
        "--check",
        "--json",
        "--latex",
        str(tex),
        "--standalone",
        "--markdown",
        str(md),
        cwd=tmp_path,
    )  # not in the repo: falls back to the package's proofs folder
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [d["name"] for d in out["derivations"]] == ["softmax-decay", "nuclear-variational"]
    assert all(d["verified"] is True and d["steps"] and d["seconds"] >= 0 for d in out["derivations"])
    assert all(
        s["verified"] is (None if s["scope"] == "premise" else True) for d in out["derivations"] for s in d["steps"]
    )
    text = tex.read_text()
    assert text.count(r"\section*{") == 2 and text.count(r"\documentclass") == 1
    assert md.read_text().count("## ") == 2


def test_cli_env_var_points_elsewhere(tmp_path, monkeypatch):
    (tmp_path / "derivations").mkdir()
    (tmp_path / "derivations" / "bad.py").write_text(BAD)
    env = {**__import__("os").environ, "ATTSVM_PROOFS": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "attsvm", "derive", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0 and [d["name"] for d in json.loads(r.stdout)["derivations"]] == ["broken"]


def test_builders_loss_is_the_explicit_composition():
    W = B.weights(1)
    inp = B.make_input(2, 1, W)
    L = B.loss_explicit([inp])
    e1, e2 = sp.exp(inp.a[0]), sp.exp(inp.a[1])
    want = (inp.gamma[0] * e1 + inp.gamma[1] * e2) / (e1 + e2)
    assert isinstance(L, Ell) and sp.simplify(L.args[0] - want) == 0


def test_a_wrong_closed_form_makes_the_gradient_derivation_fail(monkeypatch):
    """Mutation check: drop the -ss^T term of the closed form; the gradient derivation must fail."""
    reg = discover([REPO / "proofs" / "derivations"])
    monkeypatch.setattr(B, "jacobian_closed", lambda s: sp.diag(*s))
    d = reg["gradient"].build(max_T=2, max_d=1, average_d=1)
    assert not d.verify()
    # the general proofs do not use the instance builders; their instance evidence does, and fails
    assert {"softmax Jacobian", "chain rule, entry (j, k)"} <= {name for name, _ in d.failures()}


# ---------------------------------------------------------------------- printing in index notation
def _index_notation():
    """Symbols of statements in index notation: the size T, indices t, tau, u, j, k and entries g, h, x, z."""
    T = sp.Symbol("T", integer=True, positive=True)
    idx = (sp.Symbol(c, integer=True, positive=True) for c in ("t", "tau", "u", "j", "k"))
    entries = (sp.IndexedBase(c, real=True) for c in ("g", "h", "x", "z"))
    return (T, *idx, *entries)


def test_in_order_and_times_print_in_the_order_given():
    T, t, tau, u, j, k, g, h, x, z = _index_notation()
    s = sp.IndexedBase("s")
    e = s[t] * in_order(sp.KroneckerDelta(t, tau), -s[tau])
    assert latex(e) == r"{s}_{t} \left(\delta_{t \tau} - {s}_{\tau}\right)"
    assert latex(Times(x[t, j], s[t], in_order(g[t], -h[t]), z[k])).startswith("{x}_{t,j} {s}_{t} \\left(")
    assert latex(in_order(g[t], -h[t]) ** 2) == r"\left({g}_{t} - {h}_{t}\right)^{2}"
    assert latex(EllP(u) * sp.Sum(s[t], (t, 1, T))) == r"\ell'\left(u\right) \sum_{t=1}^{T} {s}_{t}"
    assert in_order(g[t], -h[t]).doit() == g[t] - h[t] and Times(g[t], h[t]).doit() == g[t] * h[t]


def test_nested_sums_print_one_sign_per_index_and_halves_in_front():
    T, t, tau, u, j, k, g, h, x, z = _index_notation()
    e = sp.Rational(1, 2) * sp.Sum(g[t] * h[tau], (tau, 1, T), (t, 1, T))
    assert latex(e).startswith(r"\frac{1}{2} \sum_{t=1}^{T} \sum_{\tau=1}^{T} ")


def test_broken_chain_is_an_aligned_block():
    T, t, tau, u, j, k, g, h, x, z = _index_notation()
    c = Chain(g[t], "=", h[t], "<=", 1, "+", 2, breaks=(2, 3), where=Chain(t, "in", RealSpace(T)))
    out = latex(c)
    assert out.startswith("\\begin{aligned}") and out.endswith("\\end{aligned}")
    assert out.count("\\\\") == 3 and "&\\le 1" in out and "&\\qquad + 2" in out and "\\mathbb{R}^{T}" in out
    assert latex(Chain(g[t], "=", h[t])) == "{g}_{t} = {h}_{t}"
    with pytest.raises(ValueError):
        Chain(g[t], "=", h[t], breaks=(2,))


# ---------------------------------------------------------------------- prose of the instance checks
def test_describe_is_prose_for_prose_and_a_string_for_a_string():
    x0 = sp.Symbol("x")
    rel = sp.Le(sp.Symbol("T", integer=True, positive=True), 4)
    for chk in (
        All([("one", Equal(x0, x0))], ("every ", rel)),
        Equal(x0, x0, what=("at ", rel)),
        Nonneg(x0**2, x0**2, what=("for ", rel)),
        Predicate(lambda: True, ("always, ", rel)),
    ):
        out = chk.describe()
        assert isinstance(out, tuple) and rel in out and prose_problems(out) == []
    assert All([("one", Equal(x0, x0))], "two cases").describe() == "sympy, exactly, two cases"
    assert isinstance(Equal(x0, x0, what="two cases").describe(), str)
    assert prose_problems(Equal(x0, x0).describe()) == [] and prose_problems(Nonneg(x0**2).describe()) == []
    assert Predicate(lambda: False, ("never ", rel)).run().detail.startswith("predicate false: never T <= 4")
