"""Parallel checks (``attsvm check -n N``, ``--cluster local:N``): the same report and counterexample files as
the serial run, in the serial order; bad ``-n``/``--cluster`` values are bad input; the pieces that make a result
travel (a search case pickles) and the order in which claims start (longest first by recorded durations)."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attsvm.claims import Outcome, check, claim, discover, select
from attsvm.claims.database import DURATIONS, Database
from attsvm.claims.runner import Progress, portable, run_claim, run_claim_task, schedule, task_of
from attsvm.claims.verdict import ClaimResult
from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.paths import proofs_dir

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = proofs_dir() / "claims"
# fast built-in claims: verified ones, expected-false controls refuted with a confirmed counterexample (high
# precision; automatic 50 digits), an empirical claim refuted by its rate with a confirmed failing run
BUILTIN = [CLAIMS / "gd_local_cone_control.py", CLAIMS / "kq_balancedness.py", CLAIMS / "no_stationary_overparam.py"]
BUILTIN += [CLAIMS / "gd_global_equal_scores.py"]

# a user's claim file: a slow true claim first (it finishes last, so completion order != dependency order), a
# claim stated as true that is false (refuted) and a claim that depends on it (the "[depends on refuted]" note)
USER = """
import time
from attsvm.claims import Outcome, claim

HYP = {"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)}


@claim(id="user-slow-true", title="n is positive (slowly)", origin="derived", hypotheses=HYP, examples=5)
def slow_true(case):
    time.sleep(0.3)
    return Outcome(ok=True, margin=float(case.data.n))


@claim(id="user-logits-positive", title="every logit at W = I is positive", origin="derived", hypotheses=HYP)
def logits_positive(case):
    k = case.kit
    m = k.logits(case.data, k.eye(case.data.d)).min()
    return Outcome(ok=bool(m > 0), margin=m)


@claim(id="user-dependent", title="T >= 2", origin="derived", hypotheses=HYP, depends=("user-logits-positive",))
def dependent(case):
    return Outcome(ok=case.data.T >= 2, margin=float(case.data.T - 2))
"""


def _user_file(folder: Path) -> Path:
    p = folder / "user_claims.py"
    p.write_text(USER)
    return p


def _cli(folder: Path, *extra: str, paths: list[Path]) -> subprocess.CompletedProcess:
    """``attsvm check`` in ``folder`` (relative ``--out cx``: the counterexample files name the same paths)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "attsvm", "check", *map(str, paths), "--budget", "ci", "--no-db"]
    cmd += ["--json", "report.json", "--markdown", "report.md", "--out", "cx", *extra]
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=env, timeout=300)


def _untimed(x):
    """A JSON report without its timing fields (every ``seconds``, at any depth)."""
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [_untimed(v) for v in x]
    return x


def _untimed_markdown(text: str) -> str:
    """The Markdown report without the seconds column of its table (the 7th cell of each claim row)."""
    out = []
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = line.split(" | ")
            cells[6] = "-"
            line = " | ".join(cells)
        out.append(line)
    return "\n".join(out)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The serial run of the fast claims and the user file (the reference)."""
    base = tmp_path_factory.mktemp("parallel")
    user = _user_file(base)
    folder = base / "serial"
    folder.mkdir()
    paths = [user, *BUILTIN]
    r = _cli(folder, paths=paths)
    assert r.returncode == 1, r.stderr  # user-logits-positive is stated as true and refuted
    assert (folder / "report.json").is_file() and "Traceback" not in r.stderr, r.stderr
    return folder, paths, r


def _same_as_serial(serial, folder: Path, r: subprocess.CompletedProcess, clean: bool = True) -> None:
    """``r`` (run in ``folder``) has the serial exit code, report and counterexample files (``clean``: and no
    traceback on stderr)."""
    ref, _, rs = serial
    assert r.returncode == rs.returncode and not (clean and "Traceback" in r.stderr), r.stderr
    a = json.loads((ref / "report.json").read_text())
    b = json.loads((folder / "report.json").read_text())
    assert [c["id"] for c in b["claims"]] == [c["id"] for c in a["claims"]]  # the serial (dependency) order
    assert _untimed(b) == _untimed(a)
    ma, mb = (f / "report.md" for f in (ref, folder))
    assert _untimed_markdown(mb.read_text()) == _untimed_markdown(ma.read_text())
    files = sorted(p.name for p in (ref / "cx").iterdir())
    assert sorted(p.name for p in (folder / "cx").iterdir()) == files
    for name in files:  # the counterexample files, byte for byte
        assert (folder / "cx" / name).read_bytes() == (ref / "cx" / name).read_bytes(), name
    assert re.search(r"^\[\d+/\d+\] ", r.stderr, re.M)  # the progress lines


def test_serial_reference_has_what_the_comparison_needs(serial):
    """The reference run is a meaningful one: verified, refuted-and-confirmed (universal and empirical) and the
    dependency note; completion order differs from the serial order in the parallel runs (the slow claim first)."""
    folder, _, _ = serial
    rep = {c["id"]: c for c in json.loads((folder / "report.json").read_text())["claims"]}
    assert rep["kq-balancedness"]["verdict"] == "verified"
    assert rep["gd-local-cone-control"]["verdict"] == "refuted" and rep["gd-local-cone-control"]["confirmed"]
    assert rep["kq-balancedness-control"]["confirmed_by"] == "automatic"
    assert rep["gd-global-equal-scores"]["verdict"] == "refuted" and rep["gd-global-equal-scores"]["rate"]
    assert rep["user-logits-positive"]["verdict"] == "refuted" and not rep["user-logits-positive"]["matches"]
    assert rep["user-dependent"]["reason"].endswith("[depends on refuted user-logits-positive]")
    assert list(rep)[0] == "user-slow-true"
    assert len(list((folder / "cx").glob("*.npz"))) >= 4


def test_two_processes_give_the_serial_results(serial, tmp_path):
    _, paths, _ = serial
    r = _cli(tmp_path, "-n", "2", paths=paths)
    _same_as_serial(serial, tmp_path, r)
    done = re.findall(r"^\[\d+/\d+\] (?:ok |!! )(\S+):", r.stderr, re.M)
    assert done[0] != "user-slow-true" and sorted(done) == sorted(set(done))  # completion order, one line each


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="dask.distributed not installed")
def test_local_dask_cluster_gives_the_serial_results(serial, tmp_path):
    _, paths, _ = serial
    r = _cli(tmp_path, "--cluster", "local:2", paths=paths)
    # clean=False: a Dask worker may log a heartbeat traceback while the local cluster shuts down (attsvm.pool)
    _same_as_serial(serial, tmp_path, r, clean=False)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-n", "0"], "-n must be a positive integer or auto, got '0'"),
        (["-n", "x"], "-n must be a positive integer or auto, got 'x'"),
        (["--cluster", "foo"], "--cluster must be local, local:N or tcp://HOST:PORT, got 'foo'"),
        (["-n", "2", "--cluster", "local:2"], "-n/--workers and --cluster exclude each other"),
    ],
)
def test_bad_workers_or_cluster_is_bad_input(tmp_path, capsys, argv, message):
    out = tmp_path / "cx"
    rc = main(["check", str(BUILTIN[0]), "--no-db", "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"error: {message}") and err.count("\n") == 1
    assert not out.exists()  # nothing ran


def test_a_claim_outside_claim_files_cannot_travel():
    @claim(id="inline", title="t", origin="derived", hypotheses={"data": "paper", "n": (1, 2), "T": (2, 3)})
    def inline(case):
        return Outcome(ok=True, margin=1.0)

    with pytest.raises(InputError, match="claim inline: a parallel check runs claims found in claim files"):
        check([inline], workers=2, out=None)


def test_a_search_case_pickles_without_its_hypothesis_data(tmp_path):
    (c,) = discover([_user_file(tmp_path)])[1:2]
    res = run_claim(c, budget="ci")
    assert res.verdict == "refuted" and res.case.mode == "search"
    back = pickle.loads(pickle.dumps(res))
    assert back.case.mode == "search" and back.sizes == res.sizes and back.to_json() == res.to_json()
    assert (back.case.data.X == res.case.data.X).all()
    with pytest.raises(RuntimeError, match="another process"):
        back.case.draw_float(0.0, 1.0)
    again = c.conclusion(back.case.replayed())
    assert again.ok is False and again.margin == res.outcome.margin


def test_progress_shows_running_claims_and_one_line_per_claim():
    class TTY(io.StringIO):
        def isatty(self):
            return True

    s = TTY()
    claims = select(discover([BUILTIN[1], BUILTIN[2]]), ["kq-balancedness", "no-stationary-overparam"])
    rep = check(claims, budget="ci", out=None, progress=Progress(s), workers=2)
    assert [r.id for r in rep] == [c.id for c in claims]
    text = s.getvalue()
    assert re.search(r"\r. \[\d/2 done\] \d running, \d+s", text)  # the spinner of a parallel run
    lines = [ln.split("\r")[-1] for ln in text.splitlines() if "] ok " in ln]  # after the spinner's last redraw
    heads = [re.match(r"\[(\d)/2\] ok ([\w-]+): verified", ln).groups() for ln in lines]
    assert [k for k, _ in heads] == ["1", "2"] and sorted(i for _, i in heads) == [c.id for c in claims]


def test_schedule_starts_unknown_then_longest():
    claims = select(discover([BUILTIN[1], BUILTIN[2]]), None)
    ids = [c.id for c in claims]
    assert schedule(claims, {}) == list(range(len(claims)))
    durations = {ids[0]: 1.0, ids[1]: 5.0}
    order = [ids[i] for i in schedule(claims, durations)]
    assert order == [*ids[2:], ids[1], ids[0]]


def test_durations_are_recorded_and_a_bad_record_is_ignored(tmp_path):
    db = Database(tmp_path / "db")
    claims = select(discover([BUILTIN[1]]), ["kq-balancedness"])
    rep = check(claims, budget="ci", out=None, db=db)
    rec = db.durations()
    assert set(rec) == {"kq-balancedness"} and rec["kq-balancedness"] == round(rep[0].seconds, 3)
    (tmp_path / "db" / DURATIONS).write_text("{not json")
    assert db.durations() == {}
    (tmp_path / "db" / DURATIONS).write_text(json.dumps({"a": 1.5, "b": "x", "c": -1, "d": True}))
    assert db.durations() == {"a": 1.5}


def test_a_task_checks_what_the_worker_finds(tmp_path):
    (c,) = select(discover([BUILTIN[0]]), None)
    opts = {"budget": 0.2, "out": "cx"}
    good = task_of(c, opts)
    assert good.file == c.module and good.claim is None
    with pytest.raises(InputError, match="another claim"):
        run_claim_task(dataclasses.replace(good, fingerprint="0" * 64))
    with pytest.raises(InputError, match="give --out and --db as absolute paths"):
        run_claim_task(dataclasses.replace(good, cwd=str(tmp_path)))
    changed = dataclasses.replace(c, examples=3)  # not the object its file defines, and it does not pickle
    with pytest.raises(InputError, match="run it with -n 1"):
        task_of(changed, opts)


def test_a_result_with_an_unpicklable_detail_travels_as_its_json():
    res = ClaimResult(id="x", title="t", origin="derived", expected="true", kind="universal", verdict="refuted")
    res.outcome = Outcome(ok=False, margin=-1.0, detail={"f": lambda: 1, "k": 2})
    before = res.to_json()
    back = pickle.loads(pickle.dumps(portable(res)))
    assert back.to_json() == before and back.outcome.detail["k"] == 2


def test_the_database_written_by_workers_is_the_serial_one(tmp_path, monkeypatch):
    """Workers store the same entries as the serial run; a parallel run replays them as the serial one does."""
    claims = discover([_user_file(tmp_path), BUILTIN[0]])[1:]  # user-logits-positive, user-dependent, the control
    kw = {"budget": "ci", "out": None}
    runs, files = {}, {}
    for n in (1, 2):  # the same relative path "db" in two folders: the entries name their own files
        (tmp_path / f"run{n}").mkdir()
        monkeypatch.chdir(tmp_path / f"run{n}")
        runs[n] = check(claims, db=Database("db"), workers=n, **kw)
        files[n] = {p.relative_to("db"): p.read_bytes() for p in Path("db").rglob("*") if p.is_file()}
    assert sorted(files[1]) == sorted(files[2]) and len(files[1]) == 5  # two cases (.npz + .json), the durations
    assert {p: b for p, b in files[1].items() if p.name != DURATIONS} == {
        p: b for p, b in files[2].items() if p.name != DURATIONS
    }
    assert (
        set(json.loads(files[1][Path(DURATIONS)]))
        == set(json.loads(files[2][Path(DURATIONS)]))
        == {c.id for c in claims}
    )
    assert [_untimed(r.to_json()) for r in runs[1]] == [_untimed(r.to_json()) for r in runs[2]]
    again = [check(claims, db=Database("db"), workers=n, **kw) for n in (1, 2)]  # both replay run2/db
    assert [_untimed(r.to_json()) for r in again[0]] == [_untimed(r.to_json()) for r in again[1]]
    assert sum("replayed from the counterexample database" in r.reason for r in again[1]) == 2
