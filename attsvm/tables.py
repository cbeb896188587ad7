r"""Tables of numbers for every output format: formatted numbers, abbreviated arrays and the data of each input.

A :class:`Table` is format-neutral. Its cells hold plain text, a :class:`Num` (a number formatted with
``digits`` significant digits, ``%.{digits}g``), a :class:`Math` (LaTeX math from
:func:`attsvm.symbolic.printer.latex`, rendered as ``$...$``) or a :class:`Gap` (an ellipsis where rows or
columns are left out). :mod:`attsvm.html` renders a table as HTML (Jupyter), :func:`to_latex` as a plain
``tabular`` and :func:`to_markdown` as a Markdown table.

An axis of length $N$ larger than its limit $m$ keeps the indices :func:`keep` returns: the first $m-2$, a gap
and the last one. :func:`input_tables` lays out the data of input $i$ (THEORY §1): the tokens $x_{it}$ of $X_i$
(one row each) with their scores $\gamma_{it}=Y_iv^\top x_{it}$ (one column per query for sequence/causal data,
the score of the selected token $\alpha_i$ in bold), the queries $z_i$, the labels $Y_i$ and the selection.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .serial import tex_escape


class Num(str):
    """A formatted number (a table cell): math in LaTeX, plain text elsewhere."""


class Math(str):
    """LaTeX math without the dollars (a table cell or a piece of inline text)."""


class Gap(str):
    """An ellipsis standing for left-out rows (``⋮``), columns (``⋯``) or both (``⋱``)."""


VDOTS, CDOTS, DDOTS = Gap("⋮"), Gap("⋯"), Gap("⋱")
GAP_TEX = {VDOTS: r"\vdots", CDOTS: r"\cdots", DDOTS: r"\ddots"}

#: inline text: a sequence of pieces, each plain text (``str``), :class:`Num` or :class:`Math`
Inline = tuple[str, ...]


@dataclass(frozen=True)
class Cell:
    """One cell: ``value`` (text, :class:`Num`, :class:`Math` or :class:`Gap`), optionally ``bold``."""

    value: str
    bold: bool = False


@dataclass(frozen=True)
class Table:
    """``header`` cells, ``rows`` of cells (each as long as the header), a ``caption`` above and a ``note`` below
    (inline text)."""

    header: tuple[Cell, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: Inline = ()
    note: Inline = ()


def number(x: Any, digits: int = 4) -> Num:
    """``x`` with ``digits`` significant digits (``%.{digits}g``); integers and booleans as they are, ``None`` as
    ``-``; a string (e.g. a high-precision value) is kept."""
    if x is None:
        return Num("-")
    if isinstance(x, (bool, np.bool_)):
        return Num(str(bool(x)))
    if isinstance(x, (int, np.integer)):
        return Num(str(int(x)))
    if isinstance(x, str):
        return Num(x)
    try:
        f = float(x)
    except (TypeError, ValueError):
        return Num(str(x))
    if math.isnan(f):
        return Num("nan")
    if math.isinf(f):
        return Num("inf" if f > 0 else "-inf")
    return Num(f"{f:.{int(digits)}g}")


def keep(n: int, limit: int) -> list[int | None]:
    """The indices of an axis of length ``n`` that a table shows: all when ``n <= limit``, else the first
    ``limit - 2``, ``None`` (a gap) and the last (``limit >= 3``)."""
    limit = max(3, int(limit))
    if n <= limit:
        return list(range(n))
    return [*range(limit - 2), None, n - 1]


def vector_text(a: Any, digits: int = 4, limit: int = 6) -> Num:
    """A short vector as one piece of text, ``(1, -0.5, …, 2)``, abbreviated by :func:`keep`."""
    flat = np.asarray(a).ravel()
    cells = ["…" if j is None else number(flat[j], digits) for j in keep(flat.size, limit)]
    return Num("(" + ", ".join(cells) + ")")


def vector_math(a: Any, digits: int = 4, limit: int = 6) -> Math:
    r"""A short vector as LaTeX math, ``\left(1, -0.5, \dots, 2\right)`` (abbreviated by :func:`keep`)."""
    flat = np.asarray(a).ravel()
    cells = [r"\dots" if j is None else num_tex(number(flat[j], digits)) for j in keep(flat.size, limit)]
    return Math(r"\left(" + ", ".join(cells) + r"\right)")


def matrix(
    a: Any, digits: int = 4, max_rows: int = 8, max_cols: int = 8, caption: Inline = (), labels: bool = True
) -> Table:
    """A 1-D or 2-D array as a table (a vector is one row), rows/columns abbreviated by :func:`keep`; with
    ``labels`` the row and column indices head the table. The note states the shape when anything is left out."""
    arr = np.asarray(a)
    if arr.ndim > 2:
        raise ValueError(f"matrix() takes a 1-D or 2-D array, got shape {arr.shape}")
    m = arr.reshape(1, -1) if arr.ndim < 2 else arr
    ri, ci = keep(m.shape[0], max_rows), keep(m.shape[1], max_cols)
    gap = lambda j: CDOTS if j is None else None  # noqa: E731
    header = (Cell(""), *(Cell(gap(j) or Num(str(j))) for j in ci)) if labels else ()
    rows = []
    for r in ri:
        lead = (Cell(VDOTS if r is None else Num(str(r))),) if labels else ()
        if r is None:
            rows.append((*lead, *(Cell(DDOTS if j is None else VDOTS) for j in ci)))
        else:
            rows.append((*lead, *(Cell(CDOTS if j is None else number(m[r, j], digits)) for j in ci)))
    note: Inline = ()
    if None in ri or None in ci:
        note = (f"shape {tuple(arr.shape)}, abbreviated",)
    return Table(header, tuple(rows), caption, note)


def matrix_tex(a: Any, digits: int = 4, max_rows: int = 8, max_cols: int = 8) -> Math:
    r"""A 1-D or 2-D array as a LaTeX ``pmatrix`` (a vector is a row), abbreviated by :func:`keep` with
    ``\cdots``, ``\vdots``, ``\ddots``."""
    t = matrix(a, digits, max_rows, max_cols, labels=False)
    body = r" \\ ".join(
        " & ".join(GAP_TEX[c.value] if isinstance(c.value, Gap) else num_tex(c.value) for c in row) for row in t.rows
    )
    return Math(r"\begin{pmatrix}" + body + r"\end{pmatrix}")


@functools.lru_cache(maxsize=4096)
def label(base: str, *idx: Any) -> Math:
    """The LaTeX of the notation symbol ``base`` with indices ``idx`` (:mod:`attsvm.symbolic.notation`; a base
    outside the table, such as ``alpha``, prints as sympy prints it), from the printer."""
    import sympy as sp

    from .symbolic.notation import TABLE, symbol
    from .symbolic.printer import latex

    if base in TABLE:
        return Math(latex(symbol(base, *idx)))
    return Math(latex(sp.Symbol(base + ("_" + "".join(str(i) for i in idx) if idx else ""))))


@functools.lru_cache(maxsize=64)
def norm_label(kind: str, base: str = "W") -> Math:
    r"""$\|W\|_F$, $\|W\|_\star$, $\|W\|_q$, $\|p\|_2$ ... from the printer (``kind``: ``F``, ``*``, ``2``, ``q``)."""
    import sympy as sp

    from .symbolic.notation import matrix_symbol
    from .symbolic.printer import Norm, latex

    if kind == "q":
        return Math(latex(Norm(matrix_symbol(base, "d", "d"), "")) + "_q")
    return Math(latex(Norm(matrix_symbol(base, "d", "d") if base == "W" else sp.Symbol(base), kind)))


@dataclass(frozen=True)
class DataTables:
    """The tables of some inputs of a data set (:func:`input_tables`) and a ``note`` that says what is shown."""

    tables: tuple[Table, ...]
    note: Inline


def input_tables(
    ds: Any,
    *,
    inputs: int = 4,
    max_tokens: int = 8,
    max_cols: int = 6,
    max_queries: int = 3,
    digits: int = 6,
    source: str | None = None,
) -> DataTables:
    r"""One table per input $i$ of the single data set ``ds`` (the first ``inputs`` of them): a row per token
    $x_{it}$ (coordinates, then the scores $\gamma_{it}$, one column per query $k$ for sequence/causal data, the
    selected token's in bold, ``-`` where causal query $k<t$ cannot see token $t$), then a row per query $z_i$
    (cross/sequence data); the caption gives $Y_i$ and $\alpha_i$ (and $\mathrm{opt}_i$ where it differs).
    Tokens, coordinates and queries beyond the limits are abbreviated (:func:`keep`). ``source``: the file that
    holds the exact values, named in the note."""
    if ds.batched:
        raise ValueError("input_tables takes a single data set (index a batch first)")
    if ds.kind == "ntp":
        return _ntp_tables(ds, inputs, max_tokens, max_cols, digits, source)
    if ds.kind == "icl":
        return _icl_tables(ds, inputs, max_tokens, max_cols, digits, source)
    n, T, d, K = ds.n, ds.T, ds.d, ds.K
    seq = K is not None
    gam = np.asarray(ds.scores)  # (n, T) or (n, K, T)
    sel, opt = np.asarray(ds.selection), np.asarray(ds.opt)
    ts, js = keep(T, max_tokens), keep(d, max_cols)
    ks = keep(K, max_queries) if seq else [0]  # cross/self data: the one query of each input
    visible = ds.visible
    tables = []
    shown = list(range(min(n, max(1, int(inputs)))))
    for i in shown:
        if seq:
            gh = [Cell(CDOTS if k is None else Math(label("gamma", i, k, "t"))) for k in ks]
        else:
            gh = [Cell(Math(label("gamma", i, "t")))]
        header = (Cell(""), *(Cell(CDOTS if j is None else Num(str(j))) for j in js), *gh)
        rows = []
        for t in ts:
            if t is None:
                rows.append(tuple(Cell(VDOTS) for _ in header))
                continue
            xs = [Cell(CDOTS if j is None else number(ds.X[i, t, j], digits)) for j in js]
            if seq:
                gs = []
                for k in ks:
                    if k is None:
                        gs.append(Cell(CDOTS))
                    elif visible is not None and not visible[k, t]:
                        gs.append(Cell("-"))
                    else:
                        gs.append(Cell(number(gam[i, k, t], digits), bold=t == sel[i, k]))
            else:
                gs = [Cell(number(gam[i, t], digits), bold=t == sel[i])]
            rows.append((Cell(Math(label("x", i, t))), *xs, *gs))
        if ds.kind in ("cross", "sequence"):
            for k in ks:
                if k is None:
                    rows.append(tuple(Cell(VDOTS) for _ in header))
                    continue
                zi = ds.Z[i, k] if seq else ds.Z[i]
                zl = label("z", i) if not seq else label("z", i, k)
                zs = [Cell(CDOTS if j is None else number(zi[j], digits)) for j in js]
                rows.append((Cell(Math(zl)), *zs, *(Cell("") for _ in gh)))
        tables.append(Table(header, tuple(rows), _caption(ds, i, sel, opt, digits)))
    cut = len(shown) < n or None in ts or None in js or None in ks
    return DataTables(tuple(tables), _data_note(ds, len(shown), digits, source, cut))


def _ntp_tables(ds: Any, inputs: int, max_tokens: int, max_cols: int, digits: int, source: str | None) -> DataTables:
    r"""Next-token data: per sequence $i$ a row per position $t$ — the token id, the coordinates of its embedding
    $x_{it}=e_{\mathrm{id}}$, and whether it is the label (bold: the label's occurrences); the caption gives the label
    and the query (the last token, and whether it is attended)."""
    n, T, d = ds.n, ds.T, ds.d
    ts, js = keep(T, max_tokens), keep(d, max_cols)
    tok, lab = np.asarray(ds.tokens), np.asarray(ds.labels)
    vis = None if ds.visible is None else np.asarray(ds.visible)
    shown = list(range(min(n, max(1, int(inputs)))))
    header = (Cell(""), Cell("id"), *(Cell(CDOTS if j is None else Num(str(j))) for j in js), Cell("label"))
    tables = []
    for i in shown:
        rows = []
        for t in ts:
            if t is None:
                rows.append(tuple(Cell(VDOTS) for _ in header))
                continue
            is_label = bool(tok[i, t] == lab[i]) and (vis is None or bool(vis[i, t]))
            xs = [Cell(CDOTS if j is None else number(ds.X[i, t, j], digits), bold=is_label) for j in js]
            mark = "yes" if is_label else ("query, not attended" if vis is not None and not vis[i, t] else "")
            rows.append((Cell(Math(label("x", i, t))), Cell(Num(str(int(tok[i, t]))), bold=is_label), *xs, Cell(mark)))
        cap: list[str] = [f"sequence {i}: label ", Math(r"y_{" + str(i) + "}=" + str(int(lab[i]))), "; query "]
        cap += [Math(label("z", i) + "=" + label("x", i, T - 1)), f" (token {int(tok[i, T - 1])}, the last)"]
        tables.append(Table(header, tuple(rows), tuple(cap)))
    head = f"n={n}, T={T}, K={ds.K}, d={d} (next-token data); entries to {digits} significant digits, "
    head += "indices from 0 as in the data file; bold: the label's occurrences"
    return DataTables(tuple(tables), _shown_note(head, "sequences", len(shown), n, None in ts or None in js, source))


def _shown_note(head: str, what: str, shown: int, total: int, cut_axes: bool, source: str | None) -> Inline:
    """The note under the tables of a data set: ``head``, which of the ``total`` ``what`` are shown, whether the
    tables are abbreviated, and the file with the exact values."""
    note: list[str] = [head]
    if shown < total:
        note.append(f"; {what} 0-{shown - 1} of {total} shown")
    cut = shown < total or cut_axes
    if cut:
        note.append("; tables abbreviated")
    if source:
        note.append(f"; exact values{' of every entry' if cut else ''}: {source}")
    return tuple(note)


def _icl_tables(ds: Any, inputs: int, max_tokens: int, max_cols: int, digits: int, source: str | None) -> DataTables:
    r"""In-context data (:class:`attsvm.icl.ICLData`): per task $\tau$ a row per context example $x_{\tau i}$ (its
    coordinates and label $y_{\tau i}$), then the query $x_\tau$ (bold) with its label; the caption gives the task's
    $\hat\mu_\tau$."""
    B, N, d = ds.tasks, ds.N, ds.d
    cs, js = keep(N, max_tokens), keep(d, max_cols)
    shown = list(range(min(B, max(1, int(inputs)))))
    header = (Cell(""), *(Cell(CDOTS if j is None else Num(str(j))) for j in js), Cell("label"))
    mu = np.asarray(ds.mu_hat)
    tables = []
    for k in shown:
        rows = []
        for i in cs:
            if i is None:
                rows.append(tuple(Cell(VDOTS) for _ in header))
                continue
            xs = [Cell(CDOTS if j is None else number(ds.contexts[k, i, j], digits)) for j in js]
            lab = Cell(Num(str(int(ds.labels[k, i]))))
            rows.append((Cell(Math(r"x_{" + f"{k},{i}" + "}")), *xs, lab))
        q = [Cell(CDOTS if j is None else number(ds.queries[k, j], digits), bold=True) for j in js]
        rows.append((Cell(Math(r"x_{" + str(k) + "}")), *q, Cell(Num(str(int(ds.query_labels[k]))), bold=True)))
        mu_k = Math(r"\hat\mu_{" + str(k) + "}=" + vector_math(mu[k], digits, 6))
        cap: list[str] = [f"task {k}: context of {N}, query last (bold); ", mu_k]
        tables.append(Table(header, tuple(rows), tuple(cap)))
    head = f"B={B} tasks, N={N}, d={d} (in-context data); entries to {digits} significant digits, "
    head += "indices from 0 as in the data file"
    return DataTables(tuple(tables), _shown_note(head, "tasks", len(shown), B, None in cs or None in js, source))


def _caption(ds: Any, i: int, sel: np.ndarray, opt: np.ndarray, digits: int) -> Inline:
    seq = ds.K is not None
    val = (lambda a: vector_math(a, digits, 6)) if seq else (lambda a: num_tex(number(a, digits)))  # noqa: E731
    cap: list[str] = [f"input {i}: ", Math(label("Y", i) + "=" + val(ds.Y[i])), ", "]
    cap += [Math(label("alpha", i) + "=" + val(sel[i]))]
    if np.array_equal(sel[i], opt[i]):
        cap.append(" (opt)")
    else:
        cap += [", ", Math(r"\mathrm{opt}_{" + str(i) + "}=" + val(opt[i]))]
    if ds.kind == "self":
        cap += ["; query ", Math(label("z", i) + "=" + label("x", i, ds.query_index))]
    elif ds.kind == "causal":
        cap += ["; queries ", Math(label("z", i, "k") + "=" + label("x", i, "k"))]
    return tuple(cap)


def _data_note(ds: Any, shown: int, digits: int, source: str | None, abbreviated: bool) -> Inline:
    sizes = f"n={ds.n}, T={ds.T}, d={ds.d}" + (f", K={ds.K}" if ds.K is not None else "") + f" ({ds.kind} data)"
    note: list[str] = [sizes, f"; entries to {digits} significant digits, indices from 0 as in the data file; head "]
    note += [Math(label("v") + "=" + vector_math(ds.v, digits, 6)), "; bold: the score of the selected token"]
    if shown < ds.n:
        note.append(f"; inputs 0-{shown - 1} of {ds.n} shown")
    if abbreviated:
        note.append("; tables abbreviated")
    if source:
        note.append(f"; exact values{' of every entry' if abbreviated else ''}: {source}")
    return tuple(note)


# ---------------------------------------------------------------------- LaTeX and Markdown
def num_tex(s: str) -> str:
    r"""A formatted number as LaTeX math: ``1.2e-16`` -> ``1.2\times10^{-16}``, ``inf`` -> ``\infty``."""
    s = str(s)
    if s in ("nan", "-"):
        return r"\mathrm{" + s + "}" if s == "nan" else "-"
    if s.endswith("inf"):
        return s[:-3] + r"\infty"
    if "e" in s:
        m, e = s.split("e", 1)
        try:
            return m + r"\times10^{" + str(int(e)) + "}"
        except ValueError:
            return tex_escape(s)
    return s


def piece_tex(p: str, bold: bool = False) -> str:
    """One piece of text or one cell value as LaTeX (text escaped; numbers, math and gaps in math mode)."""
    if isinstance(p, Gap):
        return "$" + GAP_TEX.get(p, r"\cdots") + "$"
    if isinstance(p, Num):
        body = num_tex(p) if _numeric(p) else r"\mbox{" + tex_escape(p) + "}"
        return "$" + (r"\mathbf{" + body + "}" if bold else body) + "$"
    if isinstance(p, Math):
        return "$" + (r"\mathbf{" + p + "}" if bold else p) + "$"
    return r"\textbf{" + tex_escape(p) + "}" if bold and p else tex_escape(p)


def _numeric(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return s == "-"


def inline_tex(parts: Inline) -> str:
    return "".join(piece_tex(p) for p in parts)


def to_latex(t: Table) -> str:
    """A plain ``tabular`` (core LaTeX only): the caption as a first row spanning the table, the header, a rule,
    the rows, and the note as a last row."""
    ncol = len(t.header)
    out = [r"\begin{tabular}[t]{l" + "r" * (ncol - 1) + "}"]
    if t.caption:
        out.append(r"\multicolumn{" + str(ncol) + "}{l}{" + inline_tex(t.caption) + r"} \\")
    out.append(r"\hline")
    out.append(" & ".join(piece_tex(c.value, c.bold) for c in t.header) + r" \\")
    out.append(r"\hline")
    out += [" & ".join(piece_tex(c.value, c.bold) for c in row) + r" \\" for row in t.rows]
    out.append(r"\hline")
    if t.note:
        out.append(r"\multicolumn{" + str(ncol) + "}{l}{" + inline_tex(t.note) + r"} \\")
    out.append(r"\end{tabular}")
    return "\n".join(out)


def piece_md(p: str, bold: bool = False) -> str:
    """One piece or cell value as Markdown (math as ``$...$``, ``|`` escaped)."""
    s = "$" + p + "$" if isinstance(p, Math) else str(p)
    s = s.replace("|", "\\|")
    return f"**{s}**" if bold and s else s


def inline_md(parts: Inline) -> str:
    return "".join(piece_md(p) for p in parts)


def to_markdown(t: Table) -> str:
    """A Markdown table with the caption (italic) above and the note below."""
    out = []
    if t.caption:
        out += ["*" + inline_md(t.caption) + "*", ""]
    out.append("| " + " | ".join(piece_md(c.value, c.bold) for c in t.header) + " |")
    out.append("|" + "---|" * len(t.header))
    out += ["| " + " | ".join(piece_md(c.value, c.bold) for c in row) + " |" for row in t.rows]
    if t.note:
        out += ["", inline_md(t.note)]
    return "\n".join(out)
