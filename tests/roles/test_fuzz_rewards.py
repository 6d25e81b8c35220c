"""Fuzz: 10,000+ adversarial challenger completions through extraction, voting, rewards.

Nothing may raise, every reward must be finite and in its range, and no single call may
take longer than the equivalence guard's limit plus one second (a vote gets a budget of
one guard limit, so an adversarial answer cannot stall it).
"""

import math
import random
import time

import pytest

from rzero.challenger.rewards import challenger_reward, challenger_rewards
from rzero.labeling.answers import extract_boxed, extract_question
from rzero.labeling.equivalence import EquivalenceChecker
from rzero.labeling.voting import majority_vote

LIMIT_S = 2.0  # guard limit for this test (the default is 5 s; math-verify's own is 1 s)
SLACK_S = 1.0
NUM_COMPLETIONS = 10_000
VOTES_PER_QUESTION = 10
GRPO_BATCH = 16

# Boxed answers are mostly drawn from this pool, so most equivalence checks hit the
# cache or the fast path after their first appearance; the adversarial entries are the
# point of the test.
ANSWER_POOL = [
    "5",
    "7",
    "-3",
    "12",
    "0",
    "1/2",
    "0.5",
    r"\frac{1}{2}",
    r"\dfrac12",
    r"\sqrt{2}",
    "x+1",
    r"\pi",
    "3.14",
    "2^{10}",
    "1024",
    "(1,2)",
    r"\{1,2\}",
    r"\text{yes}",
    "ABC",
    "½",
    "∞",
    "α+β",
    r"10^{10^{10}}",
    r"9^{9^{9}}",
    r"\frac{1}{0}",
    "0/0",
    r"\\",
    "{}{}",
]
QUESTIONS = [
    "What is the sum of the first ten positive integers?",
    "Find all real x such that x^2 - 5x + 6 = 0.",
    "A train travels 60 km in 1.5 hours. What is its average speed?",
    "How many primes are there below 100?",
    "Compute the area of a circle of radius 3.",
]
UNICODE = ["什么是", "∑_{k=1}^n k", "🙂", "\u202e", "\u0000", "é\u0301", "٣", "𝟙", "\ufeff"]
JUNK_ALPHABET = "{}\\$<>/ questionboxedfbx0123456789^_()[]"


def completion(rng: random.Random, i: int) -> str:
    answer = rng.choice(ANSWER_POOL)
    question = rng.choice(QUESTIONS)
    kind = i % 16
    if kind == 0:  # well-formed
        return f"<question>{question}</question> so \\boxed{{{answer}}}"
    if kind == 1:  # unbalanced braces
        return f"<question>{question}</question> \\boxed{{" + "{" * rng.randint(1, 50) + answer
    if kind == 2:  # 500-deep nesting
        return f"<question>{question}</question> \\boxed{{{'{' * 500}{answer}{'}' * 500}}}"
    if kind == 3 and i % 160 == 3:  # 100,000-character strings (every 10th of this kind)
        filler = rng.choice(["x", "{", "\\", "}", "<question>", " word"])
        return (filler * (100_000 // len(filler))) + f"\\boxed{{{answer}}}"
    if kind == 3:
        return f"<question>{question * 40}</question> \\boxed{{{answer}}}"
    if kind == 4:  # unicode everywhere
        u = "".join(rng.choice(UNICODE) for _ in range(rng.randint(1, 8)))
        return f"<question>{u} {question}</question> \\boxed{{{rng.choice(UNICODE)}}}"
    if kind == 5:  # towers that make sympy grind
        return f"<question>{question}</question> \\boxed{{10^{{10^{{10}}}}}}"
    if kind == 6:  # empty boxes
        return f"<question>{question}</question> \\boxed{{{' ' * rng.randint(0, 3)}}}"
    if kind == 7:  # several boxes
        boxes = " ".join(f"\\boxed{{{rng.choice(ANSWER_POOL)}}}" for _ in range(rng.randint(2, 6)))
        return f"<question>{question}</question> {boxes}"
    if kind == 8:  # tags inside boxes and boxes inside tags
        return rng.choice(
            [
                f"\\boxed{{<question>{question}</question>}}",
                f"<question>{question} \\boxed{{{answer}}}</question>",
                f"<question>\\boxed{{<question>{answer}</question>}}</question>",
            ]
        )
    if kind == 9:  # random junk built from the syntax characters
        return "".join(rng.choice(JUNK_ALPHABET) for _ in range(rng.randint(0, 300)))
    if kind == 10:  # backslash runs, dangling commands
        return rng.choice(
            ["\\" * rng.randint(1, 5000), "\\boxed", "\\boxed ", "\\fbox{", "\\boxed }"]
        )
    if kind == 11:  # nested and brace-less boxes
        return rng.choice(
            [f"\\boxed{{\\boxed{{{answer}}}}}", f"$\\boxed {answer}$", f"\\fbox{{{answer}}}"]
        )
    if kind == 12:  # tags that never close / close without opening
        return rng.choice(
            [f"<question>{question} \\boxed{{{answer}}}", f"{question}</question> \\boxed{{1}}"]
        )
    if kind == 13:  # an escaped brace that must not close the box
        return f"<question>{question}</question> \\boxed{{\\{{{answer}\\}}}}"
    return f"<question>{question}</question> the answer is \\boxed{{{answer}}}."


@pytest.fixture(scope="module")
def checker():
    with EquivalenceChecker(timeout_s=LIMIT_S) as c:
        c.equivalent("1", "1.0")  # start the worker outside the timed calls
        yield c


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    elapsed = time.perf_counter() - start
    assert elapsed <= LIMIT_S + SLACK_S, f"{fn.__name__} took {elapsed:.2f} s"
    return result


@pytest.mark.slow
def test_adversarial_completions(checker):
    rng = random.Random(20250801)
    texts = [completion(rng, i) for i in range(NUM_COMPLETIONS)]
    assert sum(len(t) >= 100_000 for t in texts) >= 50

    # extraction
    questions = [timed(extract_question, t) for t in texts]
    answers = [timed(extract_boxed, t) for t in texts]
    for q, a in zip(questions, answers, strict=True):
        assert q is None or (isinstance(q, str) and q == q.strip() and q)
        assert a is None or (isinstance(a, str) and a == a.strip() and a)
    assert sum(a is None for a in answers) > 1000  # the format gate has work to do
    assert sum(a is not None for a in answers) > 5000

    # voting: one question per VOTES_PER_QUESTION answers
    groups = [
        answers[k : k + VOTES_PER_QUESTION] for k in range(0, len(answers), VOTES_PER_QUESTION)
    ]
    votes = [timed(majority_vote, g, checker=checker, budget_s=LIMIT_S) for g in groups]
    for g, v in zip(groups, votes, strict=True):
        assert 0.0 <= v.p_hat <= 1.0 and 0.0 <= v.top2_margin <= v.p_hat
        assert v.label is None or v.label in [a.strip() for a in g if a is not None]
        assert sum(v.groups.values()) == sum(a is not None for a in g)

    # rewards: GRPO batches of completions, each scored against its question's vote
    p_hats = [votes[i // VOTES_PER_QUESTION].p_hat for i in range(len(texts))]
    for start in range(0, len(texts), GRPO_BATCH):
        batch = range(start, min(start + GRPO_BATCH, len(texts)))
        valid = [questions[i] is not None and answers[i] is not None for i in batch]
        qs = [questions[i] if ok else None for i, ok in zip(batch, valid, strict=True)]
        ps = [p_hats[i] if ok else None for i, ok in zip(batch, valid, strict=True)]
        parts = timed(challenger_rewards, qs, ps)
        for p in parts:
            assert math.isfinite(p.reward) and 0.0 <= p.reward <= 1.0
            assert 0.0 <= p.repetition <= 1.0
        reference = timed(
            challenger_rewards,
            qs,
            ps,
            form="reference",
            clip=False,
            invalid_reward=-1.0,
            variant="reference",
        )
        for p in reference:
            # malformed: exactly -1 (nothing else subtracted); well-formed: r_unc in
            # [0, 0.5] minus r_rep in [0, 1], so -1 <= r <= 0.5
            if p.valid:
                assert math.isfinite(p.reward) and -1.0 <= p.reward <= 0.5
            else:
                assert p.reward == -1.0
        for i, ok in zip(batch, valid, strict=True):
            for form in ("paper", "reference", "learnability"):
                r = timed(
                    challenger_reward, p_hats[i] if ok else None, 0.0, valid=ok, form=form
                ).reward
                assert math.isfinite(r) and 0.0 <= r <= 1.0

    stats = checker.stats()
    # most checks were answered without math-verify
    assert stats.cache_hits + stats.fast_path_hits > stats.math_verify_calls
