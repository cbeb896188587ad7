r"""A labelled corpus of sentences as padded token-id sequences (the text experiment, ``numerics/text.py``).

A sentence is tokenised by lower-casing it and taking the maximal runs of letters and digits, joined by inner
apostrophes or hyphens (``it's``, ``roller-coaster``): regular expression ``[^\W_]+(?:['-][^\W_]+)*``;
punctuation is dropped. The vocabulary is the sorted set of words of the corpus, word $w$ has id its rank. A
corpus of $n$ sentences of lengths $L_i$ becomes the ids (n, T), $T=\max_iL_i$, padded with $-1$, and the mask
$m_{it}=[t<L_i]$ (:class:`attsvm.data.Dataset`'s ``mask``: padding is invisible to attention and to the SVMs).

:func:`polarity` reads gensim's bundled test corpus ``pang_lee_polarity.cor`` (Pang & Lee's sentence polarity
data, 200 lines ``__label__neg ...`` / ``__label__pos ...``: 100 negative then 100 positive); the label is read from
each line's own prefix, not from its position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import InputError

WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")  #: a word: letters/digits, inner apostrophes and hyphens
LABELS = {"__label__neg": -1.0, "__label__pos": 1.0}  #: the fastText-style label prefixes of the polarity corpus
DATA_EXTRA = "pip install 'attsvm[data]'"  #: how to install the optional data packages (gensim, scikit-image)


def words(sentence: str) -> list[str]:
    """The words of ``sentence``: lower-cased, maximal matches of :data:`WORD` in order."""
    return WORD.findall(sentence.lower())


@dataclass(frozen=True)
class Corpus:
    r"""Tokenised sentences: ``ids`` (n, T) int word ids padded with $-1$, ``mask`` (n, T) bool $t<L_i$,
    ``labels`` (n,) $\pm1$, ``vocab`` the words by id, ``lengths`` (n,) $L_i$."""

    ids: np.ndarray
    mask: np.ndarray
    labels: np.ndarray
    vocab: tuple[str, ...]
    lengths: np.ndarray

    def sentence(self, i: int) -> list[str]:
        """The words of sentence ``i``."""
        return [self.vocab[j] for j in self.ids[i, : self.lengths[i]]]


def tokenise(sentences: list[str], labels: np.ndarray) -> Corpus:
    """The :class:`Corpus` of ``sentences`` (each needs a word) with their ``labels``."""
    toks = [words(s) for s in sentences]
    empty = [i for i, t in enumerate(toks) if not t]
    if empty:
        raise InputError(f"sentence {empty[0]} has no word")
    vocab = tuple(sorted({w for t in toks for w in t}))
    index = {w: j for j, w in enumerate(vocab)}
    lengths = np.array([len(t) for t in toks], dtype=np.int64)
    T = int(lengths.max())
    ids = np.full((len(toks), T), -1, dtype=np.int64)
    for i, t in enumerate(toks):
        ids[i, : len(t)] = [index[w] for w in t]
    mask = np.arange(T)[None, :] < lengths[:, None]
    return Corpus(ids, mask, np.asarray(labels, dtype=np.float64), vocab, lengths)


def polarity_lines() -> list[str]:
    """The 200 raw lines of gensim's ``pang_lee_polarity.cor`` (cp1252 text, e.g. byte 0x97 an em dash)."""
    try:
        from gensim.test.utils import datapath
    except ImportError:
        raise InputError(f"the polarity sentences ship with gensim, an optional extra: {DATA_EXTRA}") from None
    with open(datapath("pang_lee_polarity.cor"), "rb") as fh:
        return fh.read().decode("cp1252").splitlines()


def polarity() -> Corpus:
    """Pang & Lee's polarity sentences (gensim's test copy): label $+1$ for ``__label__pos``, $-1$ for
    ``__label__neg``, read from each line's prefix."""
    sentences, labels = [], []
    for k, line in enumerate(polarity_lines()):
        tag, _, text = line.partition(" ")
        if tag not in LABELS:
            raise InputError(f"pang_lee_polarity.cor line {k + 1}: unknown label {tag!r}")
        sentences.append(text)
        labels.append(LABELS[tag])
    return tokenise(sentences, np.array(labels))
