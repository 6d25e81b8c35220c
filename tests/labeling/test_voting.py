"""Majority vote (label, p̂, groups) and the informative band filter."""

import pytest

from rzero.labeling.equivalence import EquivalenceChecker
from rzero.labeling.filtering import in_band, keep_question
from rzero.labeling.voting import Votes, majority_vote, majority_vote_many


@pytest.fixture(scope="module")
def checker():
    with EquivalenceChecker(timeout_s=5.0) as c:
        yield c


def test_eight_of_ten_agree(checker):
    votes = majority_vote(["4"] * 8 + ["5", "6"], checker=checker)
    # 8 of 10 agree -> p_hat 0.8; groups 8, 1, 1 -> margin (8 - 1) / 10 = 0.7
    assert votes.label == "4"
    assert votes.p_hat == pytest.approx(0.8)
    assert votes.num_groups == 3
    assert votes.top2_margin == pytest.approx(0.7)
    assert votes.parse_rate == 1.0


def test_fraction_decimal_and_slash_form_one_group(checker):
    votes = majority_vote([r"\frac{1}{2}", "0.5", "1/2", "2"], checker=checker)
    # 3 of 4 in the 1/2 group -> p_hat 0.75; the representative is the first member
    assert votes.groups == {r"\frac{1}{2}": 3, "2": 1}
    assert votes.label == r"\frac{1}{2}"
    assert votes.p_hat == pytest.approx(0.75)


def test_unparsed_answers_lower_p_hat_but_never_label(checker):
    votes = majority_vote([None, None, None, "7", "7"], checker=checker)
    # 2 of 5 say 7, 3 unparsed -> p_hat 2/5 = 0.4, parse_rate 2/5, label 7 (not None)
    assert votes.label == "7"
    assert votes.p_hat == pytest.approx(0.4)
    assert votes.parse_rate == pytest.approx(0.4)
    assert votes.assignments == (None, None, None, 0, 0)


def test_all_unparsed_gives_no_label(checker):
    votes = majority_vote([None, "", "  "], checker=checker)
    assert (votes.label, votes.p_hat, votes.num_groups, votes.parse_rate) == (None, 0.0, 0, 0.0)


def test_empty_list(checker):
    votes = majority_vote([], checker=checker)
    assert votes == Votes(None, 0.0, {}, 0, 0.0, 0.0, 0, ())


def test_tie_goes_to_the_group_that_appeared_first(checker):
    votes = majority_vote(["3", "9", "9", "3"], checker=checker)
    # 2 vs 2: "3" appeared first -> label 3, p_hat 0.5, margin 0
    assert votes.label == "3"
    assert votes.p_hat == pytest.approx(0.5)
    assert votes.top2_margin == 0.0


def test_at_most_one_check_per_answer_and_group():
    with EquivalenceChecker(timeout_s=5.0) as c:
        answers = ["a+b", "b+a", "2a", "a+b", "a\\cdot 2", "c"]
        votes = majority_vote(answers, checker=c)
        # b+a: 1 check (vs a+b, match); 2a: 1 check (vs a+b); a+b again: same string, 0;
        # a\cdot 2: 2 checks (a+b no, 2a match); c: 2 checks (vs a+b, vs 2a) -> 6
        assert c.stats().calls == 6
        assert votes.groups == {"a+b": 3, "2a": 2, "c": 1}


def test_many_questions_vote_like_one_at_a_time(checker):
    lists = [["1/2", "0.5", "3", None], ["x^2", "x \\cdot x", "x", "x^2"], [], ["10", "10", "10"]]
    assert majority_vote_many(lists, checker=checker) == [
        majority_vote(a, checker=checker) for a in lists
    ]


def test_exhausted_budget_keeps_answers_apart():
    with EquivalenceChecker(timeout_s=5.0) as c:
        votes = majority_vote(["1/2", "0.5", "0.5"], checker=c, budget_s=0.0)
        # no worker time: 1/2 vs 0.5 is never checked -> groups {1/2: 1, 0.5: 2}
        assert votes.groups == {"1/2": 1, "0.5": 2}
        assert votes.p_hat == pytest.approx(2 / 3)


# --- the informative band -------------------------------------------------------------


@pytest.mark.parametrize("agree", [3, 5, 7])
def test_band_keeps_three_to_seven_of_ten(agree):
    # |3/10 - 1/2| = 0.2 + float error, must still count as <= 0.25 ... and so must 7/10
    assert in_band(agree / 10, delta=0.25)


@pytest.mark.parametrize("agree", [0, 2, 8, 10])
def test_band_drops_two_and_eight_of_ten(agree):
    # |2/10 - 1/2| = 0.3 > 0.25
    assert not in_band(agree / 10, delta=0.25)


def test_band_edges_with_another_delta():
    # delta 0.2: 3/10 and 7/10 are exactly on the edge -> inside
    assert in_band(3 / 10, delta=0.2) and in_band(7 / 10, delta=0.2)
    assert not in_band(2 / 10, delta=0.2)


def test_reference_band_of_the_official_code():
    # 0.3 <= p_hat <= 0.8 with m = 9 votes: 3..7 of 9 kept (3/9 = 0.33, 7/9 = 0.78)
    kept = [k for k in range(10) if in_band(k / 9, low=0.3, high=0.8)]
    assert kept == [3, 4, 5, 6, 7]
    assert in_band(0.3, low=0.3, high=0.8) and in_band(0.8, low=0.3, high=0.8)


def test_band_rejects_invalid_input():
    with pytest.raises(ValueError, match="p_hat"):
        in_band(1.5)
    with pytest.raises(ValueError, match="delta"):
        in_band(0.5, delta=0.7)
    with pytest.raises(ValueError, match="low"):
        in_band(0.5, low=0.8, high=0.3)


def test_keep_question_needs_a_label(checker):
    assert keep_question(majority_vote(["1", "1", "2", "3"], checker=checker))  # p_hat 0.5
    assert not keep_question(Votes(None, 0.0, {}, 0, 0.0, 0.0, 10, (None,) * 10), delta=0.5)
