"""BLEU distance matrix (fast vs naive references) and the repetition penalty."""

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import sacrebleu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rzero.challenger.repetition import (
    bleu_distance_matrix,
    bleu_similarity_matrix,
    cluster_labels,
    repetition_penalties,
)

# A small vocabulary so that n-grams (and repeated n-grams) overlap between questions,
# with punctuation and numbers that the 13a tokenizer splits or keeps.
WORDS = ["a", "b", "the", "of", "x", "2", "3.5", "1,000", ",", ".", "?", "(x+1)", "é", "-"]
question = st.one_of(
    st.lists(st.sampled_from(WORDS), max_size=14).map(" ".join),
    st.text(alphabet="ab .,?-(1)\n", max_size=24),
    st.just(""),
)
batches = st.lists(question, max_size=8)
property_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def naive_sacrebleu_distances(questions: list[str]) -> np.ndarray:
    size = len(questions)
    bleu = np.zeros((size, size))
    for i in range(size):
        for j in range(size):
            bleu[i, j] = sacrebleu.sentence_bleu(questions[i], [questions[j]]).score / 100
    distance = np.clip(1.0 - (bleu + bleu.T) / 2.0, 0.0, 1.0)
    np.fill_diagonal(distance, 0.0)
    return distance


def nltk_method1_bleu(hypothesis: list[str], reference: list[str]) -> float:
    """nltk.translate.bleu_score.sentence_bleu([reference], hypothesis,
    smoothing_function=SmoothingFunction().method1), written out directly."""

    def ngrams(tokens: list[str], n: int) -> Counter:
        return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))

    numerators, denominators = [], []
    for n in range(1, 5):
        hyp, ref = ngrams(hypothesis, n), ngrams(reference, n)
        numerators.append(sum(min(count, ref[g]) for g, count in hyp.items()))
        denominators.append(max(1, sum(hyp.values())))
    if numerators[0] == 0:
        return 0.0
    precisions = [
        Fraction(num, den) if num else (num + 0.1) / den  # method1: epsilon 0.1
        for num, den in zip(numerators, denominators, strict=True)
    ]
    hyp_len, ref_len = len(hypothesis), len(reference)
    if hyp_len > ref_len:
        brevity = 1.0
    elif hyp_len == 0:
        brevity = 0.0
    else:
        brevity = math.exp(1 - ref_len / hyp_len)
    return brevity * math.exp(math.fsum(0.25 * math.log(p) for p in precisions))


def naive_reference_distances(questions: list[str]) -> np.ndarray:
    """The official R-Zero loop: i < j, x_i the hypothesis, x_j the reference, mirrored."""
    size = len(questions)
    distance = np.zeros((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            score = nltk_method1_bleu(questions[i].split(), questions[j].split())
            distance[i, j] = distance[j, i] = 1 - score
    return distance


@property_settings
@given(batches)
def test_fast_matrix_equals_the_sacrebleu_loop(questions):
    fast = bleu_distance_matrix(questions)
    assert fast.shape == (len(questions), len(questions))
    if questions:
        assert np.abs(fast - naive_sacrebleu_distances(questions)).max() <= 1e-9


@property_settings
@given(batches)
def test_reference_variant_equals_nltk_method1(questions):
    fast = bleu_distance_matrix(questions, variant="reference")
    if questions:
        assert np.abs(fast - naive_reference_distances(questions)).max() <= 1e-9


def test_similarity_of_repeated_ngrams_matches_sacrebleu():
    # counts above 1 exercise the thresholded levels: min(3, 2) = 2 matches of "a a"
    questions = ["a a a b a a", "a a b a a a a", "b b b b", "a"]
    fast = bleu_similarity_matrix(questions)
    for i, hyp in enumerate(questions):
        for j, ref in enumerate(questions):
            expected = sacrebleu.sentence_bleu(hyp, [ref]).score / 100
            assert fast[i, j] == pytest.approx(expected, abs=1e-12)


def test_matrix_is_symmetric_with_zero_diagonal():
    questions = ["what is 2 + 2 ?", "what is 2 + 3 ?", "", "compute the area of a circle"]
    d = bleu_distance_matrix(questions)
    assert np.array_equal(d, d.T)
    assert np.all(np.diag(d) == 0.0)
    assert np.all((d >= 0.0) & (d <= 1.0))


def test_unknown_variant_is_rejected():
    with pytest.raises(ValueError, match="variant"):
        bleu_distance_matrix(["a"], variant="chrf")


@property_settings
@given(batches.filter(len), st.randoms(use_true_random=False))
def test_permuting_the_batch_permutes_the_penalties(questions, rng):
    order = list(range(len(questions)))
    rng.shuffle(order)
    penalties = repetition_penalties(questions)
    shuffled = repetition_penalties([questions[i] for i in order])
    assert shuffled == [penalties[i] for i in order]


@property_settings
@given(batches.filter(len), st.sampled_from(["sacrebleu", "reference"]))
def test_penalties_lie_between_one_over_b_and_one(questions, variant):
    size = len(questions)
    penalties = repetition_penalties(questions, variant=variant)
    assert len(penalties) == size
    assert all(1 / size - 1e-12 <= p <= 1.0 for p in penalties)


def test_empty_and_single_batches():
    assert repetition_penalties([]) == []
    assert repetition_penalties(["anything"]) == [1.0]


def test_identical_questions_share_a_cluster():
    q = "A train travels 60 km in 1.5 hours. What is its average speed in km per hour?"
    other = "Find the number of primes below 100 that are congruent to 1 modulo 4."
    # {q, q, q} and {other}: 3/4 for the copies, 1/4 for the other
    assert repetition_penalties([q, other, q, q]) == [0.75, 0.25, 0.75, 0.75]


def test_threshold_tau_decides_merges():
    questions = ["a b c d e f", "a b c d e g"]  # one word differs -> d ~ 0.24
    d = bleu_distance_matrix(questions)[0, 1]
    assert 0.2 < d < 0.3
    assert repetition_penalties(questions, tau=0.5) == [1.0, 1.0]
    assert repetition_penalties(questions, tau=0.1) == [0.5, 0.5]


def test_reference_variant_cut_is_strict_like_scikit_learn():
    questions = ["a b c d e f", "a b c d e g"]
    d = bleu_distance_matrix(questions, variant="reference")[0, 1]
    # AgglomerativeClustering(distance_threshold=d) does not merge at exactly d
    assert len(set(cluster_labels(questions, tau=d, variant="reference"))) == 2


def test_default_variant_cut_is_inclusive_like_fcluster():
    questions = ["a b c d e f", "a b c d e g"]
    d = bleu_distance_matrix(questions)[0, 1]
    # fcluster(criterion="distance", t=d) merges at exactly d
    assert len(set(cluster_labels(questions, tau=d))) == 1


def test_near_duplicates_catch_copies_of_held_out_items_and_keep_new_numbers():
    from rzero.challenger.repetition import near_duplicates

    held_out = [
        "What is 36 + 19?",
        "Pia has 27 marbles and gets 14 more. How many marbles does Pia have now?",
    ]
    questions = [
        "What  is 36 + 19?",  # the item, whitespace aside: exact
        "Pia has 27 marbles and gets 14 more. How many marbles does Pia have?",  # one word cut
        "What is 12 + 7?",  # same template, new numbers: BLEU 0.19 < 0.7, kept
        "Find all real x with x^2 = 2.",
    ]
    assert near_duplicates(questions, held_out) == [True, True, False, False]
    assert near_duplicates(questions, []) == [False] * 4
