r"""The conjecture writer's kit: one namespace, three precisions, so that a claim's conclusion is written **once**.

A conclusion takes its arithmetic from ``case.kit``. The search runs it with the float64 kit (fast: the engine's
:mod:`attsvm.model`, :mod:`attsvm.svm`, :mod:`attsvm.gd`); when it fails, attsvm re-runs *the same function* on
the replayed case with a confirming kit: first the **ball** kit (python-flint ``arb`` balls of ``prec`` bits,
:mod:`attsvm.ball`: every helper returns a rigorous enclosure of the exact value, so a margin ball strictly
below 0 refutes rigorously), then the **mp** kit (mpmath at 50 digits, then at 100 to check that the margin is
stable) whose every helper is the independent re-computation of :mod:`attsvm.highprec` — SVM solutions from
the exact certificates, GD trajectories from the 50-digit replay. No hand-written ``confirm`` is needed::

    @claim(id="my-conjecture", title="...", origin="reconstructed",
           hypotheses={"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)})
    def my_conjecture(case):
        k = case.kit                                   # float64 while searching, balls / mpmath when confirming
        D = k.data(case.data)                          # X, Z, Y, v, gamma as arrays of that precision
        run = k.gd(case.data, algo="ngd", lr=0.1, steps=200)
        mm = k.wmm(case.data)                          # W^mm of opt, with its support tokens
        c = k.corr(run.W, mm.W)
        return Outcome(ok=c >= 0.9, margin=c - 0.9)

Arrays of the confirming kits are numpy ``object`` arrays of ``mpmath.mpf`` (mp) or ``flint.arb`` (ball), so
``+ - * / @``, indexing, ``np.einsum``, ``np.take_along_axis`` work unchanged; elementwise transcendental functions
must go through the kit (``k.exp``, ``k.log``, ...): ``np.exp`` of an ``mpf`` array raises, which leaves the
failure *unconfirmed* rather than silently float64 (on a ball array numpy calls each ball's own, rigorous,
``exp`` / ``log`` / ``sqrt``). Minima and maxima of margins go through ``k.min`` / ``k.max``: balls compare
*certainly* (``a < b`` and ``a >= b`` are both False when they overlap), so the ball that Python's ``min`` or
numpy's ``.min()`` picks need not enclose the minimum. Write squares as ``x * x``: python-flint's ``x ** 2`` of a
ball that contains 0 is ``nan``. A margin that comes back as a float on a confirming run means the conclusion
bypassed the kit: also unconfirmed. ``k.hp`` is True in both confirming kits (use it to choose exact constants),
``k.ball`` in the ball kit only. A helper that cannot give a certified value (no exact SVM certificate, a ball GD
replay that lost its precision, a singular-vector of a repeated singular value, ...) raises :class:`Undecidable`.

**Ball arithmetic.** The helpers set ``flint.ctx.prec`` themselves; arithmetic *between* their results runs at
the ambient precision, which the automatic confirmation sets (``with k.context():``) — outside it the balls are
only wider, never wrong. A comparison of balls is True only when it holds for every member (``a < b`` and
``a >= b`` are both False when the balls overlap).

**Gradients over a box.** The ball helpers also take :class:`attsvm.ball.jet.Jet` entries (a ball with the
enclosure of its gradient over a box of parameters, :func:`attsvm.ball.jet.variables`) and return jets: the
same conclusion then gives an enclosure of its margin *and* of the margin's gradient on the box (the prover's
mean-value form). The elementwise functions, ``logsumexp``, ``min``/``max``, ``norm``, ``corr``, the model
(``logits`` ... ``hessian_W``, ``margins``) and the arithmetic between results differentiate; the decompositions
(``svd``, singular values and the norms built on them, ``inv``, ``solve``, ``det``, ``eigvalsh``, ``projector``) and
``gd`` raise ``TypeError`` on jets rather than drop their gradient.

**Strict kits (no bypass).** The automatic confirmation uses *strict* confirming kits (``Kit(..., strict=True)``):
there ``k.array`` and ``k.scalar`` reject a Python / numpy float that looks *computed* rather than written — one
whose shortest repr has more than :data:`STRICT_DIGITS` (12) significant digits, such as ``1 - 0.1*3``
($-2.22\cdot10^{-16}$... in float64) or ``1/3`` — with :class:`Bypass` (an :class:`Undecidable`: the failure stays
unconfirmed). Written constants (``0.9``, ``-1.0``, ``1e-3``), ints, ``"p/q"`` strings, ``Fraction``, ``mpf`` and
``arb`` values pass, and so do arrays of them; an array is rejected when any element is such a float. Data reach
a conclusion as arrays of the confirming precision (``k.data(case.data)``, the confirming case's draws), and the
helpers take their array arguments as they are (float64 values exactly): the rule is for the numbers a
conclusion converts itself. :meth:`Kit.exact` converts without the rule (the confirming case's data and draws).

================================  ==================================================================
helper                            definition (float64 / mp / ball)
================================  ==================================================================
``data(ds)``                      the flat view: $X$ (N,T,d), $Y$ (N,), $Z$ (N,d), $v$, $\gamma_{it}=Y_iv^\top x_{it}$
                                  (next-token data: $\gamma_{it}=1$ on the label's occurrences, else 0)
``array, scalar, zeros, eye``     numbers of the kit's precision (float64 values, ints, ``mpf`` taken
``exact``                         exactly; ``"p/q"`` / ``Fraction`` exact or, in balls, enclosed); strict
                                  kits: :class:`Bypass` for a computed-looking float (``exact``: never)
``exp log log1p expm1 sqrt``      elementwise
``logsumexp(a, axis)``            $m+\log\sum e^{a-m}$ (ball: $m$ a largest-midpoint entry)
``min max``                       of all entries or along ``axis`` (ball: enclosures of the minimum/maximum)
``norm nuclear_norm spectral``    $\|A\|_F$, $\|A\|_\star=\sum\sigma_j$, $\|A\|_2=\sigma_1$
``svd inv solve det eigvalsh``    small dense linear algebra (numpy / mpmath / arb with Weyl–Ostrowski
                                  bounds; ball ``svd``: simple positive singular values only)
``corr(A, B)``                    $\langle A,B\rangle/(\|A\|_F\|B\|_F)$
``projector(Z)``                  $P_Z$, the orthogonal projector onto the row space of $Z$ (ball: exact
                                  rank of exact data)
``logits softmax log_softmax``    $a_{it}=x_{it}^\top Wz_i$, $s_i=\mathbb S(a_i)$ (causal masks respected)
``outputs(ds, W)``                $(s,\gamma,u)$ with $u_i=\gamma_i^\top s_i$
``loss grad_W grad_KQ``           $\mathcal L(W)=\frac1n\sum\ell(u_i)$, $\nabla_W\mathcal L$, $\nabla_{(K,Q)}$
                                  (next-token data: ``loss="nll"``, $\ell(u)=-\log u$)
``loss_derivative(u, loss)``      $\ell'(u)$
``hessian_W smoothness``          $\nabla^2\mathcal L(W)$ ($d^2\times d^2$; ball: the analytic form), $L_W$ of
                                  THEORY §3
``margins(ds, W, alpha)``         $(x_{i\alpha_i}-x_{it})^\top Wz_i$ (N,T), $+\infty$ at $\alpha_i$ and invisible tokens
                                  (ball: ``arb.pos_inf()``)
``wmm(ds, alpha)``                $W^{mm}_\alpha$ with support tokens: solver / exact rational certificate
                                  (ball: its rationals enclosed)
``wmm_nuclear(ds, alpha)``        $W^{mm\star}_\alpha$: the solver's $W$ with a proved duality gap
``locally_optimal(ds, alpha)``    $\alpha$ locally optimal: every support token scores below $\alpha$
``gd(ds, ...)``                   GD, NGD on $W$ / $(K,Q)$; NSD (``norm``), Adam, mirror descent on $W$;
                                  ``schedule``: the engine / the 50-digit replay / the ball replay
                                  (:mod:`attsvm.ball.gd`: ``gd``, ``ngd``, ``nsd`` in ``fro``, ``linf``,
                                  ``l1``; radii watched)
``twolayer(ds, W1, W2)``          the two-layer model (issue 30; ``residual``, ``causal``): $s^{(1)}$ (N,T,T),
                                  $\bar h$, $h=\bar h+\rho x$ (N,T,d), $s^{(2)}$, $g$ (N,T), $u$ (N,) —
                                  :mod:`attsvm.twolayer` / ``highprec.twolayer_outputs`` /
                                  :mod:`attsvm.ball.twolayer`
``twolayer_loss twolayer_grads``  $\mathcal L(W_1,W_2)$, $(\nabla_{W_1}\mathcal L,\nabla_{W_2}\mathcal L)$
                                  (derivation ``twolayer-gradient``)
``twolayer_selections``           $(\alpha,\beta)$: layer-1 (N,T) and layer-2 (N,) argmax (ball: proved, else
                                  :class:`Undecidable`)
``hard_outputs(ds, alpha)``       $H^\alpha_{it}=x_{i\alpha_{it}}+\rho x_{it}$ (ball: exact)
``twolayer_margins(.., layer)``   layer 2 $(h_{i\beta_i}-h_{it})^\top W_2z_i$ (N,T); layer 1
                                  $(x_{i\alpha_{it}}-x_{i\tau})^\top W_1x_{it}$ (N,T,T); $+\infty$ off the keys
``twolayer_gd(ds, ...)``          ``gd`` / ``ngd`` on $(W_1,W_2)$ (``freeze``, ``normalize``): the engine / the
                                  50-digit replay / the ball replay :func:`attsvm.ball.twolayer.replay`
``tol(name)``                     the tolerance table; rounding allowances are $10^{-30}$ in mp and ball
``to_float(x)``                   a float (ball: the midpoint) keeping the sign of a tiny number
================================  ==================================================================
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from .data import Dataset

PRECISIONS = ("float64", "mp", "ball")
CONFIRM_DPS = (50, 100)  # the automatic confirmation: 50 digits, and 100 to check that the margin is stable
BALL_PREC = 256  # the ball kit's default working precision (bits)
STRICT_DIGITS = 12  # a strict kit rejects a float whose shortest repr has more significant digits (computed)

# tolerances that only absorb rounding: at high precision they shrink to HP_ROUNDING; the others are modelling
# allowances (finite-difference steps, experiment thresholds) and stay as they are.
ROUNDING_TOLERANCES = ("grad_rtol", "grad_atol", "kkt", "active", "rank", "corr", "rounding", "rowspace", "replay_rtol")
HP_ROUNDING = 1e-30


class Undecidable(RuntimeError):
    """A helper cannot produce a certified value at high precision (no exact certificate, a ball that lost its
    precision, ...): the failure stays *unconfirmed* (never a refutation, never a pass)."""


class Bypass(Undecidable):
    """A strict kit was handed a float64 value that looks computed outside the kit (module docstring)."""


@dataclass
class KitData:
    r"""A data set's flat view in the kit's precision: ``X`` (N,T,d), ``Y`` (N,), ``Z`` (N,d), ``v`` (d,),
    ``gamma`` (N,T) $=Y_iv^\top x_{it}$, ``mask`` (N,T) visibility or None, ``opt`` and ``selection`` (N,) ints,
    ``raw`` the :class:`~attsvm.data.Dataset`."""

    X: np.ndarray
    Y: np.ndarray
    Z: np.ndarray
    v: np.ndarray
    gamma: np.ndarray
    mask: np.ndarray | None
    opt: np.ndarray
    selection: np.ndarray
    raw: Dataset

    @property
    def N(self) -> int:
        return int(self.X.shape[0])

    @property
    def T(self) -> int:
        return int(self.X.shape[1])

    @property
    def d(self) -> int:
        return int(self.X.shape[2])


@dataclass
class MaxMargin:
    r"""$W^{mm}_\alpha$ (or $W^{mm\star}_\alpha$): ``status`` ``"optimal"``/``"infeasible"``, ``W`` (d,d) in the kit's
    precision (None when infeasible), ``support`` the set of $(i,t)$ with margin 1, ``alpha`` (N,), ``how`` the
    evidence (``"solver"``, ``"exact"`` rationals, ``"duality-gap"``), ``gap`` the proved relative gap (nuclear)."""

    status: str
    W: np.ndarray | None
    support: set[tuple[int, int]] = field(default_factory=set)
    alpha: np.ndarray | None = None
    how: str = "solver"
    gap: float | None = None

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"


@dataclass
class Run:
    r"""A GD run's last iterate in the kit's precision: ``W`` (d,d) (``K Q^T`` for $(K,Q)$), ``K``, ``Q`` (or None),
    ``steps`` taken, ``lr`` $\eta$."""

    W: np.ndarray
    K: np.ndarray | None
    Q: np.ndarray | None
    steps: int
    lr: Any


@dataclass
class TwoLayer:
    r"""The two-layer forward pass in the kit's precision (:meth:`Kit.twolayer`): ``s1`` (N,T,T)
    $s^{(1)}_{i,t\tau}$ (row $t$ the query; 0 off the keys), ``h_bar``, ``h`` (N,T,d) $\bar h_{it}$,
    $h_{it}=\bar h_{it}+\rho x_{it}$, ``s2`` (N,T), ``g`` (N,T) $g_{it}=Y_iv^\top h_{it}$, ``u`` (N,)."""

    s1: np.ndarray
    h_bar: np.ndarray
    h: np.ndarray
    s2: np.ndarray
    g: np.ndarray
    u: np.ndarray


@dataclass
class TwoLayerRun:
    r"""A two-layer GD run's last iterate in the kit's precision (:meth:`Kit.twolayer_gd`): ``W1``, ``W2`` (d,d),
    ``steps`` taken, ``lr`` $\eta$."""

    W1: np.ndarray
    W2: np.ndarray
    steps: int
    lr: Any


def _ds(ds: Any) -> Dataset:
    """The data set behind ``ds``: a :class:`KitData`'s or a confirming view's ``raw``, else ``ds`` itself."""
    if isinstance(ds, KitData):
        return ds.raw
    return getattr(ds, "raw", ds)


def _ball():
    from . import ball

    return ball


def _significant_digits(x: float) -> int:
    """Significant digits of the shortest repr of ``x`` (0 for 0, inf, nan)."""
    if not math.isfinite(x):
        return 0
    return len(repr(x).split("e")[0].lstrip("-").replace(".", "").strip("0"))


def _computed(x: Any) -> bool:
    """Whether ``x`` is a float that looks computed: more than :data:`STRICT_DIGITS` significant digits."""
    return isinstance(x, (float, np.floating)) and _significant_digits(float(x)) > STRICT_DIGITS


def _caller() -> str:
    """``file:line`` of the innermost frame outside this module (the conclusion that called the kit)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def _bypass(call: str) -> Bypass:
    return Bypass(
        f"{call} during confirmation: a float64 value computed outside the kit (compute through case.kit, or pass "
        f"an exact constant as a string/Fraction) (called at {_caller()})"
    )


class Kit:
    """The helpers of the module table in one precision: ``Kit()`` float64, ``Kit("mp", dps)`` mpmath at ``dps``
    digits, ``Kit("ball", prec)`` arb balls of ``prec`` bits (:mod:`attsvm.ball`); ``strict=True`` (confirming
    kits): :meth:`array` / :meth:`scalar` reject computed-looking floats (module docstring)."""

    def __init__(
        self, precision: str = "float64", dps: int | None = None, *, prec: int | None = None, strict: bool = False
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.precision = precision
        self.ball = precision == "ball"
        self.hp = precision != "float64"  # a confirming kit (mp or ball): claims choose exact constants on it
        self.dps = (CONFIRM_DPS[0] if dps is None else int(dps)) if precision == "mp" else None
        size = prec if prec is not None else dps
        self.prec = (BALL_PREC if size is None else int(size)) if self.ball else None
        self.strict = bool(strict) and self.hp

    def __repr__(self) -> str:
        what = {"float64": "float64", "mp": f"mp, {self.dps} digits", "ball": f"ball, {self.prec} bits"}
        return f"Kit({what[self.precision]}{', strict' if self.strict else ''})"

    # ------------------------------------------------------------------ arrays
    def context(self):
        """``with k.context():`` — the working precision set to this kit's (mpmath's digits, ``flint.ctx.prec``'s
        bits; a no-op in float64), restored after.

        The helpers set it themselves; arithmetic *between* their results (``+ - * / @`` on ``mpf`` / ``arb``) runs
        at the ambient precision, which the automatic confirmation sets. Interactive use: wrap the computation."""
        if self.ball:
            return _ball().workprec(self.prec)
        return mpmath.workdps(self.dps) if self.hp else _Null()

    def _check(self, a: Any, call: str) -> None:
        if not self.strict:
            return
        if _computed(a):
            raise _bypass(f"k.{call}({float(a)!r})")
        if isinstance(a, (list, tuple, np.ndarray)):
            arr = np.asarray(a, dtype=object) if not isinstance(a, np.ndarray) else a
            for x in arr.ravel():
                if _computed(x):
                    raise _bypass(f"k.{call}([... {float(x)!r} ...])")

    def exact(self, a: Any) -> Any:
        """``a`` in this precision, a number for a number and an array for an array, float64 values taken exactly —
        without the strict rule (the confirming case's own data and draws)."""
        if np.ndim(a) == 0 and not isinstance(a, np.ndarray):
            return self._scalar(a)
        return self._conv(a)

    def _conv(self, a: Any) -> np.ndarray:
        if self.ball:
            with self.context():
                return _ball().numbers.arbs(a)
        if not self.hp:
            return np.asarray(a, dtype=np.float64)
        arr = np.asarray(a, dtype=object)
        with self.context():
            conv = np.frompyfunc(_to_mpf, 1, 1)
            return conv(arr) if arr.ndim else np.array(_to_mpf(arr.item()), dtype=object)

    def _scalar(self, x: Any) -> Any:
        if self.ball:
            with self.context():
                return _ball().to_arb(x.item() if isinstance(x, np.ndarray) else x)
        return float(x) if not self.hp else _to_mpf(x)

    def array(self, a: Any) -> np.ndarray:
        """``a`` as an array of this precision (float64 values and ``"p/q"`` rationals taken exactly; a strict kit
        rejects computed-looking floats, module docstring)."""
        self._check(a, "array")
        return self._conv(a)

    def scalar(self, x: Any) -> Any:
        """A number of this precision: ``float`` in float64, ``mpf`` / ``arb`` when confirming (for constants such
        as an indicator margin ``k.scalar(1 if rhs < 0 else -1)``: a bare float margin on a confirming run is taken
        for a conclusion that bypassed the kit; a strict kit rejects computed-looking floats)."""
        self._check(x, "scalar")
        return self._scalar(x)

    def zeros(self, *shape: int) -> np.ndarray:
        return self._conv(np.zeros(shape))

    def eye(self, n: int) -> np.ndarray:
        return self._conv(np.eye(n))

    def _ufunc(self, npf, mpf_name: str, a: Any):
        if self.ball:
            return _ball().numbers.elementwise(mpf_name, a, self.prec)
        if not self.hp:
            return npf(np.asarray(a, dtype=np.float64))
        with self.context():
            return np.frompyfunc(getattr(mpmath, mpf_name), 1, 1)(self._conv(a))

    def exp(self, a: Any):
        return self._ufunc(np.exp, "exp", a)

    def log(self, a: Any):
        return self._ufunc(np.log, "log", a)

    def log1p(self, a: Any):
        return self._ufunc(np.log1p, "log1p", a)

    def expm1(self, a: Any):
        return self._ufunc(np.expm1, "expm1", a)

    def sqrt(self, a: Any):
        return self._ufunc(np.sqrt, "sqrt", a)

    def logsumexp(self, a: Any, axis: int = -1) -> Any:
        r"""$\log\sum_t e^{a_t}=m+\log\sum_te^{a_t-m}$ along ``axis`` ($m$ the maximum; ball: an entry of largest
        midpoint, any shift being exact)."""
        if self.ball:
            return _ball().numbers.logsumexp(a, axis, self.prec)
        arr = self._conv(a)
        m = np.max(arr, axis=axis, keepdims=True)
        return np.squeeze(m, axis) + self.log(np.sum(self.exp(arr - m), axis=axis))

    def min(self, a: Any, axis: int | None = None) -> Any:
        r"""$\min$ of ``a`` (all entries, or along ``axis``). Ball: an enclosure of the minimum (arb's ``min``) —
        Python's ``min`` and numpy's ``.min()`` pick one ball by *certain* comparisons, and when balls overlap the one
        picked need not enclose the minimum (it can lie above a member that may be smaller): reduce margins here."""
        return self._reduce(a, axis, "min")

    def max(self, a: Any, axis: int | None = None) -> Any:
        r"""$\max$ of ``a`` (all entries, or along ``axis``); ball: an enclosure of the maximum (see :meth:`min`)."""
        return self._reduce(a, axis, "max")

    def _reduce(self, a: Any, axis: int | None, how: str) -> Any:
        if not self.hp:
            return getattr(np, how)(np.asarray(a, dtype=np.float64), axis=axis)
        arr = self._conv(a)
        if not self.ball:
            return getattr(np, how)(arr, axis=axis)
        extremum = _ball().numbers.extremum
        op = np.frompyfunc(lambda x, y: extremum(how, x, y), 2, 1)
        with self.context():
            return op.reduce(arr.ravel() if axis is None else arr, axis=0 if axis is None else axis)

    @staticmethod
    def to_float(x: Any) -> float:
        """``float(x)`` keeping the sign of a number below the float64 range (see ``highprec.signed_float``); a ball
        gives its midpoint."""
        from .highprec import signed_float

        if is_ball(x):
            return _ball().numbers.mid_float(x)
        return signed_float(x)

    def tol(self, name: str) -> float:
        """The tolerance ``name`` of :mod:`attsvm.tolerances`; a rounding allowance is ``1e-30`` when confirming."""
        from .tolerances import tol

        if self.hp and name in ROUNDING_TOLERANCES:
            return HP_ROUNDING
        return tol(name)

    # ------------------------------------------------------------------ linear algebra
    def norm(self, A: Any) -> Any:
        r"""$\|A\|_F$ (float64: scale-safe ``np.linalg.norm``)."""
        if self.ball:
            return _ball().linalg.frob(A, self.prec)
        if not self.hp:
            return float(np.linalg.norm(np.asarray(A, dtype=np.float64)))
        from . import highprec as hpm

        with self.context():
            return hpm.frob(self._conv(A).tolist())

    def svd(self, A: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""$A=U\,\mathrm{diag}(S)\,V^\top$ (thin): ``(U, S, Vt)``, $S$ descending (ball: enclosed for simple positive
        singular values, else :class:`Undecidable`)."""
        if self.ball:
            return _ball().linalg.svd(A, self.prec)
        if not self.hp:
            return np.linalg.svd(np.asarray(A, dtype=np.float64), full_matrices=False)
        with self.context():
            M = mpmath.matrix(self._conv(A).tolist())
            U, S, V = mpmath.svd_r(M, full_matrices=False)
            order = sorted(range(len(S)), key=lambda j: -S[j])
            Ua = np.array([[U[a, j] for j in order] for a in range(U.rows)], dtype=object)
            Sa = np.array([S[j] for j in order], dtype=object)
            Va = np.array([[V[j, b] for b in range(V.cols)] for j in order], dtype=object)
            return Ua, Sa, Va

    def singular_values(self, A: Any) -> np.ndarray:
        """Singular values, descending."""
        if self.ball:
            return _ball().linalg.singular_values(A, self.prec)
        if not self.hp:
            return np.linalg.svd(np.asarray(A, dtype=np.float64), compute_uv=False)
        from . import highprec as hpm

        return np.array(hpm.singular_values(self._conv(A).tolist(), dps=self.dps), dtype=object)

    def nuclear_norm(self, A: Any) -> Any:
        r"""$\|A\|_\star=\sum_j\sigma_j(A)$."""
        s = self.singular_values(A)
        if not self.hp:
            return float(np.sum(s))
        with self.context():
            return sum(s, _ball().to_arb(0)) if self.ball else mpmath.fsum(s)

    def spectral_norm(self, A: Any) -> Any:
        r"""$\|A\|_2=\sigma_1(A)$."""
        s = self.singular_values(A)
        return float(s[0]) if not self.hp else s[0]

    def inv(self, A: Any) -> np.ndarray:
        if self.ball:
            return _ball().linalg.inv(A, self.prec)
        if not self.hp:
            return np.linalg.inv(np.asarray(A, dtype=np.float64))
        with self.context():
            return _from_mpmatrix(mpmath.inverse(mpmath.matrix(self._conv(A).tolist())))

    def solve(self, A: Any, b: Any) -> np.ndarray:
        """$A^{-1}b$ (``b`` a vector or a matrix)."""
        if self.ball:
            return _ball().linalg.solve(A, b, self.prec)
        if not self.hp:
            return np.linalg.solve(np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64))
        with self.context():
            Am, bm = mpmath.matrix(self._conv(A).tolist()), self._conv(b)
            cols = [bm] if bm.ndim == 1 else [bm[:, j] for j in range(bm.shape[1])]  # lu_solve takes vectors
            out = np.concatenate([_from_mpmatrix(mpmath.lu_solve(Am, mpmath.matrix(c.tolist()))) for c in cols], axis=1)
            return out[:, 0] if bm.ndim == 1 else out

    def det(self, A: Any) -> Any:
        if self.ball:
            return _ball().linalg.det(A, self.prec)
        if not self.hp:
            return float(np.linalg.det(np.asarray(A, dtype=np.float64)))
        with self.context():
            return mpmath.det(mpmath.matrix(self._conv(A).tolist()))

    def eigvalsh(self, A: Any) -> np.ndarray:
        """Eigenvalues of the symmetric part $(A+A^\\top)/2$, ascending."""
        if self.ball:
            return _ball().linalg.eigvalsh(A, self.prec)
        if not self.hp:
            A = np.asarray(A, dtype=np.float64)
            return np.linalg.eigvalsh((A + A.T) / 2)
        with self.context():
            Am = self._conv(A)
            E = mpmath.eigsy(mpmath.matrix(((Am + Am.T) / 2).tolist()), eigvals_only=True)
            return np.array(sorted(E[j] for j in range(len(E))), dtype=object)

    def projector(self, Z: Any) -> np.ndarray:
        r"""$P_Z$ (d,d): the orthogonal projector onto the span of the rows of ``Z`` (N,d); singular values below
        $\max(N,d)\,\epsilon\,\sigma_{\max}$ count as zero (float64: $\epsilon$ the machine epsilon; mp:
        $10^{-dps/2}$; ball: the exact rank of exact data, :func:`attsvm.ball.linalg.projector`)."""
        if self.ball:
            return _ball().linalg.projector(Z, self.prec)
        if not self.hp:
            Z = np.asarray(Z, dtype=np.float64)
            _, S, Vt = np.linalg.svd(Z)
            r = int(np.sum(S > max(Z.shape) * np.finfo(float).eps * S.max())) if S.size and S.max() > 0 else 0
            V = Vt[:r].T
            return V @ V.T
        from . import highprec as hpm

        return np.array(hpm.projector(self._conv(Z).tolist(), dps=self.dps), dtype=object)

    def corr(self, A: Any, B: Any) -> Any:
        r"""$\langle A,B\rangle/(\|A\|_F\|B\|_F)$."""
        if self.ball:
            return _ball().linalg.corr(A, B, self.prec)
        if not self.hp:
            from . import model

            return float(model.corr(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)))
        from . import highprec as hpm

        with self.context():
            return hpm.corr(self._conv(A).tolist(), self._conv(B).tolist())

    # ------------------------------------------------------------------ the model
    def data(self, ds: Dataset | KitData) -> KitData:
        """The flat view of ``ds`` in this precision (see :class:`KitData`)."""
        if isinstance(ds, KitData):
            return ds
        ds = _ds(ds)
        opt = np.asarray(ds.opt).reshape(-1).astype(np.int64)
        if self.ball:
            X, Y, Z, v, gamma, mask = _ball().model.flat(ds, self.prec)
            sel = np.asarray(ds.flat().alpha).reshape(-1).astype(np.int64)
            return KitData(X, Y, Z, v, gamma, mask, opt, sel, ds)
        if ds.batched:
            raise ValueError("the kit works on one data set (case.data)")
        f = ds.flat()
        X, Y, Z, v = (self._conv(np.asarray(a)) for a in (f.X, f.Y, f.Z, f.v))
        if ds.kind == "ntp":  # next-token data: the fixed scores 1[x_it is the label]
            gamma = self._conv(np.asarray(ds.scores))
        else:
            gamma = Y[:, None] * np.einsum("ntd,d->nt", X, v)
        mask = None if f.mask is None else np.asarray(f.mask, dtype=bool)
        sel = np.asarray(f.alpha).reshape(-1).astype(np.int64)
        return KitData(X, Y, Z, v, gamma, mask, opt, sel, ds)

    def logits(self, ds: Dataset | KitData, W: Any) -> np.ndarray:
        r"""$a_{it}=x_{it}^\top Wz_i$ (N,T)."""
        D = self.data(ds)
        if self.ball:
            return _ball().model.logits(D, W, self.prec)
        return np.einsum("ntd,de,ne->nt", D.X, self._conv(W), D.Z)

    def log_softmax(self, a: Any, mask: np.ndarray | None = None) -> np.ndarray:
        r"""$\log\mathbb S(a)_t=a_t-\log\sum_\tau e^{a_\tau}$ along the last axis (masked: $-\infty$)."""
        if self.ball:
            return _ball().model.log_softmax(a, mask, self.prec)
        if not self.hp:
            from . import model

            return model.log_softmax(np.asarray(a, dtype=np.float64), mask)
        from . import highprec as hpm

        arr = self._conv(a)
        rows = arr.reshape(-1, arr.shape[-1])
        ms = None if mask is None else np.broadcast_to(mask, arr.shape).reshape(-1, arr.shape[-1])
        with self.context():
            out = [
                hpm.log_softmax(list(r), None if ms is None else [int(t) for t in np.flatnonzero(ms[j])])
                for j, r in enumerate(rows)
            ]
        return np.array(out, dtype=object).reshape(arr.shape)

    def softmax(self, ds: Dataset | KitData, W: Any) -> np.ndarray:
        r"""$s_i=\mathbb S(X_iWz_i)$ (N,T)."""
        D = self.data(ds)
        if self.ball:
            return _ball().model.softmax(self.logits(D, W), D.mask, self.prec)
        return self.exp(self.log_softmax(self.logits(D, W), D.mask))

    def outputs(self, ds: Dataset | KitData, W: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""$(s,\gamma,u)$: softmax (N,T), scores (N,T), $u_i=\gamma_i^\top s_i$ (N,)."""
        D = self.data(ds)
        if self.ball:
            return _ball().model.outputs(D, W, self.prec)
        s = self.softmax(D, W)
        g = D.gamma if D.mask is None else np.where(D.mask, D.gamma, 0.0 if not self.hp else mpmath.mpf(0))
        return s, D.gamma, np.sum(s * g, axis=-1)

    def loss_derivative(self, u: Any, loss: str = "logistic") -> Any:
        r"""$\ell'(u)$: logistic $-1/(1+e^u)$, exponential $-e^{-u}$, correlation $-1$."""
        if self.ball:
            bm = _ball().model
            with self.context():
                return np.frompyfunc(lambda x: bm.loss_derivative(x, loss), 1, 1)(self._conv(u))
        if not self.hp:
            from . import model

            return model.loss_derivative(np.asarray(u, dtype=np.float64), loss)
        from . import highprec as hpm

        with self.context():
            return np.frompyfunc(lambda x: hpm.loss_derivative(x, loss), 1, 1)(self._conv(u))

    def loss(self, ds: Dataset | KitData, W: Any, loss: str = "logistic") -> Any:
        r"""$\mathcal L(W)=\frac1n\sum_i\ell(u_i)$."""
        raw = _ds(ds)
        if raw.kind == "ntp" and loss != "nll":
            raise ValueError("next-token data take the loss 'nll' (-log of the label's attention mass)")
        if self.ball:
            return _ball().model.loss(self.data(ds), W, loss, self.prec)
        if not self.hp:
            if raw.kind == "ntp":
                from .ntp.loss import loss as ntp_loss

                return float(ntp_loss(raw.X, raw.Z, raw.label_mask, np.asarray(W, dtype=np.float64), raw.visible))
            from . import model

            return float(model.loss(raw, np.asarray(W, dtype=np.float64), loss))
        from . import highprec as hpm

        return hpm.loss(raw, self._conv(W).tolist(), loss, dps=self.dps)

    def grad_W(self, ds: Dataset | KitData, W: Any, loss: str = "logistic") -> np.ndarray:
        r"""$\nabla\mathcal L(W)=\frac1n\sum_i\ell'(u_i)X_i^\top(\mathrm{diag}(s_i)-s_is_i^\top)\gamma_iz_i^\top$."""
        if self.ball:
            return _ball().model.grad_W(self.data(ds), W, loss, self.prec)
        if not self.hp:
            from . import model

            return model.grad_W(_ds(ds), np.asarray(W, dtype=np.float64), loss)
        from . import highprec as hpm

        return np.array(hpm.grad_W(_ds(ds), self._conv(W).tolist(), loss, dps=self.dps), dtype=object)

    def grad_KQ(self, ds: Dataset | KitData, K: Any, Q: Any, loss: str = "logistic") -> tuple[np.ndarray, np.ndarray]:
        r"""$(\nabla\mathcal L(KQ^\top)\,Q,\ \nabla\mathcal L(KQ^\top)^\top K)$."""
        if self.ball:
            return _ball().model.grad_KQ(self.data(ds), K, Q, loss, self.prec)
        if not self.hp:
            from . import model

            return model.grad_KQ(_ds(ds), np.asarray(K, dtype=np.float64), np.asarray(Q, dtype=np.float64), loss)
        from . import highprec as hpm

        gK, gQ = hpm.grad_KQ(_ds(ds), self._conv(K).tolist(), self._conv(Q).tolist(), loss, dps=self.dps)
        return np.array(gK, dtype=object), np.array(gQ, dtype=object)

    def hessian_W(self, ds: Dataset | KitData, W: Any, loss: str = "logistic") -> np.ndarray:
        r"""$\nabla^2\mathcal L(W)$ as a $d^2\times d^2$ matrix (row-major $\mathrm{vec}\,W$; ball: the analytic
        form of :mod:`attsvm.ball.model`)."""
        if self.ball:
            return _ball().model.hessian_W(self.data(ds), W, loss, self.prec)
        if not self.hp:
            import torch

            from .gd import model_torch as mt

            f = _ds(ds).flat()
            X, Y, Z, v = (torch.tensor(np.asarray(a, dtype=np.float64))[None] for a in (f.X, f.Y, f.Z, f.v))
            mask = None if f.mask is None else torch.tensor(np.asarray(f.mask))[None]
            d = np.shape(W)[0]

            def L(w):  # autograd of the loss written from the definition (torch), independent of model.grad_W
                s = torch.exp(mt.log_softmax_t(mt.logits_W(X, w.reshape(1, d, d), Z), mask))
                return mt.loss_value_t((s * mt.scores_t(X, Y, v)).sum(-1), loss).mean()

            return torch.func.hessian(L)(torch.tensor(np.asarray(W, dtype=np.float64).reshape(-1))).numpy()
        from . import highprec as hpm

        return np.array(hpm.hessian_W(_ds(ds), self._conv(W).tolist(), loss, dps=self.dps), dtype=object)

    def smoothness(self, ds: Dataset | KitData, loss: str = "logistic") -> Any:
        r"""The smoothness constant $L_W$ of THEORY §3 ($\|\nabla^2\mathcal L(W)\|_2\le L_W$ for every $W$)."""
        if self.ball:
            return _ball().model.smoothness(self.data(ds), loss, self.prec)
        from . import model

        if not self.hp:
            return float(model.smoothness_constant(_ds(ds), loss))
        from . import highprec as hpm

        raw = _ds(ds)
        M0, M1 = model.loss_constants(loss, float(np.max(np.abs(raw.scores))))
        return hpm.smoothness_constant(raw, M0, M1, dps=self.dps)

    def margins(self, ds: Dataset | KitData, W: Any, alpha: Any = None) -> np.ndarray:
        r"""$(x_{i\alpha_i}-x_{it})^\top Wz_i$ (N,T); $+\infty$ at $t=\alpha_i$ and at invisible tokens (ball: the
        exact ball ``arb.pos_inf()``)."""
        D = self.data(ds)
        al = D.selection if alpha is None else np.asarray(alpha, dtype=np.int64).reshape(-1)
        if self.ball:
            return _ball().model.margins(D, W, al, self.prec)
        a = self.logits(D, W)
        m = np.take_along_axis(a, al[:, None], 1) - a
        inf = np.inf if not self.hp else mpmath.inf
        skip = np.arange(D.T)[None, :] == al[:, None]
        if D.mask is not None:
            skip = skip | ~D.mask
        return np.where(skip, inf, m)

    # ------------------------------------------------------------------ SVMs
    def wmm(self, ds: Dataset | KitData, alpha: Any = None) -> MaxMargin:
        r"""$W^{mm}_\alpha=\arg\min\|W\|_F$ s.t. $(x_{i\alpha_i}-x_{it})^\top Wz_i\ge1$ (default $\alpha$: the data
        set's selection). Float64: the KKT-checked solver; mp: the exact rational certificate
        (:func:`attsvm.svm.certify_fro`); ball: its rationals enclosed — :class:`Undecidable` when it cannot be
        proved."""
        from . import svm

        raw = _ds(ds)
        al = None if alpha is None else np.asarray(alpha, dtype=np.int64)
        sol = svm.solve_fro(raw, al)
        if sol.status != "optimal":
            return MaxMargin("infeasible", None, set(), sol.alpha, "farkas")
        if not self.hp:
            return MaxMargin("optimal", np.asarray(sol.W), {(int(i), int(t)) for i, t in sol.support}, sol.alpha)
        cert = svm.certify_fro(raw, al, sol)
        if not cert.get("verified") or cert.get("W") is None:
            raise Undecidable(f"no exact Att-SVM certificate ({cert.get('reason') or cert.get('omitted') or 'failed'})")
        active = {(int(i), int(t)) for i, t in cert["active"]}
        return MaxMargin("optimal", self._conv(cert["W"]), active, sol.alpha, "exact")

    def wmm_nuclear(self, ds: Dataset | KitData, alpha: Any = None) -> MaxMargin:
        r"""$W^{mm\star}_\alpha=\arg\min\|W\|_\star$ s.t. the margins $\ge1$. The nuclear SVM has no rational
        solution: every precision uses the solver's $W$ (exact binary values); when confirming its relative
        duality gap must be *proved* $\le$ ``tol("nuc_gap")`` (``gap``), else :class:`Undecidable`."""
        from .svm.nuclear import solve_nuclear

        raw = _ds(ds)
        al = None if alpha is None else np.asarray(alpha, dtype=np.int64)
        sol = solve_nuclear(raw, al, certify=self.hp)
        if sol.status != "optimal":
            return MaxMargin("infeasible", None, set(), sol.alpha, "farkas")
        sup = {(int(i), int(t)) for i, t in sol.support}
        if not self.hp:
            return MaxMargin("optimal", np.asarray(sol.W), sup, sol.alpha, "solver", sol.certificate.get("rel_gap"))
        if not sol.certificate.get("verified"):
            raise Undecidable("Att-SVM* duality gap not proved")
        return MaxMargin("optimal", self._conv(sol.W), sup, sol.alpha, "duality-gap", sol.certificate["rel_gap"])

    def locally_optimal(self, ds: Dataset | KitData, alpha: Any = None) -> bool:
        r"""$\alpha$ is locally optimal: Att-SVM($\alpha$) is feasible and every support token $t\in\mathcal T_i$
        scores below $\alpha_i$ ($\gamma_{it}<\gamma_{i\alpha_i}$). Float64: the solver's ``locally_optimal``;
        confirming: the exact active set and the scores of the kit (ball: each comparison proved, else
        :class:`Undecidable`)."""
        if not self.hp:
            from . import svm

            sol = svm.solve_fro(_ds(ds), None if alpha is None else np.asarray(alpha, dtype=np.int64))
            return sol.status == "optimal" and bool(sol.locally_optimal)
        D = self.data(ds)
        mm = self.wmm(D, alpha)
        if not mm.feasible:
            return False
        al = D.selection if alpha is None else np.asarray(alpha, dtype=np.int64).reshape(-1)
        if self.ball:
            with self.context():
                for i, t in sorted(mm.support):
                    below, above = D.gamma[i, t] < D.gamma[i, al[i]], D.gamma[i, t] >= D.gamma[i, al[i]]
                    if not below and not above:
                        raise Undecidable(f"locally_optimal: the scores of token {t} and alpha in row {i} overlap")
                    if above:
                        return False
            return True
        with self.context():
            return all(D.gamma[i, t] < D.gamma[i, al[i]] for i, t in mm.support)

    # ------------------------------------------------------------------ the two-layer model (issue 30)
    def twolayer(
        self, ds: Dataset | KitData, W1: Any, W2: Any, residual: bool = False, causal: bool = False
    ) -> TwoLayer:
        r"""The two-layer forward pass (:mod:`attsvm.twolayer`): $s^{(1)}_{i,t\tau}=\mathbb S(x_{i\tau}^\top
        W_1x_{it})$ over the keys, $h_{it}=\bar h_{it}+\rho x_{it}$, $s^{(2)}_i=\mathbb S(h_{it}^\top W_2z_i)$,
        $g_{it}=Y_iv^\top h_{it}$, $u_i=\sum_ts^{(2)}_{it}g_{it}$. Float64: :func:`attsvm.twolayer.forward`; mp:
        :func:`attsvm.highprec.twolayer_outputs`; ball: :func:`attsvm.ball.twolayer.forward`."""
        if self.ball:
            fw = _ball().twolayer.forward(self.data(ds), W1, W2, residual, causal, self.prec)
            return TwoLayer(fw.s1, fw.h_bar, fw.h, fw.s2, fw.g, fw.u)
        if not self.hp:
            from . import twolayer as tl

            fw = tl.forward(_ds(ds), W1, W2, residual, causal)
            return TwoLayer(np.exp(fw.log_s1), fw.h_bar, fw.h, np.exp(fw.log_s2), fw.g, fw.u)
        from . import highprec as hpm

        o = hpm.twolayer_outputs(_ds(ds), self._conv(W1).tolist(), self._conv(W2).tolist(), residual, causal, self.dps)
        return TwoLayer(*(np.array(o[k], dtype=object) for k in ("s1", "h_bar", "h", "s2", "g", "u")))

    def twolayer_loss(
        self, ds: Dataset | KitData, W1: Any, W2: Any, loss: str = "logistic", residual: bool = False,
        causal: bool = False,
    ) -> Any:  # fmt: skip
        r"""$\mathcal L(W_1,W_2)=\frac1N\sum_i\ell(u_i)$ of the two-layer model."""
        if self.ball:
            return _ball().twolayer.loss(self.data(ds), W1, W2, loss, residual, causal, self.prec)
        if not self.hp:
            from . import twolayer as tl

            return float(tl.loss(_ds(ds), W1, W2, loss, residual, causal))
        from . import highprec as hpm

        W1m, W2m = self._conv(W1).tolist(), self._conv(W2).tolist()
        return hpm.loss_twolayer(_ds(ds), W1m, W2m, loss, residual, causal, self.dps)

    def twolayer_grads(
        self, ds: Dataset | KitData, W1: Any, W2: Any, loss: str = "logistic", residual: bool = False,
        causal: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        r"""$(\nabla_{W_1}\mathcal L,\nabla_{W_2}\mathcal L)$ of the two-layer model: $\frac1N\sum_i\ell'(u_i)
        \sum_{t,\tau}q_{i,t\tau}x_{i\tau}x_{it}^\top$ and $\frac1N\sum_i\ell'(u_i)\sum_tr_{it}h_{it}z_i^\top$
        (derivation ``twolayer-gradient``)."""
        if self.ball:
            return _ball().twolayer.gradients(self.data(ds), W1, W2, loss, residual, causal, self.prec)
        if not self.hp:
            from . import twolayer as tl

            return tl.gradients(_ds(ds), W1, W2, loss, residual, causal)
        from . import highprec as hpm

        W1m, W2m = self._conv(W1).tolist(), self._conv(W2).tolist()
        G1, G2 = hpm.grad_twolayer(_ds(ds), W1m, W2m, loss, residual, causal, self.dps)
        return np.array(G1, dtype=object), np.array(G2, dtype=object)

    def twolayer_selections(
        self, ds: Dataset | KitData, W1: Any, W2: Any, residual: bool = False, causal: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        r"""$(\alpha,\beta)$: $\alpha_{it}=\arg\max_\tau s^{(1)}_{i,t\tau}$ (N,T), $\beta_i=\arg\max_ts^{(2)}_{it}$
        (N,) (int arrays; a row without keys: 0). Ball: proved (:class:`Undecidable` on overlapping balls); float64
        and mp: the largest entry (first on ties)."""
        if self.ball:
            bt = _ball().twolayer
            return bt.selections(bt.forward(self.data(ds), W1, W2, residual, causal, self.prec))
        out = self.twolayer(ds, W1, W2, residual, causal)
        return np.argmax(out.s1, axis=-1).astype(np.int64), np.argmax(out.s2, axis=-1).astype(np.int64)

    def hard_outputs(self, ds: Dataset | KitData, alpha: Any, residual: bool = False) -> np.ndarray:
        r"""$H^\alpha_{it}=x_{i\alpha_{it}}+\rho x_{it}$ (N,T,d) of a layer-1 selection $\alpha$ (N,T): float64 by
        :func:`attsvm.twolayer.hard_outputs` (the sum rounded), mp at the kit's digits, ball exact."""
        if self.ball:
            return _ball().twolayer.hard_outputs(self.data(ds), alpha, residual, self.prec)
        if not self.hp:
            from . import twolayer as tl

            return tl.hard_outputs(_ds(ds), np.asarray(alpha, dtype=np.int64), residual)
        D = self.data(ds)  # mp: the sum of two exact data values at the kit's digits (not the float64 sum)
        with self.context():
            picked = np.take_along_axis(D.X, np.asarray(alpha, dtype=np.int64)[..., None], axis=1)
            return picked + D.X if residual else picked

    def twolayer_margins(
        self, ds: Dataset | KitData, W1: Any, W2: Any, layer: int, selection: Any = None, residual: bool = False,
        causal: bool = False,
    ) -> np.ndarray:  # fmt: skip
        r"""Margins of a layer's selection (default: the selections of :meth:`twolayer_selections`). ``layer=2``:
        $(h_{i\beta_i}-h_{it})^\top W_2z_i$ (N,T); ``layer=1``: $(x_{i\alpha_{it}}-x_{i\tau})^\top W_1x_{it}$
        (N,T,T); $+\infty$ at the selected entry, at invisible tokens and off the layer-1 keys. The margin of the
        selection is ``k.min(...)`` of it (its entries $>0$ iff the selection is the strict argmax)."""
        if layer not in (1, 2):
            raise ValueError(f"layer must be 1 or 2, got {layer!r}")
        if selection is None:
            selection = self.twolayer_selections(ds, W1, W2, residual, causal)[layer - 1]
        if self.ball:
            bt = _ball().twolayer
            D = self.data(ds)
            fw = bt.forward(D, W1, W2, residual, causal, self.prec)
            return bt.margins(fw, D, W1, W2, layer, selection, self.prec)
        from .twolayer import key_mask

        D = self.data(ds)
        inf = np.inf if not self.hp else mpmath.inf
        with self.context():
            if layer == 2:
                h = self.twolayer(D, W1, W2, residual, causal).h
                b = np.asarray(selection, dtype=np.int64).reshape(D.N)
                diff = np.take_along_axis(h, b[:, None, None], axis=1) - h  # h_{i beta} - h_{it}
                m = np.sum((diff @ self._conv(W2)) * D.Z[:, None, :], axis=-1)
                skip = np.arange(D.T)[None, :] == b[:, None]
                if D.mask is not None:
                    skip = skip | ~D.mask
                return np.where(skip, inf, m)
            a = np.asarray(selection, dtype=np.int64).reshape(D.N, D.T)
            xa = np.take_along_axis(D.X, a[..., None], axis=1)  # x_{i alpha_it} (N,T,d)
            diff = xa[:, :, None, :] - D.X[:, None, :, :]  # (N,T,T,d): x_{i alpha_it} - x_{i tau}
            w = D.X @ self._conv(W1).T  # (N,T,d): W1 x_it
            m = np.sum(diff * w[:, :, None, :], axis=-1)
            skip = np.arange(D.T)[None, None, :] == a[:, :, None]
            keys = key_mask(D.mask, D.T, bool(causal))
            if keys is not None:
                skip = skip | ~keys
            return np.where(skip, inf, m)

    # ------------------------------------------------------------------ gradient descent
    def gd(
        self,
        ds: Dataset | KitData,
        *,
        algo: str = "ngd",
        lr: float = 0.1,
        steps: int,
        loss: str = "logistic",
        W0: Any = None,
        K0: Any = None,
        Q0: Any = None,
        norm: str | None = None,
        q: float | None = None,
        schedule: str = "constant",
        adam_betas: tuple[float, float] = (0.9, 0.999),
        adam_eps: float = 0.0,
        normalize: str = "per-factor",
    ) -> Run:
        r"""``steps`` steps of ``algo`` with step sizes $\eta_k$ (``schedule``: ``"constant"`` $\eta_k=\eta$ = ``lr``,
        ``"rsqrt"`` $\eta_k=\eta(k+1)^{-1/2}$) on $W$ (from ``W0``, default 0) or, when ``K0``/``Q0`` are given, on
        $(K,Q)$ with $W=KQ^\top$; ``W0`` of shape (B,d,d) runs B starts (one batch in float64). Algorithms (THEORY
        §1, §6; $g_k$ the gradient at the iterate):

        * ``gd``: $\theta_{k+1}=\theta_k-\eta_kg_k$; ``ngd``: per factor $\theta_{k+1}=\theta_k-\eta_kg_k/\|g_k\|_F$;
        * ``nsd`` ($W$ only): $W_{k+1}=W_k-\eta_k\Delta_k$,
          $\Delta_k=\arg\max_{\|\Delta\|\le1}\langle g_k,\Delta\rangle$ in ``norm`` — ``fro`` $g/\|g\|_F$, ``linf``
          $\mathrm{sign}(g)$, ``l1`` the largest-magnitude entries (exact ties share the step), ``spec``
          $U_rV_r^\top$ over the singular values $>\rho\,\sigma_1$ ($\rho$ = ``tol("spec_rank")``), ``lq`` with ``q``;
        * ``adam`` ($W$ only): $m_k=\beta_1m_{k-1}+(1-\beta_1)g_k$, $v_k=\beta_2v_{k-1}+(1-\beta_2)g_k^2$,
          $W_{k+1}=W_k-\eta_k\hat m_k/(\sqrt{\hat v_k}+\epsilon)$ with the bias corrections $1-\beta^{k+1}$
          (``adam_betas`` $(\beta_1,\beta_2)$, ``adam_eps`` $\epsilon$, default 0: the scale-free direction);
        * ``md`` / ``nmd`` ($W$ only): $\ell_q$ mirror descent, plain / normalised by $\|g_k\|_{q^*}$ (``q``).

        Float64: :func:`attsvm.gd.run`; mp: the 50-digit replay :func:`attsvm.highprec.replay` of the same steps
        from the same (exact) start, written from these definitions; ball: the ball replay
        :func:`attsvm.ball.gd.replay` (``gd``, ``ngd``, ``nsd`` in ``fro`` / ``linf`` / ``l1``; every decision
        proved and the radii watched, else :class:`Undecidable` — so are the other algorithms). On $(K,Q)$ only
        ``gd`` and ``ngd`` are available (the others have no high-precision replay there, so a claim could not be
        confirmed). ``K0``, ``Q0`` of shape (H,d,m) run the $H$-head model ``param="heads"`` ($u_i=\sum_h\gamma_i^\top
        \mathbb S(X_iK_hQ_h^\top z_i)$; :attr:`Run.W` $=\sum_hK_hQ_h^\top$): float64, the 50-digit replay and the ball
        replay :func:`attsvm.ball.heads.replay` (``gd``, ``ngd``). ``normalize`` (``ngd`` on several factors):
        ``"per-factor"`` (per head for ``heads``) or ``"joint"``."""
        raw = _ds(ds)
        d = raw.d
        kq = K0 is not None or Q0 is not None
        if kq and (K0 is None or Q0 is None):
            raise ValueError("gd on (K, Q) needs both K0 and Q0")
        if kq and algo not in ("gd", "ngd"):
            raise ValueError(f"kit gd on (K, Q) supports algo 'gd' and 'ngd' only (no 50-digit replay of {algo!r})")
        heads = kq and np.ndim(K0) == 3
        opts: dict[str, Any] = {"norm": norm, "q": q, "schedule": schedule}
        if normalize != "per-factor":
            opts["normalize"] = normalize
        if algo == "adam":
            opts.update(adam_betas=tuple(adam_betas), adam_eps=adam_eps)
        many = not kq and W0 is not None and np.ndim(W0) == 3
        if not self.hp:
            from .gd import run as gd_run

            if kq:
                init: Any = {"K": np.asarray(K0, dtype=np.float64), "Q": np.asarray(Q0, dtype=np.float64)}
            else:
                init = np.zeros((d, d)) if W0 is None else np.asarray(W0, dtype=np.float64)
            target = Dataset.stack([raw] * len(init)) if many else raw
            extra: dict[str, Any] = {"m": int(np.shape(K0)[-1])} if kq else {}
            if heads:
                extra["heads"] = int(np.shape(K0)[0])
            res = gd_run(
                target,
                param="heads" if heads else "KQ" if kq else "W",
                algo=algo,
                lr=lr,
                steps=int(steps),
                loss=loss,
                init=init,
                **extra,
                **opts,
            )
            if many:
                return Run(np.asarray(res.W), None, None, int(np.max(res.steps)), float(lr))
            K = None if res.K is None else res.K[0]
            Q = None if res.Q is None else res.Q[0]
            return Run(np.asarray(res.W[0]), K, Q, int(np.asarray(res.steps)[0]), float(lr))
        if many:
            runs = [self.gd(raw, algo=algo, lr=lr, steps=steps, loss=loss, W0=w, **opts) for w in W0]
            return Run(np.stack([r.W for r in runs]), None, None, max(r.steps for r in runs), runs[0].lr)
        if self.ball:
            if heads:
                hr = _ball().heads.replay(
                    self.data(raw),
                    self._conv(K0),
                    self._conv(Q0),
                    algo=algo,
                    lr=lr,
                    steps=int(steps),
                    loss=loss,
                    normalize=normalize,
                    schedule=schedule,
                    prec=self.prec,
                )
                K, Q = hr.final["K"], hr.final["Q"]
                with self.context():
                    return Run(sum(K[h] @ Q[h].T for h in range(len(K))), K, Q, hr.taken, hr.lr)
            if normalize != "per-factor":
                raise Undecidable("the ball GD replay normalises per factor only")
            return self._gd_ball(raw, algo, lr, steps, loss, W0, K0, Q0, norm, q, schedule)
        from . import highprec as hpm

        with self.context():
            if kq:
                init = {"K": self._conv(K0).tolist(), "Q": self._conv(Q0).tolist()}
                rep = hpm.replay(
                    raw,
                    init,
                    param="heads" if heads else "KQ",
                    algo=algo,
                    lr=lr,
                    steps=int(steps),
                    loss=loss,
                    dps=self.dps,
                    **opts,
                )
                K, Q = (np.array(rep.final[k], dtype=object) for k in ("K", "Q"))
                if heads:
                    return Run(sum(K[h] @ Q[h].T for h in range(len(K))), K, Q, rep.taken, rep.lr)
                return Run(K @ Q.T, K, Q, rep.taken, rep.lr)
            start = np.zeros((d, d)) if W0 is None else W0
            rep = hpm.replay(
                raw,
                self._conv(start).tolist(),
                param="W",
                algo=algo,
                lr=lr,
                steps=int(steps),
                loss=loss,
                dps=self.dps,
                **opts,
            )
            return Run(np.array(rep.final["W"], dtype=object), None, None, rep.taken, rep.lr)

    def twolayer_gd(
        self,
        ds: Dataset | KitData,
        *,
        algo: str = "ngd",
        lr: float = 0.1,
        steps: int,
        loss: str = "logistic",
        W1_0: Any = None,
        W2_0: Any = None,
        freeze: str | None = None,
        residual: bool = False,
        causal: bool = False,
        normalize: str = "per-factor",
        schedule: str = "constant",
    ) -> TwoLayerRun:
        r"""``steps`` steps of ``gd`` / ``ngd`` on the two-layer model from $(W_{1,0},W_{2,0})$ (default 0):
        ``gd`` $W_{k+1}=W_k-\eta_kG_k$ per factor; ``ngd`` per factor $W_{k+1}=W_k-\eta_kG_k/\|G_k\|_F$
        (``normalize="per-factor"``) or both by $\sqrt{\|G_1\|_F^2+\|G_2\|_F^2}$ (``"joint"``); ``freeze`` a
        factor that takes no step. Float64: :func:`attsvm.gd.run` (``param="twolayer"``); mp: the 50-digit replay
        :func:`attsvm.highprec.replay`; ball: :func:`attsvm.ball.twolayer.replay` (radii watched, else
        :class:`Undecidable`)."""
        raw = _ds(ds)
        d = raw.d
        W1s = np.zeros((d, d)) if W1_0 is None else W1_0
        W2s = np.zeros((d, d)) if W2_0 is None else W2_0
        opts: dict[str, Any] = {"freeze": freeze, "residual": residual, "causal": causal, "schedule": schedule}
        if algo == "ngd":
            opts["normalize"] = normalize
        if not self.hp:
            from .gd import run as gd_run

            init = {"W1": np.asarray(W1s, dtype=np.float64), "W2": np.asarray(W2s, dtype=np.float64)}
            res = gd_run(raw, param="twolayer", algo=algo, lr=lr, steps=int(steps), loss=loss, init=init, **opts)
            return TwoLayerRun(np.asarray(res.W1[0]), np.asarray(res.W2[0]), int(np.asarray(res.steps)[0]), float(lr))
        if self.ball:
            br = _ball().twolayer.replay(
                self.data(raw), self._conv(W1s), self._conv(W2s), algo=algo, lr=lr, steps=int(steps), loss=loss,
                prec=self.prec, **opts,
            )  # fmt: skip
            return TwoLayerRun(br.W1, br.W2, br.taken, br.lr)
        from . import highprec as hpm

        with self.context():
            init = {"W1": self._conv(W1s).tolist(), "W2": self._conv(W2s).tolist()}
            rep = hpm.replay(
                raw, init, param="twolayer", algo=algo, lr=lr, steps=int(steps), loss=loss, dps=self.dps, **opts
            )
            W1, W2 = (np.array(rep.final[k], dtype=object) for k in ("W1", "W2"))
            return TwoLayerRun(W1, W2, rep.taken, rep.lr)

    def _gd_ball(self, raw, algo, lr, steps, loss, W0, K0, Q0, norm, q, schedule) -> Run:
        """The ball replay behind :meth:`gd` (one start)."""
        from .highprec.gd import ALGOS

        bg = _ball().gd
        if algo not in ALGOS:
            raise ValueError(f"unknown algo {algo!r}; expected one of {ALGOS}")
        if q is not None or algo not in bg.ALGOS:
            raise Undecidable(f"the ball GD replay covers {bg.ALGOS} (nsd in {bg.NSD_NORMS}), not {algo!r}")
        kq = K0 is not None
        if any(_ball().numbers.has_jets(a) for a in (W0, K0, Q0, lr)):
            raise TypeError("the ball GD replay does not differentiate: give it plain balls or numbers, not jets")
        init = (
            {"K": self._conv(K0), "Q": self._conv(Q0)}
            if kq
            else {"W": self._conv(np.zeros((raw.d,) * 2) if W0 is None else W0)}
        )
        rep = bg.replay(
            self.data(raw),
            init,
            algo=algo,
            lr=lr,
            steps=int(steps),
            loss=loss,
            prec=self.prec,
            schedule=schedule,
            norm=norm,
        )
        with self.context():
            if kq:
                K, Q = rep.final["K"], rep.final["Q"]
                return Run(K @ Q.T, K, Q, rep.taken, rep.lr)
            return Run(rep.final["W"], None, None, rep.taken, rep.lr)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _to_mpf(x: Any) -> mpmath.mpf:
    if isinstance(x, mpmath.mpf):
        return +x
    if is_ball(x):
        from .ball.numbers import mid_mpf

        if x.rad() != 0:
            raise TypeError(f"an mpmath kit cannot take the ball {x} (not an exact number)")
        return +mid_mpf(x)
    if isinstance(x, (str, Fraction)):
        f = Fraction(x)
        return mpmath.mpf(f.numerator) / f.denominator
    if isinstance(x, (bool, np.bool_)):
        return mpmath.mpf(int(x))
    if isinstance(x, (int, np.integer)):
        return mpmath.mpf(int(x))
    return mpmath.mpf(float(x))  # float64 values are exact binary numbers: the conversion is exact


def _from_mpmatrix(M: Any) -> np.ndarray:
    return np.array([[M[a, b] for b in range(M.cols)] for a in range(M.rows)], dtype=object)


FLOAT64 = Kit("float64")


def for_precision(precision: str = "float64", dps: int | None = None, strict: bool = False) -> Kit:
    """The kit of ``precision``: ``"float64"``, ``"mp"`` at ``dps`` digits (default 50) or ``"ball"`` at ``dps``
    bits (default :data:`BALL_PREC`); ``strict`` for a confirming kit that rejects computed floats."""
    if precision == "float64":
        return FLOAT64
    return Kit(precision, dps, strict=strict)


def is_high_precision(x: Any) -> bool:
    """Whether ``x`` (a margin) was computed by the mpmath kit (an ``mpmath.mpf``)."""
    return isinstance(x, mpmath.mpf)


def is_ball(x: Any) -> bool:
    """Whether ``x`` (a margin) was computed by the ball kit (a python-flint ``arb``, an
    :class:`attsvm.ball.jet.Jet`: a ball with its gradient over a box, or a type registered with
    :func:`attsvm.ball.numbers.register_ball_type`, such as the intervals of :mod:`attsvm.prove.interval`)."""
    t = type(x)
    if (t.__name__ == "arb" and t.__module__.startswith("flint")) or (
        t.__name__ == "Jet" and t.__module__ == "attsvm.ball.jet"
    ):
        return True
    numbers = sys.modules.get("attsvm.ball.numbers")  # a type can be registered only once it is imported
    return numbers is not None and isinstance(x, numbers.BALL_TYPES)


__all__ = [
    "BALL_PREC",
    "CONFIRM_DPS",
    "FLOAT64",
    "PRECISIONS",
    "STRICT_DIGITS",
    "Bypass",
    "Kit",
    "KitData",
    "MaxMargin",
    "Run",
    "Undecidable",
    "for_precision",
    "is_ball",
    "is_high_precision",
]
