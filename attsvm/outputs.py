"""Output files: checked before the work starts, written atomically, nothing half-written.

Every file attsvm writes goes through :func:`atomic` (or :func:`write_text` / :func:`write_bytes`, built on
it): the bytes go to a temporary file in the target's own folder (``.NAME.XXXXXXXX.tmp-attsvm``), are flushed
and ``fsync``-ed, and the temporary file is renamed over the target with :func:`os.replace` (atomic on POSIX
and Windows). On any failure or ``KeyboardInterrupt`` the temporary file is removed and the target is left as
it was. A missing parent folder is created.

:func:`transaction` groups several writes into one all-or-nothing step (``attsvm reproduce``'s
figure files, caption, ``NAME.json`` and ``NAME.manifest.json``, a counterexample's ``.npz`` + ``.json``): inside
it every write stays a temporary file; when the block ends without an exception they are all renamed at once (with
Ctrl-C held back until the last rename is done), otherwise all are removed.

:func:`check_output_file` and :func:`check_output_dir` are what a command calls on each output path *before*
it starts working: a path that cannot be written is bad input (:class:`~attsvm.errors.InputError`, exit 2)
with one line naming the option and the reason. Writability is tested by creating and removing a temporary
file (or folder) where the output will go — permission bits alone say nothing when running as root.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import InputError

TEMP_SUFFIX = ".tmp-attsvm"  # every temporary file this module makes ends so (tests look for leftovers)

_local = threading.local()  # .pending: list of (temporary, target) inside a transaction, else absent/None


# ---------------------------------------------------------------------------------------------- checks
def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _nearest_existing(folder: Path) -> Path:
    """``folder`` or its nearest ancestor that exists (a file there is returned as is: the caller rejects it)."""
    p = folder
    while not p.exists() and not p.is_symlink() and p.parent != p:
        p = p.parent
    return p


def _probe(folder: Path, option: str, shown: str) -> None:
    """Raise :class:`InputError` unless a file can be created in ``folder`` (or ``folder`` can be created)."""
    base = _nearest_existing(folder)
    if not base.is_dir():
        raise InputError(f"{option} {shown}: {base} is not a directory")
    try:
        if base == folder:
            fd, tmp = tempfile.mkstemp(dir=base, prefix=".attsvm-probe-", suffix=TEMP_SUFFIX)
            os.close(fd)
            os.unlink(tmp)
        else:
            os.rmdir(tempfile.mkdtemp(dir=base, prefix=".attsvm-probe-", suffix=TEMP_SUFFIX))
    except OSError as exc:
        raise InputError(f"{option} {shown}: cannot write in {base} ({_reason(exc)})") from None


def check_output_file(path: str | os.PathLike | None, option: str) -> None:
    """Check that the output file ``path`` (of the command-line option ``option``, e.g. ``"--latex"``) can be
    written: it is not a folder or a special file, and its folder exists (or can be created) and is writable.
    ``None`` and ``"-"`` (standard output) pass. Raises :class:`~attsvm.errors.InputError`."""
    if path is None or str(path) == "-":
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{option} {path}: is a folder, expected a file name")
    if p.exists() and not p.is_file():
        raise InputError(f"{option} {path}: exists and is not a regular file")
    _probe(p.parent, option, str(path))


def check_output_dir(path: str | os.PathLike, option: str) -> None:
    """Check that the output folder ``path`` (of ``option``, e.g. ``"--out"``) is a folder, or can be created,
    and that files can be written in it. Raises :class:`~attsvm.errors.InputError`."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} {path}: exists and is not a directory")
    _probe(p, option, str(path))


# ---------------------------------------------------------------------------------------------- writing
def _file_mode() -> int:
    """The mode a new file gets (``0o666`` less the umask; ``mkstemp`` itself makes ``0o600``)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"wb"`` or ``"w"``); when the block ends
    normally, flush, ``fsync`` and rename it to ``path`` (inside a :func:`transaction`: at the transaction's
    end). On any exception, ``KeyboardInterrupt`` included, the temporary file is removed and ``path`` is
    untouched. An ``OSError`` becomes an :class:`~attsvm.errors.InputError` naming ``path``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic: mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=TEMP_SUFFIX)
    except OSError as exc:
        raise InputError(f"{target}: cannot write ({_reason(exc)})") from None
    try:
        with os.fdopen(fd, mode, encoding=(encoding or "utf-8") if mode == "w" else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode())
        pending = getattr(_local, "pending", None)
        if pending is not None:
            pending.append((tmp, target))
        else:
            os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError(f"{target}: cannot write ({_reason(exc)})") from None
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic`); return the path."""
    with atomic(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic`); return the path."""
    with atomic(path, "w") as fh:
        fh.write(text)
    return Path(path)


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold back SIGINT for the duration of the block (main thread only); deliver it at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if got:
        if previous is signal.default_int_handler:
            raise KeyboardInterrupt
        if callable(previous):
            previous(signal.SIGINT, None)


@contextlib.contextmanager
def transaction() -> Iterator[None]:
    """Make the writes of the block all-or-nothing (module docstring). Nested transactions join the outer one."""
    if getattr(_local, "pending", None) is not None:
        yield
        return
    pending: list[tuple[str, Path]] = []
    _local.pending = pending
    try:
        yield
        _local.pending = None
        with _sigint_held():
            while pending:
                tmp, target = pending[0]
                os.replace(tmp, target)
                pending.pop(0)
    except OSError as exc:
        raise InputError(f"cannot write the output files ({_reason(exc)})") from None
    finally:
        _local.pending = None
        for tmp, _ in pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def leftovers(folder: str | os.PathLike) -> list[Path]:
    """Temporary files of this module left under ``folder`` (there should be none)."""
    return sorted(p for p in Path(folder).rglob(f"*{TEMP_SUFFIX}"))


__all__ = [
    "TEMP_SUFFIX",
    "atomic",
    "check_output_dir",
    "check_output_file",
    "leftovers",
    "transaction",
    "write_bytes",
    "write_text",
]
