"""The multiclass encodings (attsvm.multiclass) and the implicit-norm measures (attsvm.implicit_norm) behind the
optimizer claims: each checked against an independent computation, each shown able to fail."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm import gd, multiclass
from attsvm import implicit_norm as imp
from attsvm.errors import InputError
from attsvm.svm.constraints import build


def _ce(Wb: np.ndarray, H: np.ndarray, y: np.ndarray) -> float:
    """Cross-entropy of the linear classifier Wb (k, d) written here from its definition."""
    S = H @ Wb.T
    mx = S.max(axis=1, keepdims=True)
    lse = mx[:, 0] + np.log(np.exp(S - mx).sum(axis=1))
    return float(np.mean(lse - S[np.arange(len(y)), y]))


@given(st.integers(2, 4), st.integers(2, 4), st.integers(0, 2**16))
def test_separable_data_is_separable_by_its_teacher_margin(k, d, seed):
    H, y = multiclass.separable(k, d, k + 3, seed=seed)
    assert H.shape == (k + 3, d) and set(np.unique(y)) == set(range(k))
    att = multiclass.as_attention(H, y, k)
    assert np.array_equal(att.alpha, y)


@given(st.integers(0, 2**16))
def test_the_encodings_are_the_multiclass_model(seed):
    """One GD step on the next-token encoding moves only the block, by the CE gradient computed independently
    (finite differences of the CE written above), and the Att-SVM margins are (e_y - e_c)^T W h."""
    k, d, n = 3, 2, 5
    H, y = multiclass.separable(k, d, n, seed=seed)
    ntp = multiclass.as_ntp(H, y, k)
    rng = np.random.default_rng(seed)
    W0 = np.zeros((ntp.d, ntp.d))
    W0[:k, k:] = rng.standard_normal((k, d))
    r = gd.run(ntp, param="W", algo="gd", loss="nll", lr=1.0, steps=1, init=W0)
    step = W0 - r.W[0]
    outside = step.copy()
    outside[:k, k:] = 0
    assert np.all(outside == 0)
    grad = np.zeros((k, d))
    for a in range(k):
        for b in range(d):
            E = np.zeros((k, d))
            E[a, b] = 1e-6
            grad[a, b] = (_ce(W0[:k, k:] + E, H, y) - _ce(W0[:k, k:] - E, H, y)) / 2e-6
    assert np.allclose(multiclass.block(step, k), grad, atol=1e-7)
    att = multiclass.as_attention(H, y, k)
    m = build(att, y).margins(W0).reshape(n, k - 1)
    Wb = W0[:k, k:]
    want = np.array([[(Wb[y[i]] - Wb[c]) @ H[i] for c in range(k) if c != y[i]] for i in range(n)])
    assert np.allclose(np.sort(m, axis=1), np.sort(want, axis=1), atol=1e-12)


def test_bad_multiclass_input():
    H, y = multiclass.separable(3, 2, 6, seed=0)
    with pytest.raises(InputError):
        multiclass.as_ntp(H, y + 3, 3)
    with pytest.raises(InputError):
        multiclass.as_attention(H, y.astype(float), 3)
    with pytest.raises(InputError):
        multiclass.separable(1, 2, 6)
    with pytest.raises(InputError):  # in one dimension at most two classes can win an argmax
        multiclass.separable(4, 1, 8)


def test_excess_is_zero_at_the_optimum_and_positive_elsewhere():
    """At the l_inf max-margin classifier of a 2-class problem solved by hand the excess is 0; a point off the
    optimal direction has excess > 0 (and a planted wrong optimum value is seen)."""
    H = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    y = np.array([0, 0, 1, 1])
    att = multiclass.as_attention(H, y, 2)
    # (w0 - w1).h >= 1 for class 0, <= -1 for class 1: u = w0 - w1 needs u1 >= 1, u2 >= 1; min max|W| puts
    # w0 = u/2, w1 = -u/2 with u = (1, 1): OPT_inf = 1/2 (by hand)
    opt = imp.optimum(att, y, "linf")
    assert opt == pytest.approx(0.5, rel=1e-9)
    W = np.zeros((4, 4))
    W[0, 2:], W[1, 2:] = 0.5, -0.5
    assert imp.excess(att, y, 3.0 * W, "linf", opt) == pytest.approx(0.0, abs=1e-12)
    V = W.copy()
    V[0, 2] = 0.7
    assert imp.excess(att, y, V, "linf", opt) > 0.1
    assert imp.excess(att, y, 3.0 * W, "linf", 0.4) > 0.2  # a wrong optimum is visible
    assert imp.excess(att, y, -W, "linf", opt) == np.inf
    g = imp.gaps(att, y, np.stack([3.0 * W, V]), "linf", opt)  # gamma* = 2; V: least margin 1.0, max-norm 0.7
    assert g[0] == pytest.approx(0.0, abs=1e-12) and g[1] == pytest.approx(2.0 - 1.0 / 0.7, rel=1e-12)


@given(st.floats(0.2, 1.5), st.floats(0.1, 10.0))
def test_gap_exponent_recovers_a_planted_power(p, C):
    k = np.linspace(1000, 8000, 20)
    assert imp.gap_exponent(k, C * k**-p) == pytest.approx(p, abs=1e-9)
    assert imp.gap_exponent(k, -(k**-p)) is None


def test_rate_growth_of_the_proved_form_is_one_and_of_a_slower_rate_is_large():
    k = np.linspace(4000, 8000, 20)
    n = 8
    assert imp.rate_growth(k, 3.0 * (np.log(k) + n) / np.sqrt(k), n) == pytest.approx(1.0)
    assert imp.rate_growth(k, k**-0.05, n) > 1.3


def test_fitted_exponent_survives_the_50_digit_replay():
    """Signum on a multiclass control: the gap exponent fitted from the float64 records equals the one fitted from
    the 50-digit replay's records (the fit is not a rounding artefact)."""
    k_, d, n = 3, 2, 5
    H, y = multiclass.separable(k_, d, n, seed=3)
    ntp, att = multiclass.as_ntp(H, y, k_), multiclass.as_attention(H, y, k_)
    W0 = np.zeros((ntp.d, ntp.d))
    s = {"algo": "signum", "momentum": 0.9, "schedule": "rsqrt"}
    steps, every = 400, 20
    ks, Ws, rel = imp.replayed_records(ntp, W0, lr=2.0, steps=steps, every=every, loss="nll", **s)
    r = gd.run(ntp, param="W", loss="nll", init=W0, lr=2.0, steps=steps, record_every=every, record_params=True, **s)
    Wf = np.asarray(r.trajectory["W"])[:, 0]
    opt = imp.optimum(att, y, "linf")
    half = ks >= steps / 2
    p50 = imp.gap_exponent(ks[half], imp.gaps(att, y, Ws[half], "linf", opt))
    p64 = imp.gap_exponent(ks[half], imp.gaps(att, y, Wf[half], "linf", opt))
    assert rel < 1e-9
    assert p50 is not None and p64 == pytest.approx(p50, abs=1e-6)


ATTENTION_FAMILY = ("adam-implicit-linf-decay", "signum-implicit-linf", "muon-implicit-spec", "adam-eps-l2")


@pytest.mark.slow
@pytest.mark.parametrize("cid", ATTENTION_FAMILY)
def test_attention_claims_exponent_survives_the_50_digit_replay(cid):
    """Each attention optimizer claim at its declared settings and budget: the margin-gap exponent fitted from the
    float64 records of a run equals the one fitted from its 50-digit replay's records (to 0.01; Adam's sign-like
    steps amplify float64 rounding along the run, so the iterates themselves may differ by ~1e-5 relative)."""
    from attsvm import generate
    from attsvm.claims.discover import discover
    from attsvm.gd.init import initial_params

    c = {x.id: x for x in discover()}[cid]
    p = dict(c.params)
    keys = ("algo", "schedule", "adam_betas", "adam_eps", "momentum")
    s = {k: (tuple(p[k]) if k == "adam_betas" else p[k]) for k in keys if k in p}
    ds = generate.paper_law(3, 4, 4, seed=5)
    W0 = initial_params("W", "random", 1, 4, 4, 5)["W"][0]
    steps = int(p["steps"])
    every = steps // 40
    ks, W50, rel = imp.replayed_records(ds, W0, lr=float(p["lr"]), steps=steps, every=every, **s)
    r = gd.run(ds, param="W", lr=float(p["lr"]), steps=steps, init=W0, record_every=every, record_params=True, **s)
    W64 = np.asarray(r.trajectory["W"])[:, 0]
    a = np.asarray(r.selection[0])
    norm = {"adam-implicit-linf-decay": "linf", "signum-implicit-linf": "linf", "muon-implicit-spec": "spec"}
    norm = norm.get(cid, "fro")
    opt = imp.optimum(ds, a, norm)
    half = ks >= steps / 2
    p64 = imp.gap_exponent(ks[half], imp.gaps(ds, a, W64[half], norm, opt))
    p50 = imp.gap_exponent(ks[half], imp.gaps(ds, a, W50[half], norm, opt))
    assert rel < 1e-3
    assert p64 is not None and p50 is not None and abs(p64 - p50) < 0.01, (p64, p50, rel)
