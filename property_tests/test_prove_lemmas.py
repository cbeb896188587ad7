r"""The built-in region lemmas, proved on their example data files (``examples/prove/``, made by
``examples/prove/make_data.py``) from the command line, and their certificates re-checked.

* ``no-stationary-equal-scores`` (its region form): under Assumption B the §3 covariance bound
  $\langle\nabla\mathcal L(W),W^{mm}\rangle\le\frac mn\sum_i\ell'_i\Delta_is_{\mathrm{opt}}(1-s_{\mathrm{opt}})<0$ on
  $\|W\|_F\le1$;
* ``cone-descent``: $\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle<0$ on $\mathcal C_{\mu,R}(W^{mm}_\alpha)$,
  $R\le\|W\|_F\le R_1$, for a locally optimal $\alpha\ne\mathrm{opt}$ and $\mu$ of the local convergence lemma;
* ``cone-invariance``: one normalised GD step maps that cone set into $\mathcal C_{\mu',R}$;
* ``smoothness-bound-region``: $\|\nabla^2\mathcal L(W)\|_F\le L_W$ on a Frobenius ball;
* ``cone-descent-control`` (expected-false): the descent statement for an $\alpha$ that is not locally optimal —
  the prover must refute it (a point of the region whose margin's enclosure lies below 0), never prove it, and
  the search must refute it too.

The fast tests prove with a small box budget (each well under 20 s); the ``slow`` ones prove the default regions
of the larger data sets (E3's sizes at $d=3$, two inputs of Assumption B, the cone-invariance shell $8\le\|W\|_F\le9$).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from attsvm.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "proofs" / "claims"
DATA = ROOT / "examples" / "prove"

NO_STATIONARY = CLAIMS / "no_stationary_equal_scores.py"
DESCENT = CLAIMS / "cone_descent.py"
INVARIANCE = CLAIMS / "cone_invariance.py"
SMOOTHNESS = CLAIMS / "smoothness_region.py"


def _prove(capsys, tmp_path, path, cid, data, *extra):
    """``attsvm prove`` with a certificate: (exit code, the certificate or None, stdout + stderr)."""
    cert = tmp_path / f"{cid}.json"
    argv = ["prove", str(path), "--only", cid, "--data", str(DATA / data), "--certificate", str(cert), *extra]
    code = main(argv)
    cap = capsys.readouterr()
    return code, (json.loads(cert.read_text()) if cert.exists() else None), cap.out + cap.err


def _proved_and_verified(capsys, tmp_path, path, cid, data, *extra, kind):
    code, cert, out = _prove(capsys, tmp_path, path, cid, data, *extra)
    assert code == 0, out
    assert f"{cid}: proved on" in out, out
    assert cert["status"] == "proved" and cert["region"]["kind"] == kind
    assert cert["counts"]["proved"] >= 1 and all(lf["status"] in ("proved", "outside") for lf in cert["leaves"])
    assert main(["prove", "--verify", str(tmp_path / f"{cid}.json")]) == 0
    assert f"verified: {cid} holds" in capsys.readouterr().out
    return cert


@pytest.mark.parametrize(
    "path, cid, data, extra, kind",
    [
        (NO_STATIONARY, "no-stationary-equal-scores", "eq_n1.npz", ("--region", "ball:1", "--boxes", "2000"), "ball"),
        (DESCENT, "cone-descent", "local_d2.npz", ("--boxes", "2000"), "cone"),
        (SMOOTHNESS, "smoothness-bound-region", "visual.npz", ("--boxes", "2000"), "ball"),
        (INVARIANCE, "cone-invariance", "local_d2.npz", ("--region", "cone:1/65536,4,5", "--boxes", "4000"), "cone"),
    ],
    ids=["no-stationary", "cone-descent", "smoothness", "cone-invariance-R4"],
)
def test_a_lemma_is_proved_on_its_example_and_the_certificate_verifies(capsys, tmp_path, path, cid, data, extra, kind):
    _proved_and_verified(capsys, tmp_path, path, cid, data, *extra, kind=kind)


def test_the_cone_is_the_lemmas(capsys, tmp_path):
    r"""cone-descent proves on the cone around $W^{mm}_\alpha=e_1e_d^\top$ (the locally_optimal data) with the
    declared radii and $\mu$ the lemma's bound rounded down to three significant bits, recomputed here in float64
    from the solver's $W^{mm}_\alpha$, support and neighbour gap."""
    from fractions import Fraction

    import numpy as np

    from attsvm import data, svm

    cert = _proved_and_verified(capsys, tmp_path, DESCENT, "cone-descent", "local_d2.npz", kind="cone")
    reg = cert["region"]
    assert (reg["R"], reg["R1"]) == ("4", "16")
    assert [Fraction(q) for q in reg["direction"]] == [0, 1, 0, 0]
    ds = data.load(DATA / "local_d2.npz")
    sol = svm.solve_fro(ds, ds.selection)
    assert sol.locally_optimal and not np.array_equal(ds.selection, ds.opt)
    delta = 0.5 if sol.delta is None else float(sol.delta)
    A = np.max(np.linalg.norm(ds.X, axis=-1) * np.linalg.norm(ds.Z, axis=-1)[:, None]) * np.linalg.norm(sol.W)
    mu_alpha = (min(0.5, delta) / A) ** 2 / 8
    assert mu_alpha * 7 / 8 < Fraction(reg["mu"]) <= mu_alpha * (1 - 1e-9)


def test_the_control_is_refuted_by_the_prover_never_proved(capsys, tmp_path):
    code, cert, out = _prove(capsys, tmp_path, DESCENT, "cone-descent-control", "notlocal_d2.npz", "--boxes", "500")
    assert code == 1 and cert is None, out
    assert "cone-descent-control: refuted on cone" in out and "proved on" not in out
    assert "margin enclosure at its centre [-" in out


def test_a_region_where_the_statement_is_false_is_not_proved(capsys, tmp_path):
    """cone-invariance at R = 4 with theta = 1/2 is false for the lemma's own mu on E1's data (the step from the
    cone's boundary turns outwards by more than half the worst case): the prover must not say proved."""
    code, cert, out = _prove(
        capsys, tmp_path, INVARIANCE, "cone-invariance", "visual.npz", "--region", "cone:1,4,5", "--boxes", "300"
    )
    assert code == 1 and cert is None, out
    assert "proved on" not in out and ("refuted" in out or "unresolved" in out)


def test_the_premises_are_hypotheses_not_errors(capsys, tmp_path):
    """The descent statement on data whose alpha is not locally optimal: the case is inconclusive, so the prover
    has no region to prove (exit 1), never a proof; a region that is not a cone is bad input (exit 2)."""
    code, cert, out = _prove(capsys, tmp_path, DESCENT, "cone-descent", "notlocal_d2.npz", "--boxes", "50")
    assert code == 1 and cert is None and "proved on" not in out
    assert "does not meet the hypotheses (alpha is not locally optimal" in out and "nothing to prove" in out
    code, cert, out = _prove(capsys, tmp_path, DESCENT, "cone-descent", "local_d2.npz", "--region", "ball:2")
    assert code == 2 and cert is None
    assert "this claim's region is a cone (cone:MU,R,R1)" in out


@pytest.mark.parametrize(
    "path, verdicts",
    [
        (NO_STATIONARY, {"no-stationary-equal-scores": "verified"}),
        (
            DESCENT,
            {
                "cone-descent": "verified",
                "cone-descent-control": "refuted",
                "cone-descent-every-input": "verified",
                "cone-descent-tail": "verified",
                "cone-descent-radial": "verified",
            },
        ),
        (INVARIANCE, {"cone-invariance": "verified"}),
        (SMOOTHNESS, {"smoothness-bound-region": "verified"}),
    ],
    ids=["no-stationary", "cone-descent", "cone-invariance", "smoothness"],
)
def test_the_search_agrees(path, verdicts):
    """attsvm check's search (float64 points of the region, the ci budget): verified, and the control refuted
    with a confirmed counterexample."""
    from attsvm.claims.discover import load_file
    from attsvm.claims.runner import run_claim

    claims = {c.id: c for c in load_file(path)}
    assert set(claims) == set(verdicts)
    for cid, want in verdicts.items():
        r = run_claim(claims[cid], budget="ci", seed=0)
        assert r.verdict == want, (cid, r.reason)
        if want == "refuted":
            assert r.confirmed, r.reason


@pytest.mark.slow
@pytest.mark.parametrize(
    "path, cid, data, extra, kind",
    [
        (NO_STATIONARY, "no-stationary-equal-scores", "eq_n2.npz", ("--region", "ball:1"), "ball"),
        (DESCENT, "cone-descent", "visual.npz", ("--region", "cone:1,4,16"), "cone"),
        (DESCENT, "cone-descent", "local_d3.npz", ("--region", "cone:1,1,4"), "cone"),
        (DESCENT, "cone-descent-every-input", "e3_d2.npz", ("--region", "cone:1,4,inf"), "cone"),
        (INVARIANCE, "cone-invariance", "local_d2.npz", (), "cone"),
        (SMOOTHNESS, "smoothness-bound-region", "visual.npz", ("--region", "ball:2"), "ball"),
    ],
    ids=[
        "no-stationary-n2",
        "cone-descent-E1",
        "cone-descent-d3",
        "cone-descent-E3-d2-unbounded",
        "cone-invariance-R8",
        "smoothness-R2",
    ],
)
def test_the_larger_proofs(capsys, tmp_path, path, cid, data, extra, kind):
    _proved_and_verified(capsys, tmp_path, path, cid, data, *extra, kind=kind)


def test_the_issues_command_on_the_built_in_claim(capsys, tmp_path):
    """The acceptance command of the proved-verdicts issue, on the built-in collection (no PATH): the built-in
    ``no-stationary-equal-scores`` proved on ``ball:3`` for an Assumption B data set at d = 2; the certificate
    verifies; a copy with one proved leaf's lower bound moved below 0 fails naming that leaf; on data without
    Assumption B the prover does not say proved."""
    cert = tmp_path / "c.json"
    argv = ["prove", "--only", "no-stationary-equal-scores", "--data", str(DATA / "eq_n1.npz"), "--region", "ball:3"]
    assert main([*argv, "--certificate", str(cert)]) == 0
    assert "no-stationary-equal-scores: proved on Frobenius ball ‖W‖_F ≤ 3" in capsys.readouterr().out
    assert main(["prove", "--verify", str(cert)]) == 0
    capsys.readouterr()
    doc = json.loads(cert.read_text())
    k = next(i for i, lf in enumerate(doc["leaves"]) if lf["status"] == "proved" and i > 5)
    doc["leaves"][k]["lower"] = ["-1", "-1/2"]
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(doc))
    assert main(["prove", "--verify", str(bad)]) == 1
    out = capsys.readouterr().out.strip()
    assert f"leaf {doc['leaves'][k]['path']!r}" in out and "recorded lower bound" in out and "\n" not in out, out
    argv[argv.index(str(DATA / "eq_n1.npz"))] = str(DATA / "visual.npz")
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "proved on" not in out and "Assumption B fails" in out


def _claims(path):
    from attsvm.claims.discover import load_file

    return {c.id: c for c in load_file(path)}


def _module(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_pair_form_of_the_descent_margin_is_the_gradients():
    r"""``descent_margin`` (the covariance pair form) against the engine's closed-form gradient,
    $-\sum\nabla\mathcal L(W)\circ W^{mm}_\alpha$, at random $W$: equal to float64 rounding, and their ball
    enclosures meet (two independent formulas of one number)."""
    from fractions import Fraction

    import numpy as np

    from attsvm import data, kit, svm

    mod = _module(DESCENT)
    rng = np.random.default_rng(5)
    for name in ("local_d2.npz", "e3_d2.npz", "e3_d3.npz"):
        ds = data.load(DATA / name)
        V = np.asarray(svm.solve_fro(ds, ds.selection).W)
        f = kit.for_precision("float64")
        b = kit.for_precision("ball", 256)
        for _ in range(5):
            W = rng.standard_normal((ds.d, ds.d)) * rng.choice([0.5, 3.0, 10.0])
            pair = mod.descent_margin(f, f.data(ds), W, V, "logistic")
            grad = -np.sum(f.grad_W(ds, W, "logistic") * V)
            assert abs(pair - grad) <= 1e-9 * np.sum(np.abs(f.grad_W(ds, W, "logistic") * V)) + 1e-300, name
            with b.context():
                Wq = b.array(np.array([[Fraction(x) for x in r] for r in W], dtype=object))
                Vq = b.array(np.array([[Fraction(x) for x in r] for r in V], dtype=object))
                p_b = mod.descent_margin(b, b.data(ds), Wq, Vq, "logistic")
                g_b = -np.sum(b.grad_W(ds, Wq, "logistic") * Vq)
                assert p_b.overlaps(g_b), (name, p_b, g_b)


def test_the_theory_delta_is_refuted_on_e3_sizes(capsys, tmp_path):
    r"""The finding: with §2's $\delta_\alpha$ (inputs with a support token only), ``cone-descent`` is false on
    E3-size paper-law data at d = 2 (input 0 has no support token; its token 2 has margin 1.023 and scores above
    $\alpha$): the prover refutes it on $28\le\|W\|_F\le36$ with a point whose margin's ball lies below 0, while
    ``cone-descent-every-input`` (δ over every input) proves the same shell."""
    code, cert, out = _prove(capsys, tmp_path, DESCENT, "cone-descent", "e3_d2.npz", "--region", "cone:1,28,36")
    assert code == 1 and cert is None and "cone-descent: refuted on cone" in out, out
    assert "margin enclosure at its centre [-" in out
    _proved_and_verified(
        capsys, tmp_path, DESCENT, "cone-descent-every-input", "e3_d2.npz", "--region", "cone:1,28,36", kind="cone"
    )


def test_the_tail_lemma_is_sound_and_closes_the_tail():
    r"""``cone-descent-tail``: on the example data it closes the tail at $R_1=2^kR$; the descent margin (balls) is
    above 0 at sampled points of the cone past that $R_1$ (up to $16R_1$); and it never claims a tail where the
    statement is false: for §2's $\mu$ on ``e3_d2.npz`` (refuted at $\|W\|_F\approx32$) its bound at $R_1=16$ is
    not above 0."""
    from fractions import Fraction

    import numpy as np

    from attsvm import data, kit
    from attsvm.claims.case import Case
    from attsvm.prove.local_cone import lemma_cone
    from attsvm.prove.tail import close_tail

    mod = _module(DESCENT)
    claims = _claims(DESCENT)
    b = kit.for_precision("ball", 256)
    rng = np.random.default_rng(2)
    for name, want in (("local_d2.npz", 8), ("e3_d2.npz", 64), ("e3_d3.npz", 64)):
        ds = data.load(DATA / name)
        tp = close_tail(claims["cone-descent-tail"], ds, "1", "4")
        assert tp.status == "proved" and tp.R1 == want, (name, tp.describe())
        case = Case(data=ds, hypotheses=claims["cone-descent-tail"].case_hypotheses, precision="ball", prec=256)
        with case.kit.context():
            D, Wa, _, info = lemma_cone(case, every_input=True)
        axis = info["axis"] / np.linalg.norm(info["axis"])
        phi = np.arccos(1 - info["mu"]) * 0.99
        for _ in range(6):
            P = rng.standard_normal(axis.shape)
            P -= np.sum(P * axis) * axis
            U = np.cos(phi) * axis + np.sin(phi) * P / np.linalg.norm(P)
            W = float(want) * rng.uniform(1, 16) * U
            with b.context():
                Wq = b.array(np.array([[Fraction(x) for x in r] for r in W], dtype=object))
                assert mod.descent_margin(b, b.data(ds), Wq, Wa, "logistic") > 0, name
    ds = data.load(DATA / "e3_d2.npz")
    case = Case(data=ds, hypotheses=claims["cone-descent"].case_hypotheses, precision="ball", prec=256)
    with case.kit.context():
        D, Wa, _, info = lemma_cone(case)
        m, _ = mod.tail_bound(case.kit, D, Wa, info["axis"], Fraction(info["mu"]), 16)
        assert not m > 0, m


def test_an_unbounded_cone_is_closed_by_the_tail_lemma(capsys, tmp_path):
    r"""``cone:MU,R,inf``: the compact part $R\le\|W\|_F\le R_1$ by boxes and $\|W\|_F\ge R_1$ by the declared tail
    lemma (``cone-descent-tail``); the certificate records both and verifies; a tail moved to another $R_1$, or
    naming a lemma that is not there, fails; a claim that declares no tail lemma is bad input."""
    code, cert, out = _prove(
        capsys, tmp_path, DESCENT, "cone-descent-every-input", "local_d2.npz", "--region", "cone:1,4,inf"
    )
    assert code == 0, out
    assert "‖W‖_F ≥ 8 by the tail lemma cone-descent-tail" in out
    assert cert["tail"]["claim"] == "cone-descent-tail" and cert["tail"]["R1"] == "8"
    assert cert["region"]["R1"] == "8" and Fraction(cert["tail"]["margin"][0]) > 0
    path = tmp_path / "cone-descent-every-input.json"
    assert main(["prove", "--verify", str(path)]) == 0
    assert "the tail ‖W‖_F ≥ 8 re-decided by cone-descent-tail" in capsys.readouterr().out
    for key, val, words in (("R1", "16", "not at the compact part's R₁ = 8"), ("claim", "nope", "is not among")):
        doc = json.loads(path.read_text())
        doc["tail"][key] = val
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(doc))
        assert main(["prove", "--verify", str(bad)]) == 1
        assert words in capsys.readouterr().out
    code, cert, out = _prove(capsys, tmp_path, DESCENT, "cone-descent", "local_d2.npz", "--region", "cone:1,4,inf")
    assert code == 2 and cert is None and "declares no tail lemma" in out


def test_set_changes_a_param_and_the_certificate_keeps_it(capsys, tmp_path):
    r"""``--set theta=...``: cone-invariance with a weaker $\theta$ is another statement; the certificate records
    it and ``--verify`` re-checks that statement; an undeclared name is bad input."""
    code, cert, out = _prove(
        capsys,
        tmp_path,
        INVARIANCE,
        "cone-invariance",
        "local_d2.npz",
        "--region",
        "cone:1/65536,4,5",
        "--set",
        "theta=0.75",
        "--boxes",
        "4000",
    )
    assert code == 0, out
    assert cert["constants"]["theta"] == 0.75
    assert main(["prove", "--verify", str(tmp_path / "cone-invariance.json")]) == 0
    capsys.readouterr()
    code, cert, out = _prove(capsys, tmp_path, INVARIANCE, "cone-invariance", "local_d2.npz", "--set", "tehta=1")
    assert code == 2 and "has no param 'tehta'" in out


def _radial_samples(name, mu_scale=1, radii=(18, 24, 40, 80), per_radius=8, seed=3):
    r"""``(B(r), true margin e^{r c_0})`` pairs at points $W=rU$ of the cone of ``cone-descent-radial`` on
    ``name``: the radial bound (with $\mu$ times ``mu_scale``) evaluated at the point radius $r$ in balls, and the
    descent margin $-\langle\nabla\mathcal L(W),W^{mm}_\alpha\rangle$ computed independently of the bound, from the
    engine's closed-form gradient ``k.grad_W`` (float64) — on the cone's boundary and inside it."""
    import numpy as np

    from attsvm import data, kit
    from attsvm.claims.case import Case
    from attsvm.prove.local_cone import lemma_cone

    mod = _module(DESCENT)
    claim = _claims(DESCENT)["cone-descent-radial"]
    ds = data.load(DATA / name)
    case = Case(data=ds, hypotheses=claim.case_hypotheses, precision="ball", prec=256)
    f = kit.FLOAT64
    rng = np.random.default_rng(seed)
    out = []
    with case.kit.context():
        k = case.kit
        D, Wa, _, info = lemma_cone(case, every_input=True)
        mu = Fraction(info["mu"])
        axis = info["axis"] / np.linalg.norm(info["axis"])
        Wmm = np.array([[k.to_float(x) for x in row] for row in Wa])
        for r in radii:
            B, det = mod.radial_bound(k, D, Wa, info["axis"], mu * mu_scale, k.scalar(r))
            for j in range(per_radius):
                P = rng.standard_normal(axis.shape)
                P -= np.sum(P * axis) * axis
                phi = np.arccos(1 - float(mu)) * (1.0 if j % 2 == 0 else rng.uniform())
                W = r * (np.cos(phi) * axis + np.sin(phi) * P / np.linalg.norm(P))
                true = -np.sum(f.grad_W(ds, W, "logistic") * Wmm) * np.exp(r * det["c0"])
                out.append((k.to_float(B), float(true), r))
    return out


@pytest.mark.parametrize("name", ["e3_d3.npz", "local_d3.npz", "e3_d2.npz"])
def test_the_radial_bound_lies_below_the_descent_margin(name):
    r"""``radial_bound`` is a lower bound: at points of the cone (its boundary and inside, radii 18–80) the descent
    margin from the engine's gradient, times $e^{rc_0}$, is at least $B(r)$ (up to float64 rounding of the
    independent value). On ``e3_d2`` the bound is negative (the relaxation is too loose there) and still below."""
    for B, true, r in _radial_samples(name):
        assert B <= true + 1e-9 * max(1.0, abs(true)), (name, r, B, true)


def test_the_radial_bound_check_can_fail():
    """The comparison above is not vacuous: the bound of a cone 64 times thinner (a planted wrong mu) lies above
    the true margin at some point of the real cone's boundary."""
    pairs = _radial_samples("e3_d3.npz", mu_scale=Fraction(1, 64))
    assert any(B > true + 1e-9 * max(1.0, abs(true)) for B, true, _ in pairs)


def test_the_radial_reduction_proves_cone_descent_on_e3_d3(capsys, tmp_path):
    r"""Paper-law data of E3's size at $d=3$ (``e3_d3``: $n=6$, $T=8$, $\alpha\ne$ opt): the nine-coordinate box
    proof of ``cone-descent-every-input`` does not close (20 000 boxes), the radial reduction does —
    ``cone-descent-radial`` on ``cone:1,18,inf``: the radii $[18,36]$ by one-coordinate boxes and $\|W\|_F\ge36$ by
    ``cone-descent-tail``; the certificate verifies, and with the tail moved it does not. From $R=16$ the bound is
    negative somewhere (refuted: the relaxation, not the descent, fails there)."""
    code, cert, out = _prove(capsys, tmp_path, DESCENT, "cone-descent-radial", "e3_d3.npz", "--region", "cone:1,18,inf")
    assert code == 0, out
    assert "cone-descent-radial: proved on interval [18, 36]" in out, out
    assert "‖W‖_F ≥ 36 by the tail lemma cone-descent-tail" in out, out
    assert cert["region"]["kind"] == "box" and cert["constants"]["region"] == "cone:1,18,36"
    path = tmp_path / "cone-descent-radial.json"
    assert main(["prove", "--verify", str(path)]) == 0
    assert "the tail ‖W‖_F ≥ 36 re-decided by cone-descent-tail" in capsys.readouterr().out
    doc = json.loads(path.read_text())
    doc["leaves"][0]["lower"] = ["-1", "1"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["prove", "--verify", str(bad)]) == 1
    assert "is not above 0" in capsys.readouterr().out
    other = tmp_path / "from16"
    other.mkdir()
    code, cert, out = _prove(capsys, other, DESCENT, "cone-descent-radial", "e3_d3.npz", "--region", "cone:1,16,inf")
    assert code == 1 and cert is None and "cone-descent-radial: refuted on interval [16, 64]" in out, out
