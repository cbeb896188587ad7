"""The ``attsvm`` command line: ``solve``, ``gd``, ``derive``, ``check``, ``reproduce``.

Each subcommand lives in its own module ``attsvm.cli.<name>`` exposing
``add_parser(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``. Modules must import
only the standard library and numpy at import time (heavy imports go inside ``run``), so that
``attsvm --help`` stays fast.

Exit codes: 0 success; 1 a claim refuted, a program infeasible or a check failed; 2 bad input or
usage. Errors are one line on stderr starting ``error:`` (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import AttsvmError

SUBCOMMANDS = ("solve", "gd", "derive", "check", "reproduce")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attsvm", description="Check the max-margin (SVM) theory of attention.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        rc = args._run(args)
    except AttsvmError as exc:
        if args.debug:
            raise
        sys.stderr.write(f"error: {_one_line(exc)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)


def _one_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    return msg[0] if msg else exc.__class__.__name__


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
