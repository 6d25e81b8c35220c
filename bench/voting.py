"""Benchmark: majority voting over realistic solver answers.

    python bench/voting.py [--quick]

1,000 questions x 10 answers (integers, fractions as \\frac / a/b / decimals, surds,
multiples of pi, wrong neighbours, junk strings, unparsed None). Prints, measured in
the same run:
- math-verify calls per question on the first (cold-cache) pass (target <= 10), and the
  total checks a naive all-pairs grouping would have made (45 per question);
- median and 95th-percentile time per question on a second pass with a warm cache
  (target median <= 2 ms), and the speed ratio cold / warm.
--quick uses 200 questions.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rzero.labeling.equivalence import EquivalenceChecker  # noqa: E402
from rzero.labeling.voting import majority_vote, majority_vote_many  # noqa: E402

JUNK = ["I don't know", "x", "no solution", "undefined", "see above", r"\text{none}", "?"]


def forms_of(value: object, rng: random.Random) -> list[str]:
    """Ways a solver writes the same answer."""
    if isinstance(value, int):
        return [
            str(value),
            str(value),
            str(value),
            f"{value}.0",
            f"${value}$",
            f"\\text{{{value}}}",
        ]
    if isinstance(value, Fraction):
        p, q = value.numerator, value.denominator
        forms = [f"\\frac{{{p}}}{{{q}}}", f"{p}/{q}", f"\\dfrac{{{p}}}{{{q}}}"]
        if 10**6 % q == 0:
            forms.append(str(p / q))
        return forms
    kind, k = value  # ("sqrt", k) or ("pi", k)
    if kind == "sqrt":
        return [f"\\sqrt{{{k}}}", f"{k}^{{1/2}}", f"\\sqrt {k}"]
    return [f"{k}\\pi", f"\\pi \\cdot {k}", f"{k} \\pi"]


def wrong_near(value: object, rng: random.Random) -> str:
    if isinstance(value, int):
        return str(value + rng.choice([-2, -1, 1, 2, 10]))
    if isinstance(value, Fraction):
        return f"\\frac{{{value.numerator + 1}}}{{{value.denominator}}}"
    kind, k = value
    return f"\\sqrt{{{k + 1}}}" if kind == "sqrt" else f"{k + 1}\\pi"


def make_answers(num_questions: int, votes: int, seed: int = 0) -> list[list[str | None]]:
    rng = random.Random(seed)
    lists = []
    for _ in range(num_questions):
        roll = rng.random()
        if roll < 0.55:
            value: object = rng.randint(-50, 2000)
        elif roll < 0.8:
            value = Fraction(rng.randint(1, 30), rng.choice([2, 3, 4, 5, 7, 8, 16]))
            if value.denominator == 1:
                value = int(value)
        elif roll < 0.9:
            value = ("sqrt", rng.choice([2, 3, 5, 6, 7, 10]))
        else:
            value = ("pi", rng.randint(2, 12))
        correct_share = rng.uniform(0.2, 1.0)
        forms = forms_of(value, rng)
        answers: list[str | None] = []
        for _ in range(votes):
            r = rng.random()
            if r < correct_share:
                answers.append(rng.choice(forms))
            elif r < correct_share + (1 - correct_share) * 0.6:
                answers.append(wrong_near(value, rng))
            elif r < correct_share + (1 - correct_share) * 0.8:
                answers.append(rng.choice(JUNK))
            else:
                answers.append(None)
        lists.append(answers)
    return lists


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 questions")
    args = parser.parse_args()
    num_questions = 200 if args.quick else 1000
    lists = make_answers(num_questions, 10)

    with EquivalenceChecker() as checker:
        checker.equivalent("1", "1.0")  # start the worker outside the measurement
        checker.reset_stats()

        cold: list[float] = []
        for answers in lists:
            start = time.perf_counter()
            majority_vote(answers, checker=checker)
            cold.append(time.perf_counter() - start)
        stats = checker.stats()

        warm: list[float] = []
        for answers in lists:
            start = time.perf_counter()
            majority_vote(answers, checker=checker)
            warm.append(time.perf_counter() - start)

        checker.clear_cache()
        start = time.perf_counter()
        majority_vote_many(lists, checker=checker)
        batched_s = time.perf_counter() - start

    per_q = stats.math_verify_calls / num_questions
    print(f"questions: {num_questions} x 10 answers")
    print(
        f"cold pass: {sum(cold):.2f} s; equivalence checks asked {stats.calls} "
        f"(fast path {stats.fast_path_hits}, cache {stats.cache_hits}, "
        f"math-verify {stats.math_verify_calls}, timeouts {stats.timeouts})"
    )
    print(
        f"math-verify calls per question: {per_q:.2f} (target <= 10; "
        f"all-pairs grouping would ask 45)"
    )
    median_ms = statistics.median(warm) * 1000
    p95_ms = sorted(warm)[int(0.95 * len(warm))] * 1000
    print(
        f"warm pass: median {median_ms:.3f} ms per question, p95 {p95_ms:.3f} ms (target median <= 2 ms)"
    )
    print(
        f"speed ratio cold / warm (median): {statistics.median(cold) / statistics.median(warm):.0f}x"
    )
    print(
        f"cold pass batched with majority_vote_many: {batched_s:.2f} s "
        f"({sum(cold) / batched_s:.1f}x the one-by-one cold pass)"
    )


if __name__ == "__main__":
    main()
