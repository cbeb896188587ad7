r"""``rp-local`` (reconstructed): for a locally optimal $\alpha\ne\mathrm{opt}$ and $\mu$ small enough, the
regularisation path restricted to the cone $\mathcal C_\mu(W^{mm}_\alpha)=\{W:\mathrm{corr}(W,W^{mm}_\alpha)\ge1-\mu\}$,

.. math:: \bar W_R=\arg\min\{\mathcal L(W):\ \|W\|_F\le R,\ W\in\mathcal C_\mu(W^{mm}_\alpha)\},

converges in direction to $W^{mm}_\alpha$. $\mu=\frac18(\min(\frac12,\delta_\alpha)/A)^2$ as in ``gd-local-cone``
($A=\max_{i,t}\|x_{it}\|\|z_i\|\|W^{mm}_\alpha\|_F$).

Finite-horizon check on :func:`attsvm.gd.regularization_path` (``cone=(W^mm_alpha, mu)``: exact projection
onto the cone, then the ball), started from a seeded point of the cone (:func:`attsvm.gd.cone_init`; the apex
$W=0$ can be a stationary point of the projected problem): $e_R=1-\mathrm{corr}(\bar W_R,W^{mm}_\alpha)$
non-increasing in $R$ (up to ``slack``$\cdot\mu$) and $e_{R_{\max}}\le$ ``shrink``$\cdot\mu$, i.e. the path
leaves the cone's boundary towards $W^{mm}_\alpha$. Radii: multiples of $\|W^{mm}_\alpha\|_F/\sqrt\mu$ (the path's
finite part is $O(1)$, so $e_R\sim c^2/2R^2$ drops below $\mu$ only at $R\gtrsim c/\sqrt\mu$). Margin in units of
$\mu$.
Confirmer: $e_R$ at 50 digits and the projected-gradient stationarity of $\bar W_{R_{\max}}$ at 50 digits — a
failure is confirmed only at a genuine constrained stationary point (otherwise the path had not converged).
"""

from attsvm.claims import Outcome, claim


def _mu(ds, alpha, Wa) -> float:
    import numpy as np

    from attsvm.svm.neighbours import neighbour_gap

    delta = float(neighbour_gap(ds, alpha))
    delta = 0.5 if not np.isfinite(delta) else delta
    A = float(np.max(np.linalg.norm(ds.X, axis=-1) * np.linalg.norm(ds.Z, axis=-1)[:, None]) * np.linalg.norm(Wa))
    return (min(0.5, delta) / A) ** 2 / 8


@claim(
    id="rp-local",
    title="Cone-restricted regularisation path -> W^mm_alpha for a locally optimal alpha",
    origin="reconstructed",
    source="2308.16898 (local regularisation path); THEORY §4",
    hypotheses={"data": "locally_optimal", "n": (1, 3), "T": (3, 4), "d": (2, 3)},
    params={"radii": (0.5, 1.0, 2.0, 4.0, 8.0), "shrink": 0.5, "slack": 0.01, "steps_per_radius": 300},
    depends=("rp-frobenius", "gd-local-cone"),
    examples=10,
)
def rp_local(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import corr
    from attsvm.svm import solve_fro

    h = case.hypotheses
    ds = case.data
    alpha = ds.selection
    if np.all(alpha == ds.opt):
        return Outcome(ok=True, inconclusive="alpha = opt for this draw (the claim is about a local alpha)")
    sol = solve_fro(ds, alpha)
    Wa = np.asarray(sol.W) if sol.feasible else None
    if not (sol.feasible and sol.locally_optimal):
        return Outcome(ok=True, inconclusive="alpha not locally optimal / Att-SVM(alpha) infeasible for this draw")
    mu = _mu(ds, alpha, Wa)
    radii = np.array(h["radii"], dtype=float) * float(np.linalg.norm(Wa)) / np.sqrt(mu)
    W0 = gd.cone_init(Wa, mu, float(radii[0]), seed=case.seed)
    path = gd.regularization_path(
        ds, radii, param="W", cone=(Wa, mu), init=W0, steps_per_radius=case.scaled(int(h["steps_per_radius"]), 60)
    )
    Ws = np.asarray(path.W).reshape(len(radii), ds.d, ds.d)
    nrm = np.linalg.norm(Ws, axis=(-2, -1))
    if not (np.all(np.isfinite(Ws)) and np.all(nrm > 0)):
        return Outcome(ok=True, inconclusive=f"path point zero or non-finite (norms {nrm.tolist()})")
    e = 1.0 - corr(Ws, Wa[None])
    rise = float(np.max(np.diff(e))) / mu if len(e) > 1 else 0.0
    margin = min(float(h["shrink"]) - e[-1] / mu, float(h["slack"]) - rise)
    detail = {
        "mu": mu,
        "one_minus_corr": e.tolist(),
        "radii": radii.tolist(),
        "W_path": Ws.tolist(),
        "W_alpha": np.asarray(Wa).tolist(),
        "selection": np.asarray(path.selection).reshape(len(radii), -1).tolist(),
    }
    return Outcome(ok=margin >= 0, margin=float(margin), detail=detail)


@rp_local.confirm
def _confirm(case, outcome):
    r"""$e_R$ at 50 digits; then the stationarity residual of $\bar W_{R_{\max}}$ for
    $\min\{\mathcal L:\ W\in\mathcal C_\mu\cap B_R\}$: $\|P(W-t\rho\,g/\|g\|)-W\|/(t\rho)$, $g=\nabla\mathcal L(W)$
    from its definition, $P$ the exact projection onto the cone then the ball, $t=10^{-6}$."""
    import mpmath as mp

    from attsvm import highprec as hp

    det = outcome.detail
    h = case.hypotheses
    mu = mp.mpf(det["mu"])
    with mp.workdps(50):
        Wa = hp.as_mp(det["W_alpha"])
        Ws = [hp.as_mp(W) for W in det["W_path"]]
        e = [1 - hp.corr(W, Wa) for W in Ws]
        rise = max(e[k + 1] - e[k] for k in range(len(e) - 1)) / mu if len(e) > 1 else mp.mpf(0)
        margin = min(mp.mpf(h["shrink"]) - e[-1] / mu, mp.mpf(h["slack"]) - rise)
        if margin >= 0:
            return Outcome(ok=True, margin=float(margin), detail={"one_minus_corr": [str(x) for x in e]})
        W = Ws[-1]
        R = mp.mpf(det["radii"][-1])
        g = hp.grad_W(case.data, W)
        d = len(W)
        flat = lambda M: [M[a][b] for a in range(d) for b in range(d)]  # noqa: E731
        w, gv, tv = flat(W), flat(g), flat(Wa)
        ng, nt = mp.sqrt(mp.fsum(x * x for x in gv)), mp.sqrt(mp.fsum(x * x for x in tv))
        tv = [x / nt for x in tv]
        step = mp.mpf("1e-6") * R
        x = [wi - step * gi / ng for wi, gi in zip(w, gv, strict=True)]
        c = 1 - mu
        a = mp.fsum(xi * ti for xi, ti in zip(x, tv, strict=True))
        E = [xi - a * ti for xi, ti in zip(x, tv, strict=True)]
        b = mp.sqrt(mp.fsum(y * y for y in E))
        if a < c * mp.sqrt(a * a + b * b):  # outside the cone: exact projection
            sn = mp.sqrt(1 - c * c)
            lam = max(mp.mpf(0), a * c + b * sn)
            x = [lam * (c * ti + sn * Ei / b) for ti, Ei in zip(tv, E, strict=True)]
        nx = mp.sqrt(mp.fsum(y * y for y in x))
        if nx > R:
            x = [y * R / nx for y in x]
        resid = mp.sqrt(mp.fsum((xi - wi) ** 2 for xi, wi in zip(x, w, strict=True))) / step
    det2 = {"one_minus_corr": [str(v) for v in e], "stationarity_residual": float(resid)}
    if resid > mp.mpf("1e-2"):
        return Outcome(
            ok=True,
            inconclusive=f"path not converged at R={float(R):.4g}: stationarity residual {float(resid):.3g} (50 dps)",
            detail=det2,
        )
    return Outcome(ok=False, margin=float(margin), detail=det2)
