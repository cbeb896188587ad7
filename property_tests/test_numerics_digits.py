"""The digits experiment (``numerics/digits.py``): its data pipeline checked against the definitions it states.

The smoke run itself (figure, caption, the spec's qualitative checks) is ``test_numerics_smoke.py::test_smoke``,
which runs every discovered spec. Here: the tokens are the image's pixels with a one-hot position code, every
token of an image is distinct (the reason for the code), the head is the stated logistic-regression minimiser,
the log-domain saturation agrees with 50-digit arithmetic where the float64 softmax rounds to 1, the accuracy
agrees with a direct loop, and bad options are one-line errors before anything is written.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from attsvm.cli import main
from attsvm.data import Dataset
from attsvm.experiments import load_spec

dg = load_spec("digits")


@pytest.fixture(scope="module")
def pair38():
    return dg.load_pair("3-8")


def test_pair_is_the_two_digits(pair38):
    from sklearn.datasets import load_digits

    images, Y = pair38
    raw = load_digits()
    assert images.shape == (int(np.sum(raw.target == 3) + np.sum(raw.target == 8)), 8, 8)
    assert images.min() >= 0 and images.max() <= 1 and np.sum(Y > 0) == np.sum(raw.target == 3)
    first3 = raw.images[np.flatnonzero(raw.target == 3)[0]] / 16.0
    assert np.array_equal(images[np.flatnonzero(Y > 0)[0]], first3)


@pytest.mark.parametrize("tokens", ["patch", "row"])
def test_tokens_are_pixels_and_position_code(pair38, tokens):
    images = pair38[0][:50]
    X = dg.tokenise(images, tokens)
    T, npix = dg.TOKENS[tokens]
    assert X.shape == (50, T, npix + T)
    for i in range(50):
        for t in range(T):
            if tokens == "patch":
                r, c = divmod(t, 4)
                want = images[i, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2].ravel()  # row-major 2x2 block
            else:
                want = images[i, t]
            assert np.array_equal(X[i, t, :npix], want)
            assert np.array_equal(X[i, t, npix:], np.eye(T)[t])
            x0, y0, w, h = dg.token_box(tokens, t)  # the drawn box covers exactly these pixels
            block = images[i, int(y0 + 0.5) : int(y0 + 0.5 + h), int(x0 + 0.5) : int(x0 + 0.5 + w)]
            assert np.array_equal(np.sort(block.ravel()), np.sort(want))


@pytest.mark.parametrize("tokens", ["patch", "row"])
def test_position_code_makes_every_token_distinct(tokens):
    """With the code no two tokens of an image coincide (no constraint feature A_it vanishes); without it (pixels
    only) many images have two equal tokens, e.g. two blank patches."""
    from sklearn.datasets import load_digits

    X = dg.tokenise(load_digits().images / 16.0, tokens)
    npix = dg.TOKENS[tokens][1]
    gap = np.abs(X[:, :, None, :] - X[:, None, :, :]).sum(-1)
    off = ~np.eye(X.shape[1], dtype=bool)
    assert np.all(gap[:, off] > 0)
    pix_gap = np.abs(X[:, :, None, :npix] - X[:, None, :, :npix]).sum(-1)
    assert np.mean(np.any(pix_gap[:, off] == 0, axis=1)) > (0.5 if tokens == "patch" else 0.01)


def test_head_is_the_logistic_regression_minimiser(pair38):
    r"""Stationarity of $\frac12\|v\|^2+\sum_{i,t}\log(1+e^{-Y_iv^\top x_{it}})$: $v=\sum_{i,t}Y_i\sigma(-Y_iv^\top
    x_{it})x_{it}$; a perturbed head fails it."""
    images, Y = pair38
    X = dg.tokenise(images[:120], "patch")
    Yt = Y[:120]
    v = dg.fit_head(X, Yt)

    def residual(u):
        x = X.reshape(-1, X.shape[-1])
        y = np.repeat(Yt, X.shape[1])
        g = u - (y / (1.0 + np.exp(y * (x @ u)))) @ x
        return np.linalg.norm(g) / np.linalg.norm(u)

    assert residual(v) < 1e-5  # lbfgs's own stopping rule leaves about 2e-6
    assert residual(v * 1.01) > 1e-3
    ds = Dataset(X, Yt, None, v, kind="self", query_index=5)  # opt is unique (a tie would raise here)
    assert ds.opt.shape == (120,)


def test_saturation_in_the_log_domain_matches_50_digits():
    r"""$\log_{10}(1-\max_ts_{it})$ where float64 gives $\max_ts=1$ exactly: logits $(0,-60,-70,-40)$."""
    a = np.array([0.0, -60.0, -70.0, -40.0])
    T = len(a)
    X = np.concatenate([np.eye(T), np.zeros((T, 1))], axis=1)[None]  # x_t = e_t; query x_q = e_0
    W = np.zeros((T + 1, T + 1))
    W[:T, 0] = a  # a_t = x_t^T W x_0 = a_t
    logs, lo = dg.attention(X, W, 0)
    with mpmath.workdps(50):
        e = [mpmath.e ** mpmath.mpf(float(x)) for x in a]
        want = float(mpmath.log10(sum(e[1:]) / sum(e)))
    assert np.exp(logs[0]).max() == 1.0  # what the naive 1 - max s would see
    assert abs(lo[0] - want) <= 1e-12 * abs(want)


def test_accuracy_matches_a_direct_loop(pair38):
    images, Y = pair38
    X = dg.tokenise(images[:40], "patch")
    rng = np.random.default_rng(3)
    v = rng.standard_normal(X.shape[-1])
    W = rng.standard_normal((X.shape[-1],) * 2)
    right = 0
    for i in range(40):
        a = np.array([X[i, t] @ W @ X[i, 5] for t in range(X.shape[1])])
        s = np.exp(a - a.max())
        s /= s.sum()
        right += Y[i] * sum(s[t] * (v @ X[i, t]) for t in range(X.shape[1])) > 0
    assert dg.accuracy(X, Y[:40], v, W, 5) == pytest.approx(right / 40, abs=0)


def test_splits_are_seeded_and_disjoint():
    a, b = dg.splits(357, 0.7, 3), dg.splits(357, 0.7, 3)
    for (tr, te), (tr2, te2) in zip(a, b):
        assert np.array_equal(tr, tr2) and np.array_equal(te, te2)
        assert len(tr) == 250 and not set(tr) & set(te) and len(set(tr) | set(te)) == 357
    assert not np.array_equal(a[0][0], a[1][0])


@pytest.mark.parametrize(
    "sets, needle",
    [
        (["tokens=row", "query=8"], "error: option query=8 of experiment 'digits': expected an integer >= 0 and <= 7"),
        (["pair=3-3"], "error: option pair=3-3 of experiment 'digits': expected one of"),
        (["pair=8-3"], "error: option pair=8-3 of experiment 'digits': expected one of"),
        (["tokens=col"], "error: option tokens=col of experiment 'digits': expected one of patch, row"),
    ],
)
def test_bad_options_are_one_line_errors_and_write_nothing(tmp_path, capsys, sets, needle):
    out = tmp_path / "o"
    argv = ["reproduce", "digits", "--smoke", "--quiet", "--out", str(out)]
    assert main([*argv, *(x for s in sets for x in ("--set", s))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(needle), err
    assert not out.exists() or not any(out.iterdir())
