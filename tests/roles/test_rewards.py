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
    assert (
        challenger_reward(None, 0.0, valid=False, invalid_reward=-1.0).reward == -1.0
    )  # reference


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


# --- curriculum-reward forms of the seed (§6.1) ------------------------------------------


def test_variance_form_peaks_at_one_half():
    # 4 * 0.5 * 0.5 = 1, the paper form's peak
    assert uncertainty_reward(0.5, "variance") == 1.0


def test_variance_form_is_flatter_than_the_paper_tent_near_one_half():
    # 3 of 10: 4 * 0.3 * 0.7 = 0.84 here, 1 - 2 * 0.2 = 0.6 in the paper's form
    assert uncertainty_reward(0.3, "variance") == pytest.approx(0.84)
    assert uncertainty_reward(0.3, "paper") == pytest.approx(0.6)


@pytest.mark.parametrize("p_hat", [0.0, 1.0])
def test_variance_form_is_zero_when_the_solver_is_certain(p_hat):
    assert uncertainty_reward(p_hat, "variance") == 0.0


def test_zero_successes_in_eight_is_likely_for_a_frontier_question():
    # why AZR's zero rule misreads k = 0: P(0 of G | s) = (1 - s)^G = 0.95^8 = 0.6634
    from scipy.stats import binom

    assert binom.pmf(0, 8, 0.05) == pytest.approx(0.95**8)
    assert 0.95**8 == pytest.approx(0.663, abs=1e-3)
    # learnability calls that question unlearnable; the Beta posterior mean does not:
    # s~ = (0 + 1) / (8 + 1 + 1) = 0.1 -> 1 - 0.1 = 0.9
    assert uncertainty_reward(0.0, "learnability") == 0.0
    assert uncertainty_reward(0.0, "beta_learnability", num_votes=8) == pytest.approx(0.9)


def test_beta_learnability_is_laplace_rule_of_succession():
    # m = 10, uniform prior: k = 5 -> (5 + 1) / 12 = 0.5 -> 0.5; k = 10 -> 1 - 11/12 = 1/12
    assert uncertainty_reward(0.5, "beta_learnability", num_votes=10) == pytest.approx(0.5)
    assert uncertainty_reward(1.0, "beta_learnability", num_votes=10) == pytest.approx(1 / 12)


def test_beta_learnability_is_largest_at_no_parsed_vote():
    # the caveat in its docstring: k = 0 -> 1 - 1/12 = 0.917 > k = 5 -> 0.5
    r0 = uncertainty_reward(0.0, "beta_learnability", num_votes=10)
    assert r0 == pytest.approx(11 / 12) and r0 > uncertainty_reward(
        0.5, "beta_learnability", num_votes=10
    )


def test_beta_learnability_with_another_prior():
    from rzero.challenger.rewards import beta_learnability_reward

    # Beta(2, 2), k = 3 of m = 10: 1 - (3 + 2) / (10 + 4) = 9/14
    assert beta_learnability_reward(0.3, 10, (2.0, 2.0)) == pytest.approx(9 / 14)


def test_beta_learnability_needs_the_number_of_votes():
    with pytest.raises(ValueError, match="num_votes"):
        uncertainty_reward(0.5, "beta_learnability")


def test_beta_learnability_rejects_a_p_hat_that_is_no_vote_share():
    # 0.55 * 10 = 5.5 votes
    with pytest.raises(ValueError, match="vote share"):
        uncertainty_reward(0.55, "beta_learnability", num_votes=10)


def test_batch_rewards_pass_the_number_of_votes():
    # one question alone in B = 1: r_rep = 1; unclipped 1 - (2 + 1)/(4 + 2) - 1 = -0.5
    parts = challenger_rewards(
        ["Find x."], [0.5], form="beta_learnability", clip=False, num_votes=4
    )
    assert parts[0].reward == pytest.approx(-0.5)


def test_config_accepts_the_new_forms():
    from rzero.config import load_config

    for form in ("variance", "beta_learnability"):
        assert load_config(None, [f"challenger.reward_form={form}"]).challenger.reward_form == form


# --- step_summary's diversity numbers ----------------------------------------------------


def _step_rows(questions, p_hats):
    """Rows as ChallengerReward._score writes them, from challenger_rewards' parts."""
    parts = challenger_rewards(questions, p_hats)
    return [
        {
            "step": 1,
            "question": q,
            "valid": p.valid,
            "p_hat": p.p_hat,
            "r_unc": p.uncertainty if p.valid else None,
            "r_rep": p.repetition if p.valid else None,
            "reward": p.reward,
            "parse_rate": 1.0 if p.valid else None,
        }
        for q, p in zip(questions, parts, strict=True)
    ]


def test_step_summary_counts_the_penalty_clusters():
    from rzero.challenger.rewards import step_summary

    same = "What is the sum of the first ten positive integers?"
    rows = _step_rows([same, same, "Find all real x with x^2 = 2.", None], [0.5, 0.5, 0.5, None])
    s = step_summary(rows)
    # clusters {same, same} and {x^2}: r_rep 2/4, 2/4, 1/4 -> 1/(0.5·4)·2 + 1/(0.25·4) = 2
    assert s["questions"] == 3
    assert s["cluster_ratio"] == pytest.approx(2 / 3)


def test_step_summary_cluster_count_matches_a_second_clustering():
    # the count read from r_rep equals clustering the valid questions again
    from rzero.challenger.repetition import cluster_labels
    from rzero.challenger.rewards import step_summary

    questions = [
        "What is 2 + 3?",
        "What is 7 + 9?",
        "A train covers 60 km in 2 hours.",
        "A train covers 80 km in 3 hours.",
        "Solve x^2 - 5x + 6 = 0.",
        None,
    ]
    rows = _step_rows(questions, [0.5, 0.3, 0.6, 0.4, 0.5, None])
    clusters = len(set(cluster_labels(questions[:5]).tolist()))
    assert step_summary(rows)["cluster_ratio"] == pytest.approx(clusters / 5)


def test_step_summary_structure_ratio_counts_templates_once():
    from rzero.challenger.rewards import step_summary

    # "what is # + #?" twice, "solve x^# - #x + # = #." once -> 2 structures / 3 questions
    rows = _step_rows(
        ["What is 2 + 3?", "What is 17 + 9?", "Solve x^2 - 5x + 6 = 0."], [0.5, 0.5, 0.5]
    )
    assert step_summary(rows)["structure_ratio"] == pytest.approx(2 / 3)


def test_step_summary_with_no_valid_question_has_zero_ratios():
    from rzero.challenger.rewards import step_summary

    s = step_summary(_step_rows([None, None], [None, None]))
    assert (s["questions"], s["cluster_ratio"], s["distinct_2"], s["structure_ratio"]) == (
        0,
        0.0,
        0.0,
        0.0,
    )
