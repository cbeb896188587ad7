"""The equality + inequality SVM (:mod:`attsvm.svm.eqsvm`): agreement with an independent cvxpy+Clarabel solve
written here from the definition (one constraint per row), exact certificates re-checked here in plain Python
fractions, tampered certificates and planted wrong multipliers rejected, exact Farkas certificates of infeasible
programs, exact rescaling, trivial programs and bad input."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm.errors import InputError, SolverError
from attsvm.svm.eqsvm import (
    certify_nuclear,
    exact_program,
    exact_program_from_integers,
    solve_eqsvm,
    verify_farkas,
    verify_kkt,
)
from attsvm.tolerances import tol

REL = 1e-6  # solver objective vs the independent reference (both Clarabel at tight tolerances)
#: reference solves: (tolerance, equilibration); a tolerance Clarabel cannot reach is retried looser, a numerical
#: failure (dependent rows) without equilibration
ATTEMPTS = ((1e-10, True), (1e-9, True), (1e-8, True), (1e-9, False))


# ---------------------------------------------------------------------------------------------- references
def reference(D_in, Z_in, D_eq, Z_eq, norm):
    """min ||W||_F^2 or ||W||_* s.t. d_c^T W z_c >= 1 (IN), = 0 (EQ), one cvxpy constraint per row.
    Returns (objective, W) or None when Clarabel reports infeasible."""
    import cvxpy as cp

    d = D_in.shape[1]
    W = cp.Variable((d, d))
    cons = [D_in[c] @ W @ Z_in[c] >= 1 for c in range(len(D_in))]
    cons += [D_eq[c] @ W @ Z_eq[c] == 0 for c in range(len(D_eq))]
    obj = cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)
    return clarabel(cp.Problem(cp.Minimize(obj), cons), W)


def clarabel(p, W):
    """Solve the cvxpy problem ``p`` in ``W`` with Clarabel, tightening and retrying; ``(value, W)``, or None when
    infeasible; any other final status fails the test."""
    import cvxpy as cp

    for t, equil in ATTEMPTS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "may be inaccurate": the status is checked below
            try:
                p.solve(solver="CLARABEL", tol_gap_abs=t, tol_gap_rel=t, tol_feas=t, equilibrate_enable=equil)
            except cp.error.SolverError:
                continue
        if p.status == cp.INFEASIBLE:
            return None
        if p.status == cp.OPTIMAL:
            return float(p.value), np.asarray(W.value)
    raise AssertionError(f"reference: Clarabel status {p.status}")


def F(x) -> Fraction:
    return Fraction(float(x))


def exact_W(rows: list[tuple[np.ndarray, np.ndarray, Fraction]], d: int) -> list[list[Fraction]]:
    """sum_c x_c d_c z_c^T in fractions (rows: (d_c, z_c, x_c))."""
    W = [[Fraction(0)] * d for _ in range(d)]
    for dv, zv, x in rows:
        if x == 0:
            continue
        for a in range(d):
            for b in range(d):
                W[a][b] += x * F(dv[a]) * F(zv[b])
    return W


def exact_margin(W, dv, zv) -> Fraction:
    d = len(W)
    return sum((F(dv[a]) * W[a][b] * F(zv[b]) for a in range(d) for b in range(d)), Fraction(0))


def independent_kkt(D_in, Z_in, D_eq, Z_eq, multipliers) -> tuple[bool, list[list[Fraction]]]:
    """The KKT conditions of the Frobenius program for the certificate's exact multipliers
    ([kind, j, "p/q"]), checked here loop by loop: W = sum nu A + sum lam A, lam >= 0, EQ margins 0, IN margins
    >= 1 and = 1 where lam > 0."""
    nu = [Fraction(0)] * len(D_eq)
    lam = [Fraction(0)] * len(D_in)
    for kind, j, v in multipliers:
        (nu if kind == "eq" else lam)[int(j)] = Fraction(v)
    d = D_in.shape[1]
    rows = [(D_eq[c], Z_eq[c], nu[c]) for c in range(len(D_eq))] + [
        (D_in[c], Z_in[c], lam[c]) for c in range(len(D_in))
    ]
    W = exact_W(rows, d)
    ok = all(x >= 0 for x in lam)
    ok &= all(exact_margin(W, D_eq[c], Z_eq[c]) == 0 for c in range(len(D_eq)))
    for c in range(len(D_in)):
        mg = exact_margin(W, D_in[c], Z_in[c])
        ok &= mg >= 1 and (lam[c] == 0 or mg == 1)
    return bool(ok), W


def independent_farkas(D_in, Z_in, D_eq, Z_eq, mu, nu) -> bool:
    """mu >= 0, sum mu = 1 and sum mu A + sum nu A = 0, in fractions."""
    mu = [Fraction(v) for v in mu]
    nu = [Fraction(v) for v in nu]
    d = D_in.shape[1]
    rows = [(D_in[c], Z_in[c], mu[c]) for c in range(len(D_in))] + [(D_eq[c], Z_eq[c], nu[c]) for c in range(len(D_eq))]
    W = exact_W(rows, d)
    return all(x >= 0 for x in mu) and sum(mu) == 1 and all(v == 0 for row in W for v in row)


# ---------------------------------------------------------------------------------------------- data
@st.composite
def programs(draw, feasible_bias: bool = True):
    """Dyadic data (entries k/4, |k| <= 3: exact binary, small certificates); equalities optionally with a
    dependent row (d_a, z), (d_b, z), (d_a - d_b, z) - the Gram matrix of the equalities is then singular, as for
    a cycle inside an SCC."""
    d = draw(st.integers(2, 4))
    m_in = draw(st.integers(1, 6))
    m_eq = draw(st.integers(0, 2))
    cycle = draw(st.booleans())
    ent = st.integers(-3, 3)

    def mat(m):
        return (
            np.array(draw(st.lists(st.lists(ent, min_size=d, max_size=d), min_size=m, max_size=m)), float).reshape(m, d)
            / 4.0
        )

    D_in, Z_in, D_eq, Z_eq = mat(m_in), mat(m_in), mat(m_eq), mat(m_eq)
    if cycle:
        da, db, z = mat(1)[0], mat(1)[0], mat(1)[0]
        D_eq = np.vstack([D_eq, da, db, da - db])
        Z_eq = np.vstack([Z_eq, z, z, z])
    return D_in, Z_in, D_eq, Z_eq


def _assert_farkas(sol, D_in, Z_in, D_eq, Z_eq):
    assert sol.status == "infeasible" and sol.W is None
    c = sol.certificate
    assert c["kind"] == "farkas-exact" and c["verified"] is True
    assert independent_farkas(D_in, Z_in, D_eq, Z_eq, c["mu"], c["nu"])
    assert np.allclose(sol.farkas, [float(Fraction(v)) for v in c["mu"]], rtol=0, atol=1e-15)
    assert np.allclose(sol.extra["farkas_eq"], [float(Fraction(v)) for v in c["nu"]], rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------------------------- agreement
@settings(max_examples=25, deadline=None)
@given(programs())
def test_frobenius_matches_reference_and_exact_certificate(prob):
    D_in, Z_in, D_eq, Z_eq = prob
    ref = reference(D_in, Z_in, D_eq, Z_eq, "fro")
    sol = solve_eqsvm(D_in, Z_in, D_eq, Z_eq, "fro", certify=True)
    if ref is None:
        _assert_farkas(sol, D_in, Z_in, D_eq, Z_eq)
        return
    obj, Wr = ref
    assert sol.status == "optimal" and sol.norm == "fro" and sol.program == "ntp"
    assert abs(sol.objective - obj) <= REL * max(obj, 1.0)
    assert np.abs(sol.W - Wr).max() <= 1e-4 * max(1.0, np.abs(Wr).max())
    assert sol.margins.shape == (len(D_in),) and sol.extra["eq_margins"].shape == (len(D_eq),)
    for k, v in sol.kkt.items():
        assert v <= tol("kkt"), (k, sol.kkt)
    c = sol.certificate
    assert c["kind"] == "exact-kkt" and c["verified"] is True, c
    ok, W = independent_kkt(D_in, Z_in, D_eq, Z_eq, c["multipliers"])
    assert ok
    assert W == [[Fraction(v) for v in row] for row in c["W"]]
    value = sum((v * v for row in W for v in row), Fraction(0))
    assert Fraction(c["value_str"]) == value
    assert abs(float(value) - obj) <= REL * max(obj, 1.0)
    # the exact active set is the support
    assert sorted(j for _, j in sol.support) == sorted(c["active"])


@settings(max_examples=20, deadline=None)
@given(programs())
def test_nuclear_matches_reference_and_proved_bracket(prob):
    D_in, Z_in, D_eq, Z_eq = prob
    ref = reference(D_in, Z_in, D_eq, Z_eq, "nuc")
    sol = solve_eqsvm(D_in, Z_in, D_eq, Z_eq, "nuc", certify=True)
    if ref is None:
        _assert_farkas(sol, D_in, Z_in, D_eq, Z_eq)
        return
    obj, _ = ref
    assert sol.status == "optimal" and sol.norm == "nuc"
    assert abs(sol.objective - obj) <= REL * max(obj, 1.0)
    c = sol.certificate
    assert c["kind"] == "duality-gap" and c["proved"] and c["verified"], c
    assert c["rel_gap"] <= tol("nuc_gap")
    assert c["lower"] <= obj * (1 + REL) and obj <= c["upper"] * (1 + REL)
    # the float dual point: lam >= 0 and ||sum nu A + sum lam A||_2 <= 1 (to rounding); its value the objective
    lam, nu = sol.multipliers, sol.extra["eq_multipliers"]
    M = D_in.T @ (lam[:, None] * Z_in) + D_eq.T @ (nu[:, None] * Z_eq)
    assert np.all(lam >= 0) and np.linalg.norm(M, 2) <= 1 + 1e-9
    assert abs(lam.sum() - obj) <= REL * max(obj, 1.0)


# ---------------------------------------------------------------------------------------------- planted cases
def _cycle_instance(seed=0, d=4):
    """A feasible program whose equalities are dependent (a 3-cycle with one query) and active multipliers."""
    rng = np.random.default_rng(seed)
    k = lambda *s: rng.integers(-4, 5, s) / 4.0  # noqa: E731
    z = k(d)
    da, db = k(d), k(d)
    D_eq, Z_eq = np.vstack([da, db, da - db]), np.vstack([z, z, z])
    D_in, Z_in = k(8, d), k(8, d)
    return D_in, Z_in, D_eq, Z_eq


def test_dependent_equalities_reduced_exactly():
    for seed in range(20):
        D_in, Z_in, D_eq, Z_eq = _cycle_instance(seed)
        sol = solve_eqsvm(D_in, Z_in, D_eq, Z_eq)
        if sol.status == "optimal" and np.abs(sol.extra["eq_multipliers"]).max() > 1e-6:
            break
    else:
        pytest.fail("no feasible instance with active equalities")
    c = sol.certificate
    assert c["verified"] and c["eq_rank"] == 2  # three equality rows, rank 2: one dropped by the echelon form
    assert independent_kkt(D_in, Z_in, D_eq, Z_eq, c["multipliers"])[0]


def _feasible_with_equalities():
    for seed in range(50):
        prob = _cycle_instance(seed)
        sol = solve_eqsvm(*prob)
        nu = [Fraction(v) for kind, _, v in sol.certificate.get("multipliers", []) if kind == "eq"]
        if sol.status == "optimal" and any(x != 0 for x in nu):
            return prob, sol
    pytest.fail("no feasible instance with a nonzero equality multiplier")


def test_tampered_frobenius_certificates_rejected():
    (D_in, Z_in, D_eq, Z_eq), sol = _feasible_with_equalities()
    prog = exact_program(D_in, Z_in, D_eq, Z_eq)
    mult = sol.certificate["multipliers"]

    def vectors(ms):
        nu, lam = [Fraction(0)] * len(D_eq), [Fraction(0)] * len(D_in)
        for kind, j, v in ms:
            (nu if kind == "eq" else lam)[int(j)] = Fraction(v)
        return nu, lam

    nu, lam = vectors(mult)
    assert verify_kkt(prog, nu, lam)["verified"]
    first_in = next(i for i, m in enumerate(mult) if m[0] == "in")
    first_eq = next(i for i, m in enumerate(mult) if m[0] == "eq" and Fraction(m[2]) != 0)
    bumped = [list(m) for m in mult]
    bumped[first_in][2] = str(Fraction(bumped[first_in][2]) + Fraction(1, 7))
    flipped = [[k, j, str(-Fraction(v))] if k == "eq" else [k, j, v] for k, j, v in mult]  # wrong sign of nu
    dropped = [m for i, m in enumerate(mult) if i != first_in]  # an active constraint left out
    eq_dropped = [m for i, m in enumerate(mult) if i != first_eq]  # an equality multiplier left out
    negative = [list(m) for m in mult]
    negative[first_in][2] = str(-Fraction(negative[first_in][2]))
    for bad in (bumped, flipped, dropped, eq_dropped, negative):
        assert not verify_kkt(prog, *vectors(bad))["verified"]
        assert not independent_kkt(D_in, Z_in, D_eq, Z_eq, bad)[0]  # the test's own checker agrees


def test_frobenius_planted_multipliers_name_the_failed_check():
    (D_in, Z_in, D_eq, Z_eq), sol = _feasible_with_equalities()
    prog = exact_program(D_in, Z_in, D_eq, Z_eq)
    nu = [Fraction(0)] * len(D_eq)
    lam = [Fraction(0)] * len(D_in)
    res = verify_kkt(prog, nu, lam)  # W = 0: equalities hold, every inequality fails
    assert res["checks"]["equalities"] and not res["checks"]["inequalities"]
    lam[0] = Fraction(-1)
    assert not verify_kkt(prog, nu, lam)["checks"]["dual_feasible"]
    # a feasible W = diag(2, 1) whose multiplier is positive on the constraint with margin 2: not complementary
    I2 = np.eye(2)
    res = verify_kkt(exact_program(I2, I2, None, None), [], [2, 1])
    assert res["checks"] == {"dual_feasible": True, "equalities": True, "inequalities": True, "complementary": False}
    assert verify_kkt(exact_program(I2, I2, None, None), [], [1, 1])["verified"]
    assert not independent_kkt(I2, I2, I2[:0], I2[:0], [["in", 0, "2"], ["in", 1, "1"]])[0]
    # the optimum without the equalities meets every other condition but not the equalities
    free = solve_eqsvm(D_in, Z_in, None, None)
    assert free.status == "optimal" and free.objective < sol.objective * (1 - 1e-6)
    lam = [Fraction(0)] * len(D_in)
    for _, j, v in free.certificate["multipliers"]:
        lam[int(j)] = Fraction(v)
    res = verify_kkt(prog, [Fraction(0)] * len(D_eq), lam)
    assert not res["verified"] and res["checks"] == dict(res["checks"], equalities=False, dual_feasible=True,
                                                         inequalities=True, complementary=True)  # fmt: skip
    with pytest.raises(InputError):
        verify_kkt(prog, nu[:-1], lam)


def test_planted_wrong_nuclear_certificates_not_verified():
    (D_in, Z_in, D_eq, Z_eq), _ = _feasible_with_equalities()
    sol = solve_eqsvm(D_in, Z_in, D_eq, Z_eq, "nuc")
    assert sol.certificate["verified"]
    prog = exact_program(D_in, Z_in, D_eq, Z_eq)
    lam, nu = sol.multipliers, sol.extra["eq_multipliers"]
    assert certify_nuclear(prog, sol.W, lam, nu)["verified"]
    # a wrong dual point: still proved dual feasible after its rescaling, but the bracket is loose
    bad = lam.copy()
    bad[int(np.argmin(lam))] += 5 * lam.max()
    c = certify_nuclear(prog, sol.W, bad, nu)
    assert c["dual_feasible_proved"] and not c["verified"] and c["rel_gap"] > tol("nuc_gap")
    # a wrong sign of nu breaks the dual point too
    if np.abs(nu).max() > 1e-6:
        assert not certify_nuclear(prog, sol.W, lam, -nu)["verified"]
    # a wrong primal point (the bound is for it divided by its smallest margin): the bracket is loose
    R = np.random.default_rng(0).standard_normal(sol.W.shape)
    c = certify_nuclear(prog, sol.W + 0.3 * np.abs(sol.W).max() * R, lam, nu)
    assert c["primal_feasible_proved"] and not c["verified"] and c["upper"] >= sol.objective * (1 + 1e-3)
    # a primal point with a negative margin: no upper bound at all
    c = certify_nuclear(prog, -sol.W, lam, nu)
    assert not c["primal_feasible_proved"] and not c["verified"] and c["upper"] == float("inf")


def test_planted_infeasible_equality_contradicts_inequality():
    rng = np.random.default_rng(3)
    D_in, Z_in = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    D_eq = np.vstack([2 * D_in[2], rng.standard_normal(3)])  # <W, 2 A_2> = 0 but <W, A_2> >= 1
    Z_eq = np.vstack([Z_in[2], rng.standard_normal(3)])
    assert reference(D_in, Z_in, D_eq, Z_eq, "fro") is None
    for norm in ("fro", "nuc"):
        sol = solve_eqsvm(D_in, Z_in, D_eq, Z_eq, norm)
        _assert_farkas(sol, D_in, Z_in, D_eq, Z_eq)
        assert sol.certificate["mu"][2] == "1" and sol.certificate["nu"][0] == "-1/2"


def test_infeasible_many_random_rows_in_low_dimension():
    """K > d: 40 random rank-one features in R^{2x2} cannot all have positive margins (Gordan)."""
    rng = np.random.default_rng(0)
    D, Z = rng.integers(-8, 9, (40, 2)) / 8.0, rng.integers(-8, 9, (40, 2)) / 8.0
    assert reference(D, Z, np.zeros((0, 2)), np.zeros((0, 2)), "fro") is None
    for norm in ("fro", "nuc"):
        sol = solve_eqsvm(D, Z, None, None, norm)
        _assert_farkas(sol, D, Z, np.zeros((0, 2)), np.zeros((0, 2)))
        assert verify_farkas(exact_program(D, Z, None, None), sol.certificate["mu"], [])


def test_tampered_farkas_rejected():
    rng = np.random.default_rng(0)
    D, Z = rng.integers(-8, 9, (40, 2)) / 8.0, rng.integers(-8, 9, (40, 2)) / 8.0
    sol = solve_eqsvm(D, Z, None, None)
    prog = exact_program(D, Z, None, None)
    mu = [Fraction(v) for v in sol.certificate["mu"]]
    assert verify_farkas(prog, mu, [])
    j = int(np.argmax(sol.farkas))
    bad = list(mu)
    bad[j] += Fraction(1, 3)
    assert not verify_farkas(prog, bad, []) and not independent_farkas(
        D, Z, D[:0], Z[:0], [v / sum(bad) for v in bad], []
    )
    assert not verify_farkas(prog, [-v for v in mu], [])
    assert not verify_farkas(prog, [Fraction(0)] * len(mu), [])


def test_zero_feature_is_infeasible():
    D_in = np.array([[1.0, 0.0], [0.0, 0.0]])
    Z_in = np.array([[1.0, 1.0], [1.0, 0.5]])
    sol = solve_eqsvm(D_in, Z_in, None, None)
    _assert_farkas(sol, D_in, Z_in, np.zeros((0, 2)), np.zeros((0, 2)))
    assert sol.certificate["mu"] == ["0", "1"]


# ---------------------------------------------------------------------------------------------- structure
def test_no_inequalities_gives_zero():
    D_eq, Z_eq = np.array([[1.0, -1.0]]), np.array([[0.5, 0.25]])
    for norm in ("fro", "nuc"):
        sol = solve_eqsvm(np.zeros((0, 2)), np.zeros((0, 2)), D_eq, Z_eq, norm)
        assert sol.status == "optimal" and sol.objective == 0.0 and not sol.W.any() and sol.certificate["verified"]


def test_exact_rescaling_maps_the_certificate():
    D_in, Z_in, D_eq, Z_eq = _cycle_instance(1)
    base = solve_eqsvm(D_in, Z_in, D_eq, Z_eq)
    assert base.status == "optimal"
    a, b = 70, -45  # far outside the band: solved after an exact power-of-two rescaling
    big = solve_eqsvm(D_in * 2.0**a, Z_in * 2.0**b, D_eq * 2.0**a, Z_eq * 2.0**b)
    assert big.extra["rescaled"] == {"log2_X": -(a + 1), "log2_Z": -(b + 1)}  # max |entry| -> [1/2, 1)
    assert big.certificate["verified"]
    k = a + b
    assert Fraction(big.certificate["value_str"]) == Fraction(base.certificate["value_str"]) / Fraction(2) ** (2 * k)
    scale = Fraction(2) ** k
    assert [[Fraction(v) * scale for v in row] for row in big.certificate["W"]] == [
        [Fraction(v) for v in row] for row in base.certificate["W"]
    ]
    assert np.allclose(big.W * 2.0**k, base.W, rtol=1e-6, atol=1e-9 * np.abs(base.W).max())
    nb = solve_eqsvm(D_in, Z_in, D_eq, Z_eq, "nuc")
    nbig = solve_eqsvm(D_in * 2.0**a, Z_in * 2.0**b, D_eq * 2.0**a, Z_eq * 2.0**b, "nuc")
    assert nbig.certificate["verified"]
    assert abs(nbig.objective * 2.0**k - nb.objective) <= 1e-7 * nb.objective
    assert (
        nbig.certificate["lower"] * 2.0**k
        <= nb.objective * (1 + 1e-7)
        <= nbig.certificate["upper"] * 2.0**k * (1 + 2e-7)
    )


def test_exact_features_not_float_numbers():
    """Exact features that are not float64 numbers: the certificates are for them, not for their rounding."""
    rng = np.random.default_rng(5)
    E = rng.standard_normal((3, 4)) * np.array([1.0, 1e-3, 1e3, 1.0])  # mixed magnitudes: differences round
    from attsvm.svm.exact import to_integers

    En, e = to_integers(E)
    z = En[2]
    Dint_eq = np.array([En[0] - En[1], En[1] - En[2], En[0] - En[2]], dtype=object)  # a cycle: rank 2 exactly
    Zint_eq = np.array([z, z, z], dtype=object)
    Dint_in = np.array([En[0] - 0 * En[0], En[2]], dtype=object)
    Zint_in = np.array([En[1], En[0]], dtype=object)
    prog = exact_program_from_integers(Dint_in, Zint_in, Dint_eq, Zint_eq, e, e)
    D_in, Z_in, D_eq, Z_eq = prog.blocks()
    assert not np.array_equal(D_eq[0] + D_eq[1], D_eq[2])  # the float rows are not exactly dependent
    sol = solve_eqsvm(D_in, Z_in, D_eq, Z_eq, exact=prog)
    c = sol.certificate
    assert c["verified"] and c["eq_rank"] == 2
    # independent check with the exact differences
    ex = [Fraction(float(x)) for x in (2.0**e,)][0]
    Dx = lambda N: [[Fraction(int(v)) * ex for v in row] for row in N]  # noqa: E731
    nu, lam = [Fraction(0)] * 3, [Fraction(0)] * 2
    for kind, j, v in c["multipliers"]:
        (nu if kind == "eq" else lam)[int(j)] = Fraction(v)
    Deq, Zeq, Din, Zin = Dx(Dint_eq), Dx(Zint_eq), Dx(Dint_in), Dx(Zint_in)
    W = [[sum(x * Dv[a] * Zv[b] for x, Dv, Zv in zip(nu + lam, Deq + Din, Zeq + Zin)) for b in range(4)]
         for a in range(4)]  # fmt: skip
    mg = lambda Dv, Zv: sum(Dv[a] * W[a][b] * Zv[b] for a in range(4) for b in range(4))  # noqa: E731
    assert all(mg(Dv, Zv) == 0 for Dv, Zv in zip(Deq, Zeq))
    assert all(mg(Dv, Zv) >= 1 and (x == 0 or mg(Dv, Zv) == 1) for x, Dv, Zv in zip(lam, Din, Zin))
    assert all(x >= 0 for x in lam)


def test_barely_feasible_exact_program_is_never_reported_infeasible():
    """Exact rows (1 + 2^-60, 1) and (-1, -1 + 2^-60) (query e_1): feasible only with ||W|| ~ 2^60; rounded they
    are opposite, so the float solver sees an infeasible program - and that verdict has no exact certificate."""
    big = 2**60
    none = np.zeros((0, 2), dtype=np.int64)
    prog = exact_program_from_integers([[big + 1, big], [-big, -big + 1]], [[1, 0], [1, 0]], none, none, -60, 0)
    D_in, Z_in, _, _ = prog.blocks()
    assert np.array_equal(D_in[0], -D_in[1])
    with pytest.raises(SolverError):
        solve_eqsvm(D_in, Z_in, None, None, exact=prog)
    # the rounded program itself is infeasible, with its exact certificate
    _assert_farkas(solve_eqsvm(D_in, Z_in, None, None), D_in, Z_in, np.zeros((0, 2)), np.zeros((0, 2)))


def test_exact_features_must_round_to_the_blocks():
    prog = exact_program_from_integers([[3, 1]], [[1, 2]], np.zeros((0, 2), dtype=np.int64),
                                       np.zeros((0, 2), dtype=np.int64), -2, 0)  # fmt: skip
    D_in, Z_in, _, _ = prog.blocks()
    assert solve_eqsvm(D_in, Z_in, None, None, exact=prog).certificate["verified"]
    with pytest.raises(InputError, match="round"):
        solve_eqsvm(D_in * 2, Z_in, None, None, exact=prog)


@pytest.mark.parametrize(
    "args, match",
    [
        ((np.ones((2, 3)), np.ones((2, 2)), None, None), "same shape"),
        ((np.ones((2, 2)), np.ones((2, 2)), np.ones((1, 3)), np.ones((1, 3))), "columns"),
        ((np.array([[np.nan, 1.0]]), np.ones((1, 2)), None, None), "NaN or inf"),
        ((np.ones(2), np.ones(2), None, None), "2-D"),
        ((np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 2)), None), "same shape"),
        ((np.ones((1, 0)), np.ones((1, 0)), None, None), "at least 1"),
        (([["a", "b"]], np.ones((1, 2)), None, None), "not numeric"),
        ((np.ones((1, 2)) * 1j, np.ones((1, 2)), None, None), "complex"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(InputError, match=match):
        solve_eqsvm(*args)


def test_unknown_norm():
    with pytest.raises(InputError, match="unknown norm"):
        solve_eqsvm(np.ones((1, 2)), np.ones((1, 2)), None, None, norm="l1")
