"""The questions whose answer can be computed, and the loop's exact label accuracy on them."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from rzero.labeling.computable import computed_answer
from rzero.math.run import computable_labels, computable_summary


@pytest.mark.parametrize(
    "question, answer",
    [
        ("What is 17 × 23 + 4?", "395"),
        ("Compute (3/4) + 5^2.", "103/4"),
        ("Calculate 120 divided by 8", "15"),
        ("Find the value of 3 times 4 minus 2.", "10"),
        ("What is 2.5 * 0.3?", "0.75"),
        ("What is 7 / 4?", "7/4"),
        ("Evaluate $2^{10} - 1$.", "1023"),
        ("What is 1,000 + 25?", "1025"),
        ("What is -3 + 5?", "2"),
        ("What is 6 \\times 7?", "42"),
        ("What is 2 ** 3 ** 2?", "512"),
    ],
)
def test_a_bare_expression_is_computed_exactly(question, answer):
    assert computed_answer(question) == answer


@pytest.mark.parametrize(
    "question",
    [
        "If Tom has 3 apples and eats 1, how many are left?",
        "What is x + 2 when x = 3?",
        "What is 12?",  # a number, nothing to compute
        "What is the sum of 3 and 4?",  # words: not an expression
        "What is 5 / 0?",
        "What is 9 ** 999?",  # too large
        "Compute 2^100",  # a power past MAX_EXPONENT
        "What is 3 + 4 meters?",
        "__import__('os').system('true')",
        "What is (1 + 2?",
        "",
    ],
)
def test_anything_else_is_not_computable(question):
    assert computed_answer(question) is None


def test_computed_answers_match_python_on_random_expressions():
    rng = random.Random(0)
    for _ in range(300):
        a, b, c = (rng.randint(-50, 50) for _ in range(3))
        op1, op2 = rng.choice("+-*"), rng.choice("+-*/")
        if op2 == "/" and c == 0:
            continue
        text = f"What is {a} {op1} ({b} {op2} {c})?"
        expected = Fraction(a)
        inner = {"+": Fraction(b) + c, "-": Fraction(b) - c, "*": Fraction(b) * c}.get(op2)
        inner = Fraction(b, c) if op2 == "/" else inner
        expected = {"+": a + inner, "-": a - inner, "*": a * inner}[op1]
        want = (
            str(expected.numerator)
            if expected.denominator == 1
            else f"{expected.numerator}/{expected.denominator}"
        )
        assert computed_answer(text) == want, text


def test_the_loop_records_its_labels_accuracy_on_the_computable_questions():
    rows = [
        {"question": "What is 6 * 7?", "label": "42", "kept": True},
        {"question": "What is 6 * 8?", "label": "47", "kept": True},
        {"question": "What is 10 - 4?", "label": "6", "kept": False},
        {"question": "What is 10 - 5?", "label": None, "kept": False},
        {"question": "A train leaves at noon; when does it arrive?", "label": "3", "kept": True},
    ]
    labelled = computable_labels(rows, "both")
    assert [r.get("label_correct") for r in labelled] == [True, False, True, False, None]
    assert labelled[0]["computed_answer"] == "42" and "computed_answer" not in labelled[4]
    assert computable_summary(labelled) == {
        "computable": 4,
        "computable_label_accuracy": 0.5,
        "kept_computable": 2,
        "kept_computable_label_accuracy": 0.5,
    }
    assert computable_summary(labelled[4:])["computable_label_accuracy"] is None
