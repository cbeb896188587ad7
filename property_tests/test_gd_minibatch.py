"""Deterministic cyclic mini-batches of the GD engine (``Settings.minibatch`` $b$): update $k$ steps on
$\\mathcal L_k=\\frac1b\\sum_{i\\in B_k}\\ell_i$, $B_k=\\{(kb+j)\\bmod n\\}_{j<b}$, the records and stops on the full
data set. Checked against: the full-batch run ($b=n$, bit for bit), alternating per-sample steps computed here by
autograd of the single-sample loss ($b=1$), the independent 50-digit replay (``gd``, ``signum``, ``adam``, ``ngd``
with $b<n$; also far past underflow, where a row outside the batch would otherwise set the scale), and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attsvm import gd, generate
from attsvm import highprec as hp
from attsvm.cli import main
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.gd.model_torch import TorchData, token_weights_logdomain
from attsvm.gd.spec import batch_rows
from attsvm.gd.steps import Problem, forward
from attsvm.ntp.generate import ntp
from attsvm.tolerances import tol


def _data(n: int = 3):
    return generate.paper_law(n, 4, 3, seed=1)


def _init(param: str, scale: float = 0.3) -> dict[str, np.ndarray]:
    return gd.initial_params(param, "random", 1, 3, 3, seed=3, init_scale=scale)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(b))


def test_the_batches_are_the_cyclic_windows_of_the_definition():
    n, b = 5, 3
    for k in range(12):
        assert batch_rows(k, b, n).tolist() == [(k * b + j) % n for j in range(b)]
    assert batch_rows(0, n, n).tolist() == list(range(n))


@pytest.mark.parametrize(
    ("algo", "param"), [(a, p) for a in gd.ALGOS for p in ("W", "KQ") if p in gd.ALGORITHMS[a].params]
)
def test_a_batch_of_all_samples_is_the_full_batch_bit_for_bit(algo, param):
    ds = _data()
    extra = {"nsd": {"norm": "linf"}, "md": {"q": 3.0}, "nmd": {"q": 3.0}}.get(algo, {})
    kw = dict(param=param, algo=algo, lr=0.05, steps=15, init=_init(param), kernel="torch", record_every=5, **extra)
    full = gd.run(ds, **kw)
    mb = gd.run(ds, minibatch=3, **kw)
    assert mb.settings.minibatch == 3 and full.settings.minibatch is None
    for k, v in full.params(0).items():
        assert np.array_equal(v, mb.params(0)[k]), k
    assert np.array_equal(full.loss, mb.loss)
    for k, v in full.trajectory.items():
        assert np.array_equal(v, mb.trajectory[k]), k


def test_a_batch_of_all_rows_is_the_full_batch_on_next_token_data():
    ds = ntp(6, 4, 6, 8, seed=2, graph="cyclic")
    W0 = np.random.default_rng(0).normal(size=(8, 8)) * 0.1
    n = ds.flat().X.shape[-3]
    for algo, kernel in (("ngd", "auto"), ("ngd", "torch"), ("signum", "auto")):
        a = gd.run(ds, param="W", algo=algo, lr=0.1, steps=10, init=W0, kernel=kernel)
        b = gd.run(ds, param="W", algo=algo, lr=0.1, steps=10, init=W0, minibatch=n, kernel=kernel)
        assert a.kernel == b.kernel and np.array_equal(a.W, b.W), (algo, kernel)


def _sample_loss(ds, W: torch.Tensor, i: int) -> torch.Tensor:
    """$\\ell_i(W)=\\log(1+e^{-u_i})$, $u_i=Y_iv^\\top X_i^\\top\\mathbb S(X_iWz_i)$, written from the definition."""
    X = torch.tensor(ds.X[i], dtype=torch.float64)
    z = torch.tensor(ds.Z[i], dtype=torch.float64)
    v = torch.tensor(ds.v, dtype=torch.float64)
    s = torch.softmax(X @ (W @ z), dim=0)
    u = float(ds.Y[i]) * (v @ (X.T @ s))
    return torch.log1p(torch.exp(-u))


def _per_sample_run(ds, W0: np.ndarray, steps: int, lr: float, sign_momentum: float | None) -> np.ndarray:
    """Alternating per-sample steps on samples 0, 1, 0, 1, ... (plain GD, or Signum with the given momentum)."""
    W = torch.as_tensor(W0, dtype=torch.float64)
    m = torch.zeros_like(W)
    for k in range(steps):
        Wg = W.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(_sample_loss(ds, Wg, k % 2), Wg)
        if sign_momentum is None:
            W = W - lr * g
        else:
            m = sign_momentum * m + (1 - sign_momentum) * g
            W = W - lr * torch.sign(m)
    return W.numpy()


@pytest.mark.parametrize("algo", ["gd", "signum"])
def test_one_sample_per_step_is_alternating_per_sample_steps(algo):
    ds = _data(2)
    W0 = _init("W", 1.0)["W"][0]
    r = gd.run(ds, param="W", algo=algo, lr=0.2, steps=12, init=W0, minibatch=1, momentum=0.5 if algo != "gd" else None)
    want = _per_sample_run(ds, W0, 12, 0.2, 0.5 if algo == "signum" else None)
    assert _rel(r.W[0], want) <= 1e-12
    full = gd.run(ds, param="W", algo=algo, lr=0.2, steps=12, init=W0, momentum=0.5 if algo != "gd" else None)
    assert _rel(full.W[0], want) > 1e-6  # the per-sample trajectory is not the full-batch one


def _replay_dev(algo: str, param: str, b: int, steps: int = 30, **kw) -> float:
    ds, init = _data(), _init(param)
    res = gd.run(ds, param=param, algo=algo, lr=0.05, steps=steps, init=init, kernel="torch", minibatch=b, **kw)
    first = {k: v[0] for k, v in init.items()}
    rep = hp.replay(
        ds, first["W"] if param == "W" else first, param=param, algo=algo, lr=0.05, steps=steps, minibatch=b, **kw
    )
    assert rep.taken == steps and rep.minibatch == b
    return max(_rel(getattr(res, k)[0], hp.to_numpy(v)) for k, v in rep.final.items())


@pytest.mark.parametrize("algo", ["gd", "signum", "adam"])
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_mini_batch_runs_agree_with_the_50_digit_replay(algo, param):
    for b in (1, 2):
        assert _replay_dev(algo, param, b) <= tol("replay_rtol"), (algo, param, b)


def test_the_replay_of_mini_batches_tells_batches_apart():
    """The replay with another batch size (a wrong B_k) is far from the float64 run: the comparison can fail."""
    ds, init = _data(), _init("W")
    res = gd.run(ds, param="W", algo="signum", lr=0.05, steps=30, init=init, minibatch=2)
    rep = hp.replay(ds, init["W"][0], param="W", algo="signum", lr=0.05, steps=30, minibatch=1)
    assert _rel(res.W[0], hp.to_numpy(rep.final["W"])) > 1e-6


def test_records_and_stops_are_on_the_full_data_set():
    ds, init = _data(), _init("W")
    r = gd.run(ds, param="W", algo="ngd", lr=0.05, steps=7, init=init, minibatch=1, record_every=7)
    at = gd.run(ds, param="W", algo="ngd", steps=0, init=r.W)  # the full loss at the final iterate
    assert np.array_equal(r.loss, at.loss) and np.array_equal(r.selection, at.selection)
    assert float(r.loss[0]) == pytest.approx(float(hp.loss(ds, r.W[0])), rel=1e-12)
    assert np.array_equal(r.trajectory["loss"][-1], r.loss)


def test_the_auto_kernel_routes_mini_batches_to_torch_and_fused_refuses_them():
    ds, init = _data(), _init("W")
    r = gd.run(ds, param="W", algo="ngd", lr=0.05, steps=3, init=init, minibatch=2)
    assert r.kernel == "torch"
    assert gd.run(ds, param="W", algo="ngd", lr=0.05, steps=3, init=init, minibatch=3).kernel == "fused"  # b = n
    with pytest.raises(InputError, match="minibatch n or none"):
        gd.run(ds, param="W", algo="ngd", lr=0.05, steps=3, init=init, minibatch=2, kernel="fused")


def test_far_past_underflow_a_row_outside_the_batch_does_not_set_the_scale():
    """At logits ~1e3 one row's gradient weight exceeds the others' by far more than float64's range: normalising
    by the largest weight over *all* rows would zero the batch's gradient. The mini-batch direction must still be
    the 50-digit one (here row 0's weights underflow at the full data's scale, and batch {0} comes first)."""
    ds = generate.paper_law(3, 4, 3, seed=3)
    W0 = _init("W", 1.0)["W"][0]
    f = ds.flat()
    W0 = W0 * (1e3 / np.abs(np.einsum("ntd,de,ne->nt", f.X, W0, f.Z)).max())  # logits ~ 1e3
    # the hazard is real: with the full data's scale, some row's weights underflow to exactly 0
    D = TorchData.of(ds, torch.device("cpu"), torch.float64)
    P = Problem(D, "W")
    fw = forward(P, {"W": torch.as_tensor(W0[None])})
    w, _ = token_weights_logdomain(fw[0], D.gamma, fw[1], "logistic", fw[3])
    dead = [i for i in range(3) if not bool(w[0, i].abs().amax() > 0)]
    assert dead, "the data do not exercise the scale: every row's weight is representable"
    steps = 6
    r = gd.run(ds, param="W", algo="ngd", lr=1.0, steps=steps, init=W0, minibatch=1, record_every=1, record_params=True)
    rep = hp.replay(ds, W0, param="W", algo="ngd", lr=1.0, steps=steps, minibatch=1, record_every=1)
    assert rep.taken == steps and int(r.steps[0]) == steps
    for k in range(1, steps + 1):  # each step's direction, W_k - W_0 (exact in float64 to ~1e-13 here)
        got = r.trajectory["W"][k, 0] - W0
        want = hp.to_numpy(rep.recorded[k]["W"]) - W0
        assert _rel(got, want) <= tol("replay_rtol"), k


def test_every_parameterisation_takes_mini_batches():
    ds = _data()
    for param in ("diag", "p", "vp"):
        init = _init(param)
        full = gd.run(ds, param=param, algo="ngd", lr=0.05, steps=8, init=init)
        same = gd.run(ds, param=param, algo="ngd", lr=0.05, steps=8, init=init, minibatch=3)
        one = gd.run(ds, param=param, algo="ngd", lr=0.05, steps=8, init=init, minibatch=1)
        first = {k: v[0] for k, v in init.items()}
        rep = hp.replay(ds, first, param=param, algo="ngd", lr=0.05, steps=8, minibatch=1)
        for k, v in rep.final.items():
            name = {"k": "K", "q": "Q"}.get(k, k)  # GDResult keeps the diagonal factors as K, Q
            assert np.array_equal(full.params(0)[name], same.params(0)[name])
            assert _rel(one.params(0)[name], hp.to_numpy(v)) <= tol("replay_rtol"), (param, k)


@pytest.mark.parametrize("bad", [0, -1, 4, 1.5, 2.0, True, "2"])
def test_bad_mini_batch_sizes_are_input_errors(bad):
    ds = _data()
    with pytest.raises(InputError, match="minibatch must be"):
        gd.run(ds, param="W", algo="ngd", steps=1, minibatch=bad)
    with pytest.raises(ValueError, match="minibatch must be"):
        hp.replay(ds, np.zeros((3, 3)), param="W", algo="ngd", steps=1, minibatch=bad)


def test_settings_of_checks_the_mini_batch_once():
    with pytest.raises(InputError, match="minibatch must be a positive integer"):
        gd.settings_of("adam", "W", minibatch=0)
    assert gd.settings_of("adam", "KQ", minibatch=np.int64(2)).minibatch == 2
    with pytest.raises(InputError, match="at most the number of samples n = 3"):
        gd.run(_data(), gd.settings_of("signum", "W", minibatch=5), steps=1)


def test_the_command_line_takes_and_records_the_mini_batch(tmp_path, capsys):
    path = str(_data().save(tmp_path / "d.npz"))
    rc = main(["gd", path, "--algo", "signum", "--minibatch", "2", "--steps", "5", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["settings"]["minibatch"] == 2 and out["kernel"] == "torch"
    rc = main(["gd", path, "--minibatch", "2", "--steps", "5"])
    assert rc == 0 and "minibatch=2" in capsys.readouterr().out
    for bad in ("0", "4"):
        rc = main(["gd", path, "--minibatch", bad, "--steps", "5"])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("error:") and "minibatch" in err


def _with_flat_inputs(flat: tuple[int, ...]):
    """``paper_law(2, 4, 3)`` with the inputs ``flat`` made of four equal tokens (their gradient is exactly 0)."""
    base = generate.paper_law(2, 4, 3, seed=1)
    X = np.array(base.X)
    alpha = np.array(base.flat().alpha)
    for i in flat:
        X[i] = X[i, :1]
        alpha[i] = 0
    return Dataset(X, base.Y, base.Z, base.v, alpha)


@pytest.mark.parametrize("algo", ["gd", "ngd", "signum", "adam"])
def test_a_batch_with_a_zero_gradient_is_not_a_fixed_point(algo):
    """Sample 0 has a zero gradient: with b = 1 every other update takes no step, and the run goes on (as the
    replay); only when every batch of the period is stationary does the run stop ``underflow``."""
    ds = _with_flat_inputs((0,))
    W0 = _init("W")["W"][0]
    r = gd.run(ds, param="W", algo=algo, lr=0.05, steps=6, init=W0, minibatch=1)
    rep = hp.replay(ds, W0, param="W", algo=algo, lr=0.05, steps=6, minibatch=1)
    assert r.stop_reason == ["steps"] and int(r.steps[0]) == 6 == rep.taken
    assert _rel(r.W[0], rep.array("W")) <= tol("replay_rtol")
    if algo == "adam":
        return
    dead = _with_flat_inputs((0, 1))
    r = gd.run(dead, param="W", algo=algo, lr=0.05, steps=6, init=W0, minibatch=1)
    rep = hp.replay(dead, W0, param="W", algo=algo, lr=0.05, steps=6, minibatch=1)
    assert r.stop_reason == ["underflow"] and int(r.steps[0]) == 1 == rep.taken  # period 2: the second zero update


def test_mini_batches_on_next_token_data_agree_with_the_50_digit_replay():
    ds = ntp(6, 4, 6, 8, seed=2, graph="cyclic")
    W0 = np.random.default_rng(0).normal(size=(8, 8)) * 0.1
    for algo in ("ngd", "signum"):
        r = gd.run(ds, param="W", algo=algo, lr=0.1, steps=12, init=W0, minibatch=4)
        rep = hp.replay(ds, W0, param="W", algo=algo, lr=0.1, steps=12, loss="nll", minibatch=4)
        assert r.kernel == "torch" and _rel(r.W[0], rep.array("W")) <= tol("replay_rtol"), algo


def test_sharded_mini_batch_runs_are_the_serial_ones(tmp_path, capsys):
    path = str(generate.paper_law(3, 4, 3, seed=2, B=4).save(tmp_path / "b.npz"))
    outs = []
    for workers in ("1", "2"):
        argv = ["gd", path, "--algo", "adam", "--minibatch", "2", "--steps", "20", "--json", "-n", workers]
        assert main(argv) == 0
        outs.append(json.loads(capsys.readouterr().out)["runs"])
    assert outs[0] == outs[1]
    assert main(["gd", path, "--algo", "adam", "--steps", "20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] != outs[0]  # b = 2 < n = 3 is not the full batch


def test_minibatch_is_refused_for_heads():
    """The multi-head rows are not batched: asking for both is bad input, not a silently full-batch run."""
    ds = generate.paper_law(3, 4, 4, seed=0)
    with pytest.raises(InputError, match="heads"):
        gd.run(ds, param="heads", heads=2, algo="gd", lr=0.1, steps=2, minibatch=1)
