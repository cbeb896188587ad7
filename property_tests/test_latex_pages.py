r"""Derivation pages a referee accepts (issue 32).

* Step references are generated from step labels (``{step:LABEL}``, ``{step:DERIVATION/LABEL}``): the gradient page
  cites the steps that define what it uses, an unknown label is an error when the derivation is built, and no
  derivation source writes a step number by hand.
* Every symbol a page uses is defined on it (:mod:`attsvm.symbolic.lint`): every generated page, every golden and
  an instance KKT page pass; a page with an undefined symbol fails.
* A page says "Checked in this run" for a step only when ``--check`` ran that step's check, and every page ends
  with a provenance block (attsvm version, date, the checks that ran).
* The goldens are compared byte for byte with ``SOURCE_DATE_EPOCH`` set to the golden date.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from attsvm import __version__
from attsvm.cli import main
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.provenance import NONE_RAN
from attsvm.symbolic import Chain, Derivation, Equal, derivation, discover
from attsvm.symbolic.derivation import golden_date
from attsvm.symbolic.kkt_instance import certify, derivation_of, exact_data, solve_exact
from attsvm.symbolic.lint import STANDARD, defined_bases, lint_problems, undefined_symbols

REPO = Path(__file__).resolve().parents[1]
REG = discover([REPO / "proofs" / "derivations"])
NAMES = sorted(REG)
GOLDEN = REPO / "proofs" / "tex"


def _paragraph(tex: str, number: int) -> str:
    """The text of step ``number`` of a page: from its ``\\paragraph`` to the next one (or the provenance)."""
    start = tex.index(f"\\paragraph{{{number}. ")
    ends = [k for k in (tex.find("\\paragraph{", start + 1), tex.find("\\textbf{Provenance.}", start)) if k > 0]
    return tex[start : min(ends)]


# ---------------------------------------------------------------------- (a) references from labels
def test_gradient_page_cites_the_steps_it_uses():
    d = REG["gradient"].build()
    tex = d.latex(standalone=True)
    n = {label: d.number(label) for label in ("logits", "jacobian", "chain-rule", "matrix-form", "average")}
    # the logits and the Jacobian are the steps whose statements differentiate the logits and the probabilities
    assert r"\frac{\partial {a}_{t}}{\partial {w}_{j,k}}" in _paragraph(tex, n["logits"])
    assert r"\frac{\partial {s}_{t}}{\partial {a}_{\tau}}" in _paragraph(tex, n["jacobian"])
    chain = _paragraph(tex, n["chain-rule"])
    assert f"with steps {n['logits']} and {n['jacobian']};" in chain
    assert f"against the matrix form of step {n['matrix-form']}," in chain
    assert n["matrix-form"] != n["chain-rule"]  # the evidence does not cite its own step
    assert f"With step {n['chain-rule']} the gradient" in _paragraph(tex, n["matrix-form"])
    assert f"written out as in step {n['chain-rule']} " in _paragraph(tex, n["average"])
    assert f"in step {n['chain-rule']}." in _paragraph(tex, d.number("residual"))
    assert f"Steps {n['logits']} to {n['matrix-form']} fix one input" in _paragraph(tex, d.number("definitions"))
    # a reference into another derivation resolves there: the Jacobian step of softmax-jacobian
    sj = REG["softmax-jacobian"].build()
    assert f"(derivation softmax-jacobian, step {sj.number('jacobian')})." in _paragraph(tex, n["jacobian"])
    assert "{step:" not in tex


@pytest.mark.parametrize("name", NAMES)
def test_every_reference_resolves_and_no_step_number_is_written_by_hand(name):
    tex = REG[name].build().latex(standalone=True)
    assert "{step:" not in tex
    source = Path(REG[name].source).read_text(encoding="utf-8")
    hand = re.findall(r"\b[Ss]teps? \d+", source)
    assert hand == [], f"{name}: write step references as {{step:LABEL}}, not {hand}"


def test_labels_are_unique_and_well_formed():
    d = Derivation("toy", "toy")
    x = sp.Symbol("x")
    d.premise("the definition", Chain(x, "=", 1), "by definition")
    assert d.steps[0].label == "the-definition"  # the default label
    with pytest.raises(ValueError, match="used by another step"):
        d.premise("again", Chain(x, "=", 1), "again", label="the-definition")
    with pytest.raises(ValueError, match="not lower-case"):
        d.premise("bad", Chain(x, "=", 1), "bad", label="Bad Label")


# ---------------------------------------------------------------------- (b) an unknown label is a build error
def _spec(why: str):
    @derivation(name="cites", title="A derivation citing steps")
    def cites(d: Derivation) -> None:
        x = sp.Symbol("x")
        d.premise("definition", Chain(x, "=", 1), "by definition", label="def")
        d.step("square", Chain(x**2, "=", 1), why, Equal(x**2, 1, subs={x: 1}), label="square")

    return cites


def test_a_known_label_resolves_at_build_time():
    d = _spec("from step {step:def}.").build()
    assert "from step 1." in d.latex()


@pytest.mark.parametrize(
    ("why", "message"),
    [
        ("from step {step:nope}.", "no step labelled 'nope'"),
        ("from derivation gradient, step {step:gradient/nope}.", "no step labelled 'nope'"),
        ("from step {step:no-such-derivation/def}.", "unknown derivation 'no-such-derivation'"),
    ],
)
def test_an_unknown_label_is_a_build_error(why, message):
    with pytest.raises(InputError, match=message):
        _spec(why).build()


def test_an_unknown_label_exits_2_at_the_cli(tmp_path, capsys):
    (tmp_path / "bad.py").write_text(
        "import sympy as sp\n"
        "from attsvm.symbolic import Chain, Equal, derivation\n\n\n"
        "@derivation(name='bad-ref', title='A bad reference')\n"
        "def bad_ref(d):\n"
        "    x = sp.Symbol('x')\n"
        "    d.step('one', Chain(x, '=', x), 'as in step {step:missing}.', Equal(x, x))\n"
    )
    rc = main(["derive", "--path", str(tmp_path), "--json"])
    err = capsys.readouterr().err
    assert rc == 2 and "no step labelled 'missing'" in err


# ---------------------------------------------------------------------- (c) every symbol defined
@pytest.mark.parametrize("name", NAMES)
def test_every_generated_page_defines_its_symbols(name):
    tex = REG[name].build().latex(standalone=True)
    assert lint_problems(tex) == []


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.tex")), ids=lambda p: p.stem)
def test_every_golden_defines_its_symbols(path):
    assert lint_problems(path.read_text(encoding="utf-8")) == []


def _instance_page() -> str:
    rng = np.random.default_rng(0)
    ds = Dataset(X=rng.normal(size=(2, 3, 2)), Y=np.array([1.0, -1.0]), Z=rng.normal(size=(2, 2)), v=rng.normal(size=2))
    cert = certify(ds)
    labels, D, Z, a = exact_data(ds)
    d = derivation_of(solve_exact(labels, D, Z, cert["active"]), alpha=a)
    d.verify()
    return d.latex(standalone=True)


def test_the_instance_kkt_page_defines_its_symbols():
    tex = _instance_page()
    assert lint_problems(tex) == []
    assert r"\item $D_{i,t} = x_{i,\alpha_{i}} - x_{i,t}$" in tex


# the first step of the instance KKT page before issue 32: D_{i,t}, A_{i,t} and z_i used, never defined
OLD_KKT = r"""\paragraph{1. reduced KKT system} (premise) stationarity and complementary slackness on the set of the $k$
active constraints (derivation attsvm-kkt), with the Gram matrix of entries $\left\langle A_{i,t},
A_{j,\tau}\right\rangle = D_{i,t}^{\top} D_{j,\tau} z_{i}^{\top} z_{j}$.
\begin{equation*}
G \lambda = \mathbf{1}
\end{equation*}
"""


def test_a_page_with_an_undefined_symbol_fails():
    bad = undefined_symbols(OLD_KKT)
    assert {u.base for u in bad} >= {"D", "A", "z", r"\mathbf{1}"}
    assert any("undefined symbol $D_{i,t}$ (base $D$)" in p for p in lint_problems(OLD_KKT))
    # planted in a page that passes: a new subscripted symbol, then a new macro
    good = REG["gradient"].build().latex(standalone=True)
    assert lint_problems(good) == []
    planted = good.replace(r"\end{document}", r"Finally $q = Q_{i,t} + 1$." + "\n\\end{document}")
    assert [u.base for u in undefined_symbols(planted)] == ["Q"]
    planted = good.replace(r"\end{document}", r"Finally $\Omega + 1$." + "\n\\end{document}")
    assert [u.base for u in undefined_symbols(planted)] == [r"\Omega"]
    # the instance page without its notation row for D fails again
    page = _instance_page()
    row = next(ln for ln in page.splitlines() if ln.startswith(r"\item $D_{i,t}"))
    assert [u.base for u in undefined_symbols(page.replace(row + "\n", ""))] == ["D"]


def test_what_the_lint_counts_as_a_definition():
    # a base is defined for all its subscripts by a notation row or a defining relation
    assert lint_problems(r"$D_{i,t} = x - y$ and $D_{j,\tau}^{\top} z$") == []
    assert lint_problems(r"$X_{i} \in \mathbb{R}^{T}$, then $X_{j}$") == []
    assert lint_problems(r"$a, \beta_{i} \coloneqq 1$ and $\beta_{2}$") == []
    notation = (
        r"\paragraph{Notation.}\begin{itemize}\item $\mathrm{Cov}_{s}\left(g, h\right)$: covariance.\end{itemize}"
    )
    assert lint_problems(notation + r" $\mathrm{Cov}_{s}\left(g_{t}, h_{t}\right)$") == []  # formal arguments
    # a relation that is not a definition does not define; a symbol in a list without a relation neither
    assert [u.base for u in undefined_symbols(r"$\lambda_{i} \ge 0$")] == [r"\lambda"]
    assert [u.base for u in undefined_symbols(r"$u_{i}, v_{i}$")] == ["u", "v"]
    assert [u.base for u in undefined_symbols(r"$W' = 2$ and $W''$")] == ["W''"]
    # a symbol in a power or an upper limit is used, not an index
    assert [u.base for u in undefined_symbols(r"$e^{- R \rho \left(1 + 2 \delta\right)}$, $\rho = 1$")] == [r"\delta"]
    assert [u.base for u in undefined_symbols(r"$\sum_{t=1}^{\Theta} t$")] == [r"\Theta"]
    # indices and summation variables, standard macros, Euler's number and bare letters need no definition
    assert lint_problems(r"$\sum_{\tau=1}^{T} \exp{x} + e^{y} \le \frac{1}{n}$ over $\tau$; $\mathrm{diag}(s)$") == []
    assert {r"\sum", r"\frac", r"\exp", r"\log", r"\top", r"\left"} <= STANDARD
    assert "D" in defined_bases(r"$D_{i,t} = 0$") and r"\gamma" not in defined_bases(r"$\gamma_{t} > 0$")


# ---------------------------------------------------------------------- (d) checked only when checked
@pytest.mark.parametrize("check", [False, True], ids=["without-check", "with-check"])
def test_a_page_says_checked_only_when_the_check_ran(tmp_path, capsys, check):
    out = tmp_path / "page.tex"
    argv = ["derive", "nuclear-variational", "--standalone", "--latex", str(out)] + (["--check"] if check else [])
    assert main(argv) == 0
    capsys.readouterr()
    tex = out.read_text(encoding="utf-8")
    d = REG["nuclear-variational"].build()
    checked = [k for k, st in enumerate(d.steps, 1) if st.check is not None]
    assert checked
    assert "the identity holds" not in tex  # the wording before issue 32, a claim made whether or not it ran
    prov = tex[tex.index(r"\textbf{Provenance.}") :]
    assert f"attsvm {__version__}, attsvm derive nuclear-variational, " in prov
    if check:
        assert tex.count(r"\emph{Checked in this run}") == len(checked)
        assert "not checked in this run" not in tex.lower()
        for k in checked:
            assert re.search(rf"\\item step {k} \(.*\): .*, passed", prov), k
        assert NONE_RAN not in prov
    else:
        assert r"\emph{Checked in this run}" not in tex
        hint = r"\emph{Not checked in this run} (run \texttt{attsvm derive nuclear-variational --check})"
        assert tex.count(hint) == len(checked)
        assert NONE_RAN in prov and r"\item step" not in prov


def test_a_failed_check_is_reported_as_failed():
    x = sp.Symbol("x")
    d = Derivation("toy", "A false step")
    d.step("false", Chain(x + x, "=", 3 * x), "wrong on purpose", Equal(x + x, 3 * x))
    d.verify()
    tex = d.latex()
    assert r"\emph{Check FAILED in this run}" in tex and "Checked in this run}" not in tex
    assert "step 1 (false): checked on instances, FAILED" in tex
    md = d.markdown()
    assert "*Check FAILED in this run*" in md and "**Provenance.**" in md


# ---------------------------------------------------------------------- goldens: stable, dated by SOURCE_DATE_EPOCH
# (the byte-for-byte comparison of each golden is test_derivations.py::test_golden_latex, dated the same way)


def test_golden_date_does_not_follow_the_clock(monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert golden_date() == "2026-12-04"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert golden_date() == "1970-01-01"
    page = REG["softmax-decay"].build().latex(standalone=True, date=golden_date())
    assert "attsvm derive softmax-decay, 1970-01-01." in page
