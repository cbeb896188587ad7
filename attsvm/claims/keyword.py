r"""Keyword expressions: ``attsvm check -k EXPR`` selects claims as ``pytest -k`` selects tests.

Grammar (the one of pytest's ``-k``; precedence ``not`` > ``and`` > ``or``)::

    expression := [ or_expr ] end
    or_expr    := and_expr ( "or" and_expr )*
    and_expr   := not_expr ( "and" not_expr )*
    not_expr   := "not" not_expr | "(" or_expr ")" | WORD
    WORD       := one or more of  letters digits _ - . : + [ ] \ /

``and``, ``or``, ``not`` are operators only in lower case. A WORD matches a claim when it is, ignoring case, a
substring of one of the claim's *names*: its id, its origin and its kind (:func:`claim_names`) — so
``-k rank`` selects ``svm-rank``, ``-k empirical`` every claim of origin or kind ``empirical``, ``-k
"gd and not kq"`` the gradient-descent claims except ``kq-gd-nuclear``. The empty expression selects
everything. A malformed expression raises :class:`ExpressionError` (an :class:`~attsvm.errors.InputError`:
exit 2 at the CLI) naming the column and what was expected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import InputError
from .api import Claim

_TOKEN = re.compile(r"\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<word>[\w:+\-.\[\]\\/]+))")
_OPERATORS = ("or", "and", "not")


class ExpressionError(InputError):
    """A malformed keyword expression: ``-k 'EXPR': at column C: expected X; got Y`` (C counts from 1)."""

    def __init__(self, expression: str, column: int, message: str):
        self.expression, self.column, self.message = expression, column, message
        super().__init__(f"-k {expression!r}: at column {column}: {message}")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "(", ")", "or", "and", "not", "word", "end"
    text: str
    pos: int  # 0-based offset in the expression


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            out.append(_Tok("end", "", i))
            return out
        m = _TOKEN.match(text, i)
        if m is None:
            raise ExpressionError(text, i + 1, f"unexpected character {text[i]!r}")
        if m.group("lp"):
            out.append(_Tok("(", "(", m.start("lp")))
        elif m.group("rp"):
            out.append(_Tok(")", ")", m.start("rp")))
        else:
            w = m.group("word")
            out.append(_Tok(w if w in _OPERATORS else "word", w, m.start("word")))
        i = m.end()


# An expression tree: ("word", w) | ("not", e) | ("and", a, b) | ("or", a, b) | ("true",)
Node = tuple


class Expression:
    """A compiled keyword expression; :meth:`evaluate` it with a word matcher."""

    def __init__(self, text: str, tree: Node):
        self.text = text
        self.tree = tree

    def evaluate(self, matcher: Callable[[str], bool]) -> bool:
        """Whether the expression holds when each WORD is replaced by ``matcher(WORD)``."""

        def ev(n: Node) -> bool:
            op = n[0]
            if op == "word":
                return bool(matcher(n[1]))
            if op == "not":
                return not ev(n[1])
            if op == "and":
                return ev(n[1]) and ev(n[2])
            if op == "or":
                return ev(n[1]) or ev(n[2])
            return True  # the empty expression

        return ev(self.tree)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, expected: str) -> ExpressionError:
        t = self.tok
        got = "end of input" if t.kind == "end" else repr(t.text)
        return ExpressionError(self.text, t.pos + 1, f"expected {expected}; got {got}")

    def parse(self) -> Node:
        if self.tok.kind == "end":
            return ("true",)
        tree = self.or_expr()
        if self.tok.kind != "end":
            raise self.fail("'and', 'or' or end of input")
        return tree

    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.tok.kind == "or":
            self.i += 1
            left = ("or", left, self.and_expr())
        return left

    def and_expr(self) -> Node:
        left = self.not_expr()
        while self.tok.kind == "and":
            self.i += 1
            left = ("and", left, self.not_expr())
        return left

    def not_expr(self) -> Node:
        t = self.tok
        if t.kind == "not":
            self.i += 1
            return ("not", self.not_expr())
        if t.kind == "(":
            self.i += 1
            inner = self.or_expr()
            if self.tok.kind != ")":
                raise self.fail("')'")
            self.i += 1
            return inner
        if t.kind == "word":
            self.i += 1
            return ("word", t.text)
        raise self.fail("a word, 'not' or '('")


def parse(text: str) -> Expression:
    """Compile a keyword expression (grammar in the module docstring); raises :class:`ExpressionError`."""
    return Expression(text, _Parser(text).parse())


def claim_names(claim: Claim) -> tuple[str, ...]:
    """The names a WORD is matched against: the claim's id, origin and kind."""
    return (claim.id, claim.origin, claim.kind)


def name_matcher(names: Iterable[str]) -> Callable[[str], bool]:
    """A matcher: WORD matches when it is, ignoring case, a substring of one of ``names``."""
    low = [n.lower() for n in names]
    return lambda word: any(word.lower() in n for n in low)


def matches(claim: Claim, expression: str | Expression) -> bool:
    """Whether ``claim`` is selected by ``expression``."""
    expr = parse(expression) if isinstance(expression, str) else expression
    return expr.evaluate(name_matcher(claim_names(claim)))


def select_keyword(claims: list[Claim], expression: str | None) -> list[Claim]:
    """The claims selected by ``expression`` (None: all), in order. A malformed expression, or one that
    selects none of ``claims``, is an :class:`~attsvm.errors.InputError`."""
    if expression is None:
        return claims
    expr = parse(expression)
    out = [c for c in claims if matches(c, expr)]
    if not out:
        raise InputError(
            f"-k {expression!r} selects none of the {len(claims)} claims"
            " (a word matches a substring of a claim's id, origin or kind; see --list)"
        )
    return out
