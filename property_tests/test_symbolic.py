"""The symbolic machinery: notation table, printer, checks, Derivation objects, discovery, the derive CLI."""

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
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Cov, Diag, Ell, EllP, Inner, Norm, Softmax, SumOver

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
    assert d.to_json()["steps"] == 2 and d.to_json()["checked_steps"] == 1


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
    assert all(d["verified"] is True and d["steps"] > 0 and d["seconds"] >= 0 for d in out["derivations"])
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
    d = reg["gradient"].build(max_T=2, max_d=1)
    steps = {st.name: st for st in d.steps}
    for name in ("softmax Jacobian", "chain rule, entrywise, from the explicit loss"):
        assert not steps[name].check.run().ok, name
