"""Every registry complete, by construction: each name the code dispatches on declares its independent check where
it is defined (:mod:`attsvm.registries`), and this one test walks every declared registry and runs each check on a
tiny case.

* the GD parameterisations: the declared 50-digit gradient against the engine's (one plain step, $\\eta=1$);
* the GD algorithms, per parameterisation the engine runs them on: the 50-digit replay against :func:`attsvm.gd.run`
  over a few steps (relative $10^{-12}$); a combination declared without a check must be refused by the replay;
* the nsd norms, step schedules, losses, ``ngd`` normalisations and kernels: the replay with that setting;
* the convex programs, per norm: the declared certificate runs inside ``solve(..., certify=True)`` (or on its own)
  and verifies; a program / norm declared without one reports float KKT residuals only; the undeclared pairs are
  refused; the equality SVM (the graph SVM of next-token data) likewise;
* the experiments: exactly the specs of ``numerics/`` and the figures of ``docs/gallery/``, each re-checked.

A registry declared without an exerciser here fails :func:`test_every_declared_registry_is_exercised`; a name
added without a declaration fails at import (:func:`attsvm.registries.declare`).
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import attsvm
from attsvm import generate
from attsvm import highprec as hp
from attsvm.registries import REGISTRIES, Check, checks_of, declare

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "docs" / "gallery"
NUMERICS = ROOT / "numerics"
#: relative agreement of a float64 run with its 50-digit replay over a few steps (measured: <= 3e-15; tighter than
#: the 1e-10 of the issue, so that a 1e-9 error planted in a gradient is caught over 3 steps)
AGREE = 1e-12


def _declaring_modules() -> list[str]:
    """Every module of the package whose source declares a registry (found by reading the sources, so a new
    declaration is walked without being listed here)."""
    pkg = Path(attsvm.__file__).resolve().parent
    out = []
    for path in sorted(pkg.rglob("*.py")):
        if path.name != "registries.py" and re.search(r"\bdeclare\(\s*\"", path.read_text(encoding="utf-8")):
            rel = path.relative_to(pkg.parent).with_suffix("")
            out.append(".".join(p for p in rel.parts if p != "__init__"))
    return out


for _m in _declaring_modules():
    importlib.import_module(_m)


# ---------------------------------------------------------------------------------------------- the declarations
def test_every_declared_registry_is_exercised():
    assert set(REGISTRIES) == set(EXERCISED), (
        f"registries without an exerciser here: {sorted(set(REGISTRIES) - set(EXERCISED))}; "
        f"exercisers of no registry: {sorted(set(EXERCISED) - set(REGISTRIES))}"
    )


@pytest.mark.parametrize("registry", sorted(REGISTRIES))
def test_every_entry_declares_a_check_that_exists(registry):
    for key, c in checks_of(registry):
        assert isinstance(c, Check), (registry, key)
        assert c.what.strip(), (registry, key)
        if c.exists:
            assert callable(c.resolve()), f"{registry} {key}: {c.by} is not callable"


def test_declare_refuses_an_entry_without_a_check():
    with pytest.raises(TypeError, match="'b' declares no independent check"):
        declare("planted", {"a": Check(None, "none: why"), "b": "attsvm.highprec:replay"})
    with pytest.raises(TypeError, match="'x' with 'y' declares no independent check"):
        declare("planted", {"x": {"y": None}})
    with pytest.raises(TypeError, match="needs a sentence"):
        Check("attsvm.highprec:replay", " ")
    assert "planted" not in REGISTRIES


def _cli_choices(command: str) -> dict[str, tuple]:
    import argparse

    from attsvm.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: tuple(a.choices) for a in sub.choices[command]._actions if a.choices}


def test_copies_of_the_registries_agree():
    """The replay's own names (written independently) and the CLI's (no heavy imports at parse time) are the
    declared ones."""
    from attsvm.cli import solve as cli_solve
    from attsvm.gd import algos, options
    from attsvm.gd.engine import KERNELS
    from attsvm.gd.init import PARAMS
    from attsvm.highprec import gd as hgd
    from attsvm.svm import NORMS, PROGRAM_CHECKS, PROGRAMS
    from attsvm.svm.eqsvm import NORMS as EQ_NORMS

    assert hgd.PARAMS == PARAMS and set(hgd.ALGOS) == set(algos.ALGOS)
    assert (hgd.NORMS, hgd.SCHEDULES, hgd.NORMALIZE) == (options.NORMS, options.SCHEDULES, options.NORMALIZE)
    assert cli_solve.PROGRAMS == (*PROGRAMS, "ntp") and cli_solve.NORMS == NORMS
    assert set(NORMS) == {n for norms in PROGRAM_CHECKS.values() for n in norms}
    assert EQ_NORMS == ("fro", "nuc")
    gd_cli = _cli_choices("gd")
    declared = {
        "param": PARAMS,
        "algo": algos.ALGOS,
        "norm": options.NORMS,
        "schedule": options.SCHEDULES,
        "normalize": options.NORMALIZE,
        "loss": options.LOSSES,
        "kernel": KERNELS,
    }
    assert {k: gd_cli[k] for k in declared} == declared
    assert _cli_choices("solve") == {"norm": NORMS, "program": (*PROGRAMS, "ntp")}


# ---------------------------------------------------------------------------------------------- GD
def _factors(param: str, d: int, seed: int = 3) -> dict[str, np.ndarray]:
    from attsvm.gd.init import initial_params

    return {k: v[0] for k, v in initial_params(param, "random", 1, d, d, seed=seed, init_scale=0.3).items()}


def _init(param: str, th: dict[str, np.ndarray]):
    return th[param] if param in ("W", "p") else th


#: where the engine's result holds each factor
_FIELD = {"W": "W", "K": "K", "Q": "Q", "p": "p", "v": "v", "k": "K", "q": "Q", "W1": "W1", "W2": "W2"}


def _engine_vs_replay(ds, param: str, steps: int = 3, lr: float = 0.1, seed: int = 3, **kw) -> float:
    """Largest relative deviation, over the factors, of the float64 engine's final iterate from the replay's."""
    from attsvm import gd

    th = _factors(param, ds.d, seed)
    kernel = kw.pop("kernel", "auto")
    res = gd.run(ds, param=param, lr=lr, steps=steps, init=_init(param, th), kernel=kernel, **kw)
    rep = hp.replay(ds, _init(param, th), param=param, lr=lr, steps=steps, **kw)
    assert rep.taken == steps == int(res.steps[0]), (rep.taken, res.steps)
    devs = []
    for name, val in rep.final.items():
        want = hp.to_numpy(val)
        got = getattr(res, _FIELD[name])[0]
        devs.append(float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    return max(devs)


@pytest.fixture(scope="module")
def small():
    return generate.paper_law(2, 3, 3, seed=1)


def exercise_params(small):
    from attsvm import gd
    from attsvm.gd.init import PARAM_CHECKS

    for param, c in PARAM_CHECKS.items():
        th = _factors(param, small.d)
        res = gd.run(small, param=param, algo="gd", lr=1.0, steps=1, init=_init(param, th))
        grads = c.resolve()(small, *th.values())  # the factors in the engine's order, their gradients likewise
        grads = grads if isinstance(grads, tuple) else (grads,)
        assert len(grads) == len(th), (param, c.by)
        for (name, x0), g in zip(th.items(), grads):
            g_engine = x0 - getattr(res, _FIELD[name])[0]  # theta_1 = theta_0 - grad
            g_hp = hp.to_numpy(g)
            scale = np.linalg.norm(g_hp) + np.linalg.norm(x0)
            assert np.linalg.norm(g_engine - g_hp) <= 1e-13 * scale, (param, name, c.by)


#: the settings an algorithm needs to run (a new algorithm that needs some is added here, or its test fails)
ALGO_SETTINGS = {"md": {"q": 3.0}, "nmd": {"q": 3.0}, "nsd": {"norm": "linf"}}


def exercise_algos(small):
    from attsvm import gd
    from attsvm.errors import InputError
    from attsvm.gd.algos import ALGO_CHECKS
    from attsvm.gd.init import PARAMS
    from attsvm.highprec import gd as hgd

    for algo, per_param in ALGO_CHECKS.items():
        kw = ALGO_SETTINGS.get(algo, {})
        for param in PARAMS:
            c = per_param.get(param)
            if c is None:  # not declared: the engine does not run it
                with pytest.raises(InputError):
                    gd.run(small, param=param, algo=algo, steps=1, init=_init(param, _factors(param, 3)), **kw)
            elif c.exists:
                assert c.resolve() is hgd.STEPS[algo], (algo, param, c.by)  # its own 50-digit step, replayed
                try:
                    dev = _engine_vs_replay(small, param, algo=algo, **kw)
                except ValueError as exc:
                    pytest.fail(f"algo {algo!r} on {param!r} declares {c.by}, which refuses it: {exc}")
                assert dev <= AGREE, f"algo {algo!r} on {param!r}: engine vs replay {dev:.3g}"
            else:  # declared without a replay: the replay must not pretend to run it
                with pytest.raises(ValueError):
                    hp.replay(small, _init(param, _factors(param, 3)), param=param, algo=algo, steps=1, **kw)


def exercise_norms(small):
    from attsvm.gd.options import NORMS

    for norm in NORMS:
        kw = {"q": 3.0} if norm == "lq" else {}
        for param in ("W", "KQ"):
            dev = _engine_vs_replay(small, param, algo="nsd", norm=norm, **kw)
            assert dev <= AGREE, f"nsd norm {norm!r} on {param!r}: {dev:.3g}"


def exercise_schedules(small):
    from attsvm.gd.options import SCHEDULES

    for schedule in SCHEDULES:
        dev = _engine_vs_replay(small, "W", algo="ngd", schedule=schedule)
        assert dev <= AGREE, f"schedule {schedule!r}: {dev:.3g}"


def exercise_losses(small):
    from attsvm.gd.options import LOSSES, NTP_LOSS
    from attsvm.ntp.generate import ntp

    for loss in LOSSES:
        ds = ntp(3, 3, 4, 3, seed=2) if loss == NTP_LOSS else small
        dev = _engine_vs_replay(ds, "W", algo="ngd", loss=loss)
        assert dev <= AGREE, f"loss {loss!r}: {dev:.3g}"


def exercise_normalize(small):
    from attsvm.gd.options import NORMALIZE

    for normalize in NORMALIZE:
        for param in ("KQ", "diag"):
            dev = _engine_vs_replay(small, param, algo="ngd", normalize=normalize)
            assert dev <= AGREE, f"normalize {normalize!r} on {param!r}: {dev:.3g}"


def exercise_kernels(small):
    from attsvm.gd.engine import KERNELS

    for kernel in KERNELS:
        for param in ("W", "KQ"):
            dev = _engine_vs_replay(small, param, algo="ngd", kernel=kernel)
            assert dev <= AGREE, f"kernel {kernel!r} on {param!r}: {dev:.3g}"


# ---------------------------------------------------------------------------------------------- programs
def _spy(monkeypatch, fn) -> list:
    """Count the calls of ``fn`` wherever the package holds it (its module and every module that imported it)."""
    calls: list = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    for name, mod in list(sys.modules.items()):
        if name == "attsvm" or name.startswith("attsvm."):
            for attr, val in list(vars(mod).items()):
                if val is fn:
                    monkeypatch.setattr(mod, attr, wrapped)
    return calls


def _program_data(program: str):
    if program == "seq":
        return generate.sequence(2, 3, 3, 2, seed=1)
    if program == "causal":
        return generate.causal(2, 3, 3, seed=1)
    return generate.paper_law(2, 3, 3, seed=1)


def exercise_programs(monkeypatch):
    from attsvm import svm
    from attsvm.errors import InputError

    for program, per_norm in svm.PROGRAM_CHECKS.items():
        ds = _program_data(program)
        for norm in svm.NORMS:
            kw = {"q": 3.0} if norm == "lq" else {}
            c = per_norm.get(norm)
            if c is None:  # not declared: solve refuses it
                with pytest.raises(InputError):
                    svm.solve(ds, norm=norm, program=program, **kw)
                continue
            with monkeypatch.context() as mp:
                calls = _spy(mp, c.resolve()) if c.exists else []
                sol = svm.solve(ds, norm=norm, program=program, certify=True, **kw)
            assert sol.status == "optimal", (program, norm)
            if not c.exists:  # nothing independent: the solver must not claim more than float KKT residuals
                assert sol.certificate["kind"] == "kkt-float", (program, norm, sol.certificate)
            elif calls:  # the declared certificate ran inside solve(certify=True), and it is more than float KKT
                assert sol.certificate["verified"], (program, norm, c.by, sol.certificate)
                assert sol.certificate["kind"] != "kkt-float", f"{program} {norm}: {c.by} gives float KKT residuals"
            else:  # a certificate computed on its own: it verifies, and its exact values are the solver's
                cert = c.resolve()(ds)
                assert cert["verified"], (program, norm, c.by)
                shared = set(cert) & set(sol.extra or {})
                assert shared, (program, norm, c.by)
                for key in shared:
                    exact = np.vectorize(lambda x: float(Fraction(x)))(np.array(cert[key], dtype=object))
                    assert np.allclose(exact, sol.extra[key], rtol=1e-8, atol=1e-12), (program, norm, key)


def exercise_eqsvm(monkeypatch):
    from attsvm.ntp.generate import ntp
    from attsvm.ntp.svm import solve_graph_svm
    from attsvm.svm.eqsvm import NORMS

    data = ntp(3, 3, 4, 3, seed=2, graph="cyclic")
    for norm in NORMS:
        c = REGISTRIES["svm.eqsvm.NORMS"][norm]
        with monkeypatch.context() as mp:
            calls = _spy(mp, c.resolve())
            sol = solve_graph_svm(data, norm, certify=True)
        assert sol.status == "optimal" and calls and sol.certificate["verified"], (norm, c.by, sol.certificate)


# ---------------------------------------------------------------------------------------------- experiments
def exercise_experiments():
    from attsvm.experiments import NAMES, discover

    specs = set(discover(NUMERICS))
    assert set(NAMES) == specs, (
        f"numerics/ specs not in experiments.NAMES: {sorted(specs - set(NAMES))}; "
        f"NAMES without a spec: {sorted(set(NAMES) - specs)}"
    )
    figures = {p.name.split(".")[0] for p in GALLERY.iterdir() if p.is_file()}
    assert figures == set(NAMES), f"gallery figures of no experiment / experiments without one: {figures ^ set(NAMES)}"
    for name in NAMES:
        for ext in ("json", "manifest.json", "caption.md", "png", "pdf"):
            assert (GALLERY / f"{name}.{ext}").is_file(), f"docs/gallery/{name}.{ext} missing"
        c = REGISTRIES["experiments.NAMES"][name]
        res = json.loads((GALLERY / f"{name}.json").read_text())
        assert c.resolve()(name, res, NUMERICS) == [], name


#: how each declared registry's checks are run (registry name -> exerciser)
EXERCISED = {
    "gd.PARAMS": exercise_params,
    "gd.ALGOS": exercise_algos,
    "gd.NORMS": exercise_norms,
    "gd.SCHEDULES": exercise_schedules,
    "gd.LOSSES": exercise_losses,
    "gd.NORMALIZE": exercise_normalize,
    "gd.KERNELS": exercise_kernels,
    "svm.PROGRAMS": exercise_programs,
    "svm.eqsvm.NORMS": exercise_eqsvm,
    "experiments.NAMES": exercise_experiments,
}


@pytest.mark.parametrize("registry", sorted(EXERCISED))
def test_declared_checks_run_on_a_tiny_case(registry, request, monkeypatch):
    fn = EXERCISED[registry]
    args = {"small": lambda: request.getfixturevalue("small"), "monkeypatch": lambda: monkeypatch}
    fn(*(args[p]() for p in fn.__code__.co_varnames[: fn.__code__.co_argcount]))
