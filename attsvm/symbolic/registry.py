"""Discovery of derivation files, by path, as pytest discovers test files.

Every ``*.py`` in a folder (default :func:`default_dir`: ``proofs/derivations`` of
:func:`attsvm.paths.proofs_dir`) is loaded as a module; each module-level
:class:`~attsvm.symbolic.derivation.DerivationSpec` (made by ``@derivation``) is registered under its name.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..paths import proofs_dir
from .derivation import DerivationSpec


def default_dir() -> Path:
    """``<proofs>/derivations``."""
    return proofs_dir() / "derivations"


def load_file(path: Path) -> list[DerivationSpec]:
    """Load one derivation file (:func:`attsvm.userfile.load_module`: an import failure is an InputError naming
    the file) and return its specs."""
    from ..userfile import load_module

    path = Path(path)
    mod = load_module(path, "derivation")
    found = [v for v in vars(mod).values() if isinstance(v, DerivationSpec)]
    return [DerivationSpec(s.name, s.title, s.claim, s.fn, str(path), s.ci) for s in found]


def discover(paths: list[Path] | None = None) -> dict[str, DerivationSpec]:
    """All derivations in ``paths`` (folders or files; default: :func:`default_dir`), keyed by name, sorted."""
    paths = [default_dir()] if not paths else [Path(p) for p in paths]
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.glob("*.py") if not f.name.startswith("_"))
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"no derivation folder or file at {p}")
    out: dict[str, DerivationSpec] = {}
    for f in files:
        for s in load_file(f):
            if s.name in out:
                raise InputError(f"derivation name {s.name!r} defined twice ({out[s.name].source} and {f})")
            out[s.name] = s
    return dict(sorted(out.items()))


def get(name: str, paths: list[Path] | None = None) -> DerivationSpec:
    """The derivation called ``name`` (InputError listing the known names otherwise)."""
    reg = discover(paths)
    if name not in reg:
        raise InputError(f"unknown derivation {name!r} (known: {', '.join(reg)})")
    return reg[name]
