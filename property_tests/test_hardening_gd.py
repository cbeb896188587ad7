"""Issue 32, "remaining hardening" of ``attsvm gd``: a recorded trajectory that would not fit in memory is refused
before anything is allocated; Ctrl-C stops the compiled kernel within a second whatever the run's length (and the
stretches it runs between returns to Python change no bit); no ETA while the kernel compiles; the guide lists every
name ``k.tol`` accepts."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from attsvm import generate
from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.gd import fused, run
from attsvm.gd.shards import run_sharded
from attsvm.gd.spec import trajectory_bytes
from attsvm.pool import Pool
from attsvm.progress import Progress
from attsvm.tolerances import table

ROOT = Path(__file__).resolve().parents[1]
HUGE = 10**12


def _call(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def small(tmp_path):
    return generate.paper_law(2, 3, 3, seed=2).save(tmp_path / "small.npz")


# ------------------------------------------------------------------------------- size check before allocating
def test_a_trajectory_beyond_the_machine_is_one_error_line_exit_2(small, capsys, monkeypatch):
    monkeypatch.delenv("ATTSVM_MEMORY_BYTES", raising=False)
    rc, out, err = _call(capsys, "gd", str(small), "--steps", str(HUGE), "--record-every", "1")
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(
        f"error: the recorded trajectory and its output ({HUGE + 1} rows: every 1 of {HUGE} steps) needs about "
    ), err
    assert re.search(r"needs about [\d.]+ (TiB|PiB) of memory, more than the limit of .* \(physical memory\)", err)
    assert "record fewer rows: --record-every 1" in err


def test_the_library_raises_input_error_not_memory_error():
    ds = generate.paper_law(3, 4, 3, seed=1, B=3)
    for kernel in ("fused", "torch"):
        with pytest.raises(InputError, match=r"the recorded trajectory \(1000000000001 rows.*record_every 1"):
            run(ds, steps=HUGE, record_every=1, kernel=kernel)
    with pytest.raises(InputError, match=r"the shards' recorded trajectories, merged .* needs about"):
        run_sharded(ds, Pool(2), steps=HUGE, record_every=1)  # refused before a worker starts


@pytest.mark.parametrize(
    "kw",
    [
        {"param": "W"},
        {"param": "KQ", "m": 2, "init": "random"},
        {"param": "p", "algo": "gd"},
        {"param": "vp", "algo": "gd"},
        {"param": "diag", "algo": "gd", "init": "random"},
    ],
)
def test_the_estimate_is_the_bytes_the_recorder_allocates(kw):
    """Exact for a float64 run that no stop rule ends early: every series, the parameters and a target."""
    ds = generate.paper_law(3, 4, 3, seed=1, B=3)
    target = np.ones(3) if kw["param"] in ("p", "vp") else np.eye(3)
    res = run(ds, steps=20, record_every=3, record_params=True, targets={"t": target}, **kw)
    assert res.stop_reason == ["steps"] * 3
    got = sum(a.nbytes for a in res.trajectory.values())
    assert got == trajectory_bytes(ds, 20, 3, param=kw["param"], m=kw.get("m"), targets=1, record_params=True)
    plain = run(ds, steps=20, record_every=3, **kw)
    assert sum(a.nbytes for a in plain.trajectory.values()) == trajectory_bytes(ds, 20, 3, param=kw["param"])


def test_the_limit_and_the_suggested_record_every(small, capsys, monkeypatch):
    """``ATTSVM_MEMORY_BYTES`` is the limit: the CLI's estimate (OUTPUT_FACTOR times the arrays) at the limit runs,
    one byte less is refused, and the --record-every the message suggests runs."""
    from attsvm.cli.gd import OUTPUT_FACTOR
    from attsvm.data import load

    need = OUTPUT_FACTOR * trajectory_bytes(load(small), 100, 1)
    monkeypatch.setenv("ATTSVM_MEMORY_BYTES", str(need))
    rc, out, err = _call(capsys, "gd", str(small), "--steps", "100", "--record-every", "1", "--json")
    assert rc == 0 and err == "" and '"trajectory"' in out
    monkeypatch.setenv("ATTSVM_MEMORY_BYTES", str(need - 1))
    rc, out, err = _call(capsys, "gd", str(small), "--steps", "100", "--record-every", "1", "--json")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "(ATTSVM_MEMORY_BYTES)" in err, err
    monkeypatch.setenv("ATTSVM_MEMORY_BYTES", str(10**6))
    rc, out, err = _call(capsys, "gd", str(small), "--steps", "100000", "--record-every", "1")
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    every = re.search(r"--record-every (\d+) keeps", err)
    assert every, err
    rc, out, err = _call(capsys, "gd", str(small), "--steps", "100000", "--record-every", every.group(1))
    assert rc == 0 and err == ""


# ------------------------------------------------------------------------- stretches of the compiled kernel
def _state(param: str, target: np.ndarray | None = None, stop_corr: float | None = None):
    ds = generate.paper_law(3, 4, 3, seed=1, B=5)
    f = ds.flat()
    from attsvm.gd import initial_params
    from attsvm.model import scores

    theta = initial_params(param, "random", 5, 3, 3, seed=4)
    return fused.State.start(
        np.asarray(f.X), np.asarray(f.Z), scores(f.X, f.Y, f.v), None, theta, np.full(5, 0.3), schedule="rsqrt",
        loss="logistic", target=target, stop_corr=stop_corr,
    )  # fmt: skip


def _same_bits_in_any_stretches(param: str, stop: bool) -> None:
    """``advance`` over [0, 300) in one stretch and in stretches of 1, 4, 31, ... steps: the same bits (with the
    ``target_corr`` rule stopping three data sets of five inside a stretch when ``stop``)."""
    target, stop_corr = None, None
    if stop:  # the direction each data set reaches at step 300, or its opposite (never reached)
        end = _state(param)
        end.advance(0, 300)
        W = end.params()["W"] if param == "W" else end.params()["K"] @ np.swapaxes(end.params()["Q"], -1, -2)
        target, stop_corr = W * np.array([1, 1, 1, -1, -1])[:, None, None], 0.05
    whole = _state(param, target, stop_corr)
    whole.advance(0, 300)
    for cuts in ([0, 1, 5, 36, 37, 300], [0, *range(1, 300, 7), 300], [0, 150, 151, 300]):
        parts = _state(param, target, stop_corr)
        for a, b in zip(cuts[:-1], cuts[1:]):
            parts.advance(a, b)
        for name in ("P1", "P2", "active", "taken", "reason", "nf_code", "nf_step", "logs", "u"):
            assert np.array_equal(getattr(whole, name), getattr(parts, name)), (name, cuts)
    if stop:
        st = whole.stops()
        assert st["reason"].tolist() == [2, 2, 2, 0, 0] and all(0 < k < 300 for k in st["taken"][:3])


def test_the_iterates_do_not_depend_on_the_stretches(monkeypatch):
    """The engine with stretches of one step, of a few steps and of 4-fold growing lengths: the same result and
    records, bit for bit; and the kernel's state after any cuts of [0, 300) into stretches."""
    ds = generate.paper_law(3, 4, 3, seed=1, B=3)
    kw = {"steps": 500, "record_every": 37, "targets": {"t": np.eye(3)}, "kernel": "fused", "record_params": True}
    results = []
    for seconds in (0.0, 1e-4, 1e9):  # one step per stretch; a few steps; growing 4-fold up to the whole run
        monkeypatch.setattr(fused, "STRETCH_SECONDS", seconds)
        for param in ("W", "KQ"):
            results.append((param, run(ds, param=param, init="random", **kw)))
    for param in ("W", "KQ"):
        first, *others = [r for p, r in results if p == param]
        for r in others:
            for f in ("W", "K", "Q", "steps", "loss", "norm", "log_softmax", "selection", "stuck"):
                a, b = getattr(first, f), getattr(r, f)
                assert (a is None and b is None) or np.array_equal(a, b), f
            assert first.trajectory.keys() == r.trajectory.keys()
            for key in first.trajectory:
                assert np.array_equal(first.trajectory[key], r.trajectory[key]), key
    for param in ("W", "KQ"):
        for stop in (False, True):
            _same_bits_in_any_stretches(param, stop)


def test_stretches_aim_at_their_seconds_and_grow_at_most_four_fold():
    s = fused.Stretches(0.1)
    assert s.length == 1
    s.took(1, 15.0)  # a first stretch that compiled the kernel
    assert s.length == 1
    lengths = []
    for _ in range(12):  # 1 microsecond a step: 100000 steps make 0.1 s, reached 4-fold
        s.took(s.length, s.length * 1e-6)
        lengths.append(s.length)
    assert lengths[:4] == [4, 16, 64, 256] and lengths[-1] == 100000
    s.took(100000, 1.0)  # the machine got 10 times slower
    assert s.length == 10000
    s.took(0, 0.0)
    assert s.length == 10000


def _interrupt_latency(path: Path, steps: int) -> tuple[int | None, float, str]:
    """Start ``attsvm gd PATH --steps STEPS``, wait for its first progress line and 1.5 s more (the kernel is
    running), send SIGINT; return (exit code or None if it did not exit within 5 s, seconds to exit, stderr)."""
    env = dict(os.environ, ATTSVM_PROGRESS_DELAY="0")
    p = subprocess.Popen(
        [sys.executable, "-m", "attsvm", "gd", str(path), "--steps", str(steps)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not any(line.startswith("[gd]") for line in err):
            assert p.poll() is None, "".join(err)
            assert time.monotonic() < deadline, "no progress line within a minute: " + "".join(err)
            time.sleep(0.05)
        time.sleep(1.5)
        t = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)
        try:
            rc: int | None = p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - t
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    reader.join(5)
    return rc, took, "".join(err)


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups and signals")
def test_ctrl_c_stops_the_compiled_kernel_within_seconds_whatever_the_run_length(small):
    """10^11 steps: one 1/100 of the run is hours of steps; Ctrl-C must not wait for it (5 s: generous)."""
    run(generate.paper_law(2, 3, 3, seed=2), steps=1, kernel="fused")  # the kernel in numba's disk cache
    rc, took, err = _interrupt_latency(small, 10**11)
    assert rc == 130, f"no exit within 5 s of SIGINT (rc {rc}): {err}"
    assert err.rstrip().endswith("error: interrupted") and "Traceback" not in err, err
    assert took < 5


# -------------------------------------------------------------------------- no ETA during the first compile
class _TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_eta_while_waiting_nor_from_the_first_stretch_of_work():
    tty = _TTY()
    p = Progress("gd", stream=tty, eta=True)
    cb = p.stage("1 run, steps")
    cb.wait("compiling the GD kernel")
    assert tty.getvalue().endswith("compiling the GD kernel...") and "ETA" not in tty.getvalue()
    cb(0, 1000)
    assert re.search(r"0/1000 \(  0%\) +[\d.]+s, compiling the GD kernel\.\.\.$", tty.getvalue())
    cb(10, 1000)  # the first stretch (it held the compilation): not timed
    last = tty.getvalue().rsplit("\r", 1)[-1]
    assert "10/1000" in last and "ETA" not in last and "compiling" not in last
    cb(20, 1000)
    assert re.search(r"20/1000 \(  2%\) +[\d.]+s, ETA [\d.]+s$", tty.getvalue())
    cb(1000, 1000)
    p.close()
    assert re.search(r"1000/1000 \(100%\) +[\d.]+s\n$", tty.getvalue())


def test_a_wait_is_drawn_once_the_delay_is_over_without_any_report():
    plain = io.StringIO()
    p = Progress("gd", stream=plain, delay=1.0, eta=True)
    p.wait("steps", "compiling the GD kernel")
    assert plain.getvalue() == ""  # before the delay: nothing
    deadline = time.monotonic() + 20
    while "compiling" not in plain.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert plain.getvalue().startswith("[gd] steps: ") and plain.getvalue().endswith(", compiling the GD kernel...\n")
    p.close()


def test_the_engine_tells_the_display_about_the_compilation_only_before_the_kernel_is_there(small):
    """A fresh process (no kernel loaded): the line says so, and no line shows an ETA before work was timed. In
    this process, once the kernel is there, ``wait`` is not called."""
    env = dict(os.environ, ATTSVM_PROGRESS_DELAY="0")
    cmd = [sys.executable, "-m", "attsvm", "gd", str(small), "--steps", "20000"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    lines = r.stderr.splitlines()
    assert r.returncode == 0 and lines[0].startswith("[gd] 1 run, steps: "), r.stderr
    assert lines[0].endswith(f", {fused.COMPILING}...") and "ETA" not in lines[0]
    assert all(line.startswith("[gd] 1 run, steps: ") for line in lines) and lines[-1].endswith("s")
    run(generate.paper_law(2, 3, 3, seed=2), steps=1, kernel="fused")
    assert fused.kernel_ready()
    seen: list = []

    class Callback:
        def __call__(self, k: int, n: int) -> None:
            seen.append(k)

        def wait(self, text: str) -> None:
            seen.append(text)

    run(generate.paper_law(2, 3, 3, seed=2), steps=50, kernel="fused", progress=Callback())
    assert seen[0] == 0 and seen[-1] == 50 and all(isinstance(k, int) for k in seen)


# --------------------------------------------------------------------------------- the names k.tol accepts
TOL_ROW = re.compile(r"^\| `(\w+)` \| ([\d.e+-]+) \(([\d.e+-]+)\) \| ?(✓?) ?\|", re.MULTILINE)


def tolerance_rows_wrong(doc: str) -> list[str]:
    """What the guide's ``k.tol`` table gets wrong against :func:`attsvm.tolerances.table`: names missing or
    unknown, float64 / float32 values (CPU), the rounding-allowance mark (:data:`attsvm.kit.ROUNDING_TOLERANCES`)."""
    from attsvm.kit import ROUNDING_TOLERANCES

    t64, t32 = table()[("float64", "cpu")], table()[("float32", "cpu")]
    names = {name for values in table().values() for name in values}
    rows = {m.group(1): m.groups()[1:] for m in TOL_ROW.finditer(doc)}
    wrong = [f"{name}: missing" for name in sorted(names - set(rows))]
    wrong += [f"{name}: not a tolerance" for name in sorted(set(rows) - names)]
    for name, (v64, v32, mark) in sorted(rows.items()):
        if name in names and (float(v64), float(v32), mark == "✓") != (
            t64[name],
            t32[name],
            name in ROUNDING_TOLERANCES,
        ):
            wrong.append(f"{name}: {v64} ({v32}) {mark!r} listed")
    return wrong


def test_the_guide_lists_every_name_k_tol_accepts():
    doc = (ROOT / "docs" / "writing-claims.md").read_text()
    assert tolerance_rows_wrong(doc) == []
    assert tolerance_rows_wrong(doc.replace("| `spec_rank` |", "| spec_rank |")) == ["spec_rank: missing"]
    assert tolerance_rows_wrong(doc.replace("| `kkt` | 1e-7 (1e-4)", "| `kkt` | 1e-6 (1e-4)")) == [
        "kkt: 1e-6 (1e-4) '✓' listed"
    ]
