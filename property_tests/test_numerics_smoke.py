"""The experiment runner (``attsvm reproduce``) and a smoke run of every experiment of ``numerics/``.

Each smoke run asserts the experiment's qualitative result (issue 6) on its own numbers, that the figure is a
valid, non-trivial PNG that matplotlib reads back, and a PDF, that its caption states the seeds and steps run,
and that the figure is legible at print size (:func:`assert_publication_figure`). The figure options
(``--format``, ``--dpi``) are checked on the files themselves: PNG pixel size, PDF page size, SVG as XML.
"""

from __future__ import annotations

import json
import re
import struct
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from attsvm import figures, outputs
from attsvm.cli import main
from attsvm.errors import InputError
from attsvm.experiments import NAMES, corr_trajectory, discover, jsonable, load_spec, recheck, reproduce
from attsvm.figures import MIN_FONT_PT, band_stats, paper_style

GALLERY = Path(__file__).resolve().parent.parent / "docs" / "gallery"

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


def png_size(path: str | Path) -> tuple[int, int]:
    """Width and height in pixels, read from the PNG's IHDR chunk (not through matplotlib)."""
    data = Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def pdf_pages(path: str | Path) -> list[tuple[float, float]]:
    """The page sizes (points) of a PDF, from its ``/MediaBox`` entries; asserts the ``%PDF-`` header."""
    data = Path(path).read_bytes()
    assert data[:5] == b"%PDF-", f"{path} is not a PDF"
    assert b"%%EOF" in data[-64:], f"{path} is truncated"
    boxes = re.findall(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]", data)
    return [(float(x1) - float(x0), float(y1) - float(y0)) for x0, y0, x1, y1 in boxes]


def svg_size(path: str | Path) -> tuple[float, float]:
    """Width and height (points) of an SVG, which must parse as XML with an ``<svg>`` root."""
    root = ET.parse(str(path)).getroot()
    assert root.tag.endswith("svg"), root.tag
    unit = lambda v: float(v.removesuffix("pt"))  # noqa: E731
    return unit(root.get("width")), unit(root.get("height"))


# ------------------------------------------------------------------------------------------- legibility
def _overlap(a, b, tol: float = 0.5) -> bool:
    return a.x0 < b.x1 - tol and b.x0 < a.x1 - tol and a.y0 < b.y1 - tol and b.y0 < a.y1 - tol


def _data_points(ax) -> list[np.ndarray]:
    """Display coordinates of what an axes draws as data: line vertices, scatter offsets, band outlines."""
    from matplotlib.collections import PathCollection, PolyCollection
    from matplotlib.lines import Line2D

    out = []
    for art in [*ax.lines, *ax.collections]:
        if not art.get_visible():
            continue
        if isinstance(art, Line2D):
            xy, tr = np.asarray(art.get_xydata(), dtype=float), art.get_transform()
        elif isinstance(art, PathCollection) and len(art.get_offsets()):
            xy, tr = np.asarray(art.get_offsets(), dtype=float), art.get_offset_transform()
        elif isinstance(art, PolyCollection):
            paths = art.get_paths()
            if not paths:
                continue
            xy, tr = np.concatenate([p.vertices for p in paths]), art.get_transform()
        else:
            continue
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if len(xy):
            with np.errstate(all="ignore"):
                out.append(tr.transform(xy))
    return out


def assert_publication_figure(fig, what: str) -> None:
    """Legible at the figure's own size: every text at least :data:`MIN_FONT_PT` points, every text and tick
    label inside the figure, no legend over a data point of its axes, over a text or tick label, or (a
    figure legend) over an axes."""
    from matplotlib.text import Text

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    page = fig.bbox
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    legend_texts = {id(t) for lg in legends for t in lg.findobj(Text)}
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    small = sorted({f"{t.get_text()!r} {t.get_fontsize():.1f}pt" for t in texts if t.get_fontsize() < MIN_FONT_PT})
    assert not small, f"{what}: text smaller than {MIN_FONT_PT} pt: {small[:5]}"
    ticks = [t for ax in fig.axes for m in (False, True) for t in (*ax.get_xticklabels(m), *ax.get_yticklabels(m))]
    tick_ids = {id(t) for t in ticks}  # tick labels: checked through their axis's bounding box (only drawn ones)
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in texts if id(t) not in tick_ids | legend_texts]
    boxes += [(f"axis of {ax.get_title()!r}", a.get_tightbbox(r)) for ax in fig.axes for a in (ax.xaxis, ax.yaxis)]
    boxes = [(n, b) for n, b in boxes if b is not None and b.width > 0]
    for name, b in [*boxes, *(("a legend", lg.get_window_extent(r)) for lg in legends)]:
        inside = b.x0 >= page.x0 - 1 and b.y0 >= page.y0 - 1 and b.x1 <= page.x1 + 1 and b.y1 <= page.y1 + 1
        assert inside, f"{what}: {name!r} is cut off at the figure's edge ({b} outside {page})"
    for lg in legends:
        lb = lg.get_window_extent(r)
        clash = [n for n, b in boxes if _overlap(lb, b)]
        assert not clash, f"{what}: a legend covers the text {clash[:3]}"
        for ax in fig.axes:
            if lg in fig.legends:
                assert not _overlap(lb, ax.get_window_extent(r)), f"{what}: a figure legend covers an axes"
            elif lg is ax.get_legend():
                for pts in _data_points(ax):
                    inside = (pts[:, 0] > lb.x0) & (pts[:, 0] < lb.x1) & (pts[:, 1] > lb.y0) & (pts[:, 1] < lb.y1)
                    assert not inside.any(), f"{what}: the legend of {ax.get_title()!r} covers {inside.sum()} points"


def assert_caption_states_run(caption: str, size: dict, what: str) -> None:
    """The caption names the seeds (``N seeds``) and, where the spec has them, the steps actually run."""
    assert re.search(rf"(?<![\d.]){size['seeds']} seeds\b", caption), f"{what}: caption lacks '{size['seeds']} seeds'"
    if "steps" in size:
        assert re.search(rf"(?<![\d.]){size['steps']} steps\b", caption), f"{what}: caption lacks the steps"


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
        from attsvm.figures import band, band_stats, new_figure

        fig, ax = new_figure(width=4.0, height=3.0)
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
        assert callable(mod.caption), name


def test_builtin_names_need_a_caption_user_specs_do_not(dummy_dir, tmp_path):
    """A spec named like a built-in one must define ``caption`` (refused before it runs); another spec gets
    the generic caption from its TITLE."""
    (dummy_dir / "visual.py").write_text(DUMMY)
    with pytest.raises(InputError, match="lacks caption"):
        reproduce("visual", tmp_path / "o", folder=dummy_dir, progress=False)
    assert not (tmp_path / "o").exists()
    rep = reproduce("dummy", tmp_path / "o", smoke=True, folder=dummy_dir, progress=False)
    text = Path(rep.files["caption"]).read_text()
    assert text.startswith("**dummy.**") and "dummy.json" in text and "seeds = 2" in text


def test_runner_writes_figure_numbers_manifest(dummy_dir, tmp_path):
    out = tmp_path / "out"
    rep = reproduce("dummy", out, smoke=True, folder=dummy_dir, progress=False)
    assert rep.ok and set(rep.files) == {"png", "pdf", "caption", "json", "manifest"}
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(f).name for f in rep.files.values())
    res = json.loads((out / "dummy.json").read_text())
    assert res["x"] == [0.0, 1.0] and res["k"] == 1 and res["nan"] is None and res["checks"]["ok"]
    man = json.loads((out / "dummy.manifest.json").read_text())
    # provenance (issue 32): version, date, sizes as the budget, and the check that ran, in all three files
    from attsvm import __version__

    prov = man["provenance"]
    assert prov["attsvm"] == __version__ and prov["tool"] == "attsvm reproduce dummy" and prov["date"]
    assert prov["budget"].startswith("smoke sizes") and prov["checks"] == ["dummy: the spec's check(result) passed"]
    assert res["provenance"] == prov
    assert f"Provenance: attsvm {__version__}, attsvm reproduce dummy" in (out / "dummy.caption.md").read_text()
    assert man["smoke"] is True and man["seeds"]["runs"] == 2 and man["wall_s"] >= 0
    assert man["packages"]["numpy"] == np.__version__ and "commit" in man["git"]
    assert man["device"]["requested"] == "cpu" and "work" in man["timings_s"]
    assert_png(out / "dummy.png", min_bytes=2000)
    assert png_size(out / "dummy.png") == (4 * 200, 3 * 200)  # default 200 dpi
    assert pdf_pages(out / "dummy.pdf") == [(4 * 72, 3 * 72)]
    assert [(f["file"], f["format"], f["dpi"]) for f in man["figures"]] == [
        ("dummy.png", "png", 200),
        ("dummy.pdf", "pdf", 200),
    ]
    # --seeds overrides the size; the check fails -> Report.ok False
    rep = reproduce("dummy", out, seeds=4, folder=dummy_dir, progress=False)
    assert not rep.ok and rep.failures == ["too many seeds"]


@pytest.mark.parametrize("formats, dpi", [("svg,png,pdf", 123), ("png", 50), (["PDF", "svg", "pdf"], 1200)])
def test_formats_and_dpi_are_honoured(dummy_dir, tmp_path, formats, dpi):
    """Each requested format is written and nothing else; the PNG is (4 x 3 in) x dpi pixels, the PDF one page
    of 4 x 3 in, the SVG well-formed XML of 4 x 3 in; the manifest lists each file with its format and dpi."""
    out = tmp_path / "o"
    reproduce("dummy", out, smoke=True, folder=dummy_dir, progress=False, formats=formats, dpi=dpi)
    want = figures.parse_formats(formats)
    names = {f"dummy.{f}" for f in want} | {"dummy.json", "dummy.manifest.json", "dummy.caption.md"}
    assert {p.name for p in out.iterdir()} == names and not outputs.leftovers(out)
    man = json.loads((out / "dummy.manifest.json").read_text())
    assert [(f["file"], f["format"], f["dpi"]) for f in man["figures"]] == [(f"dummy.{f}", f, dpi) for f in want]
    if "png" in want:
        assert png_size(out / "dummy.png") == (4 * dpi, 3 * dpi)
        rec = next(f for f in man["figures"] if f["format"] == "png")
        assert (rec["width_px"], rec["height_px"]) == png_size(out / "dummy.png")
    if "pdf" in want:
        assert pdf_pages(out / "dummy.pdf") == [(288.0, 216.0)]
    if "svg" in want:
        assert svg_size(out / "dummy.svg") == (288.0, 216.0)


def test_cli_figure_options_and_summary(dummy_dir, tmp_path, capsys):
    out = tmp_path / "o"
    base = ["reproduce", "dummy", "--smoke", "--numerics", str(dummy_dir), "--out", str(out), "--quiet"]
    assert main([*base, "--format", "svg,png", "--dpi", "50"]) == 0  # the lowest accepted
    line = capsys.readouterr().out.strip()
    assert line.split()[2:5] == [str(out / "dummy.svg"), str(out / "dummy.png"), str(out / "dummy.caption.md")]
    assert png_size(out / "dummy.png") == (200, 150) and svg_size(out / "dummy.svg") == (288.0, 216.0)
    assert main([*base, "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["experiments"][0]["files"]
    assert set(files) == {"png", "pdf", "caption", "json", "manifest"} and Path(files["pdf"]).is_file()


@pytest.mark.parametrize(
    "option, value, needle",
    [
        ("--format", "png,jpg", "error: --format: unknown figure format 'jpg'"),
        ("--format", "", "error: --format: no figure format given"),
        ("--format", " , ", "error: --format: no figure format given"),
        ("--dpi", "0", "error: --dpi must be an integer from 50 to 1200, got 0"),
        ("--dpi", "-3", "error: --dpi must be an integer from 50 to 1200, got -3"),
        ("--dpi", "49", "error: --dpi must be an integer from 50 to 1200, got 49"),
        ("--dpi", "1201", "error: --dpi must be an integer from 50 to 1200, got 1201"),
        ("--dpi", "2.5", "error: --dpi must be an integer from 50 to 1200, got 2.5"),
        ("--dpi", "x", "error: --dpi must be an integer from 50 to 1200, got x"),
        ("--dpi", "", "error: --dpi must be an integer from 50 to 1200, got"),
    ],
)
def test_bad_figure_options_exit_2_and_write_nothing(dummy_dir, tmp_path, capsys, option, value, needle):
    out = tmp_path / "o"
    argv = ["reproduce", "dummy", "--smoke", "--numerics", str(dummy_dir), "--out", str(out), "--quiet"]
    assert main([*argv, option, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(needle), err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["numerics"]


def test_library_rejects_bad_figure_options(dummy_dir, tmp_path):
    for formats, dpi, msg in (("bmp", 200, "unknown figure format"), ((), 200, "no figure format"),
                              ("png", 0, "--dpi"), ("png", 2.0, "--dpi"), ("png", True, "--dpi")):  # fmt: skip
        with pytest.raises(InputError, match=msg):
            reproduce("dummy", tmp_path / "o", folder=dummy_dir, progress=False, formats=formats, dpi=dpi)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("failing", ["pdf", "caption", "manifest"])
def test_figure_files_are_all_or_none(dummy_dir, tmp_path, monkeypatch, failing):
    """A failure while writing any of the files (the PDF after the PNG, the caption, the manifest) leaves the
    previous run's files byte for byte and no temporary file."""
    out = tmp_path / "o"
    rep = reproduce("dummy", out, smoke=True, folder=dummy_dir, progress=False, formats="png,pdf,svg")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len(before) == 6
    real_bytes, real_text = figures.figure_bytes, outputs.write_text

    def bad_bytes(fig, fmt, dpi):
        if fmt == failing:
            raise RuntimeError("disk full")
        return real_bytes(fig, fmt, dpi)

    def bad_text(path, text):
        if Path(path).name == Path(rep.files[failing]).name:
            raise RuntimeError("disk full")
        return real_text(path, text)

    monkeypatch.setattr(figures, "figure_bytes", bad_bytes)
    monkeypatch.setattr(outputs, "write_text", bad_text)
    with pytest.raises(RuntimeError, match="disk full"):
        reproduce("dummy", out, seeds=3, folder=dummy_dir, progress=False, formats="png,pdf,svg")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not outputs.leftovers(out)


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
    (w, h), rec = png_size(rep.files["png"]), man["figures"][0]
    assert rec["dpi"] >= 200 and (w, h) == (round(rec["width_in"] * rec["dpi"]), round(rec["height_in"] * rec["dpi"]))
    assert pdf_pages(rep.files["pdf"]) == [pytest.approx((rec["width_in"] * 72, rec["height_in"] * 72), abs=0.01)]
    caption = Path(rep.files["caption"]).read_text()
    assert_caption_states_run(caption, man["sizes"], name)
    mod = load_spec(name)
    with paper_style():
        assert_publication_figure(mod.plot(res), f"{name} (smoke)")
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


def test_caption_states_the_seeds_run(tmp_path):
    """``--seeds`` changes what the caption says (it is written from the result, not from the spec's sizes)."""
    rep = reproduce("joint", tmp_path, smoke=True, seeds=3, progress=False, workers=1, formats="png")
    caption = Path(rep.files["caption"]).read_text()
    assert_caption_states_run(caption, {**load_spec("joint").SIZES["smoke"], "seeds": 3}, "joint --seeds 3")
    assert not re.search(r"(?<![\d.])12 seeds", caption)


@pytest.mark.parametrize("name", NAMES)
def test_gallery_figures_are_for_print(name):
    """The committed gallery (full sizes): PDF and a PNG of at least 200 dpi per experiment, a caption stating
    the seeds run, the spec's check passing on the committed numbers (:func:`attsvm.experiments.recheck`, the
    experiment's declared re-check), and the figure, redrawn from those numbers, legible at print size."""
    man = json.loads((GALLERY / f"{name}.manifest.json").read_text())
    formats = {f["format"]: f for f in man["figures"]}
    assert {"png", "pdf"} <= set(formats) and formats["png"]["dpi"] >= 200
    png = formats["png"]
    assert png_size(GALLERY / png["file"]) == (png["width_px"], png["height_px"])
    assert png["width_px"] >= 200 * png["width_in"] - 1
    assert pdf_pages(GALLERY / formats["pdf"]["file"]) == [
        pytest.approx((png["width_in"] * 72, png["height_in"] * 72), abs=0.01)
    ]
    assert_caption_states_run((GALLERY / man["caption"]).read_text(), man["sizes"], name)
    res = json.loads((GALLERY / f"{name}.json").read_text())
    assert recheck(name, res) == [], name
    with paper_style():
        assert_publication_figure(load_spec(name).plot(res), f"{name} (gallery)")


@pytest.mark.slow
def test_full_local_and_overparam(tmp_path):
    """Full sizes (run with ``-m slow``): E3 at 100 seeds x 2000 steps, E5 over 8 values of d."""
    rep = reproduce("local", tmp_path, progress=False)
    assert rep.ok, rep.failures
    assert rep.result["W"]["final_corr_mean"] >= 0.99 and rep.result["W"]["frac_locally_optimal"] >= 0.95
    rep = reproduce("overparam", tmp_path, progress=False)
    g = [r["global"] for r in rep.result["rows"]]
    assert rep.ok and g[-1] > g[0] and np.corrcoef(rep.result["settings"]["ds"], g)[0, 1] > 0.8


def test_cli_takes_hyphens_for_underscores(dummy_dir, tmp_path, capsys):
    """``attsvm reproduce rank-dynamics`` names numerics/rank_dynamics.py: a hyphenated name runs the file whose stem
    has underscores, and an unknown one is still bad input."""
    import shutil

    folder = tmp_path / "num"
    shutil.copytree(dummy_dir, folder)
    (folder / "dummy.py").rename(folder / "my_dummy.py")
    base = ["reproduce", "--numerics", str(folder), "--out", str(tmp_path / "o"), "--quiet"]
    assert main([*base, "my-dummy", "--smoke", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["experiments"][0]["name"] == "my_dummy"
    assert main([*base, "my-dumm"]) == 2
