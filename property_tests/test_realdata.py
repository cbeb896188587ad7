"""The real-data experiments ``text`` and ``faces`` (``numerics/text.py``, ``numerics/faces.py``): their data
pipelines checked against the definitions they state, the padding mask of :class:`attsvm.data.Dataset` against
inputs without padding, and the optional extra.

The smoke runs themselves (figure, caption, the specs' checks) are ``test_numerics_smoke.py::test_smoke``, which
runs every discovered spec.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attsvm import corpus, embedding, gd, svm
from attsvm import twolayer as tl
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.experiments import load_spec
from attsvm.model import grad_W
from attsvm.patches import patch_tokens

pytest.importorskip("gensim")
pytest.importorskip("skimage")

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------------- tokenising
def test_words_are_lower_case_runs_with_inner_apostrophes_and_hyphens():
    assert corpus.words("It's a Roller-Coaster ride , isn't it ? -- 21st century's") == [
        "it's", "a", "roller-coaster", "ride", "isn't", "it", "21st", "century's",
    ]  # fmt: skip
    assert corpus.words(" . . . ") == []


def test_corpus_ids_and_mask_pad_the_sentences():
    c = corpus.tokenise(["b a b", "c", "a c b a"], np.array([1.0, -1.0, 1.0]))
    assert c.vocab == ("a", "b", "c")
    assert c.ids.tolist() == [[1, 0, 1, -1], [2, -1, -1, -1], [0, 2, 1, 0]]
    assert c.mask.tolist() == [[True, True, True, False], [True, False, False, False], [True] * 4]
    assert c.sentence(2) == ["a", "c", "b", "a"]
    with pytest.raises(InputError, match="sentence 1 has no word"):
        corpus.tokenise(["a", "!"], np.array([1.0, 1.0]))


@pytest.fixture(scope="module")
def polarity():
    return corpus.polarity()


def test_polarity_labels_are_read_from_the_lines_100_negative_then_100_positive(polarity):
    """The layout stated by the issue and gensim's file: lines 1-100 start ``__label__neg``, 101-200
    ``__label__pos`` (read here from the raw bytes, independently of :func:`attsvm.corpus.polarity`)."""
    from gensim.test.utils import datapath

    raw = Path(datapath("pang_lee_polarity.cor")).read_bytes().splitlines()
    assert len(raw) == 200
    assert all(line.startswith(b"__label__neg ") for line in raw[:100])
    assert all(line.startswith(b"__label__pos ") for line in raw[100:])
    assert polarity.labels.tolist() == [-1.0] * 100 + [1.0] * 100
    assert polarity.sentence(0) == ["simplistic", "silly", "and", "tedious"]
    assert polarity.ids.shape == (200, 46) and len(polarity.vocab) == 1675
    assert np.array_equal(polarity.mask.sum(axis=1), polarity.lengths)
    assert np.all(polarity.ids[~polarity.mask] == -1) and np.all(polarity.ids[polarity.mask] >= 0)


# ------------------------------------------------------------------------------------------- embeddings
def test_ppmi_matches_its_definition_on_a_toy_corpus():
    """PPMI from explicit pair loops (window 1) on "a b a c": pairs (a,b), (b,a), (a,c), each both ways."""
    c = corpus.tokenise(["a b a c"], np.array([1.0]))
    C = embedding.cooccurrence(c.ids, c.mask, 3, 1)
    want = np.zeros((3, 3))
    seq = [0, 1, 0, 2]
    for t in range(3):
        want[seq[t], seq[t + 1]] += 1
        want[seq[t + 1], seq[t]] += 1
    assert np.array_equal(C, want)
    P = embedding.ppmi(C)
    tot = want.sum()
    for a in range(3):
        for b in range(3):
            pmi = np.log(want[a, b] * tot / (want[a].sum() * want[b].sum())) if want[a, b] else 0.0
            assert P[a, b] == pytest.approx(max(pmi, 0.0), abs=1e-15)


def test_ppmi_embedding_is_the_top_eigenvectors(polarity):
    E = embedding.ppmi_embedding(polarity.ids, polarity.mask, len(polarity.vocab), 4)
    from scipy.sparse.linalg import eigsh

    M = embedding.ppmi(embedding.cooccurrence(polarity.ids, polarity.mask, len(polarity.vocab), 2))
    lam = np.sort(eigsh(M, k=4, which="LA", v0=np.ones(len(M)), tol=1e-12)[0])[::-1]  # ARPACK: independent
    assert np.allclose(E.T @ E, np.diag(lam), atol=1e-9)  # orthogonal columns of squared norm lambda_j
    assert np.allclose(M @ E, E * lam, atol=1e-9)  # eigenvectors
    big = np.argmax(np.abs(E), axis=0)
    assert np.all(E[big, np.arange(4)] > 0)  # the sign convention


_EMBED = (
    "import hashlib, sys; sys.path.insert(0, {root!r}); from attsvm import corpus, embedding; "
    "c = corpus.polarity(); "
    "print(hashlib.sha256(embedding.embed('ppmi', c.ids, c.mask, len(c.vocab), 16).tobytes()).hexdigest())"
)


def test_embeddings_are_bit_reproducible_across_processes(polarity):
    """Two fresh interpreters (different hash salts, default BLAS threads) build a PPMI embedding bit-identical to
    this process's (one BLAS thread, conftest); the random embedding is a function of its seed."""
    code = _EMBED.format(root=str(ROOT))
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env={"PYTHONHASHSEED": str(s), "PATH": "/usr/bin:/bin"})
        for s in (1, 2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    V = len(polarity.vocab)
    here = hashlib.sha256(embedding.embed("ppmi", polarity.ids, polarity.mask, V, 16).tobytes()).hexdigest()
    assert outs == [here, here]
    r0, r1 = (embedding.embed("random", polarity.ids, polarity.mask, V, 16, seed=s) for s in (0, 1))
    assert np.array_equal(r0, embedding.unit_rows(np.random.default_rng(0).normal(size=(V, 16)) / 4.0))
    assert not np.allclose(r0, r1)


def test_sentence_tokens_are_distinct_and_padding_is_zero(polarity):
    E = embedding.embed("random", polarity.ids, polarity.mask, len(polarity.vocab), 16)
    X = embedding.sentence_tokens(E, polarity.ids, polarity.mask, 1.0)
    assert np.allclose(np.linalg.norm(X[polarity.mask][:, :16], axis=1), 1.0)
    assert np.all(X[~polarity.mask] == 0)
    gap = np.abs(X[:, :, None, :] - X[:, None, :, :]).sum(-1)
    both = polarity.mask[:, :, None] & polarity.mask[:, None, :] & ~np.eye(46, dtype=bool)
    assert np.all(gap[both] > 1e-6)  # repeated words ("the ... the") differ by the position code
    words_only = np.abs(X[:, :, None, :16] - X[:, None, :, :16]).sum(-1)
    assert np.any(words_only[both] == 0)  # ... and would coincide without it


# ------------------------------------------------------------------------------------------- the mask
def _ragged(seed=0, n=6, T=5, d=3):
    rng = np.random.default_rng(seed)
    L = rng.integers(2, T + 1, size=n)
    L[0] = T
    X = rng.normal(size=(n, T, d))
    mask = np.arange(T) < L[:, None]
    return X, np.where(rng.random(n) < 0.5, 1.0, -1.0), rng.normal(size=(n, d)), rng.normal(size=d), mask, L


def test_masked_gradients_equal_those_of_the_unpadded_inputs():
    """One layer and two layers: the gradient of the padded, masked data set is the mean of the gradients of each
    input alone, at its own length (no padding anywhere); and the engine's first GD step is that gradient."""
    X, Y, Z, v, mask, L = _ragged()
    rng = np.random.default_rng(1)
    W, W1, W2 = (0.5 * rng.normal(size=(3, 3)) for _ in range(3))
    Xp = np.where(mask[..., None], X, 1e3)  # garbage in the padding: it must not matter
    ds = Dataset(Xp, Y, Z, v, mask=mask)
    one = [Dataset(X[i : i + 1, : L[i]], Y[i : i + 1], Z[i : i + 1], v) for i in range(len(L))]
    g = np.mean([grad_W(o, W) for o in one], axis=0)
    assert np.allclose(grad_W(ds, W), g, rtol=1e-12, atol=1e-14)
    r = gd.run(ds, param="W", algo="gd", lr=0.5, steps=1, init=W)
    assert np.allclose(np.asarray(r.W)[0], W - 0.5 * g, rtol=1e-12, atol=1e-14)
    for residual in (False, True):
        G = [tl.gradients(o, W1, W2, residual=residual) for o in one]
        g1, g2 = np.mean([a for a, _ in G], axis=0), np.mean([b for _, b in G], axis=0)
        h1, h2 = tl.gradients(ds, W1, W2, residual=residual)
        assert np.allclose(h1, g1, rtol=1e-12, atol=1e-14) and np.allclose(h2, g2, rtol=1e-12, atol=1e-14)
        r = gd.run(ds, param="twolayer", algo="gd", lr=0.5, steps=1, init={"W1": W1, "W2": W2}, residual=residual)
        assert np.allclose(np.asarray(r.W1)[0], W1 - 0.5 * g1, rtol=1e-10, atol=1e-12)
        assert np.allclose(np.asarray(r.W2)[0], W2 - 0.5 * g2, rtol=1e-10, atol=1e-12)


def test_masked_svm_ignores_the_padding():
    """Att-SVM of the masked data equals Att-SVM with the padding tokens changed arbitrarily, and differs from the
    SVM of the same arrays with the padding visible; opt never selects padding."""
    X, Y, Z, v, mask, _ = _ragged(seed=3, n=8, T=4, d=4)
    a = svm.solve_fro(Dataset(X, Y, Z, v, mask=mask))
    b = svm.solve_fro(Dataset(np.where(mask[..., None], X, -7.0), Y, Z, v, mask=mask))
    assert a.status == b.status == "optimal"
    assert np.allclose(a.W, b.W, rtol=1e-7, atol=1e-9)
    ds = Dataset(X, Y, Z, v, mask=mask)
    assert np.all(np.take_along_axis(mask, np.asarray(ds.opt)[:, None], axis=1))
    full = Dataset(X, Y, Z, v, alpha=np.asarray(ds.opt))
    c = svm.solve_fro(full)
    assert c.status != "optimal" or not np.allclose(c.W, a.W, rtol=1e-3)


def test_mask_round_trips_and_batches(tmp_path):
    X, Y, Z, v, mask, _ = _ragged(seed=4)
    ds = Dataset(X, Y, Z, v, mask=mask)
    for suffix in (".npz", ".json"):
        back = ds.save(tmp_path / f"m{suffix}")
        from attsvm.data import load

        assert np.array_equal(load(back).mask, mask)
    batch = Dataset.stack([ds, ds])
    assert batch.mask.shape == (2, *mask.shape) and np.array_equal(batch[1].mask, mask)
    assert np.array_equal(ds.with_alpha(np.asarray(ds.opt)).mask, mask)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"mask": np.ones((6, 5))}, "must be boolean"),
        ({"mask": np.ones((6, 4), dtype=bool)}, "must have shape"),
        ({"mask": np.zeros((6, 5), dtype=bool)}, "hides every token"),
        ({"mask": np.ones((6, 5), dtype=bool), "alpha": np.full(6, 4), "hide": 4}, "selects a token the mask hides"),
    ],
)
def test_bad_masks_are_one_line_input_errors(kwargs, needle):
    X, Y, Z, v, _, _ = _ragged()
    kw = dict(kwargs)
    hide = kw.pop("hide", None)
    if hide is not None:
        kw["mask"] = kw["mask"].copy()
        kw["mask"][:, hide] = False
    with pytest.raises(InputError, match=needle):
        Dataset(X, Y, Z, v, **kw)
    with pytest.raises(InputError, match="applies to cross/self data"):
        Dataset(X, Y[:, None].repeat(5, 1), None, v, kind="causal", mask=np.ones((6, 5), dtype=bool))


# ------------------------------------------------------------------------------------------- faces
def test_lfw_layout_faces_first():
    """``skimage.data.lfw_subset``: 200 images, the first 100 faces. Checked without the docstring: each of the
    first 100 is closer (cosine of the centred images) to the sum of the other 99 of them than to the sum of the
    last 100, and the last 100 the other way round, for at least 80% of each (measured: 95% and 85%; with the halves
    swapped, as a wrong layout would have them, 5% and 15%)."""
    fc = load_spec("faces")
    images, Y = fc.load_faces()
    assert images.shape == (200, 25, 25) and images.min() >= 0 and images.max() <= 1
    assert Y.tolist() == [1.0] * 100 + [-1.0] * 100
    flat = images.reshape(200, -1)
    flat = flat - flat.mean(axis=1, keepdims=True)
    face, other = flat[:100].sum(0), flat[100:].sum(0)

    def cos(a, b):
        return a @ b / (np.linalg.norm(a) * np.linalg.norm(b))

    near_face = [cos(flat[i], (face - flat[i] if i < 100 else face)) > cos(flat[i], (other if i < 100 else other -
                 flat[i])) for i in range(200)]  # fmt: skip
    assert np.mean(near_face[:100]) >= 0.8 and np.mean(np.logical_not(near_face[100:])) >= 0.8


def test_grid_position_code():
    images = np.arange(2 * 10 * 15, dtype=float).reshape(2, 10, 15)
    X = patch_tokens(images, (5, 5), "grid")
    assert X.shape == (2, 6, 27)
    assert np.array_equal(X[1, 4, :25], images[1, 5:10, 5:10].ravel())
    assert X[0, 4, 25:].tolist() == [1.0, 0.5] and X[0, 2, 25:].tolist() == [0.0, 1.0]
    with pytest.raises(InputError, match="do not tile"):
        patch_tokens(images, (4, 5))
    with pytest.raises(InputError, match="unknown position code"):
        patch_tokens(images, (5, 5), "sinus")


# ------------------------------------------------------------------------------------------- the extra
def test_missing_extra_is_one_line_naming_it(tmp_path):
    """Without the package (its import made to fail) each experiment exits 2 with one line naming the extra, and
    writes nothing (both in one interpreter: ``text`` without gensim, then ``faces`` without scikit-image)."""
    code = (
        f"import sys, io, contextlib; sys.path.insert(0, {str(ROOT)!r}); from attsvm.cli import main\n"
        "for name, module in (('text', 'gensim'), ('faces', 'skimage')):\n"
        "    saved = sys.modules.get(module); sys.modules[module] = None; err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        f"        rc = main(['reproduce', name, '--smoke', '--out', {str(tmp_path)!r} + '/' + name, '--quiet'])\n"
        "    print(rc, repr(err.getvalue()))\n"
        "    sys.modules.pop(module)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = p.stdout.strip().splitlines()
    assert len(rows) == 2, p.stdout
    for row, name in zip(rows, ("text", "faces")):
        rc, err = row.split(" ", 1)
        lines = eval(err).strip().splitlines()  # the repr printed above
        assert rc == "2" and len(lines) == 1, row
        assert lines[0].startswith("error: ") and "pip install 'attsvm[data]'" in lines[0], row
        assert not (tmp_path / name).exists() or not any((tmp_path / name).iterdir())
