"""ℓq Att-SVM: KKT residuals, q=2 equals the Frobenius Att-SVM, ℓq bound against a feasible point."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm.errors import InputError
from attsvm.generate import centroid_infeasible, paper_law
from attsvm.svm.constraints import build
from attsvm.svm.lq import lq_norm, solve_lq
from attsvm.tolerances import tol


@st.composite
def feasible(draw):
    n = draw(st.integers(1, 3))
    T = draw(st.integers(2, 4))
    d = draw(st.integers(max(T - 1, n, 2), 4))
    return paper_law(n, T, d, seed=draw(st.integers(0, 2**31)))


@given(feasible(), st.sampled_from([1.25, 1.5, 3.0, 4.0]))
def test_kkt_and_dual_bound(ds, q):
    sol = solve_lq(ds, q)
    assert sol.status == "optimal" and sol.norm == "lq"
    for k in ("primal_feasibility", "dual_norm", "stationarity", "duality_gap"):
        assert sol.kkt[k] <= 1e2 * tol("kkt"), (k, sol.kkt)
    # weak duality, computed independently: lambda/||M||_{q*} is dual feasible
    c = build(ds)
    lam = sol.multipliers[c.row, c.tok]
    M = c.combine(lam)
    qs = q / (q - 1)
    dual = lam.sum() / np.sum(np.abs(M) ** qs) ** (1 / qs)
    assert dual <= sol.objective * (1 + 1e-9)
    assert sol.objective == pytest.approx(np.sum(np.abs(sol.W) ** q) ** (1 / q), rel=1e-12)


@given(feasible())
def test_q2_is_frobenius(ds):
    from attsvm.svm.frobenius import solve_fro  # active-set solver of the Frobenius program (independent path)

    ref = solve_fro(ds)
    assert ref.status == "optimal"
    sol = solve_lq(ds, 2.0)
    assert sol.objective**2 == pytest.approx(ref.objective, rel=1e-7)  # solve_fro reports ||W||_F^2
    # unique solution; an objective accurate to eps puts W within ~sqrt(eps) (strong convexity)
    assert np.abs(sol.W - ref.W).max() <= np.sqrt(tol("kkt")) * np.abs(ref.W).max()


@given(feasible(), st.sampled_from([1.5, 3.0]))
def test_lq_optimum_below_frobenius_point(ds, q):
    WF = solve_lq(ds, 2.0).W  # feasible for every q
    assert solve_lq(ds, q).objective <= lq_norm(WF, q) * (1 + 1e-7)


def test_infeasible_and_bad_q():
    ds = centroid_infeasible(2, 4, 2, seed=3)
    sol = solve_lq(ds, 3.0)
    assert sol.status == "infeasible"
    c = build(ds)
    mu = sol.farkas[c.row, c.tok]
    assert np.all(mu >= 0) and mu.sum() > 0 and np.abs(c.combine(mu)).max() <= tol("kkt") * mu.sum()
    for q in (1.0, 0.5, float("inf"), "x"):
        with pytest.raises(InputError):
            solve_lq(paper_law(2, 3, 3, seed=0), q)
