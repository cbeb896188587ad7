"""Discovery of derivation files, by path, as pytest discovers test files.

Every ``*.py`` in a folder (default :func:`default_dir`: ``proofs/derivations`` of
:func:`attsvm.paths.proofs_dir`) is loaded as a module; each module-level
:class:`~attsvm.symbolic.derivation.DerivationSpec` (made by ``@derivation``) is registered under its name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

from ..errors import InputError
from ..paths import proofs_dir
from .derivation import DerivationSpec


def default_dir() -> Path:
    """``<proofs>/derivations``."""
    return proofs_dir() / "derivations"


def load_file(path: Path) -> list[DerivationSpec]:
    """Load one derivation file and return its specs (an import failure is an InputError naming the file)."""
    path = Path(path)
    try:
        key = hashlib.sha1(str(path.resolve()).encode() + path.read_bytes()).hexdigest()[:12]
    except OSError as exc:
        raise InputError(f"cannot read derivation file {path}: {exc.strerror}") from exc
    modname = f"attsvm_derivations.{path.stem.replace('-', '_')}_{key}"
    if modname in sys.modules:
        mod = sys.modules[modname]
    else:
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise InputError(f"cannot load derivation file {path}")
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:
            raise InputError(f"derivation file {path} failed to import: {type(exc).__name__}: {exc}") from exc
        sys.modules[modname] = mod
    found = [v for v in vars(mod).values() if isinstance(v, DerivationSpec)]
    return [DerivationSpec(s.name, s.title, s.claim, s.fn, str(path)) for s in found]


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
