"""Where the collections live: ``proofs/`` (claims, derivations, golden LaTeX) and ``numerics/`` (experiment specs).

They are discovered by path, as pytest discovers test files. Resolution order for each, first match wins:

1. the environment variable ``ATTSVM_PROOFS`` / ``ATTSVM_NUMERICS`` (used as given, even if it does not exist:
   the command that reads it then says so);
2. ``./proofs`` / ``./numerics`` in the current directory — deliberately, so that a collection being edited
   shadows the built-in one when you run ``attsvm`` next to it. To keep an unrelated folder of that name from
   shadowing it, ``./proofs`` counts only with a ``claims/`` or ``derivations/`` subfolder and ``./numerics``
   only with a ``*.py`` file in it;
3. the repository checkout holding the package (``<repo>/proofs``, ``<repo>/numerics`` next to ``attsvm/``,
   recognised by its ``pyproject.toml``): a source tree on ``sys.path`` or an editable install;
4. the copy shipped inside the installed package (``attsvm/_builtin/proofs``, ``attsvm/_builtin/numerics``,
   found with :mod:`importlib.resources`). The wheel builds it from the repository's top-level folders
   (``pyproject.toml``, ``[tool.setuptools] package-dir``), which stay the single source of truth.

Nothing found is an :class:`~attsvm.errors.InputError` (exit 2) naming the places searched.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError

_PKG = Path(__file__).resolve().parent
_REPO = _PKG.parent
_BUILTIN = "_builtin"  # the installed copies: attsvm/_builtin/{proofs,numerics}

_MARKERS = {
    "proofs": lambda p: (p / "claims").is_dir() or (p / "derivations").is_dir(),
    "numerics": lambda p: any(p.glob("*.py")),
}


def _installed(name: str) -> Path | None:
    """``attsvm/_builtin/<name>`` of the installed package, if it is a real folder."""
    from importlib import resources

    try:
        where = resources.files(__package__) / _BUILTIN / name
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - attsvm always importable here
        return None
    p = Path(str(where))
    return p if p.is_dir() else None


def candidates(name: str) -> list[Path]:
    """The places searched for the collection ``name`` (``"proofs"`` or ``"numerics"``), in order."""
    env = os.environ.get("ATTSVM_" + name.upper())
    return [*([Path(env)] if env else []), Path.cwd() / name, _REPO / name, _PKG / _BUILTIN / name]


def resolve(name: str) -> Path:
    """The collection folder ``name`` (``"proofs"`` or ``"numerics"``), by the order of this module's docstring."""
    env = "ATTSVM_" + name.upper()
    if os.environ.get(env):
        return Path(os.environ[env])
    here = Path.cwd() / name
    if here.is_dir() and _MARKERS[name](here):
        return here
    return builtin_dir(name)


def builtin_dir(name: str) -> Path:
    """The built-in collection ``name`` (``"proofs"`` or ``"numerics"``) that ships with attsvm: steps 3 and 4 of
    this module's docstring (the repository checkout's copy, else the installed one), never ``$ATTSVM_*`` or a
    folder of the current directory. The built-in experiments (:data:`attsvm.experiments.NAMES`) are its specs."""
    repo = _REPO / name
    if (_REPO / "pyproject.toml").is_file() and repo.is_dir():
        return repo
    inst = _installed(name)
    if inst is not None:
        return inst
    looked = ", ".join(map(str, candidates(name)))
    raise InputError(
        f"the built-in {name}/ collection was not found (looked in {looked}); set ATTSVM_{name.upper()} to its "
        f"folder or reinstall attsvm"
    )


def proofs_dir() -> Path:
    """The ``proofs/`` collection in use (claims in ``claims/``, derivations in ``derivations/``, golden ``tex/``)."""
    return resolve("proofs")


def numerics_dir() -> Path:
    """The ``numerics/`` collection in use (one experiment spec per ``*.py``)."""
    return resolve("numerics")
