r"""The JAX peer of ``attsvm.gd.run`` (normalised GD, ``algo="ngd"``, logistic loss, linear head) that a
performance-minded user would write: float64, ``jax.jit`` of ``jax.vmap`` over the B data sets, ``lax.fori_loop``
over the steps. Written from the equations (THEORY §1, §5; docs/gd.md), not by calling attsvm.

**Log-domain step** (:func:`logdomain_direction`). Per data set, with $a_{it}=x_{it}^\top Wz_i$,
$e_{it}=e^{a_{it}-\max_\tau a_{i\tau}}$, $\log Z_i=\log\sum_te_{it}$, $\log s_{it}=a_{it}-\max a_i-\log Z_i$,
$u_i=\sum_ts_{it}\gamma_{it}$ ($\gamma_{it}=Y_iv^\top x_{it}$), $\log|\ell'(u_i)|=-\mathrm{softplus}(u_i)$, the
top token $t_1$ of row $i$, $\delta_{it}=\gamma_{it}-\gamma_{it_1}$,

.. math::
    S_{it}=\log|\ell'_i|+\log s_{it_1}+\log s_{it}\ (\delta_{it}\ne0,\ \text{else }-\infty),\quad M=\max_{i,t}S_{it},

.. math::
    \tilde\omega_{it}=-\tfrac1N\Big(e^{S_{it}-M}e^{\log Z_i}\delta_{it}
    -e_{it}\sum_\tau e^{S_{i\tau}-M}\delta_{i\tau}\Big),

.. math::
    \nabla\mathcal L(W)=e^{M}\sum_{i,t}\tilde\omega_{it}x_{it}z_i^\top,

so the direction $\hat G=\sum_{i,t}\tilde\omega_{it}x_{it}z_i^\top$ is exact however far the softmax has underflowed.
The step: $W\leftarrow W-\eta\hat G/\|\hat G\|_F$; for $(K,Q)$, $W=KQ^\top$, $g_K=\hat GQ$, $g_Q=\hat G^\top K$,
each factor normalised by its own norm; a factor whose direction is exactly zero takes no step.

**Textbook step** (:func:`textbook_direction`): ``jax.grad`` of $\frac1N\sum_i\mathrm{softplus}(-u_i)$ with
$s=\mathrm{softmax}(a)$ — it underflows with the softmax (the gradient becomes inexact, then exactly zero).

This module imports JAX (an optional extra: ``pip install -c constraints.txt '.[bench]'``); attsvm never does.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


def softplus(x: jax.Array) -> jax.Array:
    r"""$\log(1+e^x)=\max(x,0)+\log(1+e^{-|x|})$ (no overflow)."""
    m = jnp.maximum(x, 0.0)
    return m + jnp.log1p(jnp.exp(x - 2.0 * m))


def logdomain_direction(W: jax.Array, X: jax.Array, Z: jax.Array, gam: jax.Array) -> jax.Array:
    r"""$\hat G=e^{-M}\nabla\mathcal L(W)$ of one data set (module docstring): X (N,T,d), Z (N,d), gam (N,T)."""
    N = X.shape[0]
    a = jnp.einsum("ntd,nd->nt", X, Z @ W.T)
    amax = a.max(-1, keepdims=True)
    top = jnp.argmax(a, -1)[:, None]
    sh = a - amax
    e = jnp.exp(sh)
    lz = jnp.log(e.sum(-1, keepdims=True))
    logs = sh - lz
    u = (e * jnp.exp(-lz) * gam).sum(-1)
    lc = -softplus(u)  # log|l'(u)| of the logistic loss
    dA = gam - jnp.take_along_axis(gam, top, -1)
    S = jnp.where(dA == 0, -jnp.inf, logs) + (lc - lz[:, 0])[:, None]
    M = S.max()
    eS = jnp.exp(S - jnp.maximum(M, jnp.finfo(S.dtype).min))
    rho = (eS * dA).sum(-1, keepdims=True)
    w = (eS * jnp.exp(lz) * dA - e * rho) * (-1.0 / N)
    return jnp.einsum("ntd,nt->nd", X, w).T @ Z


def textbook_direction(W: jax.Array, X: jax.Array, Z: jax.Array, gam: jax.Array) -> jax.Array:
    r"""``jax.grad`` of the textbook loss $\frac1N\sum_i\mathrm{softplus}(-u_i)$, $u_i=\gamma_i^\top
    \mathrm{softmax}(X_iWz_i)$ (Y and v enter through $\gamma$: $u_i=Y_iv^\top X_i^\top s_i$)."""

    def loss(W):
        s = jax.nn.softmax(jnp.einsum("ntd,nd->nt", X, Z @ W.T), axis=-1)
        return jax.nn.softplus(-(s * gam).sum(-1)).mean()

    return jax.grad(loss)(W)


def unit(g: jax.Array, lr: float) -> jax.Array:
    r"""$\eta\,g/\|g\|_F$, and exactly 0 when $g=0$ (no $0/0$)."""
    n = jnp.sqrt((g * g).sum())
    return jnp.where(n > 0, lr / jnp.where(n > 0, n, 1.0), 0.0) * g


def step_fn(param: str, direction: Callable, lr: float) -> Callable:
    """One normalised step of one data set: ``(theta, X, Z, gam) -> theta`` (theta ``(W,)`` or ``(K, Q)``)."""
    if param == "W":

        def step(th, X, Z, gam):
            (W,) = th
            return (W - unit(direction(W, X, Z, gam), lr),)
    else:

        def step(th, X, Z, gam):
            K, Q = th
            G = direction(K @ Q.T, X, Z, gam)
            return (K - unit(G @ Q, lr), Q - unit(G.T @ K, lr))

    return step


def make_runner(param: str, lr: float, textbook: bool = False) -> Callable:
    """``run(theta, X, Z, gam, steps) -> (theta, zero)``: ``steps`` normalised steps of every data set (jit of
    vmap of fori_loop); ``zero`` (B,) bool: the last step's direction was exactly zero (every factor)."""
    step = step_fn(param, textbook_direction if textbook else logdomain_direction, lr)

    def one(th, X, Z, gam, steps):
        th = lax.fori_loop(0, steps, lambda k, t: step(t, X, Z, gam), th)
        nxt = step(th, X, Z, gam)
        zero = jnp.all(jnp.stack([jnp.all(a == b) for a, b in zip(nxt, th)]))
        return th, zero

    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, None)))


def sharded(args: tuple, n: int) -> tuple:
    """``args`` (:func:`device_args`) split along the data sets over the first ``n`` JAX devices (``jit`` then runs
    each device's share of the batch on its own: on CPU, one core each with
    ``XLA_FLAGS=--xla_force_host_platform_device_count=n`` set before JAX starts)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    spec = NamedSharding(Mesh(np.array(jax.devices()[:n]), ("b",)), PartitionSpec("b"))
    return jax.tree_util.tree_map(lambda a: jax.device_put(a, spec), args)


def device_args(th: dict, X: np.ndarray, Z: np.ndarray, gam: np.ndarray, param: str):
    """The runner's arguments on the JAX device: ``(theta tuple, X, Z, gam)``."""
    keys = ("W",) if param == "W" else ("K", "Q")
    return tuple(jnp.asarray(th[k]) for k in keys), jnp.asarray(X), jnp.asarray(Z), jnp.asarray(gam)
