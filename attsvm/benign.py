r"""Benign overfitting in single-head attention (Magen, Shang, Xu, Frei, Hu, Vardi, arXiv 2410.07746): the data
law, the max-margin $(v,p)$ interpolator (exact), and its test error.

**Model.** $f(X;v,p)=v^\top X^\top\mathbb S(Xp)$, $X\in\mathbb R^{T\times d}$ (prompt attention, THEORY §4).

**Data** (as read from the abstract and the third-party data generator cited in the notes; the order of the tokens
is immaterial: $f$ is invariant under permuting the rows of $X$). A clean label $y=\pm1$ (fair coin); the signal
token is $\mu_+$ when $y=+1$ and $\mu_-$ when $y=-1$, $\mu_\pm$ orthogonal with $\|\mu_\pm\|=\rho$; each of the
other $T-1$ tokens is noise $\xi\sim\mathcal N(0,I_d-\mu_+\mu_+^\top/\rho^2-\mu_-\mu_-^\top/\rho^2)$ (orthogonal to
the signals); the observed label is $Y=y$ with probability $1-\eta$ and $-y$ with probability $\eta$ (a flip).
$\mathrm{SNR}=\rho/\sqrt d$; the threshold quantity is $\kappa=\mathrm{SNR}\cdot\sqrt n=\rho\sqrt{n/d}$. The law,
GD from zero or from an isotropic draw, and every program below are equivariant under rotations, so we fix
$\mu_+=\rho e_0$, $\mu_-=\rho e_1$ (no loss of generality): the signal is token 0 of every input and the noise
tokens vanish on coordinates 0 and 1. A data set of this law is an ordinary prompt :class:`~attsvm.data.Dataset`
(saved and loaded by :func:`attsvm.data.save` / :func:`attsvm.data.load`), and its clean labels, flips and $\rho$
are read back from the tokens (:func:`clean_labels`, :func:`flips`, :func:`signal_norm`). Its head is the Bayes
direction $v=(e_0-e_1)/\sqrt2$ and its selection the *benign* one: the signal for a clean input, noise token 1 for a
flipped one (given explicitly, so noise ties never matter).

**The max-margin interpolator** (:func:`max_margin`; the program reconstructed in the notes: the paper's
minimum-norm / maximum-margin interpolator in the limit of an unbounded prompt). For data $(X_i,Y_i)$,

.. math:: V^\star=\inf_{v,p}\Big\{\|v\|^2:\ Y_if(X_i;v,p)\ge1\ \forall i\Big\}
   =\min_{\alpha\in[T]^n}\|v^{mm}_\alpha\|^2,\qquad
   v^{mm}_\alpha=\arg\min\|v\|\ \text{s.t.}\ Y_iv^\top x_{i\alpha_i}\ge1,

whenever the minimising selection $\alpha^\star$ is separable by a prompt ($p^{mm}_{\alpha^\star}$ feasible).
*Proof.* $Y_if=\sum_ts_{it}Y_iv^\top x_{it}\le\max_tY_iv^\top x_{it}$, so a feasible $(v,p)$ makes $v$ feasible for
the head SVM of $\alpha_i=\arg\max_tY_iv^\top x_{it}$: $\|v\|^2\ge V^\star$. Conversely $p=Rp^{mm}_{\alpha^\star}$
saturates the softmax on $\alpha^\star$ as $R\to\infty$, and $(1+\epsilon)v^{mm}_{\alpha^\star}$ is then feasible. ∎
The interpolator returned is $(v^{mm}_{\alpha^\star},\,R\,p^{mm}_{\alpha^\star})$, $R\to\infty$ (the direction of
$p$ is the prompt SVM's, the implicit bias of GD on $p$; the value alone does not fix it — reconstructed).

*The minimum over the $2^n$ selections is a minimum over 9* ($T=2$). With $v=(a,b,w)$ ($w$ on the noise
coordinates) the constraint of input $i$ of clean class $c_i$ selecting its signal is $Y_i\rho v_{c_i}\ge1$, and
selecting its noise is $Y_iw^\top\xi_i\ge1$. So $\|v^{mm}_\alpha\|^2=k/\rho^2+q(N)$ where $k\le2$ counts the
classes whose signal is selected by some input, $N$ is the set of inputs selecting noise and
$q(N)=\min\{\|w\|^2:Y_iw^\top\xi_i\ge1,\ i\in N\}$ (a head SVM on the noise; $\infty$ when infeasible). A class
whose signal is selected by inputs of both labels is infeasible; if class $c$'s signal is used with sign $\sigma_c$
then moving every input of class $c$ and label $\sigma_c$ onto its signal keeps $k$ and shrinks $N$, and $q$ is
monotone. Hence $V^\star=\min_{\sigma_0,\sigma_1\in\{\text{none},+1,-1\}}$ of the head SVM of the selection
"signal iff $\sigma_{c_i}=Y_i$" — nine head SVMs, each solved and KKT-certified by
:func:`attsvm.svm.prompt.solve_head`; on request (``exact=True``) the winner's $v$ is certified exactly (rational
KKT) and every option's value proved in rationals (:func:`exact_value`: the certificate's exact optimum), the
winner's the strict minimum; the prompt SVM $p^{mm}_{\alpha^\star}$ by :func:`attsvm.svm.prompt.solve_prompt`.
The reduction is checked against enumeration of all $2^n$ selections in ``property_tests/test_benign.py``.

**Test error** (:func:`test_error`): the flips are independent of $X$, so the error against the noisy label is
$\eta+(1-2\eta)\,e$ with $e=\frac12\sum_{y=\pm1}\big(P(y\,f<0\mid y)+\frac12P(f=0\mid y)\big)$ the clean error
(an output 0 is a fair coin: a head without signal component outputs exactly 0 whenever the signal is selected).
With $A_t=p^\top\xi_t$,
$B_t=v^\top\xi_t$ ($t=1..T-1$, i.i.d. bivariate normal pairs: $\mathrm{Var}\,A=\|p_\perp\|^2$,
$\mathrm{Var}\,B=\|v_\perp\|^2$, $\mathrm{Cov}=p_\perp^\top v_\perp$, $\perp$: coordinates $\ge2$) and $m_y$, $g_y$
the signal's logit $p^\top\mu_y$ and value $v^\top\mu_y$: for the saturated prompt ($\|p\|\to\infty$ along $p$,
``hard=True``) the selected token is the largest logit and

.. math:: P(yf<0\mid y)+\tfrac12P(f=0\mid y)=c(yg_y)\,F_A(m_y)^{T-1}
   +(T-1)\int_{m_y}^\infty f_A(a)F_A(a)^{T-2}\,P(yB<0\mid A=a)\,da,\qquad c(x)=\mathbb 1[x<0]+\tfrac12\mathbb 1[x=0]

(one-dimensional quadrature); for a finite prompt the softmax average is estimated by Monte Carlo over the
$2(T-1)$ Gaussians (``samples`` draws, seeded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .data import Dataset
from .errors import InputError

__all__ = [
    "Interpolator",
    "build",
    "clean_labels",
    "evaluate",
    "exact_value",
    "fit_and_error",
    "flips",
    "head",
    "interpolation_margins",
    "kappa_of",
    "max_margin",
    "noisy_error",
    "options",
    "rho_of",
    "sample",
    "signal_norm",
    "test_error",
]


def rho_of(kappa: float, n: int, d: int) -> float:
    r"""The signal norm $\rho=\kappa\sqrt{d/n}$ of the scaled SNR $\kappa=\mathrm{SNR}\sqrt n=\rho\sqrt{n/d}$."""
    return float(kappa) * float(np.sqrt(d / n))


def kappa_of(rho: float, n: int, d: int) -> float:
    r"""$\kappa=\mathrm{SNR}\cdot\sqrt n=\rho\sqrt{n/d}$."""
    return float(rho) * float(np.sqrt(n / d))


def head(d: int) -> np.ndarray:
    r"""The data sets' head $v=(e_0-e_1)/\sqrt2$ (the Bayes direction; not a parameter of the model)."""
    v = np.zeros(d)
    v[0], v[1] = 1.0, -1.0
    return v / np.sqrt(2.0)


def _check_params(n: int, d: int, T: int, rho: float, eta: float) -> None:
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise InputError(f"benign data: n must be an int >= 1, got {n!r}")
    if not (isinstance(T, (int, np.integer)) and T >= 2):
        raise InputError(f"benign data: T must be an int >= 2 (one signal token and T-1 noise tokens), got {T!r}")
    if not (isinstance(d, (int, np.integer)) and d >= 3):
        raise InputError(f"benign data: d must be an int >= 3 (two signal directions and noise), got {d!r}")
    if not (np.isfinite(rho) and rho > 0):
        raise InputError(f"benign data: the signal norm rho must be a positive number, got {rho!r}")
    if not (np.isfinite(eta) and 0 <= eta < 0.5):
        raise InputError(f"benign data: the flip rate eta must lie in [0, 0.5), got {eta!r}")


def build(clean: np.ndarray, flip: np.ndarray, noise: np.ndarray, rho: float) -> Dataset:
    r"""The data set of clean labels ``clean`` (..., n) in $\{\pm1\}$, flips ``flip`` (..., n) bool, standard
    Gaussian noise ``noise`` (..., n, T-1, d-2) (the noise tokens' coordinates $2..d-1$) and signal norm ``rho``:
    token 0 is $\rho e_0$ or $\rho e_1$, tokens $1..T-1$ are $(0,0,\text{noise})$, $Y=$ clean, negated where
    flipped (module docstring)."""
    clean = np.asarray(clean)
    flip = np.asarray(flip, dtype=bool)
    noise = np.asarray(noise, dtype=np.float64)
    if noise.ndim < 3 or clean.shape != noise.shape[:-2] or flip.shape != clean.shape:
        raise InputError(f"benign data: clean {clean.shape}, flip {flip.shape} and noise {noise.shape} disagree")
    if not np.all(np.abs(clean) == 1):
        raise InputError("benign data: clean labels must be +1 or -1")
    *lead, n, Tm, dm = noise.shape
    T, d = Tm + 1, dm + 2
    _check_params(n, d, T, float(rho), 0.0)
    X = np.zeros((*lead, n, T, d))
    X[..., 0, 0] = np.where(clean > 0, rho, 0.0)
    X[..., 0, 1] = np.where(clean > 0, 0.0, rho)
    X[..., 1:, 2:] = noise
    Y = np.where(flip, -clean, clean).astype(np.float64)
    Z = np.zeros((*lead, n, d))
    Z[..., 0] = 1.0  # one shared query (prompt attention): unused by the prompt programs and by param vp
    v = np.broadcast_to(head(d), (*lead, d)).copy()
    return Dataset(X, Y, Z, v, alpha=flip.astype(np.int64))


def sample(n: int, d: int, rho: float, eta: float, T: int = 2, seed: int = 0, B: int | None = None) -> Dataset:
    r"""$n$ inputs of the law (module docstring), seeded (``B``: a batch of $B$ independent data sets)."""
    _check_params(n, d, T, float(rho), float(eta))
    rng = np.random.default_rng(seed)
    lead = () if B is None else (int(B),)
    clean = np.where(rng.random((*lead, n)) < 0.5, 1.0, -1.0)
    flip = rng.random((*lead, n)) < eta
    noise = rng.standard_normal((*lead, n, T - 1, d - 2))
    return build(clean, flip, noise, float(rho))


def _single(ds: Dataset) -> None:
    if ds.batched:
        raise InputError("benign: expected a single data set, got a batch")
    X = ds.X
    s = X[:, 0, :]
    rho = np.linalg.norm(s, axis=-1)
    ok = (
        ds.T >= 2
        and ds.d >= 3
        and np.all(X[:, 1:, :2] == 0)
        and np.all(s[:, 2:] == 0)
        and np.all((s[:, 0] == 0) != (s[:, 1] == 0))
        and np.all(s[:, :2] >= 0)
        and np.all(rho == rho[0])
    )
    if not ok:
        raise InputError("benign: the data set is not of the benign-overfitting law (signal token 0 = rho e_0 or "
                         "rho e_1, noise tokens zero on coordinates 0 and 1)")  # fmt: skip


def clean_labels(ds: Dataset) -> np.ndarray:
    r"""The clean labels $y_i$ (+1 where the signal is $\rho e_0$)."""
    _single(ds)
    return np.where(ds.X[:, 0, 0] > 0, 1.0, -1.0)


def flips(ds: Dataset) -> np.ndarray:
    """Bool (n,): the observed label differs from the clean one."""
    return ds.Y != clean_labels(ds)


def signal_norm(ds: Dataset) -> float:
    r"""$\rho=\|x_{i0}\|$."""
    _single(ds)
    return float(np.linalg.norm(ds.X[0, 0]))


# ---------------------------------------------------------------------------------------------- the interpolator
#: the sign each class's signal serves, per option (None: the class's signal is selected by no input)
SIGNS = (None, 1.0, -1.0)


def options(ds: Dataset) -> list[tuple[tuple[float | None, float | None], np.ndarray]]:
    r"""The (at most nine) distinct candidate selections ((\sigma_+, \sigma_-), alpha) of the reduction (module
    docstring): input $i$ of clean class $c_i$ selects its signal (token 0) iff $\sigma_{c_i}=Y_i$, else noise
    token 1 (an option whose selection repeats an earlier one is left out)."""
    y = clean_labels(ds)
    out, seen = [], set()
    for sp in SIGNS:
        for sm in SIGNS:
            sig = np.where(y > 0, np.nan if sp is None else sp, np.nan if sm is None else sm)
            alpha = np.where(sig == ds.Y, 0, 1).astype(np.int64)
            if alpha.tobytes() not in seen:  # an option no input of a class can use repeats an earlier one
                seen.add(alpha.tobytes())
                out.append(((sp, sm), alpha))
    return out


@dataclass
class Interpolator:
    r"""The max-margin interpolator of one data set: ``v`` $=v^{mm}_{\alpha^\star}$, ``p`` $=p^{mm}_{\alpha^\star}$
    (its direction; the prompt is $Rp$, $R\to\infty$), ``alpha`` $\alpha^\star$, ``value`` $V^\star=\|v\|^2$,
    ``signs`` the option $(\sigma_+,\sigma_-)$, ``values`` all nine option values (inf: infeasible), ``gap`` the
    second-best value minus the best relative to the best (a tie when below ``tol("kkt")``), ``certificate``:
    ``head_kkt`` (the float KKT of every option verified), ``prompt`` (``"kkt-float"`` / ``"infeasible"``) and,
    with ``exact``, ``exact`` (the rational certificate of $v$, :func:`attsvm.svm.prompt.certify_head`) and
    ``exact_minimum`` (every option's value in rationals, :func:`exact_value`: the winner's strictly the least)."""

    v: np.ndarray
    p: np.ndarray | None
    alpha: np.ndarray
    value: float
    signs: tuple[float | None, float | None]
    values: dict[str, float]
    gap: float
    certificate: dict[str, Any] = field(default_factory=dict)


def _label(signs: tuple[float | None, float | None]) -> str:
    return "/".join("none" if s is None else f"{s:+.0f}" for s in signs)


def max_margin(ds: Dataset, exact: bool = False) -> Interpolator:
    r"""$(v^{mm}_{\alpha^\star},p^{mm}_{\alpha^\star})$ and $V^\star$ (module docstring) of a $T=2$ data set of the
    law; every head SVM's float KKT is checked, the winner's exactly with ``exact``."""
    from .svm.prompt import solve_head, solve_prompt
    from .tolerances import tol

    _single(ds)
    if ds.T != 2:
        raise InputError(f"benign max_margin: the exact reduction is proved for T = 2 tokens, got T = {ds.T}")
    vals: dict[str, float] = {}
    sols = []
    all_ok = True
    for signs, alpha in options(ds):
        sol = solve_head(ds.with_alpha(alpha))
        if sol.status == "optimal":
            all_ok &= bool(sol.certificate.get("verified"))
            vals[_label(signs)] = float(sol.objective)
            sols.append((float(sol.objective), signs, alpha, sol))
        else:
            all_ok &= bool(sol.certificate.get("verified"))
            vals[_label(signs)] = float("inf")
    if not sols:
        raise InputError("benign max_margin: every head SVM is infeasible (no interpolator)")
    sols.sort(key=lambda s: s[0])
    best, signs, alpha, sol = sols[0]
    second = sols[1][0] if len(sols) > 1 else float("inf")
    v = np.asarray(sol.extra["v"], dtype=np.float64)
    pr = solve_prompt(ds.with_alpha(alpha))
    cert: dict[str, Any] = {"head_kkt": all_ok, "prompt": pr.certificate.get("kind")}
    if pr.status == "optimal":
        cert["prompt_verified"] = bool(pr.certificate.get("verified"))
    p = None if pr.status != "optimal" else np.asarray(pr.extra["p"], dtype=np.float64)
    if exact:
        cert["exact"], cert["exact_minimum"] = _exact_options(ds, alpha, vals)
    gap = (second - best) / best if best > 0 else float("inf")
    cert["tie"] = bool(gap <= tol("kkt"))
    return Interpolator(v, p, alpha, best, signs, vals, gap, cert)


def exact_value(cert: dict[str, Any]) -> Fraction | None:
    r"""The exact optimum $\|v^{mm}_\alpha\|^2$ proved by a head-SVM certificate
    (:func:`attsvm.svm.prompt.certify_head`: its ``value_str``, the data's floats taken exactly), or None when the
    certificate does not prove it."""
    vs = cert.get("value_str") if cert.get("verified") and cert.get("kind") == "exact-rational" else None
    return None if vs is None else Fraction(vs)


def _exact_options(ds: Dataset, winner: np.ndarray, vals: dict[str, float]) -> tuple[dict[str, Any], bool]:
    r"""The winner's exact certificate (:func:`attsvm.svm.prompt.certify_head`) and whether its exact value is
    strictly below the exact value of every other feasible option of the reduction (an option whose float solve is
    infeasible has a KKT-checked Farkas certificate: value inf). Each option is certified once."""
    from .svm.prompt import certify_head

    won: dict[str, Any] = {}
    best, others, proved = None, [], True
    for signs, alpha in options(ds):
        if not np.isfinite(vals[_label(signs)]):
            continue
        cert = certify_head(ds, alpha)
        v = exact_value(cert)
        proved &= v is not None
        if np.array_equal(alpha, winner):
            won, best = cert, v
        else:
            others.append(v)
    return won, proved and best is not None and all(best < v for v in others)


# ------------------------------------------------------------------------------------------------- test error
def _moments(v: np.ndarray, p: np.ndarray) -> tuple[float, float, float]:
    pn, vn = p[2:], v[2:]
    return float(pn @ pn), float(vn @ vn), float(pn @ vn)


def _hard_error(v: np.ndarray, p: np.ndarray, rho: float, T: int, y: float) -> float:
    from scipy import integrate
    from scipy.stats import norm

    c = 0 if y > 0 else 1
    m, g = rho * p[c], rho * v[c]
    saa, sbb, sab = _moments(v, p)
    wrong_signal = 1.0 if y * g < 0 else (0.5 if g == 0 else 0.0)
    if saa == 0.0:  # A = 0: the signal wins iff m > 0 (else the first noise token)
        return wrong_signal if m > 0 else 0.5
    sa = np.sqrt(saa)
    cond_var = max(sbb - sab * sab / saa, 0.0)

    def p_wrong(a: float) -> float:  # P(y B <= 0 | A = a)
        mu = y * sab / saa * a
        if cond_var == 0.0:
            return 1.0 if mu < 0 else (0.5 if mu == 0 else 0.0)
        return float(norm.cdf(-mu / np.sqrt(cond_var)))

    def integrand(a: float) -> float:
        return norm.pdf(a / sa) / sa * norm.cdf(a / sa) ** (T - 2) * p_wrong(a)

    tail, _ = integrate.quad(integrand, m, np.inf, epsabs=1e-12, epsrel=1e-10, limit=200)
    return wrong_signal * norm.cdf(m / sa) ** (T - 1) + (T - 1) * tail


def _soft_error(v, p, rho, T, y, samples, seed) -> float:
    c = 0 if y > 0 else 1
    m, g = rho * p[c], rho * v[c]
    saa, sbb, sab = _moments(v, p)
    cov = np.array([[saa, sab], [sab, sbb]])
    rng = np.random.default_rng(seed)
    # a (samples, T-1) draw of the pairs (A_t, B_t) through the 2x2 factor (eigen: cov may be singular)
    w, U = np.linalg.eigh(cov)
    L = U * np.sqrt(np.clip(w, 0.0, None))
    G = rng.standard_normal((samples, T - 1, 2)) @ L.T
    logits = np.concatenate([np.full((samples, 1), m), G[..., 0]], axis=1)
    vals = np.concatenate([np.full((samples, 1), g), G[..., 1]], axis=1)
    logits -= logits.max(axis=1, keepdims=True)
    s = np.exp(logits)
    s /= s.sum(axis=1, keepdims=True)
    yf = y * np.sum(s * vals, axis=1)
    return float(np.mean(yf < 0) + 0.5 * np.mean(yf == 0))


def test_error(
    v: np.ndarray, p: np.ndarray, rho: float, T: int = 2, hard: bool = True, samples: int = 200_000, seed: int = 0
) -> float:
    r"""The clean test error $e$ of $(v,p)$ on the law with signal norm $\rho$ and $T$ tokens (module docstring;
    ``hard``: the saturated prompt $Rp$, $R\to\infty$, by quadrature; else the softmax at $p$ by Monte Carlo)."""
    v = np.asarray(v, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    if v.ndim != 1 or v.shape != p.shape or v.shape[0] < 3:
        raise InputError(f"test_error: v and p must be (d,) vectors with d >= 3, got {v.shape} and {p.shape}")
    if not (np.all(np.isfinite(v)) and np.all(np.isfinite(p))):
        raise InputError("test_error: v and p must be finite")
    _check_params(1, v.shape[0], T, float(rho), 0.0)
    f = (lambda y: _hard_error(v, p, rho, T, y)) if hard else (lambda y: _soft_error(v, p, rho, T, y, samples, seed))
    return 0.5 * (f(1.0) + f(-1.0))


def noisy_error(clean_error: float, eta: float) -> float:
    r"""The error against the observed (flipped) label: $\eta+(1-2\eta)e$."""
    return float(eta + (1.0 - 2.0 * eta) * clean_error)


# --------------------------------------------------------------------------------------------------- summaries
def interpolation_margins(ds: Dataset, mm: Interpolator) -> tuple[float, float]:
    r"""$(\min_iY_iv^\top x_{i\alpha^\star_i}-1,\ \min_{i,t\ne\alpha^\star_i}p^\top(x_{i\alpha^\star_i}-x_{it})-1)$:
    both $\ge0$ (to the solver's accuracy) when the limit $(v,Rp)$, $R\to\infty$, interpolates with margin 1 and
    its softmax saturates on $\alpha^\star$ ($-1$ for the second when the prompt SVM is infeasible)."""
    a = mm.alpha
    rows = ds.X[np.arange(ds.n), a]
    fit = float(np.min(ds.Y * (rows @ mm.v))) - 1.0
    if mm.p is None:
        return fit, -1.0
    gaps = (rows[:, None, :] - ds.X) @ mm.p  # (n, T): 0 at the selected token
    gaps[np.arange(ds.n), a] = np.inf
    return fit, float(np.min(gaps)) - 1.0


def evaluate(ds: Dataset, eta: float, exact: bool = False) -> dict[str, Any]:
    r"""The max-margin interpolator of ``ds`` (:func:`max_margin`) with its clean and noisy-label test errors
    (saturated prompt, quadrature), its option, value and certificates, and :func:`interpolation_margins`
    (JSON-ready)."""
    mm = max_margin(ds, exact=exact)
    fit, prompt = interpolation_margins(ds, mm)
    e = test_error(mm.v, mm.p, signal_norm(ds), T=ds.T) if mm.p is not None else float("nan")
    cert = mm.certificate
    return {
        "clean_error": float(e),
        "noisy_error": noisy_error(e, eta),
        "signs": _label(mm.signs),
        "value": mm.value,
        "gap": mm.gap,
        "fit_margin": fit,
        "prompt_margin": prompt,
        "certified": bool(cert["head_kkt"] and cert.get("prompt_verified", False)),
        "exact": bool(cert["exact"].get("verified") and cert["exact_minimum"]) if exact else None,
        "tie": cert["tie"],
    }


def fit_and_error(
    ds: Dataset, v: np.ndarray, p: np.ndarray, eta: float, samples: int = 20_000, seed: int = 0
) -> tuple[float, float]:
    r"""For a finite prompt (e.g. a GD iterate): $\min_iY_if(X_i;v,p)$ (:func:`attsvm.model.prompt_outputs`) and
    the noisy-label test error of the softmax at $p$ (Monte Carlo, :func:`test_error` with ``hard=False``)."""
    from .model import prompt_outputs

    u = prompt_outputs(ds, np.asarray(p, dtype=np.float64), np.asarray(v, dtype=np.float64))[2]
    e = test_error(v, p, signal_norm(ds), T=ds.T, hard=False, samples=samples, seed=seed)
    return float(np.min(u)), noisy_error(e, eta)
