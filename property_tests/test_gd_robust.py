r"""Numerically robust GD (issue 11): extreme data runs correctly or is refused, overflow stops ``non-finite``.

Scale relations used as oracles (exact in real arithmetic; with $c=2^k$ every float operation of the two runs
is the same up to the factor, so they agree bit for bit):

* queries $Z\to cZ$: $\mathcal L_c(W)=\mathcal L(cW)$, $\nabla\mathcal L_c(W)=c\nabla\mathcal L(cW)$, so $V_k=cW_k$ is
  NGD on $Z$ with step $c\eta$, GD with step $c^2\eta$, mirror descent ($\psi=\frac1q\|W\|_q^q$) with $c^q\eta$;
  the regularisation path obeys $\bar W_R(cZ)=\bar W_{cR}(Z)/c$;
* tokens $X\to cX$ (scores scale too): for $(v,p)$, $u_c(v,p)=u(cv,cp)$ for every loss, so $(cv_k,cp_k)$ is NGD
  on $X$ with step $c\eta$; for $W$ or $p$ with the correlation loss ($\ell(u)=-u$), $\mathcal L_c(W)=c\mathcal L(cW)$
  and the same holds;
* $X\to10^{-300}X$: the logits stay below $10^{-296}$, so every softmax is exactly uniform in float64 and
  $\ell'(u_i)=\ell'(0)$: NGD from 0 moves along the fixed direction $-\nabla\mathcal L_{\rm corr}(0)$ of the
  unscaled data, $W_k=k\eta\,D/\|D\|$, $D=-\nabla\mathcal L_{\rm corr}(0)$.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from attsvm import generate, model, tol
from attsvm.cli import main
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.gd import STOP_REASONS, gd_reference, ngd_reference, regularization_path, run
from attsvm.gd.model_torch import corr_t
from attsvm.gd.numerics import fro_norm, ldexp, normalise
from attsvm.norms import frobenius_norm

BASE = generate.paper_law(3, 4, 3, seed=0)
MSG = "lower --lr or rescale the data"


def _scaled(X=1.0, Z=1.0, v=1.0, ds=BASE) -> Dataset:
    return Dataset(ds.X * X, ds.Y, ds.Z * Z, ds.v * v)


def _save(tmp_path, name, ds=BASE, **over):
    m = {k: np.asarray(a) for k, a in ds.to_dict().items() if k != "kind"}
    m.update({k: np.asarray(a) for k, a in over.items()})
    path = tmp_path / name
    np.savez(path, **m)
    return str(path)


def _call(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def _json(out: str):
    def no_nan(tok):
        raise AssertionError(f"non-finite number {tok} in JSON")

    return json.loads(out, parse_constant=no_nan)


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _tie_file(tmp_path) -> str:
    X = np.array(BASE.X)
    X[0, 1, 0] = X[0, 0, 0] = 0.5  # with v = e_1: tokens 0 and 1 of input 0 tie for the optimal score
    return _save(tmp_path, "tie.npz", X=X, v=np.array([1.0, 0.0, 0.0]))


# ---------------------------------------------------------------------- scale-safe helpers
def test_norms_and_correlations_are_scale_safe():
    for s in (1e300, 1e-300, 2.0**-1070):
        x = torch.full((2, 9), s, dtype=torch.float64)
        np.testing.assert_allclose(fro_norm(x).numpy(), 3 * s, rtol=tol("rounding"), atol=0)
        np.testing.assert_allclose(frobenius_norm(x.numpy(), axis=-1), 3 * s, rtol=tol("rounding"), atol=0)
        assert torch.allclose(corr_t(x, x), torch.ones(2, dtype=torch.float64), rtol=tol("rounding"), atol=0)
    xh, e = normalise(torch.tensor([[3e-320, 0.0], [1e308, -1e308]], dtype=torch.float64))
    assert torch.all(xh.abs().amax(-1) <= 1) and torch.all(xh.abs().amax(-1) >= 2.0**-52)
    back = ldexp(xh, e)
    assert back[0, 0] == 3e-320 and back[1, 0] == 1e308  # exact round trip
    one = torch.ones(3, 1, dtype=torch.float64)
    big = ldexp(one, torch.tensor([1023, 1024, -1074]))
    assert big[0, 0] == 2.0**1023 and big[1, 0] == np.inf and big[2, 0] == 2.0**-1074


def test_power_of_two_table_is_every_power_exactly():
    """pow2 (a table lookup) against math.ldexp, independently, for every exponent of float64 and float32 and
    beyond (clamped): 2^e exactly, subnormal powers included; normalise's scaling is exact (Fractions)."""
    from fractions import Fraction

    from attsvm.gd.numerics import pow2

    e = torch.arange(-1200, 1100, dtype=torch.int64)
    got = pow2(e, torch.float64).tolist()
    want = [math.ldexp(1.0, min(max(k, -1074), 1023)) for k in e.tolist()]
    assert got == want
    e32 = torch.arange(-200, 200, dtype=torch.int64)
    want32 = np.array([math.ldexp(1.0, min(max(k, -149), 127)) for k in e32.tolist()], dtype=np.float32)
    np.testing.assert_array_equal(pow2(e32, torch.float32).numpy(), want32)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 7)) * np.array([1e-310, 1e-200, 1.0, 1e200, 1e307, 3e-323])[:, None]
    xh, ex = normalise(torch.tensor(x))
    for row, hrow, k in zip(x, xh.numpy(), ex.tolist()):
        assert all(Fraction(float(h)) * Fraction(2) ** k == Fraction(float(v)) for h, v in zip(hrow, row))
        assert 0.5 <= np.max(np.abs(hrow)) < 1 or np.max(np.abs(row)) < 2.0**-1022


def test_softplus_is_exact_and_independent_of_the_position_in_a_batch():
    """log(1 + e^x) against 60-digit mpmath (relative 4 ulp), and each entry alone equal bit for bit to the same
    entry inside a long tensor (torch.logaddexp fails the second: its vectorised body and tail round apart)."""
    import mpmath

    from attsvm.gd.model_torch import softplus_t

    x = torch.tensor(np.random.default_rng(1).standard_normal(2053) * 40.0)
    full = softplus_t(x)
    alone = torch.cat([softplus_t(x[i : i + 1]) for i in range(x.numel())])
    assert torch.equal(full, alone)
    with mpmath.workdps(60):
        exact = np.array([float(mpmath.log1p(mpmath.exp(mpmath.mpf(float(v))))) for v in x[:400]])
    got = full[:400].numpy()
    assert np.all(np.abs(got - exact) <= 4 * np.finfo(np.float64).eps * exact)
    for x0 in (0.0, -0.0, 1e-300, -2.5, 3.0, 800.0, -800.0):  # autograd (the kit's Hessians) also at the kink of |x|
        x1 = torch.tensor(x0, dtype=torch.float64)
        s = 1.0 / (1.0 + math.exp(-x0)) if x0 >= 0 else math.exp(x0) / (1.0 + math.exp(x0))
        assert math.isclose(float(torch.func.grad(softplus_t)(x1)), s, rel_tol=1e-15)
        assert math.isclose(float(torch.func.hessian(softplus_t)(x1)), s * (1.0 - s), rel_tol=1e-14, abs_tol=1e-300)


# ---------------------------------------------------------------------- exact scale relations (engine)
@pytest.mark.parametrize("k", [512, 996, -600])
def test_ngd_with_scaled_queries_is_the_unscaled_run_with_scaled_step(k):
    c = 2.0**k
    a = run(_scaled(Z=c), steps=40, lr=0.1)
    b = run(BASE, steps=40, lr=0.1 * c)
    assert a.stop_reason == b.stop_reason == ["steps"] and np.all(np.isfinite(a.W)) and np.any(a.W != 0)
    np.testing.assert_array_equal(a.W, b.W / c)
    np.testing.assert_array_equal(a.loss, b.loss)
    np.testing.assert_array_equal(a.selection, b.selection)


@pytest.mark.parametrize("k", [256, -200])
def test_gd_and_mirror_descent_scale_relations(k):
    c = 2.0**k
    a = run(_scaled(Z=c), algo="gd", lr=0.5, steps=40)
    b = run(BASE, algo="gd", lr=0.5 * c * c, steps=40)
    np.testing.assert_array_equal(a.W, b.W / c)
    assert a.stop_reason == b.stop_reason and a.steps[0] == b.steps[0] > 0
    a = run(_scaled(Z=c), algo="md", q=3.0, lr=0.5, steps=40)
    b = run(BASE, algo="md", q=3.0, lr=0.5 * c**3, steps=40)
    assert _rel(a.W, b.W / c) <= tol("replay_rtol") and a.stop_reason == b.stop_reason


@pytest.mark.parametrize("k", [500, -500])
def test_scaled_tokens_prompt_relations(k):
    c = 2.0**k
    a = run(_scaled(X=c), param="vp", lr=0.1, steps=40)  # any loss
    b = run(BASE, param="vp", lr=0.1 * c, steps=40)
    assert a.stop_reason == b.stop_reason == ["steps"]
    np.testing.assert_array_equal(a.p, b.p / c)
    np.testing.assert_array_equal(a.v, b.v / c)
    for param in ("p", "W"):  # correlation loss: L_c(theta) = c L(c theta)
        a = run(_scaled(X=c), param=param, loss="correlation", lr=0.1, steps=40)
        b = run(BASE, param=param, loss="correlation", lr=0.1 * c, steps=40)
        np.testing.assert_array_equal(a.params(0)[param], b.params(0)[param] / c)


def test_kq_with_huge_queries_runs_and_matches_the_model():
    ds = _scaled(Z=1e154)
    r = run(ds, param="KQ", steps=60)
    assert r.stop_reason == ["steps"] and np.all(np.isfinite(r.W)) and r.norm[0] > 1.0
    np.testing.assert_allclose(r.W[0], r.K[0] @ r.Q[0].T, rtol=tol("rounding"), atol=0)
    # the reported log-softmax and loss are the numpy model's at the final W (logits x^T W (cz) = x^T (cW) z)
    ls = model.log_softmax(model.logits(np.asarray(BASE.X), 1e154 * r.W[0], np.asarray(BASE.Z)))
    assert np.min(ls) < -1e150 and _rel(r.log_softmax[0], ls) <= tol("replay_rtol")
    assert abs(r.loss[0] - model.loss(BASE, 1e154 * r.W[0])) <= tol("replay_rtol")


def test_regularisation_path_and_reference_steppers_scale_relations():
    c = 2.0**400
    pa = regularization_path(_scaled(Z=c), [1.0, 3.0], steps_per_radius=60)
    pb = regularization_path(BASE, [c, 3 * c], steps_per_radius=60)
    np.testing.assert_array_equal(pa.W, pb.W / c)
    assert np.all(np.isfinite(pa.W)) and np.all(pa.norm > 0)
    ra = ngd_reference(_scaled(Z=c), np.zeros((3, 3)), 40, lr=0.1, record_every=40)
    rb = ngd_reference(BASE, np.zeros((3, 3)), 40, lr=0.1 * c, record_every=40)
    np.testing.assert_array_equal(ra.W, rb.W / c)
    assert _rel(run(_scaled(Z=c), steps=40).W[0], ra.W) <= tol("replay_rtol")
    ga = gd_reference(_scaled(Z=2.0**256), np.zeros((3, 3)), 40, lr=0.5, record_every=40)
    eng = run(_scaled(Z=2.0**256), algo="gd", lr=0.5, steps=40)
    assert _rel(eng.W[0], ga.W) <= tol("replay_rtol")


def test_kq_path_from_the_saddle_with_a_large_ball_has_no_nan():
    # grad_K = G Q = 0 at Q_0 = 0: the zero direction must be a zero step, not (lr0 * rho / tiny) * 0
    p = regularization_path(BASE, [5000.0], param="KQ", steps_per_radius=30)  # lr0 * rho = 10 > 4
    assert np.all(np.isfinite(p.W)) and np.all(np.isfinite(p.loss))


def test_large_step_prompt_training_from_zero_has_no_nan():
    # v0 = p0 = 0: grad_p is exactly 0 at step 0; lr / tiny overflowed and 0 * inf gave NaN
    r = run(BASE, param="vp", lr=10.0, steps=3)
    assert r.stop_reason == ["steps"] and np.all(np.isfinite(r.p)) and np.all(np.isfinite(r.v))


# ---------------------------------------------------------------------- extreme files via the CLI
@pytest.mark.parametrize("c", [1e154, 1e300])
def test_cli_huge_queries_run_correctly(tmp_path, capsys, c):
    path = _save(tmp_path, "z.npz", Z=np.asarray(BASE.Z) * c)
    rc, out, err = _call(capsys, "gd", path, "--json", "--steps", "50")
    assert rc == 0 and err == ""
    r = _json(out)["runs"][0]
    W = np.array(r["W"])
    ref = run(BASE, steps=50, lr=0.1 * c)  # V_k = c W_k
    assert r["stop_reason"] == "steps" and r["steps"] == 50 and np.any(W != 0)
    assert _rel(W, ref.W[0] / c) <= tol("replay_rtol")
    assert r["selection"] == ref.selection[0].tolist()


def test_cli_huge_tokens_run_and_agree_with_the_reference_stepper(tmp_path, capsys):
    c = 1e300
    path = _save(tmp_path, "x.npz", X=np.asarray(BASE.X) * c)
    rc, out, err = _call(capsys, "gd", path, "--json", "--steps", "20")
    assert rc == 0 and "error" not in err
    r = _json(out)["runs"][0]
    assert r["stop_reason"] == "steps" and np.isfinite(r["loss"]) and np.isfinite(r["norm"])
    ref = ngd_reference(_scaled(X=c), np.zeros((3, 3)), 20, record_every=20)  # numpy, pairwise O(T^2) weights
    assert _rel(np.array(r["W"]), ref.W) <= tol("replay_rtol")
    # first step from 0: s uniform, so the direction weighs input i by |l'(c gbar_i)| (c gbar_i ~ 1e300)
    X, Z, g = np.asarray(BASE.X), np.asarray(BASE.Z), np.asarray(BASE.scores)
    gbar = g.mean(-1)
    lw = -np.logaddexp(0.0, c * gbar)
    w = np.exp(lw - lw.max())
    D = np.einsum("i,it,itd,ie->de", w, g - gbar[:, None], X, Z)
    one = run(_scaled(X=c), steps=1)
    assert _rel(one.W[0], 0.1 * D / np.linalg.norm(D)) <= tol("replay_rtol")


def test_cli_tiny_tokens_move_along_the_uniform_softmax_direction(tmp_path, capsys):
    path = _save(tmp_path, "x.npz", X=np.asarray(BASE.X) * 1e-300)
    rc, out, err = _call(capsys, "gd", path, "--json", "--steps", "37")
    assert rc == 0 and err == ""
    r = _json(out)["runs"][0]
    D = -model.grad_W(BASE, np.zeros((3, 3)), loss="correlation")
    assert r["stop_reason"] == "steps" and r["steps"] == 37
    assert _rel(np.array(r["W"]), 37 * 0.1 * D / np.linalg.norm(D)) <= tol("replay_rtol")
    assert r["max_softmax"] == [0.25, 0.25, 0.25] and r["loss"] == np.log(2.0)
    # plain GD: the gradient ~1e-600 is not representable, so the update is lost: 'underflow' at W_0 = 0
    rc, out, err = _call(capsys, "gd", path, "--json", "--algo", "gd")
    r = _json(out)["runs"][0]
    assert rc == 0 and err == "" and r["stop_reason"] == "underflow" and r["steps"] == 0
    assert np.all(np.array(r["W"]) == 0)


# ---------------------------------------------------------------------- non-finite stops
@pytest.mark.parametrize(
    "scale,extra,what",
    [
        (dict(Z=1e154), ["--lr", "1e300"], "parameters overflowed"),  # W_1 = -lr grad ~ 1e300 * 1e154
        (dict(X=1e300), [], "parameters overflowed"),  # grad L ~ |x|^2 |v| |z| ~ 1e600
        (dict(Z=1e300), [], "logits overflowed"),  # W_1 ~ 1e297 finite, x^T W_1 z ~ 1e597
    ],
)
def test_cli_plain_gd_overflow_stops_non_finite(tmp_path, capsys, scale, extra, what):
    over = {k: np.asarray(getattr(BASE, k)) * s for k, s in scale.items()}
    path = _save(tmp_path, "d.npz", **over)
    rc, out, err = _call(capsys, "gd", path, "--algo", "gd", "--json", *extra)
    assert rc == 1
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]  # data.load may warn (not this module)
    assert errors == [f"error: run 0: non-finite values at step 1 ({what}; {MSG})"] and err.endswith(errors[0] + "\n")
    r = _json(out)["runs"][0]
    assert r["stop_reason"] == "non-finite" and r["steps"] == 0 and np.all(np.array(r["W"]) == 0)
    rc, out, err = _call(capsys, "gd", path, "--algo", "gd", *extra)  # the table too
    assert rc == 1 and "non-finite" in out and "nan" not in out and "inf" not in out
    assert err.endswith(errors[0] + "\n")


def test_engine_freezes_a_non_finite_run_at_its_last_finite_iterate():
    # plain GD on (v, p), correlation loss: v_1 = lr * grad_v ~ 1e299 (p_1 = 0: equal scores at v_0 = 0), then
    # grad_p ~ |v_1| |x|^2 makes p_2 = lr * grad_p ~ 1e600 overflow; data set 0 (lr 1e-3) runs on
    ds = generate.paper_law(3, 4, 3, seed=0, B=2)
    kw = dict(param="vp", algo="gd", loss="correlation", steps=30)
    r = run(ds, lr=np.array([1e-3, 1e300]), **kw)
    assert STOP_REASONS[-1] == "non-finite" and r.stop_reason == ["steps", "non-finite"]
    assert r.nonfinite == ["", "parameters overflowed"] and r.nonfinite_step.tolist() == [-1, 2]
    assert r.steps.tolist() == [30, 1]
    before = run(ds[1], lr=1e300, **{**kw, "steps": 1})  # the frozen iterate is iterate 1
    assert before.stop_reason == ["steps"] and np.any(before.v != 0)
    np.testing.assert_array_equal(r.v[1], before.v[0])
    np.testing.assert_array_equal(r.p[1], before.p[0])
    assert np.all(np.isfinite(r.loss)) and np.all(np.isfinite(r.norm)) and r.loss[1] == before.loss[0]


def test_cli_batch_names_only_the_overflowed_run(tmp_path, capsys):
    ds = generate.paper_law(3, 4, 3, seed=0, B=3)
    Z = np.array(ds.Z)
    Z[1] *= 1e154
    path = _save(tmp_path, "b.npz", ds=ds, Z=Z)
    rc, out, err = _call(capsys, "gd", path, "--algo", "gd", "--lr", "1e300", "--json")
    assert rc == 1 and err == f"error: run 1: non-finite values at step 1 (parameters overflowed; {MSG})\n"
    runs = _json(out)["runs"]
    assert [r["stop_reason"] for r in runs] == ["underflow", "non-finite", "underflow"]


def test_huge_plain_step_without_overflow_is_an_honest_underflow(tmp_path, capsys):
    # lr 1e300: W_1 ~ 6.6e298 and its logits ~5e298 are finite (the old 'inf' norm was the overflow, of
    # ||W||^2); at W_1 every softmax is saturated far past float64, so the plain gradient is exactly 0
    rc, out, err = _call(capsys, "gd", _save(tmp_path, "ok.npz"), "--algo", "gd", "--lr", "1e300", "--json")
    r = _json(out)["runs"][0]
    W = np.array(r["W"])
    assert rc == 0 and err == "" and r["stop_reason"] == "underflow" and r["steps"] == 1
    assert np.all(np.isfinite(W)) and r["norm"] == pytest.approx(frobenius_norm(W), rel=tol("rounding"))
    assert 1e298 < r["norm"] < 1e300


# ---------------------------------------------------------------------- refused up front
@pytest.mark.parametrize(
    "over,extra,needle",
    [
        ({}, ["--lr", "1e308"], "lr: the parameter 'W' cannot be represented in float64: its norm can reach "),
        (dict(X=1e200, Z=1e200), [], "fields 'X', 'Z': the logits x^T W z cannot be represented"),
        (dict(X=1e300, v=1e10), [], "field 'X': the scores Y v^T x cannot be represented"),
        (dict(X=1e200), ["--dtype", "float32"], "field 'X': entries up to"),
        (dict(X=1e300), ["--lr", "1/L", "--algo", "gd"], "lr='1/L'"),
        (dict(X=1e200), ["--param", "p", "--lr", "1e200"], "field 'X': the logits x^T p cannot be represented"),
        (dict(X=1e300), ["--loss", "exponential"], "init: loss overflowed at the initial point"),
    ],
)
def test_cli_unrepresentable_runs_are_refused_with_one_line(tmp_path, capsys, over, extra, needle):
    arrays = {k: np.asarray(getattr(BASE, k)) * s for k, s in over.items()}
    rc, out, err = _call(capsys, "gd", _save(tmp_path, "d.npz", **arrays), *extra)
    assert rc == 2 and out == ""
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and lines[0].startswith("error: " + needle), err


def test_engine_refusals_name_the_bound():
    with pytest.raises(InputError, match=r"lr\*steps = 2e\+311 > 4\.49e\+307"):
        run(BASE, lr=1e308, steps=2000)
    with pytest.raises(InputError, match="quadratic head"):
        run(_scaled(X=1e200), head=("quadratic", 0.1), steps=2)
    with pytest.raises(InputError, match=r"radii: the parameter 'W'"):
        regularization_path(BASE, [1e308], steps_per_radius=2)
    with pytest.raises(InputError, match=r"data set 1"):
        run(Dataset.stack([BASE, _scaled(X=1e200, Z=1e200)]), steps=2)
    run(BASE, lr=1e300, steps=100)  # |x| |z| (lr steps) ~ 1e302: representable, so it runs


# ---------------------------------------------------------------------- --alpha
def test_tied_data_needs_alpha_and_runs_with_it(tmp_path, capsys):
    path = _tie_file(tmp_path)
    rc, out, err = _call(capsys, "gd", path, "--steps", "5")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: tie for the optimal token") and "pass --alpha" in err
    rc, out, err = _call(capsys, "gd", path, "--alpha", "1,0,2", "--steps", "300", "--json")
    r = _json(out)["runs"][0]
    assert rc == 0 and err == "" and r["selection"] == [1, 0, 2] and r["selection_matches_alpha"] is True
    rc, out, err = _call(capsys, "gd", path, "--alpha", "0,0,2", "--steps", "300", "--json")
    r = _json(out)["runs"][0]
    assert rc == 0 and r["selection"] == [1, 0, 2] and r["selection_matches_alpha"] is False
    rc, out, _ = _call(capsys, "gd", path, "--alpha", "0,0,2", "--steps", "300")
    head, row = out.splitlines()[1:3]
    assert rc == 0 and "=alpha" in head and row.split()[6] == "False"


def test_alpha_on_plain_and_batch_data(tmp_path, capsys):
    rc, out, _ = _call(capsys, "gd", _save(tmp_path, "ok.npz"), "--json", "--steps", "50")
    r = _json(out)["runs"][0]
    assert rc == 0 and "selection_matches_alpha" not in r
    sel = ",".join(map(str, r["selection"]))
    rc, out, _ = _call(capsys, "gd", _save(tmp_path, "ok.npz"), "--json", "--steps", "50", "--alpha", sel)
    assert rc == 0 and _json(out)["runs"][0]["selection_matches_alpha"] is True
    np.save(tmp_path / "a.npy", np.array([2, 2, 2]))
    ds = generate.paper_law(3, 4, 3, seed=0, B=2)
    rc, out, _ = _call(capsys, "gd", _save(tmp_path, "b.npz", ds=ds), "--json", "--steps", "5", "--alpha",
                       tmp_path / "a.npy")  # fmt: skip
    runs = _json(out)["runs"]
    assert rc == 0 and [r["selection_matches_alpha"] for r in runs] == [r["selection"] == [2, 2, 2] for r in runs]
    for bad in ("0,1", "0,1,9", "x.npy"):
        rc, out, err = _call(capsys, "gd", _save(tmp_path, "ok.npz"), "--alpha", bad)
        assert rc == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1
