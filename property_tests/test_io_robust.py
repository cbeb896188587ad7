"""Outputs, user files, counterexample files and Ctrl-C (issue 11): one ``error:`` line, exit 2 or 130.

Every command checks its output paths before it works (:mod:`attsvm.outputs`), writes atomically and leaves no
partial or temporary file; a user Python file that does not import is one line naming it
(:mod:`attsvm.userfile`); a tampered counterexample description is one line naming the file and the first
problem (:func:`attsvm.claims.counterexample.validate`); Ctrl-C gives ``error: interrupted``, exit 130.

Unwritable paths: a path under a regular file (``FILE/sub``) and one in ``/proc``, which refuse writes even to
root; a ``chmod 555`` folder only when not running as root (root ignores permission bits: that case is skipped
with the reason).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from attsvm import outputs
from attsvm.cli import main
from attsvm.errors import InputError

REPO = Path(__file__).resolve().parents[1]
CONJ = REPO / "examples" / "conjectures" / "refuted_conjecture.py"
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


# --------------------------------------------------------------------------------------------- helpers
def run_main(argv: list[str], cwd: Path, capsys) -> tuple[int, str, str]:
    """``attsvm ARGV`` in-process in ``cwd`` (an exception escaping ``main`` fails the test: a traceback)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.chdir(old)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def assert_one_error(rc: int, err: str, want_rc: int, *needles: str) -> str:
    """Exit ``want_rc``, no traceback, exactly one ``error:`` line (``warning:`` lines allowed) holding every
    needle; returns that line."""
    assert rc == want_rc, err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def assert_no_temporaries(folder: Path) -> None:
    left = [p for p in folder.rglob("*") if outputs.TEMP_SUFFIX in p.name or ".attsvm-probe-" in p.name]
    assert not left, left


@pytest.fixture
def afile(tmp_path) -> Path:
    f = tmp_path / "afile"
    f.write_text("a regular file\n")
    return f


def unwritable(kind: str, tmp_path: Path, afile: Path) -> Path:
    """A folder that cannot be written: under a regular file, in /proc, or chmod 555 (not as root)."""
    if kind == "under-file":
        return afile / "sub"
    if kind == "proc":
        if not Path("/proc/self").is_dir():
            pytest.skip("no /proc on this system")
        return Path("/proc/attsvm-no-such-dir")
    if ROOT:
        pytest.skip("running as root: permission bits do not stop writes (under-file and proc cover the case)")
    ro = tmp_path / "ro"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    return ro


KINDS = ["under-file", "proc", "chmod555"]


# --------------------------------------------------------------------------------------------- output paths
@pytest.mark.parametrize("kind", KINDS)
def test_reproduce_out_unwritable(kind, tmp_path, afile, capsys, monkeypatch):
    import attsvm.experiments

    def ran(*a, **k):
        raise AssertionError("the output folder must be checked before the experiment runs")

    monkeypatch.setattr(attsvm.experiments, "reproduce", ran)
    out = unwritable(kind, tmp_path, afile)
    before = files_under(tmp_path)
    rc, _, err = run_main(["reproduce", "visual", "--smoke", "--quiet", "--out", str(out / "res")], tmp_path, capsys)
    assert_one_error(rc, err, 2, f"--out {out / 'res'}")
    assert files_under(tmp_path) == before


def test_reproduce_out_is_a_file(tmp_path, afile, capsys):
    rc, _, err = run_main(["reproduce", "visual", "--smoke", "--quiet", "--out", str(afile)], tmp_path, capsys)
    assert_one_error(rc, err, 2, f"--out {afile}", "not a directory")


def test_reproduce_writes_all_its_files_and_no_temporaries(tmp_path, capsys):
    rc, out, err = run_main(["reproduce", "visual", "--smoke", "--quiet", "--out", "res"], tmp_path, capsys)
    assert rc == 0, err
    want = {"visual.png", "visual.pdf", "visual.caption.md", "visual.json", "visual.manifest.json"}
    assert files_under(tmp_path / "res") == want
    assert (tmp_path / "res" / "visual.json").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.parametrize("option", ["--latex", "--json", "--markdown"])
@pytest.mark.parametrize("kind", KINDS)
def test_check_report_unwritable(option, kind, tmp_path, afile, capsys):
    target = unwritable(kind, tmp_path, afile) / "report.out"
    argv = ["check", str(CONJ), "--budget", "ci", "--no-db", "--out", "cx", option, str(target)]
    rc, _, err = run_main(argv, tmp_path, capsys)
    assert_one_error(rc, err, 2, f"{option} {target}")
    assert not (tmp_path / "cx").exists(), "checked before the search: no counterexample written"


def test_check_report_is_a_folder_or_special_file(tmp_path, capsys):
    rc, _, err = run_main(["check", str(CONJ), "--no-db", "--json", str(tmp_path)], tmp_path, capsys)
    assert_one_error(rc, err, 2, "--json", "is a folder")
    rc, _, err = run_main(["check", str(CONJ), "--no-db", "--latex", os.devnull], tmp_path, capsys)
    assert_one_error(rc, err, 2, "--latex", "not a regular file")


@pytest.mark.parametrize("kind", KINDS)
def test_check_out_unwritable(kind, tmp_path, afile, capsys):
    out = unwritable(kind, tmp_path, afile) / "cx"
    rc, _, err = run_main(["check", str(CONJ), "--budget", "ci", "--no-db", "--out", str(out)], tmp_path, capsys)
    assert_one_error(rc, err, 2, f"--out {out}")


def test_check_out_is_a_file(tmp_path, afile, capsys):
    rc, _, err = run_main(["check", str(CONJ), "--budget", "ci", "--no-db", "--out", str(afile)], tmp_path, capsys)
    assert_one_error(rc, err, 2, f"--out {afile}", "not a directory")


@pytest.mark.parametrize("kind", KINDS)
def test_check_explicit_db_unwritable(kind, tmp_path, afile, capsys):
    db = unwritable(kind, tmp_path, afile) / "db"
    rc, _, err = run_main(["check", str(CONJ), "--budget", "ci", "--out", "cx", "--db", str(db)], tmp_path, capsys)
    assert_one_error(rc, err, 2, f"--db {db}", "--no-db")
    assert not (tmp_path / "cx").exists()


def test_check_default_db_unwritable_warns_and_runs(tmp_path, capsys):
    (tmp_path / ".attsvm").write_text("not a directory")  # the default .attsvm/db cannot be created
    rc, _, err = run_main(["check", str(CONJ), "--budget", "ci", "--out", "cx"], tmp_path, capsys)
    assert rc == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and ".attsvm/db" in warnings[0] and "without the counterexample database" in warnings[0]
    assert "error:" not in err and "Traceback" not in err
    assert sorted(p.suffix for p in (tmp_path / "cx").iterdir()) == [".json", ".npz"]
    assert_no_temporaries(tmp_path)


@pytest.mark.parametrize("option", ["--latex", "--markdown"])
@pytest.mark.parametrize("kind", KINDS)
def test_derive_output_unwritable(option, kind, tmp_path, afile, capsys):
    target = unwritable(kind, tmp_path, afile) / "x.out"
    rc, _, err = run_main(["derive", "softmax-jacobian", option, str(target)], tmp_path, capsys)
    assert_one_error(rc, err, 2, f"{option} {target}")


def test_derive_kkt_outputs_checked_before_the_data_is_read(tmp_path, afile, capsys):
    argv = ["derive", "kkt", "--data", "missing.npz", "--latex", str(afile / "x.tex")]
    rc, _, err = run_main(argv, tmp_path, capsys)
    assert_one_error(rc, err, 2, f"--latex {afile / 'x.tex'}", "not a directory")


def test_derive_golden_dir_unwritable(tmp_path, afile, capsys):
    argv = ["derive", "softmax-jacobian", "--update-golden", "--golden-dir", str(afile / "g")]
    rc, _, err = run_main(argv, tmp_path, capsys)
    assert_one_error(rc, err, 2, f"--golden-dir {afile / 'g'}", "not a directory")


def test_derive_writes_atomically(tmp_path, capsys):
    rc, _, err = run_main(["derive", "softmax-jacobian", "--latex", "d/x.tex", "--markdown", "x.md"], tmp_path, capsys)
    assert rc == 0, err
    assert (tmp_path / "d" / "x.tex").read_text().strip() and (tmp_path / "x.md").read_text().strip()
    assert_no_temporaries(tmp_path)


# --------------------------------------------------------------------------------------------- the writer
def test_atomic_write_failure_keeps_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    for exc in (RuntimeError("disk on fire"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with outputs.atomic(target, "w") as fh:
                fh.write("half")
                raise exc
        assert target.read_text() == "old"
        assert_no_temporaries(tmp_path)
    outputs.write_text(target, "new")
    assert target.read_text() == "new" and files_under(tmp_path) == {"out.txt"}


def test_transaction_is_all_or_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with outputs.transaction():
            outputs.write_text(tmp_path / "a.json", "{}")
            outputs.write_bytes(tmp_path / "b.png", b"png")
            assert files_under(tmp_path) and not (tmp_path / "a.json").exists()  # still temporaries
            raise KeyboardInterrupt
    assert files_under(tmp_path) == set()
    with outputs.transaction():
        outputs.write_text(tmp_path / "a.json", "{}")
        outputs.write_bytes(tmp_path / "b.png", b"png")
    assert files_under(tmp_path) == {"a.json", "b.png"}


def test_checks_create_nothing(tmp_path):
    outputs.check_output_dir(tmp_path / "new" / "deeper", "--out")
    outputs.check_output_file(tmp_path / "x" / "y.json", "--json")
    outputs.check_output_file(tmp_path / "y.json", "--json")
    assert files_under(tmp_path) == set()
    with pytest.raises(InputError, match=r"^--out .*: exists and is not a directory$"):
        outputs.check_output_dir(Path(__file__), "--out")


# --------------------------------------------------------------------------------------------- user files
SYNTAX = "TITLE = 'x'\ndef run(ctx:\n    pass\n"


def test_experiment_spec_with_syntax_error(tmp_path, capsys):
    (tmp_path / "badspec").mkdir()
    (tmp_path / "badspec" / "broken.py").write_text(SYNTAX)
    argv = ["reproduce", "broken", "--numerics", str(tmp_path / "badspec"), "--out", "o"]
    rc, _, err = run_main(argv, tmp_path, capsys)
    line = assert_one_error(rc, err, 2, "broken.py:2: syntax error in experiment spec file (")
    assert line.startswith(f"error: {tmp_path / 'badspec' / 'broken.py'}:2:")
    assert not (tmp_path / "o").exists()


def test_claim_and_derivation_files_that_do_not_import(tmp_path, capsys):
    (tmp_path / "syn.py").write_text(SYNTAX)
    (tmp_path / "boom.py").write_text("raise RuntimeError('boom\\nsecond line')\n")
    rc, _, err = run_main(["check", str(tmp_path / "syn.py"), "--no-db"], tmp_path, capsys)
    assert_one_error(rc, err, 2, "syn.py:2: syntax error in claim file (")
    rc, _, err = run_main(["check", str(tmp_path / "boom.py"), "--no-db"], tmp_path, capsys)
    assert_one_error(rc, err, 2, "boom.py: claim file failed to import (RuntimeError: boom)")
    rc, _, err = run_main(["derive", "--path", str(tmp_path / "syn.py")], tmp_path, capsys)
    assert_one_error(rc, err, 2, "syn.py:2: syntax error in derivation file (")
    rc, _, err = run_main(["derive", "--path", str(tmp_path / "boom.py")], tmp_path, capsys)
    assert_one_error(rc, err, 2, "boom.py: derivation file failed to import (RuntimeError: boom)")


SPEC = """TITLE = {title!r}
SIZES = {{"full": {{"seeds": 1}}, "smoke": {{"seeds": 1}}}}
def run(ctx): return {{}}
def plot(res): return None
def check(res): return []
"""


def test_same_spec_name_in_two_folders_is_not_confused(tmp_path):
    from attsvm.experiments import load_spec

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.py").write_text(SPEC.format(title=f"from {folder}"))
    a, b = load_spec("same", tmp_path / "a"), load_spec("same", tmp_path / "b")
    assert (a.TITLE, b.TITLE) == ("from a", "from b")
    assert load_spec("same", tmp_path / "a").TITLE == "from a"
    (tmp_path / "a" / "same.py").write_text(SPEC.format(title="edited"))
    assert load_spec("same", tmp_path / "a").TITLE == "edited"


# --------------------------------------------------------------------------------------------- counterexamples
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real counterexample (.npz + .json) of the refuted conjecture."""
    folder = tmp_path_factory.mktemp("saved")
    r = subprocess.run(
        [sys.executable, "-m", "attsvm", "check", str(CONJ), "--budget", "ci", "--no-db", "--out", "cx"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert r.returncode == 0, r.stderr
    (js,) = (folder / "cx").glob("*.json")
    return js, js.with_suffix(".npz")


def _other_npz(npz: Path) -> None:
    from attsvm import generate

    generate.paper_law(3, 4, 3, seed=1).save(npz)


TAMPER = {
    "draws garbage": lambda o: o.update(draws=[{"__ndarray__": "garbage", "dtype": "float64"}]),
    "draws bad dtype": lambda o: o.update(draws=[{"__ndarray__": [1.0], "dtype": "nonsense"}]),
    "draws object dtype": lambda o: o.update(draws=[{"__ndarray__": [1.0], "dtype": "object"}]),
    "draws ragged": lambda o: o.update(draws=[{"__ndarray__": [[1.0, 2.0], [3.0]], "dtype": "float64"}]),
    "draws a string": lambda o: o.update(draws="garbage"),
    "draws bad dataset": lambda o: o.update(draws=[{"__dataset__": {"X": 1}}]),
    "seed missing": lambda o: o.pop("seed"),
    "claim missing": lambda o: o.pop("claim"),
    "draws missing": lambda o: o.pop("draws"),
    "seed a string": lambda o: o.update(seed="zero"),
    "seed a boolean": lambda o: o.update(seed=True),
    "index negative": lambda o: o.update(index=-1),
    "index a float": lambda o: o.update(index=1.5),
    "budget zero": lambda o: o.update(budget=0),
    "budget a list": lambda o: o.update(budget=[1]),
    "claim an int": lambda o: o.update(claim=5),
    "claim empty": lambda o: o.update(claim=""),
    "verdict unknown": lambda o: o.update(verdict="proved"),
    "data outside the folder": lambda o: o.update(data="../../x.npz"),
    "data names another file": lambda o: o.update(data="other.npz"),
    "sizes disagree": lambda o: o.update(sizes={k: v + 1 for k, v in o["sizes"].items()}),
    "outcome not an object": lambda o: o.update(outcome=[1]),
}


@pytest.mark.parametrize("how", sorted(TAMPER) + ["not JSON", "a JSON list", "npz garbage", "npz other sizes"])
def test_tampered_counterexample_is_one_line(how, saved, tmp_path, capsys):
    js, npz = saved
    obj = json.loads(js.read_text())
    shutil.copy(npz, tmp_path / npz.name)
    text = json.dumps(obj)
    if how in TAMPER:
        TAMPER[how](obj)
        text = json.dumps(obj)
    elif how == "not JSON":
        text = "{not json"
    elif how == "a JSON list":
        text = "[1, 2]"
    (tmp_path / js.name).write_text(text)
    if how == "npz garbage":
        (tmp_path / npz.name).write_bytes(b"garbage")
    elif how == "npz other sizes":
        _other_npz(tmp_path / npz.name)
    before = files_under(tmp_path)
    rc, _, err = run_main(["check", str(CONJ), "--replay", npz.name, "--no-db"], tmp_path, capsys)
    name = npz.name if how == "npz garbage" else js.name
    assert_one_error(rc, err, 2, name)
    assert files_under(tmp_path) == before


def test_replay_without_description_and_untampered(saved, tmp_path, capsys):
    js, npz = saved
    shutil.copy(npz, tmp_path / npz.name)
    rc, _, err = run_main(["check", str(CONJ), "--replay", npz.name, "--no-db"], tmp_path, capsys)
    assert_one_error(rc, err, 2, npz.name, js.name)
    shutil.copy(js, tmp_path / js.name)
    rc, out, err = run_main(["check", str(CONJ), "--replay", npz.name, "--no-db"], tmp_path, capsys)
    assert rc == 0 and ": reproduced — the saved case still fails" in out, err


def test_counterexample_files_are_written_together(saved, tmp_path, monkeypatch):
    """A failure while the pair is written leaves neither file (nor a temporary)."""
    from attsvm.claims import counterexample
    from attsvm.claims.case import Case
    from attsvm.claims.verdict import ClaimResult
    from attsvm.data import load

    res = ClaimResult(id="c", title="t", origin="o", expected="false", kind="universal", verdict="refuted")
    res.case = Case(data=load(saved[1]))

    def broken_dumps(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(counterexample.json, "dumps", broken_dumps)
    with pytest.raises(KeyboardInterrupt):
        counterexample.save(res, tmp_path)
    assert files_under(tmp_path) == set()


# --------------------------------------------------------------------------------------------- Ctrl-C
def _interrupt(argv: list[str], cwd: Path, ready) -> tuple[int, str]:
    """Start ``attsvm ARGV`` in its own process group, wait until ``ready(cwd, stderr so far)``, send SIGINT to
    the group (as Ctrl-C does); return (exit code, stderr). Never waits more than a minute."""
    p = subprocess.Popen(
        [sys.executable, "-m", "attsvm", *argv],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not ready(cwd, "".join(err)):
            if p.poll() is not None:
                reader.join(5)
                pytest.fail(f"finished before the interrupt (rc {p.returncode}): {''.join(err)}")
            if time.monotonic() > deadline:
                pytest.fail("the command never got ready: " + "".join(err))
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=30)
        reader.join(10)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, "".join(err)


def _stderr_lines(err: str) -> list[str]:
    """stderr without the progress lines (``[...]``)."""
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("[")]


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_ctrl_c_during_reproduce_with_worker_pool(tmp_path):
    # the full-size rank experiment: its nuclear-norm solves run on the 2-process pool
    rc, err = _interrupt(
        ["reproduce", "rank", "--workers", "2", "--out", "res"], tmp_path, lambda cwd, e: "nuclear" in e
    )
    assert rc == 130, err
    assert _stderr_lines(err) == ["error: interrupted"], err
    assert not (tmp_path / "res").exists() or files_under(tmp_path / "res") == set()


SLOW_CLAIM = """
from pathlib import Path
import time
from attsvm.claims import Outcome, claim


@claim(id="slow-claim", title="slow", origin="derived", hypotheses={"data": "paper", "n": (1, 2), "T": (2, 3),
       "d": (2, 3)}, examples=100000)
def slow(case):
    Path("started").touch()
    time.sleep(0.05)
    return Outcome(ok=True, margin=1.0)
"""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_ctrl_c_during_check_search(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_CLAIM)
    argv = ["check", "slow.py", "--examples", "100000", "--out", "cx", "--json", "r.json"]
    rc, err = _interrupt(argv, tmp_path, lambda cwd, e: (cwd / "started").exists())
    assert rc == 130, err
    assert _stderr_lines(err) == ["error: interrupted"], err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "cx").exists()
    assert_no_temporaries(tmp_path)


def _search(conclusion):
    from attsvm.claims import claim
    from attsvm.claims.search import run_search

    c = claim(id="t", title="t", origin="derived", hypotheses={"data": "paper", "n": (1, 2), "T": (2, 3), "d": (2, 3)})(
        conclusion
    )
    return run_search(c, examples=50)


def test_keyboard_interrupt_in_a_conclusion_propagates():
    from attsvm.claims import Outcome

    calls = []

    def conclusion(case):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return Outcome(ok=True, margin=1.0)

    with pytest.raises(KeyboardInterrupt):
        _search(conclusion)
    assert len(calls) == 3


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_swallowed_inside_a_conclusion_still_stops_the_search():
    """A library that catches KeyboardInterrupt and goes on must not keep the search running."""
    from attsvm.claims import Outcome

    calls = []

    def conclusion(case):
        calls.append(1)
        if len(calls) == 2:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
            except KeyboardInterrupt:
                pass  # swallowed
        return Outcome(ok=True, margin=1.0)

    with pytest.raises(KeyboardInterrupt):
        _search(conclusion)
    assert len(calls) == 2


def test_interrupt_wrapped_by_hypothesis_is_recognised():
    from hypothesis.errors import FlakyFailure

    from attsvm.claims.search import interrupted_in

    assert interrupted_in(FlakyFailure("flaky", [KeyboardInterrupt()]))
    assert not interrupted_in(FlakyFailure("flaky", [ValueError()]))
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ki:
            raise RuntimeError("converted") from ki
    except RuntimeError as exc:
        assert interrupted_in(exc)


def test_data_save_is_atomic(tmp_path, monkeypatch):
    from attsvm import generate
    from attsvm.data import load, save

    ds = generate.paper_law(2, 3, 2, seed=0)
    p = save(ds, tmp_path / "d.npz")
    monkeypatch.setattr(np, "savez", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        save(generate.paper_law(3, 3, 2, seed=1), p)
    assert load(p).n == 2 and files_under(tmp_path) == {"d.npz"}
