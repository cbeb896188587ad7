"""E2 with ``reference=scs``: Att-SVM* also solved as the authors' straightforward cvxpy model with SCS.

The helper (``numerics/rank.py``: ``scs_reference``, ``violation``) is checked against numpy computations written
out here (margins token by token, the nuclear norm, the optimal token from the scores) and against attsvm's proved
bounds; the experiment is run end to end at smoke size through the command line.
"""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from test_numerics_smoke import assert_caption_states_run, assert_png, assert_publication_figure

from attsvm import svm
from attsvm.cli import main
from attsvm.data import Dataset
from attsvm.experiments import load_spec
from attsvm.figures import paper_style
from attsvm.tolerances import tol

rank = load_spec("rank")


def tiny(seed: int, n: int = 3, T: int = 3, d: int = 3) -> Dataset:
    """A feasible paper-law instance (unit-norm Gaussian tokens, queries and head, fair labels)."""
    rng = np.random.default_rng(seed)
    unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)  # noqa: E731
    while True:
        X, Z, v = unit(rng.standard_normal((n, T, d))), unit(rng.standard_normal((n, d))), unit(rng.standard_normal(d))
        Y = rng.choice([-1.0, 1.0], size=n)
        ds = Dataset(X, Y, Z, v)
        if svm.solve(ds).status == "optimal":
            return ds


def violation_numpy(ds: Dataset, W: np.ndarray) -> float:
    """max over (i, t != opt_i) of max(0, 1 - (x_{i,opt} - x_it)^T W z_i), opt_i = argmax_t Y_i v^T x_it."""
    worst = 0.0
    for i in range(ds.n):
        scores = [ds.Y[i] * float(ds.v @ ds.X[i, t]) for t in range(ds.T)]
        o = int(np.argmax(scores))
        for t in range(ds.T):
            if t != o:
                margin = float((ds.X[i, o] - ds.X[i, t]) @ W @ ds.Z[i])
                worst = max(worst, 1.0 - margin)
    return worst


@pytest.mark.parametrize("seed", [3, 11])
def test_scs_reference_on_tiny_instances(seed):
    ds = tiny(seed)
    out = rank.scs_reference(ds)
    assert out["status"] in ("optimal", "optimal_inaccurate"), out["status"]
    W = out["W"]
    assert W.shape == (ds.d, ds.d)
    assert out["violation"] == pytest.approx(violation_numpy(ds, W), rel=tol("rounding"), abs=tol("rounding"))
    assert out["objective"] == pytest.approx(float(np.linalg.norm(W, "nuc")), rel=tol("rounding"))
    # the violation on other matrices: the certified solution (feasible), a scaled-down copy (violated by 1/2)
    cert = svm.solve(ds, norm="nuc", certify=True)
    assert cert.certificate["verified"]
    for M in (cert.W, 0.5 * cert.W, np.random.default_rng(seed).standard_normal((ds.d, ds.d))):
        assert rank.violation(ds, M) == pytest.approx(violation_numpy(ds, M), rel=tol("rounding"), abs=tol("rounding"))
    assert rank.violation(ds, 0.5 * cert.W) == pytest.approx(0.5, rel=1e-6)
    # W / (1 - violation) is feasible, so its nuclear norm is at least the proved lower bound of the optimum
    lower = cert.certificate["lower"]
    assert out["objective"] / (1.0 - out["violation"]) >= lower * (1.0 - tol("rounding"))


def test_scs_check_fails_when_the_data_show_otherwise():
    """The qualitative check states the finding from the numbers: planted numbers that contradict it fail it."""
    row = {"n": 5, "T": 5, "d": 5, "rank_fro_mean": 5.0, "rank_fro_max": 5, "rank_nuc_mean": 2.5, "rank_nuc_max": 3}
    ref = {"instances": 10, "rank_nuc_mean": 2.5, "rank_scs_mean": 4.0, "cert_verified": 10, "cert_solved": 10}
    res = {"settings": {"options": {"reference": "scs"}}, "rows": [row], "reference": ref}
    assert rank.check(res) == []
    flipped = copy.deepcopy(res)
    ref = flipped["reference"]
    ref["rank_scs_mean"], ref["rank_nuc_mean"] = ref["rank_nuc_mean"], ref["rank_scs_mean"]
    assert any("not higher on average" in f for f in rank.check(flipped))
    equal = copy.deepcopy(res)
    equal["reference"]["rank_scs_mean"] = equal["reference"]["rank_nuc_mean"]
    assert any("not higher on average" in f for f in rank.check(equal))
    uncertified = copy.deepcopy(res)
    uncertified["reference"]["cert_verified"] -= 1
    assert any("not certified" in f for f in rank.check(uncertified))
    default = copy.deepcopy(res)
    default["settings"]["options"]["reference"] = "none"
    assert rank.check(default) == []  # the SCS numbers are only read when the run had the option


def test_reproduce_rank_smoke_with_scs_reference(tmp_path, capsys):
    out = tmp_path / "o"
    base = ["reproduce", "rank", "--smoke", "--quiet", "--workers", "1", "--format", "png,pdf"]
    assert main([*base, "--reference", "scs", "--out", str(out)]) == 0
    assert main([*base, "--out", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    res = json.loads((out / "rank.json").read_text())
    plain = json.loads((tmp_path / "plain" / "rank.json").read_text())
    man = json.loads((out / "rank.manifest.json").read_text())
    assert man["options"] == {"reference": "scs"} and res["settings"]["options"] == {"reference": "scs"}
    assert plain["settings"]["options"] == {"reference": "none"} and "reference" not in plain
    assert not any(k.startswith(("scs_", "rank_scs")) for r in plain["rows"] for k in r)
    # the same instances: the Frobenius ranks (not affected by the option) agree cell by cell
    for a, b in zip(res["rows"], plain["rows"]):
        assert (a["n"], a["T"], a["d"], a["draws"], a["feasible"]) == (
            b["n"],
            b["T"],
            b["d"],
            b["draws"],
            b["feasible"],
        )
        assert a.get("rank_fro_mean") == b.get("rank_fro_mean")
    ref = res["reference"]
    solved = [r for r in res["rows"] if r.get("rank_scs_mean") is not None]
    assert solved and ref["instances"] == sum(r["feasible"] for r in solved)
    assert sum(ref["scs_status"].values()) == ref["instances"] and ref["cert_verified"] == ref["cert_solved"]
    for r in solved:  # ranks within Lemma 1's bound; a violation is >= 0
        ranks = [x for x in r["rank_scs"] if x >= 0]
        assert ranks and max(ranks) <= min(r["n"], r["d"]) and r["rank_scs_max"] == max(ranks)
        assert all(v >= 0 for v in r["scs_violation"] if v is not None)
    assert res["checks"]["ok"]
    assert_png(out / "rank.png")
    caption = (out / "rank.caption.md").read_text()
    assert_caption_states_run(caption, man["sizes"], "rank --reference scs")
    for words in ("solid, circles", "dashed, squares", "dotted triangles", "open circles", "dash-dot", "SCS statuses"):
        assert words in caption, words
    assert re.search(r"options: reference = scs\.", caption)
    with paper_style():
        fig = rank.plot(res)
        assert len(fig.axes) == 4
        assert_publication_figure(fig, "rank --reference scs (smoke)")
