"""Benign overfitting in single-head attention (attsvm.benign): the data law and its validation, save/load, the
max-margin (v,p) interpolator against an independent enumeration, the test error against sampled test sets.

The experiment's smoke run is ``property_tests/test_numerics_smoke.py::test_smoke[benign]`` (every spec of
``numerics/`` is discovered there)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given

from attsvm import benign, strategies
from attsvm.data import Dataset, load, save
from attsvm.errors import InputError
from attsvm.model import prompt_outputs
from attsvm.tolerances import tol


# ------------------------------------------------------------------------------------------------- the law
def test_sample_follows_the_law():
    n, d, T, rho, eta = 4000, 12, 3, 2.5, 0.2
    ds = benign.sample(n, d, rho, eta, T=T, seed=3)
    assert ds.X.shape == (n, T, d) and ds.Y.shape == (n,)
    y = benign.clean_labels(ds)
    sig = ds.X[:, 0]
    # the signal token is rho e_0 for a clean +1, rho e_1 for a clean -1, nothing else
    assert np.all(sig[y > 0, 0] == rho) and np.all(sig[y > 0, 1:] == 0)
    assert np.all(sig[y < 0, 1] == rho) and np.all(sig[y < 0, 0] == 0) and np.all(sig[y < 0, 2:] == 0)
    # noise tokens: orthogonal to both signals, standard normal on the other coordinates
    noise = ds.X[:, 1:, 2:].ravel()
    assert np.all(ds.X[:, 1:, :2] == 0)
    assert abs(noise.mean()) < 4 / np.sqrt(noise.size) and abs(noise.var() - 1) < 8 * np.sqrt(2 / noise.size)
    # flips: rate eta (binomial, 4 s.d.), labels = clean negated exactly there; fair clean labels
    f = benign.flips(ds)
    assert np.array_equal(ds.Y, np.where(f, -y, y))
    assert abs(f.mean() - eta) < 4 * np.sqrt(eta * (1 - eta) / n)
    assert abs((y > 0).mean() - 0.5) < 4 * np.sqrt(0.25 / n)
    # the data set's selection is the benign one: signal for clean inputs, noise token 1 for flipped ones
    assert np.array_equal(ds.alpha, f.astype(int))
    assert benign.signal_norm(ds) == rho
    assert benign.kappa_of(benign.rho_of(1.7, 9, 400), 9, 400) == pytest.approx(1.7, rel=1e-15)


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"n": 0}, "n must be"),
        ({"T": 1}, "T must be"),
        ({"d": 2}, "d must be"),
        ({"rho": 0.0}, "signal norm"),
        ({"rho": float("nan")}, "signal norm"),
        ({"eta": 0.5}, "flip rate"),
        ({"eta": -0.1}, "flip rate"),
    ],
)
def test_bad_parameters_are_input_errors(kw, needle):
    args = {"n": 4, "d": 6, "rho": 1.0, "eta": 0.1, "T": 2, **kw}
    with pytest.raises(InputError, match=needle) as e:
        benign.sample(**args)
    assert "\n" not in str(e.value)


def test_other_data_are_refused():
    from attsvm.generate import paper_law

    ds = paper_law(3, 2, 4, seed=0)
    with pytest.raises(InputError, match="not of the benign-overfitting law"):
        benign.clean_labels(ds)
    with pytest.raises(InputError, match="T = 2"):
        benign.max_margin(benign.sample(4, 10, 1.0, 0.1, T=3, seed=0))
    with pytest.raises(InputError, match="disagree"):
        benign.build(np.ones(3), np.zeros(3, bool), np.zeros((4, 1, 3)), 1.0)
    with pytest.raises(InputError, match="v and p"):
        benign.test_error(np.zeros(5), np.zeros(4), 1.0)


def test_save_load_round_trip(tmp_path):
    ds = benign.sample(7, 9, 1.3, 0.3, T=3, seed=5)
    back = load(save(ds, tmp_path / "b.json"))
    assert isinstance(back, Dataset)
    assert np.array_equal(back.X, ds.X) and np.array_equal(back.Y, ds.Y) and np.array_equal(back.alpha, ds.alpha)
    assert np.array_equal(benign.flips(back), benign.flips(ds))
    assert np.array_equal(benign.clean_labels(back), benign.clean_labels(ds))


@given(strategies.benign(n=(1, 5), T=(2, 3), d=(3, 6), kappa=1.0, eta=0.3))
def test_strategy_draws_the_law(ds):
    y, f = benign.clean_labels(ds), benign.flips(ds)
    assert np.array_equal(ds.Y, np.where(f, -y, y)) and np.array_equal(ds.alpha, f.astype(int))
    assert benign.signal_norm(ds) == pytest.approx(benign.rho_of(1.0, ds.n, ds.d), rel=1e-15)


def test_batch_entry():
    b = strategies.batch("benign", 3, seed=2, n=5, T=2, d=8, kappa=2.0, eta=0.2)
    assert b.X.shape == (3, 5, 2, 8)
    for i in range(3):
        assert benign.signal_norm(b[i]) == pytest.approx(2.0 * np.sqrt(8 / 5), rel=1e-15)


# -------------------------------------------------------------------------- the interpolator vs enumeration
def _head_by_active_sets(U: np.ndarray) -> float:
    r"""min |v|^2 s.t. U v >= 1 by enumerating active sets (numpy only, no cvxpy): the optimum is
    $v=U_S^\top(U_SU_S^\top)^{-1}\mathbf 1$ for the active set $S$ whose multipliers are $\ge0$ and whose $v$ is
    feasible; inf when no active set qualifies (infeasible)."""
    best = np.inf
    m = U.shape[0]
    for r in range(1, m + 1):
        for S in itertools.combinations(range(m), r):
            G = U[list(S)] @ U[list(S)].T
            if np.linalg.matrix_rank(G) < r:
                continue
            lam = np.linalg.solve(G, np.ones(r))
            v = U[list(S)].T @ lam
            if np.all(lam >= -1e-10) and np.all(U @ v >= 1 - 1e-9):
                best = min(best, float(v @ v))
    return best


@pytest.mark.parametrize("seed, kappa", [(0, 0.5), (1, 1.5), (2, 3.0), (3, 1.0), (4, 6.0)])
def test_max_margin_is_the_minimum_over_all_selections(seed, kappa):
    """The nine-option reduction against every one of the 2^n selections, each head SVM solved by active-set
    enumeration (an independent solver); the exact rational certificate of the winner, and the rational values
    of every option with the winner their strict minimum."""
    n, d, eta = 5, 9, 0.3
    ds = benign.sample(n, d, benign.rho_of(kappa, n, d), eta, seed=seed)
    mm = benign.max_margin(ds, exact=True)
    brute = min(
        _head_by_active_sets(ds.Y[:, None] * ds.X[np.arange(n), np.array(a)])
        for a in itertools.product((0, 1), repeat=n)
    )
    assert mm.value == pytest.approx(brute, rel=1e-6)
    ex = mm.certificate["exact"]
    assert ex["verified"]
    v_exact = np.array([float(Fraction(x)) for x in ex["v"]])
    assert np.abs(v_exact - mm.v).max() <= 1e-6 * np.abs(v_exact).max()
    # every option's value proved in rationals, the winner the strict minimum, equal to the enumeration's optimum
    assert mm.certificate["exact_minimum"]
    exact = benign.exact_value(mm.certificate["exact"])
    assert float(exact) == pytest.approx(brute, rel=1e-9)
    fit, prompt = benign.interpolation_margins(ds, mm)
    assert fit >= -tol("active") and prompt >= -tol("active")
    # the limit interpolates: with the prompt scaled up, every training label (flipped ones too) is fitted
    u = prompt_outputs(ds, 60.0 * mm.p, mm.v)[2]
    assert np.all(u > 0.99)


def test_regimes_of_the_interpolator():
    """Far above the threshold the benign option wins (clean signal signs); far below, no signal is used."""
    n, d, eta = 16, 400, 0.1
    hi = benign.max_margin(benign.sample(n, d, benign.rho_of(8.0, n, d), eta, seed=11))
    lo = benign.max_margin(benign.sample(n, d, benign.rho_of(0.3, n, d), eta, seed=11))
    assert hi.signs == (1.0, -1.0) and lo.signs == (None, None)
    assert not hi.certificate["tie"] and not lo.certificate["tie"]


# ------------------------------------------------------------------------------------------ the test error
def _sampled_error(v, p, rho, T, d, hard, m=40_000, seed=99):
    test = benign.sample(m, d, rho, 0.0, T=T, seed=seed)  # clean labels
    if hard:
        sel = np.argmax(test.X @ p, axis=1)
        f = np.einsum("nd,d->n", test.X[np.arange(m), sel], v)
        yf = test.Y * f
    else:
        yf = prompt_outputs(test, p, v)[2]
    return float(np.mean(yf < 0) + 0.5 * np.mean(yf == 0)), m


@pytest.mark.parametrize("T", [2, 3])
@pytest.mark.parametrize("hard", [True, False])
def test_test_error_against_sampled_test_sets(T, hard):
    """Quadrature (saturated prompt) and the 2(T-1)-dimensional Monte Carlo (softmax) against d-dimensional test
    sets drawn from the law and classified directly (4 binomial s.d.)."""
    d, rho = 30, 1.4
    rng = np.random.default_rng(7)
    # the two classes see different signal logits and values: errors about 0.17-0.24, 0.06 apart from uniform attention
    v = np.r_[1.0, -0.6, 0.3 * rng.standard_normal(d - 2)]
    p = np.r_[2.0, -0.5, 0.4 * rng.standard_normal(d - 2)]
    e = benign.test_error(v, p, rho, T=T, hard=hard, samples=200_000, seed=1)
    emp, m = _sampled_error(v, p, rho, T, d, hard)
    assert 0.02 < emp < 0.98
    assert abs(e - emp) <= 4 * np.sqrt(emp * (1 - emp) / m) + 4 * np.sqrt(0.25 / 200_000)


def test_no_signal_head_is_a_coin():
    """A head with no signal component and a prompt that treats both signals alike errs 1/2 (an output 0 is a
    fair coin): the selection is then independent of the class, and the noise value is symmetric."""
    d = 12
    rng = np.random.default_rng(0)
    v = np.r_[0.0, 0.0, rng.standard_normal(d - 2)]
    p = np.r_[0.7, 0.7, rng.standard_normal(d - 2)]
    assert benign.test_error(v, p, 2.0) == pytest.approx(0.5, abs=1e-9)
    assert benign.noisy_error(0.5, 0.2) == pytest.approx(0.5)
    assert benign.noisy_error(0.0, 0.2) == pytest.approx(0.2)


def test_fit_and_error_reads_the_model():
    ds = benign.sample(6, 20, 3.0, 0.2, T=3, seed=4)
    rng = np.random.default_rng(1)
    v, p = rng.standard_normal(20), rng.standard_normal(20)
    fit, err = benign.fit_and_error(ds, v, p, 0.2, samples=2000)
    s = np.exp(ds.X @ p - (ds.X @ p).max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    direct = ds.Y * np.einsum("nt,ntd,d->n", s, ds.X, v)
    assert fit == pytest.approx(float(direct.min()), rel=1e-12)
    assert 0.2 <= err <= 0.8


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_certify_head_on_generic_prompt_data(seed):
    """The exact head SVM (Att-SVM encoding) on paper-law data against the active-set enumeration."""
    from attsvm.generate import paper_law
    from attsvm.svm import certify_head

    ds = paper_law(4, 3, 5, seed=seed)
    a = np.asarray(ds.selection)
    cert = certify_head(ds, a)
    assert cert["verified"]
    v = np.array([float(Fraction(x)) for x in cert["v"]])
    brute = _head_by_active_sets(ds.Y[:, None] * ds.X[np.arange(ds.n), a])
    assert float(v @ v) == pytest.approx(brute, rel=1e-9)
    assert np.min(ds.Y * (ds.X[np.arange(ds.n), a] @ v)) >= 1 - 1e-12
