"""The options of an experiment spec (its ``OPTIONS``): :class:`Option`, how given values are checked and
converted (:func:`resolve_options`, :func:`select_options`), and the options of the authors' GD recipe.

Options are set by ``reproduce(..., options={"reference": "scs"})`` or on the command line by
``attsvm reproduce NAME --set KEY=VALUE`` (:func:`attsvm.cli.options.parse_assignments`); an unknown key or a value
the spec does not allow is bad input, found before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import InputError

OptionValue = str | int | float | bool
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Option:
    """One option of a spec (``OPTIONS``): its ``default`` (a ``str``, ``int``, ``float`` or ``bool``, whose type
    is the option's type) and the values allowed: one of ``choices`` when given, else any value of that type
    within ``[minimum, maximum]`` (numbers; each bound optional). ``help`` is one line for error messages and
    docs."""

    default: OptionValue
    choices: tuple[OptionValue, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""

    @property
    def kind(self) -> type:
        """The option's type: that of its default."""
        return type(self.default)

    def describe(self) -> str:
        """The values allowed, in words (for error messages)."""
        if self.choices is not None:
            return "one of " + ", ".join(option_text(c) for c in self.choices)
        bounds = [f">= {option_text(self.minimum)}"] if self.minimum is not None else []
        bounds += [f"<= {option_text(self.maximum)}"] if self.maximum is not None else []
        word = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}[self.kind]
        return word + (f" {' and '.join(bounds)}" if bounds else "")

    def convert(self, value: Any) -> OptionValue:
        """``value`` (text from the command line, or a value from Python) as a value of the option's type; a
        ``ValueError`` saying what is allowed when it is not one of the allowed values."""
        kind = self.kind
        out: OptionValue
        if kind is bool:
            text = str(value).strip().lower()
            if isinstance(value, bool):
                out = value
            elif text in _TRUE or text in _FALSE:
                out = text in _TRUE
            else:
                raise ValueError(self.describe())
        elif kind is int:
            if isinstance(value, bool) or isinstance(value, float):
                raise ValueError(self.describe())
            try:
                out = int(str(value).strip(), 10) if isinstance(value, str) else int(value)
            except (TypeError, ValueError):
                raise ValueError(self.describe()) from None
        elif kind is float:
            if isinstance(value, bool):
                raise ValueError(self.describe())
            try:
                out = float(value.strip() if isinstance(value, str) else value)
            except (TypeError, ValueError):
                raise ValueError(self.describe()) from None
            if not np.isfinite(out):
                raise ValueError(self.describe())
        else:
            if not isinstance(value, str):
                raise ValueError(self.describe())
            out = value
        if self.choices is not None and out not in self.choices:
            raise ValueError(self.describe())
        if (self.minimum is not None and out < self.minimum) or (self.maximum is not None and out > self.maximum):
            raise ValueError(self.describe())
        return out


#: the float64 machine epsilon, the authors' ``torch.finfo(torch.double).eps`` (their ridge and normaliser)
AUTHORS_EPS = 2.0**-52


def authors_options() -> dict[str, Option]:
    r"""The options of the authors' normalised-GD recipe (E3 ``local``, ``digits``): the $(K,Q)$ ridge, the initial
    law, the $(K,Q)$ normalisation and the normaliser's $\epsilon$, defaults as in their code."""
    return {
        "ridge": Option(
            AUTHORS_EPS, minimum=0.0, help="ridge lambda of lambda(|K|^2+|Q|^2) on the (K,Q) runs (paper: 2^-52)"
        ),
        "init": Option("linear", ("linear", "random"), help="initial law: PyTorch's nn.Linear default, or 0.1 N"),
        "normalize": Option("per-factor", ("per-factor", "joint"), help="(K,Q): normalise each factor or both"),
        "grad_eps": Option(
            AUTHORS_EPS, minimum=0.0, help="the normaliser's eps in g/(|g|+eps), both runs (paper: 2^-52)"
        ),
    }


def option_text(value: Any) -> str:
    """An option's value as written on the command line and in captions: ``true``/``false`` for booleans."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def spec_options(mod: ModuleType) -> dict[str, Option]:
    """The options a spec declares (its ``OPTIONS``; none without one), shorthand tuples made :class:`Option`.
    A malformed declaration (bad name or type, a default it does not allow) is bad input naming the spec."""
    raw = getattr(mod, "OPTIONS", None) or {}
    where = getattr(mod, "__file__", None) or getattr(mod, "__name__", "spec")
    if not isinstance(raw, dict):
        raise InputError(f"{where}: OPTIONS must be a dict name -> Option(default, choices)")
    out: dict[str, Option] = {}
    for key, val in raw.items():
        opt = val if isinstance(val, Option) else Option(*val) if isinstance(val, tuple) and val else None
        ok_name = isinstance(key, str) and key.isidentifier()
        if opt is None or not ok_name or type(opt.default) not in (str, int, float, bool):
            raise InputError(f"{where}: OPTIONS[{key!r}] must be Option(default, ...), default str, int, float or bool")
        if opt.choices is not None:
            opt = replace(opt, choices=tuple(opt.choices))
        try:
            if opt.convert(opt.default) != opt.default:
                raise ValueError(opt.describe())
        except ValueError as exc:
            raise InputError(
                f"{where}: OPTIONS[{key!r}]: default {option_text(opt.default)} not allowed ({exc})"
            ) from None
        out[key] = opt
    return out


def _listing(opts: dict[str, Option]) -> str:
    return ", ".join(f"{k} ({o.describe()}; default {option_text(o.default)})" for k, o in opts.items()) or "none"


def resolve_options(mod: ModuleType, name: str, given: dict[str, Any] | None = None) -> dict[str, OptionValue]:
    """Every option of the spec (:func:`spec_options`): the ``given`` values, converted to the default's type
    (:meth:`Option.convert`; ``"0"`` for a float option is ``0.0``), the defaults for the rest. A key the spec
    does not declare, or a value it does not allow, is bad input (:class:`~attsvm.errors.InputError`)."""
    opts = spec_options(mod)
    given = dict(given or {})
    unknown = sorted(set(given) - set(opts))
    if unknown:
        raise InputError(f"experiment {name!r} has no option {unknown[0]!r} (its options: {_listing(opts)})")
    out: dict[str, OptionValue] = {}
    for key, opt in opts.items():
        if key not in given:
            out[key] = opt.default
            continue
        try:
            out[key] = opt.convert(given[key])
        except ValueError as exc:
            raise InputError(f"option {key}={option_text(given[key])} of experiment {name!r}: expected {exc}") from None
    return out


def select_options(specs: dict[str, ModuleType], given: dict[str, Any]) -> dict[str, dict[str, OptionValue]]:
    """The options of each experiment of ``specs`` (name -> spec) for a run of all of them: each given option
    applies to the experiments that declare it (:func:`resolve_options` checks its value for each); a key that
    none of them declares is bad input."""
    if len(specs) == 1:
        return {name: resolve_options(mod, name, given) for name, mod in specs.items()}
    declared = {name: spec_options(mod) for name, mod in specs.items()}
    unknown = sorted(k for k in given if not any(k in o for o in declared.values()))
    if unknown:
        known = "; ".join(f"{n}: {', '.join(o)}" for n, o in declared.items() if o) or "none"
        raise InputError(f"no selected experiment has an option {unknown[0]!r} (options: {known})")
    return {
        name: resolve_options(mod, name, {k: v for k, v in given.items() if k in declared[name]})
        for name, mod in specs.items()
    }
