"""Extraction of the last \\boxed{} answer and the last <question>, and normalisation."""

import time

import pytest

from rzero.labeling.answers import extract_boxed, extract_question, normalize_answer

# --- extract_boxed -------------------------------------------------------------------


def test_boxed_simple():
    assert extract_boxed(r"so the answer is \boxed{42}.") == "42"


def test_boxed_nested_braces_are_balanced():
    assert extract_boxed(r"\boxed{\frac{1}{2}}") == r"\frac{1}{2}"


def test_boxed_takes_the_last_box():
    assert extract_boxed(r"first \boxed{1}, then \boxed{2}") == "2"


def test_fbox_counts_as_a_box():
    assert extract_boxed(r"\fbox{7}") == "7"


def test_boxed_without_braces_takes_the_next_token():
    # "\boxed 5." -> token "5." -> sentence period dropped -> "5"
    assert extract_boxed(r"hence $\boxed 5$") == "5"
    assert extract_boxed(r"hence \boxed 5. Done") == "5"


def test_boxed_with_space_before_brace():
    assert extract_boxed(r"\boxed {x+1}") == "x+1"


def test_unbalanced_last_box_is_none_without_fallback():
    # the last box never closes; the earlier, complete box is not used instead
    assert extract_boxed(r"\boxed{1} and \boxed{\frac{1}{2}") is None


def test_empty_box_is_none():
    assert extract_boxed(r"\boxed{}") is None
    assert extract_boxed(r"\boxed{   }") is None


def test_no_box_is_none():
    assert extract_boxed("the answer is 5") is None
    assert extract_boxed("") is None
    assert extract_boxed(None) is None


def test_escaped_braces_do_not_count():
    # \{ and \} are literal braces of a set, not grouping braces
    assert extract_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"
    assert extract_boxed(r"\boxed{\left\{ x \right.}") == r"\left\{ x \right."


def test_longer_command_name_is_not_a_box():
    # \boxedtext{3} is not \boxed; the real box before it is the answer
    assert extract_boxed(r"\boxed{2} \boxedtext{3}") == "2"


def test_deep_nesting_and_long_text_are_fast():
    deep = r"\boxed{" + "{" * 500 + "x" + "}" * 500 + "}"
    long_text = "x" * 100_000 + deep + "\\" * 50_000
    start = time.perf_counter()
    assert extract_boxed(deep) == "{" * 500 + "x" + "}" * 500
    assert extract_boxed(long_text) == "{" * 500 + "x" + "}" * 500
    assert extract_boxed("\\boxed{" + "{" * 100_000) is None
    assert time.perf_counter() - start < 0.5


# --- extract_question ----------------------------------------------------------------


def test_question_is_stripped():
    assert extract_question("<question>\n  What is 1+1?\n</question>") == "What is 1+1?"


def test_question_takes_the_last_pair():
    text = "<question>draft</question> ... <question>final</question> \\boxed{2}"
    assert extract_question(text) == "final"


@pytest.mark.parametrize(
    "text",
    ["no tags", "<question>never closed", "</question> only a close", "<question>  </question>"],
)
def test_missing_or_empty_question_is_none(text):
    assert extract_question(text) is None


# --- normalize_answer ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        (r" $\dfrac{1}{2}$ ", r"\frac{1}{2}"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"\text{(A)}", "(A)"),
        ("5.", "5"),
        ("\u22123", "-3"),
        (r"1\,000", "1000"),
    ],
)
def test_normalize_rewrites_only_typesetting(raw, normal):
    assert normalize_answer(raw) == normal


def test_normalize_keeps_meaningful_differences():
    # a space between two letters is a separator (\pi r is not \pir); \leftarrow stays
    assert normalize_answer(r"\pi r") == r"\pi r"
    assert normalize_answer(r"x \leftarrow y") == r"x\leftarrow y"
    assert normalize_answer("0.5") != normalize_answer("5")
    assert normalize_answer("-3") != normalize_answer("3")
