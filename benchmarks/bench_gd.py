r"""Benchmarks of the batched GD engine (issues 3, 31), printed side by side with its peers.

1. The paper's E3 setting (n=6, T=8, d=10, lr 0.1, 2000 normalised steps; :mod:`e3`) for a sweep of ``--seeds``
   data sets (default 1000), on $W$ and on $(K,Q)$ (``--params``), timed in one run:

   * ``attsvm.gd.run`` with each kernel (``--kernels``: ``fused``, the compiled CPU kernel that ``kernel="auto"``
     takes, and ``torch``), as a whole process (interpreter start, imports, data, run) with the engine's own time
     inside it, one process with ``--threads`` threads (a one-step run first loads the kernel from numba's cache,
     timed apart as JAX's compilation is) and sharded over ``--workers`` single-threaded processes
     (:func:`attsvm.gd.shards.run_sharded`, bit-identical to the one-process run);
   * ``--peers`` (default all): ``jax``, the JAX program a performance-minded user would write
     (:mod:`peer_jax`: float64, ``jit`` of ``vmap`` over the data sets, ``lax.fori_loop`` over the steps, the
     log-domain direction written from the equations), its compile time apart from its run time, on one XLA CPU
     device (XLA runs it on one core) and with the batch sharded over one host device per core, and beside it
     ``jax.grad`` of the textbook loss (how it ends: the softmax underflows, the gradient goes inexact, then exactly
     zero); ``torch``, the batched eager torch program (:mod:`peer_torch`: one tensor over all data sets, no per-run
     loop); ``loop``, a per-run autograd + ``torch.optim.SGD`` loop with the normalised gradient, timed on
     ``--baseline-runs`` runs and scaled to the sweep (their median times B).

   Each line prints the achieved GFLOP/s — the arithmetic of the four contractions per step and data set,
   $4Nd(d+T)$ for $W$ (logits $x^\top Wz$ and the gradient $\sum_t\omega_tx_tz^\top$) plus $6d^2m$ for $(K,Q)$
   ($KQ^\top$, $GQ$, $G^\top K$), over the run's own time — its fraction of this machine's float64 peak
   (:mod:`machine`: computed from the CPU's frequency and vector units, and measured by an FMA loop; the computed
   nominal peak, the larger, is the denominator) and its time over attsvm's (fused engine, one process). Each peer's
   trajectory is checked against attsvm's fused kernel: the iterates at a few steps and the final one, max relative
   difference per data set (max over entries / max |entry|) within ``tol("batch_rtol")``. On $(K,Q)$ normalised GD
   amplifies rounding (docs/gd.md, "Kernels": attsvm's own two kernels part after about 150 steps here), so there
   the check covers the first :data:`KQ_CHECK_STEPS` steps, and the final difference is printed beside that of
   attsvm's torch kernel. The fused kernel's compiled code is cached on disk by numba; ``--cold`` also times one
   fused process with an empty cache (the first run after an install, compilation included).
2. Precision: from W0 = 0 on a paper-law instance, 1e5 normalised steps; 1 - corr(W, W^mm) with W^mm from
   cvxpy + Clarabel; and a plain float64 normalised-GD loop (numpy closed form) that stalls once the
   gradient underflows to zero.
3. ``--compile-probe``: one plain normalised-GD step on $W$ written as a single function, eager against
   ``torch.compile`` (inductor, CPU): compile time and ms per step (why the engine stays eager on CPU).

Run: ``python benchmarks/bench_gd.py`` (``--quick`` for a smaller smoke run, under a minute). The JAX peer needs the
optional extra ``bench`` (``pip install -c constraints.txt '.[bench]'``); without JAX it is skipped with a line
saying so.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules when run as a script

import e3  # noqa: E402
import machine  # noqa: E402
import peer_torch  # noqa: E402
from e3 import LR, STEPS, D, N, T, flops_per_step  # noqa: E402

from attsvm import generate, model  # noqa: E402
from attsvm.gd import run  # noqa: E402
from attsvm.tolerances import tol  # noqa: E402

#: the steps over which (K,Q) trajectories are held to tol("batch_rtol") (module docstring)
KQ_CHECK_STEPS = 100
#: iterates compared within the checked steps (plus the final one)
CHECK_ROWS = 4
JAX_MISSING = "JAX peer skipped: pip install -c constraints.txt '.[bench]'"


def baseline_run(ds, param: str, steps: int) -> float:
    """One straightforward run: autograd loss from the definition, normalised gradient, torch.optim.SGD."""
    X, Y, Z, v = (torch.tensor(np.array(a)) for a in (ds.X, ds.Y, ds.Z, ds.v))
    if param == "W":
        params = [torch.zeros(D, D, dtype=torch.float64, requires_grad=True)]
    else:
        g = torch.Generator().manual_seed(0)
        K = (0.1 * torch.randn(D, D, generator=g, dtype=torch.float64)).requires_grad_()
        params = [K, torch.zeros(D, D, dtype=torch.float64, requires_grad=True)]
    opt = torch.optim.SGD(params, lr=LR)
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        W = params[0] if param == "W" else params[0] @ params[1].T
        s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), dim=-1)
        u = Y * torch.einsum("nt,ntd,d->n", s, X, v)
        loss = torch.nn.functional.softplus(-u).mean()
        loss.backward()
        with torch.no_grad():
            for p in params:
                nrm = p.grad.norm()
                if nrm > 0:
                    p.grad /= nrm
        opt.step()
    return time.perf_counter() - t0


BATCHED = """
import time; t0 = time.perf_counter()
import numpy as np
from attsvm import generate
from attsvm.gd import run
ds = generate.paper_law({n}, {T}, {d}, seed=0, B={B})
kw = dict(param="{param}", algo="ngd", lr={lr}, steps={steps}, kernel="{kernel}")
if {workers} > 1:
    from attsvm.gd.shards import run_sharded
    from attsvm.pool import Pool
    with Pool(workers={workers}) as pool:
        t1 = time.perf_counter()
        res = run_sharded(ds, pool, **kw)
        inner = time.perf_counter() - t1
    load = 0.0
else:  # a one-step run first: loads (or compiles) the kernel, timed apart as JAX's compilation is
    t1 = time.perf_counter()
    run(generate.paper_law({n}, {T}, {d}, seed=0), threads={threads}, **{{**kw, "steps": 1}})
    load = time.perf_counter() - t1
    res = run(ds, threads={threads}, **kw)
    inner = res.seconds
if {save!r}:
    np.savez({save!r}, **{{k: getattr(res, k) for k in ("W", "K", "Q") if getattr(res, k) is not None}})
print(inner, float(res.max_softmax.mean()), load)
"""


def batched_process(
    param: str,
    B: int,
    steps: int,
    threads: int,
    workers: int,
    kernel: str,
    env: dict | None = None,
    save: str = "",
) -> tuple[float, float, float, float]:
    """Wall time of a whole process running the sweep, the engine's own time inside it, a summary number (the mean
    final max softmax: the two ways of a kernel must print the same) and, in one process, the time of a one-step
    run before it (loading or compiling the kernel; 0 when sharded); ``save``: an ``.npz`` path where the process
    leaves its final parameters."""
    code = BATCHED.format(
        n=N, T=T, d=D, B=B, param=param, lr=LR, steps=steps, threads=threads, workers=workers, kernel=kernel,
        save=save,
    )  # fmt: skip
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    inner, summary, load = (float(x) for x in out.split())
    return time.perf_counter() - t0, inner, summary, load


def rel_diff(a: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Per data set: max |a - ref| over the entries / max |ref| (B,)."""
    a, ref = (np.asarray(x).reshape(len(ref), -1) for x in (a, ref))
    return np.max(np.abs(a - ref), axis=1) / np.max(np.abs(ref), axis=1)


def one_minus_corr(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """1 - corr(A_b, B_b) per data set (B,)."""
    A, B = (np.asarray(x).reshape(len(x), -1) for x in (A, B))
    return 1.0 - np.sum(A * B, 1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1))


def keys_of(param: str) -> tuple[str, ...]:
    return ("W",) if param == "W" else ("K", "Q")


class Reference:
    """attsvm's fused kernel on the sweep: the iterates at the check steps (``record_params``) and the final ones
    of the timed process (the check of every peer)."""

    def __init__(self, ds, param: str, steps: int, threads: int, finals: dict[str, np.ndarray]) -> None:
        self.param = param
        self.check_steps = steps if param == "W" else min(steps, KQ_CHECK_STEPS)
        every = max(1, self.check_steps // CHECK_ROWS)
        self.check_steps = every * (self.check_steps // every)
        res = run(ds, param=param, algo="ngd", lr=LR, steps=self.check_steps, kernel="fused", threads=threads,
                  record_every=every, record_params=True)  # fmt: skip
        tr = res.trajectory
        self.marks = [int(k) for k in tr["step"][1:]]
        self.rows = {int(k): {p: tr[p][r] for p in keys_of(param)} for r, k in enumerate(tr["step"]) if k > 0}
        self.steps = steps
        self.finals = finals

    def boundaries(self) -> list[int]:
        """The step counts at which a peer's iterate is read: the check steps, then the last step."""
        return self.marks + ([self.steps] if self.steps > self.marks[-1] else [])

    def check(self, iterates: dict[int, dict[str, np.ndarray]]) -> tuple[float, float, bool]:
        """``(max rel diff over the check steps (and the final, on W), final max rel diff, PASS)``."""
        within = max(float(rel_diff(iterates[k][p], self.rows[k][p]).max()) for k in self.marks for p in self.rows[k])
        final = max(float(rel_diff(iterates[self.steps][p], self.finals[p]).max()) for p in keys_of(self.param))
        held = max(within, final) if self.param == "W" else within
        return held, final, held <= tol("batch_rtol")

    def describe(self, held: float, final: float, ok: bool, torch_final: float | None) -> str:
        rows = ", ".join(map(str, self.marks))
        if self.param == "W":
            what = f"iterates at steps {rows}{'' if self.steps == self.marks[-1] else f', {self.steps}'}"
            tail = ""
        else:
            what = f"iterates at steps {rows}"
            other = "" if torch_final is None else f"; attsvm torch kernel vs fused: {torch_final:.1e}"
            tail = f" | final (step {self.steps}, rounding amplified, not held): {final:.1e}{other}"
        verdict = "PASS" if ok else "FAIL"
        held_text = f"max rel diff {held:.1e} {'<=' if ok else '>'} tol('batch_rtol') = {tol('batch_rtol'):.0e}"
        return f"trajectory vs attsvm fused, {what}: {held_text}: {verdict}{tail}"


def timed_segments(advance: Callable, th0, bounds: list[int], read: Callable, repeat: int) -> tuple[float, dict]:
    """Run ``advance(th, k)`` from ``th0`` over the segments up to each of ``bounds``: the time of the steps only (the
    iterates are read with ``read`` outside the timer), the least of ``repeat`` runs, and the iterates of the
    first."""
    best, first = float("inf"), None
    for _ in range(repeat):
        seconds, done, out, th = 0.0, 0, {}, th0
        for b in bounds:
            t0 = time.perf_counter()
            th = advance(th, b - done)
            seconds += time.perf_counter() - t0
            out[b] = read(th)
            done = b
        best, first = min(best, seconds), first or out
    return best, first


class Line:
    """One timed line: GFLOP/s, fraction of the peak, time over attsvm's."""

    def __init__(self, param: str, B: int, steps: int, peak: float, attsvm_seconds: float) -> None:
        self.flop = flops_per_step(param) * B * steps
        self.peak, self.ref = peak, attsvm_seconds

    def rate(self, seconds: float) -> str:
        g = self.flop / seconds / 1e9
        return f"{g:6.2f} GFLOP/s, {100 * g / self.peak:5.2f} % of peak"

    def ratio(self, seconds: float) -> str:
        return f"time / attsvm fused {seconds / self.ref:5.2f}x"


def jax_peer(ds, param: str, steps: int, ref: Reference, line: Line, torch_final: float | None, repeat: int) -> None:
    """The JAX peer (log domain) on one CPU device and sharded over one device per core, and ``jax.grad`` of the
    textbook loss, timed and checked (module docstring)."""
    cores = len(os.sched_getaffinity(0))
    if "jax" not in sys.modules:  # one XLA host device per core (XLA runs this program on one core per device)
        flag = f"--xla_force_host_platform_device_count={cores}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    try:
        import jax
        import peer_jax as pj
    except ImportError:
        print(f"   {JAX_MISSING}")
        return
    X, Z, gam = e3.problem(ds)
    args = pj.device_args(e3.initial(param, len(X)), X, Z, gam, param)
    ndev = max(n for n in range(1, min(cores, len(jax.devices())) + 1) if len(X) % n == 0)
    variants = [(False, "1 device", args)]
    if ndev > 1:
        variants.append((False, f"sharded over {ndev} devices", pj.sharded(args, ndev)))
    variants.append((True, "", args))
    for textbook, where, (th0, Xj, Zj, gj) in variants:
        runner = pj.make_runner(param, LR, textbook=textbook)
        t0 = time.perf_counter()
        compiled = runner.lower(th0, Xj, Zj, gj, 0).compile()
        ctime = time.perf_counter() - t0
        state = {}

        def advance(th, k, compiled=compiled, state=state, Xj=Xj, Zj=Zj, gj=gj):
            th, zero = compiled(th, Xj, Zj, gj, k)
            jax.block_until_ready(th)
            state["zero"] = zero
            return th

        read = lambda th: {p: np.asarray(a) for p, a in zip(keys_of(param), th)}  # noqa: E731
        bounds = ref.boundaries() if not textbook else [steps]
        sec, its = timed_segments(advance, th0, bounds, read, repeat)
        if not textbook:
            print(
                f"   {f'JAX peer (log domain), {where}':46s}: compile {ctime:5.2f} s, run"
                f" {sec:6.2f} s | {line.rate(sec)} | {line.ratio(sec)}"
            )
            print(f"      {ref.describe(*ref.check(its), torch_final)}")
        else:
            fin = its[steps]
            Wt = fin["W"] if param == "W" else fin["K"] @ np.swapaxes(fin["Q"], -1, -2)
            Wa = ref.finals["W"]
            g = one_minus_corr(Wt, Wa)
            stalled = int(np.sum(np.asarray(state["zero"])))
            print(
                f"   {'JAX jax.grad of the textbook loss, 1 device':46s}: compile {ctime:5.2f} s, run {sec:6.2f} s"
                f" | ends: 1-corr(W, attsvm's W) median {np.median(g):.1e}, max {np.max(g):.1e};"
                f" gradient exactly 0 (stalled) in {stalled} of {len(g)} data sets"
            )


def torch_peer(ds, param: str, steps: int, threads: int, ref: Reference, line: Line, torch_final, repeat: int) -> None:
    """The batched eager torch peer (log domain), timed and checked."""
    X, Z, gam = (torch.tensor(a) for a in e3.problem(ds))
    th0 = {k: torch.tensor(a) for k, a in e3.initial(param, len(X)).items()}
    advance = lambda th, k: peer_torch.run(th, X, Z, gam, LR, k)  # noqa: E731
    read = lambda th: {k: a.numpy().copy() for k, a in th.items()}  # noqa: E731
    sec, its = timed_segments(advance, th0, ref.boundaries(), read, repeat)
    print(
        f"   {'batched eager torch peer (log domain)':46s}: run {sec:6.2f} s"
        f" | {line.rate(sec)} | {line.ratio(sec)} ({threads} threads)"
    )
    print(f"      {ref.describe(*ref.check(its), torch_final)}")


def sweep(param: str, a: argparse.Namespace, steps: int, peak: float) -> None:
    B, threads, workers = a.seeds, a.threads, a.workers
    kernels, peers = a.kernels.split(","), a.peers.split(",")
    ways = [("1 process", threads, 1)] + ([(f"{workers} processes", 1, workers)] if workers > 1 else [])
    print(
        f"E3 sweep param={param} B={B} steps={steps} ({flops_per_step(param)} flop per data set and step;"
        f" times: least of {a.repeat}; load average {os.getloadavg()[0]:.1f})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        if a.cold:  # an empty numba cache: the kernel is compiled in this process
            env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
            runs.append((f"fused, 1 process, {threads} threads, empty cache", *batched_process(
                param, B, steps, threads, 1, "fused", env)))  # fmt: skip
        for kern in ("fused", *[k for k in kernels if k != "fused"]):
            for label, thr, w in ways:
                save = os.path.join(tmp, f"{kern}.npz") if w == 1 else ""
                name = f"{kern}, {label}{f', {thr} threads' if w == 1 else ''}"
                timed = [batched_process(param, B, steps, thr, w, kern, save=save) for _ in range(a.repeat)]
                runs.append((name, *(min(t[i] for t in timed) for i in (0, 1)), timed[0][2], min(t[3] for t in timed)))
        finals = {k: v for k, v in np.load(os.path.join(tmp, "fused.npz")).items()}
        torch_final = None
        if os.path.exists(os.path.join(tmp, "torch.npz")):
            tf = np.load(os.path.join(tmp, "torch.npz"))
            torch_final = max(float(rel_diff(tf[p], finals[p]).max()) for p in keys_of(param))
    line = Line(param, B, steps, peak, runs[1 if a.cold else 0][2])
    base = None
    if "loop" in peers:
        per = [baseline_run(generate.paper_law(N, T, D, seed=s), param, steps) for s in range(a.baseline_runs)]
        base = float(np.median(per)) * B  # the median: one run slowed by other jobs does not set the scale
    for label, wall, inner, summary, load in runs:
        up = "" if base is None else f" | speed-up over the loop {base / wall:6.1f}x"
        ld = f"kernel load {load:5.2f} s, " if load else ""
        print(
            f"   attsvm {label:39s}: whole process {wall:6.2f} s ({ld}engine {inner:6.2f} s | {line.rate(inner)})"
            f"{up} | mean final max s {summary:.15f}"
        )
    ds = e3.dataset(B)
    ref = Reference(ds, param, steps, threads, finals)
    if "jax" in peers:
        jax_peer(ds, param, steps, ref, line, torch_final, a.repeat)
    if "torch" in peers:
        torch_peer(ds, param, steps, threads, ref, line, torch_final, a.repeat)
    if base is not None:
        print(
            f"   per-run autograd+SGD loop (1 data set at a time): median {np.median(per) * 1e3:7.1f} ms/run"
            f" (mean {np.mean(per) * 1e3:.1f}, {len(per)} runs) x {B} = {base:8.1f} s | {line.ratio(base)}"
        )


def peak_line(threads: int) -> float:
    """Print this machine's computed and measured float64 peak; return the denominator (the larger)."""
    cpu = machine.this_cpu()
    one = machine.measured_peak(1)
    alln = machine.measured_peak(cpu.cores)
    den = max(cpu.peak_gflops, alln)
    which = "the computed nominal peak" if den == cpu.peak_gflops else "the measured peak"
    print(f"float64 peak, computed: {cpu.describe()}")
    print(
        f"float64 peak, measured (numba FMA loop): {one:.1f} GFLOP/s on 1 thread, {alln:.1f} on {cpu.cores}"
        f" ({100 * alln / cpu.peak_gflops:.0f} % of the computed); fractions below are of {which}, {den:.1f} GFLOP/s"
    )
    return den


PROBE_B = 1000


def compile_probe(steps: int) -> None:
    """One plain normalised-GD step on W as a single function: eager vs torch.compile (inductor, CPU)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(PROBE_B, N, T, D, dtype=torch.float64, generator=g)
    Z = torch.randn(PROBE_B, N, D, dtype=torch.float64, generator=g)
    gam = torch.randn(PROBE_B, N, T, dtype=torch.float64, generator=g)

    def one_step(W: torch.Tensor) -> torch.Tensor:
        a = torch.matmul(X, torch.matmul(Z, W.transpose(-1, -2)).unsqueeze(-1)).squeeze(-1)
        s = torch.softmax(a, dim=-1)
        u = (s * gam).sum(-1)
        w = (-torch.sigmoid(-u) / N).unsqueeze(-1) * s * (gam - u.unsqueeze(-1))
        G = torch.matmul(torch.matmul(X.transpose(-1, -2), w.unsqueeze(-1)).squeeze(-1).transpose(-1, -2), Z)
        return W - LR * G / torch.linalg.vector_norm(G.flatten(1), dim=-1).view(-1, 1, 1)

    def per_step(f) -> float:
        W = f(torch.zeros(PROBE_B, D, D, dtype=torch.float64))
        t0 = time.perf_counter()
        for _ in range(steps):
            W = f(W)
        return (time.perf_counter() - t0) / steps * 1e3

    eager = per_step(one_step)
    t0 = time.perf_counter()
    try:
        compiled = torch.compile(one_step, dynamic=False)
        compiled(torch.zeros(PROBE_B, D, D, dtype=torch.float64))
    except Exception as exc:  # no C++ compiler, or inductor unsupported here
        print(f"compile probe: torch.compile failed here ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
        return
    ctime = time.perf_counter() - t0
    print(
        f"compile probe (B={PROBE_B}, one W step as one function, {torch.get_num_threads()} threads): eager"
        f" {eager:.2f} ms/step; torch.compile {per_step(compiled):.2f} ms/step after {ctime:.1f} s of compilation"
    )


def wmm(ds) -> np.ndarray:
    import cvxpy as cp

    X, Z, a = np.asarray(ds.X), np.asarray(ds.Z), ds.opt
    W = cp.Variable((D, D))
    cons = [(X[i, a[i]] - X[i, t]) @ W @ Z[i] >= 1 for i in range(N) for t in range(T) if t != a[i]]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), cons)
    prob.solve(solver=cp.CLARABEL)
    if prob.status != cp.OPTIMAL:
        raise RuntimeError(f"Att-SVM solve status {prob.status}")
    return W.value


def plain_float64_loop(ds, steps: int, Wm: np.ndarray) -> tuple[int, float, float]:
    """Normalised GD with the plain float64 closed form; stops when the gradient is exactly zero."""
    W = np.zeros((D, D))
    for k in range(steps):
        G = model.grad_W(ds, W)
        nrm = np.linalg.norm(G)
        if nrm == 0.0:
            return k, float(np.linalg.norm(W)), float(1 - model.corr(W, Wm))
        W = W - LR * G / nrm
    return steps, float(np.linalg.norm(W)), float(1 - model.corr(W, Wm))


def precision(steps: int, seed: int) -> None:
    ds = generate.paper_law(N, T, D, seed=seed)
    Wm = wmm(ds)
    t0 = time.perf_counter()
    res = run(ds, steps=steps, record_every=steps // 10, targets={"mm": Wm})  # the fused kernel (auto)
    sec = time.perf_counter() - t0
    gap = 1 - res.trajectory["corr:mm"][:, 0]
    ok = bool(np.array_equal(res.selection[0], ds.opt))
    print(
        f"precision (paper law n={N} T={T} d={D} seed={seed}, W0=0): {steps} normalised steps in {sec:.1f} s,"
        f" ||W||={res.norm[0]:.1f}, 1-corr(W,W^mm)={gap[-1]:.2e} (selection = opt: {ok})"
    )
    print("   1-corr every", steps // 10, "steps:", " ".join(f"{g:.1e}" for g in gap[1:]))
    k, nrm, g = plain_float64_loop(ds, steps, Wm)
    print(f"   plain float64 normalised-GD loop: gradient exactly 0 after {k} steps at ||W||={nrm:.1f}, 1-corr={g:.2e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--baseline-runs", type=int, default=5)
    ap.add_argument("--precision-steps", type=int, default=100_000)
    ap.add_argument("--precision-seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run, under a minute)")
    ap.add_argument("--params", default="W,KQ", help="parametrisations of the sweep, comma-separated (W,KQ)")
    ap.add_argument("--peers", default="jax,torch,loop", help="peers of attsvm, comma-separated (jax,torch,loop)")
    ap.add_argument("--workers", type=int, default=2, help="processes of the sharded sweep (1: only one process)")
    ap.add_argument("--compile-probe", action="store_true", help="also time torch.compile on one W step")
    ap.add_argument("--kernels", default="fused,torch", help="kernels of the sweep, comma-separated (fused,torch)")
    ap.add_argument("--cold", action="store_true", help="also one fused process with an empty numba cache")
    ap.add_argument("--skip-precision", action="store_true", help="only the sweeps")
    ap.add_argument("--repeat", type=int, default=1, help="time attsvm and the peers this many times, keep the least")
    ap.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="threads of attsvm and the torch peers (default: every core; the engine's own default is 1)",
    )
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    steps = STEPS
    if a.quick:
        a.seeds, a.baseline_runs, a.precision_steps, a.workers, steps = 50, 2, 10_000, 1, 200
    peak = peak_line(a.threads)
    for param in a.params.split(","):
        sweep(param, a, steps, peak)
    if a.compile_probe:
        compile_probe(50 if a.quick else 200)
    if not a.skip_precision:
        precision(a.precision_steps, a.precision_seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
