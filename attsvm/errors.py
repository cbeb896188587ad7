"""Exceptions with a CLI meaning.

``InputError`` is bad input (exit code 2, one line naming the problem);
``SolverError`` is a solver that did not certify an optimal point (never read as a value);
``InfeasibleError`` carries a Farkas certificate (exit code 1 at the CLI).
"""

from __future__ import annotations


class AttsvmError(Exception):
    """Base class of every error attsvm raises on purpose."""

    exit_code = 2


class InputError(AttsvmError, ValueError):
    """Malformed input: wrong shapes, NaN/inf, labels not in {+1,-1}, ties, unreadable files."""

    exit_code = 2


class SolverError(AttsvmError, RuntimeError):
    """A numerical solver returned a status other than optimal, or its certificate failed."""

    exit_code = 1


class InfeasibleError(AttsvmError):
    """A program is infeasible. ``certificate`` holds the Farkas multipliers when known."""

    exit_code = 1

    def __init__(self, message: str, certificate=None):
        super().__init__(message)
        self.certificate = certificate


class NearTieWarning(UserWarning):
    """The optimal token wins by a score gap within rounding of a tie (``tolerances`` key ``near_tie``)."""
