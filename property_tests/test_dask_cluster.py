"""A real Dask cluster on this machine (issue 15): a ``dask scheduler`` and two ``dask worker`` processes started
as a user would start them, and ``attsvm`` connecting with ``--cluster tcp://HOST:PORT``.

``attsvm reproduce NAME --smoke --cluster ...`` writes the same ``NAME.json`` as the local run, ``attsvm gd
BATCH --cluster ...`` prints the serial output, the work really runs on the cluster's workers, and a cluster whose
workers run another ``attsvm`` version is refused (one line, exit 2). Skipped, visibly, without the optional
``dask`` extra."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="dask not installed: pip install 'attsvm[dask]'")

from attsvm import generate, save  # noqa: E402
from attsvm.cli import main  # noqa: E402
from attsvm.pool import Pool  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SMOKE = "prompt"  # a fast smoke experiment whose GD runs (gd_runs) and SVM solves (call_each) use the pool


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """``tcp://127.0.0.1:PORT`` of a scheduler with two single-threaded workers (their own processes, killed at
    the end whatever happens)."""
    folder = tmp_path_factory.mktemp("dask")
    sched_file = folder / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    common = dict(cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
             "--scheduler-file", str(sched_file), "--no-dashboard"],
            **common,
        )
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sched_file.exists(), "the scheduler did not start"
        for k in range(2):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                     "--nthreads", "1", "--no-dashboard", "--local-directory", str(folder / f"w{k}")],
                    **common,
                )
            )  # fmt: skip
        address = json.loads(sched_file.read_text())["address"]
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=90)
        yield address
    finally:
        for p in procs[::-1]:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _cli(argv, cwd: Path, capsys) -> tuple[int, str, str]:
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


def test_the_pool_runs_on_the_clusters_workers(scheduler):
    with Pool(cluster=scheduler) as pool:
        assert (pool.kind, pool.size, pool.address) == ("dask", 2, scheduler)
        pids = pool.map(lambda _: os.getpid(), range(8))  # dask pickles a lambda by value
        threads = pool.map(lambda _: __import__("torch").get_num_threads(), range(4))
    assert os.getpid() not in pids and len(set(pids)) == 2
    assert threads == [1, 1, 1, 1]  # torch with one thread on every worker


def test_reproduce_on_the_cluster_writes_the_local_numbers(scheduler, tmp_path, capsys):
    base = ["reproduce", SMOKE, "--smoke", "--quiet", "--format", "png"]
    t0 = time.perf_counter()
    rc, _, err = _cli([*base, "--out", "local", "-n", "2"], tmp_path, capsys)
    t_local = time.perf_counter() - t0
    assert rc == 0, err
    t0 = time.perf_counter()
    rc, _, err = _cli([*base, "--out", "dask", "--cluster", scheduler], tmp_path, capsys)
    t_dask = time.perf_counter() - t0
    assert rc == 0, err
    local = json.loads((tmp_path / "local" / f"{SMOKE}.json").read_text())
    dask = json.loads((tmp_path / "dask" / f"{SMOKE}.json").read_text())
    assert dask == local  # NAME.json holds numbers only (timings are in the manifest)
    man = json.loads((tmp_path / "dask" / f"{SMOKE}.manifest.json").read_text())
    assert man["pool"] == {"kind": "dask", "size": 2, "cluster": scheduler, "address": scheduler}
    man = json.loads((tmp_path / "local" / f"{SMOKE}.manifest.json").read_text())
    assert man["pool"] == {"kind": "processes", "size": 2, "cluster": None, "address": None}
    print(f"\n{SMOKE} --smoke: local -n 2 {t_local:.1f} s, --cluster {scheduler} {t_dask:.1f} s")


def test_gd_on_the_cluster_prints_the_serial_output(scheduler, tmp_path, capsys):
    f = save(generate.paper_law(4, 5, 6, seed=4, B=9), tmp_path / "batch.npz")
    argv = ["gd", str(f), "--steps", "200", "--lr", "1/L", "--record-every", "50", "--json", "--quiet"]
    outs = []
    for extra in ([], ["--cluster", scheduler]):
        rc, out, err = _cli([*argv, *extra], tmp_path, capsys)
        assert rc == 0, err
        res = json.loads(out)
        res.pop("seconds")
        outs.append(res)
    assert outs[1] == outs[0]
    assert len(outs[0]["runs"]) == 9 and all(np.isfinite(r["loss"]) for r in outs[0]["runs"])


def test_a_cluster_of_another_attsvm_version_is_refused(scheduler, tmp_path, capsys, monkeypatch):
    import attsvm

    monkeypatch.setattr(attsvm, "__version__", "0.0.0+other")  # this process; the workers keep theirs
    f = save(generate.paper_law(3, 4, 3, seed=0, B=2), tmp_path / "b.npz")
    rc, out, err = _cli(["gd", str(f), "--cluster", scheduler], tmp_path, capsys)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --cluster {scheduler}: its workers run attsvm "), err
    assert "this is 0.0.0+other" in lines[0]
