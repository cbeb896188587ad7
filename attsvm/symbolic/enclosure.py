r"""Certified decimal enclosures of exact rationals, for documents that cannot print 3000-digit fractions.

A rational $q$ whose numerator and denominator both have at most :data:`SHORT_DIGITS` digits is shown exactly.
Any other $q\ne0$ is shown as an interval of two decimals with :data:`SIGNIFICANT` significant digits,

.. math:: \mathrm{lo}=\lfloor q\,10^{k}\rfloor\,10^{-k}\;\le\;q\;\le\;\mathrm{hi}=\lceil q\,10^{k}\rceil\,10^{-k},
          \qquad k=\mathrm{SIGNIFICANT}-1-e,\quad e=\lfloor\log_{10}|q|\rfloor,

computed with integer arithmetic only (no float ever touches the value): $e$ comes from the digit counts of the
numerator and denominator corrected by one exact comparison, and floor and ceiling from ``divmod``. So the
enclosure is *directed*: it contains $q$, and its width $\mathrm{hi}-\mathrm{lo}\le10^{e-\mathrm{SIGNIFICANT}+1}$ is
one unit in the last printed digit (zero when $q$ is such a decimal). Decimals with $-4\le e\le4$ are written
positionally, others with a common power of ten, $[1.23456789012,\,1.23456789013]\cdot10^{-7}$.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

#: significant digits of an enclosure's ends
SIGNIFICANT = 12
#: a rational whose numerator and denominator have at most this many digits is shown exactly
SHORT_DIGITS = 12
#: decimal exponents written positionally (0.000123..., 12345.6...); others get a common power of ten
POSITIONAL = (-4, 4)


def as_fraction(q: Any) -> Fraction:
    """An exact rational from a ``"p/q"`` string, an int, a Fraction or a sympy Rational (never a float)."""
    if isinstance(q, float):
        raise TypeError("as_fraction: a float is not an exact rational")
    if hasattr(q, "p") and hasattr(q, "q"):  # sympy Rational
        return Fraction(int(q.p), int(q.q))
    return Fraction(str(q)) if not isinstance(q, Fraction | int) else Fraction(q)


def is_short(q: Any) -> bool:
    """Numerator and denominator both have at most :data:`SHORT_DIGITS` digits (the value is shown exactly)."""
    f = as_fraction(q)
    return len(str(abs(f.numerator))) <= SHORT_DIGITS and len(str(f.denominator)) <= SHORT_DIGITS


def exponent10(q: Fraction) -> int:
    r"""$\lfloor\log_{10}|q|\rfloor$ of a nonzero rational, exactly."""
    num, den = abs(q.numerator), q.denominator
    e = len(str(num)) - len(str(den))  # 10**(e-1) < |q| < 10**(e+1)
    return e if Fraction(num, den) >= Fraction(10) ** e else e - 1


@dataclass(frozen=True)
class Enclosure:
    r"""$\mathrm{lo}\le q\le\mathrm{hi}$ with $\mathrm{lo}=L\cdot10^{s}$, $\mathrm{hi}=H\cdot10^{s}$ ($L,H$ integers,
    $s=e-\mathrm{digits}+1$); ``exact`` when $q$ is short (then ``lo == hi == q``)."""

    value: Fraction
    lo_int: int
    hi_int: int
    exponent: int  # e = floor(log10 |q|), 0 for q = 0
    digits: int
    exact: bool

    @property
    def scale(self) -> int:
        """$s$: the ends are integers times $10^s$."""
        return self.exponent - self.digits + 1

    @property
    def lo(self) -> Fraction:
        return self.value if self.exact else self.lo_int * Fraction(10) ** self.scale

    @property
    def hi(self) -> Fraction:
        return self.value if self.exact else self.hi_int * Fraction(10) ** self.scale

    @property
    def width(self) -> Fraction:
        r"""The stated width $10^{s}$ (one unit in the last digit); 0 for an exact value."""
        return Fraction(0) if self.exact else Fraction(10) ** self.scale

    @property
    def positional(self) -> bool:
        return POSITIONAL[0] <= self.exponent <= POSITIONAL[1]

    def _decimal(self, n: int, shift: int) -> str:
        """The decimal $n\\cdot10^{\\mathrm{shift}}$ written out exactly (``shift`` may be negative)."""
        sign, digits = ("-" if n < 0 else ""), str(abs(n))
        if shift >= 0:
            return sign + digits + "0" * shift
        frac = -shift
        digits = digits.rjust(frac + 1, "0")
        return sign + digits[:-frac] + "." + digits[-frac:]

    def ends(self) -> tuple[str, str, int | None]:
        """The two ends as decimal strings, and the common power of ten (None when written positionally)."""
        if self.positional:
            return self._decimal(self.lo_int, self.scale), self._decimal(self.hi_int, self.scale), None
        shift = -(self.digits - 1)
        return self._decimal(self.lo_int, shift), self._decimal(self.hi_int, shift), self.exponent

    def exact_text(self) -> str:
        f = self.value
        return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"

    def text(self) -> str:
        """Plain text: ``1/4`` (exact), ``[0.773656248381, 0.773656248382]`` or ``[1.2, 1.3]e-07``."""
        if self.exact:
            return self.exact_text()
        lo, hi, p = self.ends()
        return f"[{lo}, {hi}]" + ("" if p is None else f"e{p:+03d}")

    def latex(self) -> str:
        r"""LaTeX: ``\frac{1}{4}`` (exact) or ``\left[lo,\,hi\right]`` (times ``10^{p}`` when not positional)."""
        if self.exact:
            f = self.value
            if f.denominator == 1:
                return str(f.numerator)
            sign = "-" if f < 0 else ""
            return sign + r"\frac{" + str(abs(f.numerator)) + "}{" + str(f.denominator) + "}"
        lo, hi, p = self.ends()
        out = r"\left[" + lo + r",\," + hi + r"\right]"
        return out if p is None else out + r"\cdot 10^{" + str(p) + "}"

    @property
    def relation(self) -> str:
        """``"="`` for an exact value, ``"in"`` for an interval (a :class:`~attsvm.symbolic.printer.Chain` op)."""
        return "=" if self.exact else "in"

    def _attsvm_latex(self, printer: Any = None) -> str:  # the attsvm printer's hook
        return self.latex()


def enclose(q: Any, digits: int = SIGNIFICANT) -> Enclosure:
    r"""The certified enclosure of ``q`` (module docstring); exact when ``q`` is short or zero."""
    f = as_fraction(q)
    if f == 0 or is_short(f):
        return Enclosure(f, 0, 0, exponent10(f) if f else 0, digits, True)
    e = exponent10(f)
    k = digits - 1 - e  # lo = floor(f * 10^k) / 10^k
    scaled = f * Fraction(10) ** k
    lo_int = scaled.numerator // scaled.denominator
    hi_int = -((-scaled.numerator) // scaled.denominator)
    return Enclosure(f, lo_int, hi_int, e, digits, False)


def show(q: Any) -> str:
    """One-line plain text of a rational: ``= 1/4`` or ``in [lo, hi]`` (``none`` for None)."""
    if q is None:
        return "none"
    enc = enclose(q)
    return ("= " if enc.exact else "in ") + enc.text()
