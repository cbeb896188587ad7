"""The installed package: it ships the built-in collections and finds them from any folder; --version, --debug.

The wheel is built from a copy of the working tree (tracked and untracked-but-not-ignored files, so a stale
``build/`` of the checkout cannot leak into it) with ``pip wheel --no-deps --no-build-isolation``: offline, about a
second. The fresh-venv install of the README's main command is ``slow``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import attsvm
from attsvm import paths
from attsvm.cli import main, version
from attsvm.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HEAVY = ("scipy", "torch", "sympy", "cvxpy", "clarabel", "hypothesis", "mpmath", "flint", "matplotlib")
STRAY = re.compile(r"(^|/)(property_tests|tests?|examples|benchmarks|docs|build|\.attsvm|attsvm-counterexamples|"
                   r"counterexamples|__pycache__|[^/]*\.egg-info)(/|$)|\.pyc$")  # fmt: skip


def _worktree_files() -> list[str]:
    """The working tree's files as git sees them (tracked or untracked, not ignored, not deleted)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: cannot list the working tree")
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (ROOT / f).is_file()})


def _copy_worktree(dest: Path) -> Path:
    for f in _worktree_files():
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)
    return dest


def _collection_files() -> set[str]:
    """What the wheel must ship of the collections: their files in the working tree, as wheel paths."""
    out = set()
    for f in _worktree_files():
        top, _, rest = f.partition("/")
        if top in ("proofs", "numerics") and Path(f).suffix in (".py", ".tex"):
            out.add(f"attsvm/_builtin/{top}/{rest}")
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    from importlib import metadata

    try:
        st = tuple(int(x) for x in metadata.version("setuptools").split(".")[:2])
    except metadata.PackageNotFoundError:
        st = (0, 0)
    if st < (77, 0):
        pytest.skip(f"setuptools >= 77 needed to build without isolation (have {'.'.join(map(str, st))})")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy_worktree(tmp / "src")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), src],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (tmp / "dist").glob("attsvm-*.whl")
    return whl


# --------------------------------------------------------------------------------------------- the wheel
def test_every_subpackage_is_listed_for_the_wheel():
    """pyproject.toml lists the packages explicitly (for the collections' package-dir): none may be forgotten."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    engine = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "attsvm").rglob("__init__.py")}
    assert engine <= listed, f"add to [tool.setuptools] packages: {sorted(engine - listed)}"
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]
    assert mapping == {"attsvm._builtin.proofs": "proofs", "attsvm._builtin.numerics": "numerics"}
    for pkg in listed - engine:
        head = next(k for k in mapping if pkg == k or pkg.startswith(k + "."))
        folder = ROOT / mapping[head] / pkg[len(head) + 1 :].replace(".", "/")
        assert folder.is_dir(), f"{pkg}: no folder {folder}"
    for folder in [ROOT / "proofs" / d for d in ("claims", "derivations", "tex")] + [ROOT / "numerics"]:
        sub = [p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"]
        assert not sub, f"subfolders the wheel would not ship: {sub}"


def test_the_wheel_ships_the_collections_and_nothing_stray(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    dist = f"attsvm-{attsvm.__version__}.dist-info/"
    assert all(n.startswith(("attsvm/", dist)) for n in names), [n for n in names if not n.startswith("attsvm/")]
    assert not [n for n in names if STRAY.search(n)]
    builtin = {n for n in names if n.startswith("attsvm/_builtin/")}
    assert builtin == _collection_files()  # exactly the collections' files: nothing missing, nothing extra
    assert {"claims", "derivations", "tex"} <= {n.split("/")[3] for n in builtin if n.count("/") >= 4}
    assert any(n.endswith(".tex") for n in builtin) and any(n.startswith("attsvm/_builtin/numerics/") for n in builtin)
    engine = {str(p.relative_to(ROOT)) for p in (ROOT / "attsvm").rglob("*.py")} | {"attsvm/py.typed"}
    assert engine <= set(names)
    meta = zipfile.ZipFile(wheel).read(dist + "METADATA").decode()
    assert f"\nVersion: {attsvm.__version__}\n" in meta


def _unpacked(wheel: Path, where: Path) -> dict[str, str]:
    """Unpack the (pure-Python) wheel as a site folder; the environment that imports attsvm from it only."""
    zipfile.ZipFile(wheel).extractall(where / "site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTSVM_")}
    env["PYTHONPATH"] = str(where / "site")
    (where / "elsewhere").mkdir()
    return env


def test_the_unpacked_wheel_finds_its_collections_from_any_folder(wheel, tmp_path):
    env = _unpacked(wheel, tmp_path)
    run = lambda *a: subprocess.run(
        [sys.executable, *a], cwd=tmp_path / "elsewhere", env=env, capture_output=True, text=True, timeout=300
    )
    code = "import attsvm, attsvm.paths as p, attsvm.claims as c; print(attsvm.__file__, p.proofs_dir(), "
    code += "p.numerics_dir(), c.discover()[0].module)"
    r = run("-c", code)
    assert r.returncode == 0, r.stderr
    pkg, proofs, numerics, claim = (Path(x).resolve() for x in r.stdout.split())
    site = (tmp_path / "site").resolve()
    assert pkg == site / "attsvm" / "__init__.py"
    assert proofs == site / "attsvm" / "_builtin" / "proofs"
    assert numerics == site / "attsvm" / "_builtin" / "numerics"
    assert claim.parent == proofs / "claims"  # the claims are the shipped copies
    r = run("-c", "import attsvm.experiments as e; print(*e.NAMES)")  # the built-in experiments: the shipped specs
    shipped = sorted(p.stem for p in numerics.glob("*.py") if not p.name.startswith("_"))
    assert r.returncode == 0 and r.stdout.split() == shipped, r.stderr
    r = run("-m", "attsvm", "--version")
    assert (r.returncode, r.stdout) == (0, f"attsvm {attsvm.__version__}\n")
    r = run("-m", "attsvm", "check", "--budget", "ci", "--only", "grad-covariance", "--no-db", "--json", "-")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert '"verdict": "verified"' in r.stdout
    r = run("-m", "attsvm", "derive", "nuclear-variational", "--check")
    assert r.returncode == 0 and "verified" in r.stdout, r.stderr


# ---------------------------------------------------------------------------------------- attsvm.paths
@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    for var in ("ATTSVM_PROOFS", "ATTSVM_NUMERICS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_collections_resolve_from_a_temp_folder(elsewhere):
    proofs, numerics = paths.proofs_dir(), paths.numerics_dir()
    assert not proofs.is_relative_to(elsewhere) and not numerics.is_relative_to(elsewhere)
    assert list((proofs / "claims").glob("*.py")) and list((proofs / "derivations").glob("*.py"))
    assert list((proofs / "tex").glob("*.tex")) and list(numerics.glob("*.py"))
    from attsvm.claims import discover

    assert len(discover()) >= 25


def test_a_collection_in_the_current_folder_shadows_the_builtin_one(elsewhere):
    (elsewhere / "proofs").mkdir()
    (elsewhere / "numerics").mkdir()
    builtin = paths.proofs_dir(), paths.numerics_dir()
    assert builtin[0] != elsewhere / "proofs"  # an unrelated folder of that name does not shadow
    assert builtin[1] != elsewhere / "numerics"
    (elsewhere / "proofs" / "claims").mkdir()
    (elsewhere / "numerics" / "mine.py").write_text("")
    assert (paths.proofs_dir(), paths.numerics_dir()) == (elsewhere / "proofs", elsewhere / "numerics")


def test_the_environment_variable_comes_first(elsewhere, monkeypatch):
    (elsewhere / "proofs" / "claims").mkdir(parents=True)
    monkeypatch.setenv("ATTSVM_PROOFS", str(elsewhere / "mine"))
    monkeypatch.setenv("ATTSVM_NUMERICS", str(elsewhere / "nums"))
    assert (paths.proofs_dir(), paths.numerics_dir()) == (elsewhere / "mine", elsewhere / "nums")


def test_no_collection_anywhere_is_one_input_error(elsewhere, monkeypatch):
    monkeypatch.setattr(paths, "_REPO", elsewhere / "no-repo")
    monkeypatch.setattr(paths, "_installed", lambda name: None)
    with pytest.raises(InputError, match=r"built-in proofs/ collection was not found .*ATTSVM_PROOFS"):
        paths.proofs_dir()
    assert main(["derive", "--check"]) == 2


# ----------------------------------------------------------------------------------------------- the CLI
def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"attsvm \d+\.\d+\.\d+\S*\n", out) and out == f"attsvm {version()}\n"
    assert version() == attsvm.__version__, "installed metadata differs from attsvm.__version__: reinstall"


@pytest.mark.parametrize("where", ["after", "before"])
def test_debug_shows_the_traceback_before_or_after_the_subcommand(where, tmp_path, capsys):
    missing = str(tmp_path / "missing.npz")
    assert main(["solve", missing]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    argv = ["solve", missing, "--debug"] if where == "after" else ["--debug", "solve", missing]
    assert main(argv) == 2  # --debug shows the traceback and keeps the exit code (issue 32)
    err = capsys.readouterr().err
    assert "Traceback" in err and "missing.npz" in err


def test_debug_after_the_subcommand_is_in_its_help(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "--debug" in capsys.readouterr().out


def test_help_and_version_import_only_the_light_modules():
    code = (
        "import sys, attsvm.cli as c\n"
        "c.build_parser().format_help(); c.version()\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout.strip()) == (0, "[]"), r.stderr


# ------------------------------------------------------------------------------- the README's main command
@pytest.mark.slow
def test_a_fresh_venv_runs_from_any_folder(tmp_path):
    """``pip install -c constraints.txt .`` into a fresh venv (build isolation, the configured index), then
    check / derive / reproduce from an unrelated folder."""
    src = _copy_worktree(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_ = venv / "bin"
    pip = [bin_ / "pip", "install", "-q", "-c", src / "constraints.txt", src]
    r = subprocess.run(pip, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (tmp_path / "elsewhere").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTSVM_", "PYTHONPATH"))}

    def attsvm_(*args):
        return subprocess.run(
            [bin_ / "attsvm", *args], cwd=tmp_path / "elsewhere", env=env, capture_output=True, text=True, timeout=900
        )

    r = attsvm_("--version")
    assert (r.returncode, r.stdout) == (0, f"attsvm {attsvm.__version__}\n")
    r = attsvm_("check", "--budget", "ci", "--only", "svm-rank", "grad-closed-form", "--no-db")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = attsvm_("derive", "--check")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = attsvm_("reproduce", "visual", "--smoke", "--out", "out")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "elsewhere" / "out" / "visual.png").is_file()
