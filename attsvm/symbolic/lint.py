r"""A lint over generated LaTeX: every symbol a page uses is defined on that page.

A referee reads a derivation page on its own; a symbol such as $D_{i,t}$ that the page uses but never defines is
a defect of the page. :func:`undefined_symbols` scans the math of a LaTeX page (``$...$`` and display
environments; ``\text{...}`` inside math is prose and skipped) and finds every *checked* symbol:

* every macro that is not a standard one (:data:`STANDARD`): Greek letters, $\ell$, $\mathcal L$,
  $\mathbb S$, $\mathbf 1$, ``\mathrm{Cov}``, decorated letters such as $\tilde z$ or $\bar\gamma$;
* every symbol that carries a subscript (``D_{i,t}``, ``u_{i}``, ``{x}_{t,j}``), a prime (``W'``) or a name as
  superscript (``W^{\mathrm{mm}}``).

Bare Latin letters without a subscript (sizes $n,T,d$, indices, scalars) are not checked. A symbol's *base* is
the symbol without its subscript: $D$ for $D_{i,t}$; a base is defined for all its subscripts at once. A base
is **defined** on the page when

1. it is a leading symbol of an item of the page's notation table (the list after ``\paragraph{Notation.}``,
   see :func:`attsvm.symbolic.derivation.Derivation.latex`): ``\item $D_{i,t} = ...$`` or
   ``\item $n, T, d$: ...``;
2. it is the whole left-hand side of a defining relation in the page's math: at the start of a formula, of a
   ``where`` clause (after ``\qquad``) or of a line, the symbol (or a comma-separated list of symbols)
   followed by $=$, $\coloneqq$ or $\in$ — ``$s_{i} = \mathbb{S}(a_{i})$``, ``$X_{i} \in \mathbb{R}^{T\times d}$``;
3. or it is an *index*: it occurs without a subscript inside a subscript or as a summation variable
   (``\sum_{\tau=1}^{T}``, ``s_{\tau}``) somewhere on the page.

So the rule a page satisfies is

$$\forall\ \text{checked symbol } S \text{ on the page}:\quad \mathrm{base}(S) \in
\mathrm{Notation} \cup \mathrm{Defined} \cup \mathrm{Indices}.$$

:func:`lint_problems` gives one line per undefined base (with the first use), empty when the page passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Macros that are notation every reader knows: operators, relations, delimiters, spacing, fonts of standard
# sets, and the names of standard functions. A macro not listed here is a symbol and must be defined.
STANDARD: frozenset[str] = frozenset(
    r"""
    \frac \dfrac \tfrac \sum \prod \int \left \right \bigl \bigr \Bigl \Bigr \big \Big \middle
    \exp \log \ln \sqrt \max \min \sup \inf \arg \lim \det \sin \cos \sign \operatorname
    \top \le \ge \leq \geq \ne \neq \lt \gt \in \notin \ni \subset \subseteq \supset \cup \cap \setminus
    \to \mapsto \rightarrow \leftarrow \Rightarrow \Leftarrow \implies \iff \coloneqq \equiv \approx \sim \propto
    \forall \exists \neg \land \lor \mid \vert \lvert \rvert \Vert \| \langle \rangle \lfloor \rfloor \lceil \rceil
    \{ \}
    \cdot \cdots \ldots \dots \vdots \ddots \times \otimes \odot \circ \ast \star \pm \mp \prime \perp \parallel
    \partial \nabla \infty \emptyset \varnothing
    \quad \qquad \, \; \: \! \  \mathop \mathrel \displaystyle \limits \nolimits \phantom
    \begin \end \text \textrm \mathrm \mathbb \mathbf \mathcal \mathit \mathsf \boldsymbol
    \tilde \bar \hat \widetilde \widehat \vec \dot \ddot \overline
    """.split()
)

# ``\mathrm{...}`` names that are standard functions, and ``\mathbb{...}`` standard sets
STANDARD_NAMES: frozenset[str] = frozenset(
    {r"\mathrm{diag}", r"\mathrm{tr}", r"\mathrm{rank}", r"\mathrm{sign}", r"\mathrm{span}"}
    | {rf"\mathbb{{{c}}}" for c in "RNQZC"}
)

# macros that take a subscript as an operator (the subscript is not an index of a symbol)
_OPERATORS = frozenset({r"\sum", r"\prod", r"\max", r"\min", r"\sup", r"\inf", r"\lim", r"\nabla", r"\int"})
_FONTS = frozenset({r"\mathrm", r"\mathbb", r"\mathbf", r"\mathcal", r"\mathit", r"\mathsf", r"\boldsymbol"})
_ACCENTS = frozenset({r"\tilde", r"\bar", r"\hat", r"\widetilde", r"\widehat", r"\vec", r"\dot", r"\ddot"})
_SKIP_GROUP = frozenset({r"\text", r"\textrm", r"\begin", r"\end", r"\operatorname", r"\phantom"})
_DEFINING = frozenset({"=", r"\coloneqq", r"\in", ":="})
_SEPARATORS = frozenset({r"\qquad", r"\\", "&"})

_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|:=|[A-Za-z]|\d+|\s+|.", re.S)
_MATH = re.compile(
    r"\\begin\{(equation\*?|align\*?|gather\*?|multline\*?)\}(.*?)\\end\{\1\}|\\\[(.*?)\\\]|(?<!\\)\$(.+?)(?<!\\)\$",
    re.S,
)


@dataclass(frozen=True)
class Use:
    """One checked symbol as used in math: ``text`` as written (``D_{i,t}``), its ``base`` (``D``), and whether
    it stands at the start of a defining relation (``defines``) or inside a subscript (``index``)."""

    text: str
    base: str
    subscripted: bool
    defines: bool = False
    index: bool = False


_SPACING = frozenset({r"\ ", r"\,", r"\;", r"\:", r"\!", r"\quad"})


def _tokens(math: str) -> list[str]:
    r"""The tokens of a formula, without white space and thin spaces (``\,``, ``\ ``, ``\quad``)."""
    return [t for t in _TOKEN.findall(math) if not t.isspace() and t not in _SPACING]


def _group(toks: list[str], k: int) -> tuple[list[str], int]:
    """The argument at ``toks[k]``: a brace group's tokens (without the braces) or one token; and the index after."""
    if k >= len(toks):
        return [], k
    if toks[k] != "{":
        return [toks[k]], k + 1
    depth, j = 0, k
    while j < len(toks):
        depth += toks[j] == "{"
        depth -= toks[j] == "}"
        if depth == 0:
            return toks[k + 1 : j], j + 1
        j += 1
    return toks[k + 1 :], len(toks)


def _atom(toks: list[str], k: int) -> tuple[str | None, int, bool]:
    """A symbol's base starting at ``toks[k]``: (text, index after, checked-as-macro), or (None, k, False)."""
    t = toks[k]
    if t in _ACCENTS:
        inner, j = None, k + 1
        if k + 1 < len(toks) and toks[k + 1] != "{":
            inner, j, _ = _atom(toks, k + 1)
        if inner is None:
            arg, j = _group(toks, k + 1)
            inner = "".join(arg)
        return f"{t}{{{inner}}}", j, True
    if t in _FONTS:
        arg, j = _group(toks, k + 1)
        name = f"{t}{{{''.join(arg)}}}"
        return name, j, name not in STANDARD_NAMES
    if t == "{":  # a braced symbol such as {x} (sympy's Indexed), {\gamma} or {W^{\mathrm{mm}}}
        arg, j = _group(toks, k)
        if arg and _symbol_end(arg, 0) == len(arg) and "_" not in arg:
            inner, _, mac = _atom(arg, 0)
            lead = _leading_tokens(arg)
            if inner is not None and lead:
                return lead[0], j, mac or lead[0] != inner
        return None, k, False
    if t.startswith("\\") and t[1:].isalpha():
        if t in STANDARD:
            return None, k, False
        return t, k + 1, True
    if len(t) == 1 and t.isalpha():
        return t, k + 1, False
    return None, k, False


def _symbol_end(toks: list[str], k: int) -> int | None:
    """The index after the symbol at ``toks[k]`` (base, primes, subscript, superscripts), or None."""
    base, j, _ = _atom(toks, k)
    if base is None:
        return None
    while j < len(toks) and toks[j] == "'":
        j += 1
    while j < len(toks) and toks[j] in ("_", "^"):
        _, j = _group(toks, j + 1)
    return j


def _defining_list(toks: list[str], k: int) -> bool:
    """Does a list of symbols ``a, b, ...`` start at ``toks[k]`` and end in a defining relation?"""
    while True:
        j = _symbol_end(toks, k)
        if j is None:
            return False
        while j < len(toks) and toks[j] == "&":
            j += 1
        if j < len(toks) and toks[j] == ",":
            k = j + 1
            continue
        return j < len(toks) and toks[j] in _DEFINING


def _scan(toks: list[str], uses: list[Use], in_sub: bool = False) -> None:
    k, start = 0, True  # start: at the start of a formula, clause or line
    while k < len(toks):
        t = toks[k]
        if t in _SKIP_GROUP:
            _, k = _group(toks, k + 1)
            if t == r"\operatorname":
                start = False
            continue
        if t in (r"\left", r"\right", r"\bigl", r"\bigr", r"\Bigl", r"\Bigr", r"\big", r"\Big", r"\middle"):
            k += 2  # the delimiter
            if t.startswith(r"\right") or t.endswith("r"):
                while k < len(toks) and toks[k] in ("_", "^"):  # a norm's index: \right\|_F
                    _, k = _group(toks, k + 1)
            start = False
            continue
        if t in _OPERATORS:
            k += 1
            while k < len(toks) and toks[k] in ("_", "^"):  # the lower limit binds indices, the upper does not
                op = toks[k]
                arg, k = _group(toks, k + 1)
                _scan(arg, uses, in_sub=in_sub or op == "_")
            start = False
            continue
        if t in _SEPARATORS or t == ",":
            start = t in _SEPARATORS or start
            k += 1
            continue
        base, j, macro = _atom(toks, k)
        if base is None:
            if t in ("_", "^"):  # after a bracket: an entry's index, or a power
                arg, k = _group(toks, k + 1)
                _scan(arg, uses, in_sub=in_sub or t == "_")
                continue
            if t == "{" or t == "}":
                k += 1
                continue
            start = False
            k += 1
            continue
        first = start
        primes = ""
        while j < len(toks) and toks[j] == "'":
            primes, j = primes + "'", j + 1
        name_sup = ""
        sub: list[str] | None = None
        while j < len(toks) and toks[j] in ("_", "^"):
            op = toks[j]
            arg, jj = _group(toks, j + 1)
            if op == "^" and arg and (arg[0] in _FONTS and arg[0] != r"\mathbb" or arg == ["*"] or arg == [r"\star"]):
                name_sup = "^{" + "".join(arg) + "}"
            elif op == "_" and sub is None:
                sub = arg
                _scan(arg, uses, in_sub=True)
            else:  # a power or a transpose: its symbols are used, not indices
                _scan(arg, uses, in_sub=in_sub or op == "_")
            j = jj
        if base == "e" and j > k + 1 and toks[k + 1] == "^" and sub is None:  # Euler's number
            k, start = j, False
            continue
        full = base + primes + name_sup
        checked = macro or sub is not None or bool(primes) or bool(name_sup)
        # a defining relation follows the symbol (or a list of symbols) at the start of a clause
        defines = first and _defining_list(toks, k)
        if checked or defines or in_sub:
            text = full + ("" if sub is None else "_{" + "".join(sub) + "}")
            uses.append(Use(text, full, sub is not None, defines, in_sub and sub is None))
        # a list "a, b \in ..." keeps the clause start
        start = first and j < len(toks) and toks[j] == ","
        k = j


def math_segments(tex: str) -> list[tuple[int, str]]:
    """The math of a LaTeX page: ``(offset, content)`` of each ``$...$``, ``\\[...\\]`` and display environment."""
    out = []
    for m in _MATH.finditer(tex):
        for g in (2, 3, 4):
            if m.group(g) is not None:
                out.append((m.start(g), m.group(g)))
    return out


def _notation_items(tex: str) -> list[str]:
    m = re.search(r"\\paragraph\{Notation\.\}(.*?)\\end\{itemize\}", tex, re.S)
    if not m:
        return []
    return [it for it in m.group(1).split(r"\item")[1:]]


def _leading(math: str) -> list[str]:
    """The leading symbols of a notation item's formula: ``n, T, d`` or ``D_{i,t}`` in ``D_{i,t} = ...``."""
    return _leading_tokens(_tokens(math))


def _leading_tokens(toks: list[str]) -> list[str]:
    out, k = [], 0
    while k < len(toks):
        base, j, _ = _atom(toks, k)
        if base is None:
            break
        while j < len(toks) and toks[j] == "'":
            base, j = base + "'", j + 1
        while j < len(toks) and toks[j] in ("_", "^"):
            arg, jj = _group(toks, j + 1)
            if toks[j] == "^" and arg and arg[0] in _FONTS:
                base += "^{" + "".join(arg) + "}"
            j = jj
        out.append(base)
        if j < len(toks) and toks[j] == r"\left":  # a function and its formal arguments: f(u), Cov_s(g, h)
            depth, k0 = 0, j + 2
            while j < len(toks):
                depth += toks[j] == r"\left"
                depth -= toks[j] == r"\right"
                j += 2 if toks[j] in (r"\left", r"\right") else 1
                if depth == 0:
                    break
            args = toks[k0 : j - 2]
            piece: list[str] = []
            for tok in args + [","]:
                if tok == "," and piece:
                    out += _leading_tokens(piece)[:1]
                    piece = []
                elif tok != ",":
                    piece.append(tok)
        if j < len(toks) and toks[j] == ",":
            k = j + 1
            continue
        break
    return out


def defined_bases(tex: str) -> set[str]:
    """The bases a page defines: its notation table's leading symbols, the left-hand sides of its defining
    relations, and its indices (see the module docstring)."""
    out: set[str] = set()
    for item in _notation_items(tex):
        segs = math_segments(item)
        if segs:
            out.update(_leading(segs[0][1]))
    for _, math in math_segments(tex):
        uses: list[Use] = []
        _scan(_tokens(math), uses)
        out.update(u.base for u in uses if u.defines or u.index)
    return out


@dataclass(frozen=True)
class Undefined:
    """A base used on a page and defined nowhere on it: ``base``, its first use ``text`` and the ``context`` (the
    formula it occurs in, shortened)."""

    base: str
    text: str
    context: str

    def __str__(self) -> str:
        return f"undefined symbol ${self.text}$ (base ${self.base}$) in ${self.context}$"


def undefined_symbols(tex: str) -> list[Undefined]:
    """Every checked symbol of the LaTeX page ``tex`` whose base the page does not define, one per base, in the
    order of first use (empty when the page passes)."""
    defined = defined_bases(tex)
    seen: dict[str, Undefined] = {}
    for _, math in math_segments(tex):
        uses: list[Use] = []
        _scan(_tokens(math), uses)
        for u in uses:
            if u.base in defined or u.base in seen or u.index:
                continue
            if u.subscripted or u.base.startswith("\\") or "'" in u.base or "^" in u.base:
                ctx = " ".join(math.split())
                seen[u.base] = Undefined(u.base, u.text, ctx if len(ctx) <= 120 else ctx[:117] + "...")
    return list(seen.values())


def lint_problems(tex: str) -> list[str]:
    """One line per undefined base of the page (:func:`undefined_symbols`); empty when every symbol is defined."""
    return [str(u) for u in undefined_symbols(tex)]
