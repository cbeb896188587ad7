"""Jupyter reprs (``_repr_html_``, ``_repr_latex_``, short ``__repr__``) of the data set, the SVM solution, the GD
result, the claim, the claim result and the check report; the counterexample tables of the Markdown and LaTeX
reports; and ``examples/tour.ipynb``, executed with nbclient on a kernel of this interpreter.

Every HTML output must parse (tags closed in order); expected values are computed here from the arrays
(scores $\\gamma_{it}=Y_iv^\\top x_{it}$ with numpy, norms with ``np.linalg.norm``, the loss with
:mod:`attsvm.model`), not read back from the object that renders them."""

from __future__ import annotations

import html as stdhtml
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from attsvm import Dataset, generate, html, load, model
from attsvm.tables import Math, keep, num_tex, number

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "examples" / "tour.ipynb"
CONJ = ROOT / "examples" / "conjectures"
VOID = {"br", "hr", "img", "meta", "input", "link", "col", "wbr"}


# ---------------------------------------------------------------------- an HTML reader for the checks
class _Reader(HTMLParser):
    """Checks that tags close in order; collects the text, and every table as its caption and rows of
    (text, bold) cells."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.text: list[str] = []
        self.tables: list[dict] = []
        self._open: list[dict] = []
        self._cell: list[str] | None = None
        self._bold = False

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag == "table":
            self._open.append({"caption": "", "rows": []})
        elif tag == "tr" and self._open:
            self._open[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell, self._bold = [], False
        elif tag == "b" and self._cell is not None:
            self._bold = True

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        if tag == "table":
            self.tables.append(self._open.pop())
        elif tag in ("td", "th") and self._cell is not None and self._open:
            self._open[-1]["rows"][-1].append(("".join(self._cell), self._bold))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        elif self._open and "caption" in self.stack:
            self._open[-1]["caption"] += data


def read(raw: str) -> _Reader:
    p = _Reader()
    p.feed(raw)
    p.close()
    assert not p.problems and not p.stack, (p.problems, p.stack)
    return p


def parse(raw: str) -> str:
    """The text of ``raw`` (entities decoded); fails unless every tag is closed in order."""
    return "".join(read(raw).text)


def field(raw: str, key: str) -> str:
    """The text of the value beside ``key`` in a repr's key/value table."""
    m = re.search(r"<th[^>]*>" + re.escape(stdhtml.escape(key)) + r"</th><td[^>]*>(.*?)</td></tr>", raw)
    assert m, f"no field {key!r}"
    return parse(m.group(1))


def input_table(raw: str, i: int) -> dict:
    """The table of input ``i`` (its caption starts with 'input i:')."""
    found = [t for t in read(raw).tables if t["caption"].startswith(f"input {i}:")]
    assert len(found) == 1, [t["caption"] for t in read(raw).tables]
    return found[0]


def scores(ds: Dataset) -> np.ndarray:
    return np.asarray(ds.Y)[:, None] * np.einsum("ntd,d->nt", np.asarray(ds.X), np.asarray(ds.v))


# ---------------------------------------------------------------------- formatting and abbreviation
def test_numbers_have_fixed_significant_digits():
    assert number(1 / 3, 4) == "0.3333" and number(-123456.0, 4) == "-1.235e+05" and number(2.0) == "2"
    assert number(float("inf")) == "inf" and number(float("-inf")) == "-inf" and number(float("nan")) == "nan"
    assert number(None) == "-" and number(np.int64(7)) == "7" and number(np.bool_(True)) == "True"
    assert num_tex("1.2e-16") == r"1.2\times10^{-16}" and num_tex("-inf") == r"-\infty" and num_tex("0.5") == "0.5"


def test_keep_abbreviates_long_axes():
    assert keep(5, 8) == [0, 1, 2, 3, 4] and keep(8, 8) == list(range(8))
    assert keep(20, 6) == [0, 1, 2, 3, None, 19]


def test_array_is_abbreviated_with_its_shape():
    a = np.arange(20 * 30, dtype=float).reshape(20, 30) / 7
    r = read(html.array(a, max_rows=6, max_cols=5))
    (t,) = r.tables
    rows = [[c for c, _ in row] for row in t["rows"]]
    assert t["caption"] == "shape (20, 30)"
    assert len(rows) == 1 + 6 and all(len(row) == 1 + 5 for row in rows)  # the column indices, then 6 rows
    assert rows[0] == ["", "0", "1", "2", "⋯", "29"] and [row[0] for row in rows[1:]] == ["0", "1", "2", "3", "⋮", "19"]
    assert rows[1][1] == f"{a[0, 0]:.4g}" and rows[-1][-1] == f"{a[19, 29]:.4g}" and rows[2][4] == "⋯"
    assert f"{a[10, 10]:.4g}" not in "".join(r.text)
    text = parse(html.array(np.zeros((4, 3, 2))))
    assert "shape (4, 3, 2); 2 more matrices not shown" in text and "[1]" in text and "[2]" not in text


def test_text_and_math_are_escaped():
    from attsvm.claims import Outcome, claim

    c = claim(id="lt<gt>&", title="<script>x</script> a < b", origin="derived", hypotheses={"data": "paper"})(
        lambda case: Outcome(ok=True, margin=1.0)
    )
    raw = c._repr_html_()
    assert "<script>" not in raw and "lt&lt;gt&gt;&amp;" in raw
    text = parse(raw)
    assert "lt<gt>&" in text and field(raw, "statement") == "<script>x</script> a < b"
    assert html.piece(Math("a<b")) == "$a&lt;b$" and html.piece("x&y") == "x&amp;y"
    assert repr(c) == "Claim(id='lt<gt>&', origin='derived', kind='universal', title='<script>x</script> a < b')"


# ---------------------------------------------------------------------- data set
def test_dataset_repr():
    ds = generate.paper_law(5, 12, 9, seed=3)
    assert repr(ds) == "Dataset(kind='cross', n=5, T=12, d=9, selection=opt)"
    assert ds == ds and ds != Dataset(ds.X, ds.Y, ds.Z, ds.v)  # equality is still identity (eq=False)
    raw = ds._repr_html_()
    assert field(raw, "sizes") == "n=5, T=12, d=9"
    y = np.asarray(ds.Y)
    assert field(raw, "labels") == f"{int(np.sum(y > 0))} x (+1), {int(np.sum(y < 0))} x (-1)"
    gam = scores(ds)
    for i in (0, 1):  # the first two inputs as tables: tokens abbreviated to keep(12, 8), coordinates to keep(9, 6)
        t = input_table(raw, i)
        head, body = t["rows"][0], t["rows"][1:]
        assert [c for c, _ in head][:-1] == ["", "0", "1", "2", "3", "⋯", "8"] and len(body) == 8 + 1  # + z_i
        shown = [j for j in keep(12, 8) if j is not None]
        bold = [c for row in body for c, b in row if b]
        best = int(np.argmax(gam[i]))
        assert bold == ([f"{gam[i, best]:.4g}"] if best in shown else [])
        assert body[0][1][0] == f"{ds.X[i, 0, 0]:.4g}" and body[-1][0][0] == f"$z_{{{i}}}$"
    assert not any(t["caption"].startswith("input 2:") for t in read(raw).tables)
    other = ds.with_alpha(np.zeros(5, dtype=np.int64))
    differs = int(np.sum(np.argmax(gam, axis=1) != 0))
    assert field(other._repr_html_(), "alpha = opt") == ("yes" if not differs else f"no, at {differs} inputs")
    assert repr(other).endswith("selection=alpha)")


def test_dataset_repr_of_batches_and_sequences():
    b = generate.paper_law(3, 4, 5, seed=1, B=4)
    assert repr(b) == "Dataset(kind='cross', B=4, n=3, T=4, d=5, selection=opt)"
    assert "inputs 0-1 of item 0 of the batch" in parse(b._repr_html_())
    s = generate.sequence(2, 5, 4, K=3, seed=2)
    raw = s._repr_html_()
    head = [c for c, _ in input_table(raw, 0)["rows"][0]]
    assert head[-3:] == ["$\\gamma_{0,0,t}$", "$\\gamma_{0,1,t}$", "$\\gamma_{0,2,t}$"]
    c = generate.causal(2, 4, 3, seed=3)
    head, *body = input_table(c._repr_html_(), 0)["rows"]
    assert [h for h, _ in head][4:] == ["$\\gamma_{0,0,t}$", "⋯", "$\\gamma_{0,3,t}$"]  # queries keep(4, 3)
    assert len(body) == 4 and all(c != "-" for c, _ in body[0])  # token 0 is seen by every query
    assert all(row[4][0] == "-" for row in body[1:]) and all(row[6][0] != "-" for row in body)  # query 0 / 3


# ---------------------------------------------------------------------- SVM solution
def test_solution_repr():
    from attsvm import svm

    ds = generate.paper_law(4, 5, 6, seed=1)
    sol = svm.solve(ds, certify=True)
    r = repr(sol)
    assert r.startswith("SVMSolution(program='attsvm', norm='fro', status='optimal', ||W||_F=") and len(r) < 200
    raw = sol._repr_html_()
    W = np.asarray(sol.W)
    assert field(raw, "status") == "optimal"
    assert field(raw, "norm") == f"$\\left\\|W\\right\\|_F={np.linalg.norm(W):.6g}$"
    assert field(raw, "active constraints") == f"{len(sol.support)} of {4 * (5 - 1)}"  # n(T-1) constraints
    assert field(raw, "smallest margin") == f"{np.nanmin(np.asarray(sol.margins)):.4g}"
    (wt,) = [t for t in read(raw).tables if t["caption"] == "shape (6, 6)"]
    assert [[c for c, _ in row[1:]] for row in wt["rows"][1:]] == [[f"{x:.4g}" for x in row] for row in W]
    latex = sol._repr_latex_()
    body = latex.split("\\begin{pmatrix}")[1].split("\\end{pmatrix}")[0]
    entry = lambda x: float(x.replace("\\times10^{", "e").rstrip("}"))  # noqa: E731
    shown = np.array([[entry(x) for x in row.split("&")] for row in body.split("\\\\")])
    assert latex.startswith("$$W=") and np.allclose(shown, W, rtol=1e-3, atol=1e-12)
    bad = svm.solve(load(ROOT / "examples" / "infeasible.npz"))
    raw = bad._repr_html_()
    assert field(raw, "status") == "infeasible" and "Farkas multipliers" in parse(raw) and bad._repr_latex_() is None
    assert "status='infeasible'" in repr(bad) and "||W||" not in repr(bad)


# ---------------------------------------------------------------------- GD
def test_gd_repr():
    from attsvm import gd

    ds = generate.paper_law(3, 4, 3, seed=0)
    res = gd.run(ds, param="W", algo="gd", lr=0.5, steps=7)
    assert repr(res).startswith("GDResult(param='W', algo='gd', B=1, steps=[7], stop_reason=['steps']")
    raw = res._repr_html_()
    W = np.asarray(res.W[0])
    assert field(raw, "steps") == "7" and field(raw, "stop reason") == "steps"
    assert field(raw, "final loss") == f"{float(np.mean(model.loss(ds, W))):.4g}"  # the numpy model's loss
    assert field(raw, "norm") == f"$\\left\\|W\\right\\|_F={np.linalg.norm(W):.6g}$"
    batch = gd.run(generate.paper_law(3, 4, 5, seed=1, B=10), param="p", algo="gd", lr=0.1, steps=5)
    assert len(repr(batch)) < 400 and "B=10" in repr(batch)
    (t,) = read(batch._repr_html_()).tables[1:]
    runs = [row[0][0] for row in t["rows"][1:]]
    assert runs == ["0", "1", "2", "3", "4", "5", "⋯", "9"]  # 10 runs abbreviated to keep(10, 8)


# ---------------------------------------------------------------------- claims, results, reports
def _big_result(tmp_path):
    from attsvm.claims import Case, ClaimResult, Outcome

    ds = generate.paper_law(20, 30, 40, seed=5)
    case = Case(data=ds)
    case.draws.append(np.full((3, 3), 0.25))
    return ds, ClaimResult(
        id="big<claim>",
        title="t < 1",
        origin="derived",
        expected="true",
        kind="universal",
        verdict="refuted",
        reason="planted",
        examples=3,
        case=case,
        outcome=Outcome(ok=False, margin=-0.5, detail={"err": 0.25, "M": np.eye(2)}),
        confirmed=True,
        counterexample=str(tmp_path / "big.npz"),
        confirmation_method="50 digits",
    )


def test_large_counterexample_is_a_truncated_table(tmp_path):
    from attsvm.claims import report

    ds, r = _big_result(tmp_path)
    gam = scores(ds)
    md = report.markdown([r])
    tables = re.findall(r"^\*input (\d+):.*?\n\n((?:\|.*\|\n)+)", md, re.M)
    assert [int(i) for i, _ in tables] == [0, 1, 2, 3]  # the first 4 of the 20 inputs
    shown = [t for t in keep(30, 8) if t is not None]
    for i, body in tables:
        i = int(i)
        lines = body.strip().splitlines()
        assert len(lines) == 2 + 8 + 1  # header, rule, keep(30, 8) token rows, z_i
        assert lines[0].count("|") == 1 + 1 + 6 + 1  # label, keep(40, 6) coordinates, gamma
        best = int(np.argmax(gam[i]))
        assert (f"**{gam[i, best]:.6g}**" in body) == (best in shown)
    assert "n=20, T=30, d=40" in md and "inputs 0-3 of 20 shown" in md and "tables abbreviated" in md
    assert f"exact values of every entry: {tmp_path / 'big.npz'}" in md and "```\n[[" not in md
    tex = report.latex([r])
    assert "verbatim" not in tex and tex.count("\\begin{tabular}[t]") == 4 + 2 + 1  # inputs, values + M, draw
    assert "\\textbackslash" not in tex.split("Counterexample data")[1].split("Reproduce")[0]
    raw = r._repr_html_()
    assert field(raw, "counterexample") == str(tmp_path / "big.npz") and "big&lt;claim&gt;" in raw
    if shutil.which("pdflatex"):
        (tmp_path / "r.tex").write_text(tex)
        p = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "r.tex"], cwd=tmp_path, capture_output=True
        )
        assert p.returncode == 0, p.stdout[-2000:]


def test_real_counterexample_in_the_reports(tmp_path):
    from attsvm.claims import discover, report, run_claim

    (c,) = discover([CONJ / "refuted_conjecture.py"])
    r = run_claim(c, budget="ci", out=tmp_path)
    assert r.verdict == "refuted" and r.counterexample
    with np.load(r.counterexample) as f:
        X, Y, v = f["X"], f["Y"], f["v"]
    gam = Y[:, None] * np.einsum("ntd,d->nt", X, v)
    md, tex = report.markdown([r]), report.latex([r])
    for i in range(X.shape[0]):
        best = int(np.argmax(gam[i]))
        assert f"*input {i}: $Y_{{{i}}}={Y[i]:.6g}$, $\\alpha_{{{i}}}={best}$ (opt)*" in md
        assert f"| **{gam[i, best]:.6g}** |" in md
        assert "\\mathbf{" + num_tex(f"{gam[i, best]:.6g}") + "}" in tex
        row = f"| $x_{{{i},0}}$ | " + " | ".join(f"{x:.6g}" for x in X[i, 0]) + " |"
        assert row in md
    assert "verbatim" not in tex and "```\n[[" not in md
    raw = r._repr_html_()
    assert re.search(r"background:#cf222e[^>]*>refuted<", raw) and field(raw, "as expected") == "yes"
    if shutil.which("pdflatex"):
        (tmp_path / "r.tex").write_text(tex)
        p = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "r.tex"], cwd=tmp_path, capture_output=True
        )
        assert p.returncode == 0, p.stdout[-2000:]


def test_claim_result_and_report_reprs(tmp_path):
    from attsvm.claims import ClaimResult, discover
    from attsvm.claims.report import Report, markdown

    (c,) = discover([CONJ / "surviving_conjecture.py"])
    raw = c._repr_html_()
    assert field(raw, "origin") == "derived" and field(raw, "expected verdict") == "verified"
    hyp = [t for t in read(raw).tables if t["rows"] and t["rows"][0][0][0] == "key"][0]
    assert {row[0][0]: row[1][0] for row in hyp["rows"][1:]} == {k: repr(v) for k, v in c.hypotheses.items()}
    ok = ClaimResult(id="a", title="A", origin="derived", expected="true", kind="universal", verdict="verified")
    bad = ClaimResult(id="b", title="B", origin="derived", expected="true", kind="universal", verdict="inconclusive")
    assert (
        repr(ok)
        == "ClaimResult(id='a', verdict='verified', expected='true', matches=True, examples=0, confirmed=False)"
    )
    rep = Report([ok, bad], seed=0)
    assert rep == [ok, bad] and rep.exit_code == 1 and Report([ok]).exit_code == 0
    assert rep.markdown() == markdown([ok, bad]) and rep.to_json()["summary"]["seed"] == 0
    raw = rep._repr_html_()
    assert field(raw, "exit code").startswith("1: a verdict is not as expected")
    assert field(raw, "totals") == "2 claims: 1 verified, 0 refuted, 1 inconclusive; NOT as expected: b"
    (claims,) = [t for t in read(raw).tables if t["rows"] and t["rows"][0][0][0] == "id"]
    assert [row[0][0] for row in claims["rows"][1:]] == ["a", "b"]
    assert re.search(r"background:#9a6700[^>]*>inconclusive<", raw) and "<details>" in raw  # b is folded below
    assert repr(rep) == "Report(2 claims: 1 verified, 0 refuted, 1 inconclusive; NOT as expected: b)"


# ---------------------------------------------------------------------- the notebook
def test_committed_notebook_is_clean():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NB, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Execute the notebook on a kernel started with this interpreter (a kernel spec of our own on JUPYTER_PATH,
    so that no other 'python3' kernel of the machine is picked); the rich output of each tagged cell."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    home = tmp_path_factory.mktemp("jupyter")
    spec = home / "kernels" / "attsvm-tour"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "attsvm tests", "language": "python"}))
    nb = nbformat.read(NB, as_version=4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(home))
        client = nbclient.NotebookClient(
            nb, kernel_name="attsvm-tour", timeout=300, resources={"metadata": {"path": str(NB.parent)}}
        )
        client.execute()
    out = {}
    for cell in nb.cells:
        for tag in cell.get("metadata", {}).get("tags", []):
            results = [o for o in cell.outputs if o.output_type == "execute_result"]
            assert len(results) == 1, (tag, cell.outputs)
            out[tag] = results[0]["data"]
    return out


def _html(outputs, tag) -> tuple[str, str]:
    data = outputs[tag]
    assert "text/html" in data, (tag, sorted(data))
    return data["text/html"], parse(data["text/html"])


def test_notebook_dataset(outputs):
    raw, text = _html(outputs, "dataset")
    assert "Dataset" in text and field(raw, "sizes") == "n=3, T=4, d=3" and "cross data" in text
    gam = scores(generate.paper_law(3, 4, 3, seed=0))  # the notebook's data set
    best = int(np.argmax(gam[0]))
    assert [c for row in input_table(raw, 0)["rows"] for c, b in row if b] == [f"{gam[0, best]:.4g}"]


def test_notebook_solution(outputs):
    raw, text = _html(outputs, "solution")
    assert "SVMSolution" in text and field(raw, "status") == "optimal"
    assert field(raw, "certificate") == "exact-rational, verified"
    latex = outputs["solution"]["text/latex"]
    assert latex.startswith("$$W=\\begin{pmatrix}") and "\\left\\|W\\right\\|_F=" in latex
    # the norm printed is the Frobenius norm of the printed (rounded to 4 digits) matrix
    body = latex.split("\\begin{pmatrix}")[1].split("\\end{pmatrix}")[0]
    W = np.array([[float(x) for x in row.split("&")] for row in body.split("\\\\")])
    shown = float(latex.split("_F=")[1].rstrip("$"))
    assert W.shape == (3, 3) and abs(np.linalg.norm(W) - shown) <= 1e-3 * shown
    assert field(raw, "norm") == f"$\\left\\|W\\right\\|_F={shown:.6g}$"


def test_notebook_gd(outputs):
    raw, text = _html(outputs, "gd")
    assert "GDResult" in text and "algorithm ngd" in text and "parameterisation W" in text
    assert field(raw, "steps") == "300" and field(raw, "stop reason") == "steps"  # the notebook's steps=300
    assert field(raw, "step size") == "0.1" and "final W" in text


def test_notebook_claim_and_result(outputs):
    raw, text = _html(outputs, "claim")
    assert "first-step-raises-opt" in text and field(raw, "origin") == "expected-false" and "'paper'" in text
    raw, text = _html(outputs, "result")
    assert "ClaimResult" in text and field(raw, "as expected") == "yes"
    assert re.search(r"background:#cf222e[^>]*>refuted<", raw)  # the verdict, in red
    assert "counterexample data" in text and "$x_{0,0}$" in text and ".npz" in text and "--replay" in text


def test_notebook_report(outputs):
    raw, text = _html(outputs, "report")
    assert field(raw, "totals") == "2 claims: 1 verified, 1 refuted, 0 inconclusive; all as expected"
    assert field(raw, "exit code").startswith("0: every verdict as expected")
    assert "first-step-raises-opt" in text and "descent-lemma-LW" in text


def test_notebook_derivation(outputs):
    from attsvm.symbolic import get

    raw, _ = _html(outputs, "derivation")
    assert "text/latex" in outputs["derivation"]
    steps = get("softmax-jacobian")().steps
    rows = {row[1][0]: [c for c, _ in row] for t in read(raw).tables for row in t["rows"][1:] if len(row) > 3}
    assert len(steps) >= 3 and set(rows) == {s.name for s in steps}
    for s in steps:  # each step's row: its name, scope and status (premise, or verified)
        assert rows[s.name][2] == s.scope
        assert rows[s.name][3] == ("premise" if s.check is None else "verified")
