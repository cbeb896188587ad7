r"""The one notation table of attsvm's symbolic derivations (THEORY §1).

Every symbol a derivation uses is created here, from a *base name* and optional indices, with the
assumptions of the table; the LaTeX printer (:mod:`attsvm.symbolic.printer`) reads the same table, so a
derivation and its rendering cannot disagree about notation.

A symbol's sympy name is ``base`` or ``base[i,t]``; it prints as the table's LaTeX for ``base`` with the
indices as a subscript, e.g. ``symbol("x", 1, 2)`` prints as $x_{1,2}$ and ``symbol("gamma", "i")`` as
$\gamma_{i}$.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp


@dataclass(frozen=True)
class Entry:
    """One row of the notation table: ``latex`` name, sympy ``assumptions``, and its ``meaning``."""

    latex: str
    meaning: str
    assumptions: dict[str, bool] = field(default_factory=lambda: {"real": True})
    matrix: bool = False


_R = {"real": True}
_P = {"positive": True}
_NN = {"nonnegative": True}

TABLE: dict[str, Entry] = {
    # data
    "X": Entry("X", "tokens of an input, rows x_t^T", _R, matrix=True),
    "x": Entry("x", "a token (entries x_{t,j})", _R),
    "Y": Entry("Y", "label in {+1,-1}", _R),
    "z": Entry("z", "query (entries z_k)", _R),
    "Z": Entry("Z", "queries as columns", _R, matrix=True),
    "ztil": Entry(r"\tilde z", "dual basis of the queries", _R),
    "Ztil": Entry(r"\tilde Z", "dual basis of the queries as columns", _R, matrix=True),
    "v": Entry("v", "linear head", _R),
    "n": Entry("n", "number of inputs", {"positive": True, "integer": True}),
    "T": Entry("T", "tokens per input", {"positive": True, "integer": True}),
    "d": Entry("d", "embedding dimension", {"positive": True, "integer": True}),
    # parameters
    "W": Entry("W", "attention weights (entries w_{j,k})", _R, matrix=True),
    "w": Entry("w", "an entry of W", _R),
    "K": Entry("K", "key factor", _R, matrix=True),
    "Q": Entry("Q", "query factor", _R, matrix=True),
    "k": Entry("k", "an entry of K", _R),
    "q": Entry("q", "an entry of Q", _R),
    "A": Entry("A", "constraint matrix / direction", _R, matrix=True),
    "B": Entry("B", "equality-constraint matrix", _R, matrix=True),
    "M": Entry("M", "dual matrix", _R, matrix=True),
    "U": Entry("U", "left singular vectors", _R, matrix=True),
    "V": Entry("V", "right singular vectors", _R, matrix=True),
    "G": Entry("G", "dual Gram matrix", _R, matrix=True),
    "D": Entry("D", "token difference", _R),
    # attention
    "a": Entry("a", "logit", _R),
    "s": Entry("s", "softmax probability", _P),
    "expo": Entry(r"\epsilon", "exponential of a logit, e^{a_t}", _P),
    "gamma": Entry(r"\gamma", "score Y v^T x_t", _R),
    "h": Entry("h", "directional logit x_t^T A z", _R),
    "u": Entry("u", "signed output gamma^T s", _R),
    "gammabar": Entry(r"\bar\gamma", "mean score s^T gamma", _R),
    "hbar": Entry(r"\bar h", "mean directional logit s^T h", _R),
    "gbar": Entry(r"\bar g", "mean value s^T g", _R),
    "r": Entry("r", "residual (diag(s)-ss^T)gamma", _R),
    "g": Entry("g", "a vector of values", _R),
    "y": Entry("y", "a vector orthogonal to every query", _R),
    "unit": Entry("e", "a standard unit vector", _R),
    "ones": Entry(r"\mathbf{1}", "the all-ones vector", _R),
    "Jac": Entry("J", "the softmax Jacobian diag(s) - s s^T", _R, matrix=True),
    "Lag": Entry(r"\Lambda", "a Lagrangian (not the loss L)", _R),
    "dual": Entry("g", "the dual function", _R),
    "L": Entry(r"\mathcal{L}", "empirical loss", _R),
    "lp": Entry(r"\ell'", "loss derivative at u", _R),
    "lpp": Entry(r"\ell''", "loss second derivative at u", _R),
    "eps": Entry(r"\varepsilon", "step along a direction", _R),
    # programs
    "lam": Entry(r"\lambda", "multiplier of an inequality", _NN),
    "nu": Entry(r"\nu", "multiplier of an equality", _R),
    "mu": Entry(r"\mu", "Farkas multiplier", _NN),
    "m": Entry("m", "margin slack", _NN),
    "c": Entry("c", "right-hand side", _R),
    "Delta": Entry(r"\Delta", "score gap", _P),
    "delta": Entry(r"\delta", "neighbour gap", _NN),
    "R": Entry("R", "norm of W", _P),
    "rho": Entry(r"\rho", "margin 1/||W^mm||", _P),
    "kappa": Entry(r"\kappa", "e^{-R rho}", _P),
    "omega": Entry(r"\omega", "slack of a non-support token", _NN),
    "sigma": Entry(r"\sigma", "singular value", _P),
    "p": Entry("p", "square root of a singular value", _P),
    "theta": Entry(r"\theta", "rotation parameter", _R),
    "Gb": Entry("G", "bound on the scores", _NN),
    "Hb": Entry("H", "bound on the directional logits", _NN),
    "gtil": Entry(r"\tilde g", "centred value g_t - s^T g", _R),
    "htil": Entry(r"\tilde h", "centred value h_t - s^T h", _R),
    "M0": Entry("M_0", "Lipschitz constant of l'", _NN),
    "M1": Entry("M_1", "bound on |l'|", _NN),
    "Wmm": Entry(r"W^{\mathrm{mm}}", "Att-SVM solution", _R, matrix=True),
    "Wp": Entry("W'", "overparameterised certificate direction", _R, matrix=True),
    "Wfin": Entry(r"W^{\mathrm{fin}}", "finite part of Gen-SVM", _R, matrix=True),
    "gradL": Entry(r"\nabla_W\mathcal{L}", "the gradient of the loss in W", _R, matrix=True),
    # the two-layer model (docs/theory.md, issue 30): layer 1 self-attention W_1, layer 2 attention W_2 with query z
    "Wone": Entry("W_{1}", "layer-1 (self-attention) weights of the two-layer model", _R, matrix=True),
    "Wtwo": Entry("W_{2}", "layer-2 weights of the two-layer model", _R, matrix=True),
    "wone": Entry("w^{(1)}", "an entry of W_1", _R),
    "wtwo": Entry("w^{(2)}", "an entry of W_2", _R),
    "Aone": Entry("A^{(1)}", "layer-1 logit x_tau^T W_1 x_t (query t, key tau)", _R),
    "sone": Entry("s^{(1)}", "layer-1 softmax probability of key tau for query t", _P),
    "atwo": Entry("a^{(2)}", "layer-2 logit h_t^T W_2 z", _R),
    "stwo": Entry("s^{(2)}", "layer-2 softmax probability", _P),
    "expone": Entry(r"\epsilon^{(1)}", "exponential of a layer-1 logit", _P),
    "exptwo": Entry(r"\epsilon^{(2)}", "exponential of a layer-2 logit", _P),
    "hl": Entry("h", "layer-1 output hbar_t + rho x_t (two-layer model)", _R),
    "hlbar": Entry(r"\bar h", "layer-1 attention average sum_tau s1_{t tau} x_tau", _R),
    "Hl": Entry("H", "layer-1 outputs as rows", _R, matrix=True),
    "res": Entry(r"\rho", "residual coefficient of the two-layer model (1 with a residual, else 0)", _NN),
    "gl": Entry("g", "layer-2 score Y v^T h_t", _R),
    "cl": Entry("c", "sensitivity of u to the layer-1 output h_t", _R),
    "ql": Entry("q", "sensitivity of u to the layer-1 logit A1_{t tau}", _R),
}


def entry(base: str) -> Entry:
    """The table row of ``base`` (KeyError names the missing base)."""
    try:
        return TABLE[base]
    except KeyError as exc:
        raise KeyError(f"symbol base {base!r} is not in the notation table") from exc


def _name(base: str, idx: tuple[Any, ...]) -> str:
    entry(base)
    return base if not idx else f"{base}[{','.join(str(i) for i in idx)}]"


def symbol(base: str, *idx: Any, **extra: bool) -> sp.Symbol:
    """A scalar symbol ``base[idx]`` with the table's assumptions (``extra`` overrides them)."""
    return sp.Symbol(_name(base, idx), **{**entry(base).assumptions, **extra})


def symbols(base: str, *shape: int, start: int = 1, **extra: bool) -> list:
    """Nested lists of ``symbol(base, i, j, ...)`` with 1-based indices (``start``) over ``shape``."""
    if not shape:
        return symbol(base, **extra)
    if len(shape) == 1:
        return [symbol(base, i, **extra) for i in range(start, start + shape[0])]
    return [
        [symbol(base, i, *rest, **extra) for rest in _prod(shape[1:], start)] for i in range(start, start + shape[0])
    ]


def _prod(shape: tuple[int, ...], start: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for s in shape:
        out = [o + (i,) for o in out for i in range(start, start + s)]
    return out


def matrix(base: str, rows: int, cols: int, **extra: bool) -> sp.Matrix:
    """An explicit ``rows x cols`` matrix of entry symbols ``base[j,k]``."""
    return sp.Matrix(rows, cols, lambda j, k: symbol(base, j + 1, k + 1, **extra))


def vector(base: str, size: int, *prefix: Any, **extra: bool) -> sp.Matrix:
    """An explicit column vector of symbols ``base[prefix..., t]``, t = 1..size."""
    return sp.Matrix(size, 1, lambda t, _: symbol(base, *prefix, t + 1, **extra))


def matrix_symbol(base: str, rows: Any, cols: Any, *idx: Any) -> sp.MatrixSymbol:
    """An abstract matrix (general statements), printed with the table's LaTeX and ``idx`` as subscript."""
    dims = [symbol(x) if isinstance(x, str) else x for x in (rows, cols)]
    return sp.MatrixSymbol(_name(base, idx), *dims)


def indexed(base: str, **extra: bool) -> sp.IndexedBase:
    r"""An ``IndexedBase`` with the table's assumptions (``extra`` overrides them), for statements in index notation
    with general sizes: ``indexed("x")[t, j]`` prints as $x_{t,j}$."""
    return sp.IndexedBase(_name(base, ()), **{**entry(base).assumptions, **extra})


def index(name: str) -> sp.Symbol:
    r"""A summation or entry index (a positive integer symbol), e.g. ``index("tau")`` printed $\tau$."""
    return sp.Symbol(name, integer=True, positive=True)


def split_name(name: str) -> tuple[str, str]:
    """``"x[1,2]"`` -> ``("x", "1,2")``; ``"W"`` -> ``("W", "")``."""
    if name.endswith("]") and "[" in name:
        base, idx = name[:-1].split("[", 1)
        return base, idx
    return name, ""
