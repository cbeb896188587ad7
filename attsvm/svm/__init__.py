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
    certify_head(ds, alpha=None) -> dict                             # exact v^mm (head SVM)
    polyhedral.solve_polyhedral(ds, norm, alpha=None, certify=False)  # l1 / linf LPs (norm "l1" | "linf")
    polyhedral.verify_lp(ds, cons, norm, W, lam) -> dict             # exact optimality check of a rational pair
    specnorm.solve_spectral(ds, alpha=None, certify=False)           # spectral-norm SDP, proved duality gap
    diagonal.solve_diagonal(ds, alpha=None, norm="l1", certify=False) # min ||w|| over diagonal W = diag(w)
    eqsvm.solve_eqsvm(D_in, Z_in, D_eq, Z_eq, norm="fro", certify=True) # equality + inequality rows (graph SVM)

``solve`` dispatches on ``norm`` in {fro, nuc, lq, l1, linf, spec} and ``program`` in {attsvm, gensvm, seq,
causal, prompt, head, relaxed, diagonal} (``diagonal``: over diagonal $W$, norms l1 / linf, :mod:`.diagonal`);
``PROGRAM_CHECKS`` declares, per program and norm, its independent check (the certificate of ``certify=True``, or
none, with the reason: :mod:`attsvm.registries`);
the norms other than ``fro`` are defined for the Att-SVM programs (attsvm, seq, causal):
``nuc`` $\|W\|_\star$, ``lq`` entrywise $\|W\|_q$, ``l1`` / ``linf`` entrywise $\|W\|_1$ / $\|W\|_{\max}$ (linear
programs, exact rational certificate with ``certify``), ``spec`` the spectral norm $\|W\|_2$ (an SDP, proved
duality gap with ``certify``). ``seq``/``causal`` are Att-SVM on the flat view (one row per query); the data set's
``kind`` must match. An infeasible program returns an :class:`SVMSolution` with ``status == "infeasible"``
and a verified Farkas certificate in ``farkas`` (it does not raise).

Degenerate and extreme inputs: with $T=1$ there are no constraints and every program's answer is $W=0$
(objective 0; the head SVM still has its $n$ constraints $Y_iv^\top x_{i1}\ge1$); a constraint whose feature
vanishes ($x_{it}=x_{i\alpha_i}$ or $z_i=0$) makes the program infeasible, with an exact Farkas vector supported
on the vanishing constraints;
very large or small data are solved after an exact power-of-two rescaling (:mod:`.scaling`); a problem that
would not fit in memory is refused before anything large is allocated (:mod:`.budget`, ``ATTSVM_MEMORY_BYTES``).

Module layers (``LAYERS``, lowest first): a module imports only modules of strictly lower layers, at module
level (no function-level imports inside the package), and no private names (``property_tests/test_svm_robust.py``
checks both)::

    0  blas  budget  constraints  cvx  primal  support             (no imports inside the package)
    1  dual  eqdual  exact  reference  solution                    working-set duals; exact integers; cvxpy; result
    2  spectral                                                    exact spectral-norm / PSD proofs
    3  scaling                                                     exact power-of-two rescaling
    4  certificate  farkas                                         exact certificates; Farkas / feasibility
    5  frobenius                                                   solve_fro, certify_fro, wmm, batches
    6  gensvm  lq  neighbours  nuclear  polyhedral  prompt         the other programs; SVM-neighbours
    7  diagonal  specnorm                                          diagonal Att-SVM (a view); spectral-norm SVM
    8  eqsvm                                                       equality + inequality SVM (graph SVM of NTP)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data import Dataset
from ..errors import InputError
from ..registries import Check, declare
from . import diagonal, gensvm, lq, nuclear, polyhedral, prompt, specnorm
from .farkas import feasibility
from .frobenius import FroBatch, certify_fro, solve_fro, solve_fro_batch, wmm
from .neighbours import is_locally_optimal, neighbour_gap, support_tokens
from .prompt import certify_head, certify_prompt
from .solution import SVMSolution

NORMS = ("fro", "nuc", "lq", "l1", "linf", "spec")

_EXACT_FRO = Check("attsvm.svm.certificate:certify_solution", "exact rational KKT certificate (certify=True)")
_ATT_NORMS = {
    "fro": _EXACT_FRO,
    "nuc": Check("attsvm.svm.nuclear:certify_gap", "duality gap proved in exact arithmetic (certify=True)"),
    "lq": Check(
        None,
        "none: float KKT residuals of the solver's own multipliers only (power cones have no exact certificate "
        "here), so a claim on it cannot be confirmed at high precision",
    ),
    "l1": Check("attsvm.svm.polyhedral:certify_lp", "exact LP basis certificate (certify=True)"),
    "linf": Check("attsvm.svm.polyhedral:certify_lp", "exact LP basis certificate (certify=True)"),
    "spec": Check("attsvm.svm.specnorm:certify_spectral", "duality gap of the SDP proved exactly (certify=True)"),
}
_FLOAT_KKT = "none: float KKT residuals of the solver's own solution only (no exact certificate), so a claim on it "
#: each program, the norms it is defined for (:func:`solve` refuses the others) and the independent check of each
#: (:mod:`attsvm.registries`): the certificate ``solve(..., certify=True)`` computes, or for ``prompt`` the exact
#: :func:`certify_prompt`, called on its own
PROGRAM_CHECKS = {
    "attsvm": _ATT_NORMS,
    "gensvm": {
        "fro": Check(
            None,
            _FLOAT_KKT + "cannot be confirmed at high precision (singleton sets: the Att-SVM, which is certified)",
        )
    },
    "seq": _ATT_NORMS,
    "causal": _ATT_NORMS,
    "prompt": {
        "fro": Check(
            "attsvm.svm.prompt:certify_prompt",
            "exact rational p^mm: the prompt SVM as Frobenius Att-SVM with z_i = e_1 (called on its own: "
            "solve(certify=True) reports float KKT residuals)",
        )
    },
    "head": {
        "fro": Check(
            "attsvm.svm.prompt:certify_head",
            "exact rational v^mm: the head SVM as Frobenius Att-SVM with tokens (Y_i x_i,alpha_i, 0) and z_i = e_1 "
            "(called on its own: solve(certify=True) reports float KKT residuals)",
        )
    },
    "relaxed": {"fro": Check(None, _FLOAT_KKT + "cannot be confirmed at high precision")},
    "diagonal": {
        "l1": Check("attsvm.svm.polyhedral:certify_lp", "exact LP basis certificate of the view (certify=True)"),
        "linf": Check("attsvm.svm.polyhedral:certify_lp", "exact LP basis certificate of the view (certify=True)"),
    },
}
PROGRAMS = declare("svm.PROGRAMS", PROGRAM_CHECKS)

#: the import layers of the package (module docstring), lowest first
LAYERS: tuple[tuple[str, ...], ...] = (
    ("blas", "budget", "constraints", "cvx", "primal", "support"),
    ("dual", "eqdual", "exact", "reference", "solution"),
    ("spectral",),
    ("scaling",),
    ("certificate", "farkas"),
    ("frobenius",),
    ("gensvm", "lq", "neighbours", "nuclear", "polyhedral", "prompt"),
    ("diagonal", "specnorm"),
    ("eqsvm",),
)

__all__ = [
    "LAYERS",
    "NORMS",
    "PROGRAMS",
    "PROGRAM_CHECKS",
    "FroBatch",
    "SVMSolution",
    "certify_fro",
    "certify_head",
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
    if program == "diagonal":
        return diagonal.solve_diagonal(ds, None, norm, certify=certify)
    if program in ("attsvm", "seq", "causal"):
        if norm == "fro":
            return solve_fro(ds, None, certify=certify, program=program)
        if norm == "nuc":
            return _tag(nuclear.solve_nuclear(ds, None, certify=certify), program)
        if norm in polyhedral.NORMS:
            return _tag(polyhedral.solve_polyhedral(ds, norm, None, certify=certify), program)
        if norm == "spec":
            return _tag(specnorm.solve_spectral(ds, None, certify=certify), program)
        return _tag(lq.solve_lq(ds, q, None), program)
    if norm != "fro":
        raise InputError(f"program {program!r} is defined for the Frobenius/Euclidean norm only (got {norm!r})")
    if program == "gensvm":
        sel = singleton_selection(ds) if selected is None else np.asarray(selected, dtype=bool)
        if sel.shape != (ds.n, ds.T):
            raise InputError(f"selected sets must be a bool mask of shape {(ds.n, ds.T)}, got {sel.shape}")
        return gensvm.solve_gensvm(ds, sel)
    if program == "prompt":
        return prompt.solve_prompt(ds, None)
    if program == "head":
        return prompt.solve_head(ds, None)
    return prompt.solve_relaxed_prompt(ds, None)


def _tag(sol: SVMSolution, program: str) -> SVMSolution:
    sol.program = program
    return sol
