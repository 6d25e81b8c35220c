"""Repetition penalty: BLEU distances between a batch's questions, then clustering.

R-Zero (SPEC §1.1) penalises a question by the share of its batch that is
near-identical to it: d_ij = 1 − BLEU(x_i, x_j); agglomerative clustering with average
linkage and distance threshold τ = 0.5; r_rep(x) = |cluster(x)| / B.

Two BLEU variants:

- ``"sacrebleu"`` (default): BLEU(h, r) = ``sacrebleu.sentence_bleu(h, [r]).score / 100``
  with sacrebleu's defaults (13a tokenisation, ``exp`` smoothing, n ≤ 4, effective
  order, brevity penalty), symmetrised: d_ij = 1 − (BLEU(x_i, x_j) + BLEU(x_j, x_i)) / 2.
  The matrix is symmetric, has a zero diagonal, and does not depend on batch order.
- ``"reference"``: the official R-Zero code's ``_bleu_distance_matrix``: nltk's
  ``sentence_bleu([x_j.split()], x_i.split(), smoothing_function=method1)`` (whitespace
  tokens, uniform weights over n ≤ 4, numerators of 0 replaced by ε = 0.1, brevity
  penalty, no effective order), computed only for i < j with x_j as the reference and
  mirrored; so it depends on batch order. Reimplemented here without nltk.

Both are computed for the whole batch at once. Each question is tokenised once; n-gram
counts for n = 1..4 become sparse count matrices over a shared n-gram vocabulary; the
clipped matches sum_g min(c_i(g), c_j(g)) of every pair come from sparse products of
thresholded indicators, min(a, b) = sum_{t ≥ 1} [a ≥ t]·[b ≥ t]; the BLEU formula is
then evaluated on whole matrices. This equals the per-pair loop over sacrebleu to
floating-point rounding (tests/roles/test_repetition.py, bench/repetition.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
import scipy.sparse as sp
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

__all__ = [
    "BleuVariant",
    "bleu_distance_matrix",
    "bleu_similarity_matrix",
    "cluster_labels",
    "near_duplicates",
    "repetition_penalties",
]

BleuVariant = Literal["sacrebleu", "reference"]
_VARIANTS = ("sacrebleu", "reference")
MAX_ORDER = 4
_TOKENIZER = Tokenizer13a()
_ROW_BLOCK = 512


def _tokenize(questions: Sequence[str], variant: BleuVariant) -> list[list[str]]:
    if variant == "sacrebleu":
        # exactly sacrebleu's BLEU._preprocess_segment (no lowercasing) + split
        return [_TOKENIZER(q.rstrip()).split() for q in questions]
    return [q.split() for q in questions]


def _ngram_counts(tokens: list[list[str]]) -> tuple[np.ndarray, list[sp.csr_matrix]]:
    """Token lengths [B] and, per order n, the count matrix [B, V_n] (int64)."""
    batch = len(tokens)
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)  # [B]
    vocab: dict[str, int] = {}
    flat = np.fromiter(
        (vocab.setdefault(w, len(vocab)) for ts in tokens for w in ts),
        dtype=np.int64,
        count=int(lengths.sum()),
    )  # [T] token ids, questions concatenated
    doc = np.repeat(np.arange(batch), lengths)  # [T] question of each position
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    room = (starts + lengths)[doc] - np.arange(flat.size)  # tokens left in its question
    ids = flat  # [T] id of the (n-1)-gram starting at each position (valid where room >= n-1)
    width = max(len(vocab), 1)
    counts = []
    for n in range(1, MAX_ORDER + 1):
        if n > 1:
            # an n-gram = (its first n-1 tokens, its last token): one int64 key per position
            at = np.flatnonzero(room >= n)
            key = ids[at] * width + flat[at + n - 1]
            _, inverse = np.unique(key, return_inverse=True)
            ids = np.full(flat.size, -1, dtype=np.int64)
            ids[at] = inverse.reshape(-1)
        else:
            at = np.arange(flat.size)
        cols = ids[at]
        num_cols = int(cols.max()) + 1 if cols.size else 0
        matrix = sp.csr_matrix(
            (np.ones(at.size, dtype=np.int64), (doc[at], cols)), shape=(batch, num_cols)
        )
        matrix.sum_duplicates()
        counts.append(matrix)
    return lengths, counts


def _clipped_matches(counts: sp.csr_matrix) -> np.ndarray:
    """[B, B] matrix of sum_g min(c_i(g), c_j(g)) for a count matrix [B, V].

    min(a, b) = sum_{t >= 1} [a >= t]·[b >= t]: for each distinct count level t, the
    indicator matrix of "count >= t" times its transpose adds the pairs that share an
    n-gram at least t times. Level 1 holds nearly all entries; higher levels hold only
    the repeated n-grams, so those products are small. The products are sparse
    (scipy's single-threaded SpGEMM), which measured faster than dense BLAS here at
    every batch size up to 2048, and does not slow down on a busy machine.

    float32 holds these integers exactly (they are at most a question's length, far
    below 2**24) and halves the memory traffic of the [B, B] accumulations.
    """
    batch, width = counts.shape
    out = np.zeros((batch, batch), dtype=np.float32)
    coo = counts.tocoo()
    order = np.argsort(coo.data, kind="stable")
    values = coo.data[order]
    rows, cols = coo.row[order], coo.col[order]
    previous = 0
    for level in np.unique(values):
        first = np.searchsorted(values, level)  # entries with count >= level: [first:]
        indicator = sp.csr_matrix(
            (np.ones(values.size - first, dtype=np.float32), (rows[first:], cols[first:])),
            shape=(batch, width),
        )
        product = indicator @ indicator.T  # [B, B] sparse
        if level - previous != 1:
            product.data *= level - previous
        if product.nnz > batch * batch // 8:
            out += product.toarray()
        else:
            product = product.tocoo()  # canonical: each (row, col) once
            out[product.row, product.col] += product.data
        previous = level
    return out


def bleu_similarity_matrix(
    questions: Sequence[str], variant: BleuVariant = "sacrebleu"
) -> np.ndarray:
    """[B, B] matrix S with S[i, j] = BLEU(hypothesis x_i, reference x_j) in [0, 1].

    ``"sacrebleu"``: ``sentence_bleu(x_i, [x_j]).score / 100``; ``"reference"``: nltk
    sentence BLEU with ``method1`` smoothing on whitespace tokens (see the module
    docstring). The diagonal is whatever the formula gives (1 for a non-empty question).
    """
    if variant not in _VARIANTS:
        raise ValueError(f"variant must be one of {_VARIANTS}, got {variant!r}")
    batch = len(questions)
    lengths, counts = _ngram_counts(_tokenize(questions, variant))
    matches = [_clipped_matches(c) for c in counts]  # MAX_ORDER x [B, B]
    scores = np.empty((batch, batch), dtype=np.float64)
    ref_len = lengths[None, :].astype(np.float64)  # [1, B]
    for r0 in range(0, batch, _ROW_BLOCK):
        r1 = min(batch, r0 + _ROW_BLOCK)
        hyp_len = lengths[r0:r1, None].astype(np.float64)  # [b, 1]
        block = [m[r0:r1] for m in matches]  # [b, B] each
        if variant == "sacrebleu":
            scores[r0:r1] = _sacrebleu_scores(block, hyp_len, ref_len)
        else:
            scores[r0:r1] = _nltk_method1_scores(block, hyp_len, ref_len)
    return scores


def _sacrebleu_scores(
    correct: list[np.ndarray], hyp_len: np.ndarray, ref_len: np.ndarray
) -> np.ndarray:
    """sacrebleu's BLEU.compute_bleu(smooth_method="exp", effective_order=True) / 100,
    elementwise, with the same floating-point operations in the same order.

    correct: per order n, clipped matches [b, B]; hyp_len [b, 1]; ref_len [1, B].
    """
    rows_all, batch = correct[0].shape
    scores = np.zeros((rows_all, batch), dtype=np.float64)
    hyp = hyp_len[:, 0]
    # sacrebleu stops at the first order with no hypothesis n-grams (total = 0), so the
    # effective order of a row is min(hypothesis length, 4): group rows by it.
    for order in range(1, MAX_ORDER + 1):
        rows = np.flatnonzero(np.minimum(hyp, MAX_ORDER) == order)
        if rows.size == 0:
            continue
        length = hyp[rows][:, None]  # [r, 1], >= 1
        log_sum = np.zeros((rows.size, batch))
        smooth = np.ones((rows.size, batch))
        for n in range(1, order + 1):
            c = correct[n - 1][rows].astype(np.float64)  # [r, B]
            total = length - n + 1  # [r, 1] hypothesis n-grams, > 0
            zero = c == 0
            np.multiply(smooth, 2.0, out=smooth, where=zero)  # exp smoothing: 1/2, 1/4, ...
            precision = np.where(zero, 100.0 / (smooth * total), 100.0 * c / total)
            log_sum += np.log(precision)
        with np.errstate(over="ignore"):
            brevity = np.where(length < ref_len, np.exp(1.0 - ref_len / length), 1.0)
        score = brevity * np.exp(log_sum / order)
        # no unigram match -> no match at any order -> sacrebleu returns 0 early
        score[correct[0][rows] == 0] = 0.0
        scores[rows] = score
    return scores / 100.0


def _nltk_method1_scores(
    correct: list[np.ndarray], hyp_len: np.ndarray, ref_len: np.ndarray
) -> np.ndarray:
    """nltk's sentence_bleu(weights=(1/4,)*4, SmoothingFunction().method1), elementwise."""
    with np.errstate(divide="ignore", invalid="ignore"):
        brevity = np.where(
            hyp_len > ref_len, 1.0, np.where(hyp_len == 0, 0.0, np.exp(1.0 - ref_len / hyp_len))
        )
        log_sum = np.zeros(np.broadcast_shapes(correct[0].shape, ref_len.shape))
        for n in range(1, MAX_ORDER + 1):
            denominator = np.maximum(hyp_len - n + 1, 1.0)  # max(1, #hypothesis n-grams)
            c = correct[n - 1].astype(np.float64)
            precision = np.where(c > 0, c, 0.1) / denominator  # method1: epsilon 0.1
            log_sum = log_sum + 0.25 * np.log(precision)
        score = brevity * np.exp(log_sum)
    return np.where(correct[0] > 0, score, 0.0)


def bleu_distance_matrix(
    questions: Sequence[str], variant: BleuVariant = "sacrebleu"
) -> np.ndarray:
    """[B, B] BLEU distances between a batch's questions, zero diagonal, in [0, 1].

    ``"sacrebleu"`` (default): d_ij = 1 − (BLEU(x_i, x_j) + BLEU(x_j, x_i)) / 2 with
    BLEU(h, r) = ``sacrebleu.sentence_bleu(h, [r]).score / 100`` (sacrebleu's defaults:
    13a tokens, exp smoothing, max order 4, effective order, brevity penalty); symmetric
    and independent of batch order.

    ``"reference"``: the official R-Zero code's matrix: for i < j,
    d_ij = d_ji = 1 − BLEU_nltk(hypothesis x_i, reference x_j) with whitespace tokens and
    nltk ``SmoothingFunction().method1``; it depends on batch order.

    Values are clipped to [0, 1] (BLEU of a question with itself can exceed 1 by a
    rounding error).
    """
    batch = len(questions)
    if batch == 0:
        return np.zeros((0, 0))
    similarity = bleu_similarity_matrix(questions, variant)
    if variant == "sacrebleu":
        distance = 1.0 - (similarity + similarity.T) / 2.0
    else:
        upper = np.triu(similarity, k=1)
        distance = 1.0 - (upper + upper.T)
    np.clip(distance, 0.0, 1.0, out=distance)
    np.fill_diagonal(distance, 0.0)
    return distance


def cluster_labels(
    questions: Sequence[str], tau: float = 0.5, variant: BleuVariant = "sacrebleu"
) -> np.ndarray:
    """[B] flat cluster ids: average-linkage agglomerative clustering cut at distance τ.

    scipy ``linkage(method="average")`` + ``fcluster(criterion="distance", t=τ)``: two
    clusters merge while their average distance is ≤ τ. For ``variant="reference"`` the
    cut is strict (< τ), as scikit-learn's ``AgglomerativeClustering(distance_threshold=τ)``
    in the reference code. For the default variant, the questions are clustered in sorted
    order so that ties between equal distances are broken the same way whatever the
    batch order: permuting the batch permutes the result.
    """
    if not tau >= 0.0:
        raise ValueError(f"tau must be >= 0, got {tau!r}")
    batch = len(questions)
    if batch == 0:
        return np.zeros(0, dtype=np.int64)
    if batch == 1:
        return np.ones(1, dtype=np.int64)
    if variant == "sacrebleu":
        order = np.array(sorted(range(batch), key=lambda i: questions[i]), dtype=np.int64)
        threshold = tau
    else:
        order = np.arange(batch)
        threshold = float(np.nextafter(tau, -np.inf))
    distance = bleu_distance_matrix([questions[i] for i in order], variant)
    tree = linkage(squareform(distance, checks=False), method="average")
    labels_sorted = fcluster(tree, t=threshold, criterion="distance")
    labels = np.empty(batch, dtype=np.int64)
    labels[order] = labels_sorted
    return labels


def repetition_penalties(
    questions: Sequence[str],
    tau: float = 0.5,
    variant: BleuVariant = "sacrebleu",
    *,
    batch_size: int | None = None,
) -> list[float]:
    """r_rep(x_i) = |C_k| / B for each question x_i in cluster C_k (R-Zero, SPEC §1.1).

    Clusters come from `cluster_labels` on `bleu_distance_matrix` (d = 1 − BLEU, average
    linkage, threshold `tau`). B is `batch_size`: the size of the whole GRPO batch the
    questions came from, malformed completions included (the paper's B), so a batch with
    few well-formed questions is not penalised as if it were all repetition. It defaults to
    `len(questions)`. The reference code clusters malformed completions too, as empty
    strings that only cluster with each other; for the well-formed ones that is the same.
    B = 0 questions -> []; every penalty lies in [1/B, len(questions)/B].
    """
    n = len(questions)
    batch = n if batch_size is None else batch_size
    if batch < n:
        raise ValueError(f"batch_size {batch} is smaller than the {n} questions it holds")
    if n == 0:
        return []
    labels = cluster_labels(questions, tau, variant)
    sizes = np.bincount(labels)
    return [float(sizes[label]) / batch for label in labels]


def near_duplicates(
    questions: Sequence[str], held_out: Sequence[str], min_bleu: float = 0.7
) -> list[bool]:
    """Per question: is it a held-out item, exactly (same words, whitespace aside) or nearly
    (BLEU against some held-out item, either way round, at least `min_bleu`)?

    Used to keep evaluation items out of training: a pool question that copies a benchmark
    item with a word changed is the item. Questions that share a template with new numbers
    score well below 0.7 ("What is 36 + 19?" against "What is 12 + 7?": 0.19), so they stay.
    """
    if not questions or not held_out:
        return [False] * len(questions)
    exact = {" ".join(h.split()) for h in held_out}
    n = len(questions)
    sim = bleu_similarity_matrix(list(questions) + list(held_out))  # [Q+H, Q+H]
    closest = np.maximum(sim[:n, n:], sim[n:, :n].T).max(axis=1)  # [Q]
    return [
        " ".join(q.split()) in exact or bool(c >= min_bleu)
        for q, c in zip(questions, closest, strict=True)
    ]


# ---------------------------------------------------------------- question diversity
# what the challenger's step log and the self-play watch (`rzero.selfplay.collapse`) both
# measure on a batch of questions, beside the BLEU clusters above

_TOKEN = re.compile(r"\w+|[^\w\s]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPACE = re.compile(r"\s+")


# ---------------------------------------------------------------- questions


def distinct_n(texts: Sequence[str], n: int) -> float:
    """distinct-n = |distinct n-grams| / |n-grams| over all texts together (Li et al. 2016).

    Tokens: lower-cased words and single punctuation marks. A text shorter than n adds no
    n-gram; no n-gram at all gives 0. The value falls as the batch grows (common n-grams
    repeat), so compare it between batches of one size.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    grams: Counter[tuple[str, ...]] = Counter()
    for text in texts:
        tokens = _TOKEN.findall(text.lower())
        grams.update(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    total = sum(grams.values())
    return len(grams) / total if total else 0.0


def question_structure(question: str) -> str:
    """The question with its numbers masked: each digit run (with ``.5`` or ``,000`` parts)
    becomes ``#``, lower-cased, whitespace collapsed. Two questions with one structure differ
    at most in their numbers, case and spacing."""
    return _SPACE.sub(" ", _NUMBER.sub("#", question.lower())).strip()


def structure_count(questions: Sequence[str]) -> int:
    """Number of distinct `question_structure`s: a template with new numbers counts once."""
    return len({question_structure(q) for q in questions})
