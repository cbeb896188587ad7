r"""``grad-closed-form`` (THEORY §3, derived).

.. math::
    \nabla\mathcal L(W)=\frac1n\sum_i\ell'(\gamma_i^\top s_i)\,X_i^\top(\mathrm{diag}(s_i)-s_is_i^\top)\gamma_i
    \,z_i^\top,
    \qquad \nabla_K=\nabla\mathcal L(W)Q,\quad \nabla_Q=\nabla\mathcal L(W)^\top K\ \ (W=KQ^\top).

The float64 closed form (:func:`attsvm.model.grad_W`, :func:`attsvm.model.grad_KQ`) is compared with three
independent computations: torch autograd of the loss written from its definition, central differences of
the numpy loss, and (for small $n,T,d$) the exact sympy derivative evaluated at 30 digits. Margin: the
smallest normalised slack $1-\mathrm{err}/\mathrm{bound}$, with ``bound`` $=$ rtol$\cdot\|\text{ref}\|$ $+$
atol$\cdot S$ and $S=\frac1n\sum_i|\ell'_i|\max_t|\gamma_{it}|\,\|X_i\|_F\|z_i\|$ (the size of one term).
Confirmation: the 50-digit gradient of :mod:`attsvm.highprec` decides whether the closed form or the
reference was wrong.
"""

from __future__ import annotations

import functools

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol

SYMPY_MAX = 18  # n*T*d*d at most for the symbolic derivative (one lambdified function per shape, cached)


def _scale(ds, W, loss):
    from attsvm import model

    s, g, u = model.outputs(ds, W)
    lp = np.abs(model.loss_derivative(u, loss))
    f = ds.flat()
    return float(np.mean(lp * np.abs(g).max(-1) * np.linalg.norm(f.X, axis=(-2, -1)) * np.linalg.norm(f.Z, axis=-1)))


def _torch_loss(ds, loss):
    import torch

    f = ds.flat()
    X, Z, v, Y = (torch.tensor(np.array(a), dtype=torch.float64) for a in (f.X, f.Z, f.v, f.Y))

    def L(W):
        a = torch.einsum("ntd,de,ne->nt", X, W, Z)
        if f.mask is not None:
            a = a.masked_fill(~torch.as_tensor(np.asarray(f.mask)), float("-inf"))
        s = torch.softmax(a, dim=-1)
        u = (s * (Y[:, None] * (X @ v))).sum(-1)
        if loss == "logistic":
            return torch.nn.functional.softplus(-u).mean()
        if loss == "exponential":
            return torch.exp(-u).mean()
        return (-u).mean()

    return L


def _central(ds, W, loss):
    from attsvm import model

    G = np.zeros_like(W)
    for j in range(W.shape[0]):
        for k in range(W.shape[1]):
            h = 1e-5 * max(1.0, abs(W[j, k]))
            Wp, Wm = W.copy(), W.copy()
            Wp[j, k] += h
            Wm[j, k] -= h
            G[j, k] = (float(model.loss(ds, Wp, loss)) - float(model.loss(ds, Wm, loss))) / (2 * h)
    return G


@functools.lru_cache(maxsize=32)
def _sympy_gradient_function(n: int, T: int, d: int, loss: str):
    """The sympy derivative of the loss w.r.t. every entry of W, data symbolic, lambdified to mpmath."""
    import sympy as sp

    Ws = sp.Matrix(d, d, lambda j, k: sp.Symbol(f"w{j}{k}"))
    Xs = [[[sp.Symbol(f"x{i}{t}{j}") for j in range(d)] for t in range(T)] for i in range(n)]
    Zs = [[sp.Symbol(f"z{i}{j}") for j in range(d)] for i in range(n)]
    Ys = [sp.Symbol(f"y{i}") for i in range(n)]
    vs = [sp.Symbol(f"v{j}") for j in range(d)]
    terms = []
    for i in range(n):
        a = [(sp.Matrix([Xs[i][t]]) * Ws * sp.Matrix(Zs[i]))[0, 0] for t in range(T)]
        g = [Ys[i] * sum(Xs[i][t][j] * vs[j] for j in range(d)) for t in range(T)]
        u = sum(sp.exp(a[t]) * g[t] for t in range(T)) / sum(sp.exp(a[t]) for t in range(T))
        terms.append({"logistic": sp.log(1 + sp.exp(-u)), "exponential": sp.exp(-u)}.get(loss, -u))
    L = sum(terms) / n
    args = list(Ws) + [x for Xi in Xs for Xt in Xi for x in Xt] + [z for Zi in Zs for z in Zi] + Ys + vs
    return sp.lambdify(args, [sp.diff(L, w) for w in Ws], modules="mpmath")


def _sympy_grad(ds, W, loss):
    """Evaluate the symbolic derivative at 30 digits on the exact float64 inputs."""
    import mpmath

    f = ds.flat()
    n, T, d = f.X.shape
    fn = _sympy_gradient_function(n, T, d, loss)
    vals = [W.reshape(-1), f.X.reshape(-1), f.Z.reshape(-1), f.Y.reshape(-1), f.v.reshape(-1)]
    with mpmath.workdps(30):
        out = fn(*[mpmath.mpf(float(x)) for a in vals for x in a])
    return np.array([float(x) for x in out]).reshape(d, d)


def _slack(err, ref_norm, S, rtol, atol):
    bound = rtol * ref_norm + atol * S
    return 1.0 - err / bound if bound > 0 else (1.0 if err == 0 else -np.inf)


@claim(
    id="grad-closed-form",
    title="The closed-form gradient equals autograd, central differences and the sympy derivative",
    origin="derived",
    source="THEORY §3 (grad-closed-form)",
    hypotheses={"data": "paper", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"loss": "logistic"},
)
def grad_closed_form(case):
    """closed form = torch autograd = central differences = sympy; (K,Q) chain rule = autograd."""
    import torch

    from attsvm import model

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    d = ds.d
    W = case.draw_matrix(d, d, scale=3.0)
    m = case.draw_int(1, d + 1)
    K, Q = case.draw_matrix(d, m, scale=1.5), case.draw_matrix(d, m, scale=1.5)
    G = model.grad_W(ds, W, loss)
    S = _scale(ds, W, loss)
    L = _torch_loss(ds, loss)
    Wt = torch.tensor(W, requires_grad=True)
    L(Wt).backward()
    G_ag = Wt.grad.numpy()
    G_fd = _central(ds, W, loss)
    slacks = {
        "autograd": _slack(np.linalg.norm(G - G_ag), np.linalg.norm(G_ag), S, tol("grad_rtol"), tol("grad_atol")),
        "central": _slack(np.linalg.norm(G - G_fd), np.linalg.norm(G_fd), S, tol("fd_rtol"), tol("fd_atol")),
    }
    if ds.n * ds.T * d * d <= SYMPY_MAX and ds.flat().mask is None:
        G_sp = _sympy_grad(ds, W, loss)
        slacks["sympy"] = _slack(np.linalg.norm(G - G_sp), np.linalg.norm(G_sp), S, tol("grad_rtol"), tol("grad_atol"))
    # (K, Q): closed form chain rule vs autograd through W = K Q^T
    gK, gQ = model.grad_KQ(ds, K, Q, loss)
    Kt, Qt = torch.tensor(K, requires_grad=True), torch.tensor(Q, requires_grad=True)
    L(Kt @ Qt.T).backward()
    SKQ = _scale(ds, K @ Q.T, loss) * (np.linalg.norm(K) + np.linalg.norm(Q))
    errKQ = np.hypot(np.linalg.norm(gK - Kt.grad.numpy()), np.linalg.norm(gQ - Qt.grad.numpy()))
    refKQ = np.hypot(np.linalg.norm(Kt.grad.numpy()), np.linalg.norm(Qt.grad.numpy()))
    slacks["KQ-autograd"] = _slack(errKQ, refKQ, SKQ, tol("grad_rtol"), tol("grad_atol"))
    worst = min(slacks, key=slacks.get)
    margin = float(slacks[worst])
    detail = {"slacks": {k: float(v) for k, v in slacks.items()}, "worst": worst, "W": W.tolist(), "K": K.tolist()}
    detail["Q"] = Q.tolist()
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@grad_closed_form.confirm
def _confirm(case, outcome):
    """50-digit gradient from the definition: is the float64 closed form within tolerance of it?"""
    from attsvm import highprec as hp
    from attsvm import model

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W, K, Q = (np.array(outcome.detail[k]) for k in ("W", "K", "Q"))
    G_hp = hp.to_numpy(hp.grad_W(ds, W, loss))
    G = model.grad_W(ds, W, loss)
    sW = _slack(np.linalg.norm(G - G_hp), np.linalg.norm(G_hp), _scale(ds, W, loss), tol("grad_rtol"), tol("grad_atol"))
    gK_hp, gQ_hp = (hp.to_numpy(x) for x in hp.grad_KQ(ds, K, Q, loss))
    gK, gQ = model.grad_KQ(ds, K, Q, loss)
    SKQ = _scale(ds, K @ Q.T, loss) * (np.linalg.norm(K) + np.linalg.norm(Q))
    errKQ = np.hypot(np.linalg.norm(gK - gK_hp), np.linalg.norm(gQ - gQ_hp))
    sKQ = _slack(errKQ, np.hypot(np.linalg.norm(gK_hp), np.linalg.norm(gQ_hp)), SKQ, tol("grad_rtol"), tol("grad_atol"))
    margin = float(min(sW, sKQ))
    detail = {"closed_form_vs_50digits": float(sW), "KQ_vs_50digits": float(sKQ), "float64": outcome.detail}
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)
