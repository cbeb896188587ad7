"""The experiment runner (``attsvm reproduce``) and a smoke run of every experiment of ``numerics/``.

Each smoke run asserts the experiment's qualitative result (issue 6) on its own numbers, and that the
figure is a valid, non-trivial PNG that matplotlib reads back.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.experiments import NAMES, band_stats, corr_trajectory, discover, jsonable, load_spec, reproduce

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: str | Path, min_bytes: int = 5000) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.image as mpimg

    data = Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert len(data) >= min_bytes, f"{path} is only {len(data)} bytes"
    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[0] >= 100 and img.shape[1] >= 100
    assert float(np.std(img[..., :3])) > 0.01, "blank figure"


# ------------------------------------------------------------------------------------------- runner
DUMMY = textwrap.dedent(
    '''
    """A dummy experiment."""
    import numpy as np

    TITLE = "dummy"
    SIZES = {"full": {"seeds": 5, "k": 3}, "smoke": {"seeds": 2, "k": 1}}

    def run(ctx):
        ctx.progress.update("work", 1, 1)
        with ctx.timed("work"):
            x = np.arange(ctx.seeds, dtype=float)
        return {"x": x, "k": ctx.size["k"], "nan": float("nan")}

    def plot(res):
        from attsvm.experiments import band, band_stats, new_figure

        fig, ax = new_figure()
        runs = np.outer(np.arange(1, 11), np.linspace(1, 2, len(res["x"])))
        band(ax[0, 0], np.arange(10), band_stats(runs), label="line")
        band(ax[0, 0], np.arange(10), band_stats(runs, log=True), logy=True)
        return fig

    def check(res):
        return [] if len(res["x"]) < 4 else ["too many seeds"]
    '''
)


@pytest.fixture
def dummy_dir(tmp_path):
    d = tmp_path / "numerics"
    d.mkdir()
    (d / "dummy.py").write_text(DUMMY)
    (d / "_helper.py").write_text("x = 1\n")
    (d / "broken.py").write_text("TITLE = 'no run'\n")
    return d


def test_discovery_finds_every_experiment():
    specs = discover()
    assert set(NAMES) <= set(specs)
    for name in NAMES:
        mod = load_spec(name)
        assert {"full", "smoke"} <= set(mod.SIZES) and mod.SIZES["smoke"]["seeds"] <= mod.SIZES["full"]["seeds"]


def test_runner_writes_figure_numbers_manifest(dummy_dir, tmp_path):
    out = tmp_path / "out"
    rep = reproduce("dummy", out, smoke=True, folder=dummy_dir, progress=False)
    assert rep.ok and set(rep.files) == {"png", "json", "manifest"}
    res = json.loads((out / "dummy.json").read_text())
    assert res["x"] == [0.0, 1.0] and res["k"] == 1 and res["nan"] is None and res["checks"]["ok"]
    man = json.loads((out / "dummy.manifest.json").read_text())
    assert man["smoke"] is True and man["seeds"]["runs"] == 2 and man["wall_s"] >= 0
    assert man["packages"]["numpy"] == np.__version__ and "commit" in man["git"]
    assert man["device"]["requested"] == "cpu" and "work" in man["timings_s"]
    assert_png(out / "dummy.png", min_bytes=2000)
    # --seeds overrides the size; the check fails -> Report.ok False
    rep = reproduce("dummy", out, seeds=4, folder=dummy_dir, progress=False)
    assert not rep.ok and rep.failures == ["too many seeds"]


def test_runner_rejects_bad_input(dummy_dir, tmp_path):
    with pytest.raises(InputError, match="unknown experiment"):
        reproduce("nope", tmp_path, folder=dummy_dir)
    with pytest.raises(InputError, match="lacks"):
        reproduce("broken", tmp_path, folder=dummy_dir)
    with pytest.raises(InputError, match="seeds"):
        reproduce("dummy", tmp_path, seeds=0, folder=dummy_dir)
    with pytest.raises(InputError, match="device"):
        reproduce("dummy", tmp_path, device="tpu", folder=dummy_dir)
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(InputError, match="not a directory"):
        reproduce("dummy", f, folder=dummy_dir)
    assert "_helper" not in discover(dummy_dir)


def test_cli_exit_codes(dummy_dir, tmp_path, capsys):
    out = tmp_path / "o"
    base = ["reproduce", "--numerics", str(dummy_dir), "--out", str(out), "--quiet"]
    assert main([*base, "dummy", "--smoke", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["ok"] and js["experiments"][0]["name"] == "dummy"
    assert main([*base, "dummy", "--seeds", "5"]) == 1
    assert main([*base, "nope"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("error: unknown experiment")
    assert main([*base, "dummy", "--device", "tpu"]) == 2
    assert main([*base, "dummy", "--seeds", "-1"]) == 2


def test_band_stats_and_corr_helpers():
    rng = np.random.default_rng(0)
    runs = rng.uniform(0.1, 1.0, size=(7, 5))
    st = band_stats(runs)
    assert np.allclose(st["mean"], runs.mean(1)) and np.allclose(np.array(st["hi"]) - st["mean"], runs.std(1))
    lg = band_stats(runs, log=True)
    assert np.allclose(lg["mean"], np.exp(np.log(runs).mean(1)))
    A = rng.standard_normal((4, 3, 2, 2))
    T = rng.standard_normal((3, 2, 2))
    c = corr_trajectory(A, T)
    for r in range(4):
        for b in range(3):
            ref = np.dot(A[r, b].ravel(), T[b].ravel()) / np.linalg.norm(A[r, b]) / np.linalg.norm(T[b])
            assert abs(c[r, b] - ref) < 1e-12
    assert np.isnan(corr_trajectory(np.zeros((1, 1, 2, 2)), T[:1]))[0, 0]
    assert jsonable({"a": np.array([1.0, np.inf]), "b": np.int64(3)}) == {"a": [1.0, None], "b": 3}


# ------------------------------------------------------------------------------------------- smoke runs
def _smoke(name: str, tmp_path) -> dict:
    rep = reproduce(name, tmp_path, smoke=True, progress=False, workers=1)
    assert_png(rep.files["png"])
    res = json.loads(Path(rep.files["json"]).read_text())
    man = json.loads(Path(rep.files["manifest"]).read_text())
    assert man["experiment"] == name and man["smoke"] is True
    return res | {"_failures": rep.failures}


# Extra qualitative checks for some experiments (beyond each spec's own ``check``), by name. Every spec that
# discovery finds is smoke-run by ``test_smoke``; a new spec file is tested by adding the file.
def _local(res):
    assert res["W"]["final_corr_mean"] >= 0.99
    assert res["W"]["final_max_softmax_mean"] >= 0.9
    for p in ("W", "KQ"):
        assert {"final_corr_mean", "final_corr_std", "final_max_softmax_mean"} <= set(res[p])


def _rank(res):
    rows = [r for r in res["rows"] if r.get("rank_fro_mean") is not None]
    assert rows
    for r in rows:
        assert r["rank_fro_max"] <= min(r["n"], r["d"]) and r["rank_nuc_max"] <= min(r["n"], r["d"])
    assert np.mean([r["rank_nuc_mean"] for r in rows]) <= np.mean([r["rank_fro_mean"] for r in rows])


def _gensvm(res):
    for r in res["rows"]:
        assert r["accepted"] > 0
        assert np.mean(r["eq"]) < np.mean(r["one"])
        assert np.isclose(r["eq_mean"], np.mean(r["eq"]))


def _overparam(res):
    g = [r["global"] for r in res["rows"]]
    assert g[-1] > g[0]
    for r in res["rows"]:
        assert abs(r["global"] + r["local"] + r["neither"] - 1) < 1e-12


QUALITATIVE = {"local": _local, "rank": _rank, "gensvm": _gensvm, "overparam": _overparam}


@pytest.mark.parametrize("name", sorted(discover()))
def test_smoke(name, tmp_path):
    res = _smoke(name, tmp_path)
    assert not res["_failures"], res["_failures"]
    if name in QUALITATIVE:
        QUALITATIVE[name](res)


def test_qualitative_checks_name_existing_specs():
    assert set(QUALITATIVE) <= set(discover())


@pytest.mark.slow
def test_full_local_and_overparam(tmp_path):
    """Full sizes (run with ``-m slow``): E3 at 100 seeds x 2000 steps, E5 over 8 values of d."""
    rep = reproduce("local", tmp_path, progress=False)
    assert rep.ok, rep.failures
    assert rep.result["W"]["final_corr_mean"] >= 0.99 and rep.result["W"]["frac_locally_optimal"] >= 0.95
    rep = reproduce("overparam", tmp_path, progress=False)
    g = [r["global"] for r in rep.result["rows"]]
    assert rep.ok and g[-1] > g[0] and np.corrcoef(rep.result["settings"]["ds"], g)[0, 1] > 0.8
