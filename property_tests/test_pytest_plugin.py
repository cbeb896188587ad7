"""The pytest plugin (issue 10, part 6): ``pytest --attsvm PATH`` checks claims as pytest items.

Every run is a subprocess in a temporary folder with absolute paths, at ``--attsvm-budget ci``. Most runs are
*hermetic* (``-c`` an empty ``pytest.ini`` in the temporary folder: no project addopts, conftests or Hypothesis
profile leak in); the first two run as the issue states them, under the project's own configuration."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attsvm import pytest_plugin
from attsvm.claims import Outcome, claim

ROOT = Path(__file__).resolve().parents[1]
SVM_RANK = ROOT / "proofs" / "claims" / "svm_rank.py"
REFUTED = ROOT / "examples" / "conjectures" / "refuted_conjecture.py"
SURVIVING = ROOT / "examples" / "conjectures" / "surviving_conjecture.py"
FALSE_SOFTMAX = Path(__file__).parent / "fixtures" / "plugin" / "false_softmax.py"
BAD = Path(__file__).parent / "fixtures" / "bad_claims"
FIX = Path(__file__).parent / "fixtures"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_", "ATTSVM_"))}
    env.pop("CI", None)
    env.update(PYTHONWARNINGS="ignore", **extra)
    return env


def _pytest(*args, cwd: Path, hermetic: bool = True, env: dict[str, str] | None = None):
    cmd = [sys.executable, "-m", "pytest", *map(str, args), "-p", "no:cacheprovider"]
    if hermetic:
        ini = cwd / "pytest.ini"
        if not ini.exists():
            ini.write_text("[pytest]\n")
        cmd += ["-c", str(ini)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env or _env())


def _out(p) -> str:
    return p.stdout + p.stderr


# ---------------------------------------------------------------------- verdicts
def test_a_true_claim_is_one_passing_item(tmp_path):
    p = _pytest("--attsvm", SVM_RANK, "-q", "--attsvm-budget", "ci", cwd=tmp_path, hermetic=False)
    assert p.returncode == 0, _out(p)
    assert re.search(r"^1 passed\b", p.stdout, re.M), p.stdout


def test_an_expected_false_claim_passes_when_it_is_refuted(tmp_path):
    p = _pytest("--attsvm", REFUTED, "-q", "--attsvm-budget", "ci", "-rP", cwd=tmp_path, hermetic=False)
    assert p.returncode == 0, _out(p)
    assert re.search(r"^1 passed\b", p.stdout, re.M)
    assert "first-step-raises-opt: refuted" in p.stdout  # the verdict, shown by -rP
    assert not (tmp_path / "attsvm-counterexamples").exists()  # never the working folder


def test_a_false_claim_declared_true_fails_with_its_counterexample_and_replay(tmp_path):
    bt = tmp_path / "bt"
    p = _pytest("--attsvm", FALSE_SOFTMAX, "--attsvm-budget", "ci", "--basetemp", bt, cwd=tmp_path)
    out = _out(p)
    assert p.returncode == 1 and re.search(r"\b1 failed\b", p.stdout.splitlines()[-1]), out
    assert "claim softmax-at-most-half (derived, universal; expected true): expected verified, got refuted" in out
    assert re.search(r"counterexample: n=1, T=2, d=2\b", out)  # shrunk to the smallest sizes
    assert re.search(r"float64 margin: -0\.\d+", out) and re.search(r"high-precision margin: -0\.\d+ confirmed", out)
    assert "confirmed: yes, by high precision" in out
    npz = Path(re.search(r"saved: (\S+\.npz)", out).group(1))
    assert npz.exists() and npz.with_suffix(".json").exists() and bt in npz.parents  # under pytest's basetemp
    replay = re.search(r"replay: (attsvm check .*)", out).group(1)
    assert replay == f"attsvm check {FALSE_SOFTMAX} --replay {npz} --only softmax-at-most-half"
    assert json.loads(npz.with_suffix(".json").read_text())["confirmed"] is True
    # the replay command re-confirms the saved case: reproduced, exit 0 (a replay says whether the case still fails)
    r = subprocess.run(
        [sys.executable, "-m", "attsvm", *replay.split()[1:]], capture_output=True, text=True, cwd=tmp_path, env=_env()
    )
    assert r.returncode == 0 and "reproduced — the saved case still fails; confirmed" in r.stdout, r.stdout + r.stderr


def test_attsvm_out_chooses_the_counterexample_folder(tmp_path):
    p = _pytest("--attsvm", FALSE_SOFTMAX, "--attsvm-budget", "ci", "--attsvm-out", "cx", "-q", cwd=tmp_path)
    assert p.returncode == 1
    assert (tmp_path / "cx" / "softmax-at-most-half-seed0.npz").exists(), _out(p)


def test_inconclusive_fails_unless_allowed(tmp_path):
    f = BAD / "all_inconclusive.py"
    p = _pytest("--attsvm", f, "--attsvm-budget", "ci", "-q", cwd=tmp_path)
    assert p.returncode == 1 and "expected verified, got inconclusive" in p.stdout, _out(p)
    p = _pytest("--attsvm", f, "--attsvm-budget", "ci", "--attsvm-allow-inconclusive", "-q", cwd=tmp_path)
    assert p.returncode == 0, _out(p)
    # an unconfirmed failure fails even then (as attsvm check --allow-inconclusive)
    p = _pytest(
        "--attsvm", BAD / "no_confirmer.py", "--attsvm-budget", "ci", "--attsvm-allow-inconclusive", cwd=tmp_path
    )
    assert p.returncode == 1 and "a float64 failure was not cleared at high precision" in p.stdout, _out(p)


# ---------------------------------------------------------------------- bad input
def test_bad_input_is_a_one_line_collection_error(tmp_path):
    p = _pytest(
        "--attsvm",
        FIX / "empty",
        "--attsvm",
        FIX / "broken",
        "--attsvm",
        BAD / "misspelt_key.py",
        "--attsvm-budget",
        "ci",
        cwd=tmp_path,
    )
    out = _out(p)
    assert p.returncode == 2 and "3 errors during collection" in out, out
    assert f"attsvm: {FIX / 'empty'}: no claims found" in out
    assert re.search(r"attsvm: \S+broken_claim\.py: claim file failed to import \(RuntimeError: .+\)", out)
    assert re.search(r"attsvm: claim bad-misspelt \(\S+\): strategy paper: unknown hypothesis 'nn'", out)
    assert "Traceback" not in out and "raise " not in out


def test_a_bad_budget_is_a_usage_error(tmp_path):
    p = _pytest("--attsvm", SVM_RANK, "--attsvm-budget", "lots", cwd=tmp_path)
    assert p.returncode == 4 and "--attsvm-budget: budget must be one of" in p.stderr, _out(p)


# ---------------------------------------------------------------------- collection
def _project(tmp_path: Path) -> Path:
    """A project whose testpaths hold one ordinary test."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    return tmp_path


def test_only_the_claim_paths_are_collected_without_positional_paths(tmp_path):
    _project(tmp_path)
    p = _pytest("--attsvm", SVM_RANK, "--co", "-q", cwd=tmp_path)
    assert p.returncode == 0, _out(p)
    ids = [line for line in p.stdout.splitlines() if "::" in line]
    assert ids == ["::svm-rank"], p.stdout  # a file outside the rootdir: pytest's node id has no path part
    both = _pytest("tests", "--attsvm", SVM_RANK, "--co", "-q", cwd=tmp_path)
    ids = sorted(line for line in both.stdout.splitlines() if "::" in line)
    assert ids == ["::svm-rank", "tests/test_plain.py::test_plain"], both.stdout


def test_the_plugin_is_inactive_without_attsvm(tmp_path):
    _project(tmp_path)
    p = _pytest(cwd=tmp_path)
    assert p.returncode == 0 and re.search(r"^=+ 1 passed\b", p.stdout.splitlines()[-1]), _out(p)
    assert "plugins:" in p.stdout and "attsvm-" in p.stdout  # installed (entry point pytest11) ...
    assert "attsvm: budget" not in p.stdout  # ... but silent


def test_pytest_k_selects_claims_by_id_origin_and_kind(tmp_path):
    two = ("--attsvm", REFUTED, "--attsvm", SURVIVING)  # --attsvm is repeatable

    def ids(*k):
        p = _pytest(*two, *k, "--co", "-q", cwd=tmp_path)
        assert p.returncode == 0, _out(p)
        return [x.split("::")[1] for x in p.stdout.splitlines() if "::" in x]

    assert ids() == ["first-step-raises-opt", "descent-lemma-LW"]
    assert ids("-k", "descent") == ["descent-lemma-LW"]  # id
    assert ids("-k", "expected-false and universal") == ["first-step-raises-opt"]  # origin, kind
    assert ids("-k", "not derived") == ["first-step-raises-opt"]


def test_budget_defaults_to_ci_under_ci(tmp_path):
    p = _pytest("--attsvm", SVM_RANK, "--co", cwd=tmp_path, env=_env(CI="true"))
    assert "attsvm: budget ci (0.2), seed 0" in p.stdout, _out(p)
    p = _pytest("--attsvm", SVM_RANK, "--co", "--attsvm-seed", "3", cwd=tmp_path)
    assert "attsvm: budget default (1), seed 3" in p.stdout, _out(p)


# ---------------------------------------------------------------------- Hypothesis settings
def test_a_loaded_hypothesis_profile_sets_the_example_count(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from hypothesis import settings\n"
        "settings.register_profile('seven', max_examples=7)\n"
        "settings.load_profile('seven')\n"
    )
    p = _pytest("--attsvm", SVM_RANK, "--attsvm-budget", "ci", "-rP", cwd=tmp_path)
    assert p.returncode == 0, _out(p)
    assert "Hypothesis profile 'seven': max_examples=7" in p.stdout
    assert "svm-rank: verified (7 examples" in p.stdout


@pytest.fixture
def profile():
    """Load a temporary Hypothesis profile; restore the previous one afterwards."""
    from hypothesis import settings

    before = settings.get_current_profile_name()

    def load(**kw):
        settings.register_profile("attsvm-plugin-test", **kw)
        settings.load_profile("attsvm-plugin-test")

    yield load
    settings.load_profile(before)


def _universal(**kw):
    return claim(id="u", title="t", origin="derived", hypotheses={"data": "paper"}, **kw)(
        lambda case: Outcome(ok=True, margin=1.0)
    )


def test_what_is_honoured_of_the_hypothesis_profile(profile):
    u, u_ci = _universal(examples=40), _universal(ci_examples=9)
    emp = claim(id="e", title="t", origin="empirical", kind="empirical", rate=0.9, hypotheses={"data": "paper"})(
        lambda case: Outcome(ok=True)
    )
    profile(max_examples=100, derandomize=False)  # Hypothesis's defaults: attsvm check's own count
    assert pytest_plugin.examples_from_hypothesis(u, 1.0) is None
    profile(max_examples=33)
    assert pytest_plugin.examples_from_hypothesis(u, 1.0) == 33
    assert pytest_plugin.examples_from_hypothesis(emp, 1.0) is None  # runs of a sweep are not Hypothesis examples
    profile(max_examples=100, derandomize=True)  # the budget's full count
    assert pytest_plugin.examples_from_hypothesis(u, 1.0) == 40
    assert pytest_plugin.examples_from_hypothesis(u, 0.2) == 8
    assert pytest_plugin.examples_from_hypothesis(u_ci, 0.2) == 9
    assert pytest_plugin.examples_from_hypothesis(_universal(), 0.01) == 5
    assert "derandomize=True" in pytest_plugin.hypothesis_note()


def test_database_option_replays_a_stored_failure_first(tmp_path):
    args = ("--attsvm", REFUTED, "-q", "--attsvm-budget", "ci", "-rP", "--attsvm-db", tmp_path / "db")
    first = _pytest(*args, cwd=tmp_path)
    assert first.returncode == 0, _out(first)
    assert list((tmp_path / "db" / "first-step-raises-opt").glob("*.json"))
    again = _pytest(*args, cwd=tmp_path)
    assert again.returncode == 0 and "replayed from the counterexample database" in again.stdout, _out(again)
    (tmp_path / "afile").write_text("x")
    bad = _pytest("--attsvm", REFUTED, "--attsvm-db", tmp_path / "afile" / "db", cwd=tmp_path)
    assert bad.returncode == 4 and "--attsvm-db" in _out(bad) and "Traceback" not in _out(bad)
