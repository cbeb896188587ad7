"""Experiment options (``OPTIONS`` of a spec, ``ctx.options``, ``attsvm reproduce --set KEY=VALUE``).

A spec declares ``OPTIONS = {"name": (default, choices)}`` or :class:`attsvm.experiments.Option`; ``run`` sees
``ctx.options`` (defaults filled in, values converted to the default's type); the values are recorded in
``NAME.json`` (``settings.options``), the manifest and the caption. An unknown key or a value the spec does not
allow is ``error: ...``, exit 2, before any experiment runs (also for ``all``).
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm.cli import main
from attsvm.cli.options import parse_assignments
from attsvm.errors import InputError
from attsvm.experiments import Option, reproduce, resolve_options, select_options, spec_options

# Each spec records what run() saw (the options and their types) in its result and appends its name to the file
# RAN next to it, so that a test can tell whether anything ran.
SPEC = textwrap.dedent(
    '''
    """A spec with options."""
    from pathlib import Path

    from attsvm.experiments import Option

    TITLE = "{name}"
    OPTIONS = {options}
    SIZES = {{"full": {{"seeds": 2}}, "smoke": {{"seeds": 1}}}}


    def run(ctx):
        with open(Path(__file__).with_name("RAN"), "a") as f:
            f.write("{name}\\n")
        return {{"settings": {{"seeds": ctx.seeds}}, "seen": dict(ctx.options),
                 "types": {{k: type(v).__name__ for k, v in ctx.options.items()}}}}


    def plot(res):
        from attsvm.figures import new_figure

        fig, ax = new_figure()
        ax[0, 0].plot([0, 1], [0, 1])
        return fig


    def check(res):
        return []
    '''
)

OPTS_A = (
    '{"ridge": (2.2e-16, None), "init": ("random", ("random", "zero")), "steps": Option(10, minimum=1), '
    '"verbose": (False, None)}'
)
OPTS_B = '{"reference": ("none", ("none", "scs"))}'


@pytest.fixture
def specs(tmp_path):
    d = tmp_path / "numerics"
    d.mkdir()
    (d / "alpha.py").write_text(SPEC.format(name="alpha", options=OPTS_A))
    (d / "beta.py").write_text(SPEC.format(name="beta", options=OPTS_B))
    (d / "plain.py").write_text(SPEC.format(name="plain", options="{}").replace("OPTIONS = {}\n", ""))
    return d


def cli(specs: Path, out: Path, *args: str) -> int:
    return main(["reproduce", *args, "--numerics", str(specs), "--out", str(out), "--quiet", "--format", "png"])


def ran(specs: Path) -> list[str]:
    f = specs / "RAN"
    return f.read_text().split() if f.exists() else []


# ------------------------------------------------------------------------------------------- conversion
def test_values_take_the_type_of_the_default(specs, tmp_path):
    out = tmp_path / "o"
    args = ["alpha", "--set", "ridge=0", "--set", "init=zero", "--set", "steps=7", "--set", "verbose=true"]
    assert cli(specs, out, *args) == 0
    res = json.loads((out / "alpha.json").read_text())
    assert res["seen"] == {"ridge": 0.0, "init": "zero", "steps": 7, "verbose": True}
    assert res["types"] == {"ridge": "float", "init": "str", "steps": "int", "verbose": "bool"}
    # recorded: in the JSON settings, in the manifest, in the caption's run line
    assert res["settings"]["options"] == res["seen"]
    man = json.loads((out / "alpha.manifest.json").read_text())
    assert man["options"] == {"ridge": 0.0, "init": "zero", "steps": 7, "verbose": True}
    caption = (out / "alpha.caption.md").read_text()
    assert "options: ridge = 0.0, init = zero, steps = 7, verbose = true" in caption


def test_defaults_are_filled_in_and_recorded(specs, tmp_path):
    out = tmp_path / "o"
    assert cli(specs, out, "alpha", "--set", "steps=3") == 0
    res = json.loads((out / "alpha.json").read_text())
    assert res["seen"] == {"ridge": 2.2e-16, "init": "random", "steps": 3, "verbose": False}
    assert json.loads((out / "alpha.manifest.json").read_text())["options"] == res["seen"]


def test_spec_without_options_records_none(specs, tmp_path):
    rep = reproduce("plain", tmp_path / "o", smoke=True, folder=specs, progress=False, formats="png")
    assert rep.result["seen"] == {} and "options" not in rep.result["settings"]
    assert json.loads(Path(rep.files["manifest"]).read_text())["options"] == {}
    assert "options:" not in Path(rep.files["caption"]).read_text()


@given(x=st.floats(allow_nan=False, allow_infinity=False))
def test_float_text_round_trips(x):
    opt = Option(2.2e-16)
    assert opt.convert(repr(x)) == x and type(opt.convert(repr(x))) is float
    assert opt.convert(x) == x


@given(k=st.integers(min_value=-(10**30), max_value=10**30))
def test_int_text_round_trips(k):
    assert Option(10).convert(str(k)) == k and type(Option(10).convert(str(k))) is int


@pytest.mark.parametrize(
    "opt, text",
    [
        (Option(2.2e-16), "abc"),
        (Option(2.2e-16), "nan"),
        (Option(2.2e-16), "inf"),
        (Option(2.2e-16), ""),
        (Option(10), "1.5"),
        (Option(10), "1e3"),
        (Option(10, minimum=1), "0"),
        (Option(0.5, maximum=1.0), "1.01"),
        (Option(False), "maybe"),
        (Option("none", ("none", "scs")), "SCS"),
        (Option("none", ("none", "scs")), "clarabel"),
    ],
)
def test_values_not_allowed_are_refused(opt, text):
    with pytest.raises(ValueError):
        opt.convert(text)


def test_python_values_are_checked_too():
    assert Option(2.2e-16).convert(0) == 0.0 and type(Option(2.2e-16).convert(0)) is float
    for opt, bad in [(Option(10), 1.0), (Option(10), True), (Option(2.2e-16), True), (Option("a"), 3)]:
        with pytest.raises(ValueError):
            opt.convert(bad)


def test_parse_assignments():
    assert parse_assignments(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    for bad in (["a"], ["=1"], ["a=1", "a=2"]):
        with pytest.raises(InputError):
            parse_assignments(bad)


def test_malformed_declarations_are_bad_input(tmp_path):
    import types

    for opts in (
        {"x": ("b", ("a", "c"))},  # default not allowed
        {"x": (float("nan"), None)},
        {"x": ([1], None)},  # not a str/int/float/bool default
        {"1x": (1, None)},
        {"x": 3},
        ["x"],
    ):
        mod = types.ModuleType("m")
        mod.OPTIONS = opts
        with pytest.raises(InputError):
            spec_options(mod)


def test_library_api(specs):
    from attsvm.experiments import load_spec

    alpha, beta = load_spec("alpha", specs), load_spec("beta", specs)
    assert resolve_options(beta, "beta") == {"reference": "none"}
    assert resolve_options(beta, "beta", {"reference": "scs"}) == {"reference": "scs"}
    with pytest.raises(InputError, match="has no option 'ridge'"):
        resolve_options(beta, "beta", {"ridge": "0"})
    per = select_options({"alpha": alpha, "beta": beta}, {"reference": "scs", "ridge": "1e-3"})
    assert per["beta"] == {"reference": "scs"} and per["alpha"]["ridge"] == 1e-3
    with pytest.raises(InputError, match="no selected experiment has an option 'nope'"):
        select_options({"alpha": alpha, "beta": beta}, {"nope": "1"})


# ------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "args, needle",
    [
        (["alpha", "--set", "nope=1"], "has no option 'nope'"),
        (["alpha", "--set", "ridge=abc"], "ridge=abc"),
        (["alpha", "--set", "steps=1.5"], "an integer"),
        (["alpha", "--set", "steps=0"], ">= 1"),
        (["alpha", "--set", "init=ones"], "one of random, zero"),
        (["alpha", "--set", "ridge"], "KEY=VALUE"),
        (["alpha", "--set", "ridge=0", "--set", "ridge=1"], "given twice"),
        (["plain", "--set", "ridge=0"], "its options: none"),
        (["plain", "--reference", "scs"], "has no option 'reference'"),
        (["beta", "--reference", "clarabel"], "one of none, scs"),
        (["beta", "--reference", "scs", "--set", "reference=none"], "contradicts"),
        (["all", "--set", "nope=1"], "no selected experiment has an option 'nope'"),
        (["all", "--set", "init=ones"], "one of random, zero"),
        (["all", "--reference", "clarabel"], "one of none, scs"),  # beta's value: alpha, first, must not run
    ],
)
def test_bad_options_exit_2_before_anything_runs(specs, tmp_path, capsys, args, needle):
    out = tmp_path / "o"
    assert cli(specs, out, *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err
    assert ran(specs) == [] and not out.exists()


# ------------------------------------------------------------------------------------------- all, sugar
def test_all_gives_each_option_to_the_experiments_declaring_it(specs, tmp_path):
    out = tmp_path / "o"
    assert cli(specs, out, "all", "--reference", "scs", "--set", "ridge=0") == 0
    assert sorted(ran(specs)) == ["alpha", "beta", "plain"]
    seen = {n: json.loads((out / f"{n}.json").read_text())["seen"] for n in ("alpha", "beta", "plain")}
    assert seen["beta"] == {"reference": "scs"}
    assert seen["alpha"]["ridge"] == 0.0 and "reference" not in seen["alpha"]
    assert seen["plain"] == {}
    for n, opts in seen.items():
        assert json.loads((out / f"{n}.manifest.json").read_text())["options"] == opts


def test_reference_is_short_for_set_reference(specs, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli(specs, a, "beta", "--reference", "scs") == 0
    assert cli(specs, b, "beta", "--set", "reference=scs") == 0
    assert cli(specs, tmp_path / "c", "beta", "--reference", "scs", "--set", "reference=scs") == 0
    ja, jb = (json.loads((p / "beta.json").read_text()) for p in (a, b))
    assert ja["seen"] == jb["seen"] == {"reference": "scs"}


def test_help_documents_the_options(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = capsys.readouterr().out
    assert "--set KEY=VALUE" in text and "--reference" in text and "--set reference=scs" in text


def test_option_values_are_finite_json(specs, tmp_path):
    rep = reproduce("alpha", tmp_path / "o", folder=specs, progress=False, formats="png", options={"ridge": 1e300})
    assert math.isfinite(rep.result["seen"]["ridge"])
    with pytest.raises(InputError):
        reproduce("alpha", tmp_path / "p", folder=specs, progress=False, formats="png", options={"ridge": "inf"})
    assert not (tmp_path / "p").exists()


# ------------------------------------------------------------------------------------------- spec functions
@pytest.mark.parametrize("workers, method", [(1, None), (2, "fork"), (2, "spawn")])
def test_call_each_runs_a_function_of_a_spec_file(tmp_path, monkeypatch, workers, method):
    """``call_each(ctx, f"{__file__}:fn", ...)``: a spec's own function, in this process or in worker processes
    (forked: the module this process imported, even after the file changed; spawned: loaded by path)."""
    import multiprocessing

    from attsvm.experiments import Context, call_each
    from attsvm.userfile import load_module

    path = tmp_path / "helper.py"
    path.write_text("def times(x):\n    return {'status': 'optimal', 'y': 2 * x}\n")
    mod = load_module(path, "experiment spec")
    if method is not None:
        monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: [method])
    if method != "spawn":  # a spawned worker reads the file; the others use the module imported here
        path.write_text("def times(x):\n    return {'status': 'optimal', 'y': 3 * x}\n")
    ctx = Context(name="t", size={"seeds": 1}, smoke=True, workers=workers)
    out = call_each(ctx, f"{mod.__file__}:times", [((k,), {}) for k in range(9)], "times")
    assert [r["y"] for r in out] == [2 * k for k in range(9)]
