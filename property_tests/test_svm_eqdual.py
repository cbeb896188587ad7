"""The working-set dual of the equality SVM (:mod:`attsvm.svm.eqdual`) and the certificates of the graph SVM it
feeds (:mod:`attsvm.svm.eqsvm`, :mod:`attsvm.ntp.svm`): agreement with an independent cvxpy+Clarabel solve
written from the definition, the rigorous enclosure re-checked here by an exact rational solve of its own system
(with the exact embedding differences and the constraints of the definition), tampered enclosures rejected by that
check, infeasible programs through the working set's ray to an exact Farkas pair, and the nuclear solve's returned
point: equalities to rounding and the objective inside its proved bracket."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from test_ntp_svm import REL, check_constraint_sets, ntp_constraints
from test_ntp_svm import reference as ntp_reference
from test_svm_eqsvm import programs, reference

from attsvm.ntp.data import NTPData
from attsvm.ntp.generate import ntp
from attsvm.ntp.graph import graph_constraints
from attsvm.ntp.svm import solve_graph_svm
from attsvm.svm.eqdual import solve_eqdual
from attsvm.tolerances import tol


# ---------------------------------------------------------------------------------------------- helpers
def _scaled_embeddings(data) -> tuple[list[list[int]], int]:
    """``(E_int, p)`` with E = E_int / 2**p exactly (from the floats' exact binary values, here)."""
    fr = [[Fraction(float(x)) for x in row] for row in np.asarray(data.E)]
    p = max(f.denominator.bit_length() - 1 for row in fr for f in row)
    return [[int(f * 2**p) for f in row] for row in fr], p


def _feature(E: list[list[int]], q: int, y: int, j: int) -> tuple[list[int], list[int]]:
    return [a - b for a, b in zip(E[y], E[j])], E[q]


def independent_enclosure(data, sol) -> bool:
    """Re-check a ``rigorous-enclosure`` certificate of the graph SVM from the definition, exactly: solve the
    certificate's own system (its EQ and IN rows, rhs 0 / 1) in exact rationals (FLINT's fmpq_mat here, no code of
    the certifier), then: every exact multiplier within ``radius`` of the certificate's, the IN ones > 0, and
    W* = sum x A meets every constraint of :func:`test_ntp_svm.ntp_constraints` exactly (EQ margin 0, IN >= 1, = 1
    on the rows of the system), and OPT = sum of the IN multipliers lies in [lower, upper]."""
    from flint import fmpq_mat

    c = sol.certificate
    E, p = _scaled_embeddings(data)
    eq_t = [tuple(int(v) for v in r) for r in np.asarray(sol.extra["eq"]).reshape(-1, 3)]
    in_t = [tuple(int(v) for v in r) for r in np.asarray(sol.extra["ineq"]).reshape(-1, 3)]
    rows = [((eq_t if k == "eq" else in_t)[int(j)], k, Fraction(v)) for k, j, v in c["multipliers"]]
    feats = [_feature(E, *t) for t, _, _ in rows]
    k = len(rows)
    # A_int = (d_int z_int^T) = A 2^(2p): G_int = G 2^(4p), and G_int x_int = b gives x = x_int 2^(4p)
    G = [
        [sum(a * b for a, b in zip(di, dj)) * sum(a * b for a, b in zip(zi, zj)) for dj, zj in feats]
        for di, zi in feats
    ]
    rhs = [0 if kind == "eq" else 1 for _, kind, _ in rows]
    num, den = fmpq_mat(k, k, [v for row in G for v in row]).solve(fmpq_mat(k, 1, rhs)).numer_denom()
    num, den = [int(v) for v in num.entries()], int(den)
    s = 2 ** (4 * p)
    x = [Fraction(v * s, den) for v in num]
    rad = Fraction(c["radius"])
    ok = all(abs(xi - ci) <= rad for xi, (_, _, ci) in zip(x, rows))
    ok &= all(xi > 0 for xi, (_, kind, _) in zip(x, rows) if kind == "in")
    d = data.d
    Wn = [[sum(v * dv[a] * zv[b] for v, (dv, zv) in zip(num, feats)) for b in range(d)] for a in range(d)]

    def margin_num(t) -> int:  # margin = margin_num / den
        dv, zv = _feature(E, *t)
        return sum(dv[a] * Wn[a][b] * zv[b] for a in range(d) for b in range(d))

    eq, ineq = ntp_constraints(data)
    ok &= all(margin_num(t) == 0 for t in eq)
    ok &= all(margin_num(t) >= den for t in ineq)
    ok &= all(margin_num(t) == den for t, kind, _ in rows if kind == "in")
    opt = sum((xi for xi, (_, kind, _) in zip(x, rows) if kind == "in"), Fraction(0))
    ok &= Fraction(c["lower"]) <= opt <= Fraction(c["upper"])
    return bool(ok)


def _float_feasible(D_in, Z_in, D_eq, Z_eq, W, rtol: float) -> bool:
    """Float margins of W: IN >= 1 - rtol, |EQ| <= rtol * ||d|| ||W||_F ||z|| (float64, computed here)."""
    mi = np.einsum("md,de,me->m", D_in, W, Z_in)
    me = np.einsum("md,de,me->m", D_eq, W, Z_eq)
    sc = np.linalg.norm(D_eq, axis=1) * np.linalg.norm(Z_eq, axis=1) * np.linalg.norm(W)
    return bool(mi.min() >= 1 - rtol and np.all(np.abs(me) <= rtol * np.maximum(sc, 1e-300)))


# ---------------------------------------------------------------------------------------------- the float solver
@given(programs())
def test_working_set_matches_reference(prob):
    """On generated programs (dependent equalities included) the working set's objective 1^T lam agrees with the
    reference's, its W meets the constraints, and an infeasible reference goes with a ray or a divergence."""
    D_in, Z_in, D_eq, Z_eq = prob
    ref = reference(D_in, Z_in, D_eq, Z_eq, "fro")
    r = solve_eqdual(np.vstack([D_eq, D_in]), np.vstack([Z_eq, Z_in]), len(D_eq))
    if ref is None:
        assert r.status in ("ray", "diverged")
        return
    assert r.status == "optimal"
    obj = ref[0]
    assert abs(float(r.lam.sum()) - obj) <= REL * max(obj, 1.0)
    assert abs(float(np.sum(r.W * r.W)) - obj) <= REL * max(obj, 1.0)
    assert _float_feasible(D_in, Z_in, D_eq, Z_eq, r.W, 10 * tol("kkt"))


@pytest.mark.parametrize("size", [(6, 4, 6, 8), (20, 6, 10, 16)])
@pytest.mark.parametrize("graph", ["any", "cyclic"])
def test_working_set_on_generated_ntp(size, graph):
    for seed in range(3):
        data = ntp(*size, graph=graph, seed=seed)
        gc = graph_constraints(data)
        r = solve_eqdual(np.vstack([gc.D_eq, gc.D_in]), np.vstack([gc.Z_eq, gc.Z_in]), len(gc.eq))
        obj, _ = ntp_reference(data, "fro")
        assert r.status == "optimal" and abs(float(r.lam.sum()) - obj) <= REL * obj
        assert _float_feasible(gc.D_in, gc.Z_in, gc.D_eq, gc.Z_eq, r.W, 10 * tol("kkt"))


# ---------------------------------------------------------------------------------------------- enclosure
@pytest.mark.parametrize("graph", ["any", "cyclic"])
def test_enclosure_certificate_rechecked_exactly(graph):
    """(20,6,10,16): more rows than EXACT_KKT_MAX, so the certificate is the rigorous enclosure; re-checked by an
    exact solve of its own system, and the returned objective is the bracket's midpoint, agreeing with Clarabel."""
    for seed in range(3):
        data = ntp(20, 6, 10, 16, graph=graph, seed=seed)
        sol = solve_graph_svm(data, "fro")
        check_constraint_sets(data, sol)
        c = sol.certificate
        assert sol.status == "optimal" and c["kind"] == "rigorous-enclosure" and c["verified"] is True, c
        assert independent_enclosure(data, sol)
        assert c["lower"] <= sol.objective <= c["upper"] and (c["upper"] - c["lower"]) <= 1e-12 * c["upper"]
        obj, _ = ntp_reference(data, "fro")
        assert abs(sol.objective - obj) <= REL * obj
        gc = graph_constraints(data)
        assert _float_feasible(gc.D_in, gc.Z_in, gc.D_eq, gc.Z_eq, sol.W, tol("rounding"))
        assert sorted(c["active"]) == sorted(j for _, j in sol.support)


def test_tampered_enclosure_rejected():
    """The independent check fails on a certificate with one multiplier moved by 10 radii, a radius shrunk to 0,
    or a bracket moved above the optimum (and passes on the untouched one)."""
    data = ntp(20, 6, 10, 16, graph="cyclic", seed=1)
    sol = solve_graph_svm(data, "fro")
    assert independent_enclosure(data, sol)
    c = sol.certificate
    k, j, v = c["multipliers"][-1]
    moved = [*c["multipliers"][:-1], [k, j, str(Fraction(v) + 10 * Fraction(c["radius"]))]]
    for bad in ({"multipliers": moved}, {"radius": 0.0}, {"lower": c["upper"] * 1.001, "upper": c["upper"] * 1.002}):
        tampered = dataclasses.replace(sol, certificate={**c, **bad})
        assert not independent_enclosure(data, tampered), bad


# ---------------------------------------------------------------------------------------------- infeasible
def test_infeasible_through_the_working_set_ray():
    """d = 1, embeddings 0..3, query 3: label 0 over token 1 needs -3w >= 1, label 2 over token 1 needs 3w >= 1:
    the working set stops on a ray, and the solve reports infeasible with a verified exact Farkas pair
    (mu >= 0, sum mu = 1, sum mu A + sum nu A = 0, re-checked here)."""
    E = np.array([[0.0], [1.0], [2.0], [3.0]])
    data = NTPData(E, np.array([[0, 1, 3], [2, 1, 3]]), np.array([0, 2]))
    gc = graph_constraints(data)
    r = solve_eqdual(np.vstack([gc.D_eq, gc.D_in]), np.vstack([gc.Z_eq, gc.Z_in]), len(gc.eq))
    assert r.status == "ray" and r.ray is not None and np.all(r.ray[0] >= 0)
    sol = solve_graph_svm(data, "fro")
    assert sol.status == "infeasible" and sol.certificate["kind"] == "farkas-exact" and sol.certificate["verified"]
    mu = [Fraction(v) for v in sol.certificate["mu"]]
    w = sum((m * (E[y, 0] - E[j, 0]) * E[q, 0] for m, (q, y, j) in zip(mu, gc.ineq.tolist())), Fraction(0))
    assert all(m >= 0 for m in mu) and sum(mu) == 1 and w == 0


# ---------------------------------------------------------------------------------------------- nuclear
def test_nuclear_returns_the_proved_point():
    """Many generated instances: the returned W is the point of the proved upper bound, so its equality margins are
    rounding-sized (relative to ||d|| ||W||_F ||z||), its inequality margins >= 1 up to rounding, and the
    reported objective lies in the proved bracket [lower, upper] (it is the upper bound rounded down)."""
    count = 0
    for size, graphs, seeds in (((6, 4, 6, 8), ("any", "cyclic"), 12), ((10, 5, 8, 12), ("cyclic",), 6)):
        for graph in graphs:
            for seed in range(seeds):
                data = ntp(*size, graph=graph, seed=seed)
                sol = solve_graph_svm(data, "nuc")
                c = sol.certificate
                assert sol.status == "optimal" and c["verified"] is True, c
                assert c["lower"] <= sol.objective <= c["upper"], (c["lower"], sol.objective, c["upper"])
                gc = graph_constraints(data)
                assert _float_feasible(gc.D_in, gc.Z_in, gc.D_eq, gc.Z_eq, sol.W, tol("rounding"))
                assert abs(np.linalg.norm(sol.W, "nuc") - sol.objective) <= tol("nuc_gap") * sol.objective
                count += 1
    assert count == 30
