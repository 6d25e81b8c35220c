"""The challenger's uncertainty reward, the format gate and the combined reward."""

import math

import pytest

from rzero.challenger.rewards import (
    RewardParts,
    challenger_reward,
    challenger_rewards,
    uncertainty_reward,
)

# --- uncertainty_reward ----------------------------------------------------------------


def test_paper_form_peaks_at_one_half():
    # p_hat 0.5 -> 1 - 2*|0.5 - 0.5| = 1
    assert uncertainty_reward(0.5) == 1.0


def test_paper_form_eight_of_ten():
    # 8 of 10 agree -> p_hat 0.8 -> 1 - 2*|0.8 - 0.5| = 0.4
    assert uncertainty_reward(8 / 10) == pytest.approx(0.4)


def test_paper_form_three_of_ten():
    # 3 of 10 agree -> p_hat 0.3 -> 1 - 2*|0.3 - 0.5| = 0.6
    assert uncertainty_reward(3 / 10) == pytest.approx(0.6)


@pytest.mark.parametrize("p_hat", [0.0, 1.0])
def test_paper_form_is_zero_when_the_solver_is_certain(p_hat):
    assert uncertainty_reward(p_hat) == 0.0


def test_reference_form_is_min_of_p_and_one_minus_p():
    # min(0.8, 0.2) = 0.2; min(0.5, 0.5) = 0.5 (half the paper's scale)
    assert uncertainty_reward(0.8, "reference") == pytest.approx(0.2)
    assert uncertainty_reward(0.5, "reference") == 0.5
    assert uncertainty_reward(0.3, "reference") == pytest.approx(0.3)


def test_learnability_form():
    # Absolute Zero: 1 - p_hat, but 0 when the solver never succeeds
    assert uncertainty_reward(0.2, "learnability") == pytest.approx(0.8)
    assert uncertainty_reward(0.0, "learnability") == 0.0
    assert uncertainty_reward(1.0, "learnability") == 0.0


@pytest.mark.parametrize("p_hat", [-0.1, 1.1, math.nan, math.inf])
def test_p_hat_outside_unit_interval_is_rejected(p_hat):
    with pytest.raises(ValueError, match="p_hat"):
        uncertainty_reward(p_hat)


def test_unknown_form_is_rejected():
    with pytest.raises(ValueError, match="form"):
        uncertainty_reward(0.5, "entropy")


# --- challenger_reward -----------------------------------------------------------------


def test_reward_subtracts_the_repetition_penalty():
    # p_hat 0.5 -> r_unc 1; cluster of 2 in a batch of 8 -> r_rep 0.25 -> 1 - 0.25 = 0.75
    assert challenger_reward(0.5, 0.25, valid=True).reward == pytest.approx(0.75)


def test_reward_is_clipped_at_zero_by_default():
    # p_hat 0.9 -> r_unc 0.2; r_rep 0.5 -> 0.2 - 0.5 = -0.3 -> clipped to 0
    assert challenger_reward(0.9, 0.5, valid=True).reward == 0.0


def test_reference_reward_is_unclipped():
    # reference: min(0.9, 0.1) - 0.5 = 0.1 - 0.5 = -0.4
    reward = challenger_reward(0.9, 0.5, valid=True, form="reference", clip=False).reward
    assert reward == pytest.approx(-0.4)


def test_lambda_scales_the_penalty():
    # 1 - 2 * 0.25 = 0.5
    assert challenger_reward(0.5, 0.25, valid=True, lam=2.0).reward == pytest.approx(0.5)


def test_format_gate_gives_the_invalid_reward():
    assert challenger_reward(None, 0.0, valid=False).reward == 0.0  # paper
    assert challenger_reward(None, 0.0, valid=False, invalid_reward=-1.0).reward == -1.0  # reference


def test_valid_completion_needs_p_hat():
    with pytest.raises(ValueError, match="p_hat"):
        challenger_reward(None, 0.1, valid=True)


def test_repetition_penalty_outside_unit_interval_is_rejected():
    with pytest.raises(ValueError, match="repetition_penalty"):
        challenger_reward(0.5, 1.5, valid=True)


def test_parts_record_what_the_reward_is_made_of():
    parts = challenger_reward(0.6, 0.25, valid=True)
    # r_unc = 1 - 2*0.1 = 0.8; 0.8 - 0.25 = 0.55
    assert parts == RewardParts(True, 0.6, pytest.approx(0.8), 0.25, pytest.approx(0.55))


def test_batch_rewards_cluster_valid_questions_over_the_whole_batch():
    same = "What is the sum of the first ten positive integers?"
    questions = [same, same, "Find all real x with x^2 = 2.", None]
    p_hats = [0.5, 0.5, 0.5, None]
    parts = challenger_rewards(questions, p_hats)
    # the two identical questions form a cluster of 2 in a batch of B = 4 -> r_rep 0.5;
    # the other valid one is alone -> 1/4; the malformed one gets the invalid reward 0
    assert [p.repetition for p in parts[:3]] == [0.5, 0.5, 0.25]
    assert [p.reward for p in parts] == [0.5, 0.5, 0.75, 0.0]
    assert not parts[3].valid
