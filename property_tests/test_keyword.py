"""``attsvm check -k EXPR`` (issue 10, part 5): the keyword-expression parser and the CLI selection.

The parser is checked against Python's own ``not``/``and``/``or`` (same precedence: not > and > or) on
generated expressions, and on hand-written precedence, parenthesis and error cases; the CLI through a
subprocess on the built-in collection (expected ids computed here from the claims' names, not by the module
under test)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm.claims import Outcome, claim, discover, select
from attsvm.claims.keyword import ExpressionError, matches, parse, select_keyword
from attsvm.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("x", "y", "z")


def _ev(text: str, true: set[str]) -> bool:
    return parse(text).evaluate(lambda w: w in true)


# ---------------------------------------------------------------------- the parser
def _exprs():
    leaf = st.sampled_from(WORDS)

    def extend(inner):
        return st.one_of(
            inner.map(lambda e: f"not {e}"),
            inner.map(lambda e: f"({e})"),
            st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(" ".join),
        )

    return st.recursive(leaf, extend, max_leaves=8)


@given(_exprs(), st.sets(st.sampled_from(WORDS)))
def test_parser_agrees_with_python_boolean_precedence(text, true):
    env = {w: w in true for w in WORDS}
    assert _ev(text, true) == eval(text, {"__builtins__": {}}, env)  # noqa: S307 - generated from a tiny grammar


@pytest.mark.parametrize(
    "text, true, want",
    [
        ("x or y and z", {"x"}, True),  # x or (y and z)
        ("x or y and z", {"y"}, False),
        ("(x or y) and z", {"x"}, False),
        ("(x or y) and z", {"x", "z"}, True),
        ("not x and y", {"y"}, True),  # (not x) and y
        ("not x and y", {"x", "y"}, False),
        ("not x and y", set(), False),  # not (x and y) would be True
        ("not x or y", set(), True),
        ("not (x and y)", {"x"}, True),
        ("not x or y", {"x"}, False),  # (not x) or y
        ("not not x", {"x"}, True),
        ("x and not y or z", {"x", "y"}, False),  # (x and (not y)) or z
        ("x and not y or z", {"x", "y", "z"}, True),
        ("((x))", {"x"}, True),
        ("", set(), True),  # the empty expression selects everything (as pytest -k "")
        ("  ", set(), True),
    ],
)
def test_precedence_and_parentheses(text, true, want):
    assert _ev(text, true) is want


def test_operators_are_lower_case_words_and_words_may_carry_dashes():
    assert _ev("OR", {"OR"}) and not _ev("OR", set())  # "OR" is a word, not an operator
    assert _ev("gd-local-cone", {"gd-local-cone"})
    assert _ev("not-x", {"not-x"})  # one word, not "not x"
    assert _ev("a.b:c/d[1]+e\\f", {"a.b:c/d[1]+e\\f"})


@pytest.mark.parametrize(
    "text, column, message",
    [
        ("x or", 5, "expected a word, 'not' or '('; got end of input"),
        ("(x", 3, "expected ')'; got end of input"),
        ("x)", 2, "expected 'and', 'or' or end of input; got ')'"),
        ("x y", 3, "expected 'and', 'or' or end of input; got 'y'"),
        ("and x", 1, "expected a word, 'not' or '('; got 'and'"),
        ("not", 4, "expected a word, 'not' or '('; got end of input"),
        ("()", 2, "expected a word, 'not' or '('; got ')'"),
        ("x and (y or)", 12, "expected a word, 'not' or '('; got ')'"),
        ("x $ y", 3, "unexpected character '$'"),
        ("x or 'y'", 6, 'unexpected character "\'"'),
    ],
)
def test_malformed_expressions_name_the_column(text, column, message):
    with pytest.raises(ExpressionError) as e:
        parse(text)
    assert isinstance(e.value, InputError)  # exit 2 at the CLI
    assert (e.value.column, e.value.message) == (column, message)
    assert str(e.value) == f"-k {text!r}: at column {column}: {message}"


# ---------------------------------------------------------------------- matching claims
def _claim(id: str, origin: str = "paper", kind: str = "universal"):
    extra = {"rate": 0.9} if kind == "empirical" else {}
    return claim(id=id, title="t", origin=origin, kind=kind, hypotheses={"data": "paper"}, **extra)(
        lambda case: Outcome(ok=True, margin=1.0)
    )


def test_words_match_substrings_of_id_origin_and_kind_ignoring_case():
    c = _claim("svm-rank", origin="paper")
    e = _claim("gd-rate", origin="reconstructed", kind="empirical")
    assert matches(c, "rank") and matches(c, "RANK") and matches(c, "svm-r") and not matches(c, "kkt")
    assert matches(c, "pap") and matches(c, "universal") and not matches(c, "empirical")
    assert matches(e, "empirical") and matches(e, "Reconstructed") and matches(e, "gd and not universal")
    assert [x.id for x in select_keyword([c, e], "not empirical")] == ["svm-rank"]
    assert select_keyword([c, e], None) == [c, e]


def test_select_combines_only_and_keyword_and_rejects_an_empty_selection():
    cs = [_claim("svm-rank"), _claim("svm-kkt", origin="derived"), _claim("grad-closed-form", origin="derived")]
    assert [c.id for c in select(cs, ["svm-rank", "grad-closed-form"], "svm or grad")] == [
        "svm-rank",
        "grad-closed-form",
    ]
    assert [c.id for c in select(cs, ["svm-rank", "svm-kkt"], "derived")] == ["svm-kkt"]
    with pytest.raises(InputError, match=r"-k 'paper' selects none of the 1 claims"):
        select(cs, ["svm-kkt"], "paper")
    with pytest.raises(InputError, match="unknown claim id 'nope'"):  # --only is checked first
        select(cs, ["nope"], "svm")


# ---------------------------------------------------------------------- the CLI
def _cli(*argv, cwd):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "attsvm", "check", *map(str, argv)], capture_output=True, text=True, cwd=cwd, env=env
    )


def _listed(p) -> list[str]:
    assert p.returncode == 0, p.stderr
    return [line.split("\t")[0] for line in p.stdout.splitlines() if line.strip()]


BUILTIN = discover()


def _names(c) -> list[str]:
    return [c.id.lower(), c.origin.lower(), c.kind.lower()]


def _has(c, word: str) -> bool:
    return any(word in n for n in _names(c))


@pytest.mark.parametrize(
    "expr, keep",
    [
        ("rank or kkt", lambda c: _has(c, "rank") or _has(c, "kkt")),
        ("not empirical", lambda c: not _has(c, "empirical")),
        ("gd and not kq", lambda c: _has(c, "gd") and not _has(c, "kq")),
        ("(rank or kkt) and not paper", lambda c: (_has(c, "rank") or _has(c, "kkt")) and not _has(c, "paper")),
        ("RP- and not (local or NUCLEAR)", lambda c: _has(c, "rp-") and not (_has(c, "local") or _has(c, "nuclear"))),
    ],
)
def test_k_with_list_on_the_builtin_collection(tmp_path, expr, keep):
    want = [c.id for c in BUILTIN if keep(c)]
    assert want  # every expression here selects something
    assert _listed(_cli("-k", expr, "--list", cwd=tmp_path)) == want


def test_k_examples_select_what_the_issue_says(tmp_path):
    # word match on the id: "rank" selects kq-incremental-rank (issue 28) as well as svm-rank, "kkt" icl-kkt-finite-t
    # (issue 29) as well as svm-kkt
    want = ["icl-kkt-finite-t", "kq-incremental-rank", "svm-kkt", "svm-rank"]
    assert _listed(_cli("-k", "rank or kkt", "--list", cwd=tmp_path)) == want
    gd = _listed(_cli("-k", "gd and not kq", "--list", cwd=tmp_path))
    assert "kq-gd-nuclear" not in gd and {"gd-local-cone", "prompt-gd-pmm"} <= set(gd)
    assert "grad-closed-form" not in gd  # substring of the id, not a fuzzy match
    not_emp = _listed(_cli("-k", "not empirical", "--list", cwd=tmp_path))
    assert "gd-global-equal-scores" not in not_emp  # kind empirical (origin reconstructed)
    assert "svm-rank" in not_emp and len(not_emp) == sum("empirical" not in (c.origin, c.kind) for c in BUILTIN)


def test_k_combines_with_only_and_path(tmp_path):
    only = _cli("--only", "svm-rank", "svm-kkt", "grad-closed-form", "-k", "svm", "--list", cwd=tmp_path)
    assert _listed(only) == ["svm-kkt", "svm-rank"]
    ex = ROOT / "examples" / "conjectures"
    path = _cli(
        ex / "refuted_conjecture.py", ex / "surviving_conjecture.py", "-k", "expected-false", "--list", cwd=tmp_path
    )
    assert _listed(path) == ["first-step-raises-opt"]


@pytest.mark.parametrize(
    "expr, message",
    [
        ("rank or", "error: -k 'rank or': at column 8: expected a word, 'not' or '('; got end of input"),
        ("(rank", "error: -k '(rank': at column 6: expected ')'; got end of input"),
        ("no-such-claim", "error: -k 'no-such-claim' selects none of the"),
    ],
)
def test_bad_k_is_one_error_line_and_exit_2(tmp_path, expr, message):
    p = _cli("-k", expr, "--list", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), p.stderr


def test_k_runs_the_selected_claim(tmp_path):
    p = _cli("-k", "grad-closed-form", "--budget", "ci", "--out", tmp_path / "cx", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line for line in p.stdout.splitlines() if line.startswith("grad-closed-form")]
    assert len(rows) == 1 and "verified" in rows[0]
    assert "1 claims: 1 verified, 0 refuted, 0 inconclusive; all as expected" in p.stdout
