r"""``joint-vp-relaxed`` (reconstructed, 2306.13596): joint $(v,p)$ training of
$f(X)=v^\top X^\top\mathbb S(Xp)$: $v_k/\|v_k\|\to v^{mm}/\|v^{mm}\|$ (head SVM) and, as $\|p_k\|\to\infty$,
$p_k/\|p_k\|\to$ the relaxed prompt SVM direction $p^{rel}$ (margin $\ge1$ on the head SVM's support set
$\mathcal S$, $\ge0$ elsewhere).

Finite-horizon check (per-factor normalised GD, ``steps`` steps, records at quarters), $\alpha$ the final
selection:

* **regime**: the statement is about $\|p_k\|\to\infty$; when $\|p_k\|$ stays below ``grow``$\cdot$0.1$k$
  (the softmax does not saturate: $v$ alone drives the loss down and $p$ stays bounded, e.g. $\|p\|$ 5.2 → 3.3
  over 3000–30000 steps) the run is ``inconclusive`` — it has no direction to check;
* $1-\mathrm{corr}(v_k,v^{mm})\le$ ``eps`` at the end;
* $1-\mathrm{corr}(p_k,p^{rel})\le$ ``eps`` at the end; otherwise, measured: $p_k$ first follows the *plain*
  prompt SVM $p^{mm}$ and turns to $p^{rel}$ only later (one draw: $1-\mathrm{corr}(p,p^{rel})$ 0.155 → 0.165
  → 0.021 at 1500 / 4000 / 6000 steps while $1-\mathrm{corr}(p,p^{mm})$ 0.003 → 0.001 → 0.091), so a run still
  approaching $p^{rel}$ or $p^{mm}$ is ``inconclusive`` (in transit); a **failure** is a run whose $p$ moves away
  from both (both $1-\mathrm{corr}$ rising by more than ``slack`` over the second half).

Confirmer: the failing $1-\mathrm{corr}$ values at 50 digits, and a 50-digit replay (gradients from the
definition, mpmath) of ``replay_steps`` per-factor NGD steps from the float64 end state next to float64 — the
failure is confirmed only where float64 follows the exact dynamics.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="joint-vp-relaxed",
    title="Joint (v,p): v -> v^mm, p -> relaxed prompt SVM",
    origin="reconstructed",
    source="2306.13596 (joint training); THEORY §4",
    hypotheses={"data": "prompt", "n": (2, 4), "T": (2, 3), "d": (2, 4)},
    params={"steps": 3000, "eps": 0.1, "grow": 0.5, "slack": 1e-3, "replay_steps": 10},
    examples=16,
    ci_examples=16,
    notes=(
        "Unpinned 2026-12-01 (issue 10): with the shrinkable paper-law data and 16 examples, 14 runs are decided "
        "and pass, 2 are still in transit after 3000 steps (1-corr(p, p_rel) > eps while approaching p^mm); with "
        "the former seed-drawn data and 8 examples, 4/8 were in transit (above the 25% the verdict allows)."
    ),
)
def joint_vp_relaxed(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import corr
    from attsvm.svm.prompt import solve_head, solve_prompt, solve_relaxed_prompt

    h = case.hypotheses
    ds = case.data
    # not scaled by the budget: "v within eps of v^mm" is a proxy of the limit only at the full horizon (at 600
    # steps, the ci budget, v is still far from v^mm on some draws and the proxy fails although the limit holds)
    steps = int(h["steps"])
    res = gd.run(
        ds,
        param="vp",
        algo="ngd",
        lr=0.1,
        steps=steps,
        init="random",
        seed=case.seed,
        record_every=steps // 4,
        record_params=True,
    )
    a = res.selection[0]
    hv = solve_head(ds.with_alpha(a))
    if hv.status != "optimal":
        return Outcome(ok=True, inconclusive="head SVM infeasible for the final selection")
    rp, pp = solve_relaxed_prompt(ds.with_alpha(a)), solve_prompt(ds.with_alpha(a))
    if rp.status != "optimal":
        return Outcome(ok=True, inconclusive="relaxed prompt SVM infeasible for the final selection")
    vm, pr = np.asarray(hv.extra["v"]), np.asarray(rp.extra["p"])
    vs, ps = np.asarray(res.trajectory["v"])[1:, 0], np.asarray(res.trajectory["p"])[1:, 0]
    pn = np.linalg.norm(ps, axis=-1)
    ev, ep = 1 - corr(vs, vm[None], ndim=1), 1 - corr(ps, pr[None], ndim=1)
    em = 1 - corr(ps, np.asarray(pp.extra["p"])[None], ndim=1) if pp.status == "optimal" else np.full(len(ps), 2.0)
    detail = {
        "p_norm": pn.tolist(),
        "v_one_minus_corr": ev.tolist(),
        "p_rel_one_minus_corr": ep.tolist(),
        "p_mm_one_minus_corr": em.tolist(),
        "S": list(hv.extra["S"]),
        "v_mm": vm.tolist(),
        "p_rel": pr.tolist(),
        "p_mm": np.asarray(pp.extra["p"]).tolist() if pp.status == "optimal" else None,
        "v_recorded": vs.tolist(),
        "p_recorded": ps.tolist(),
    }
    eps, slack = float(h["eps"]), float(h["slack"])
    if not (np.all(np.isfinite(ev)) and np.all(np.isfinite(ep))):
        return Outcome(ok=True, inconclusive="non-finite iterate or zero p / v", detail=detail)
    if pn[-1] < float(h["grow"]) * 0.1 * steps:
        return Outcome(
            ok=True,
            inconclusive=f"p stays bounded (||p|| {pn[0]:.3g} -> {pn[-1]:.3g} in {steps} steps, step 0.1): the "
            "softmax does not saturate, outside the statement's regime ||p|| -> inf",
            detail=detail,
        )
    if ev[-1] > eps:
        return Outcome(ok=False, margin=float(eps - ev[-1]), detail=dict(detail, failing="v"))
    if ep[-1] <= eps:
        return Outcome(ok=True, margin=float(min(eps - ev[-1], eps - ep[-1])), detail=detail)
    h2 = len(ep) // 2
    rise_rel, rise_mm = float(ep[-1] - ep[h2 - 1]), float(em[-1] - em[h2 - 1])
    if rise_rel > slack and rise_mm > slack:
        return Outcome(ok=False, margin=float(slack - min(rise_rel, rise_mm)), detail=dict(detail, failing="p"))
    return Outcome(
        ok=True,
        inconclusive=f"in transit after {steps} steps: 1-corr(p, p_rel) = {ep[-1]:.3g} > eps, "
        f"1-corr(p, p_mm) = {em[-1]:.3g} (change over the second half {rise_rel:+.2g} / {rise_mm:+.2g})",
        detail=detail,
    )


@joint_vp_relaxed.confirm
def _confirm(case, outcome):
    """The failing 1-corr values at 50 digits; float64 vs a 50-digit replay (:func:`attsvm.highprec.replay`,
    ``param="vp"``) from the end state."""
    import mpmath as mp
    import numpy as np

    from attsvm import gd
    from attsvm import highprec as hp

    det = outcome.detail
    h = case.hypotheses
    ds = case.data
    L = int(h["replay_steps"])
    with mp.workdps(hp.DPS):

        def cr(x, y):
            return 1 - hp.corr(hp.as_mp(np.asarray(x)), hp.as_mp(np.asarray(y)))

        v_end, p_end = det["v_recorded"][-1], det["p_recorded"][-1]
        if det["failing"] == "v":
            m = mp.mpf(h["eps"]) - cr(v_end, det["v_mm"])
        else:
            k = len(det["p_recorded"]) // 2 - 1
            rr = cr(p_end, det["p_rel"]) - cr(det["p_recorded"][k], det["p_rel"])
            rm = (cr(p_end, det["p_mm"]) - cr(det["p_recorded"][k], det["p_mm"])) if det["p_mm"] else mp.mpf(1)
            m = mp.mpf(h["slack"]) - min(rr, rm)
        run = hp.replay(ds, {"v": np.array(v_end), "p": np.array(p_end)}, param="vp", algo="ngd", lr=0.1, steps=L)
    ref = gd.run(ds, param="vp", algo="ngd", lr=0.1, steps=L, init={"v": np.array(v_end), "p": np.array(p_end)})
    a = np.concatenate([run.array("v"), run.array("p")])
    b = np.concatenate([np.asarray(ref.v).ravel(), np.asarray(ref.p).ravel()])
    rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    out = {"margin_50_digits": float(m), "replay_steps": L, "mp_vs_float64_rel": rel}
    if m >= 0:
        return Outcome(ok=True, margin=hp.signed_float(m), detail=out)
    if rel > 1e-8:
        return Outcome(ok=True, inconclusive=f"float64 dynamics not faithful (50-digit replay differs by {rel:.2g})")
    return Outcome(ok=False, margin=hp.signed_float(m), detail=out)
