r"""The LaTeX printer of attsvm: sympy's printer with the notation table and the objects of THEORY §1.

All LaTeX math in derivations comes from :func:`latex` (a :class:`AttsvmLatexPrinter`); nothing is
concatenated by hand. The printer knows

* symbols ``base[idx]`` of the notation table (:mod:`attsvm.symbolic.notation`), printed as ``latex_{idx}``;
* $\mathbb S(a)$ (:class:`Softmax`), $\mathrm{diag}(s)$ (:class:`Diag`), norms $\|A\|_F,\|A\|_2,\|A\|_\star$
  (:class:`Norm`), $\langle A,B\rangle$ (:class:`Inner`), $\mathrm{Cov}_s(g,h)$, $\mathrm{Var}_s(g)$,
  $\ell,\ell',\ell''$, $\nabla_W f$, $\partial f/\partial w$, averages $\frac1n\sum_i$ and sums $\sum_t$;
* relation chains $a=b\le c$ (:class:`Chain`), optionally with a side condition.
"""

from __future__ import annotations

from typing import Any

import sympy as sp
from sympy.printing.latex import LatexPrinter
from sympy.printing.precedence import PRECEDENCE

from ..serial import tex_escape
from .notation import TABLE, split_name


# ---------------------------------------------------------------------- objects the printer knows
class _Scalar(sp.Function):
    """A scalar-valued function whose arguments may be matrix expressions (commutative)."""

    def _eval_is_commutative(self):
        return True


class Softmax(sp.MatrixExpr):
    r"""$\mathbb S(a)$ of a column vector (a matrix expression of the same shape; printing only)."""

    def __new__(cls, vec):
        return sp.Basic.__new__(cls, sp.sympify(vec))

    @property
    def shape(self):
        return self.args[0].shape


class Elem(_Scalar):
    r"""$[M]_{t}$: entry ``idx`` of a matrix expression, ``Elem(M, idx)``."""

    nargs = 2


class Diag(sp.MatrixExpr):
    r"""$\mathrm{diag}(s)$ of a column vector (a $T\times T$ matrix expression; printing only)."""

    def __new__(cls, vec):
        return sp.Basic.__new__(cls, sp.sympify(vec))

    @property
    def shape(self):
        return (self.args[0].shape[0], self.args[0].shape[0])


class Norm(_Scalar):
    r"""$\|A\|_{F}$, $\|A\|_2$ or $\|A\|_\star$: ``Norm(A, kind)`` with kind one of ``F``, ``2``, ``*``, ``''``
    (Euclidean norm of a vector)."""

    nargs = 2
    KINDS = {"F": "_F", "2": "_2", "*": r"_\star", "": ""}

    def __new__(cls, A, kind: str = ""):
        if str(kind) not in cls.KINDS:
            raise ValueError(f"unknown norm kind {kind!r}")
        return super().__new__(cls, A, sp.Symbol("norm" + {"*": "nuc", "": "vec"}.get(str(kind), str(kind))))


class Inner(_Scalar):
    r"""$\langle A,B\rangle$."""

    nargs = 2


class Cov(_Scalar):
    r"""$\mathrm{Cov}_s(g,h)=\sum_ts_tg_th_t-(s^\top g)(s^\top h)$ (printing only): ``Cov(s, g, h)``."""

    nargs = 3


class Var(_Scalar):
    r"""$\mathrm{Var}_s(g)=\mathrm{Cov}_s(g,g)$ (printing only): ``Var(s, g)``."""

    nargs = 2


class Ell(_Scalar):
    r"""$\ell(u)$, the loss (an undefined function: derivations hold for every loss)."""

    nargs = 1

    def fdiff(self, argindex=1):
        return EllP(self.args[0])


class EllP(_Scalar):
    r"""$\ell'(u)$."""

    nargs = 1

    def fdiff(self, argindex=1):
        return EllPP(self.args[0])


class EllPP(_Scalar):
    r"""$\ell''(u)$."""

    nargs = 1


class Grad(_Scalar):
    r"""$\nabla_W f$: ``Grad(f, W)``."""

    nargs = 2


class AsScalar(_Scalar):
    r"""A $1\times1$ matrix expression used as a scalar (printed as its argument)."""

    nargs = 1


class Hess(_Scalar):
    r"""$\nabla^2f[A,A]$: ``Hess(f, A)``."""

    nargs = 2


class Partial(_Scalar):
    r"""$\partial f/\partial w$: ``Partial(f, w)``; ``Partial(f, w, k)`` for the $k$-th derivative."""

    nargs = (2, 3)


class Mean(sp.Function):
    r"""$\frac1n\sum_{i=1}^n f$: ``Mean(f, i, n)``."""

    nargs = 3


class ScalarSum(_Scalar):
    r"""$\sum_{\mathrm{cond}} f$ of a scalar ``f`` (use :func:`SumOver`)."""

    nargs = 2


class MatrixSum(sp.MatrixExpr):
    r"""$\sum_{\mathrm{cond}} F$ of a matrix expression ``F`` (use :func:`SumOver`)."""

    def __new__(cls, body, cond):
        return sp.Basic.__new__(cls, body, sp.sympify(cond))

    @property
    def shape(self):
        return self.args[0].shape


def SumOver(body, cond):  # noqa: N802 - reads as a sympy object
    r"""$\sum_{\mathrm{cond}}\mathrm{body}$; ``cond`` a symbol, a tuple of symbols or a relation."""
    if isinstance(cond, tuple):
        cond = sp.Tuple(*cond)
    if isinstance(body, sp.MatrixExpr):
        return MatrixSum(body, cond)
    return ScalarSum(body, cond)


class Text(sp.Symbol):
    r"""Upright text inside math (``\text{...}``), e.g. ``Text("for all ")``."""

    def __new__(cls, text: str):
        obj = sp.Symbol.__new__(cls, text)
        return obj


class InOrder(_Scalar):
    r"""A scalar sum printed with its terms in the order given (sympy sorts the terms of an ``Add``, so
    $\frac12\|W'\|^2-\frac12\|W\|^2$ would print with the negative term first): ``InOrder(a, -b)`` prints $a-b$.
    Use it at the top of a relation or inside delimiters (a norm, an inner product); :func:`in_order` also takes
    matrix terms. It has the precedence of a sum, so a product or power puts it in brackets,
    ``s_t * InOrder(delta, -s_tau)`` printing $s_t(\delta_{t\tau}-s_\tau)$; ``doit()`` is the sum itself."""

    precedence = PRECEDENCE["Add"]

    def doit(self, **hints):
        deep = hints.get("deep", True)
        return sp.Add(*[a.doit(**hints) if deep and isinstance(a, sp.Basic) else a for a in self.args])


class Times(_Scalar):
    r"""A scalar product printed with its factors in the order given (sympy sorts the factors of a ``Mul``):
    ``Times(x[t, j], s[t], in_order(g[t], -m), z[k])`` prints $x_{t,j}s_t(\gamma_t-m)z_k$; a factor that is a sum is
    put in brackets. ``doit()`` is the product itself."""

    precedence = PRECEDENCE["Mul"]

    def doit(self, **hints):
        deep = hints.get("deep", True)
        return sp.Mul(*[a.doit(**hints) if deep and isinstance(a, sp.Basic) else a for a in self.args])


class InOrderMatrix(sp.MatrixExpr):
    r"""A sum of matrix expressions printed in the order given: ``in_order(W, -S)`` prints $W-S$ (not $-S+W$)."""

    precedence = PRECEDENCE["Add"]

    def __new__(cls, *terms):
        return sp.Basic.__new__(cls, *[sp.sympify(x) for x in terms])

    @property
    def shape(self):
        return self.args[0].shape


def in_order(*terms: Any) -> Any:
    r"""The sum of ``terms``, printed in this order (:class:`InOrder`, :class:`InOrderMatrix` for matrices)."""
    if any(isinstance(x, sp.MatrixExpr) for x in terms):
        return InOrderMatrix(*terms)
    return InOrder(*terms)


class RealSpace(sp.Basic):
    r"""$\mathbb R^{d\times d}$, $\mathbb R^T$: ``RealSpace(d, d)``, ``RealSpace(T)`` (for dimensions in prose)."""

    def __new__(cls, *dims):
        return sp.Basic.__new__(cls, *[sp.sympify(x) for x in dims])


class Chain:
    r"""A relation chain ``Chain(a, "=", b, "<=", c)``; ``where`` is a side condition printed after a comma.

    ``breaks``: the relations (numbered from 1) that start a new line, e.g. ``breaks=(2,)`` prints
    $a=b$ and, aligned at the relation below it, $=c$ (an ``aligned`` environment, valid inside any display);
    ``where`` then goes on a line of its own. The operator ``"+"`` continues a sum that is too long for one line:
    ``Chain(a, "=", b, "+", c, breaks=(2,))`` prints $a=b$ and, indented below, $+\,c$."""

    OPS = {
        "=": "=",
        "<=": r"\le",
        ">=": r"\ge",
        "<": "<",
        ">": ">",
        "!=": r"\ne",
        "=>": r"\;\Rightarrow\;",
        "<=>": r"\;\Leftrightarrow\;",
        "in": r"\in",
        ":=": r"\coloneqq",
        "+": "+",
    }

    def __init__(self, *items: Any, where: Any = None, breaks: tuple[int, ...] = ()):
        if len(items) % 2 == 0 or len(items) < 1:
            raise ValueError("Chain needs terms separated by relation operators")
        for op in items[1::2]:
            if op not in self.OPS:
                raise ValueError(f"unknown relation {op!r}")
        n_rel = len(items) // 2
        if any(not (1 <= b <= n_rel) for b in breaks):
            raise ValueError(f"breaks must number relations 1..{n_rel}, got {breaks}")
        self.items = tuple(items)
        self.where = where
        self.breaks = tuple(sorted(set(breaks)))

    @property
    def terms(self) -> tuple:
        return self.items[0::2]


# ---------------------------------------------------------------------- the printer
def _powered(method):
    """Let a ``_print_X`` method take sympy's ``exp`` keyword (``f(x)^2``)."""

    def wrapped(self, expr, exp=None):
        out = method(self, expr)
        if exp is None:
            return out
        if out.endswith(("_F", "_2", r"_\star")):
            return out + "^{" + exp + "}"
        return (
            r"\left(" + out + r"\right)^{" + exp + "}"
            if " " in out and not out.endswith(r"\right)")
            else (out + "^{" + exp + "}")
        )

    wrapped.__name__ = method.__name__
    wrapped.__doc__ = method.__doc__
    return wrapped


class AttsvmLatexPrinter(LatexPrinter):
    """sympy's LaTeX printer with attsvm's notation table and objects."""

    printmethod = "_attsvm_latex"

    def __init__(self, settings: dict | None = None):
        super().__init__({"mul_symbol": None, "fold_short_frac": False, **(settings or {})})

    # symbols -------------------------------------------------------------
    def _named(self, name: str) -> str | None:
        base, idx = split_name(name)
        if base not in TABLE:
            return None
        tex = TABLE[base].latex
        if not idx:
            return tex
        parts = [
            p if p.lstrip("-").isdigit() else super(AttsvmLatexPrinter, self)._print_Symbol(sp.Symbol(p))
            for p in idx.split(",")
        ]
        return tex + "_{" + ",".join(parts) + "}"

    def _print_Symbol(self, expr, style="plain"):
        if isinstance(expr, Text):
            return r"\text{" + _escape(expr.name) + "}"
        tex = self._named(expr.name)
        return tex if tex is not None else super()._print_Symbol(expr, style=style)

    def _print_MatrixSymbol(self, expr, style="plain"):
        tex = self._named(expr.name)
        return tex if tex is not None else super()._print_MatrixSymbol(expr)

    def _print_Transpose(self, expr):
        arg = expr.arg
        inner = self._print(arg)
        if not isinstance(arg, sp.MatrixSymbol) or "^" in inner or r"\nabla" in inner:
            inner = r"\left(" + inner + r"\right)"
        return inner + r"^{\top}"

    def _print_Function(self, expr, exp=None):
        name = getattr(expr.func, "__name__", "")
        if isinstance(expr, sp.core.function.AppliedUndef) and name in TABLE:
            out = TABLE[name].latex + r"\left(" + ", ".join(self._print(a) for a in expr.args) + r"\right)"
            return out if exp is None else out + "^{" + exp + "}"
        return super()._print_Function(expr, exp=exp)

    def _print_Identity(self, expr):
        return "I"

    # functions -----------------------------------------------------------
    @_powered
    def _print_Softmax(self, expr):
        return r"\mathbb{S}\left(" + self._print(expr.args[0]) + r"\right)"

    @_powered
    def _print_Elem(self, expr):
        return r"\left[" + self._print(expr.args[0]) + r"\right]_{" + self._print(expr.args[1]) + "}"

    @_powered
    def _print_Diag(self, expr):
        return r"\mathrm{diag}\left(" + self._print(expr.args[0]) + r"\right)"

    @_powered
    def _print_Norm(self, expr):
        A, kind = expr.args
        sub = {"normF": "_F", "norm2": "_2", "normnuc": r"_\star", "normvec": ""}[str(kind)]
        return r"\left\|" + self._print(A) + r"\right\|" + sub

    @_powered
    def _print_Inner(self, expr):
        return r"\left\langle " + self._print(expr.args[0]) + ", " + self._print(expr.args[1]) + r"\right\rangle"

    @_powered
    def _print_Cov(self, expr):
        s, g, h = expr.args
        return r"\mathrm{Cov}_{" + self._print(s) + r"}\left(" + self._print(g) + ", " + self._print(h) + r"\right)"

    @_powered
    def _print_Var(self, expr):
        s, g = expr.args
        return r"\mathrm{Var}_{" + self._print(s) + r"}\left(" + self._print(g) + r"\right)"

    @_powered
    def _print_Ell(self, expr):
        return r"\ell\left(" + self._print(expr.args[0]) + r"\right)"

    @_powered
    def _print_EllP(self, expr):
        return r"\ell'\left(" + self._print(expr.args[0]) + r"\right)"

    @_powered
    def _print_EllPP(self, expr):
        return r"\ell''\left(" + self._print(expr.args[0]) + r"\right)"

    @_powered
    def _print_Grad(self, expr):
        return r"\nabla_{" + self._print(expr.args[1]) + "}" + self._print(expr.args[0])

    @_powered
    def _print_AsScalar(self, expr):
        return self._print(expr.args[0])

    @_powered
    def _print_Hess(self, expr):
        A = self._print(expr.args[1])
        return r"\nabla^2" + self._print(expr.args[0]) + r"\left[" + A + ", " + A + r"\right]"

    @_powered
    def _print_Partial(self, expr):
        if len(expr.args) == 3:
            k = self._print(expr.args[2])
            return (
                r"\frac{\partial^{"
                + k
                + "} "
                + self._print(expr.args[0])
                + r"}{\partial "
                + self._print(expr.args[1])
                + "^{"
                + k
                + "}}"
            )
        return r"\frac{\partial " + self._print(expr.args[0]) + r"}{\partial " + self._print(expr.args[1]) + "}"

    @_powered
    def _print_Mean(self, expr):
        f, i, n = expr.args
        body = self._print(f)
        if isinstance(f, sp.Add | sp.MatAdd | InOrder | InOrderMatrix):
            body = r"\left(" + body + r"\right)"
        return r"\frac{1}{" + self._print(n) + r"}\sum_{" + self._print(i) + "=1}^{" + self._print(n) + "}" + body

    def _print_MatrixSum(self, expr):
        return self._print_ScalarSum(expr)

    @_powered
    def _print_ScalarSum(self, expr):
        f, cond = expr.args
        body = self._print(f)
        if isinstance(f, sp.Add | sp.MatAdd | InOrder | InOrderMatrix):
            body = r"\left(" + body + r"\right)"
        return r"\sum_{" + self._print(cond) + "}" + body

    def _print_Sum(self, expr):
        r"""$\sum_{t=1}^T\sum_{\tau=1}^T f$: one summation sign per index, the outermost first (sympy stacks the
        ranges of a multiple sum under one sign)."""
        tex = ""
        for v, lo, hi in reversed(expr.limits):
            tex += r"\sum_{" + self._print(v) + "=" + self._print(lo) + "}^{" + self._print(hi) + "} "
        body = self._print(expr.function)
        if isinstance(expr.function, sp.Add | InOrder):
            body = r"\left(" + body + r"\right)"
        return tex + body

    def _print_Mul(self, expr):
        r"""As sympy, except that ordered sums (:class:`InOrder`) come last, in brackets: $s_t(\delta_{t\tau}-s_\tau)$,
        and a rational coefficient of a sum is printed in front of it: $\frac12\sum_t f_t$, not $\frac{\sum_t f_t}2$."""
        coeff, rest_ = expr.as_coeff_Mul()
        if coeff.is_Rational and coeff.q != 1 and rest_.has(sp.Sum, ScalarSum, MatrixSum) and sp.denom(rest_) == 1:
            sign = "- " if coeff < 0 else ""
            frac = r"\frac{" + str(abs(coeff.p)) + "}{" + str(coeff.q) + "}"
            return sign + frac + " " + self._print(rest_)

        def last(a):
            return isinstance(a, InOrder) or (isinstance(a, sp.Pow) and isinstance(a.base, InOrder))

        ordered = [a for a in expr.args if last(a)]
        if not ordered:
            return super()._print_Mul(expr)
        rest = sp.Mul(*[a for a in expr.args if not last(a)])
        tail = " ".join(
            r"\left(" + self._print_InOrder(a) + r"\right)" if isinstance(a, InOrder) else self._print(a)
            for a in ordered
        )
        if rest == 1:
            return tail
        if rest == -1:
            return "- " + tail
        head = self._print(rest)
        if isinstance(rest, sp.Add):
            head = r"\left(" + head + r"\right)"
        return head + " " + tail

    def _print_Times(self, expr, exp=None):
        if exp is not None:
            return r"\left(" + self._print_Times(expr) + r"\right)^{" + exp + "}"
        out, args = "", list(expr.args)
        if args and args[0] == -1:
            out, args = "- ", args[1:]
        parts = []
        for k, f in enumerate(args):
            tex = self.parenthesize(f, PRECEDENCE["Mul"], strict=True)
            if k < len(args) - 1 and isinstance(f, sp.Sum | ScalarSum | MatrixSum):  # a sum before other factors
                tex = r"\left(" + tex + r"\right)"
            parts.append(tex)
        return out + " ".join(parts)

    def _print_InOrder(self, expr, exp=None):
        if exp is not None:
            return r"\left(" + self._print_InOrder(expr) + r"\right)^{" + exp + "}"
        out = ""
        for k, term in enumerate(expr.args):
            if k and term.could_extract_minus_sign():
                out += " - "
                term = -term
            elif k:
                out += " + "
            tex = self._print(term)
            if self._needs_add_brackets(term):
                tex = r"\left(" + tex + r"\right)"
            out += tex
        return out

    _print_InOrderMatrix = _print_InOrder

    def _print_Chain(self, expr: Chain):
        if expr.breaks:
            return self._print_broken_chain(expr)
        parts = []
        for k, item in enumerate(expr.items):
            parts.append(Chain.OPS[item] if k % 2 else self._print(item))
        out = " ".join(parts)
        if expr.where is not None:
            out += r",\qquad " + self._print(expr.where)
        return out

    def _print_broken_chain(self, expr: Chain) -> str:
        r"""``\begin{aligned}`` with one line per group of relations, aligned at the relation that starts it."""
        out = self._print(expr.items[0])
        for r, k in enumerate(range(1, len(expr.items), 2), 1):
            op, term = Chain.OPS[expr.items[k]], self._print(expr.items[k + 1])
            if expr.items[k] == "+" and r in expr.breaks:
                op = r"\qquad +"
            out += (r" \\" + "\n" + "&" if r in expr.breaks else (" &" if r == 1 else " ")) + op + " " + term
        if expr.where is not None:
            out += r",\\" + "\n" + r"&\qquad " + self._print(expr.where)
        return r"\begin{aligned}" + "\n" + out + "\n" + r"\end{aligned}"

    def _print_RealSpace(self, expr):
        dims = r"\times ".join(self._print(x) for x in expr.args)
        return r"\mathbb{R}^{" + dims + "}"

    def _print_str(self, expr):
        return r"\text{" + _escape(expr) + "}"

    def _print_Tuple(self, expr):
        return ",".join(self._print(e) for e in expr)

    def _print_tuple(self, expr):
        return r",\ ".join(self._print(e) for e in expr)


def _escape(text: str) -> str:
    """Escape LaTeX special characters of prose."""
    return tex_escape(text)


escape_text = _escape


def latex(expr: Any, **settings: Any) -> str:
    """LaTeX of ``expr`` with attsvm's notation (the only source of math LaTeX in derivations)."""
    return AttsvmLatexPrinter(settings).doprint(expr)
