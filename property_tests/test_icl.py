"""In-context classification (:mod:`attsvm.icl`, Frei & Vardi arXiv 2410.01774): validation, save/load through the
one loader, the exact encodings against the ICL formula written here, GD through the engine against a logistic-loss
GD written here, the certified max-margin programs, the KKT residual and its ball lower bound, the strategy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings

from attsvm import data as data_mod
from attsvm import gd, icl, svm
from attsvm import strategies as S
from attsvm.errors import InputError
from attsvm.model import logits as att_logits
from attsvm.svm.constraints import build
from attsvm.tolerances import tol


def small(seed: int = 0, **kw) -> icl.ICLData:
    args = {"d": 3, "B": 5, "N": 4, "R": 1.5, **kw}
    return icl.generate(args.pop("d"), args.pop("B"), args.pop("N"), args.pop("R"), seed=seed, **args)


def direct_margins(W: np.ndarray, D: icl.ICLData) -> np.ndarray:
    """y_tau * mu_hat_tau^T W x_tau with mu_hat = (1/N) sum_i y_i x_i, by loops."""
    out = np.empty(D.tasks)
    for t in range(D.tasks):
        mu = sum(D.labels[t, i] * D.contexts[t, i] for i in range(D.N)) / D.N
        out[t] = D.query_labels[t] * float(mu @ W @ D.queries[t])
    return out


# ---------------------------------------------------------------------- validation and files
@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("labels", lambda D: np.where(D.labels > 0, 1.0, 0.0), "+1 or -1"),
        ("query_labels", lambda D: D.query_labels * 2, "+1 or -1"),
        ("contexts", lambda D: np.where(np.arange(D.d) == 0, np.nan, D.contexts), "NaN or inf"),
        ("queries", lambda D: D.queries + 1j, "complex"),
        ("queries", lambda D: D.queries[:, :-1], "shape"),
        ("labels", lambda D: D.labels[:, :-1], "shape"),
        ("contexts", lambda D: D.contexts[0], "shape"),
        ("R", lambda D: 0.0, "positive"),
        ("p_flip", lambda D: 0.5, "[0, 1/2)"),
    ],
)
def test_bad_fields_are_one_line_input_errors(field, value, needle):
    D = small()
    kw = {k: getattr(D, k) for k in ("contexts", "labels", "queries", "query_labels", "R", "p_flip")}
    kw[field] = value(D)
    with pytest.raises(InputError) as exc:
        icl.ICLData(**kw)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_arrays_are_read_only_and_sizes():
    D = small(p_flip=0.2)
    assert (D.tasks, D.N, D.d, D.n, D.T, D.K, D.kind) == (5, 4, 3, 5, 2, None, "icl")
    att = icl.as_attention(D)  # the attention view is the encoding's
    assert np.array_equal(D.X, att.X) and np.array_equal(D.Z, att.Z)
    with pytest.raises(ValueError):
        D.contexts[0, 0, 0] = 1.0


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_save_load_round_trip_through_the_one_loader(tmp_path, suffix):
    D = small(p_flip=0.2, runs=2)
    p = data_mod.save(D, tmp_path / f"x{suffix}")
    E = data_mod.load(p)
    assert isinstance(E, icl.ICLData) and E.kind == "icl" and E.batched
    for k in ("contexts", "labels", "queries", "query_labels"):
        assert np.array_equal(getattr(E, k), getattr(D, k))
    assert (E.R, E.p_flip) == (D.R, D.p_flip)


def test_tampered_and_empty_files_are_input_errors(tmp_path):
    p = data_mod.save(small(), tmp_path / "x.json")
    obj = json.loads(p.read_text())
    obj["labels"][0][0] = 0.5
    p.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="labels must be"):
        data_mod.load(p)
    obj["labels"][0][0] = 1.0
    obj["extra"] = 1
    p.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="unknown field 'extra'"):
        data_mod.load(p)
    del obj["extra"], obj["queries"]
    p.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="'queries' is missing"):
        data_mod.load(p)
    e = tmp_path / "empty.npz"
    e.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        data_mod.load(e)
    q = data_mod.save(small(), tmp_path / "y.npz")
    with pytest.raises(InputError, match="does not apply"):
        data_mod.load(q, alpha=[0])


def test_generator_is_seeded_and_flips_at_the_rate():
    a, b = small(seed=3, p_flip=0.3), small(seed=3, p_flip=0.3)
    assert np.array_equal(a.contexts, b.contexts) and np.array_equal(a.labels, b.labels)
    big = icl.generate(2, 400, 50, 1.0, p_flip=0.3, seed=1)
    clean = icl.generate(2, 400, 50, 1.0, p_flip=0.0, seed=1)
    # same stream up to the flips: the inputs agree, about 30% of the labels differ (20 000 labels: +-0.02)
    assert np.array_equal(big.contexts, clean.contexts)
    assert abs(np.mean(big.labels != clean.labels) - 0.3) < 0.02
    with pytest.raises(InputError):
        icl.generate(0, 2, 2, 1.0)


# ---------------------------------------------------------------------- the encodings
@settings(deadline=None)
@given(S.icl(n=(1, 4), N=(1, 4), d=(1, 4), R=2.0, p_flip=0.2))
def test_attention_encoding_margins_are_the_icl_margins(D):
    W = np.random.default_rng(D.tasks * 7 + D.d).standard_normal((D.d, D.d))
    want = direct_margins(W, D)
    att = icl.as_attention(D)
    a = att_logits(att.X, W, att.Z)  # x_t^T W z for the two tokens
    scale = 1 + np.abs(want).max()
    assert np.allclose(a[:, 0] - a[:, 1], want, rtol=0, atol=1e-12 * scale)
    assert np.allclose(build(att, att.alpha).margins(W), want, rtol=0, atol=1e-12 * scale)
    assert np.allclose(icl.margins(W, D), want, rtol=0, atol=1e-12 * scale)


def test_gd_through_the_engine_is_gd_on_the_logistic_loss():
    D = small(d=4, B=6, N=5, R=2.0)
    lr, steps = 0.3, 25
    W = np.zeros((D.d, D.d))
    for _ in range(steps):  # the ICL logistic loss (1/B) sum log(1 + exp(-m_tau)), its gradient by hand
        m = direct_margins(W, D)
        G = np.zeros_like(W)
        for t in range(D.tasks):
            mu = D.labels[t] @ D.contexts[t] / D.N
            G += -1.0 / (1.0 + np.exp(m[t])) * D.query_labels[t] * np.outer(mu, D.queries[t])
        W = W - lr * G / D.tasks
    r = gd.run(icl.as_ntp(D), algo="gd", loss="nll", lr=lr, steps=steps)
    assert np.linalg.norm(r.W[0] - W) <= tol("batch_rtol") * np.linalg.norm(W)
    one = gd.run(icl.as_ntp(D), algo="gd", loss="nll", lr=lr, steps=1).W[0]
    A = sum(D.query_labels[t] * np.outer(D.labels[t] @ D.contexts[t] / D.N, D.queries[t]) for t in range(D.tasks))
    assert np.allclose(one, lr * 0.5 * A / D.tasks, rtol=1e-13, atol=0)  # l'(0) = -1/2 for every task


def test_the_multiclass_route_gives_the_same_gd():
    """Binary logistic loss = 2-class cross-entropy on h = vec(mu_hat x^T) (:mod:`attsvm.multiclass`): from 0 the two
    class rows stay opposite, so w_0 - w_1 follows GD on the logistic loss at twice the step."""
    from attsvm import multiclass as mc

    D = small(d=3, B=5, N=4, R=1.5, seed=4)
    H = np.stack([np.outer(D.mu_hat[t], D.queries[t]).ravel() for t in range(D.tasks)])
    c = (D.query_labels < 0).astype(np.int64)  # class 0 for y = +1
    lr, steps = 0.4, 20
    Wmc = gd.run(mc.as_ntp(H, c, 2), algo="gd", loss="nll", lr=lr / 2, steps=steps).W[0]
    blk = mc.block(Wmc, 2)
    assert np.allclose(blk[0], -blk[1], atol=1e-14)
    ours = gd.run(icl.as_ntp(D), algo="gd", loss="nll", lr=lr, steps=steps).W[0]
    assert np.allclose((blk[0] - blk[1]).reshape(D.d, D.d), ours, rtol=0, atol=1e-12 * np.abs(ours).max())


def test_batched_ntp_encoding_runs_each_draw():
    B = small(runs=3)
    r = gd.run(icl.as_ntp(B), algo="gd", loss="nll", lr=0.5, steps=10)
    for b in range(3):
        one = gd.run(icl.as_ntp(B[b]), algo="gd", loss="nll", lr=0.5, steps=10).W[0]
        assert np.allclose(r.W[b], one, rtol=tol("batch_rtol"), atol=0)


# ---------------------------------------------------------------------- certified programs and KKT
def test_frobenius_certificate_and_kkt_from_the_multipliers():
    D = small(d=3, B=6, N=6, R=1.0, seed=2)
    att = icl.as_attention(D)
    sol = svm.solve(att, norm="fro", certify=True)
    assert sol.status == "optimal" and sol.certificate["verified"]
    m = direct_margins(sol.W, D)
    assert m.min() >= 1 - 1e-9
    lam = np.asarray(sol.multipliers)[:, 1]  # (n, T): the non-selected token
    assert np.all(lam >= -1e-12)
    rebuilt = sum(lam[t] * D.query_labels[t] * np.outer(D.labels[t] @ D.contexts[t] / D.N, D.queries[t])
                  for t in range(D.tasks))  # fmt: skip
    assert np.allclose(rebuilt, sol.W, atol=1e-9)
    assert np.all(lam[m > 1 + 1e-6] <= 1e-9)  # complementary slackness
    assert icl.stationarity(sol.W, D, tol("active"))["residual"] <= 1e-9
    nuc = svm.solve(att, norm="nuc", certify=True)
    assert nuc.status == "optimal" and nuc.kkt["duality_gap"] <= tol("nuc_gap")
    assert np.linalg.norm(nuc.W, "nuc") <= np.linalg.norm(sol.W, "nuc") * (1 + 1e-6)  # it minimises the nuclear norm


def test_one_gd_step_is_not_a_kkt_point_and_the_ball_bound_agrees():
    D = icl.generate(3, 6, 40, 5 * np.sqrt(3), seed=1)
    W1 = gd.run(icl.as_ntp(D), algo="gd", loss="nll", lr=0.01, steps=1).W[0]
    s = icl.stationarity(W1, D, 0.05)
    low = icl.stationarity_lower_bound(W1, D, 0.05)
    assert 0.3 < low <= s["residual"] + 1e-12
    Wm = svm.wmm(icl.as_attention(D))
    assert icl.stationarity_lower_bound(Wm, D, 1e-6) <= 1e-12


def test_memorisation_and_predictions_against_loops():
    D = small(p_flip=0.3, N=6)
    W = np.eye(D.d)
    pred = icl.in_context_predictions(W, D)
    for t in range(D.tasks):
        mu = D.labels[t] @ D.contexts[t] / D.N
        for k in range(D.N):
            assert pred[t, k] == np.sign(mu @ D.contexts[t, k])
    assert np.array_equal(icl.memorised(W, D), np.all(pred == D.labels, axis=1))


# ---------------------------------------------------------------------- strategy
def test_batch_strategy_is_seeded_and_validated():
    a = S.batch("icl", 3, seed=5, n=4, N=3, d=2, R=2.0, p_flip=0.1)
    b = S.batch("icl", 3, seed=5, n=4, N=3, d=2, R=2.0, p_flip=0.1)
    assert a.batched and a.contexts.shape == (3, 4, 3, 2) and np.array_equal(a.contexts, b.contexts)
    mu = np.einsum("rbn,rbnd->rbd", a.labels, a.contexts)  # finite, labels +-1 by construction
    assert np.all(np.isfinite(mu)) and set(np.unique(a.labels)) <= {-1.0, 1.0}
    with pytest.raises(InputError, match="p_flip"):
        S.batch("icl", 2, n=2, N=2, d=2, p_flip=0.6)


def test_cli_solve_takes_in_context_files(tmp_path, capsys):
    from attsvm.cli import main

    D = small(seed=6)
    p = data_mod.save(D, tmp_path / "icl.npz")
    assert main(["solve", str(p), "--certify", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    W = np.asarray(out["W"], dtype=float)
    assert direct_margins(W, D).min() == pytest.approx(1.0, abs=1e-9)  # the ICL margins, written here
    assert np.allclose(W, svm.wmm(icl.as_attention(D)), atol=1e-12)
    assert main(["solve", str(p), "--alpha", "0"]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_counterexample_tables_show_the_tasks():
    """A refuted in-context claim's report shows its data: per task the context rows and the query (issue 29: the
    markdown report of icl-kkt-finite-t crashed on ICLData)."""
    from attsvm.tables import input_tables

    data = icl.generate(d=3, B=3, N=4, R=2.0, p_flip=0.2, seed=5)
    t = input_tables(data, inputs=2, source="f.npz")
    assert len(t.tables) == 2 and any("2 of 3" in str(x) or "0-1 of 3" in str(x) for x in t.note)
    rows = t.tables[1].rows
    assert len(rows) == 4 + 1  # four context examples, then the query
    for i in range(4):
        assert [float(c.value) for c in rows[i][1:4]] == pytest.approx(data.contexts[1, i], rel=1e-5)
        assert int(rows[i][4].value) == int(data.labels[1, i])
    assert [float(c.value) for c in rows[4][1:4]] == pytest.approx(data.queries[1], rel=1e-5)
    assert int(rows[4][4].value) == int(data.query_labels[1]) and rows[4][1].bold
