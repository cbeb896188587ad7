r"""Att-SVMs in the entrywise ℓ1 / ℓ∞ and the spectral norm (THEORY §2, §6): ``attsvm.svm.solve(..., norm=...)`` and
``attsvm solve --norm l1|linf|spec``.

Checks: agreement of the optimal value with an independent cvxpy + Clarabel solve of a different formulation
(per-constraint loops over features built from the arrays here; the dual program for ℓ∞ and spectral); the exact
LP certificate re-checked by a verifier written here (Fractions of the stored floats) and rejected by both verifiers
when a multiplier or an entry of W is tampered with; proved spectral bounds that bracket the independent optimum;
verified Farkas vectors for infeasible selections; exact scale equivariance of the exact optimum; the order of the
optima ($\|W\|_{\max}\le\|W\|_2\le\|W\|_F\le\|W\|_\star,\|W\|_1$ pointwise); the CLI (JSON, exit codes 0/1/2)."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings

from attsvm import generate, strategies
from attsvm.cli import solve as cli_solve
from attsvm.data import Dataset
from attsvm.svm import NORMS, solve
from attsvm.svm.constraints import build
from attsvm.svm.polyhedral import bracket_lp, certify_lp, verify_lp
from attsvm.svm.specnorm import certify_spectral, nuclear_upper_bound, prove_spectral_le, sqrt_up
from attsvm.tolerances import tol

SMALL = {"n": (1, 3), "T": (2, 4), "d": (1, 3)}
PAPER = {"n": (1, 3), "T": (2, 4), "d": (2, 3)}  # the paper law needs d >= 2
REL = 1e-6  # agreement with the reference interior-point solve (Clarabel, default tolerances ~1e-8)


# ---------------------------------------------------------------------------------------------- independent parts
def _features(ds: Dataset, exact: bool = False) -> list[tuple[int, int, Any, Any]]:
    r"""$(i,t,D_{it},z_i)$ for every constraint, built here from the arrays (flat view; visible tokens only); with
    ``exact`` as lists of Fractions of the stored floats ($D_{it}$ subtracted exactly)."""
    f = ds.flat()
    X, Z, a = np.asarray(f.X), np.asarray(f.Z), np.asarray(f.alpha).reshape(-1)
    mask = None if f.mask is None else np.broadcast_to(f.mask, X.shape[:-1])
    out = []
    for i in range(X.shape[0]):
        for t in range(X.shape[1]):
            if t == a[i] or (mask is not None and not mask[i, t]):
                continue
            if exact:
                D = [Fraction(float(p)) - Fraction(float(q)) for p, q in zip(X[i, a[i]], X[i, t])]
                out.append((i, t, D, [Fraction(float(x)) for x in Z[i]]))
            else:
                out.append((i, t, X[i, a[i]] - X[i, t], Z[i]))
    return out


def _reference(ds: Dataset, norm: str) -> float | None:
    """The optimum by cvxpy + Clarabel with one constraint per feature: the primal for ℓ1, the dual programs
    $\\max 1^T\\lambda$ s.t. $\\|M\\|_1\\le1$ (ℓ∞) or $\\|M\\|_\\star\\le1$ (spectral); None when infeasible."""
    feats = _features(ds)
    d = ds.d
    if norm == "l1":
        W = cp.Variable((d, d))
        cons = [cp.sum(cp.multiply(W, np.outer(D, z))) >= 1 for _, _, D, z in feats]
        prob = cp.Problem(cp.Minimize(cp.norm1(cp.vec(W, order="C"))), cons)
    else:
        lam = cp.Variable(len(feats), nonneg=True)
        M = sum(lam[k] * np.outer(D, z) for k, (_, _, D, z) in enumerate(feats))
        dual_norm = cp.norm1(cp.vec(M, order="C")) if norm == "linf" else cp.normNuc(M)
        prob = cp.Problem(cp.Maximize(cp.sum(lam)), [dual_norm <= 1])
    prob.solve(solver=cp.CLARABEL)
    if prob.status in (cp.INFEASIBLE, cp.UNBOUNDED, cp.INFEASIBLE_INACCURATE, cp.UNBOUNDED_INACCURATE):
        return None
    assert prob.status == cp.OPTIMAL, prob.status
    return float(prob.value)


def _exact_check(ds: Dataset, norm: str, cert: dict) -> dict[str, bool]:
    r"""Re-check an ``lp-basis`` certificate with Fractions of the stored floats: every margin $\ge1$,
    $\lambda\ge0$, $\|\sum\lambda A\|_{N^*}\le1$, $\|W\|_N=\mathbf 1^\top\lambda$ (written here, not verify_lp)."""
    W = [[Fraction(x) for x in row] for row in cert["W"]]
    lam = {(int(i), int(t)): Fraction(q) for i, t, q in cert["multipliers"]}
    d = len(W)
    M = [[Fraction(0)] * d for _ in range(d)]
    feasible = True
    for i, t, Df, zf in _features(ds, exact=True):
        margin = sum(Df[a] * W[a][b] * zf[b] for a in range(d) for b in range(d))
        feasible &= margin >= 1
        lt = lam.get((i, t), Fraction(0))
        for a in range(d):
            for b in range(d):
                M[a][b] += lt * Df[a] * zf[b]
    absM = [abs(x) for row in M for x in row]
    absW = [abs(x) for row in W for x in row]
    dual_norm = max(absM) if norm == "l1" else sum(absM)
    primal = sum(absW) if norm == "l1" else max(absW)
    return {
        "feasible": feasible,
        "nonnegative": all(x >= 0 for x in lam.values()),
        "dual_norm": dual_norm <= 1,
        "zero_gap": primal == sum(lam.values()),
    }


def _cons_vectors(ds: Dataset, cert: dict) -> tuple[np.ndarray, list[Fraction]]:
    """The certificate's W (d, d) and multipliers (m,) in the order of ``build(ds)``, as Fractions."""
    c = build(ds)
    W = np.array([[Fraction(x) for x in row] for row in cert["W"]], dtype=object)
    lam = {(int(i), int(t)): Fraction(q) for i, t, q in cert["multipliers"]}
    tok = np.asarray(c.tok).reshape(-1)
    return W, [lam.get((int(c.row[j]), int(tok[j])), Fraction(0)) for j in range(c.m)]


# ---------------------------------------------------------------------------------------------- agreement
@settings(max_examples=25)
@given(strategies.paper(**PAPER))
def test_values_agree_with_an_independent_solve(ds):
    for norm in ("l1", "linf", "spec"):
        sol = solve(ds, norm=norm)
        ref = _reference(ds, norm)
        if ref is None:
            assert sol.status == "infeasible", norm
            continue
        assert sol.status == "optimal", norm
        assert sol.objective == pytest.approx(ref, rel=REL), norm
        assert sol.norm_value == pytest.approx(sol.objective, rel=1e-12)
        assert sol.margin_min >= 1.0 - 1e-12  # W is feasible (rescaled onto the feasible set, to rounding)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_paper_instances(seed):
    ds = generate.paper_law(3, 4, 3, seed=seed)
    for norm in ("l1", "linf", "spec"):
        sol = solve(ds, norm=norm, certify=True)
        assert sol.status == "optimal" and sol.certificate["verified"], (norm, sol.certificate)
        assert sol.objective == pytest.approx(_reference(ds, norm), rel=REL)


@pytest.mark.parametrize("seed", [0, 3])
def test_optima_are_ordered_like_the_norms(seed):
    # ||W||_max <= ||W||_2 <= ||W||_F <= min(||W||_*, ||W||_1) for every W, hence for the minima
    ds = generate.paper_law(4, 5, 5, seed=seed)
    v = {n: solve(ds, norm=n).norm_value for n in ("linf", "spec", "fro", "nuc", "l1")}
    slack = 1 + 1e-7
    assert v["linf"] <= v["spec"] * slack and v["spec"] <= v["fro"] * slack
    assert v["fro"] <= v["nuc"] * slack and v["fro"] <= v["l1"] * slack


# ---------------------------------------------------------------------------------------------- exact LP certificates
@settings(max_examples=25)
@given(strategies.dyadic(**SMALL))
def test_lp_certificate_is_exact(ds):
    for norm in ("l1", "linf"):
        sol = solve(ds, norm=norm, certify=True)
        if sol.status == "infeasible":
            assert sol.certificate["kind"] == "farkas-exact" and sol.certificate["verified"]
            continue
        cert = sol.certificate
        assert cert["verified"], cert
        if cert["kind"] == "lp-bracket":  # degenerate basis: a proved bracket instead
            assert cert["proved"] and cert["lower"] <= sol.objective <= cert["upper"] * (1 + 1e-12)
            continue
        assert cert["kind"] == "lp-basis"
        assert all(_exact_check(ds, norm, cert).values()), cert
        assert cert["value"] == Fraction(cert["value_str"])
        assert cert["lower"] <= float(cert["value"]) <= cert["upper"]
        assert float(cert["value"]) == pytest.approx(sol.objective, rel=1e-9)


def test_tampered_lp_certificates_are_rejected():
    ds = generate.paper_law(3, 4, 3, seed=1)
    c = build(ds)
    for norm in ("l1", "linf"):
        cert = solve(ds, norm=norm, certify=True).certificate
        assert cert["kind"] == "lp-basis"
        W, lam = _cons_vectors(ds, cert)
        assert verify_lp(ds, c, norm, W, lam)["verified"] and all(_exact_check(ds, norm, cert).values())
        # a multiplier 2^-20 too large: the objectives no longer match (and the dual norm exceeds 1)
        j = next(k for k, x in enumerate(lam) if x > 0)
        bad_lam = list(lam)
        bad_lam[j] *= 1 + Fraction(1, 2**20)
        chk = verify_lp(ds, c, norm, W, bad_lam)
        assert not chk["verified"] and not chk["zero_gap"]
        i, t, q = cert["multipliers"][0]
        tampered = dict(
            cert, multipliers=[[i, t, str(Fraction(q) * (1 + Fraction(1, 2**20)))]] + cert["multipliers"][1:]
        )
        assert not all(_exact_check(ds, norm, tampered).values())
        # W shrunk by 2^-20: the active margins drop below 1
        chk = verify_lp(ds, c, norm, W * (1 - Fraction(1, 2**20)), lam)
        assert not chk["verified"] and not chk["primal_feasible_proved"]
        # one nonzero entry of W grown: ||W||_1 grows while 1^T lambda does not
        if norm == "l1":
            bad_W = W.copy()
            a, b = next((a, b) for a in range(W.shape[0]) for b in range(W.shape[1]) if W[a, b] != 0)
            bad_W[a, b] *= 1 + Fraction(1, 2**20)
            chk = verify_lp(ds, c, norm, bad_W, lam)
            assert not chk["verified"] and not chk["zero_gap"]
        # the float solution is not the exact optimum: it fails the exact zero-gap test
        sol = solve(ds, norm=norm)
        chk = verify_lp(ds, c, norm, sol.W, sol.multipliers[c.row, np.asarray(c.tok)])
        assert not chk["verified"]


def test_bracket_contains_the_exact_optimum():
    ds = generate.paper_law(3, 4, 3, seed=2)
    c = build(ds)
    for norm in ("l1", "linf"):
        sol = solve(ds, norm=norm, certify=True)
        value = sol.certificate["value"]
        lam = sol.multipliers[c.row, np.asarray(c.tok)]
        br = bracket_lp(ds, c, norm, sol.W, lam)
        assert br["kind"] == "lp-bracket" and br["proved"] and br["verified"]
        assert br["lower"] <= value <= br["upper"] and br["rel_gap"] <= tol("norm_gap")
        # uniform multipliers: still a proved (valid) bracket, far too wide to verify
        poor = bracket_lp(ds, c, norm, sol.W, np.ones(c.m))
        assert poor["proved"] and not poor["verified"] and poor["lower"] <= value
        # a perturbed W reads off no basis (every entry nonzero): certify_lp falls back to the bracket
        noisy = sol.W + 1e-3 * np.random.default_rng(0).standard_normal(sol.W.shape)
        fb = certify_lp(ds, c, norm, noisy, lam)
        assert fb["kind"] == "lp-bracket" and fb["basis_failed"] and fb["proved"] and not fb["verified"]
        assert fb["lower"] <= value <= fb["upper"]


def test_sequence_and_causal_go_through_the_flat_view():
    cases = [
        (list(strategies.batch("sequence", 1, seed=2, n=2, T=3, d=3, K=2))[0], "seq"),
        (list(strategies.batch("causal", 1, seed=1, n=2, T=3, d=3))[0], "causal"),
    ]
    for ds, program in cases:
        for norm in ("l1", "linf", "spec"):
            sol = solve(ds, norm=norm, program=program, certify=True)
            ref = _reference(ds, norm)
            assert sol.program == program
            if ref is None:
                assert sol.status == "infeasible"
                continue
            assert sol.certificate["verified"], sol.certificate
            assert sol.objective == pytest.approx(ref, rel=REL)


def test_exact_value_scales_exactly():
    ds = generate.paper_law(3, 4, 3, seed=2)
    small = Dataset(ds.X * 2.0**-30, ds.Y, ds.Z, ds.v, np.asarray(ds.selection), ds.kind)  # solved rescaled
    for norm in ("l1", "linf"):
        v0 = solve(ds, norm=norm, certify=True).certificate["value"]
        cert = solve(small, norm=norm, certify=True).certificate
        assert cert["rescaled"] and cert["value"] == v0 * 2**30 and Fraction(cert["value_str"]) == v0 * 2**30


def test_no_constraints():
    ds = generate.paper_law(3, 1, 2, seed=0)
    for norm in ("l1", "linf", "spec"):
        sol = solve(ds, norm=norm, certify=True)
        assert sol.status == "optimal" and sol.objective == 0.0 and not np.any(sol.W)
        assert sol.certificate["verified"]


# ---------------------------------------------------------------------------------------------- spectral
@settings(max_examples=15)
@given(strategies.paper(**PAPER))
def test_spectral_gap_is_proved_and_brackets_the_optimum(ds):
    sol = solve(ds, norm="spec", certify=True)
    ref = _reference(ds, "spec")
    if ref is None:
        assert sol.status == "infeasible"
        return
    cert = sol.certificate
    assert cert["kind"] == "duality-gap" and cert["proved"] and cert["verified"], cert
    assert cert["rel_gap"] <= tol("norm_gap")
    assert cert["lower"] <= ref * (1 + REL) and ref <= cert["upper"] * (1 + REL)


def test_spectral_certificate_rejects_planted_points():
    ds = generate.paper_law(3, 4, 3, seed=0)
    c = build(ds)
    sol = solve(ds, norm="spec")
    lam = sol.multipliers[c.row, np.asarray(c.tok)]
    assert certify_spectral(ds, c, lam, sol.W)["verified"]
    # W is rescaled by its exact smallest margin, so 0.9 W proves the same bound; -W (margins < 0) proves none
    assert certify_spectral(ds, c, lam, 0.9 * sol.W)["verified"]
    bad = certify_spectral(ds, c, lam, -sol.W)
    assert not bad["primal_feasible_proved"] and not bad["proved"] and not bad["verified"]
    # a feasible but suboptimal point (the Frobenius solution) gives a proved bracket that is too wide
    fro = solve(ds, norm="fro").W
    wide = certify_spectral(ds, c, lam, fro)
    assert wide["proved"] and not wide["verified"] and wide["rel_gap"] > tol("norm_gap")
    # a dual point far from optimal (uniform multipliers) likewise
    assert not certify_spectral(ds, c, np.ones(c.m), sol.W)["verified"]


def test_exact_spectral_and_nuclear_bounds():
    from flint import fmpz_mat

    W = np.array([[3.0, 0.0], [0.0, 4.0]])  # ||W||_2 = 4 exactly
    assert prove_spectral_le(W, 4.0 * (1 + 2**-40)) and not prove_spectral_le(W, 4.0)
    assert not prove_spectral_le(W, 3.999)
    R = np.random.default_rng(0).standard_normal((4, 4))
    s = np.linalg.norm(R, 2)
    assert prove_spectral_le(R, s * (1 + 1e-12)) and not prove_spectral_le(R, s * (1 - 1e-9))
    # ||M||_* bound: M = N 2^-3 with N integer; the bound is >= the nuclear norm and tight to rounding
    N = np.array([[7, -2, 0], [1, 5, 3], [0, 0, 2]])
    M = N / 8.0
    b = nuclear_upper_bound(fmpz_mat(N.tolist()), -3, M)
    nuc = np.linalg.svd(M, compute_uv=False).sum()
    assert float(b) >= nuc and float(b) == pytest.approx(nuc, rel=1e-12)
    assert sqrt_up(Fraction(2)) ** 2 >= 2 and float(sqrt_up(Fraction(2))) == pytest.approx(2**0.5, rel=1e-15)


# ---------------------------------------------------------------------------------------------- infeasible
@settings(max_examples=15)
@given(strategies.infeasible(**SMALL))
def test_infeasible_selections_get_farkas(ds):
    for norm in ("l1", "linf", "spec"):
        sol = solve(ds, norm=norm)
        assert sol.status == "infeasible" and sol.certificate["verified"], norm
        assert sol.certificate["kind"] == "farkas-exact"
        mu = np.asarray(sol.farkas)
        feats = _features(ds)
        vals = np.array([mu[i, t] for i, t, _, _ in feats])
        assert np.all(mu >= 0) and vals.sum() > 0
        S = sum(m * np.outer(D, z) for m, (_, _, D, z) in zip(vals, feats))
        scale = sum(m * np.linalg.norm(D) * np.linalg.norm(z) for m, (_, _, D, z) in zip(vals, feats))
        assert np.linalg.norm(S) <= tol("kkt") * scale


# ---------------------------------------------------------------------------------------------- CLI
def _cli(capsys, *argv) -> tuple[int, str, str]:
    from test_cli_solve import run_solve  # the one in-process `attsvm solve` runner of the tests

    return run_solve(capsys, *argv)


def test_cli_norms_are_the_library_norms():
    assert cli_solve.NORMS == NORMS and {"l1", "linf", "spec"} <= set(NORMS)


def test_cli_l1_json(capsys, tmp_path):
    f = generate.paper_law(4, 5, 6, seed=3).save(tmp_path / "d.npz")
    rc, out, err = _cli(capsys, f, "--norm", "l1", "--certify", "--json")
    assert rc == 0 and err == ""
    obj = json.loads(out)
    assert obj["status"] == "optimal" and obj["norm_kind"] == "l1"
    W = np.array(obj["W"])
    assert obj["norm"] == pytest.approx(np.abs(W).sum(), rel=1e-12)
    cert = obj["certificate"]
    assert cert["kind"] == "lp-basis" and cert["verified"] is True
    assert float(Fraction(cert["value_str"])) == pytest.approx(obj["objective"], rel=1e-9)
    for norm, kind in (("linf", "lp-basis"), ("spec", "duality-gap")):
        rc, out, _ = _cli(capsys, f, "--norm", norm, "--certify", "--json")
        obj = json.loads(out)
        assert rc == 0 and obj["norm_kind"] == norm and obj["certificate"]["kind"] == kind


def test_cli_batch_infeasible_and_text(capsys, tmp_path):
    b = generate.paper_law(3, 4, 4, seed=1, B=2).save(tmp_path / "b.npz")
    rc, out, _ = _cli(capsys, b, "--norm", "linf", "--json")
    assert rc == 0 and len(json.loads(out)["solutions"]) == 2
    inf = generate.centroid_infeasible(3, 6, 2, seed=4).save(tmp_path / "inf.npz")
    for norm in ("l1", "spec"):
        rc, out, _ = _cli(capsys, inf, "--norm", norm, "--json")
        assert rc == 1 and json.loads(out)["status"] == "infeasible"
    rc, out, _ = _cli(capsys, b, "--norm", "spec", "--certify")
    assert rc == 0 and "proved bracket" in out


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--norm", "l1", "--q", "2"], "--q"),
        (["--norm", "linf", "--program", "prompt"], "Frobenius"),
        (["--norm", "l3"], "invalid choice"),
    ],
)
def test_cli_bad_input_exit_2(capsys, tmp_path, extra, needle):
    f = generate.paper_law(2, 3, 3, seed=0).save(tmp_path / "d.npz")
    rc, out, err = _cli(capsys, f, *extra)
    assert rc == 2 and out == "" and "Traceback" not in err
    errs = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(errs) == 1 and needle in errs[0], err
