r"""Text — the max-margin theory of one- and two-layer attention on real sentences (THEORY §1, §2; the two-layer
model of issue 30), on Pang & Lee's movie-review polarity sentences as gensim ships them for its tests
(``gensim.test.utils.datapath("pang_lee_polarity.cor")``: 200 lines, each ``__label__neg`` or ``__label__pos`` and
a sentence; 100 negative then 100 positive; nothing downloaded; needs the optional extra ``attsvm[data]``).

**Data.** A sentence is its words (:mod:`attsvm.corpus`: lower case, runs of letters/digits with inner
apostrophes or hyphens, punctuation dropped), at most ``max_words`` of them (default 32: 18 of the 200 sentences
are longer and lose their tail); label $Y=+1$ for ``__label__pos``, read from each line. Word vectors
(:mod:`attsvm.embedding`), both built offline from the 200 sentences alone and bit-reproducible:

* ``random``: i.i.d. Gaussian vectors (seed 0), a control that knows nothing about the words;
* ``ppmi``: a small embedding trained on the corpus — the top-$k$ eigenvectors of the positive pointwise mutual
  information of co-occurrence within 2 words (chosen over word2vec: a closed form with no stochastic training or
  salted string hashing, and suited to ~3700 running words).

Both have unit rows, $k$ = ``dim`` (16). Token $t$ of a sentence is $x_t=(E_{w_t};\pi_t)\in\mathbb R^{k+2}$ with the
position code $\pi_t=(\cos\frac{\pi t}{T},\sin\frac{\pi t}{T})$, so a word repeated in a sentence gives distinct
tokens; the sentences are padded to $T$ words and the padding is masked (:class:`attsvm.data.Dataset` ``mask``:
invisible to the softmax, the head's fit, the SVMs and GD). Query: the sentence's mean token
$z_i=\frac1{L_i}\sum_{t<L_i}x_{it}$ (cross-attention; it differs from sentence to sentence, so $W$ is not reduced to
a prompt vector as a fixed query would reduce it).

**Head.** As ``digits`` (:func:`attsvm.realdata.fit_token_head`): fit first on each visible token of the training
sentences, labelled with its sentence's label, then frozen; $\gamma_{it}=Y_iv^\top x_{it}$ is the word's vote for
the true class, $\mathrm{opt}_i$ the sentence's most telling word, and uniform attention ($W=0$) the mean vote.

**Runs.** ``seeds`` runs per embedding, batched, run $b$ with its own split (``train_frac`` for training), head and
initialisation; normalised GD with the authors' settings (``digits``, E3): $\eta=0.1$, $\epsilon$ = ``grad_eps``,
nn.Linear initialisation (``init``), on

* ``W``: one-layer attention $f=v^\top X^\top\mathbb S(XWz)$, ``steps`` steps;
* ``joint``: two-layer attention (param ``twolayer``: self-attention $W_1$ over the words, residual when
  ``residual``, then $W_2$ with the query $z_i$; per-factor normalisation, ``normalize``), both layers trained,
  ``steps2`` steps;
* ``frozen``: the same with $W_1$ frozen at its initialisation.

**Measured** (:func:`attsvm.realdata.measure_one_layer`, :func:`~attsvm.realdata.measure_two_layer`): the
selection (layer 2 for two layers: $\beta_i=\arg\max_ts^2_{it}$), whether its Att-SVM is feasible and locally
optimal at every recorded step, $\mathrm{corr}$ with the certified SVM of the final selection (one layer: the
Att-SVM of the words; two layers: the top-layer Att-SVM over the layer-1 outputs — $h_{it}$ for frozen $W_1$, the
hard outputs $x_{i\alpha_{it}}+x_{it}$ of the final layer-1 selection when joint), saturation in the log domain,
train/test accuracy against uniform attention, $\|W_1\|,\|W_2\|$, and which words are attended: the selected word
of every training and test sentence, counted per class, and a few test sentences with their selected words.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from attsvm.experiments import AUTHORS_EPS, Option, authors_options

EPS = AUTHORS_EPS
EMBEDDINGS = ("ppmi", "random")
MODELS = ("W", "joint", "frozen")
_AUTH = authors_options()
OPTIONS = {
    "dim": Option(16, minimum=2, maximum=64, help="word-vector dimension k (tokens have d = k + 2)"),
    "max_words": Option(32, minimum=2, maximum=46, help="words kept per sentence (the longest has 46)"),
    "residual": Option(True, help="two layers: residual h = h_bar + x after layer 1"),
    "init": _AUTH["init"],
    "normalize": _AUTH["normalize"],
    "grad_eps": _AUTH["grad_eps"],
}
TITLE = (
    "Text: one- and two-layer attention by normalised GD on 200 movie-review sentences (random and PPMI word "
    "vectors) — the selected words, local optimality, corr with the certified (top-layer) Att-SVM, saturation, "
    "accuracy against uniform attention"
)
CLAIMS = ("gd-selects-locally-optimal", "hier-top-layer", "hier-joint")
SIZES = {
    "full": {"seeds": 3, "steps": 20000, "record_every": 2000, "steps2": 1500, "record2": 150, "train_frac": 0.7},
    "smoke": {"seeds": 2, "steps": 300, "record_every": 100, "steps2": 30, "record2": 10, "train_frac": 0.25},
}
TOP_WORDS = 5  #: words listed per class and model
EXAMPLES = 2  #: test sentences of run 0 shown per class


# ---------------------------------------------------------------------------------------------- data
def load(max_words: int):
    """The polarity corpus (:func:`attsvm.corpus.polarity`) cut to its first ``max_words`` words per sentence."""
    from attsvm.corpus import Corpus, polarity

    c = polarity()
    T = min(int(max_words), c.ids.shape[1])
    return Corpus(c.ids[:, :T], c.mask[:, :T], c.labels, c.vocab, np.minimum(c.lengths, T))


def tokens(c, kind: str, dim: int) -> np.ndarray:
    r"""Tokens $x_{it}=(E_{w_{it}};\pi_t)$ of every sentence (200, T, dim + 2), padding zero."""
    from attsvm.embedding import embed, sentence_tokens

    return sentence_tokens(embed(kind, c.ids, c.mask, len(c.vocab), dim, seed=0), c.ids, c.mask, 1.0)


def mean_query(X: np.ndarray, mask: np.ndarray) -> np.ndarray:
    r"""$z_i=\frac1{L_i}\sum_{t:m_{it}}x_{it}$."""
    return np.sum(np.where(mask[..., None], X, 0.0), axis=-2) / np.sum(mask, axis=-1)[..., None]


def datasets(X: np.ndarray, c, tr: np.ndarray, te: np.ndarray):
    """Training and test batches (one data set per run) with the head fit on each run's training sentences."""
    from attsvm.data import Dataset
    from attsvm.realdata import fit_token_head

    Y, M = c.labels, c.mask
    v = np.stack([fit_token_head(X[t], Y[t], M[t]) for t in tr])
    Z = mean_query(X, M)
    ds = Dataset(X[tr], Y[tr], Z[tr], v, mask=M[tr])
    test = Dataset(X[te], Y[te], Z[te], v, mask=M[te])
    return ds, test


def word_counts(c, rows: np.ndarray, pos: np.ndarray) -> dict[str, list]:
    """The words at positions ``pos`` (B, n) of sentences ``rows`` (B, n), counted per class: ``{"+1": [[word,
    count], ...], "-1": ...}`` most frequent first (ties alphabetical), :data:`TOP_WORDS` of each."""
    out = {}
    for lab, key in ((1.0, "+1"), (-1.0, "-1")):
        cnt: Counter[str] = Counter()
        for r, p in zip(np.ravel(rows), np.ravel(pos)):
            if c.labels[r] == lab:
                cnt[c.vocab[c.ids[r, p]]] += 1
        out[key] = [[w, n] for w, n in sorted(cnt.items(), key=lambda x: (-x[1], x[0]))[:TOP_WORDS]]
    return out


# ---------------------------------------------------------------------------------------------- run
def run(ctx) -> dict:
    from importlib.metadata import version

    from attsvm.experiments import gd_runs, summary
    from attsvm.model import logits
    from attsvm.realdata import accuracy, log_attention, measure_one_layer, measure_two_layer, splits

    s, o = ctx.size, ctx.options
    B = ctx.seeds
    c = load(o["max_words"])  # first: without gensim, the one-line error naming the extra
    n_all, T = c.ids.shape
    sp = splits(n_all, float(s["train_frac"]), B)
    tr = np.stack([a for a, _ in sp])
    te = np.stack([b for _, b in sp])
    d = int(o["dim"]) + 2
    out: dict[str, Any] = {
        "settings": dict(
            s, dim=int(o["dim"]), d=d, T=T, max_words=int(o["max_words"]), residual=bool(o["residual"]),
            n_sentences=n_all, n_train=tr.shape[1], n_test=te.shape[1], vocabulary=len(c.vocab),
            words_dropped=int(np.sum(load(46).lengths) - np.sum(c.lengths)), init=o["init"], algo="ngd", lr=0.1,
            loss="logistic", grad_eps=o["grad_eps"], normalize=o["normalize"], gensim=version("gensim"),
            query="mean token", head="sklearn LogisticRegression(C=1, no intercept) on the visible tokens",
            split_seeds=f"0..{B - 1}", gd_seed=1, embedding_seed=0,
        ),
        "labels": {"negative": int(np.sum(c.labels < 0)), "positive": int(np.sum(c.labels > 0)),
                   "first_positive": int(np.argmax(c.labels > 0))},
    }  # fmt: skip
    common = dict(algo="ngd", lr=0.1, init=o["init"], seed=1, grad_eps=o["grad_eps"], record_params=True)
    two = dict(param="twolayer", steps=int(s["steps2"]), record_every=int(s["record2"]), residual=bool(o["residual"]))
    two["normalize"] = o["normalize"]
    data, jobs = {}, []
    for emb in EMBEDDINGS:
        with ctx.timed(f"data {emb}"):
            data[emb] = datasets(tokens(c, emb, int(o["dim"])), c, tr, te)
        ds = data[emb][0]
        jobs.append(dict(ds=ds, param="W", steps=int(s["steps"]), record_every=int(s["record_every"]), **common))
        jobs.append(dict(ds=ds, **two, **common))
        jobs.append(dict(ds=ds, freeze="W1", **two, **common))
    ctx.progress.note(f"normalised GD: {B} runs x 2 embeddings x (W, joint, frozen), n = {tr.shape[1]}, T = {T}")
    runs = gd_runs(ctx, jobs, "gd")
    for j, emb in enumerate(EMBEDDINGS):
        ds, test = data[emb]
        zero = np.zeros((1, B, d, d))
        uni_tr = accuracy(log_attention(logits(ds.X[None], zero, ds.Z[None]), ds.mask)[0], ds.X, ds.Y, ds.v)
        uni_te = accuracy(log_attention(logits(test.X[None], zero, test.Z[None]), test.mask)[0], test.X, test.Y, test.v)
        res: dict[str, Any] = {
            "baseline": {"uniform_train_acc": summary(uni_tr[0]), "uniform_test_acc": summary(uni_te[0])},
            "opt": {
                "runs": B, "constraints": int(np.sum(ds.mask[0]) - ds.n),
                "params": d * d, "words": word_counts(c, tr, np.asarray(ds.opt)),
            },
        }  # fmt: skip
        r_w, r_joint, r_frozen = runs[3 * j : 3 * j + 3]
        res["W"] = measure_one_layer(ctx, ds, r_w, test, f"{emb} W")
        res["joint"] = measure_two_layer(ctx, ds, r_joint, test, False, bool(o["residual"]), f"{emb} joint")
        res["frozen"] = measure_two_layer(ctx, ds, r_frozen, test, True, bool(o["residual"]), f"{emb} frozen")
        for m in MODELS:
            r = res[m]
            r["train_words"] = word_counts(c, tr, r["train_selection"])
            r["test_words"] = word_counts(c, te, r["test_selection"])
            if m != "W":
                r["train_layer1_words"] = word_counts(c, tr, r["train_layer1_at_selection"])
        # a few test sentences of run 0 with the word each model selects
        ex = []
        for lab in (1.0, -1.0):
            for i in np.flatnonzero(test.Y[0] == lab)[:EXAMPLES]:
                row = int(te[0, i])
                ex.append({
                    "label": int(lab), "words": c.sentence(row),
                    "selected": {m: int(res[m]["test_selection"][0, i]) for m in MODELS},
                    "layer1": {m: int(res[m]["test_layer1_at_selection"][0, i]) for m in MODELS if m != "W"},
                })  # fmt: skip
        res["examples"] = ex
        out[emb] = res
    return out


# ---------------------------------------------------------------------------------------------- figure
def plot(res: dict):
    from matplotlib.lines import Line2D

    from attsvm.figures import PALETTE, TEXT_IN, new_canvas
    from attsvm.realdata import MODELS as LAB
    from attsvm.realdata import curve_panels

    s = res["settings"]
    fig = new_canvas(TEXT_IN, 9.6)
    outer = fig.add_gridspec(2, 1, height_ratios=[4.2, 3.9])
    top = outer[0].subgridspec(2, 2)
    ax = [fig.add_subplot(top[i, j]) for i in range(2) for j in range(2)]
    styles = {"ppmi": "-", "random": "--"}
    curve_panels(
        ax,
        {e: {m: res[e][m] for m in MODELS} for e in EMBEDDINGS},
        styles,
        {e: res[e]["baseline"]["uniform_test_acc"]["mean"] for e in EMBEDDINGS},
    )
    ax[2].set_ylim(0.3, 1.02)
    tx = fig.add_subplot(outer[1])
    tx.xaxis.set_visible(False)
    tx.yaxis.set_visible(False)
    tx.grid(False)
    for sp in tx.spines.values():
        sp.set_visible(False)
    lines = []
    for e in EMBEDDINGS:
        lines.append((f"{e.upper()} word vectors — most selected training words (count over {s['seeds']} runs)", "k"))
        for m in (*MODELS, "opt"):
            r = res[e]["opt"] if m == "opt" else res[e][m]
            ws = r["words"] if m == "opt" else r["train_words"]
            name = "head's opt" if m == "opt" else {"W": "one layer", "joint": "joint", "frozen": "W1 frozen"}[m]
            pos = ", ".join(f"{w} {n}" for w, n in ws["+1"][:4])
            neg = ", ".join(f"{w} {n}" for w, n in ws["-1"][:4])
            color = "0.3" if m == "opt" else PALETTE[LAB[m][1]]
            lines.append((f"  {name:<10} pos: {pos}", color))
            lines.append((f"  {'':<10} neg: {neg}", color))
    ex = res["ppmi"]["examples"]
    lines.append(("PPMI, test sentences of run 0 — [one layer], {joint}:", "k"))
    for x in ex[:3]:
        w = list(x["words"])
        w = w[:14] + ["…"] if len(w) > 14 else w
        a, b = x["selected"]["W"], x["selected"]["joint"]
        marked = [
            ("[" + t + "]" if k == a else t) if k != b else ("{" + ("[" + t + "]" if k == a else t) + "}")
            for k, t in enumerate(w)
        ]
        lab = "+" if x["label"] > 0 else "−"
        line = f"  {lab} " + " ".join(marked)
        lines.append((line if len(line) <= 92 else line[:91] + "…", "0.15"))
    for k, (t, col) in enumerate(lines):
        tx.text(0.0, 1.0 - k / max(len(lines), 1), t, transform=tx.transAxes, fontsize=8, family="monospace",
                color=col, va="top")  # fmt: skip
    handles = [Line2D([], [], color=PALETTE[LAB[m][1]], label=LAB[m][0]) for m in MODELS]
    handles += [Line2D([], [], color="0.3", linestyle=styles[e], label=f"{e} word vectors") for e in EMBEDDINGS]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle(
        f"Movie-review sentences: {s['n_train']} training sentences, T = {s['T']} words, d = {s['d']},\n"
        f"{s['seeds']} seeds; one layer {s['steps']} steps, two layers {s['steps2']} steps"
    )
    return fig


# ---------------------------------------------------------------------------------------------- text
def _pm(st: dict, digits: int = 3) -> str:
    if st.get("mean") is None:
        return "n/a"
    return f"{st['mean']:.{digits}f} ± {st['std']:.{digits}f}"


def _words(ws: list) -> str:
    return ", ".join(f"*{w}* ({n})" for w, n in ws) or "none"


def caption(res: dict) -> str:
    s = res["settings"]
    parts = [
        rf"Pang & Lee's polarity sentences as gensim {s['gensim']} ships them ({s['n_sentences']} sentences, "
        rf"{res['labels']['negative']} negative then {res['labels']['positive']} positive, labels read from each "
        rf"line), at most {s['max_words']} words each ({s['words_dropped']} words dropped), vocabulary "
        rf"{s['vocabulary']}; split at random per run into {s['n_train']} training and {s['n_test']} test sentences. "
        rf"Tokens: unit word vectors of dimension {s['dim']} — PPMI eigenvectors of the corpus (solid) or seeded "
        rf"Gaussian (dashed) — and a 2-d position code, d = {s['d']}, padding masked; query the sentence's mean "
        rf"token; head fit first by logistic regression on the visible tokens and frozen. {s['seeds']} seeds (split, "
        rf"head, initialisation), normalised GD $\eta$ = {s['lr']}, nn.Linear initialisation: one layer $W$ "
        rf"(blue) {s['steps']} steps recorded every {s['record_every']}; two layers (residual: {s['residual']}) "
        rf"joint (vermillion) and with $W_1$ frozen (green) {s['steps2']} steps recorded every {s['record2']}. "
        rf"Panels: $1-\mathrm{{corr}}$ with the certified SVM of the selection each run ends on (one layer: "
        rf"Att-SVM of the words; two layers: top-layer Att-SVM over the layer-1 outputs, hard outputs when joint); "
        rf"$1-\max_ts_{{it}}$ (top layer) in the log domain; test accuracy (grey: uniform attention, $W=0$); the "
        rf"fraction of runs whose current selection is locally optimal (two layers: the final "
        rf"selection only). Lines mean over seeds, shades ± 1 s.d. "
        rf"Below: the most selected training words per class and model (count over runs), the head's "
        rf"$\mathrm{{opt}}$ words, and PPMI test sentences of run 0 with the word the one-layer model [selects] "
        rf"and the joint two-layer model {{selects}}. **Found.**"
    ]
    names = {"W": "one layer", "joint": "two layers joint", "frozen": "two layers, W1 frozen"}
    for e in EMBEDDINGS:
        r = res[e]
        bl = r["baseline"]["uniform_test_acc"]
        txt = [
            f" *{e}*: {r['opt']['constraints']} Att-SVM constraints (run 0) against {r['opt']['params']} entries "
            f"of W; uniform attention test accuracy {_pm(bl)}."
        ]
        for m in MODELS:
            x = r[m]
            sat = x["final_one_minus_max_s"]
            extra = ""
            if m != "W":
                extra = (
                    f", ‖W1‖ {x['final_norm_W1']['mean']:.1f} and ‖W2‖ {x['final_norm_W2']['mean']:.1f}, layer-1 "
                    f"mean 1 − max s {x['final_layer1_one_minus_max_s']['mean']:.2g}"
                )
            txt.append(
                f" {names[m]}: final selection feasible in {x['svm_feasible']}/{x['runs']} runs (exact certificate, of "
                f"the SVM or of its infeasibility, in "
                f"{x['certified']}), locally optimal in {x['frac_locally_optimal']:.0%}; corr "
                f"{_pm(x['final_corr'], 4)}; mean 1 − max s {sat['mean']:.1e} (least saturated input "
                f"{sat['max']:.1e}){extra}; test accuracy {_pm(x['final_test_acc'])} (train "
                f"{x['final_train_acc']['mean']:.3f}); top positive words {_words(x['train_words']['+1'][:3])}, "
                f"negative {_words(x['train_words']['-1'][:3])}."
            )
        parts.append("".join(txt))
    return "".join(parts)


def check(res: dict) -> list[str]:
    """What the figure claims for the one-layer model, on every embedding: the Att-SVM of the selection GD ends on
    exists (certified) in every run and GD's distance to it falls. (Convergence itself is reported, not claimed.)"""
    from attsvm.figures import band_falls

    fails = []
    for e in EMBEDDINGS:
        W = res[e]["W"]
        if W["svm_feasible"] < W["runs"]:
            fails.append(f"{e}: Att-SVM of the final one-layer selection infeasible in {W['runs'] - W['svm_feasible']}")
        if not band_falls(W["curves"]["one_minus_corr"]):
            fails.append(f"{e}: one-layer 1-corr does not fall over the run")
        if W["certified"] < W["svm_feasible"]:
            fails.append(f"{e}: only {W['certified']} of {W['svm_feasible']} one-layer SVMs carry an exact certificate")
    return fails
