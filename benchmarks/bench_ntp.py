"""The graph SVM of next-token prediction (``attsvm solve --program ntp``, THEORY §7): attsvm (certified) side by
side with the straightforward cvxpy models of the same program solved by SCS and by Clarabel.

For each size (n,T,K,d) and seed: the generator's data (``attsvm.ntp.generate.ntp``, ``graph="cyclic"``: at least
one equality), the deduplicated constraints of ``attsvm.ntp.graph.graph_constraints``, and per solver the wall
time (median over the repeats of each instance, then over the instances), the solver status, the largest
constraint violation of the returned W (inequalities ``max(0, 1 - margin)`` and equalities ``|margin|``, computed
in exact integer arithmetic from the float64 W and the exact embedding differences, not by any solver) and the
relative gap ``(||W||_F^2 - OPT) / OPT`` to attsvm's certified optimum OPT (an exact rational). The cvxpy times
include building the model (what a user of cvxpy pays); attsvm's include building the constraints, the float
solve and the exact certificate. ``--nuc`` adds the nuclear program (attsvm: proved bracket; the bracket's
relative width is printed instead of a gap to an exact optimum).

Run: ``python benchmarks/bench_ntp.py [--quick] [--seeds 5 --repeats 3] [--nuc]``.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np

#: (n, T, K, d): the experiment's and claims' size (numerics/ntp.py, proofs/claims/ntp_two_part.py), the issue's,
#: and a larger one
SIZES = ((6, 4, 6, 8), (20, 6, 10, 16), (40, 8, 16, 24))


def cvxpy_model(gc, d: int, norm: str, solver: str):
    """The straightforward model: W a (d, d) variable, one vectorised block per constraint kind; returns
    ``(W, seconds, status)`` (building included)."""
    import cvxpy as cp

    t0 = time.perf_counter()
    W = cp.Variable((d, d))
    cons = [cp.sum(cp.multiply(gc.D_in @ W, gc.Z_in), axis=1) >= 1]
    if len(gc.eq):
        cons.append(cp.sum(cp.multiply(gc.D_eq @ W, gc.Z_eq), axis=1) == 0)
    obj = cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)
    prob = cp.Problem(cp.Minimize(obj), cons)
    try:
        prob.solve(solver=solver)
    except cp.error.SolverError:
        return None, time.perf_counter() - t0, "solver_error"
    return W.value, time.perf_counter() - t0, prob.status


def exact_violation(data, gc, W: np.ndarray | None) -> float:
    """max over the constraints of ``max(0, 1 - margin)`` (IN) and ``|margin|`` (EQ) of the float64 ``W``, exactly:
    margin = (e_y - e_j)^T W e_q with the float embeddings as exact binary rationals, rounded once at the end."""
    if W is None or not np.all(np.isfinite(W)):
        return float("inf")
    E, eE = _ints(data.E)
    Wn, eW = _ints(W)
    scale = Fraction(2) ** (2 * eE + eW)
    worst = Fraction(0)
    for trip, kind in ((gc.ineq, "in"), (gc.eq, "eq")):
        for q, y, j in np.asarray(trip).reshape(-1, 3).tolist():
            dv = E[y] - E[j]
            m = Fraction(int(dv @ Wn @ E[q])) * scale
            worst = max(worst, (1 - m) if kind == "in" else abs(m))
    return float(worst)


def _gap(val: float, lo: Fraction, hi: Fraction) -> float:
    """Signed relative distance of ``val`` to the proved bracket [lo, hi] (0 inside; below 0 under it: a point that
    violates constraints can have a norm below the optimum)."""
    v = Fraction(val)
    if v > hi:
        return float((v - hi) / hi)
    if v < lo:
        return float((v - lo) / lo)
    return 0.0


def _ints(a: np.ndarray) -> tuple[np.ndarray, int]:
    from attsvm.svm.exact import to_integers

    N, e = to_integers(a)
    return np.asarray(N, dtype=object).reshape(np.shape(a)), e


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="2 seeds, 1 repeat (under a minute)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nuc", action="store_true", help="also the nuclear program")
    a = ap.parse_args()
    seeds, reps = (2, 1) if a.quick else (a.seeds, a.repeats)

    from attsvm.ntp.generate import ntp
    from attsvm.ntp.graph import graph_constraints
    from attsvm.ntp.svm import solve_graph_svm

    norms = ("fro", "nuc") if a.nuc else ("fro",)
    solvers = ("attsvm", "SCS", "CLARABEL")
    print(f"graph SVM, {seeds} seeds x {reps} repeats per size (median wall time); viol = largest exact constraint "
          f"violation of the returned W; gap = (objective - OPT)/OPT vs attsvm's certified optimum")  # fmt: skip
    hdr = (f"{'size (n,T,K,d)':<16} {'m_eq/m_in':>9} {'norm':<4} {'solver':<9} {'time s':>8} {'viol':>9} "
           f"{'gap':>10}  status")  # fmt: skip
    warm = ntp(6, 4, 6, 8, graph="cyclic", seed=99)  # imports and first calls outside the timings
    for norm in norms:
        solve_graph_svm(warm, norm, certify=True)
        for s in solvers[1:]:
            cvxpy_model(graph_constraints(warm), warm.d, norm, s)
    print(hdr)
    print("-" * len(hdr))
    for size in SIZES:
        n, T, K, d = size
        for norm in norms:
            times = {s: [] for s in solvers}
            viol = {s: 0.0 for s in solvers}
            gap = {s: 0.0 for s in solvers}
            stat = {s: set() for s in solvers}
            meq, min_ = [], []
            for seed in range(seeds):
                data = ntp(n, T, K, d, graph="cyclic", seed=seed)
                gc = graph_constraints(data)
                meq.append(len(gc.eq))
                min_.append(len(gc.ineq))
                res = {}
                for _ in range(reps):  # side by side: one repeat of every solver in turn
                    t0 = time.perf_counter()
                    sol = solve_graph_svm(data, norm, certify=True)
                    times["attsvm"].append(time.perf_counter() - t0)
                    res["attsvm"] = (sol.W, sol.status + ("/verified" if sol.certificate.get("verified") else ""))
                    for s in solvers[1:]:
                        Wv, sec, st = cvxpy_model(gc, d, norm, s)
                        times[s].append(sec)
                        res[s] = (Wv, st)
                cert = sol.certificate
                if cert.get("value_str"):  # the exact optimum (exact-kkt)
                    lo = hi = Fraction(cert["value_str"])
                else:  # a proved bracket (rigorous-enclosure, duality-gap)
                    lo, hi = Fraction(cert["lower"]), Fraction(cert["upper"])
                for s in solvers:
                    Wv, st = res[s]
                    stat[s].add(st)
                    viol[s] = max(viol[s], exact_violation(data, gc, Wv))
                    if Wv is None:
                        gap[s] = float("nan")
                        continue
                    g = _gap(float(np.sum(Wv * Wv)) if norm == "fro" else float(np.linalg.norm(Wv, "nuc")), lo, hi)
                    gap[s] = g if abs(g) > abs(gap[s]) else gap[s]
            for s in solvers:
                note = f"  (bracket width {float((hi - lo) / hi):.1e})" if s == "attsvm" and hi > lo else ""
                sts = ",".join(sorted(stat[s]))
                print(f"{str(size):<16} {int(np.median(meq)):>4}/{int(np.median(min_)):<4} {norm:<4} {s:<9} "
                      f"{np.median(times[s]):8.4f} {viol[s]:9.1e} {gap[s]:10.1e}  {sts}{note}")  # fmt: skip
        print()


if __name__ == "__main__":
    main()
