"""Next-token data (:mod:`attsvm.ntp.data`), its generators (:mod:`attsvm.ntp.generate`) and the ``ntp``
strategy: derived arrays against loops written here, validation (each bad input an InputError naming the field,
also through :func:`attsvm.data.load` of a tampered file), save/load, batches, the generators' promises."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attsvm import data as data_mod
from attsvm import strategies as S
from attsvm.errors import InputError
from attsvm.ntp import generate
from attsvm.ntp.data import NTPData, from_mapping


def small() -> NTPData:
    E = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    tokens = np.array([[0, 1, 2], [2, 2, 1]])
    return NTPData(E, tokens, np.array([1, 2]))


@st.composite
def raw_ntp(draw):
    """Arbitrary valid data: ids with repeats, a visible or hidden query, distinct dyadic embeddings."""
    K = draw(st.integers(2, 6))
    T = draw(st.integers(2, 5))
    n = draw(st.integers(1, 6))
    d = draw(st.integers(1, 3))
    qv = draw(st.booleans()) if T >= 3 else True
    tokens = draw(hnp.arrays(np.int64, (n, T), elements=st.integers(0, K - 1)))
    pos = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, (T if qv else T - 1) - 1)))
    E = draw(hnp.arrays(np.float64, (K, d), elements=st.integers(-8, 8).map(lambda k: k / 8)))
    E[:, 0] += np.arange(K) * 4.0  # distinct rows
    return NTPData(E, tokens, tokens[np.arange(n), pos], qv)


# ---------------------------------------------------------------------- derived arrays, from the definitions
@settings(max_examples=100, deadline=None)
@given(raw_ntp())
def test_derived_arrays_match_loops(ds):
    n, T, d = ds.n, ds.T, ds.d
    assert (ds.kind, ds.batched, ds.batch_size) == ("ntp", False, None)
    assert (ds.K, ds.d) == ds.E.shape and (ds.n, ds.T) == ds.tokens.shape
    vis = [[ds.query_visible or t < T - 1 for t in range(T)] for i in range(n)]
    for i in range(n):
        for t in range(T):
            assert np.array_equal(ds.X[i, t], ds.E[ds.tokens[i, t]])
            holds = bool(vis[i][t] and ds.tokens[i, t] == ds.labels[i])
            assert ds.label_mask[i, t] == holds and ds.scores[i, t] == (1.0 if holds else 0.0)
        assert np.array_equal(ds.Z[i], ds.E[ds.tokens[i, T - 1]]) and ds.query_ids[i] == ds.tokens[i, T - 1]
        first = min(t for t in range(T) if vis[i][t] and ds.tokens[i, t] == ds.labels[i])
        assert ds.label_position[i] == first == ds.opt[i]
    assert ds.visible is None if ds.query_visible else ds.visible.tolist() == vis
    assert ds.X.dtype == ds.Z.dtype == ds.scores.dtype == np.float64
    assert ds.tokens.dtype == ds.labels.dtype == ds.label_position.dtype == np.int64
    f = ds.flat()
    assert np.array_equal(f.X, ds.X) and np.array_equal(f.Z, ds.Z) and np.array_equal(f.alpha, ds.label_position)
    assert np.array_equal(f.Y, np.ones(n)) and np.array_equal(f.v, np.zeros(d))
    assert (f.mask is None) if ds.query_visible else np.array_equal(f.mask, ds.visible)
    assert np.array_equal(f.owner, np.arange(n)) and np.array_equal(f.query, np.zeros(n))


def test_repeated_ids_mark_every_occurrence_of_the_label():
    ds = small()
    assert ds.label_mask.tolist() == [[False, True, False], [True, True, False]]
    assert ds.label_position.tolist() == [1, 0]


def test_everything_is_read_only():
    import dataclasses

    ds = small()
    for a in (ds.E, ds.tokens, ds.labels, ds.X, ds.Z, ds.label_mask, ds.label_position):
        with pytest.raises(ValueError):
            a.flat[0] = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.E = ds.E


def test_flat_view_is_built_once_read_only_and_not_pickled():
    import pickle

    for ds in (small(), generate.ntp(3, 3, 4, 3, seed=2, B=2)):
        before = pickle.dumps(ds)
        f = ds.flat()
        assert ds.flat() is f and pickle.dumps(ds) == before
        for a in vars(f).values():
            if isinstance(a, np.ndarray):
                with pytest.raises(ValueError, match="read-only"):
                    a[(0,) * a.ndim] = 0
        back = pickle.loads(before)
        assert back.flat() is not f
        np.testing.assert_array_equal(back.flat().X, f.X)


# ---------------------------------------------------------------------- validation
E3 = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
TOK = np.array([[0, 1, 2], [2, 0, 1]])
LAB = np.array([1, 2])
BAD = [
    ("E", dict(E=E3 + 0j), "complex"),
    ("E", dict(E=np.where(E3 == 1, np.nan, E3)), "NaN"),
    ("E", dict(E=np.where(E3 == 1, np.inf, E3)), "NaN or inf"),
    ("E", dict(E=np.array([["a", "b"]] * 3)), "not numeric"),
    ("E", dict(E=E3[:, 0]), "shape"),
    ("E", dict(E=np.zeros((3, 0))), "empty"),
    ("E", dict(E=E3[:1], tokens=np.zeros((1, 2), np.int64), labels=np.zeros(1, np.int64)), "K >= 2"),
    ("E", dict(E=E3[[0, 1, 0]]), "items 0 and 2"),
    ("E", dict(E=np.array([[0.0, 1.0], [1.0, 0.0], [-0.0, 1.0]])), "items 0 and 2"),
    ("tokens", dict(tokens=TOK.astype(float)), "integer"),
    ("tokens", dict(tokens=TOK.astype(bool)), "integer"),
    ("tokens", dict(tokens=[[0, 1, 2], [2, 0]]), "rectangular"),
    ("tokens", dict(tokens=TOK - 1), "out of range"),
    ("tokens", dict(tokens=TOK + 1), "out of range"),
    ("tokens", dict(tokens=TOK[0]), "shape"),
    ("tokens", dict(tokens=TOK[:, :1], labels=TOK[:, 0]), "T >= 2"),
    ("tokens", dict(tokens=TOK[:, 1:], labels=TOK[:, 1], query_visible=False), "T >= 3"),
    ("labels", dict(labels=LAB.astype(float)), "integer"),
    ("labels", dict(labels=LAB[:1]), "shape"),
    ("labels", dict(labels=np.array([1, 3])), "out of range"),
    ("labels", dict(tokens=np.array([[0, 1, 2], [2, 2, 1]]), labels=np.array([1, 0])), "sample 1"),
    ("labels", dict(labels=np.array([1, 1]), query_visible=False), "sample 1"),
    ("query_visible", dict(query_visible=1), "boolean"),
]


@pytest.mark.parametrize("field,kw,what", BAD, ids=[f"{f}-{w}" for f, _, w in BAD])
def test_bad_input_is_an_input_error_naming_the_field(field, kw, what):
    args = {"E": E3, "tokens": TOK, "labels": LAB, **kw}
    with pytest.raises(InputError) as ei:
        NTPData(**args)
    msg = str(ei.value)
    assert f"'{field}'" in msg and what in msg and "\n" not in msg


def test_valid_reference_input_passes():
    """The base of the BAD table is valid (each bad case differs from it in one field)."""
    ds = NTPData(E3, TOK, LAB)
    assert ds.n == 2 and NTPData(E3, TOK, np.array([0, 0]), False).label_position.tolist() == [0, 1]


def test_batch_shapes_are_checked():
    with pytest.raises(InputError, match="'tokens'"):
        NTPData(np.stack([E3, E3]), TOK, LAB)
    with pytest.raises(InputError, match="'labels'"):
        NTPData(np.stack([E3, E3]), np.stack([TOK, TOK]), LAB)
    with pytest.raises(InputError, match="items 0 and 1 .*batch item 1"):
        NTPData(np.stack([E3, E3[[0, 0, 2]]]), np.stack([TOK, TOK]), np.stack([LAB, LAB]))
    with pytest.raises(InputError, match="sample 0 of batch item 1"):
        NTPData(np.stack([E3, E3]), np.stack([TOK, [[0, 0, 1], [2, 0, 1]]]), np.array([[1, 2], [2, 2]]))


def _tampered(tmp_path, **change):
    p = small().save(tmp_path / "d.npz")
    with np.load(p) as f:
        m = {k: f[k] for k in f.files}
    m.update(change)
    for k in [k for k, v in change.items() if v is None]:
        del m[k]
    q = tmp_path / "t.npz"
    np.savez(q, **m)
    return q


TAMPER = [
    (dict(tokens=small().tokens.astype(float)), "'tokens'"),
    (dict(labels=np.array([5, 0])), "'labels'"),
    (dict(labels=np.array([0, 0])), "'labels'"),
    (dict(E=np.full((3, 2), np.nan)), "'E'"),
    (dict(E=np.ones((3, 2))), "'E'"),
    (dict(labels=None), "'labels' is missing"),
    (dict(X=np.zeros((2, 3, 2))), "unknown field 'X'"),
    (dict(query_visible=np.array(2)), "'query_visible'"),
]


@pytest.mark.parametrize("change,what", TAMPER)
def test_tampered_file_is_an_input_error(tmp_path, change, what):
    q = _tampered(tmp_path, **change)
    with pytest.raises(InputError) as ei:
        data_mod.load(q)
    assert what in str(ei.value) and str(q) in str(ei.value)


def test_tampered_json_is_an_input_error(tmp_path):
    p = small().save(tmp_path / "d.json")
    obj = json.loads(p.read_text())
    for key, val, what in (("tokens", [[0.0, 1.0, 2.0], [2.0, 2.0, 1.0]], "'tokens'"), ("query_visible", "yes", "")):
        bad = {**obj, key: val}
        (tmp_path / "t.json").write_text(json.dumps(bad))
        with pytest.raises(InputError, match=what or key):
            data_mod.load(tmp_path / "t.json")


def test_alpha_does_not_apply_to_next_token_files(tmp_path):
    p = small().save(tmp_path / "d.npz")
    with pytest.raises(InputError, match="alpha"):
        data_mod.load(p, alpha=[0, 0])


# ---------------------------------------------------------------------- save / load, batches
@pytest.mark.parametrize("suffix", [".npz", ".json"])
@pytest.mark.parametrize("B", [None, 3])
@pytest.mark.parametrize("qv", [True, False])
def test_save_load_round_trip(tmp_path, suffix, B, qv):
    ds = generate.ntp(4, 3, 5, 6, graph="cyclic", seed=2, B=B, query_visible=qv)
    p = ds.save(tmp_path / f"ds{suffix}")
    if suffix == ".npz":
        with np.load(p, allow_pickle=False) as f:
            assert str(f["kind"]) == "ntp"
    back = data_mod.load(p)
    assert isinstance(back, NTPData) and back.query_visible is qv and back.batch_size == B
    for k in ("E", "tokens", "labels"):
        a, b = getattr(ds, k), getattr(back, k)
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert back.E.tobytes() == ds.E.tobytes()  # bit for bit
    assert isinstance(from_mapping(ds.to_dict()), NTPData)
    assert isinstance(data_mod.from_mapping(ds.to_dict()), NTPData)


def test_batch_stack_getitem_iter():
    items = [generate.ntp(3, 3, 4, 5, seed=s) for s in range(4)]
    b = NTPData.stack(items)
    assert b.batched and len(b) == 4 and b.batch_size == 4 and b.X.shape == (4, 3, 3, 5)
    for it, got in zip(items, b):
        for k in ("E", "tokens", "labels", "X", "label_mask", "label_position"):
            assert np.array_equal(getattr(it, k), getattr(got, k))
    assert np.array_equal(b[2].X, items[2].X) and np.array_equal(b.Z, np.stack([it.Z for it in items]))
    assert b.flat().X.shape == (4, 3, 3, 5) and b.flat().Y.shape == (4, 3) and b.flat().v.shape == (4, 5)
    with pytest.raises(TypeError):
        len(items[0])
    with pytest.raises(TypeError):
        items[0][0]
    for bad in ([], [items[0], generate.ntp(3, 2, 4, 5)], [items[0], generate.ntp(3, 3, 4, 5, query_visible=False)]):
        with pytest.raises(InputError):
            NTPData.stack(bad)


def test_repr_is_short_with_sizes():
    assert repr(generate.ntp(6, 4, 6, 8)) == "NTPData(n=6, T=4, K=6, d=8)"
    assert (
        repr(generate.ntp(2, 3, 4, 5, B=7, query_visible=False))
        == "NTPData(B=7, n=2, T=3, K=4, d=5, query_visible=False)"
    )


# ---------------------------------------------------------------------- generators
@pytest.mark.parametrize("graph", generate.GRAPHS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generator_promises(graph, seed):
    ds = generate.ntp(6, 4, 6, 8, graph=graph, seed=seed, B=20)
    assert ds.X.shape == (20, 6, 4, 8)
    assert np.allclose(np.linalg.norm(ds.E, axis=-1), 1.0, rtol=0, atol=1e-15)
    for t in ds.tokens.reshape(-1, 4):
        assert len(set(t.tolist())) == 4  # T distinct ids
    assert np.all(np.any(ds.tokens == ds.labels[..., None], axis=-1))  # every label occurs
    again = generate.ntp(6, 4, 6, 8, graph=graph, seed=seed, B=20)
    assert all(np.array_equal(getattr(ds, k), getattr(again, k)) for k in ("E", "tokens", "labels"))
    other = generate.ntp(6, 4, 6, 8, graph=graph, seed=seed + 10, B=20)
    assert not np.array_equal(ds.tokens, other.tokens) and not np.array_equal(ds.E, other.E)
    one = generate.ntp(6, 4, 6, 8, graph=graph, seed=seed)
    assert np.array_equal(one.tokens, ds.tokens[0]) and np.array_equal(one.E, ds.E[0])  # item 0 = unbatched


def test_vocabularies():
    rng = np.random.default_rng(0)
    for K, d in ((2, 2), (5, 5), (3, 8)):
        E = generate.vocabulary(K, d, "ortho", rng=rng)
        assert E.shape == (K, d) and np.allclose(E @ E.T, np.eye(K), rtol=0, atol=1e-15)
    for rho in (0.0, 0.25, 0.5, 0.9):
        E = generate.vocabulary(4, 6, "equicorr", rho=rho, rng=rng)
        G = E @ E.T
        assert np.allclose(np.diag(G), 1.0, rtol=0, atol=1e-15)
        assert np.allclose(G[~np.eye(4, dtype=bool)], rho, rtol=0, atol=1e-15)
    E = generate.vocabulary(7, 3, "random", rng=rng)
    assert np.allclose(np.linalg.norm(E, axis=1), 1.0, rtol=0, atol=1e-15)
    assert np.array_equal(generate.vocabulary(4, 5, rng=3), generate.vocabulary(4, 5, rng=np.random.default_rng(3)))


def test_query_invisible_labels_avoid_the_query():
    ds = generate.ntp(6, 3, 5, 4, seed=0, B=50, query_visible=False)
    assert np.all(np.any(ds.tokens[..., :-1] == ds.labels[..., None], axis=-1))


@pytest.mark.parametrize(
    "kw,what",
    [
        (dict(vocab="ortho", K=5, d=4), "K <= d"),
        (dict(vocab="equicorr", K=4, d=4), "K <= d - 1"),
        (dict(T=5, K=4), "T <= K"),
        (dict(graph="cyclic", n=1), "n >= 2"),
        (dict(vocab="nope"), "vocab"),
        (dict(graph="dag"), "graph"),
        (dict(rho=1.0, vocab="equicorr"), "rho"),
        (dict(T=2, query_visible=False), "T >= 3"),
        (dict(n=0), "n must"),
    ],
)
def test_generator_bad_arguments(kw, what):
    args = {"n": 3, "T": 3, "K": 4, "d": 6, **kw}
    with pytest.raises(InputError, match=what):
        generate.ntp(**args)


def test_plant_cycle_keeps_ids_distinct():
    rng = np.random.default_rng(0)
    for _ in range(300):
        K = int(rng.integers(3, 8))
        T = int(rng.integers(3, K + 1))
        qv = bool(rng.integers(0, 2))
        seq = rng.permutation(K)[:T]
        q, y, b = (int(x) for x in rng.permutation(K)[:3])
        s = generate.plant_cycle(seq, q, y, b, qv, lambda m: int(rng.integers(0, m)))
        vis = s if qv else s[:-1]
        assert len(set(s.tolist())) == T and s[-1] == q and y in vis and b in vis


# ---------------------------------------------------------------------- the ntp strategy
OPTIONS = [
    {},
    {"vocab": "ortho"},
    {"vocab": "equicorr", "rho": 0.25},
    {"graph": "cyclic"},
    {"graph": "acyclic", "query_visible": False},
    {"bits": 1, "T": (2, 3), "K": (2, 3), "d": 2},
]


@pytest.mark.parametrize("opts", OPTIONS, ids=[str(o) for o in OPTIONS])
def test_strategy_draws_are_dyadic_and_valid(opts):
    bits = opts.get("bits", 3)

    @settings(max_examples=40, database=None, deadline=None)
    @given(S.ntp(**opts))
    def check(ds):
        assert isinstance(ds, NTPData) and not ds.batched
        assert ds.query_visible is opts.get("query_visible", True)
        for t in ds.tokens:
            assert len(set(t.tolist())) == ds.T
        vocab = opts.get("vocab", "random")
        if vocab == "random":
            assert np.array_equal(ds.E * 2**bits, np.round(ds.E * 2**bits))  # k / 2^bits
        elif vocab == "ortho":
            assert np.array_equal(ds.E @ ds.E.T, np.eye(ds.K))  # exactly
        else:  # exactly equicorrelated: every inner product, in rationals
            G = [[sum(Fraction(a) * Fraction(b) for a, b in zip(u, w)) for w in ds.E] for u in ds.E]
            assert len({G[k][k] for k in range(ds.K)}) == 1
            assert len({G[k][m] for k in range(ds.K) for m in range(ds.K) if k != m}) == 1
            assert abs(float(G[0][1] / G[0][0]) - opts["rho"]) < 1e-15

    check()


def test_strategy_shrinks_to_the_smallest_simplest_data():
    ds = find(S.ntp(n=(1, 2), T=(2, 3), K=(2, 4), d=(2, 3)), lambda ds: True, settings=settings(database=None))
    assert (ds.n, ds.T, ds.K, ds.d) == (1, 2, 2, 2)
    assert ds.tokens.tolist() == [[0, 1]] and ds.labels.tolist() == [0]
    assert np.count_nonzero(ds.E) <= 1  # zeros, up to the step that keeps the rows distinct


def test_strategy_sizes_follow_the_implied_relations():
    for opts, need in (
        ({"vocab": "ortho"}, lambda ds: ds.d >= ds.K >= ds.T),
        ({"vocab": "equicorr"}, lambda ds: ds.d >= ds.K + 1),
        ({"graph": "cyclic"}, lambda ds: ds.n >= 2),
        ({"query_visible": False}, lambda ds: ds.T >= 3),
    ):
        assert all(need(S.batch("ntp", 2, seed=s, **opts)) for s in range(10))
    with pytest.raises(InputError, match="leave no d"):
        S.plan("ntp", {"vocab": "ortho", "K": 5, "d": (2, 4)})
    with pytest.raises(InputError, match="leave no K"):
        S.plan("ntp", {"T": 4, "K": 3})
    with pytest.raises(InputError, match="rho"):
        S.plan("ntp", {"rho": 1.0})
    with pytest.raises(InputError, match="unknown hypothesis"):
        S.plan("ntp", {"alpha": "opt"})
    assert "K >= T" in S.schema("ntp")["relations"]


@pytest.mark.parametrize("seed", [0, 5])
def test_batch_follows_the_generator_law(seed):
    params = {"n": 3, "T": 3, "K": (4, 6), "d": 7, "graph": "acyclic", "vocab": "equicorr"}
    b = S.batch("ntp", 5, seed=seed, **params)
    rng = np.random.default_rng(seed)
    sz = S.plan("ntp", params).draw_sizes(lambda lo, hi: rng.integers(lo, hi + 1))  # as batch() does
    ref = generate.ntp(
        sz["n"], sz["T"], sz["K"], sz["d"], vocab="equicorr", graph="acyclic", seed=int(rng.integers(0, 2**32 - 1)), B=5
    )
    assert all(np.array_equal(getattr(b, k), getattr(ref, k)) for k in ("E", "tokens", "labels"))


def test_saved_counterexample_of_an_ntp_claim_replays(tmp_path):
    """The claims machinery on next-token data: search, shrink, save the case, load and replay it."""
    from attsvm.claims import Outcome, claim
    from attsvm.claims.counterexample import load
    from attsvm.claims.runner import replay, run_claim

    @claim(id="ntp-planted", title="labels sit at position 0", origin="expected-false", hypotheses={"data": "ntp"})
    def planted(case):
        m = -float(np.max(case.data.label_position))
        return Outcome(ok=m >= 0, margin=m)

    @planted.confirm
    def _(case, out):
        m = -float(np.max(case.data.label_position))
        return Outcome(ok=m >= 0, margin=m, how="exact")

    r = run_claim(planted, seed=0, budget=0.2, out=tmp_path)
    assert r.verdict == "refuted" and r.sizes == {"n": 1, "T": 2, "d": 2, "K": 2}
    ds, info = load(r.counterexample, "ntp-planted")
    assert isinstance(ds, NTPData) and ds.label_position.tolist() == [1]
    assert replay(planted, r.counterexample).verdict == "reproduced"
