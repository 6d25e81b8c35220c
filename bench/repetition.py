"""Benchmark: the vectorised BLEU distance matrix against the per-pair sacrebleu loop.

    python bench/repetition.py [--quick]

Prints, measured in the same run on the same procedurally generated questions:
- B = 256: max |fast − naive| (must be ≤ 1e-9) and the speed ratio naive / fast;
- B = 2048: wall time of the fast matrix + clustering (repetition_penalties).
--quick uses B = 64 and B = 512.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rzero.challenger.repetition import (  # noqa: E402
    bleu_distance_matrix,
    repetition_penalties,
)

NAMES = ["Alice", "Bob", "Carla", "Deepak", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jamal"]
ITEMS = ["apples", "marbles", "books", "coins", "stickers", "pencils", "cookies", "cards"]
SHAPES = ["triangle", "rectangle", "circle", "trapezoid", "regular hexagon", "square"]
FILLER = [
    "Assume all quantities are positive integers.",
    "Express your answer as a common fraction.",
    "Give your answer in simplest radical form.",
    "Round your answer to the nearest hundredth if necessary.",
    "Justify each step of your reasoning before giving the final answer.",
    "Note that the order in which the operations are performed does not matter here.",
]

TEMPLATES = [
    "{n1} has {a} {item}. {n2} gives {n1} {b} more {item} and then {n1} gives away {c} of "
    "them to friends at school. After that, {n1} buys twice as many {item} as {n1} has left. "
    "How many {item} does {n1} have now?",
    "A {shape} has a perimeter of {a} centimetres and one of its sides measures {b} "
    "centimetres. If every other side is equal in length, what is the area of the {shape} "
    "in square centimetres?",
    "Let f(x) = {a}x^2 - {b}x + {c}. Find the sum of all real values of x for which "
    "f(f(x)) = {d}, and determine how many of those values are integers.",
    "How many positive integers less than {big} are divisible by {a} or {b} but not by "
    "both {a} and {b} at the same time?",
    "In a class of {big} students, {a} play chess, {b} play football and {c} play both. "
    "If a student is chosen at random, what is the probability that the student plays "
    "neither chess nor football?",
    "The sequence a_1, a_2, a_3, ... satisfies a_1 = {a}, a_2 = {b} and a_(n+2) = a_(n+1) "
    "+ {c} a_n for all n >= 1. What is the remainder when a_{d} is divided by {e}?",
    "{n1} and {n2} start walking towards each other from two towns that are {big} "
    "kilometres apart. {n1} walks at {a} km per hour and {n2} walks at {b} km per hour. "
    "After how many hours do they meet, and how far from the first town?",
    "Find the number of ordered pairs (x, y) of integers such that x^2 + y^2 = {big} and "
    "x + y is divisible by {a}.",
]


def make_questions(count: int, seed: int = 0) -> list[str]:
    """Realistic challenger-style questions: templates with random names and numbers,
    about one in five a near-duplicate of an earlier one (a number or name changed),
    20 to 80 words each."""
    rng = random.Random(seed)
    questions: list[str] = []
    while len(questions) < count:
        if questions and rng.random() < 0.2:
            words = rng.choice(questions).split()
            for _ in range(rng.randint(1, 3)):
                words[rng.randrange(len(words))] = str(rng.randint(2, 999))
            questions.append(" ".join(words))
            continue
        text = rng.choice(TEMPLATES).format(
            n1=rng.choice(NAMES),
            n2=rng.choice(NAMES),
            item=rng.choice(ITEMS),
            shape=rng.choice(SHAPES),
            a=rng.randint(2, 99),
            b=rng.randint(2, 99),
            c=rng.randint(2, 99),
            d=rng.randint(2, 50),
            e=rng.randint(3, 1000),
            big=rng.randint(100, 10_000),
        )
        words = text.split()
        while len(words) < 20 or (rng.random() < 0.4 and len(words) < 70):
            words += rng.choice(FILLER).split()
        questions.append(" ".join(words[:80]))
    return questions


def clear_tokenizer_caches() -> None:
    """sacrebleu memoises tokenisation; clear it so every timing includes tokenising."""
    Tokenizer13a.__call__.cache_clear()
    TokenizerRegexp.__call__.cache_clear()


def naive_distance_matrix(questions: list[str]) -> np.ndarray:
    """The per-pair loop over sacrebleu.sentence_bleu that the fast matrix replaces."""
    size = len(questions)
    bleu = np.zeros((size, size))
    for i in range(size):
        for j in range(size):
            if i != j:
                bleu[i, j] = sacrebleu.sentence_bleu(questions[i], [questions[j]]).score / 100
    distance = 1.0 - (bleu + bleu.T) / 2.0
    np.clip(distance, 0.0, 1.0, out=distance)
    np.fill_diagonal(distance, 0.0)
    return distance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches")
    args = parser.parse_args()
    small, large = (64, 512) if args.quick else (256, 2048)

    questions = make_questions(small, seed=0)
    words = [len(q.split()) for q in questions]
    print(f"questions: {small}, words per question {min(words)}..{max(words)}")
    start = time.perf_counter()
    reference = naive_distance_matrix(questions)
    naive_s = time.perf_counter() - start
    bleu_distance_matrix(questions)  # warm-up (imports)
    repeats = 5
    fast_s = 0.0
    for _ in range(repeats):
        clear_tokenizer_caches()  # time the tokenisation too, as on a fresh batch
        start = time.perf_counter()
        fast = bleu_distance_matrix(questions)
        fast_s += (time.perf_counter() - start) / repeats
    diff = float(np.abs(fast - reference).max())
    print(f"B={small}: naive loop {naive_s:.2f} s, fast matrix {fast_s * 1000:.1f} ms")
    print(
        f"B={small}: max |fast - naive| = {diff:.3e} ({'ok' if diff <= 1e-9 else 'FAIL'} <= 1e-9)"
    )
    print(f"B={small}: speed ratio naive / fast = {naive_s / fast_s:.0f}x (target >= 100x)")

    questions = make_questions(large, seed=1)
    clear_tokenizer_caches()
    start = time.perf_counter()
    distance = bleu_distance_matrix(questions)
    matrix_s = time.perf_counter() - start
    clear_tokenizer_caches()
    start = time.perf_counter()
    penalties = repetition_penalties(questions)
    total_s = time.perf_counter() - start
    print(
        f"B={large}: fast matrix {matrix_s:.2f} s; repetition_penalties (tokenise, matrix, "
        f"clustering) {total_s:.2f} s (target <= 5 s)"
    )
    near = float((distance[np.triu_indices(large, 1)] <= 0.5).mean())
    print(f"B={large}: pairs within tau=0.5: {near:.4f}; max penalty {max(penalties):.4f}")


if __name__ == "__main__":
    main()
