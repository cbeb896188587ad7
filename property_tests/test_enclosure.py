"""Certified decimal enclosures (``attsvm.symbolic.enclosure``): the printed decimals contain the exact rational.

The ends are read back from the *printed* text (plain and LaTeX) with ``fractions.Fraction`` and compared with the
exact value: ``lo <= q <= hi`` exactly, ``hi - lo`` at most the stated width (one unit in the 12th significant
digit), short rationals printed exactly, floats refused.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm.symbolic.enclosure import SHORT_DIGITS, SIGNIFICANT, as_fraction, enclose, is_short, show

BIG = st.integers(-(10**80), 10**80)
POS = st.integers(1, 10**80)


def _from_text(text: str) -> tuple[Fraction, Fraction]:
    """The ends of a plain-text enclosure ``[lo, hi]`` or ``[lo, hi]e+05``, exactly."""
    m = re.fullmatch(r"\[(\S+), (\S+)\](?:e([+-]\d+))?", text)
    assert m, text
    scale = Fraction(10) ** int(m.group(3) or 0)
    return Fraction(m.group(1)) * scale, Fraction(m.group(2)) * scale


def _from_latex(tex: str) -> tuple[Fraction, Fraction]:
    m = re.fullmatch(r"\\left\[(\S+),\\,(\S+)\\right\](?:\\cdot 10\^\{(-?\d+)\})?", tex)
    assert m, tex
    scale = Fraction(10) ** int(m.group(3) or 0)
    return Fraction(m.group(1)) * scale, Fraction(m.group(2)) * scale


@given(BIG, POS)
def test_printed_enclosure_contains_the_exact_value(num, den):
    q = Fraction(num, den)
    enc = enclose(q)
    if enc.exact:
        assert is_short(q) or q == 0
        assert Fraction(enc.text()) == q and show(q) == "= " + enc.text()
        return
    for lo, hi in (_from_text(enc.text()), _from_latex(enc.latex())):
        assert lo <= q <= hi
        assert hi - lo <= enc.width
        assert (lo, hi) == (enc.lo, enc.hi)
    # the stated width is one unit in the last of the SIGNIFICANT digits: relative to q at most 10^(1 - digits)
    assert enc.width <= abs(q) * Fraction(10) ** (1 - SIGNIFICANT)
    assert enc.width > abs(q) * Fraction(10) ** (-SIGNIFICANT)  # and not wastefully wide
    assert show(q) == "in " + enc.text()


@given(st.integers(1, 10**SHORT_DIGITS - 1), st.integers(1, 10**SHORT_DIGITS - 1), st.booleans())
def test_short_rationals_stay_exact(num, den, neg):
    q = Fraction(-num if neg else num, den)
    enc = enclose(q)
    assert enc.exact and enc.lo == enc.hi == q and enc.width == 0


def test_long_rationals_are_enclosed():
    q = Fraction(10**30 + 7, 3 * 10**29)
    enc = enclose(q)
    assert not enc.exact and enc.text() == "[3.33333333333, 3.33333333334]"
    tiny = Fraction(1, 3 * 10**12 + 1)  # the denominator has 13 digits: long
    assert not is_short(tiny) and enclose(tiny).text() == "[3.33333333333, 3.33333333334]e-13"
    neg = enclose(-q)
    assert neg.text() == "[-3.33333333334, -3.33333333333]"


def test_floats_are_refused():
    with pytest.raises(TypeError):
        as_fraction(0.1)
    assert as_fraction("1/3") == Fraction(1, 3)
