"""attsvm — make the max-margin theory of attention checkable.

``import attsvm`` loads numpy only. The heavy parts load on demand:
``attsvm.svm`` (cvxpy, Clarabel, python-flint), ``attsvm.gd`` (torch), ``attsvm.symbolic`` (sympy),
``attsvm.highprec`` (mpmath: the model and GD at 50 digits), ``attsvm.claims`` / ``attsvm.strategies``
(hypothesis).
"""

from __future__ import annotations

from . import generate, model
from .data import Dataset, FlatView, load, save
from .errors import AttsvmError, InfeasibleError, InputError, SolverError
from .tolerances import tol

__version__ = "0.1.0"

__all__ = [
    "AttsvmError",
    "Dataset",
    "FlatView",
    "InfeasibleError",
    "InputError",
    "SolverError",
    "generate",
    "load",
    "model",
    "save",
    "tol",
    "__version__",
]
