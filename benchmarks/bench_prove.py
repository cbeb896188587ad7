r"""The region prover: boxes and seconds to prove the same statement with the centred mean-value form and with
naive interval evaluation (the peer: plain ball bisection), side by side in one run.

The statement: under Assumption B, $-\langle\nabla\mathcal L(W),W^{mm}\rangle>0$ for every $W$ in a Frobenius ball,
on ``attsvm.generate.equal_scores`` data sets (d = 2: 4 parameters; d = 3: 9). Each row proves it twice; a
method that runs out of its box budget says ``unresolved`` (the ratio is then a lower bound).

    python benchmarks/bench_prove.py [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from attsvm import generate
from attsvm.claims.discover import load_file
from attsvm.prove.statement import prove_claim

CLAIM = """
from attsvm.claims import Outcome, claim


@claim(id="descent-ball", title="-<grad L(W), W^mm> > 0 on a ball (Assumption B)", origin="derived",
       hypotheses={"data": "equal_scores", "n": (1, 3), "T": (2, 4), "d": (2, 3), "region": "ball:1"},
       params={"loss": "logistic"})
def descent(case):
    k = case.kit
    ds = case.data
    mm = k.wmm(ds)
    if mm.status != "optimal":
        return Outcome(ok=True, inconclusive="infeasible")
    W = case.param()
    m = -(k.grad_W(ds, W, case.hypotheses["loss"]) * mm.W).sum()
    return Outcome(ok=bool(m > 0), margin=m)
"""

CASES = [  # (n, T, d, seed, region, box budget)
    (1, 2, 2, 3, "ball:1", 20000),
    (2, 3, 2, 1, "ball:0.5", 20000),
    (1, 2, 3, 3, "ball:0.5", 20000),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the first case only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "descent.py"
        f.write_text(CLAIM)
        (c,) = load_file(f)
        print(f"{'data (n,T,d)':>14s} {'region':>9s} | {'mean-value':>28s} | {'naive':>28s} | {'boxes ratio':>11s}")
        for n, T, d, seed, region, budget in CASES[:1] if args.quick else CASES:
            ds = generate.equal_scores(n, T, d, seed=seed)
            row = []
            for method in ("mean-value", "naive"):
                rp = prove_claim(c, ds, region=region, max_boxes=budget, method=method)
                row.append(rp)
            mv, nv = row
            cell = lambda r: f"{r.status:>10s} {r.proof.boxes:7d} bx {r.seconds:6.1f} s"  # noqa: E731
            ratio = nv.proof.boxes / max(mv.proof.boxes, 1)
            more = "" if nv.status == "proved" else ">="
            print(f"{str((n, T, d)):>14s} {region:>9s} | {cell(mv):>28s} | {cell(nv):>28s} | {more}{ratio:9.1f}x")


if __name__ == "__main__":
    main()
