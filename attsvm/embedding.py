r"""Word embeddings built offline and reproducibly from a tokenised corpus (:class:`attsvm.corpus.Corpus`), and the
position code that keeps the tokens of a sentence distinct.

* ``random``: $E_w\sim\mathcal N(0,I_k/k)$ i.i.d. per word (numpy ``default_rng(seed)``, rows in vocabulary order);
  no information about the words, a control.
* ``ppmi``: the positive pointwise mutual information of word co-occurrence within ``window`` words of each other
  in a sentence, $\mathrm{PPMI}_{ab}=\max(0,\log\frac{C_{ab}\,C}{C_aC_b})$ ($C_{ab}$ the symmetric pair counts,
  $C_a=\sum_bC_{ab}$, $C=\sum_aC_a$), factorised as $E=U_k\Lambda_k^{1/2}$ with $\Lambda_k$ the $k$ largest
  eigenvalues of the symmetric PPMI matrix and $U_k$ their eigenvectors (``scipy.linalg.eigh``, LAPACK ``syevr``
  on the top $k$ only), each eigenvector's sign fixed so that its largest-magnitude entry is positive, computed
  with one BLAS thread (so the bits do not depend on the thread count; they may on another CPU's or BLAS build's
  kernels). A closed form: no stochastic training, no threads, no hash seeds (unlike word2vec, whose per-word
  initialisation in gensim hashes strings with Python's salted ``hash``), and suited to a corpus of a few
  thousand words.

Both are normalised to unit rows ($E_w/\|E_w\|$; a zero row stays zero). Token $t$ of a sentence is
$x_t=(E_{w_t};\,c\,\pi_t)$ with the position code $\pi_t=(\cos\frac{\pi t}{T},\sin\frac{\pi t}{T})$: injective on
$t=0..T-1$, so a word repeated in a sentence gives distinct tokens.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError

KINDS = ("random", "ppmi")


def random_embedding(vocab_size: int, k: int, seed: int) -> np.ndarray:
    r"""$E\in\mathbb R^{V\times k}$, rows i.i.d. $\mathcal N(0,I_k/k)$ from ``default_rng(seed)``."""
    return np.random.default_rng(seed).normal(size=(int(vocab_size), int(k))) / np.sqrt(k)


def cooccurrence(ids: np.ndarray, mask: np.ndarray, vocab_size: int, window: int) -> np.ndarray:
    r"""Symmetric counts $C_{ab}=\#\{(i,t,\tau):0<|t-\tau|\le\text{window},\ w_{it}=a,\ w_{i\tau}=b\}$ over the
    visible tokens of each sentence."""
    C = np.zeros((vocab_size, vocab_size))
    T = ids.shape[1]
    for off in range(1, int(window) + 1):
        if off >= T:
            break
        ok = mask[:, :-off] & mask[:, off:]
        a, b = ids[:, :-off][ok], ids[:, off:][ok]
        np.add.at(C, (a, b), 1.0)
        np.add.at(C, (b, a), 1.0)
    return C


def ppmi(C: np.ndarray) -> np.ndarray:
    r"""$\max(0,\log\frac{C_{ab}C}{C_aC_b})$ (0 where $C_{ab}=0$)."""
    row = C.sum(axis=1)
    tot = row.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(C * tot / np.outer(row, row))
    return np.where(C > 0, np.maximum(pmi, 0.0), 0.0)


def ppmi_embedding(ids: np.ndarray, mask: np.ndarray, vocab_size: int, k: int, window: int = 2) -> np.ndarray:
    r"""$E=U_k\Lambda_k^{1/2}$ of the PPMI matrix (module docstring), sign-fixed eigenvectors."""
    from scipy.linalg import eigh
    from threadpoolctl import threadpool_limits

    M = ppmi(cooccurrence(ids, mask, vocab_size, window))
    V = M.shape[0]
    with threadpool_limits(limits=1):  # a threaded BLAS sums in another order: the last bits would depend on it
        lam, U = eigh(M, subset_by_index=[V - int(k), V - 1], driver="evr")
    lam, U = np.maximum(lam[::-1], 0.0), U[:, ::-1]  # largest first
    big = np.argmax(np.abs(U), axis=0)
    U = U * np.sign(U[big, np.arange(U.shape[1])])
    return U * np.sqrt(lam)


def unit_rows(E: np.ndarray) -> np.ndarray:
    r"""$E_w/\|E_w\|$ (a zero row stays zero)."""
    nrm = np.linalg.norm(E, axis=1, keepdims=True)
    return np.where(nrm > 0, E / np.where(nrm > 0, nrm, 1.0), 0.0)


def embed(kind: str, ids: np.ndarray, mask: np.ndarray, vocab_size: int, k: int, seed: int = 0) -> np.ndarray:
    """The unit-row embedding (V, k) of ``kind`` (:data:`KINDS`)."""
    if kind == "random":
        return unit_rows(random_embedding(vocab_size, k, seed))
    if kind == "ppmi":
        return unit_rows(ppmi_embedding(ids, mask, vocab_size, k))
    raise InputError(f"unknown embedding {kind!r} (known: {', '.join(KINDS)})")


def position_code(T: int) -> np.ndarray:
    r"""$\pi_t=(\cos\frac{\pi t}{T},\sin\frac{\pi t}{T})$, shape (T, 2)."""
    th = np.pi * np.arange(T) / T
    return np.stack([np.cos(th), np.sin(th)], axis=1)


def sentence_tokens(E: np.ndarray, ids: np.ndarray, mask: np.ndarray, code_scale: float) -> np.ndarray:
    r"""Tokens $x_{it}=(E_{w_{it}};\,c\,\pi_t)$ for visible $t$, zero padding, shape (n, T, k+2)."""
    n, T = ids.shape
    X = np.concatenate([E[np.where(mask, ids, 0)], np.broadcast_to(code_scale * position_code(T), (n, T, 2))], -1)
    return np.where(mask[..., None], X, 0.0)
