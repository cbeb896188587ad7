"""The ``attsvm`` command line: ``solve``, ``gd``, ``derive``, ``check``, ``prove``, ``reproduce``.

Each subcommand lives in its own module ``attsvm.cli.<name>`` exposing
``add_parser(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``. Modules must import
only the standard library and numpy at import time (heavy imports go inside ``run``), so that
``attsvm --help`` stays fast.

Exit codes: 0 success; 1 a claim refuted, a program infeasible or a check failed; 2 bad input or
usage; 130 interrupted (Ctrl-C). Errors are one line on stderr starting ``error:``; ``--debug``, before or after
the subcommand, shows the traceback instead, with the same exit code. ``--version`` prints ``attsvm X.Y.Z``.

Warnings about the data (:class:`~attsvm.errors.NearTieWarning`, one ``warning:`` line each) are held until the
command has accepted its input — it calls :func:`release_warnings` (``gd``: once the runs are done), or it ends —
and printed only when it did not end in bad input (exit 2), before its ``error:`` line if any: a data set that is
refused gets its ``error:`` line alone, never a warning about data that were not accepted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
import warnings
from pathlib import Path

from ..errors import AttsvmError

SUBCOMMANDS = ("solve", "gd", "derive", "check", "prove", "reproduce")
#: the data's warning lines held while a command runs (:func:`main`; None outside a command)
_held: list[str] | None = None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def version() -> str:
    """The installed distribution's version (``importlib.metadata``), else ``attsvm.__version__`` (a source tree)."""
    from importlib import metadata

    try:
        return metadata.version("attsvm")
    except metadata.PackageNotFoundError:
        from .. import __version__

        return __version__


class _Version(argparse.Action):
    """``--version``: the version is looked up only when asked for (``attsvm --help`` stays fast)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(f"attsvm {version()}\n")
        parser.exit(0)


_DEBUG_HELP = "show the traceback of an error instead of one line (also accepted after the subcommand)"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attsvm", description="Check the max-margin (SVM) theory of attention.")
    p.add_argument("--version", action=_Version, help="print 'attsvm X.Y.Z' and exit")
    p.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        sp = mod.add_parser(sub)
        # after the subcommand too; SUPPRESS: absent there, it leaves the main parser's value alone
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
        sp.set_defaults(_run=mod.run)
    return p


def main(argv: list[str] | None = None) -> int:
    try:  # a subcommand's import can fail on a broken install (e.g. no built-in collection): one line, exit 2
        parser = build_parser()
    except AttsvmError as exc:
        if "--debug" in (sys.argv[1:] if argv is None else argv):
            traceback.print_exc()
        else:
            sys.stderr.write(f"error: {_one_line(exc)}\n")
        return exc.exit_code
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    global _held
    outer, _held = _held, []  # (main called from within a command, e.g. a test: restored below)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            rc = int(args._run(args) or 0)
        if rc != 2:
            release_warnings()
        return rc
    except AttsvmError as exc:
        if exc.exit_code != 2:
            release_warnings()
        if args.debug:  # the traceback instead of the line, the same exit code
            traceback.print_exc()
        else:
            sys.stderr.write(f"error: {_one_line(exc)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        release_warnings()
        sys.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    finally:
        _held = outer


def release_warnings() -> None:
    """Print the data's warning lines held so far (module docstring): a command calls it once its input is
    accepted; nothing outside a command."""
    global _held
    if _held:
        sys.stderr.write("".join(_held))
        sys.stderr.flush()
        _held = []


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """attsvm's own warnings as one ``warning:`` line on stderr — a :class:`~attsvm.errors.NearTieWarning` (about
    the data) held while a command runs (:func:`release_warnings`); other libraries' warnings keep Python's
    format."""
    from ..errors import NearTieWarning

    if issubclass(category, NearTieWarning) or "attsvm" in Path(str(filename)).parts:
        text = f"warning: {_one_line(message if isinstance(message, Warning) else Warning(message))}\n"
        if _held is not None and issubclass(category, NearTieWarning):
            _held.append(text)
        else:
            sys.stderr.write(text)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _one_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    return msg[0] if msg else exc.__class__.__name__


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
