"""The graph SVM of next-token prediction (:mod:`attsvm.ntp.svm`): agreement with an independent cvxpy+Clarabel
solve whose constraints are built here sample by sample (its own token-priority graphs, SCCs by transitive
closure - not :mod:`attsvm.ntp.graph`), exact certificates re-checked here with the exact embedding differences,
infeasible instances with exact Farkas certificates, bad input, and ``attsvm solve --program ntp``."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_svm_eqsvm import clarabel

from attsvm import generate
from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.ntp.data import NTPData
from attsvm.ntp.generate import ntp
from attsvm.ntp.graph import graph_constraints
from attsvm.ntp.svm import solve_graph_svm
from attsvm.svm.eqsvm import solve_eqsvm
from attsvm.tolerances import tol

REL = 1e-6


# ---------------------------------------------------------------------------------------------- references
def ntp_constraints(data) -> tuple[set, set]:
    """(eq, ineq): sets of triples (q, y, j) from the definition - for every sample (query q = last token, label
    y) and every other visible token j: eq (as (q, min, max)) when y and j reach each other in G^(q), else ineq."""
    tokens, labels, K = np.asarray(data.tokens), np.asarray(data.labels), data.K
    n, T = tokens.shape
    visible = T if data.query_visible else T - 1
    reach: dict[int, np.ndarray] = {}
    for i in range(n):
        q, y = int(tokens[i, -1]), int(labels[i])
        R = reach.setdefault(q, np.eye(K, dtype=bool))
        for t in range(visible):
            if tokens[i, t] != y:
                R[y, tokens[i, t]] = True
    for R in reach.values():  # Warshall: transitive closure
        for k in range(K):
            R |= np.outer(R[:, k], R[k, :])
    eq, ineq = set(), set()
    for i in range(n):
        q, y = int(tokens[i, -1]), int(labels[i])
        for t in range(visible):
            j = int(tokens[i, t])
            if j == y:
                continue
            if reach[q][y, j] and reach[q][j, y]:
                eq.add((q, min(y, j), max(y, j)))
            else:
                ineq.add((q, y, j))
    return eq, ineq


def reference(data, norm: str):
    """min ||W||_F^2 / ||W||_* over the constraints of :func:`ntp_constraints`, one cvxpy constraint each;
    (objective, W) or None when Clarabel reports infeasible."""
    import cvxpy as cp

    E = np.asarray(data.E)
    eq, ineq = ntp_constraints(data)
    W = cp.Variable((data.d, data.d))
    cons = [(E[y] - E[j]) @ W @ E[q] >= 1 for q, y, j in sorted(ineq)]
    cons += [(E[y] - E[j]) @ W @ E[q] == 0 for q, y, j in sorted(eq)]
    return clarabel(cp.Problem(cp.Minimize(cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)), cons), W)


def _emb(data):
    return [[Fraction(float(x)) for x in row] for row in np.asarray(data.E)]


def _triples(sol):
    eq = [tuple(int(v) for v in r) for r in np.asarray(sol.extra["eq"]).reshape(-1, 3)]
    ineq = [tuple(int(v) for v in r) for r in np.asarray(sol.extra["ineq"]).reshape(-1, 3)]
    return eq, ineq


def _combination(data, terms) -> list[list[Fraction]]:
    """sum x (e_y - e_j) e_q^T with the exact embedding differences; terms: ((q, y, j), x)."""
    E = _emb(data)
    d = data.d
    W = [[Fraction(0)] * d for _ in range(d)]
    for (q, y, j), x in terms:
        if x:
            for a in range(d):
                da = E[y][a] - E[j][a]
                for b in range(d):
                    W[a][b] += x * da * E[q][b]
    return W


def _margin(data, W, q, y, j) -> Fraction:
    E = _emb(data)
    d = data.d
    return sum(((E[y][a] - E[j][a]) * W[a][b] * E[q][b] for a in range(d) for b in range(d)), Fraction(0))


def check_constraint_sets(data, sol):
    eq, ineq = ntp_constraints(data)
    seq, sin = _triples(sol)
    assert set(seq) == eq and len(seq) == len(eq)
    assert set(sin) == ineq and len(sin) == len(ineq)


def independent_kkt(data, sol) -> bool:
    """The exact certificate of a Frobenius solution against the definition: W = sum nu A + sum lam A with the
    exact differences e_y - e_j, equal to the certificate's W; every constraint of :func:`ntp_constraints`
    met exactly; lam >= 0 with margin 1 where lam > 0."""
    eq_t, in_t = _triples(sol)
    terms = [((eq_t if k == "eq" else in_t)[int(r)], Fraction(v)) for k, r, v in sol.certificate["multipliers"]]
    W = _combination(data, terms)
    if W != [[Fraction(v) for v in row] for row in sol.certificate["W"]]:
        return False
    eq, ineq = ntp_constraints(data)
    ok = all(_margin(data, W, *c) == 0 for c in eq) and all(_margin(data, W, *c) >= 1 for c in ineq)
    for (k, _, _), (c, x) in zip(sol.certificate["multipliers"], terms):
        if k == "in":
            ok &= x >= 0 and (x == 0 or _margin(data, W, *c) == 1)
    return bool(ok)


def independent_farkas(data, sol) -> bool:
    eq_t, in_t = _triples(sol)
    mu = [Fraction(v) for v in sol.certificate["mu"]]
    nu = [Fraction(v) for v in sol.certificate["nu"]]
    W = _combination(data, list(zip(in_t, mu)) + list(zip(eq_t, nu)))
    return all(x >= 0 for x in mu) and sum(mu) == 1 and all(v == 0 for row in W for v in row)


def _check(data, norm, sol, ref):
    check_constraint_sets(data, sol)
    if ref is None:
        assert sol.status == "infeasible" and sol.certificate["kind"] == "farkas-exact" and sol.certificate["verified"]
        assert independent_farkas(data, sol)
        return
    obj, _ = ref
    assert sol.status == "optimal" and sol.program == "ntp" and sol.norm == norm
    assert abs(sol.objective - obj) <= REL * max(obj, 1.0), (sol.objective, obj)
    c = sol.certificate
    assert c["verified"] is True, c
    if norm == "fro":
        assert c["kind"] == "exact-kkt" and independent_kkt(data, sol)
        value = sum((Fraction(v) ** 2 for row in c["W"] for v in row), Fraction(0))  # ||W||_F^2, exactly
        assert c["value_str"] is None or Fraction(c["value_str"]) == value
        assert abs(float(value) - obj) <= REL * max(obj, 1.0)
    else:
        assert c["kind"] == "duality-gap" and c["rel_gap"] <= tol("nuc_gap")
        assert c["lower"] <= obj * (1 + REL) and obj <= c["upper"] * (1 + REL)


# ---------------------------------------------------------------------------------------------- generator law
@pytest.mark.parametrize("graph", ["any", "cyclic", "acyclic"])
@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_generator_law_matches_reference(graph, norm):
    n_eq = 0
    for seed in range(5):
        data = ntp(6, 4, 6, 8, graph=graph, seed=seed)
        sol = solve_graph_svm(data, norm)
        _check(data, norm, sol, reference(data, norm))
        n_eq += len(sol.extra["eq"])
        if graph == "acyclic":
            assert len(sol.extra["eq"]) == 0  # acyclic by construction: no equality
        if graph == "cyclic":
            assert len(sol.extra["eq"]) > 0  # a planted SCC: equalities present
    if graph == "cyclic":
        assert n_eq >= 5


def test_exact_features_certify_the_true_program():
    """Cyclic seed 3: the three equalities of a 3-cycle are exactly dependent, but their rounded differences
    fl(e_y - e_j) are not; the exact program of the rounded features has a different optimum. The certificate
    is for the true one (it matches the reference to 1e-9) and its equality rank is 2."""
    data = ntp(6, 4, 6, 8, graph="cyclic", seed=3)
    sol = solve_graph_svm(data, "fro")
    obj, _ = reference(data, "fro")
    assert sol.certificate["verified"] and sol.certificate["eq_rank"] == len(sol.extra["eq"]) - 1
    assert abs(float(Fraction(sol.certificate["value_str"])) - obj) <= 1e-9 * obj
    gc = graph_constraints(data)
    rounded = solve_eqsvm(gc.D_in, gc.Z_in, gc.D_eq, gc.Z_eq)  # the program of the rounded floats
    assert rounded.certificate["verified"] and float(Fraction(rounded.certificate["value_str"])) > 1.05 * obj


# ---------------------------------------------------------------------------------------------- hypothesis
@st.composite
def dyadic_ntp(draw):
    """Next-token data with dyadic embeddings (k/4, |k| <= 3, distinct rows): exact binary, exact differences;
    queries among two ids, so that token-priority graphs with cycles (equalities) are common."""
    K = draw(st.integers(3, 5))
    d = draw(st.integers(2, 4))
    rows = draw(st.lists(st.tuples(*[st.integers(-3, 3)] * d), min_size=K, max_size=K, unique=True))
    E = np.array(rows, dtype=float) / 4.0
    qv = draw(st.booleans())
    n = draw(st.integers(1, 6))
    T = draw(st.integers(3 if not qv else 2, 4))
    tokens = np.array(draw(st.lists(st.lists(st.integers(0, K - 1), min_size=T, max_size=T), min_size=n,
                                    max_size=n)), dtype=np.int64)  # fmt: skip
    tokens[:, -1] = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))  # two queries: cycles are common
    visible = T if qv else T - 1
    labels = np.array([tokens[i, draw(st.integers(0, visible - 1))] for i in range(n)], dtype=np.int64)
    return NTPData(E, tokens, labels, qv)


@settings(max_examples=20, deadline=None)
@given(dyadic_ntp(), st.sampled_from(["fro", "nuc"]))
def test_dyadic_ntp_matches_reference(data, norm):
    _check(data, norm, solve_graph_svm(data, norm), reference(data, norm))


# ---------------------------------------------------------------------------------------------- infeasible
def test_planted_infeasible_d1():
    """d = 1, embeddings 0, 1, 2, 3, query 3: label 0 over token 1 needs -3w >= 1, label 2 over token 1 needs
    3w >= 1 (and no cycle: both are inequalities)."""
    E = np.array([[0.0], [1.0], [2.0], [3.0]])
    data = NTPData(E, np.array([[0, 1, 3], [2, 1, 3]]), np.array([0, 2]))
    assert reference(data, "fro") is None
    for norm in ("fro", "nuc"):
        sol = solve_graph_svm(data, norm)
        _check(data, norm, sol, None)
        assert len(sol.extra["eq"]) == 0


def test_low_dimension_random_vocabulary_infeasible_cases():
    """K = 6 random embeddings in d = 2: some seeds give contradictory constraints; each verdict agrees with the
    reference, and every infeasible one carries an exact Farkas certificate."""
    seen = {"optimal": 0, "infeasible": 0}
    for seed in range(10):
        data = ntp(6, 4, 6, 2, graph="any", seed=seed)
        sol = solve_graph_svm(data, "fro")
        _check(data, "fro", sol, reference(data, "fro"))
        seen[sol.status] += 1
    assert seen["infeasible"] >= 1


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_input():
    with pytest.raises(InputError, match="next-token data"):
        solve_graph_svm(generate.paper_law(3, 4, 5, seed=0))
    with pytest.raises(InputError, match="single"):
        solve_graph_svm(ntp(3, 3, 4, 3, seed=0, B=2))
    with pytest.raises(InputError, match="unknown norm"):
        solve_graph_svm(ntp(3, 3, 4, 3, seed=0), "l1")


# ---------------------------------------------------------------------------------------------- CLI
def run_solve(capsys, *argv):
    try:
        rc = main(["solve", *map(str, argv)])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_certified(capsys, tmp_path):
    data = ntp(6, 4, 6, 8, graph="cyclic", seed=3)
    f = data.save(tmp_path / "ntp.npz")
    ref, _ = reference(data, "fro")
    rc, out, err = run_solve(capsys, f, "--program", "ntp", "--certify", "--json")
    assert rc == 0 and err == ""
    obj = json.loads(out)
    assert obj["status"] == "optimal" and obj["program"] == "ntp" and obj["norm_kind"] == "fro"
    assert obj["certificate"]["kind"] == "exact-kkt" and obj["certificate"]["verified"] is True
    assert abs(obj["objective"] - ref) <= REL * ref and np.array(obj["W"]).shape == (8, 8)
    assert len(obj["eq"]) == 3 and len(obj["eq_margins"]) == 3 and len(obj["support_triples"]) == len(obj["support"])
    rc, out, _ = run_solve(capsys, f, "--program", "ntp", "--norm", "nuc", "--certify", "--json")
    obj = json.loads(out)
    assert rc == 0 and obj["certificate"]["kind"] == "duality-gap" and obj["certificate"]["verified"] is True
    rc, out, _ = run_solve(capsys, f, "--program", "ntp")
    assert rc == 0 and out.startswith("ntp (fro): optimal")


def test_cli_infeasible_exit_1(capsys, tmp_path):
    E = np.array([[0.0], [1.0], [2.0], [3.0]])
    f = NTPData(E, np.array([[0, 1, 3], [2, 1, 3]]), np.array([0, 2])).save(tmp_path / "inf.json")
    rc, out, err = run_solve(capsys, f, "--program", "ntp", "--json")
    assert rc == 1 and err == ""
    obj = json.loads(out)
    assert obj["status"] == "infeasible" and obj["certificate"]["kind"] == "farkas-exact" and sum(obj["farkas"]) > 0


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--program", "ntp", "--norm", "l1"], "fro or nuc"),
        (["--program", "ntp", "--alpha", "1,2"], "alpha"),
        ([], "--program ntp"),
        (["--program", "ntp", "--norm", "lq", "--q", "3"], "fro or nuc"),
    ],
)
def test_cli_bad_input_exit_2(capsys, tmp_path, extra, match):
    f = ntp(4, 3, 5, 4, seed=0).save(tmp_path / "n.npz")
    rc, out, err = run_solve(capsys, f, *extra)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and match in lines[0]


def test_cli_non_ntp_file_with_program_ntp(capsys, tmp_path):
    f = generate.paper_law(4, 5, 6, seed=3).save(tmp_path / "att.npz")
    rc, out, err = run_solve(capsys, f, "--program", "ntp")
    assert rc == 2 and out == ""
    assert err.strip() == f"error: {f}: --program ntp needs next-token data (kind 'ntp'), got kind 'cross'"
    rc, out, err = run_solve(capsys, tmp_path / "missing.npz", "--program", "ntp")
    assert rc == 2 and out == "" and err.startswith("error: ") and len(err.strip().splitlines()) == 1
