r"""Initial points of gradient descent: zero, seeded random, given, and "in a cone around a target".

All draws use numpy generators (``numpy.random.default_rng(seed)``), so an initial point does not
depend on the device, and the first data set of a batch gets the same point as a single run with the
same seed (draws are laid out data set by data set).

Scales (``init_scale``, default 0.1, the scale of the paper's E1 runs $K_0=0.1\,\mathcal N$):

============  ==========================================================================
param         ``"zero"`` / ``"random"``
============  ==========================================================================
``W``         $W_0=0$ / $W_0=\sigma\,\mathcal N(0,I)$ entrywise
``KQ``        $Q_0=0,\ K_0=\sigma\,\mathcal N$ (E1: $W_0=K_0Q_0^\top=0$; $K=Q=0$ is a saddle) /
              both $K_0,Q_0=\sigma\,\mathcal N$
``p``         $p_0=0$ / $\sigma\,\mathcal N$
``vp``        $v_0=0,\ p_0=0$ / both $\sigma\,\mathcal N$
``diag``      $q_0=0,\ k_0=\sigma\,\mathcal N$ / both $\sigma\,\mathcal N$ ($W=\mathrm{diag}(k\odot q)$)
``heads``     $Q_{h,0}=0,\ K_{h,0}=\sigma\,\mathcal N$ for every head / both $\sigma\,\mathcal N$ ($K,Q$ of shape
              (H,d,m), ``heads`` $H$)
``twolayer``  $W_{1,0}=W_{2,0}=0$ (layer 1 uniform averaging) / both $\sigma\,\mathcal N$ (drawn $W_1$ then $W_2$)
============  ==========================================================================

``"linear"``: every factor drawn as PyTorch's default ``nn.Linear`` weight (the authors' code, which keeps
that initialisation), entrywise uniform on $[-1/\sqrt d,1/\sqrt d]$ (fan-in $d$: ``kaiming_uniform_`` with
$a=\sqrt5$), for $W$, both $K$ and $Q$, $p$ and $v,p$; ``init_scale`` does not apply (the law has its own scale).
In their ``SelfAttn`` the logits are $z^\top W_q^\top W_kx_t$, so $K=W_k^\top$, $Q=W_q^\top$ and $W=W_k^\top W_q$.

Given points: a numpy array ($W_0$ (d,d) or (B,d,d) for ``W``, factorised as $K=U\Sigma^{1/2}$,
$Q=V\Sigma^{1/2}$ for ``KQ``; $p_0$ (d,) or (B,d) for ``p``) or a dict ``{"K","Q"}`` / ``{"p"}`` /
``{"v","p"}``; ``twolayer`` takes a dict ``{"W1","W2"}`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..norms import frobenius_norm
from ..registries import Check, declare


#: each parameterisation with its independent check (:mod:`attsvm.registries`): its gradient at 50 digits, written
#: from the definition (every algorithm on it is replayed by :func:`attsvm.highprec.replay`,
#: :data:`attsvm.gd.settings.ALGO_CHECKS`)
@dataclass(frozen=True)
class Parameterisation:
    r"""What is trained: ``factors`` name -> shape as a function of $(d,m)$ (the order of the random draws);
    ``attention``: it defines an attention matrix $W$ (``W``, $KQ^\top$, $\mathrm{diag}(k\odot q)$) rather than a
    prompt $p$; ``factored``: $W$ is formed from several factors (recorded as ``W`` beside them); ``random_at_zero``:
    the factor drawn at ``init="zero"`` (the others start at 0; module docstring); ``check``: its independent
    50-digit gradient (:mod:`attsvm.registries`); ``torch_gradient``: the engine's chain rule from the token
    weights to its factors, ``"attsvm.gd.steps:gradients_<name>"`` (torch, resolved by the engine)."""

    name: str
    factors: dict[str, Callable[[int, int], tuple[int, ...]]]
    attention: bool
    check: Check
    random_at_zero: str | None = None
    #: its factors carry a leading head axis $H$ (``heads``: $K,Q$ of shape (H,d,m), the number of heads a setting,
    #: :func:`heads_of`)
    headed: bool = False
    #: two attention layers, one matrix each (``twolayer``: $W_1$ layer-1 self-attention, $W_2$ layer-2 attention,
    #: :mod:`attsvm.twolayer`); $W$ reported and compared is the top layer's $W_2$
    layered: bool = False

    @property
    def torch_gradient(self) -> str:
        """``"module:function"`` of the engine's chain rule for this parameterisation."""
        return f"attsvm.gd.steps:gradients_{self.name}"

    @property
    def factored(self) -> bool:
        """$W$ is a product of factors (``KQ``, ``diag``)."""
        return self.attention and len(self.factors) > 1 and not self.layered

    def shapes(self, d: int, m: int, heads: int = 1) -> dict[str, tuple[int, ...]]:
        """The factors' shapes (without the batch axis) for tokens of dimension ``d``, width ``m`` and, for a
        :attr:`headed` parameterisation, ``heads`` heads (a leading axis)."""
        lead = (int(heads),) if self.headed else ()
        return {k: (*lead, *f(d, m)) for k, f in self.factors.items()}

    def target_shape(self, d: int) -> tuple[int, ...]:
        """The shape of what the run is compared with: $W$ (d,d) or $p$ (d,)."""
        return (d, d) if self.attention else (d,)


#: every parameterisation, with its shapes and its independent check
PARAMETERISATIONS = {
    p.name: p
    for p in (
        Parameterisation(
            "W",
            {"W": lambda d, m: (d, d)},
            True,
            Check("attsvm.highprec.model:grad_W", "the 50-digit gradient of L(W)"),
        ),
        Parameterisation(
            "KQ",
            {"K": lambda d, m: (d, m), "Q": lambda d, m: (d, m)},
            True,
            Check("attsvm.highprec.model:grad_KQ", "the 50-digit (grad L(W) Q, grad L(W)^T K) at W = K Q^T"),
            random_at_zero="K",
        ),
        Parameterisation(
            "p",
            {"p": lambda d, m: (d,)},
            False,
            Check("attsvm.highprec.model:grad_p", "the 50-digit gradient of prompt attention in p (head v fixed)"),
        ),
        Parameterisation(
            "vp",
            {"v": lambda d, m: (d,), "p": lambda d, m: (d,)},
            False,
            Check("attsvm.highprec.model:grad_vp", "the 50-digit gradients of prompt attention in (v, p)"),
        ),
        Parameterisation(
            "diag",
            {"k": lambda d, m: (d,), "q": lambda d, m: (d,)},
            True,
            Check("attsvm.highprec.model:grad_diag", "the 50-digit (diag(G) q, diag(G) k) at W = diag(k q)"),
            random_at_zero="k",
        ),
        Parameterisation(
            "heads",
            {"K": lambda d, m: (d, m), "Q": lambda d, m: (d, m)},
            True,
            Check(
                "attsvm.highprec.model:grad_heads",
                "the 50-digit (G_h Q_h, G_h^T K_h) per head of the H-head model sum_h v^T X^T S(X K_h Q_h^T z)",
            ),
            random_at_zero="K",
            headed=True,
        ),
        Parameterisation(
            "twolayer",
            {"W1": lambda d, m: (d, d), "W2": lambda d, m: (d, d)},
            True,
            Check(
                "attsvm.highprec.model:grad_twolayer",
                "the 50-digit (grad_W1 L, grad_W2 L) of two-layer attention, written from the definition",
            ),
            layered=True,
        ),
    )
}
PARAM_CHECKS = {name: p.check for name, p in PARAMETERISATIONS.items()}
PARAMS = declare("gd.PARAMS", PARAM_CHECKS)
#: the parameterisations of one attention head and one layer (every algorithm runs on these; ``heads`` and
#: ``twolayer`` only ``gd`` and ``ngd``)
SINGLE_HEAD_PARAMS = tuple(p for p in PARAMS if not (PARAMETERISATIONS[p].headed or PARAMETERISATIONS[p].layered))
#: the parameterisations that take the settings ``freeze``, ``residual``, ``causal`` (:class:`attsvm.gd.Settings`)
LAYERED_PARAMS = tuple(p for p in PARAMS if PARAMETERISATIONS[p].layered)
#: the factor a ``twolayer`` run may freeze (``freeze``; it takes no step)
FREEZABLE = ("W1", "W2")
#: the named initial laws (module docstring)
INITS = ("zero", "random", "linear")
DEFAULT_SCALE = 0.1
#: the number of heads of ``param="heads"`` when none is given
DEFAULT_HEADS = 2


def heads_of(heads: Any, param: str) -> int:
    r"""The validated number of heads $H$ of a run on ``param`` (:class:`~attsvm.errors.InputError` otherwise): a
    positive integer for ``"heads"`` (``None``: :data:`DEFAULT_HEADS`); another parameterisation has one head and
    takes no ``heads`` (``None`` or 1)."""
    headed = PARAMETERISATIONS[param].headed if param in PARAMETERISATIONS else False
    if heads is None:
        return DEFAULT_HEADS if headed else 1
    if isinstance(heads, bool) or not isinstance(heads, int | np.integer) or int(heads) < 1:
        raise InputError(f"heads must be a positive integer, got {heads!r}")
    if not headed and int(heads) != 1:
        headed_params = [p.name for p in PARAMETERISATIONS.values() if p.headed]
        raise InputError(f"heads applies to param {' and '.join(map(repr, headed_params))} only (got param {param!r})")
    return int(heads)


def _batched(name: str, a: Any, shape: tuple[int, ...], B: int) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"initial {name!r} is not numeric") from exc
    if not np.all(np.isfinite(arr)):
        raise InputError(f"initial {name!r} contains NaN or inf")
    if arr.shape == shape:
        return np.broadcast_to(arr, (B, *shape)).copy()
    if arr.shape == (B, *shape):
        return arr.copy()
    raise InputError(f"initial {name!r} must have shape {shape} or {(B, *shape)}, got {arr.shape}")


def initial_params(
    param: str,
    init: Any,
    B: int,
    d: int,
    m: int,
    seed: int = 0,
    init_scale: float | None = None,
    heads: int | None = None,
) -> dict[str, np.ndarray]:
    """The initial parameters as a dict of (B, ...) float64 arrays (keys W | K,Q | p | v,p | k,q; ``heads``: K,Q
    (B,H,d,m), H = :func:`heads_of`)."""
    sc = DEFAULT_SCALE if init_scale is None else float(init_scale)
    if not (np.isfinite(sc) and sc >= 0):
        raise InputError(f"init_scale must be a finite non-negative number, got {init_scale!r}")
    P = PARAMETERISATIONS[param]
    shapes = P.shapes(d, m, heads_of(heads, param))
    if isinstance(init, str):
        if init not in INITS:
            raise InputError(f"init must be one of {', '.join(INITS)}, an array or a dict, got {init!r}")
        rng = np.random.default_rng(seed)
        sizes = [int(np.prod(s)) for s in shapes.values()]
        if init == "linear":  # nn.Linear's default law: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = d
            if init_scale is not None:
                raise InputError("init_scale does not apply to init 'linear' (its law fixes the scale 1/sqrt(d))")
            sc = 1.0
            draw = rng.uniform(-1.0, 1.0, (B, sum(sizes))) / np.sqrt(d)
        else:
            draw = rng.standard_normal((B, sum(sizes)))  # data set by data set
        out: dict[str, np.ndarray] = {}
        off = 0
        for (k, s), size in zip(shapes.items(), sizes):
            with np.errstate(over="ignore"):
                out[k] = sc * draw[:, off : off + size].reshape(B, *s)
            off += size
        if not all(np.all(np.isfinite(a)) for a in out.values()):
            raise InputError(f"init_scale={sc:.3g}: the random initial point overflows float64")
        if init == "zero":
            for k in out:
                if k != P.random_at_zero:
                    out[k] = np.zeros_like(out[k])
        return out
    if isinstance(init, dict):
        if set(init) != set(shapes):
            raise InputError(f"initial point for param {param!r} needs keys {sorted(shapes)}, got {sorted(init)}")
        return {k: _batched(k, init[k], s, B) for k, s in shapes.items()}
    if param == "W":
        return {"W": _batched("W", init, (d, d), B)}
    if param == "p":
        return {"p": _batched("p", init, (d,), B)}
    if param == "diag":  # a diagonal W_0 = diag(w): k = sign(w) sqrt|w|, q = sqrt|w|
        W0 = _batched("W", init, (d, d), B)
        w = np.diagonal(W0, axis1=-2, axis2=-1)
        if np.any(W0 - np.einsum("bi,ij->bij", w, np.eye(d)) != 0):
            raise InputError("initial W for param 'diag' must be a diagonal matrix")
        return {"k": np.sign(w) * np.sqrt(np.abs(w)), "q": np.sqrt(np.abs(w))}
    if param == "KQ":
        W0 = _batched("W", init, (d, d), B)
        # exact power-of-two prescaling (even exponent): the SVD never squares into overflow / underflow
        e = 2 * ((np.frexp(np.max(np.abs(W0), axis=(-2, -1)))[1] + 1) // 2)
        e = np.where(np.abs(e) > 256, e, 0)
        U, S, Vt = np.linalg.svd(np.ldexp(W0, -e[:, None, None]))
        r = min(m, d)
        if np.any(S[:, r:] > 1e-12 * np.maximum(S[:, :1], 1e-300)):
            raise InputError(f"initial W has rank above the width m={m}")
        K = np.zeros((B, d, m))
        Q = np.zeros((B, d, m))
        half = (e // 2)[:, None, None]
        K[..., :r] = np.ldexp(U[..., :r] * np.sqrt(S[:, None, :r]), half)
        Q[..., :r] = np.ldexp(np.swapaxes(Vt, -1, -2)[..., :r] * np.sqrt(S[:, None, :r]), half)
        return {"K": K, "Q": Q}
    raise InputError(f"initial point for param {param!r} must be a dict with keys {sorted(shapes)}")


def cone_init(target: np.ndarray, mu: float, R: float, seed: int = 0, depth: float = 0.5) -> np.ndarray:
    r"""A point $W_0\in\mathcal C_{\mu,R}(W^\circ)$ on the sphere $\|W_0\|_F=R$ with
    $\mathrm{corr}(W_0,W^\circ)=1-\text{depth}\cdot\mu\ \ (\ge1-\mu)$, in a seeded random direction:

    .. math:: W_0=R\big(c\,\hat W^\circ+\sqrt{1-c^2}\,\hat E\big),\quad \hat E\perp\hat W^\circ,\ \|\hat E\|_F=1.

    ``target`` (d,d) or (B,d,d) (then one point per data set); ``depth`` in [0,1]."""
    T = np.asarray(target, dtype=np.float64)
    if T.ndim not in (2, 3) or T.shape[-1] != T.shape[-2]:
        raise InputError(f"cone target must have shape (d,d) or (B,d,d), got {T.shape}")
    if not (0.0 <= mu <= 2.0) or not (0.0 <= depth <= 1.0) or not R > 0:
        raise InputError("cone_init needs 0 <= mu <= 2, 0 <= depth <= 1 and R > 0")
    single = T.ndim == 2
    Tb = T[None] if single else T
    nrm = frobenius_norm(Tb, axis=(-2, -1))[:, None, None]
    if np.any(nrm == 0):
        raise InputError("cone target is the zero matrix")
    That = Tb / nrm
    E = np.random.default_rng((seed, 0xC0DE)).standard_normal(Tb.shape)  # salted: not the target's own stream
    E = E - np.sum(E * That, axis=(-2, -1), keepdims=True) * That
    E = E / frobenius_norm(E, axis=(-2, -1))[:, None, None]
    c = 1.0 - depth * mu
    W0 = R * (c * That + np.sqrt(max(0.0, 1.0 - c * c)) * E)
    return W0[0] if single else W0
