r"""HTML for Jupyter (``_repr_html_``): escaping, tables, abbreviated arrays, cards and verdict badges.

Every ``_repr_html_`` of attsvm is built here, one way: :func:`card` (a title line, a key/value table, then
sections) holding :func:`table` (a :class:`attsvm.tables.Table`), :func:`array` (an abbreviated array with its
shape) and :func:`data_tables` (the inputs of a data set, :func:`attsvm.tables.input_tables`). Text is escaped
(:func:`escape`), numbers have a fixed number of significant digits (:func:`attsvm.tables.number`, ``DIGITS``)
and math is MathJax inline ``$...$`` from :func:`attsvm.symbolic.printer.latex` (:class:`attsvm.tables.Math`).
Styles are inline (no stylesheet), so the output looks the same in a notebook, a converted page or a mail.
"""

from __future__ import annotations

import html as _html
from collections.abc import Sequence
from typing import Any

import numpy as np

from .tables import DataTables, Gap, Inline, Math, Num, Table, matrix, number

#: significant digits of the numbers in a repr
DIGITS = 4
#: colours of the verdicts and statuses (green, red, amber, grey)
COLOURS = {
    "verified": "#1a7f37",
    "optimal": "#1a7f37",
    "refuted": "#cf222e",
    "infeasible": "#cf222e",
    "FAILED": "#cf222e",
    "inconclusive": "#9a6700",
    "error": "#cf222e",
}
GREY = "#57606a"

_TABLE = "margin:2px 12px 6px 0"


class Markup(str):
    """Trusted HTML (not escaped again)."""


def escape(text: Any) -> Markup:
    """``text`` with ``& < > " '`` escaped."""
    return Markup(_html.escape(str(text), quote=True))


def piece(p: Any, bold: bool = False) -> Markup:
    """One piece of inline text or one cell value as HTML: :class:`Markup` as it is, :class:`Math` as escaped
    ``$...$`` (MathJax), a :class:`Gap` or :class:`Num` or text escaped; a float or int through
    :func:`~attsvm.tables.number`."""
    if isinstance(p, Markup):
        out = str(p)
    elif isinstance(p, Math):
        out = escape("$" + p + "$")
    elif isinstance(p, (Gap, Num, str)):
        out = escape(p)
    elif p is None or isinstance(p, (bool, np.bool_, int, float, np.integer, np.floating)):
        out = escape(number(p, DIGITS))
    else:
        out = escape(p)
    return Markup(f"<b>{out}</b>" if bold and out else out)


def inline(parts: Inline | str) -> Markup:
    """Inline text (:data:`attsvm.tables.Inline`, or one string) as HTML."""
    if isinstance(parts, str):
        return piece(parts)
    return Markup("".join(piece(p) for p in parts))


def table(t: Table) -> Markup:
    """A :class:`~attsvm.tables.Table`: caption above, header row, body (numbers right-aligned), note below."""
    out = [f'<table style="{_TABLE}">']
    if t.caption:
        out.append(f'<caption style="caption-side:top;text-align:left">{inline(t.caption)}</caption>')
    if t.header:
        out.append("<thead><tr>" + "".join(_cell("th", c.value, c.bold, j) for j, c in enumerate(t.header)) + "</tr>")
        out.append("</thead>")
    out.append("<tbody>")
    for row in t.rows:
        out.append("<tr>" + "".join(_cell("td", c.value, c.bold, j) for j, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    html = "".join(out)
    if t.note:
        html += f'<div style="color:{GREY};font-size:85%">{inline(t.note)}</div>'
    return Markup(html)


def _cell(tag: str, value: str, bold: bool, j: int) -> str:
    align = "" if j and isinstance(value, (Num, Gap)) else ' style="text-align:left"'
    return f"<{tag}{align}>{piece(value, bold)}</{tag}>"


def array(a: Any, digits: int = DIGITS, max_rows: int = 6, max_cols: int = 6, slices: int = 2) -> Markup:
    """An array abbreviated to ``max_rows`` x ``max_cols`` (:func:`attsvm.tables.keep`) with its shape; a scalar
    as one number; an array of more than two axes as its first ``slices`` matrices ``a[k]`` (leading indices)."""
    arr = np.asarray(a)
    if arr.ndim == 0:
        return piece(number(arr.item(), digits))
    shape = f"shape {tuple(arr.shape)}"
    if arr.ndim <= 2:
        t = matrix(arr, digits, max_rows, max_cols)
        return Markup(table(Table(t.header, t.rows, (shape,))))
    lead = arr.shape[:-2]
    flat = arr.reshape(-1, *arr.shape[-2:])
    parts = []
    for k in range(min(slices, flat.shape[0])):
        idx = np.unravel_index(k, lead)
        t = matrix(flat[k], digits, max_rows, max_cols)
        parts.append(_block(table(Table(t.header, t.rows, ("[" + ", ".join(str(int(i)) for i in idx) + "]",)))))
    more = flat.shape[0] - min(slices, flat.shape[0])
    tail = f"; {more} more matrices not shown" if more else ""
    return Markup(f'<div style="color:{GREY};font-size:85%">{escape(shape + tail)}</div>' + "".join(parts))


def _block(inner: str) -> str:
    return f'<div style="display:inline-block;vertical-align:top">{inner}</div>'


def data_tables(dt: DataTables) -> Markup:
    """The tables of :func:`attsvm.tables.input_tables` side by side, and their note."""
    body = "".join(_block(table(t)) for t in dt.tables)
    return Markup(f'<div>{body}</div><div style="color:{GREY};font-size:85%">{inline(dt.note)}</div>')


def badge(text: str, colour: str | None = None) -> Markup:
    """``text`` on a coloured label (``colour`` default: :data:`COLOURS` by text, else grey)."""
    c = colour or COLOURS.get(str(text), GREY)
    style = f"background:{c};color:#fff;padding:0 5px;border-radius:3px;font-weight:bold"
    return Markup(f'<span style="{style}">{escape(text)}</span>')


def code(text: Any) -> Markup:
    """``text`` in a monospace font (escaped)."""
    return Markup(f"<code>{escape(text)}</code>")


def rows_table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> Markup:
    """A plain table of values (text, :class:`Markup`, :class:`Math`, numbers: :func:`piece`) under ``header``."""
    out = [f'<table style="{_TABLE}"><thead><tr>']
    out += [f'<th style="text-align:left">{piece(h)}</th>' for h in header]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f'<td style="text-align:left">{piece(v)}</td>' for v in r) + "</tr>")
    out.append("</tbody></table>")
    return Markup("".join(out))


def card(
    kind: str,
    title: Inline | str,
    fields: Sequence[tuple[str, Any]],
    sections: Sequence[tuple[str, str]] = (),
) -> Markup:
    """The repr of one object: ``kind`` (the class name) and ``title`` on one line, the ``fields`` as a key/value
    table (a value of None is left out), then each ``(heading, html)`` section."""
    rows = "".join(
        f'<tr><th style="text-align:left;font-weight:normal;color:{GREY}">{escape(k)}</th>'
        f'<td style="text-align:left">{piece(v)}</td></tr>'
        for k, v in fields
        if v is not None
    )
    out = [f'<div class="attsvm-repr" style="margin:4px 0"><div><b>{escape(kind)}</b> {inline(title)}</div>']
    out.append(f'<table style="{_TABLE}"><tbody>{rows}</tbody></table>')
    for head, content in sections:
        out.append(f'<div style="margin-top:4px"><i>{escape(head)}</i></div>{content}')
    out.append("</div>")
    return Markup("".join(out))


__all__ = [
    "COLOURS",
    "DIGITS",
    "Markup",
    "array",
    "badge",
    "card",
    "code",
    "data_tables",
    "escape",
    "inline",
    "piece",
    "rows_table",
    "table",
]
