"""The one pool of workers (:mod:`attsvm.pool`, issue 15): validation of ``-n`` / ``--cluster``, the same ordered
results on every backend (serial loop, local processes, a Dask ``LocalCluster``), ``on_result`` once per item,
exceptions raised again in the parent, and the CLI's one-line errors (exit 2) for bad values and an unreachable
scheduler. A real scheduler with worker processes: ``test_dask_cluster.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.pool import DASK_EXTRA, Pool, check_cluster, usable_cores, workers_of

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------- task functions
def slow_square(job: tuple[int, float]) -> tuple[int, int, int]:
    """``(i, i*i, pid)`` after sleeping ``delay``: the early items sleep longest, so that the results arrive out
    of order on parallel backends (a merge in completion order would show)."""
    i, delay = job
    time.sleep(delay)
    return i, i * i, os.getpid()


def fail_on_three(i: int) -> int:
    if i == 3:
        raise ValueError(f"item {i} is bad")
    return i


class Unpicklable(Exception):
    def __init__(self, what: str, handle) -> None:
        super().__init__(what)
        self.handle = handle  # a lambda: cannot be pickled


def raise_unpicklable(i: int) -> int:
    raise Unpicklable(f"item {i}", lambda: None)


def torch_threads(_: int) -> int:
    import torch

    return torch.get_num_threads()


JOBS = [(i, 0.03 * (8 - i)) for i in range(8)]


# --------------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize("value, want", [(None, 1), (1, 1), (3, 3), ("2", 2), (" 4 ", 4), ("auto", usable_cores())])
def test_workers_of_accepts(value, want):
    assert workers_of(value) == want


@pytest.mark.parametrize("value", [0, -1, "0", "-2", "x", "1.5", "", True, 2.0, "٣", "auto2"])
def test_workers_of_refuses_naming_the_value(value):
    with pytest.raises(InputError, match="-n must be a positive integer or auto") as exc:
        workers_of(value)
    assert repr(value) in str(exc.value)


@pytest.mark.parametrize(
    "spec", ["local", "local:1", "local:16", "tcp://127.0.0.1:8786", "tcp://node7:1", "tcp://[::1]:65535"]
)
def test_check_cluster_accepts(spec):
    assert check_cluster(spec) == spec


@pytest.mark.parametrize(
    "spec",
    ["", "local:", "local:0", "local:-1", "local:x", "tcp://h", "tcp://h:0", "tcp://h:65536", "tcp://:8786",
     "udp://h:1", "h:8786", "tcp://h:80/x", "tcp://h:8o"],
)  # fmt: skip
def test_check_cluster_refuses_naming_the_value(spec):
    with pytest.raises(InputError, match="--cluster must be local, local:N or tcp://HOST:PORT") as exc:
        check_cluster(spec)
    assert repr(spec) in str(exc.value)


def test_pool_kinds_and_sizes():
    assert (Pool().kind, Pool().size) == ("serial", 1)
    assert (Pool(3).kind, Pool(3).size) == ("processes", 3)
    assert (Pool("auto").size, Pool(cluster="local:3").kind, Pool(cluster="local:3").size) == (
        usable_cores(),
        "dask",
        3,
    )
    assert Pool(cluster="local").size == usable_cores()


# --------------------------------------------------------------------------------------------- map
BACKENDS = [
    pytest.param({"workers": 1}, id="serial"),
    pytest.param({"workers": 2}, id="processes"),
    pytest.param({"cluster": "local:2"}, id="dask-local"),
]


@pytest.fixture(scope="module")
def dask_local():
    """One ``LocalCluster`` of two worker processes for the dask cases of this module (started once)."""
    pytest.importorskip("distributed", reason="dask not installed: pip install 'attsvm[dask]'")
    with Pool(cluster="local:2") as pool:
        yield pool


def _pool(kw, request):
    if "cluster" in kw:
        return request.getfixturevalue("dask_local")
    return Pool(**kw).__enter__()


@pytest.mark.parametrize("kw", BACKENDS)
def test_map_results_in_item_order_with_one_callback_per_item(kw, request):
    pool = _pool(kw, request)
    seen: list[int] = []
    try:
        out = pool.map(slow_square, JOBS, on_result=lambda i, r: seen.append(i))
    finally:
        if "cluster" not in kw:
            pool.close()
    assert [(i, sq) for i, sq, _ in out] == [(i, i * i) for i, _ in JOBS]  # merged by index
    assert sorted(seen) == list(range(len(JOBS)))  # once per item
    pids = {pid for *_, pid in out}
    if pool.kind == "serial":
        assert pids == {os.getpid()} and seen == list(range(len(JOBS)))
    else:
        assert os.getpid() not in pids and len(pids) == 2  # really on two other processes


@pytest.mark.parametrize("kw", BACKENDS)
def test_map_raises_the_workers_exception(kw, request):
    pool = _pool(kw, request)
    try:
        with pytest.raises(ValueError, match="item 3 is bad"):
            pool.map(fail_on_three, range(8))
        with (
            pytest.raises(RuntimeError, match="Unpicklable: item 0")
            if pool.kind != "serial"
            else pytest.raises(Unpicklable)
        ):
            pool.map(raise_unpicklable, [0])
        assert pool.map(fail_on_three, [0, 1, 2]) == [0, 1, 2]  # the pool still works afterwards
    finally:
        if "cluster" not in kw:
            pool.close()


def test_worker_processes_run_torch_with_one_thread():  # dask workers: test_dask_cluster.py
    with Pool(2) as pool:
        assert pool.map(torch_threads, range(4)) == [1, 1, 1, 1]


def test_processes_outside_a_with_block_start_and_stop_per_map():
    pool = Pool(2)
    assert [sq for _, sq, _ in pool.map(slow_square, JOBS[:3])] == [0, 1, 4]
    assert pool._mp is None  # nothing left running


def test_missing_dask_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(InputError) as exc:
        Pool(cluster="local:1").__enter__()
    assert str(exc.value) == DASK_EXTRA


def test_importing_the_cli_does_not_import_dask():
    code = (
        "import sys, attsvm.cli, attsvm.pool; attsvm.cli.build_parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed', 'torch'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------------------------- CLI errors
def _cli(argv, tmp_path, capsys):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.chdir(old)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture
def batch(tmp_path) -> Path:
    from attsvm import generate, save

    return save(generate.paper_law(3, 4, 3, seed=0, B=5), tmp_path / "batch.npz")


BAD = [
    (["-n", "0"], "-n must be a positive integer or auto, got '0'"),
    (["-n", "two"], "got 'two'"),
    (["--workers", "-3"], "got '-3'"),
    (["--cluster", "local:0"], "--cluster must be local, local:N or tcp://HOST:PORT, got 'local:0'"),
    (["--cluster", "tcp://127.0.0.1:99999"], "got 'tcp://127.0.0.1:99999'"),
    (["-n", "2", "--cluster", "local"], "-n/--workers and --cluster exclude each other"),
    (["--cluster", "tcp://127.0.0.1:1"], "--cluster tcp://127.0.0.1:1: cannot reach a dask scheduler"),
]


@pytest.mark.parametrize("extra, needle", BAD, ids=[" ".join(b[0]) for b in BAD])
@pytest.mark.parametrize("cmd", ["reproduce", "gd"])
def test_cli_bad_pool_options_are_one_line_exit_2(cmd, extra, needle, batch, tmp_path, capsys):
    if "tcp://127.0.0.1:1" in extra:
        pytest.importorskip("distributed", reason="dask not installed: pip install 'attsvm[dask]'")
    argv = ["reproduce", "prompt", "--smoke", "--quiet", "--out", "res"] if cmd == "reproduce" else ["gd", str(batch)]
    rc, out, err = _cli(argv + extra, tmp_path, capsys)
    assert rc == 2 and out == "", (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert not (tmp_path / "res").exists()


def test_gd_on_a_single_data_set_with_n(tmp_path, capsys):
    """``-n`` on a single data set: nothing to split, the output is the serial one."""
    import json

    from attsvm import generate, save

    f = save(generate.paper_law(3, 4, 3, seed=1), tmp_path / "one.npz")
    outs = []
    for extra in ([], ["-n", "2"]):
        rc, out, err = _cli(["gd", str(f), "--steps", "50", "--json", *extra], tmp_path, capsys)
        assert rc == 0, err
        res = json.loads(out)
        res.pop("seconds")
        outs.append(res)
    assert outs[0] == outs[1]
    assert np.isfinite(outs[0]["runs"][0]["loss"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_keep_freed_memory_sets_both_glibc_thresholds():
    """What a Dask worker runs before its first task (GD at half speed without it: docs/scale.md)."""
    import platform

    from attsvm.pool import keep_freed_memory

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert keep_freed_memory() is True
