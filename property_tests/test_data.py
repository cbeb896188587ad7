"""Data sets: validation (one-line errors naming the field), immutability, io, batching, flat views."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm import Dataset, InputError, generate, load, save


def _good(n=3, T=4, d=2, seed=0):
    return generate.paper_law(n, T, d, seed=seed)


def _fields(ds):
    return dict(X=np.array(ds.X), Y=np.array(ds.Y), Z=np.array(ds.Z), v=np.array(ds.v))


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda f: f.update(X=f["X"][0]), "X"),
        (lambda f: f.update(Z=f["Z"][:, :1]), "Z"),
        (lambda f: f.update(v=np.ones(5)), "v"),
        (lambda f: f.update(Y=f["Y"][:2]), "Y"),
        (lambda f: f["X"].__setitem__((0, 0, 0), np.nan), "X"),
        (lambda f: f["Z"].__setitem__((0, 0), np.inf), "Z"),
        (lambda f: f["v"].__setitem__(0, -np.inf), "v"),
        (lambda f: f["Y"].__setitem__(0, 0.5), "Y"),
        (lambda f: f["Y"].__setitem__(0, 0.0), "Y"),
        (lambda f: f.update(alpha=np.array([0, 1, 9])), "alpha"),
        (lambda f: f.update(alpha=np.array([0, -1, 2])), "alpha"),
        (lambda f: f.update(alpha=np.array([0.5, 1, 2])), "alpha"),
        (lambda f: f.update(alpha=np.array([0, 1])), "alpha"),
        (lambda f: f.update(X=np.zeros((3, 0, 2))), "X"),
    ],
)
def test_bad_fields_are_named(mutate, field):
    f = _fields(_good())
    mutate(f)
    with pytest.raises(InputError) as e:
        Dataset(**f)
    msg = str(e.value)
    assert f"'{field}'" in msg and "\n" not in msg


def test_tie_needs_explicit_alpha():
    X = np.zeros((1, 3, 2))
    X[0, 0] = [1.0, 0.0]
    X[0, 1] = [1.0, 5.0]  # same score as token 0 under v = e1
    X[0, 2] = [-1.0, 0.0]
    kw = dict(Y=np.ones(1), Z=np.ones((1, 2)), v=np.array([1.0, 0.0]))
    with pytest.raises(InputError, match="tie"):
        Dataset(X, **kw)
    ds = Dataset(X, alpha=np.array([1]), **kw)
    assert ds.selection.tolist() == [1]


def test_arrays_are_immutable():
    ds = _good()
    with pytest.raises(ValueError):
        ds.X[0, 0, 0] = 1.0
    with pytest.raises(AttributeError):
        ds.X = np.zeros(3)


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_roundtrip(tmp_path, suffix):
    ds = generate.paper_law(3, 4, 2, seed=5).with_alpha(np.array([0, 1, 2]))
    p = save(ds, tmp_path / f"d{suffix}")
    back = load(p)
    for k in ("X", "Y", "Z", "v", "alpha"):
        np.testing.assert_array_equal(getattr(back, k), getattr(ds, k))
    assert not list(tmp_path.glob("*.tmp-attsvm"))


def test_roundtrip_batch_and_forms(tmp_path):
    for ds in (
        generate.paper_law(2, 3, 2, seed=1, B=4),
        generate.paper_law(2, 3, 2, seed=1, self_attention=True),
        generate.sequence(2, 3, 2, K=2, seed=1),
        generate.causal(2, 3, 2, seed=1),
    ):
        back = load(save(ds, tmp_path / "x.npz"))
        assert back.kind == ds.kind and back.X.shape == ds.X.shape
        np.testing.assert_array_equal(back.Z, ds.Z)
        np.testing.assert_array_equal(back.selection, ds.selection)


@pytest.mark.parametrize(
    "content, needle",
    [(b"", "empty"), (b"garbage bytes", "not a valid .npz"), (None, "no such file")],
)
def test_bad_files(tmp_path, content, needle):
    p = tmp_path / "bad.npz"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(InputError, match=needle):
        load(p)


def test_bad_json_and_missing_field(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="JSON"):
        load(p)
    ds = _good()
    d = {k: np.asarray(v).tolist() for k, v in _fields(ds).items() if k != "v"}
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match="'v' is missing"):
        load(p)
    np.savez(tmp_path / "p.npz", X=ds.X, Y=ds.Y, Z=ds.Z, v=ds.v, extra=np.ones(2))
    with pytest.raises(InputError, match="unknown field 'extra'"):
        load(tmp_path / "p.npz")


def test_pickled_object_arrays_rejected(tmp_path):
    ds = _good()
    p = tmp_path / "obj.npz"
    np.savez(p, X=np.array([ds.X, None], dtype=object), Y=ds.Y, Z=ds.Z, v=ds.v)
    with pytest.raises(InputError):
        load(p)


@given(st.integers(1, 4), st.integers(2, 5), st.integers(2, 4), st.integers(1, 3), st.integers(0, 2**16))
def test_batch_equals_items(n, T, d, B, seed):
    b = generate.paper_law(n, T, d, seed=seed, B=B)
    assert b.batched and len(b) == B
    items = list(b)
    for k, it in enumerate(items):
        np.testing.assert_array_equal(it.opt, b.opt[k])
        np.testing.assert_array_equal(it.scores, b.scores[k])
    again = Dataset.stack(items)
    np.testing.assert_array_equal(again.X, b.X)


def test_causal_flat_view_and_opt():
    ds = generate.causal(2, 4, 3, seed=2)
    f = ds.flat()
    assert f.X.shape == (8, 4, 3) and f.mask.shape == (8, 4)
    assert f.mask[0].tolist() == [True, False, False, False]
    assert np.all(ds.opt <= np.arange(4))  # query k selects a visible token
    # independent computation of opt: masked argmax by loops
    g = ds.scores
    for i in range(2):
        for k in range(4):
            assert ds.opt[i, k] == int(np.argmax(g[i, k, : k + 1]))


FORMS = {
    "cross": lambda: generate.paper_law(3, 4, 2, seed=1),
    "self": lambda: generate.paper_law(3, 4, 2, seed=1, self_attention=True),
    "sequence": lambda: generate.sequence(2, 4, 3, 2, seed=1),
    "causal": lambda: generate.causal(2, 4, 3, seed=1),
    "batch": lambda: generate.sequence(2, 4, 3, 2, seed=1, B=3),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_flat_view_is_built_once_and_read_only(form):
    """One flat view per data set object: the same object on every call, every array read-only, so a planted
    in-place write is an error instead of a silent change of the data set every later call would see."""
    ds = FORMS[form]()
    f = ds.flat()
    assert ds.flat() is f
    arrays = {k: a for k, a in vars(f).items() if isinstance(a, np.ndarray)}
    assert {"X", "Y", "Z", "v", "alpha", "owner", "query"} <= set(arrays)
    for name, a in arrays.items():
        assert not a.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            a[(0,) * a.ndim] = a[(0,) * a.ndim]
    other = FORMS[form]()  # an equal data set is another object, with its own view
    assert other.flat() is not f
    np.testing.assert_array_equal(other.flat().X, f.X)


def test_flat_view_is_neither_pickled_nor_copied():
    """The view is kept beside the data set, not in it: a pickle (what worker processes receive), a copy and
    ``dataclasses.replace`` are the data set alone, and each gets a view of its own."""
    import copy
    import dataclasses
    import pickle

    ds = generate.causal(2, 4, 3, seed=1, B=2)
    before = pickle.dumps(ds)
    f = ds.flat()
    assert pickle.dumps(ds) == before  # nothing of the view travels
    back = pickle.loads(before)
    assert back.flat() is not f and back.flat() is back.flat()
    np.testing.assert_array_equal(back.flat().X, f.X)
    np.testing.assert_array_equal(back.flat().mask, f.mask)
    assert copy.deepcopy(ds).flat() is not f and copy.copy(ds).flat() is not f
    seq = generate.sequence(2, 4, 3, 2, seed=1, B=2)  # replace: data with stored queries (causal data derive them)
    flipped = dataclasses.replace(seq, Y=-seq.Y)
    assert flipped.flat() is not seq.flat()
    np.testing.assert_array_equal(flipped.flat().Y, -seq.flat().Y)
    assert ds == ds and ds != back  # identity equality, as before


def test_causal_alpha_must_be_visible():
    ds = generate.causal(1, 3, 2, seed=0)
    with pytest.raises(InputError, match="alpha"):
        ds.with_alpha(np.array([[1, 0, 0]]))


def test_generators():
    ds = generate.paper_law(3, 4, 5, seed=0)
    np.testing.assert_allclose(np.linalg.norm(ds.X, axis=-1), 1.0)
    np.testing.assert_allclose(np.linalg.norm(ds.Z, axis=-1), 1.0)
    eq = generate.equal_scores(4, 5, 3, seed=3)
    g = eq.scores
    for i in range(4):
        others = np.delete(g[i], eq.opt[i])
        assert np.all(others == others[0]) and g[i, eq.opt[i]] > others[0]  # bit-exact
    inf = generate.centroid_infeasible(2, 4, 2, seed=1)
    np.testing.assert_allclose(inf.X[0, 0], inf.X[0, 1:].mean(axis=0))
    assert inf.alpha[0] == 0
    assert generate.overparam(3, 5, seed=0).d == 4


# ---------------------------------------------------------------------- real data, integer selections, near-ties
def _base():
    return generate.paper_law(3, 4, 3, seed=0)


@pytest.mark.parametrize("field", ["X", "Z", "v"])
def test_complex_data_rejected(field):
    m = _base().to_dict()
    m[field] = np.asarray(m[field]) + 1e-3j
    with pytest.raises(InputError, match=rf"field '{field}' is complex"):
        Dataset(m["X"], m["Y"], m["Z"], m["v"])


def test_complex_file_rejected_at_the_cli(tmp_path, capsys):
    from attsvm.cli import main

    m = {k: np.asarray(v) for k, v in _base().to_dict().items() if k != "kind"}
    m["X"] = m["X"] + 0j  # complex dtype even with zero imaginary part: the file is not real data
    np.savez(tmp_path / "c.npz", **m)
    assert main(["solve", str(tmp_path / "c.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: field 'X' is complex; attsvm takes real data (split real and imaginary parts)"]


@pytest.mark.parametrize("alpha", [[0.0, 1.0, 2.0], [0.5, 1.0, 2.0], ["0", "1", "2"]])
def test_alpha_must_have_an_integer_dtype(alpha):
    ds = _base()
    with pytest.raises(InputError, match="field 'alpha' must hold integer token indices"):
        ds.with_alpha(np.asarray(alpha))


def test_integer_alpha_accepted():
    assert _base().with_alpha(np.array([0, 1, 2])).selection.tolist() == [0, 1, 2]


def _near_tie(gap: float):
    """Input 0's runner-up token moved orthogonally to v, its score set to opt's + gap (a distinct token)."""
    ds = _base()
    X, v, Y = ds.X.copy(), ds.v, ds.Y
    g = Y[0] * X[0] @ v
    o = int(np.argmax(g))
    j = (o + 1) % 4
    u = np.array([1.0, -1.0, 0.5])
    u -= (u @ v) / (v @ v) * v
    X[0, j] = X[0, o] + 0.5 * u / np.linalg.norm(u) + Y[0] * gap * v / (v @ v)
    return X, ds.Y, ds.Z, v, j


def test_near_tie_warns_and_names_the_input():
    from attsvm.data import score_gap
    from attsvm.errors import NearTieWarning

    X, Y, Z, v, j = _near_tie(4e-16)
    g = score_gap(Y[:, None] * np.einsum("ntd,d->nt", X, v))
    assert 0 < g[0] < 1e-15  # the construction is a near-tie, not an exact tie
    with pytest.warns(NearTieWarning, match=r"near-tie for the optimal token at index \(0,\)"):
        ds = Dataset(X, Y, Z, v)
    assert ds.opt[0] == j
    import warnings

    with warnings.catch_warnings():  # an explicit selection is the user's decision: no warning
        warnings.simplefilter("error")
        Dataset(X, Y, Z, v, alpha=ds.opt)


def test_clear_gap_does_not_warn():
    import warnings

    X, Y, Z, v, _ = _near_tie(1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Dataset(X, Y, Z, v)


def test_score_gap_against_a_loop():
    from attsvm.data import score_gap

    rng = np.random.default_rng(3)
    g = rng.standard_normal((5, 4))
    mask = np.tril(np.ones((4, 4), bool))[1]  # two visible tokens
    want = [sorted(r)[-1] - sorted(r)[-2] for r in g]
    assert np.allclose(score_gap(g), want)
    want_m = [max(r[:2]) - min(r[:2]) for r in g]
    assert np.allclose(score_gap(g, mask), want_m)
    assert np.all(np.isinf(score_gap(g[:, :1])))


def test_near_tie_is_one_warning_line_at_the_cli(tmp_path, capsys):
    from attsvm.cli import main

    X, Y, Z, v, _ = _near_tie(4e-16)
    np.savez(tmp_path / "nt.npz", X=X, Y=Y, Z=Z, v=v)
    assert main(["solve", str(tmp_path / "nt.npz")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: near-tie for the optimal token at index (0,)"), err
