r"""Every convex program of THEORY §2, with certificates.

Public API (curated)::

    solve(ds, alpha=None, norm="fro", program="attsvm", q=None, certify=False, selected=None) -> SVMSolution
    solve_fro(ds, alpha=None, certify=False) -> SVMSolution          # Frobenius Att-SVM, one data set
    wmm(ds, alpha=None) -> ndarray | None                            # just W^mm_alpha (None: infeasible)
    solve_fro_batch(ds_batch, alpha=None) -> FroBatch                # a batch (leading axis B)
    feasibility(ds, alpha=None) -> (bool, mu | None)                 # Farkas mu (N, T) when infeasible
    support_tokens(ds, W, alpha=None); is_locally_optimal(ds, alpha=None); neighbour_gap(ds, alpha=None)
    certify_fro(ds, alpha=None, sol=None) -> dict                    # exact / rigorous optimality proof
    certify_prompt(ds, alpha=None) -> dict                           # exact p^mm_alpha (prompt SVM)

``solve`` dispatches on ``norm`` in {fro, nuc, lq} and ``program`` in {attsvm, gensvm, seq, causal,
prompt, head, relaxed}. ``seq``/``causal`` are Att-SVM on the flat view (one row per query); the data set's
``kind`` must match. An infeasible program returns an :class:`SVMSolution` with ``status == "infeasible"``
and a verified Farkas certificate in ``farkas`` (it does not raise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data import Dataset
from ..errors import InputError
from .certificate import certify_fro
from .farkas import feasibility
from .frobenius import FroBatch, solve_fro, solve_fro_batch, wmm
from .neighbours import is_locally_optimal, neighbour_gap, support_tokens
from .prompt import certify_prompt
from .solution import SVMSolution

NORMS = ("fro", "nuc", "lq")
PROGRAMS = ("attsvm", "gensvm", "seq", "causal", "prompt", "head", "relaxed")

__all__ = [
    "NORMS",
    "PROGRAMS",
    "FroBatch",
    "SVMSolution",
    "certify_fro",
    "certify_prompt",
    "feasibility",
    "is_locally_optimal",
    "neighbour_gap",
    "solve",
    "solve_fro",
    "solve_fro_batch",
    "support_tokens",
    "wmm",
]


def _check_kind(ds: Dataset, program: str) -> None:
    want = {"seq": ("sequence",), "causal": ("causal",)}.get(program)
    if want is not None and ds.kind not in want:
        raise InputError(f"program {program!r} needs {want[0]} data, got kind {ds.kind!r}")
    if program in ("attsvm", "gensvm", "prompt", "head", "relaxed") and ds.kind in ("sequence", "causal"):
        raise InputError(f"program {program!r} needs cross/self-attention data, got kind {ds.kind!r} (use seq/causal)")


def singleton_selection(ds: Dataset, alpha: Any = None) -> np.ndarray:
    r"""The Gen-SVM selected sets $\mathcal O_i=\{\alpha_i\}$ as a bool (n, T) mask (default $\alpha$: selection)."""
    a = ds.selection if alpha is None else np.asarray(alpha, dtype=np.int64)
    mask = np.zeros((ds.n, ds.T), dtype=bool)
    mask[np.arange(ds.n), a.reshape(-1)] = True
    return mask


def solve(
    ds: Dataset,
    alpha: Any = None,
    norm: str = "fro",
    program: str = "attsvm",
    q: float | None = None,
    certify: bool = False,
    selected: np.ndarray | None = None,
) -> SVMSolution:
    """Solve one program for one data set (see the module docstring). Bad arguments raise InputError."""
    if norm not in NORMS:
        raise InputError(f"unknown norm {norm!r} (choose from {', '.join(NORMS)})")
    if program not in PROGRAMS:
        raise InputError(f"unknown program {program!r} (choose from {', '.join(PROGRAMS)})")
    if ds.batched:
        raise InputError("solve takes a single data set; use solve_fro_batch or loop over the batch")
    _check_kind(ds, program)
    if alpha is not None:
        ds = ds.with_alpha(alpha)
        alpha = None
    if norm == "lq":
        if q is None:
            raise InputError("norm 'lq' needs --q (the exponent q > 1)")
        if not q > 1:
            raise InputError(f"q must be > 1, got {q}")
    elif q is not None:
        raise InputError("--q is only meaningful with --norm lq")
    if program in ("attsvm", "seq", "causal"):
        if norm == "fro":
            return solve_fro(ds, None, certify=certify, program=program)
        if norm == "nuc":
            return _tag(_program("nuclear", "solve_nuclear")(ds, None, certify=certify), program)
        return _tag(_program("lq", "solve_lq")(ds, q, None), program)
    if norm != "fro":
        raise InputError(f"program {program!r} is defined for the Frobenius/Euclidean norm only (got {norm!r})")
    if program == "gensvm":
        solve_gensvm = _program("gensvm", "solve_gensvm")
        sel = singleton_selection(ds) if selected is None else np.asarray(selected, dtype=bool)
        if sel.shape != (ds.n, ds.T):
            raise InputError(f"selected sets must be a bool mask of shape {(ds.n, ds.T)}, got {sel.shape}")
        return solve_gensvm(ds, sel)
    fn = {"prompt": "solve_prompt", "head": "solve_head", "relaxed": "solve_relaxed_prompt"}[program]
    return _program("prompt", fn)(ds, None)


def _program(module: str, name: str):
    """Import ``attsvm.svm.<module>.<name>`` lazily; a missing program is reported, not a traceback."""
    import importlib

    try:
        mod = importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{module}":
            raise
        raise InputError(f"this build has no {module} program (module attsvm.svm.{module} is missing)") from exc
    fn = getattr(mod, name, None)
    if fn is None:
        raise InputError(f"attsvm.svm.{module} has no {name}")
    return fn


def _tag(sol: SVMSolution, program: str) -> SVMSolution:
    sol.program = program
    return sol
