r"""This machine's float64 peak: computed from the CPU's description, and measured by an FMA-throughput loop.

**Computed (nominal) peak**

.. math:: P=\text{cores}\times f\times\text{lanes}\times2\times\text{FMA units},

the factor 2 for the multiply and the add of one fused multiply-add. From ``/proc/cpuinfo``: the model name, the
flags (``avx512f``: 8 float64 lanes per vector; ``avx2`` or ``fma``: 4; otherwise SSE2: 2) and ``cpu MHz``; the
frequency $f$ is ``lscpu``'s "CPU max MHz" when it reports one (the turbo ceiling), else ``cpu MHz`` (under KVM the
nominal frequency the hypervisor reports, not a measured one). Cores: the CPUs this process may run on
(``os.sched_getaffinity``), each counted as a core with its own vector units (an upper bound if two of them were
hyperthreads of one core). **Assumption**: 2 FMA units per core with AVX2 or AVX-512 (Intel Skylake-SP and later
server cores, ports 0+1 fused and port 5; AMD Zen 4 executes a 512-bit FMA as two 256-bit halves, so counting it as
8 lanes x 2 units overstates it by 2x — the computed value is then an upper bound), 1 without FMA (one add and one
multiply port: the same $2\times$lanes flops per cycle).

**Measured peak** (:func:`measured_peak`): a numba loop of independent multiply-add chains, 8 steps per load and
store of an accumulator (fastmath: LLVM contracts them to FMAs and vectorises across the chains), on one thread per
core; what the compiler and the turbo of the moment reach, and a check of the computed value's order.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

#: FMA units per core assumed when the CPU has FMA (module docstring)
FMA_UNITS = 2


@dataclass(frozen=True)
class CPU:
    """What the computed peak reads: model name, flags, frequency (MHz) and where it came from, cores."""

    model: str
    flags: frozenset[str]
    mhz: float
    mhz_source: str
    cores: int

    @property
    def lanes(self) -> int:
        """float64 lanes of the widest vector: 8 (AVX-512), 4 (AVX2 / FMA), 2 (SSE2)."""
        return vector_lanes(self.flags)

    @property
    def fma_units(self) -> int:
        """FMA units per core (:data:`FMA_UNITS` with FMA, else 1: an add and a multiply port)."""
        return FMA_UNITS if ("fma" in self.flags or "avx512f" in self.flags) else 1

    @property
    def peak_gflops(self) -> float:
        r"""$\text{cores}\times f\times\text{lanes}\times2\times\text{FMA units}$ in GFLOP/s."""
        return peak_gflops(self.cores, self.mhz / 1000.0, self.lanes, self.fma_units)

    def describe(self) -> str:
        virt = ", under a hypervisor" if "hypervisor" in self.flags else ""
        return (
            f"{self.model}{virt}: {self.cores} cores x {self.mhz / 1000:.2f} GHz ({self.mhz_source}) x {self.lanes}"
            f" float64 lanes x 2 (FMA) x {self.fma_units} FMA units/core (assumed) = {self.peak_gflops:.1f} GFLOP/s"
        )


def vector_lanes(flags: frozenset[str] | set[str]) -> int:
    """float64 lanes of the widest vector the flags announce."""
    if "avx512f" in flags:
        return 8
    if "avx2" in flags or "fma" in flags or "avx" in flags:
        return 4
    return 2


def peak_gflops(cores: int, ghz: float, lanes: int, fma_units: int) -> float:
    r"""$\text{cores}\times\text{GHz}\times\text{lanes}\times2\times\text{FMA units}$."""
    return cores * ghz * lanes * 2 * fma_units


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str], float]:
    """``(model name, flags, cpu MHz)`` of the first processor listed in a ``/proc/cpuinfo`` text."""
    first = text.strip().split("\n\n")[0]
    fields = {}
    for line in first.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        return fields["model name"], frozenset(fields["flags"].split()), float(fields["cpu MHz"])
    except KeyError as exc:
        raise ValueError(f"/proc/cpuinfo text without {exc.args[0]!r}") from exc


def lscpu_max_mhz(text: str | None = None) -> float | None:
    """``lscpu``'s "CPU max MHz" (``text``: its output; default: run it), or None when it reports none."""
    if text is None:
        if shutil.which("lscpu") is None:
            return None
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"^CPU max MHz:\s*([0-9.]+)", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def this_cpu(cpuinfo: str | None = None, lscpu: str | None = None, cores: int | None = None) -> CPU:
    """This machine's :class:`CPU`, or the one the given ``/proc/cpuinfo`` and ``lscpu`` texts and core count
    describe (each left out is read from this machine)."""
    if cpuinfo is None:
        with open("/proc/cpuinfo") as fh:
            cpuinfo = fh.read()
    model, flags, mhz = parse_cpuinfo(cpuinfo)
    top = lscpu_max_mhz(lscpu)  # None: run lscpu here
    if top is not None and top > 0:
        mhz, src = top, "lscpu max MHz"
    else:
        src = "cpuinfo MHz" + (", nominal under KVM" if "hypervisor" in flags else "")
    n = cores if cores is not None else len(os.sched_getaffinity(0))
    return CPU(model, flags, mhz, src, n)


# ---------------------------------------------------------------------- measured
CHAINS = 128  # independent multiply-add chains (16 vectors of 8 lanes: more than FMA latency x units)
DEPTH = 8  # multiply-adds per chain between a load and a store of its accumulator


def _fma_kernel():
    from numba import njit

    @njit(fastmath=True, nogil=True, cache=False)
    def chains(acc, a, b, reps):  # DEPTH = 8 multiply-adds per load and store
        for _ in range(reps):
            for j in range(acc.shape[0]):
                x = acc[j]
                x = x * a + b
                x = x * a + b
                x = x * a + b
                x = x * a + b
                x = x * a + b
                x = x * a + b
                x = x * a + b
                x = x * a + b
                acc[j] = x
        return acc

    return chains


def measured_peak(threads: int, seconds: float = 0.3) -> float:
    r"""GFLOP/s of :data:`CHAINS` independent chains of :data:`DEPTH` steps $x\leftarrow ax+b$ (2 flops each) on
    ``threads`` threads (the kernel releases the GIL), best of 3 timings of about ``seconds`` each."""
    chains = _fma_kernel()
    accs = [np.ones(CHAINS) for _ in range(threads)]
    chains(accs[0], 0.999999, 1e-6, 10)  # compile
    reps = 10_000
    while True:  # calibrate one thread to about `seconds`
        t0 = time.perf_counter()
        chains(accs[0], 0.999999, 1e-6, reps)
        if time.perf_counter() - t0 > seconds / 4:
            break
        reps *= 4
    reps = int(reps * seconds / max(time.perf_counter() - t0, 1e-9))
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(3):
            t0 = time.perf_counter()
            list(pool.map(lambda x: chains(x, 0.999999, 1e-6, reps), accs))
            best = min(best, time.perf_counter() - t0)
    return 2.0 * DEPTH * CHAINS * reps * threads / best / 1e9
