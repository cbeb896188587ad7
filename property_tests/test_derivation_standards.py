"""What a referee checks in the derivations: identities proved for general sizes, scopes recorded honestly, no
ASCII math in prose, and a standalone document without overfull boxes.

* :class:`~attsvm.symbolic.checks.Symbolic` proves identities in index notation / matrix calculus for general
  $T,d$; a wrong right-hand side or a statement that does not involve the sizes it claims fails.
* Every built-in derivation's prose passes :func:`~attsvm.symbolic.derivation.prose_problems`.
* The required steps are proved symbolically (scope ``symbolic``), at least 10 of them in all.
* ``attsvm derive --standalone --latex`` of every derivation compiles with no overfull box wider than 5 pt
  (skipped visibly without pdflatex).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import sympy as sp

from attsvm.symbolic import discover
from attsvm.symbolic.checks import Symbolic, SymbolicNonneg, size_symbols
from attsvm.symbolic.derivation import Derivation, document, prose_problems
from attsvm.symbolic.printer import Chain
from attsvm.symbolic.sums import decide_in_ranges

REPO = Path(__file__).resolve().parents[1]
REG = discover([REPO / "proofs" / "derivations"])
NAMES = sorted(REG)

T = sp.Symbol("T", integer=True, positive=True)
d = sp.Symbol("d", integer=True, positive=True)
t, tau, u = sp.symbols("t tau u", integer=True, positive=True)
a = sp.IndexedBase("a", real=True)


def _softmax(k):
    return sp.exp(a[k]) / sp.Sum(sp.exp(a[u]), (u, 1, T))


# ---------------------------------------------------------------------- the general checks themselves
def test_symbolic_proves_the_softmax_jacobian_for_general_T():
    J = sp.diff(_softmax(t), a[tau])
    good = _softmax(t) * (sp.KroneckerDelta(t, tau) - _softmax(tau))
    ranges = {t: (1, T), tau: (1, T)}
    assert Symbolic(J, good, [T], ranges=ranges).run().ok
    # planted errors: a wrong sign, a missing factor
    assert not Symbolic(J, _softmax(t) * (sp.KroneckerDelta(t, tau) + _softmax(tau)), [T], ranges=ranges).run().ok
    assert not Symbolic(J, sp.KroneckerDelta(t, tau) - _softmax(tau), [T], ranges=ranges).run().ok


def test_symbolic_without_the_range_does_not_pass():
    """Without knowing tau <= T the case split stays, and the identity is (rightly) not reported as proved."""
    J = sp.diff(_softmax(t), a[tau])
    good = _softmax(t) * (sp.KroneckerDelta(t, tau) - _softmax(tau))
    assert not Symbolic(J, good, [T]).run().ok


def test_symbolic_refuses_a_statement_about_fixed_sizes():
    x = sp.Symbol("x")
    r = Symbolic((x + 1) ** 2, x**2 + 2 * x + 1, [T], method="expand").run()
    assert not r.ok and "does not involve" in r.detail


def test_symbolic_matrix_calculus_with_symbolic_shapes():
    X, W = sp.MatrixSymbol("X", T, d), sp.MatrixSymbol("W", d, d)
    z, g = sp.MatrixSymbol("z", d, 1), sp.MatrixSymbol("g", T, 1)
    f = g.T * X * W * z
    assert size_symbols(X) >= {T, d}
    assert Symbolic(sp.diff(f, W), X.T * g * z.T, [T, d], method=lambda e: e.doit()).run().ok
    assert not Symbolic(sp.diff(f, W), X.T * g * z.T * 2, [T, d], method=lambda e: e.doit()).run().ok
    assert not Symbolic(sp.diff(f, W), z * g.T * X, [T, d], method=lambda e: e.doit()).run().ok


def test_symbolic_nonneg_needs_a_manifest_certificate():
    m = sp.Symbol("m", integer=True, positive=True)
    j = sp.Symbol("j", integer=True)
    lam, c = sp.IndexedBase("lam", nonnegative=True), sp.IndexedBase("c", nonnegative=True)
    g = sp.IndexedBase("g", real=True)
    ok = sp.Sum(lam[j] * c[j], (j, 1, m))
    assert SymbolicNonneg(ok, ok, [m]).run().ok
    bad = sp.Sum(lam[j] * (c[j] - 1), (j, 1, m))  # c_j - 1 has no sign
    assert not SymbolicNonneg(bad, bad, [m]).run().ok
    var = sp.Sum(_softmax(t) * _softmax(tau) * (g[t] - g[tau]) ** 2, (t, 1, T), (tau, 1, T))
    assert SymbolicNonneg(var, var, [T]).run().ok
    reversed_sum = sp.Sum(lam[j], (j, m + 2, m))  # Karr convention: this is -lam[m+1], not an empty sum
    assert not SymbolicNonneg(reversed_sum, reversed_sum, [m]).run().ok


def test_decide_in_ranges_is_sound():
    q = sp.Piecewise((1, T >= tau), (0, True))
    assert decide_in_ranges(q, {tau: (1, T)}) == 1
    assert decide_in_ranges(sp.Piecewise((1, tau > T), (0, True)), {tau: (1, T)}) == 0
    # a relation the range does not decide stays undecided
    r = sp.Piecewise((1, tau >= 2), (0, True))
    assert decide_in_ranges(r, {tau: (1, T)}).has(sp.Piecewise)


# ---------------------------------------------------------------------- scopes
def test_step_scope_and_json():
    x = sp.Symbol("x")
    dv = Derivation("toy", "toy")
    dv.premise("def", Chain(x, "=", 1), "by definition")
    J = sp.diff(_softmax(t), a[tau])
    good = _softmax(t) * (sp.KroneckerDelta(t, tau) - _softmax(tau))
    dv.step("jac", Chain(J, "=", good), "quotient rule", Symbolic(J, good, [T], ranges={t: (1, T), tau: (1, T)}))
    assert [s.scope for s in dv.steps] == ["premise", "symbolic"]
    assert dv.verify()
    j = dv.to_json()
    assert [(s["name"], s["scope"], s["verified"]) for s in j["steps"]] == [
        ("def", "premise", None),
        ("jac", "symbolic", True),
    ]
    html = dv._repr_html_()
    assert "jac" in html and "symbolic" in html and "verified" in html and "premise" in html


# ---------------------------------------------------------------------- prose
@pytest.mark.parametrize(
    "bad",
    [
        "for t != alpha_i",
        "lambda_it >= 0",
        "kappa = exp(-R rho)",
        "the direction W^mm",
        "margin 1/||W||_F",
        "every T <= 4, d <= 3",
        "an entry of the d x d matrix",
        "moving W to W + eps A",
    ],
)
def test_prose_problems_finds_ascii_math(bad):
    assert prose_problems(bad), bad


def test_prose_problems_accepts_prose_with_printed_math():
    assert prose_problems(("the softmax ", sp.Symbol("s"), " of a vector of logits sums to one.")) == []
    assert prose_problems("quotient rule; the exponentials are named and positive.") == []


@pytest.mark.parametrize("name", NAMES)
def test_no_ascii_math_in_prose(name):
    assert REG[name].build().prose_problems() == []


REQUIRED_SYMBOLIC = {
    "softmax-jacobian": 1,
    "gradient": 2,
    "kq-gradient": 1,
    "grad-covariance": 1,
    "attsvm-kkt": 2,
    "attsvm-dual": 1,
    "attsvm-nuc-dual": 1,
}


@pytest.mark.parametrize("name", sorted(REQUIRED_SYMBOLIC))
def test_required_steps_are_proved_in_general(name):
    dv = REG[name].build(**REG[name].ci)
    assert dv.scopes()["symbolic"] >= REQUIRED_SYMBOLIC[name], dv.scopes()


def test_at_least_ten_symbolic_steps():
    n = sum(REG[k].build().scopes()["symbolic"] for k in NAMES)
    assert n >= 10, n


# ---------------------------------------------------------------------- the standalone document
OVERFULL = re.compile(r"Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\)")


def overfull_boxes(log: str) -> list[float]:
    """Widths (pt) of the overfull hboxes a pdflatex log reports."""
    return [float(m.group(1)) for m in OVERFULL.finditer(log)]


def test_overfull_parser():
    log = "Overfull \\hbox (95.52882pt too wide) in paragraph\nOverfull \\hbox (0.7pt too wide) detected"
    assert overfull_boxes(log) == [95.52882, 0.7]


@pytest.mark.tex
@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed: overfull boxes not measured")
def test_standalone_document_has_no_overfull_box(tmp_path):
    tex = tmp_path / "all.tex"
    tex.write_text(document([REG[k].build() for k in NAMES], standalone=True), encoding="utf-8")
    r = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "all.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:]
    log = (tmp_path / "all.log").read_text(errors="replace")
    wide = [w for w in overfull_boxes(log) if w > 5.0]
    assert wide == [], f"overfull boxes wider than 5 pt: {wide}"
