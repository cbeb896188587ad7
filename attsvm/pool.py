r"""One pool of workers for the whole package: a plain loop, local processes, or a Dask cluster.

:class:`Pool` runs ``[fn(x) for x in items]`` (:meth:`Pool.map`) on one of three backends (its ``kind``):

=============  =================================================================================================
``serial``     one worker and no cluster: a plain loop in this process, no process started
``processes``  ``-n N`` (N > 1) or ``-n auto``: a :mod:`multiprocessing` pool of N processes (forked when that is
               safe, i.e. the start method exists and CUDA is not initialised in this process; spawned otherwise)
``dask``       ``--cluster local[:N]``: an in-process :class:`distributed.LocalCluster` of N single-threaded worker
               processes (default: the usable cores); ``--cluster tcp://HOST:PORT``: a running ``dask scheduler``
               and its workers (the optional extra ``pip install 'attsvm[dask]'``)
=============  =================================================================================================

The contract (what makes the backends interchangeable): every task is independent and seeded by its inputs,
so ``Pool(...).map(fn, items)[i] == fn(items[i])`` on every backend, and the results are merged by index,

.. math:: \mathrm{map}(f, (x_0,\dots,x_{m-1})) = (f(x_0),\dots,f(x_{m-1})),

never in completion order. The same inputs therefore give the same numbers, bit for bit, serially, on local
processes and on a cluster (on the same kind of CPU and with the same package versions: a cluster whose workers run
another ``attsvm`` version is refused). Every worker runs torch with one thread (the cores go to parallel tasks).

``fn`` must be a module-level function importable by name in a fresh process (a function of :mod:`attsvm` or of
an installed module; a spec's own function goes through :func:`attsvm.experiments.call_each`). An exception that
``fn`` raises in a worker is raised again here (the same type when it can be pickled, else a ``RuntimeError``
with the type's name and the message). Ctrl-C: the workers ignore SIGINT (:func:`ignore_sigint`); the parent
stops them on leaving the ``with`` block.

``import attsvm.pool`` loads the standard library only; ``distributed`` is imported when a cluster is used.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .errors import InputError

DASK_EXTRA = "--cluster needs the optional extra: pip install 'attsvm[dask]'"
CONNECT_TIMEOUT_S = 10.0  # a scheduler that accepts the connection but does not answer within this is unreachable


# ---------------------------------------------------------------------------------------------- validation
def usable_cores() -> int:
    """The cores this process may run on (``len(os.sched_getaffinity(0))`` where available, else
    ``os.cpu_count()``)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def workers_of(value: int | str | None) -> int:
    """A worker count (``-n``): a positive int, a string of digits, or ``"auto"`` (:func:`usable_cores`);
    ``None`` is 1. Anything else is bad input (:class:`~attsvm.errors.InputError` naming the value)."""
    if value is None:
        return 1
    if isinstance(value, str):
        text = value.strip()
        if text == "auto":
            return usable_cores()
        if text.isdigit() and text.isascii() and int(text) >= 1:
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise InputError(f"-n must be a positive integer or auto, got {value!r}")


def _host_port(spec: str) -> tuple[str, int] | None:
    rest = spec[len("tcp://") :]
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not port.isascii():
        return None
    if host.startswith("[") and host.endswith("]"):  # tcp://[::1]:8786
        host = host[1:-1]
    if not host or any(c in host for c in "/[]@ ") or not 1 <= int(port) <= 65535:
        return None
    return host, int(port)


def check_cluster(spec: str) -> str:
    """A ``--cluster`` value: ``"local"``, ``"local:N"`` (N a positive integer) or ``"tcp://HOST:PORT"`` (PORT in
    1..65535), returned as given (without surrounding blanks). Anything else is bad input naming the value. No
    network access (:class:`Pool` connects)."""
    text = spec.strip() if isinstance(spec, str) else None
    if text is not None:
        if text == "local":
            return text
        if text.startswith("local:"):
            n = text[len("local:") :]
            if n.isdigit() and n.isascii() and int(n) >= 1:
                return text
        elif text.startswith("tcp://") and _host_port(text) is not None:
            return text
    raise InputError(f"--cluster must be local, local:N or tcp://HOST:PORT, got {spec!r}")


# ---------------------------------------------------------------------------------------------- workers
def ignore_sigint() -> None:
    """Worker initializer: Ctrl-C (SIGINT to the process group) is the parent's to handle, not the workers'
    (no worker tracebacks); the parent stops the pool (:func:`worker_pool`). Torch in the worker runs one thread
    (:func:`one_thread`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    one_thread()


def one_thread() -> None:
    """Torch with one intra-op thread in this process: set now when torch is loaded, else through
    ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``, which torch reads when it is first imported."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    else:
        os.environ["OMP_NUM_THREADS"] = "1"
        os.environ["MKL_NUM_THREADS"] = "1"


@contextlib.contextmanager
def worker_pool(mp_context: Any, processes: int) -> Iterator[Any]:
    """A ``multiprocessing`` pool whose workers ignore SIGINT (:func:`ignore_sigint`), terminated on leaving the
    block (also on ``KeyboardInterrupt``). SIGINT is blocked while the workers start, so that a Ctrl-C in that
    moment waits for the parent (it is not lost) and never reaches a worker before it ignores it."""
    block = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT]) if block else None
    try:
        pool = mp_context.Pool(processes, initializer=ignore_sigint)
    finally:
        if block:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    try:
        yield pool
    finally:
        pool.terminate()
        pool.join()


def start_context() -> Any:
    """The :mod:`multiprocessing` context for local workers: fork where it exists and CUDA is not initialised
    in this process (never fork a CUDA process), else spawn."""
    import multiprocessing as mp

    cuda_live = "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized()
    fork_ok = "fork" in mp.get_all_start_methods() and not cuda_live
    return mp.get_context("fork" if fork_ok else "spawn")


def run_task(job: tuple[Callable[[Any], Any], int, Any]) -> tuple[int, bool, Any]:
    """One task of :meth:`Pool.map` in a worker: ``(i, True, fn(x))``, or ``(i, False, exc)`` when ``fn`` raised
    (``exc`` made picklable: a ``RuntimeError`` with the type's name and message when the original is not)."""
    fn, i, x = job
    one_thread()
    try:
        return i, True, fn(x)
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:
            exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        return i, False, exc


def run_chunk(jobs: list[tuple[Callable[[Any], Any], int, Any]]) -> list[tuple[int, bool, Any]]:
    """Several tasks of :meth:`Pool.map` one after the other in a Dask worker (:func:`run_task` each; one Dask
    task), with the worker's allocator set for tensors first (:func:`keep_freed_memory`, once per process)."""
    global _MALLOC_SET
    if not _MALLOC_SET:
        _MALLOC_SET = True
        keep_freed_memory()
    return [run_task(job) for job in jobs]


_MALLOC_SET = False


def keep_freed_memory() -> bool:
    """glibc's allocator in this process keeps freed memory for reuse (``mallopt``: blocks up to 32 MiB from the
    heap, trimmed above 64 MiB free); ``False`` where there is no glibc. A Dask nanny starts its worker with
    ``MALLOC_TRIM_THRESHOLD_=65536``, which also fixes glibc's mmap threshold at 128 KiB: every temporary tensor of a
    GD step is then mapped and unmapped again (page faults), and GD runs at half speed (measured here: 300 steps of
    1024 runs at d = 20 take 3.9 s against 1.9 s in a local worker process; 1.9 s after this call). The numbers
    are the same either way."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
        return bool(libc.mallopt(m_mmap_threshold, 32 << 20)) and bool(libc.mallopt(m_trim_threshold, 64 << 20))
    except (OSError, AttributeError):
        return False


def worker_version() -> str:
    """``attsvm.__version__`` as a worker sees it (run on every worker of a cluster before any task)."""
    import attsvm

    return str(attsvm.__version__)


# ---------------------------------------------------------------------------------------------- the pool
def chunk_size(n: int, workers: int) -> int:
    r"""Items per task by default: about eight tasks per worker ($\max(1,\lfloor n/8w\rfloor)$)."""
    return max(1, n // (8 * max(1, workers)))


class Pool:
    """The workers of one command: ``with Pool(workers, cluster) as pool: pool.map(fn, items)``.

    ``workers`` (:func:`workers_of`: an int, a digit string or ``"auto"``; ``None``: 1) gives ``serial`` (1) or
    ``processes`` (more); ``cluster`` (:func:`check_cluster`) gives ``dask`` and decides the parallelism alone
    (``local:N``: N workers; ``local``: :func:`usable_cores`; ``tcp://...``: the workers the scheduler has).
    Giving both is bad input (:class:`~attsvm.errors.InputError`; ``local:N`` sizes a local cluster). Making a
    ``Pool`` starts nothing, so it is also how the commands validate ``-n`` and ``--cluster`` up front.
    ``size`` is the degree of parallelism (dask: the worker threads of the cluster);
    ``address`` is the scheduler's address (dask) or ``None``.

    Local processes start at the first :meth:`map` that needs them (forked then, so they see the modules imported
    until then) and stop on leaving the block; a cluster is started or connected to on entering it (an
    unreachable scheduler, a missing ``distributed`` package or workers of another ``attsvm`` version are bad
    input, :class:`~attsvm.errors.InputError`, before anything runs)."""

    def __init__(self, workers: int | str | None = None, cluster: str | None = None) -> None:
        if workers is not None and cluster is not None:
            raise InputError("-n/--workers and --cluster exclude each other (--cluster local:N: N local workers)")
        self.cluster = None if cluster is None else check_cluster(cluster)
        self.address: str | None = None
        if self.cluster is None:
            self.size = workers_of(workers)
            self.kind = "serial" if self.size == 1 else "processes"
        else:
            self.kind = "dask"
            self.size = int(self.cluster.split(":", 1)[1]) if self.cluster.startswith("local:") else 0
            if self.cluster == "local":
                self.size = usable_cores()
        self._mp: Any = None
        self._mp_cm: Any = None
        self._client: Any = None
        self._local: Any = None
        self._entered = False

    def __repr__(self) -> str:
        where = f", address={self.address!r}" if self.address else ""
        return f"Pool(kind={self.kind!r}, size={self.size}{where})"

    def describe(self) -> dict[str, Any]:
        """``{"kind", "size", "cluster", "address"}``: the backend, for manifests and reports."""
        return {"kind": self.kind, "size": self.size, "cluster": self.cluster, "address": self.address}

    # ------------------------------------------------------------------------------------------ lifetime
    def __enter__(self) -> Pool:
        self._entered = True
        if self.kind == "dask":
            try:
                self._connect()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the local processes, the client and the local cluster (idempotent)."""
        if self._mp_cm is not None:
            cm, self._mp_cm, self._mp = self._mp_cm, None, None
            cm.__exit__(None, None, None)
        client, self._client = self._client, None
        local, self._local = self._local, None
        with contextlib.suppress(Exception):
            if client is not None:
                client.close(timeout=5)
        with contextlib.suppress(Exception):
            if local is not None:
                local.close(timeout=5)
        self._entered = False

    def _connect(self) -> None:
        try:
            import distributed
        except ImportError:
            raise InputError(DASK_EXTRA) from None
        import logging

        for name in ("distributed", "distributed.nanny", "distributed.scheduler", "distributed.worker"):
            logging.getLogger(name).setLevel(logging.ERROR)  # no INFO lines on our stderr
        if self.cluster.startswith("local"):
            # workers started while SIGINT is ignored inherit that (a Ctrl-C is the parent's to handle)
            main = threading.current_thread() is threading.main_thread()
            old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
            try:
                with warnings.catch_warnings():
                    # the scheduler's HTTP server moves to a free port when 8787 is taken: not the user's concern
                    warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
                    self._local = distributed.LocalCluster(
                        n_workers=self.size,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.ERROR,  # the workers' log lines (e.g. tasks cancelled by Ctrl-C)
                        env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                    )
                self._client = distributed.Client(self._local, set_as_default=False)
            finally:
                if main:
                    signal.signal(signal.SIGINT, old)
            self.address = str(self._local.scheduler_address)
        else:
            host, port = _host_port(self.cluster)
            try:  # a refused connection fails at once (the client would retry until its timeout)
                socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
                self._client = distributed.Client(self.cluster, timeout=f"{CONNECT_TIMEOUT_S}s", set_as_default=False)
            except (OSError, TimeoutError) as exc:
                why = (exc.strerror or type(exc).__name__) if isinstance(exc, OSError) else "timed out"
                raise InputError(f"--cluster {self.cluster}: cannot reach a dask scheduler ({why})") from None
            self.address = self.cluster
            try:
                self._client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
            except (TimeoutError, OSError):
                raise InputError(f"--cluster {self.cluster}: the scheduler has no workers") from None
        try:
            versions = self._client.run(worker_version)
        except Exception as exc:
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise InputError(
                f"--cluster {self.cluster}: its workers cannot run attsvm ({type(exc).__name__}: {msg})"
            ) from None
        import attsvm

        other = sorted({v for v in versions.values() if v != attsvm.__version__})
        if other:
            raise InputError(
                f"--cluster {self.cluster}: its workers run attsvm {', '.join(other)}, this is {attsvm.__version__}"
            )
        if self.cluster.startswith("tcp://"):
            self.size = sum(self._client.nthreads().values())

    # ------------------------------------------------------------------------------------------ map
    def map(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        on_result: Callable[[int, Any], None] | None = None,
        chunk: int | None = None,
    ) -> list[Any]:
        """``[fn(x) for x in items]``, in the order of ``items`` (merged by index), on this pool's backend.

        ``on_result(i, result)`` is called here as each result arrives (in completion order; for progress
        lines). An exception raised by ``fn`` is raised here (the remaining tasks are dropped). ``chunk``: items
        per task (default :func:`chunk_size`, about eight tasks per worker; 1 for few long items, such as claims,
        so that two long ones never share a task)."""
        items = list(items)
        if self.kind == "serial" or not items:
            out = []
            for i, x in enumerate(items):
                out.append(fn(x))
                if on_result is not None:
                    on_result(i, out[-1])
            return out
        jobs = [(fn, i, x) for i, x in enumerate(items)]
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
            raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
        size = chunk_size(len(jobs), self.size) if chunk is None else chunk
        if self.kind == "processes":
            return self._map_processes(jobs, on_result, size)
        return self._map_dask(jobs, on_result, size)

    def _collect(self, results: Iterable[tuple[int, bool, Any]], n: int, on_result) -> list[Any]:
        out: list[Any] = [None] * n
        for i, ok, value in results:
            if not ok:
                raise value
            out[i] = value
            if on_result is not None:
                on_result(i, value)
        return out

    def _map_processes(self, jobs: list, on_result, chunk: int) -> list[Any]:
        if not self._entered:  # used outside a `with` block: processes for this map only
            with self:
                return self._map_processes(jobs, on_result, chunk)
        if self._mp is None:
            self._mp_cm = worker_pool(start_context(), self.size)
            self._mp = self._mp_cm.__enter__()
        try:
            return self._collect(self._mp.imap_unordered(run_task, jobs, chunksize=chunk), len(jobs), on_result)
        except BaseException:
            # tasks of this map may still be running: stop them (the next map starts fresh processes)
            cm, self._mp_cm, self._mp = self._mp_cm, None, None
            cm.__exit__(None, None, None)
            raise

    def _map_dask(self, jobs: list, on_result, chunk: int) -> list[Any]:
        if self._client is None:
            raise RuntimeError("a dask Pool must be used inside its `with` block")
        import distributed

        # the same chunks as the processes backend: a task per item would cost the scheduler more than a short
        # item takes (e.g. 10^5 one-millisecond SVM checks)
        tasks = [jobs[a : a + chunk] for a in range(0, len(jobs), chunk)]
        futures = self._client.map(run_chunk, tasks, pure=False)
        try:
            done = (r for f in distributed.as_completed(futures, loop=self._client.loop) for r in f.result())
            return self._collect(done, len(jobs), on_result)
        finally:
            self._client.cancel(futures)
