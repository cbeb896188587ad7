"""Signum and Muon (``attsvm/gd/algos/signum.py``, ``muon.py``): each algorithm module against its independently
written 50-digit replay step (``attsvm.highprec.gd.signum_step`` / ``muon_step``) on W and (K,Q), the defining
properties of their steps read from the float64 trajectory, their limits at momentum 0 (``nsd`` in ``linf`` /
``spec``, bit for bit), and the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attsvm import gd, generate
from attsvm import highprec as hp
from attsvm.cli import main
from attsvm.errors import InputError

ALGOS = ("signum", "muon")


def _data():
    return generate.paper_law(3, 4, 3, seed=1)


def _init(param: str) -> dict[str, np.ndarray]:
    return gd.initial_params(param, "random", 1, 3, 3, seed=3, init_scale=0.3)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _replay_dev(algo: str, param: str, steps: int = 40, replay_momentum: float | None = None, **kw) -> float:
    """max over factors of |float64 final - 50-digit final| / |50-digit final|."""
    ds, init = _data(), _init(param)
    res = gd.run(ds, param=param, algo=algo, lr=0.05, steps=steps, init=init, kernel="torch", **kw)
    rkw = dict(kw)
    if replay_momentum is not None:
        rkw["momentum"] = replay_momentum
    first = {k: v[0] for k, v in init.items()}
    rep = hp.replay(ds, first["W"] if param == "W" else first, param=param, algo=algo, lr=0.05, steps=steps, **rkw)
    assert rep.taken == steps
    return max(_rel(getattr(res, k)[0], hp.to_numpy(v)) for k, v in rep.final.items())


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_the_engine_agrees_with_the_independent_50_digit_replay(algo, param):
    for momentum in (0.9, 0.5):
        assert _replay_dev(algo, param, momentum=momentum) <= 1e-12, (algo, param, momentum)


@pytest.mark.parametrize("algo", ALGOS)
def test_a_planted_wrong_momentum_in_the_replay_is_caught(algo):
    assert _replay_dev(algo, "W", momentum=0.9, replay_momentum=0.8) > 1e-6


def test_the_replay_records_the_discrete_decisions_and_the_float64_run_takes_them():
    ds, init = _data(), _init("W")
    for algo, decided in (("signum", "linf"), ("muon", "spec")):
        res = gd.run(ds, algo=algo, lr=0.05, steps=30, init=init, record_every=1, record_params=True)
        rep = hp.replay(ds, init["W"][0], algo=algo, lr=0.05, steps=30, record_every=1)
        assert rep.decided == decided and len(rep.decisions) == 30
        agree = rep.agreement(res.trajectory["W"][:, 0])
        assert agree.first_flip is None and agree.compared == 30 and agree.max_rel_dev <= 1e-12, (algo, agree)


def test_the_steps_are_what_the_algorithms_define():
    """Signum moves every entry by exactly +-lr or 0; Muon's step / lr is a partial isometry (singular values 1 or
    0) and its Frobenius norm is at most sqrt(d) lr (the declared step bound)."""
    ds, lr = _data(), 0.05
    for algo in ALGOS:
        res = gd.run(ds, algo=algo, lr=lr, steps=20, init=_init("W"), record_every=1, record_params=True)
        steps = np.diff(res.trajectory["W"][:, 0], axis=0) / -lr
        assert steps.shape == (20, 3, 3)
        if algo == "signum":
            assert np.all(np.isin(np.round(steps, 12), (-1.0, 0.0, 1.0)))
        else:
            sv = np.linalg.svd(steps, compute_uv=False)
            assert np.all((np.abs(sv - 1) < 1e-9) | (sv < 1e-9)), sv
            bound = gd.ALGORITHMS["muon"].step_bound((3, 3), gd.settings_of("muon", "W"), 20)
            assert np.all(np.linalg.norm(steps, axis=(-2, -1)) <= bound + 1e-12)


def test_at_momentum_zero_they_are_steepest_descent_in_linf_and_spec():
    """Signum bit for bit (the sign does not see the average's rescaling by e^(L-c)); Muon to rounding (its polar
    factor is taken of the rescaled average, whose last bits differ)."""
    ds = _data()
    for algo, norm in (("signum", "linf"), ("muon", "spec")):
        for param in ("W", "KQ"):
            a = gd.run(ds, param=param, algo=algo, momentum=0.0, lr=0.05, steps=25, init=_init(param))
            b = gd.run(ds, param=param, algo="nsd", norm=norm, lr=0.05, steps=25, init=_init(param))
            if algo == "signum":
                assert np.array_equal(a.W, b.W), (algo, param)
            assert _rel(a.W[0], b.W[0]) <= 1e-13, (algo, param)
            # with momentum the runs differ: the test above is not vacuous
            c = gd.run(ds, param=param, algo=algo, lr=0.05, steps=25, init=_init(param))
            assert not np.array_equal(c.W, b.W)


def test_settings_rules():
    with pytest.raises(InputError, match="momentum must be a number in"):
        gd.settings_of("muon", "W", momentum=1.0)
    with pytest.raises(InputError, match="momentum applies to algo 'muon' and 'signum' only"):
        gd.settings_of("ngd", "W", momentum=0.5)
    assert gd.settings_of("signum", "diag", momentum=0.0).momentum == 0.0


@pytest.mark.parametrize("algo", ALGOS)
def test_the_command_line_runs_them_on_W_and_KQ(algo, tmp_path, capsys):
    path = str(_data().save(tmp_path / "d.npz"))
    for param in ("W", "KQ"):
        rc = main(["gd", path, "--param", param, "--algo", algo, "--momentum", "0.8", "--steps", "30", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and out["algo"] == algo and out["settings"]["momentum"] == 0.8 and out["kernel"] == "torch"
        assert out["runs"][0]["steps"] == 30
    rc = main(["gd", path, "--algo", algo, "--momentum", "1.5", "--steps", "3"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: momentum must be a number in [0, 1)") and err.count("\n") == 1
    rc = main(["gd", path, "--algo", "ngd", "--momentum", "0.5", "--steps", "3"])
    assert rc == 2 and "momentum applies to algo" in capsys.readouterr().err


def test_a_settings_object_is_checked_by_the_same_rule_wherever_it_is_used():
    """``gd.run`` and ``highprec.replay`` take a ``Settings``; one built by hand, or for another parameterisation,
    goes through ``settings_of`` again (``spec.resolve_settings``)."""
    ds = _data()
    with pytest.raises(InputError, match="momentum must be a number in"):
        gd.run(ds, gd.Settings(algo="muon", momentum=1.5), steps=1)
    with pytest.raises(ValueError, match="momentum must be a number in"):
        hp.replay(ds, np.zeros((3, 3)), settings=gd.Settings(algo="signum", momentum=-0.1), steps=1)
    with pytest.raises(InputError, match="available for param 'W' and 'p' only"):
        gd.run(ds, gd.settings_of("md", "W", q=3.0), param="KQ", steps=1)
    with pytest.raises(InputError, match="either settings or algo"):
        gd.run(ds, gd.settings_of("signum", "W"), algo="signum", steps=1)
    S = gd.settings_of("signum", "W", momentum=0.7)
    a = gd.run(ds, S, lr=0.05, steps=10, init=_init("W"))
    rep = hp.replay(ds, _init("W")["W"][0], settings=S, lr=0.05, steps=10)
    assert _rel(a.W[0], hp.to_numpy(rep.final["W"])) <= 1e-12
