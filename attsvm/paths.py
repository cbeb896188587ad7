"""Where the collections live: ``proofs/`` (claims, derivations) and ``numerics/`` (experiment specs).

They are discovered by path, as pytest discovers test files. Resolution order for each:
the environment variable (``ATTSVM_PROOFS`` / ``ATTSVM_NUMERICS``), then ``./proofs`` / ``./numerics`` in the
current directory, then the folder next to the package source (a repository checkout or editable install).
"""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def _resolve(env: str, name: str) -> Path:
    if os.environ.get(env):
        return Path(os.environ[env])
    here = Path.cwd() / name
    if here.is_dir():
        return here
    return _REPO / name


def proofs_dir() -> Path:
    """The built-in ``proofs/`` collection."""
    return _resolve("ATTSVM_PROOFS", "proofs")


def numerics_dir() -> Path:
    """The built-in ``numerics/`` collection."""
    return _resolve("ATTSVM_NUMERICS", "numerics")
