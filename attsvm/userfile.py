"""The one loader of user Python files: claim files, derivation files, experiment specs.

:func:`load_module` imports a file by path, as pytest imports test files:

* under a module name unique to the file's resolved path *and* contents
  (``attsvm_user_<kind>_<stem>_<digest>``), so two folders holding a file of the same name are never confused,
  and a file edited since its last import is imported afresh (an unchanged one is not re-executed: it comes
  from ``sys.modules``);
* with the file's folder first on ``sys.path`` while it runs, so that it can import modules beside it;
* with one error handling: a syntax error is an :class:`~attsvm.errors.InputError`
  ``FILE:LINE: syntax error in <kind> file (message)``, any other exception raised while importing is
  ``FILE: <kind> file failed to import (Type: message)`` and a file that cannot be read is
  ``FILE: cannot read <kind> file (reason)``. ``KeyboardInterrupt`` propagates.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

from .errors import InputError


def module_name(path: Path, source: bytes, kind: str) -> str:
    """The module name of the file ``path`` with contents ``source``: unique per resolved path and contents."""
    digest = hashlib.sha1(str(path).encode() + b"\0" + source).hexdigest()[:12]
    ident = lambda s: re.sub(r"\W", "_", s)  # noqa: E731
    return f"attsvm_user_{ident(kind)}_{ident(path.stem)}_{digest}"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def load_module(path: str | os.PathLike, kind: str) -> ModuleType:
    """Import the Python file ``path`` (a ``kind`` file: ``"claim"``, ``"derivation"``, ``"experiment spec"``)
    and return the module (module docstring)."""
    path = Path(path).resolve()
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read {kind} file ({exc.strerror or type(exc).__name__})") from None
    name = module_name(path, source, kind)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a source loader
        raise InputError(f"{path}: cannot import {kind} file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    folder = str(path.parent)
    sys.path.insert(0, folder)
    imported = False
    try:
        spec.loader.exec_module(mod)
        imported = True
    except SyntaxError as exc:
        where = f"{exc.filename or path}:{exc.lineno}" if exc.lineno else str(exc.filename or path)
        raise InputError(f"{where}: syntax error in {kind} file ({exc.msg})") from None
    except (Exception, SystemExit) as exc:  # not KeyboardInterrupt: Ctrl-C while importing stops the command
        raise InputError(f"{path}: {kind} file failed to import ({type(exc).__name__}: {_first_line(exc)})") from exc
    finally:
        if not imported:
            sys.modules.pop(name, None)
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return mod


__all__ = ["load_module", "module_name"]
