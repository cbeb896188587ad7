"""Checks that can fail: each of ``svm-rank``, ``softmax-decay`` and ``svm-kkt`` is run on a fixed small case with
the real solver (it passes) and with a *planted* wrong solver value (it must fail).

The main planted values are chosen to be invisible to the old, self-referential checks, and the tests show it: a
Frobenius ``W`` rebuilt from wrong multipliers still has its row space in ``span{z_i}`` and rank ``<= n``; a
feasible but suboptimal ``W'`` whose support and ``delta`` are derived from ``W'`` itself satisfies every
same-margins statement of ``softmax-decay``; wrong multipliers or a wrong nuclear / Gen-SVM point come with the
solver's own (good) ``sol.kkt``. The claims now compare
against independent computations (a cvxpy+Clarabel primal, the exact-rational certificate evaluated in mpmath,
KKT residuals recomputed from the data), so each planted value is caught. Claims are loaded by path.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import attsvm.svm
from attsvm import generate
from attsvm.claims import Case, discover
from attsvm.paths import proofs_dir
from attsvm.svm import gensvm, nuclear
from attsvm.tolerances import tol

REAL_FRO = attsvm.svm.solve_fro
REAL_NUC = nuclear.solve_nuclear
REAL_GEN = gensvm.solve_gensvm


def _claim(filename):
    (c,) = discover([proofs_dir() / "claims" / filename])
    return c


def _run(claim, ds, replay=()):
    out = claim.conclusion(Case(data=ds, hypotheses=claim.case_hypotheses, replay=list(replay)))
    assert np.isfinite(out.margin) and out.ok == (out.margin >= 0), out
    return out


def _caught(out, prefix):
    """The planted value is caught: a decided failure, with the worst slack in the expected part."""
    assert out.inconclusive is None, out.inconclusive
    assert out.ok is False and out.margin < 0, out.detail.get("slacks")
    assert out.detail["worst"].startswith(prefix), out.detail["worst"]


def _planted(real, change):
    """A stand-in for a solver: the real solution with ``change(solution)`` applied (its ``kkt`` and
    ``certificate`` untouched, as a buggy solver that believes itself would report them)."""

    def fake(*args, **kwargs):
        sol = real(*args, **kwargs)
        return dataclasses.replace(sol, **change(sol, *args))

    return fake


# ---------------------------------------------------------------------------------------------- svm-rank
@pytest.fixture(scope="module")
def rank_case():
    ds = generate.paper_law(2, 3, 4, seed=1)  # n = 2 < d = 4: span{z_i} is a proper subspace
    return ds.with_alpha(ds.opt)


def _leak(W, Z):
    _, S, Vt = np.linalg.svd(Z)
    V = Vt[: int(np.sum(S > 1e-12 * S[0]))].T
    return float(np.linalg.norm(W - W @ V @ V.T) / np.linalg.norm(W))


def test_svm_rank_passes_with_the_real_solver(rank_case):
    out = _run(_claim("svm_rank.py"), rank_case)
    assert out.ok and out.inconclusive is None, out.detail["slacks"]
    assert out.detail["fro_agree"] <= tol("svm_ref_rtol")


def test_svm_rank_catches_a_wrong_w_inside_the_row_space(rank_case, monkeypatch):
    """W = sum lambda' A with lambda' != lambda: row space in span{z_i}, rank <= n, yet not the minimiser."""
    from attsvm.svm import constraints

    def change(sol, ds, *_):
        c = constraints.build(ds)
        lam = sol.multipliers[c.row, c.tok] * (1.0 + 0.01 * np.arange(c.m))
        return {"W": c.combine(lam)}

    planted = _planted(REAL_FRO, change)(rank_case).W
    # what the old check computed on the solver's W: it passes (row space and rank are right by construction)
    assert _leak(planted, rank_case.Z) <= tol("rowspace")
    assert np.linalg.matrix_rank(planted, tol=tol("rank") * np.linalg.norm(planted, 2)) <= rank_case.n
    monkeypatch.setattr(attsvm.svm, "solve_fro", _planted(REAL_FRO, change))
    c = _claim("svm_rank.py")
    out = _run(c, rank_case)
    _caught(out, "fro_agree")
    # confirmation: the exact optimum satisfies the lemma (no refutation) and shows which solver is off
    conf = c.confirmer(Case(data=rank_case, hypotheses=c.case_hypotheses, replay=[]), out)
    assert conf.ok and conf.inconclusive is None
    assert conf.detail["W_fro_vs_exact"] > 1e-4 and conf.detail["W_independent_vs_exact"] <= tol("svm_ref_rtol")


def test_svm_rank_catches_a_w_off_the_row_space(rank_case, monkeypatch):
    _, _, Vt = np.linalg.svd(rank_case.Z)
    perp = Vt[-1]  # orthogonal to both z_i
    assert np.abs(rank_case.Z @ perp).max() < 1e-12

    def change(sol, *_):
        return {"W": sol.W + 1e-3 * np.linalg.norm(sol.W) * np.outer(perp, perp)}

    monkeypatch.setattr(attsvm.svm, "solve_fro", _planted(REAL_FRO, change))
    _caught(_run(_claim("svm_rank.py"), rank_case), "fro_agree")


def test_svm_rank_rowspace_check_on_the_independent_solution_can_fail(rank_case, monkeypatch):
    """The row-space slack is computed on the independent primal W: plant a leak there (fast solver real)."""
    from attsvm.svm import primal

    c = _claim("svm_rank.py")
    _, _, Vt = np.linalg.svd(rank_case.Z)
    real = primal.solve_primal

    def leaky(ds):
        W = real(ds)
        return W + 1e-6 * np.linalg.norm(W) * np.outer(Vt[-1], Vt[-1])

    monkeypatch.setattr(primal, "solve_primal", leaky)
    out = _run(c, rank_case)
    _caught(out, "fro_")
    assert out.detail["slacks"]["fro_rowspace"] < 0 and out.detail["slacks"]["fro_independent_feasible"] > 0


# ---------------------------------------------------------------------------------------------- softmax-decay
R = 30.0


@pytest.fixture(scope="module")
def decay_case():
    ds = generate.paper_law(2, 4, 3, seed=0)  # support tokens in both inputs and a finite delta
    ds = ds.with_alpha(ds.opt)
    sol = REAL_FRO(ds)
    assert sol.delta is not None and len(sol.support) >= 2
    return ds


def test_softmax_decay_passes_with_the_real_solver(decay_case):
    out = _run(_claim("softmax_decay.py"), decay_case, [R])
    assert out.ok and out.inconclusive is None, out.detail["slacks"]
    assert set(out.detail["slacks"]) == {"one_minus_s", "support_ratio", "non_support_ratio"}


def _suboptimal_consistent(sol, ds, *_):
    """A buggy solver that is *self-consistent*: W' = W^mm + B with <B, A_it> = 0 on the support (those margins
    stay exactly 1, the others move by ~1%), and the support set and delta recomputed from W' itself."""
    from attsvm.svm import constraints
    from attsvm.svm.neighbours import gap_from, support_mask

    c = constraints.build(ds)
    sup = support_mask(c.to_grid(c.margins(sol.W), fill=np.nan))[c.row, c.tok]
    F = np.einsum("md,me->mde", c.D[sup], c.Zc[sup]).reshape(int(sup.sum()), -1)
    B = np.linalg.svd(F)[2][-1].reshape(sol.W.shape)  # in the null space of the support constraints
    W = sol.W + 0.02 * np.linalg.norm(sol.W) * B
    grid = c.to_grid(c.margins(W), fill=np.nan)
    mask = support_mask(grid)
    return {"W": W, "support": [(int(i), int(t)) for i, t in np.argwhere(mask)], "delta": gap_from(grid, mask)}


def test_softmax_decay_catches_a_self_consistent_suboptimal_w(decay_case, monkeypatch):
    """The planted W' is feasible but not W^mm, and its support and delta are computed from W' itself. Comparing
    W''s float margins with quantities derived from those same margins cannot see it (asserted below); the exact
    W^mm's softmax can: ||W'|| > ||W^mm||, so rho is wrong."""
    from attsvm import model

    bad = _planted(REAL_FRO, _suboptimal_consistent)(decay_case)
    assert bad.support == REAL_FRO(decay_case).support
    rho = 1.0 / np.linalg.norm(bad.W)
    a = model.logits(decay_case.X, R * rho * bad.W, decay_case.Z)
    al = decay_case.selection
    lr = a - a[np.arange(decay_case.n), al][:, None]
    sup = np.zeros(lr.shape, dtype=bool)
    sup[tuple(np.array(bad.support).T)] = True
    rest = ~sup
    rest[np.arange(decay_case.n), al] = False
    # the old same-margins statements all hold for the planted solution
    assert np.max(np.abs(lr[sup] + R * rho)) <= tol("active") * R * rho
    assert np.all(lr[rest] <= -R * rho * (1 + 2 * bad.delta) * (1 - tol("active")))
    monkeypatch.setattr(attsvm.svm, "solve_fro", _planted(REAL_FRO, _suboptimal_consistent))
    _caught(_run(_claim("softmax_decay.py"), decay_case, [R]), "support_ratio")


def test_softmax_decay_catches_a_wrong_delta(decay_case, monkeypatch):
    def change(sol, *_):
        return {"delta": 1.5 * sol.delta}

    monkeypatch.setattr(attsvm.svm, "solve_fro", _planted(REAL_FRO, change))
    _caught(_run(_claim("softmax_decay.py"), decay_case, [R]), "non_support_ratio")


def test_softmax_decay_catches_a_wrong_support_set(decay_case, monkeypatch):
    """A non-support token reported as an SVM-neighbour: its exact log-ratio is -R rho m with m >= 1 + 2 delta."""

    def change(sol, ds, *_):
        i = sol.support[0][0]
        t = next(t for t in range(ds.T) if t != ds.selection[i] and (i, t) not in sol.support)
        return {"support": sorted([*sol.support, (i, t)])}

    monkeypatch.setattr(attsvm.svm, "solve_fro", _planted(REAL_FRO, change))
    _caught(_run(_claim("softmax_decay.py"), decay_case, [R]), "support_ratio")


# ---------------------------------------------------------------------------------------------- svm-kkt
# draws of svm-kkt: alpha (n ints), then one int in [0, 3] per (i, t != alpha_i); 0 puts t into O_i
KKT_REPLAY = [0, 2, 0, 3, 1, 3, 2, 0]  # n = 2, T = 4: alpha = (0, 2); O_0 = {0, 1}, O_1 = {2, 3}


@pytest.fixture(scope="module")
def kkt_case():
    return generate.overparam(2, 4, seed=3)


def test_svm_kkt_passes_with_the_real_solvers(kkt_case):
    out = _run(_claim("svm_kkt.py"), kkt_case, KKT_REPLAY)
    assert out.ok and out.inconclusive is None, out.detail["slacks"]
    assert out.detail["selected"] == [[True, True, False, False], [False, False, True, True]]
    assert {k.split("_")[0] for k in out.detail["slacks"]} == {"fro", "nuc", "gen"}


def test_svm_kkt_catches_wrong_frobenius_multipliers(kkt_case, monkeypatch):
    """lambda * 1.01 with the solver's own residuals left as reported (all tiny): the old check read those."""

    def change(sol, *_):
        return {"multipliers": sol.multipliers * 1.01}

    bad = _planted(REAL_FRO, change)(kkt_case.with_alpha(np.array([0, 2])), certify=True)
    assert max(bad.kkt.values()) <= tol("kkt")  # what the old check looked at
    monkeypatch.setattr(attsvm.svm, "solve_fro", _planted(REAL_FRO, change))
    out = _run(_claim("svm_kkt.py"), kkt_case, KKT_REPLAY)
    _caught(out, "fro_")
    assert out.detail["slacks"]["fro_stationarity"] < 0 and out.detail["slacks"]["fro_objective_identity"] < 0


def test_svm_kkt_catches_a_wrong_frobenius_w(kkt_case, monkeypatch):
    def change(sol, *_):
        return {"W": sol.W * (1 + 1e-5)}

    monkeypatch.setattr(attsvm.svm, "solve_fro", _planted(REAL_FRO, change))
    out = _run(_claim("svm_kkt.py"), kkt_case, KKT_REPLAY)
    _caught(out, "fro_")
    assert out.detail["slacks"]["fro_vs_exact"] < 0  # against the exact-rational optimum


def test_svm_kkt_catches_a_wrong_nuclear_point(kkt_case, monkeypatch):
    """A feasible but suboptimal W* (its solver residuals and proved certificate are those of the real point)."""
    rng = np.random.default_rng(0)

    def change(sol, *_):
        W = sol.W + 1e-3 * np.linalg.norm(sol.W) * rng.standard_normal(sol.W.shape)
        return {"W": W}

    monkeypatch.setattr(nuclear, "solve_nuclear", _planted(REAL_NUC, change))
    c = _claim("svm_kkt.py")
    out = _run(c, kkt_case, KKT_REPLAY)
    _caught(out, "nuc_")
    assert out.detail["slacks"]["nuc_duality_gap"] < 0
    # confirmation at 50 digits: the planted point's upper bound is far above the proved lower bound
    conf = c.confirmer(Case(data=kkt_case, hypotheses=c.case_hypotheses, replay=list(KKT_REPLAY)), out)
    assert conf.ok is False and conf.inconclusive is None and conf.detail["rel_gap_50"] > tol("nuc_gap")
    monkeypatch.setattr(nuclear, "solve_nuclear", REAL_NUC)
    good = _run(c, kkt_case, KKT_REPLAY)
    good = dataclasses.replace(good, detail={**good.detail, "worst": "nuc_duality_gap"})  # as if it had failed
    conf = c.confirmer(Case(data=kkt_case, hypotheses=c.case_hypotheses, replay=list(KKT_REPLAY)), good)
    assert conf.ok is True and conf.detail["rel_gap_50"] <= tol("nuc_gap")


def test_svm_kkt_catches_wrong_gensvm_equality_multipliers(kkt_case, monkeypatch):
    def change(sol, *_):
        return {"extra": {**sol.extra, "eq_multipliers": 2.0 * sol.extra["eq_multipliers"]}}

    real = REAL_GEN(kkt_case, np.array([[True, True, False, False], [False, False, True, True]]))
    assert np.abs(real.extra["eq_multipliers"]).max() > 1e-3  # the planted change is not a no-op
    monkeypatch.setattr(gensvm, "solve_gensvm", _planted(REAL_GEN, change))
    out = _run(_claim("svm_kkt.py"), kkt_case, KKT_REPLAY)
    _caught(out, "gen_stationarity")
