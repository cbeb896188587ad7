r"""The up-front representability bounds of a GD run (THEORY §5, numerical traps), in numpy (no torch): a run
whose scores, logits or parameters could leave the float range is refused before it starts.

**Representability bounds** (:func:`check_ranges`). With $F$ the largest float of the dtype and the limit
$F/4$ (room for a difference of two logits and for rounding):

* scores $|\gamma_{it}|=|Y_iv^\top x_{it}|\le\|x_{it}\|\,\|v\|$;
* logits $|x_{it}^\top Wz_i|\le\|x_{it}\|\,\|W\|_F\,\|z_i\|$ (and the intermediate $\|Wz_i\|\le\|W\|_F\|z_i\|$),
  with $\|W\|_F\le R$: for ``ngd`` every step has Frobenius norm ``lr`` per factor, so
  $\|W_k\|_F\le\|W_0\|_F+\eta k$ ($(K,Q)$: $\|KQ^\top\|_F\le\|K\|_F\|Q\|_F$; $p$, $v$ alike) and the whole run
  is checked before it starts; likewise ``nsd`` (steps of Frobenius norm $\le c\,\eta_k$, $c$ the norm's
  :func:`~attsvm.gd.options.fro_bound`, e.g. $\sqrt N$ for ``linf``), ``adam`` (entries $\le A\,\eta_k$,
  :func:`adam_entry_bound`), ``signum`` / ``muon`` and ``nmd`` (the dual moves by $\eta_k$ in $\ell_{q^*}$), with
  $\sum_k\eta_k$ of the step schedule (each algorithm's declared
  :attr:`~attsvm.gd.algorithm.Algorithm.step_bound`, :func:`check_ranges`); ``gd`` / ``md`` have no a-priori bound,
  so only the
  initial point is checked (an overflow later is the stop reason ``non-finite``);
* nonlinear heads: ReLU $|u|,|\hat\gamma|\le\sqrt{d'}\,\|V\|_F\|x\|$; next-token squared $|u|\le1$,
  $|\hat\gamma|\le2\max|x|\max|e_k|\,|x|$; quadratic $\|m\|^2\le\max\|x\|^2$,
  $|\hat\gamma|\le\|x\|(\|v\|+2\lambda\|x\|)$.

A bound above the limit is an :class:`~attsvm.errors.InputError` naming the fields and the bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import InputError
from ..norms import frobenius_norm
from .init import PARAMETERISATIONS

__all__ = ["adam_entry_bound", "check_ranges", "representable_limit"]


def dtype_name(dtype) -> str:
    """``"float64"`` / ``"float32"`` for a torch or numpy dtype or its name."""
    return str(dtype).replace("torch.", "")


def representable_limit(dtype) -> float:
    """The bound every logit, score and parameter norm must stay below: a quarter of the largest float of ``dtype``
    (a torch or numpy dtype, or its name)."""
    return float(np.finfo(dtype_name(dtype)).max) / 4.0


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


def _fmt_log(lg: float) -> str:
    """``exp(lg)`` printed like ``%.3g`` also beyond the float range (``inf`` when ``lg`` is)."""
    if not math.isfinite(lg):
        return "inf"
    e10 = lg / math.log(10.0)
    ex = math.floor(e10)
    mant = 10.0 ** (e10 - ex)
    if mant >= 9.995:
        mant, ex = 1.0, ex + 1
    return f"{mant:.3g}e{ex:+03d}"


def adam_entry_bound(betas: tuple[float, float], steps: int) -> float:
    r"""$A=\max_{1\le t\le\text{steps}}A_t$ with $|\hat m_t|/\sqrt{\hat v_t}\le A_t$ entrywise for Adam
    ($0\le\beta_1<\sqrt{\beta_2}<1$, any gradients): by Cauchy–Schwarz, with $\rho=\beta_1^2/\beta_2<1$,

    .. math:: A_t=\frac{1-\beta_1}{1-\beta_1^t}\sqrt{\frac{1-\beta_2^t}{1-\beta_2}}
              \sqrt{\frac{1-\rho^t}{1-\rho}}\qquad(A_1=1),

    evaluated exactly for $t\le T_0=\min(\text{steps},10^5)$ and bounded beyond by
    $(1-\beta_1)/((1-\beta_1^{T_0})\sqrt{(1-\beta_2)(1-\rho)})$. So every Adam step (any $\epsilon\ge0$) has
    entries at most $A\,\eta_k$, and Frobenius norm at most $\sqrt N A\,\eta_k$ ($A=6.76$ for the default
    betas within 2000 steps, 7.27 in the limit)."""
    b1, b2 = float(betas[0]), float(betas[1])
    rho = b1 * b1 / b2
    T0 = max(1, min(int(steps), 100_000))
    t = np.arange(1, T0 + 1, dtype=np.float64)
    with np.errstate(divide="ignore"):
        l1, l2, lr_ = np.log(b1), np.log(b2), np.log(rho)
    A = (
        (1.0 - b1)
        / -np.expm1(t * l1)
        * np.sqrt(-np.expm1(t * l2) / (1.0 - b2))
        * np.sqrt(-np.expm1(t * lr_) / (1.0 - rho))
    )
    best = float(np.max(A))
    if steps > T0:
        best = max(best, (1.0 - b1) / (-math.expm1(T0 * float(l1)) * math.sqrt((1.0 - b2) * (1.0 - rho))))
    return best


def _lq_norms(a: np.ndarray, q: float) -> np.ndarray:
    """Entrywise l_q norm of each row of ``a`` (B, N), scale-safe (max-scaled)."""
    m = np.max(np.abs(a), axis=-1) if a.size else np.zeros(a.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs(a) / np.where(m > 0, m, 1.0)[:, None]
    return m * np.sum(r**q, axis=-1) ** (1.0 / q)


def check_ranges(
    *,
    X: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    param: str,
    lr: np.ndarray,
    steps: int,
    init: dict[str, np.ndarray],
    head: tuple | None,
    dtype,
    batched: bool,
    schedule: str = "constant",
    bound: Callable[[tuple[int, ...]], float | None] | None = None,
    mirror_q: float | None = None,
    path: bool = False,
) -> None:
    r"""Refuse (:class:`~attsvm.errors.InputError`) a run whose scores, logits or parameters could leave the
    range of ``dtype`` (module docstring); flat-view arrays with a leading batch axis:
    ``X`` (B,N,T,d), ``Z`` (B,N,d), ``v`` (B,d), ``lr`` (B,), ``init`` the initial factors (B,...).
    ``bound(shape)``: the algorithm's step bound $c$ for a factor of ``shape``, or ``None`` (no a-priori bound);
    ``mirror_q``: the $q$ of a mirror descent, whose dual moves by $c\,\eta_k$ in $\ell_{q^*}$; ``path``: ``init``
    holds the norm bounds of a regularisation path's largest ball (:func:`attsvm.gd.regularization_path`).

    The a-priori parameter bound is $R=\|\theta_0\|_F+c\sum_{k<\text{steps}}\eta_k$ per factor for the algorithms
    with bounded steps, $\|\theta_{k+1}-\theta_k\|_F\le c\,\eta_k$, where
    $\sum_k\eta_k=\eta\cdot$``steps`` (``schedule="constant"``) or $\le\eta_0(2\sqrt{\text{steps}}-1)$
    (``"rsqrt"``); for ``nmd`` the dual moves by $\eta_k$ in $\ell_{q^*}$, so $\|D_k\|_{q^*}\le
    \|\theta_0\|_q^{q-1}+\sum_k\eta_k$ and $\|\theta_k\|_F\le N^{\max(0,1/2-1/q)}\|D_k\|_{q^*}^{1/(q-1)}$
    ($\|\theta\|_q=\|D\|_{q^*}^{1/(q-1)}$, Hölder); ``gd`` / ``md``: $R=\|\theta_0\|_F$."""
    lim = representable_limit(dtype)
    llim = math.log(lim)
    fmax = float(np.finfo(dtype_name(dtype)).max)
    B = X.shape[0]
    where = (lambda b: f" (data set {b})") if batched else (lambda b: "")  # noqa: E731
    for name, a in (("X", X), ("Z", Z), ("v", v)):
        big = np.max(np.abs(a.reshape(B, -1)), axis=-1) if a.size else np.zeros(B)
        if np.any(big > fmax):
            b = int(np.argmax(big > fmax))
            what = f"entries up to {big[b]:.3g} exceed the {dtype_name(dtype)} range"
            raise InputError(f"field {name!r}{where(b)}: {what}")
    xn = np.max(frobenius_norm(X, axis=-1).reshape(B, -1), axis=-1)  # max_it |x_it|
    zn = np.max(frobenius_norm(Z, axis=-1).reshape(B, -1), axis=-1)  # max_i |z_i|
    vn = frobenius_norm(v, axis=-1)
    n0 = {k: frobenius_norm(a.reshape(B, -1), axis=-1) for k, a in init.items()}
    # log R per factor: log(||theta_0|| + c sum_k lr_k), without forming lr*steps (it may overflow)
    if schedule == "rsqrt":
        lsum, total = (math.log(2.0 * math.sqrt(steps) - 1.0) if steps > 0 else -math.inf), "lr*(2*sqrt(steps)-1)"
    else:
        lsum, total = (math.log(steps) if steps > 0 else -math.inf), "lr*steps"
    lR, rules = {}, {}
    refuse_dual = None
    for k, a in init.items():
        shape = tuple(a.shape[1:])
        c = None if bound is None else bound(shape)
        if mirror_q is not None and c is not None:
            q = mirror_q
            lq0 = (q - 1.0) * _log(_lq_norms(a.reshape(B, -1), q))  # log ||D_0||_{q*} = (q-1) log ||theta_0||_q
            lD = np.logaddexp(lq0, _log(lr) + lsum)
            cq = float(np.prod(shape)) ** max(0.0, 0.5 - 1.0 / q)
            lR[k] = math.log(cq) + lD / (q - 1.0)
            rules[k] = f"{cq:.4g}*(||theta_0||_q^(q-1) + {total})^(1/(q-1))"
            # the dual itself: ||D||_F <= N^max(0, 1/2 - 1/q*) ||D||_{q*}
            cd = float(np.prod(shape)) ** max(0.0, 0.5 - (q - 1.0) / q)
            refuse_dual = (k, math.log(cd) + lD, f"{cd:.4g}*(||theta_0||_q^(q-1) + {total})")
            continue
        lgrow = _log(lr) + lsum + math.log(c) if c is not None else np.full(B, -np.inf)
        lR[k] = np.logaddexp(_log(n0[k]), lgrow)
        if path:
            rules[k] = "R"
        elif c is None:
            rules[k] = "||theta_0||"
        else:
            rules[k] = f"||theta_0|| + {total}" if c == 1.0 else f"||theta_0|| + {c:.4g}*{total}"
    rule = next(iter(rules.values()))
    bounded = not path and bound is not None and any(bound(tuple(a.shape[1:])) is not None for a in init.values())
    knob = "lr" if bounded else ("radii" if path else "init")
    fix = "lower lr or steps" if bounded else ("lower the radii" if path else "rescale the initial point")

    def refuse(logb: np.ndarray, msg: str) -> None:
        bad = np.asarray(logb) > llim  # inf counts, -inf (a zero factor) and nan do not
        if np.any(bad):
            b = int(np.argmax(bad))
            val = _fmt_log(float(logb[b]))
            raise InputError(msg.format(w=where(b), val=val, lim=f"{lim:.3g}", dt=dtype_name(dtype)))

    refuse(
        _log(xn) + _log(vn),
        "field 'X'{w}: the scores Y v^T x cannot be represented in {dt}: max|x_it|*|v| = {val} > {lim}; rescale X or v",
    )
    # (K, Q): the factor gradients G Q, G^T K (max|G| < 1) are sums of d terms up to max|Q|, max|K|
    wide = math.log(X.shape[-1]) if param in ("KQ", "heads") else 0.0
    for k, lr_k in lR.items():
        refuse(
            lr_k + wide,
            f"{knob}{{w}}: the parameter {k!r} cannot be represented in {{dt}}: its norm can reach {rules[k]} = "
            f"{{val}} > {{lim}}; {fix}",
        )
    if refuse_dual is not None:
        k, ld, drule = refuse_dual
        refuse(
            ld,
            f"{knob}{{w}}: the mirror-descent dual of {k!r} cannot be represented in {{dt}}: its norm can reach "
            f"{drule} = {{val}} > {{lim}}; {fix}",
        )
    if PARAMETERISATIONS[param].layered:
        # twolayer (attsvm.twolayer): |h| <= 2 max|x| (residual), layer-1 logits |x|^2 R1, layer-2 logits
        # |h| R2 |z|, scores |h||v|, and the layer-1 effective scores |chat^T x| <= (|v| + 4|x||v| R2 |z|) |x|
        l2 = math.log(2.0)
        lg2 = _log(xn) + _log(zn) + lR["W2"]
        refuse(
            2.0 * _log(xn) + lR["W1"],
            "field 'X'{w}: the layer-1 logits x^T W1 x cannot be represented in {dt}: "
            f"max|x_it|^2*({rules['W1']}) = {{val}} > {{lim}}; {fix}, or rescale X",
        )
        refuse(
            l2 + lg2,
            "fields 'X', 'Z'{w}: the layer-2 logits h^T W2 z cannot be represented in {dt}: "
            f"2*max|x_it|*max|z_i|*({rules['W2']}) = {{val}} > {{lim}}; {fix}, or rescale X or Z",
        )
        refuse(
            _log(xn) + _log(vn) + np.logaddexp(0.0, 2.0 * l2 + lg2) + _log(xn) + l2,
            "fields 'X', 'Z', 'v'{w}: the layer-1 effective scores chat^T x cannot be represented in {dt}: "
            f"2*max|x|^2*|v|*(1 + 4*max|x|*max|z|*({rules['W2']})) = {{val}} > {{lim}}; {fix}, or rescale the data",
        )
    elif PARAMETERISATIONS[param].attention:
        # heads: |sum_h K_h Q_h^T| <= sum_h |K_h||Q_h| <= |K||Q| (Cauchy-Schwarz over the heads)
        lw = lR["W"] if param == "W" else lR["K"] + lR["Q"] if param in ("KQ", "heads") else lR["k"] + lR["q"]
        refuse(
            _log(zn) + lw,
            "fields 'X', 'Z'{w}: the logits x^T W z cannot be represented in {dt}: "
            f"max|z_i|*({rule}) = {{val}} > {{lim}}; {fix}, or rescale Z",
        )
        refuse(
            _log(xn) + _log(zn) + lw,
            "fields 'X', 'Z'{w}: the logits x^T W z cannot be represented in {dt}: "
            f"max|x_it|*max|z_i|*({rule}) = {{val}} > {{lim}}; {fix}, or rescale X or Z",
        )
    else:
        refuse(
            _log(xn) + lR["p"],
            "field 'X'{w}: the logits x^T p cannot be represented in {dt}: "
            f"max|x_it|*({rule}) = {{val}} > {{lim}}; {fix}, or rescale X",
        )
    if param == "vp":
        refuse(
            _log(xn) + lR["v"],
            "field 'X'{w}: the scores Y v^T x cannot be represented in {dt}: "
            f"max|x_it|*({rule.replace('theta', 'v')}) = {{val}} > {{lim}}; {fix}, or rescale X",
        )
    if head is not None:
        kind, par = head
        if kind == "relu":
            V = np.asarray(par.detach().cpu().numpy() if hasattr(par, "detach") else par, dtype=np.float64)
            Vn = frobenius_norm(V.reshape(V.shape[0], -1), axis=-1) * math.sqrt(V.shape[-1])
            refuse(
                _log(xn) + _log(Vn),
                "head V{w}: the ReLU head cannot be represented in {dt}: sqrt(d')*||V||*max|x_it| = {val} > {lim}",
            )
        elif kind == "ntp-square":  # |h| <= 1, |ghat_t| <= 2 max|x_it| max_k |e_k|: the vocabulary E bounds it
            E = par[0].detach().cpu().numpy()
            En = np.max(frobenius_norm(E, axis=-1).reshape(B, -1), axis=-1)
            refuse(
                math.log(2.0) + 2 * _log(xn) + _log(En),
                "field 'E'{w}: the squared next-token head cannot be represented in {dt}: "
                "2 max|x_it| max|e_k| ||x|| = {val} > {lim}",
            )
        else:
            lam = abs(float(par))
            refuse(
                2 * _log(xn),
                "field 'X'{w}: the quadratic head cannot be represented in {dt}: max|x_it|^2 = {val} > {lim}",
            )
            refuse(
                _log(xn) + np.logaddexp(_log(vn), math.log(2 * lam) + _log(xn) if lam > 0 else -np.inf),
                "field 'X'{w}: the quadratic head cannot be represented in {dt}: "
                "max|x_it|*(|v| + 2 lambda max|x_it|) = {val} > {lim}",
            )
