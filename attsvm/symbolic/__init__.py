"""Symbolic derivations: notation table, builders, LaTeX printer, Derivation objects, discovery, instance KKT.

Heavy (sympy) imports happen when a submodule is imported; ``import attsvm.symbolic`` itself imports sympy.

Public API::

    from attsvm.symbolic import Derivation, derivation, discover, latex, Chain, lint_problems
    from attsvm.symbolic.checks import Symbolic, SymbolicNonneg, Equal, Nonneg, All, Predicate
"""

from __future__ import annotations

from .checks import All, Check, CheckResult, Equal, Nonneg, Predicate, Symbolic, SymbolicNonneg
from .derivation import Derivation, DerivationSpec, Step, derivation, document, markdown_document
from .lint import lint_problems, undefined_symbols
from .notation import TABLE, matrix, matrix_symbol, symbol, vector
from .printer import AttsvmLatexPrinter, Chain, latex
from .registry import default_dir, discover, get

__all__ = [
    "TABLE",
    "All",
    "AttsvmLatexPrinter",
    "Chain",
    "Check",
    "CheckResult",
    "Derivation",
    "DerivationSpec",
    "Equal",
    "Nonneg",
    "Predicate",
    "Step",
    "Symbolic",
    "SymbolicNonneg",
    "default_dir",
    "derivation",
    "discover",
    "document",
    "get",
    "latex",
    "lint_problems",
    "markdown_document",
    "matrix",
    "matrix_symbol",
    "symbol",
    "undefined_symbols",
    "vector",
]
