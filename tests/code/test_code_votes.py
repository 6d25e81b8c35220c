"""The code tier's vote, exact label accuracy and rewards, with scripted generators (no model)."""

import json
import random

import pytest
from conftest import ScriptedGenerator

from rzero.code.azr import SolverLog, proposer_by_type, rate_fields
from rzero.code.rewards import CodeChallengerReward, PseudoLabelReward, read_proposals
from rzero.code.run import sandbox_options
from rzero.code.votes import CodeVoter, accuracy_by_p_hat, code_vote, exact_label_accuracy, vote_row
from rzero.config import load_config
from rzero.executor.rewards import ExecutorSolverReward
from rzero.executor.tasks import CodeTask, outputs_equal
from rzero.labeling.equivalence import Check
from rzero.labeling.voting import majority_vote_many

ADD = "def f(a, b):\n    return a + b"


def scripted(texts: list[str]) -> ScriptedGenerator:
    """Every prompt gets the same scripted completions (cycled to n)."""
    return ScriptedGenerator(lambda text, n, params: texts, cycle=True)


class OutputsChecker:
    """`check_many` by `outputs_equal`: the checker the math vote would need for code."""

    def check_many(self, pairs, *, deadlines=None, direction=None):
        return [Check(outputs_equal(a, b), "fast_path") for a, b in pairs]


# -- the vote --------------------------------------------------------------------------------


def test_vote_groups_equal_values_and_counts_unparsed_in_m():
    votes = code_vote(["(1, 2)", "(1,2)", "3", None])
    assert votes.groups == {"(1, 2)": 2, "3": 1}
    assert votes.label == "(1, 2)"
    assert votes.p_hat == 0.5  # 2 of m = 4: the unparsed vote counts in m
    assert votes.parse_rate == 0.75 and votes.top2_margin == 0.25  # (2 - 1) / 4


def test_vote_tie_goes_to_the_group_seen_first():
    assert code_vote(["'b'", "'a'", "'a'", "'b'"]).label == "'b'"


def test_vote_keeps_outputs_apart_that_differ_only_in_spaces():
    # the math vote's fast path squeezes spaces, so it would merge these two outputs
    votes = code_vote(["'1 2'", "'12'", "'12'"])
    assert votes.groups == {"'1 2'": 1, "'12'": 2}


def test_vote_with_no_answer_has_no_label():
    votes = code_vote([None, None])
    assert (votes.label, votes.p_hat, votes.parse_rate) == (None, 0.0, 0.0)


def test_vote_matches_the_math_vote_with_an_outputs_equal_checker():
    # naive reference: majority_vote_many asking outputs_equal for every (answer, group) pair
    rng = random.Random(0)
    values = ["1", "1.0", "(1, 2)", "(1,2)", "[3]", "'a'", '"a"', "None", "{1: 2}", "-0"]
    lists = [[rng.choice(values + [None]) for _ in range(rng.randint(1, 8))] for _ in range(200)]
    reference = majority_vote_many(lists, checker=OutputsChecker())
    for answers, ref in zip(lists, reference, strict=True):
        ours = code_vote(answers)
        assert (ours.p_hat, ours.num_groups, ours.top2_margin, ours.parse_rate) == (
            ref.p_hat,
            ref.num_groups,
            ref.top2_margin,
            ref.parse_rate,
        )
        assert ref.label is None or outputs_equal(ours.label, ref.label)


def test_vote_row_marks_the_label_against_the_truth():
    task = CodeTask(kind="deduction", program=ADD, input="(1, 2)", output="3")
    right = vote_row(task, ["3", "3", "4"], code_vote(["3", "3", "4"]))
    wrong = vote_row(task, ["4", "4", "3"], code_vote(["4", "4", "3"]))
    none = vote_row(task, [None], code_vote([None]))
    assert (right["label_correct"], wrong["label_correct"], none["label_correct"]) == (
        True,
        False,
        None,
    )


# -- exact label accuracy ---------------------------------------------------------------------


def test_exact_accuracy_is_right_over_labelled():
    rows = [{"label": "1", "label_correct": True}] * 3 + [
        {"label": "2", "label_correct": False},
        {"label": None, "label_correct": None},
    ]
    acc = exact_label_accuracy(rows)
    assert acc["label_accuracy"] == 0.75  # 3 right of 4 labelled; the unlabelled row is not wrong
    assert (acc["n_labelled"], acc["n_unlabelled"]) == (4, 1)
    # Wilson, k=3, n=4: centre (0.75 + 0.4802) / 1.9604 = 0.6275, half 0.3252
    assert acc["ci_low"] == pytest.approx(0.3006, abs=1e-3)
    assert acc["ci_high"] == pytest.approx(0.9544, abs=1e-3)


def test_accuracy_by_p_hat_uses_the_audit_buckets():
    rows = [
        {"label": "1", "p_hat": 0.25, "label_correct": False},
        {"label": "1", "p_hat": 0.5, "label_correct": True},
        {"label": "1", "p_hat": 0.75, "label_correct": True},
        {"label": "1", "p_hat": 1.0, "label_correct": True},
        {"label": "1", "p_hat": 1.0, "label_correct": False},
    ]
    buckets = {b["bucket"]: (b["correct"], b["n_labelled"]) for b in accuracy_by_p_hat(rows)}
    assert buckets == {
        "[0.0, 0.3)": (0, 1),
        "[0.5, 0.7)": (1, 1),
        "[0.7, 0.9)": (1, 1),
        "[0.9, 1.0]": (1, 2),
    }  # p_hat = 1 falls in the closed last bucket


# -- rewards -----------------------------------------------------------------------------------

VALID = "```python\ndef f(x):\n    return x * 3\n```\n<input>4</input>"
FAILS = "```python\ndef f(x):\n    return x / 0\n```\n<input>4</input>"
BROKEN = "no code here"


def cfg_for(tmp_path, **sets):
    base = {
        "run.task": "rzero_code",
        "audit.judge": "executor",
        "labeling.num_votes": 4,
        "challenger.repetition_lambda": 0,
    }
    return load_config(None, [f"{k}={v}" for k, v in {**base, **sets}.items()])


def test_read_proposals_parses_and_runs():
    got = read_proposals([VALID, FAILS, BROKEN], sandbox_options(cfg_for(None)))
    assert got[0].task.output == "12"  # f(4) = 4 * 3
    assert got[1].task is None and "ZeroDivisionError" in got[1].reason
    assert got[2].reason == "unparsable"


def test_challenger_reward_is_the_uncertainty_of_the_vote_and_logs_the_truth(tmp_path):
    cfg = cfg_for(tmp_path)
    # 2 of 4 votes say 12 (the truth), 1 says 13, 1 has no tag: p_hat = 2/4
    solver = scripted(
        ["<output>12</output>", "<output>13</output>", "<output>12</output>", "I do not know"]
    )
    log = tmp_path / "steps.jsonl"
    reward = CodeChallengerReward(CodeVoter(solver, cfg.labeling), cfg, log, iteration=1)
    rewards = reward([[]] * 3, [VALID, FAILS, BROKEN])
    assert rewards == [1.0, 0.0, 0.0]  # 1 - 2|0.5 - 0.5| = 1 (lambda 0); invalid -> 0
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert rows[0]["label"] == "12" and rows[0]["truth"] == "12" and rows[0]["label_correct"]
    assert rows[0]["p_hat"] == 0.5 and rows[0]["parse_rate"] == 0.75
    assert [r["valid"] for r in rows] == [True, False, False]


def test_challenger_reward_with_a_wrong_majority_records_a_wrong_label(tmp_path):
    cfg = cfg_for(tmp_path)
    solver = scripted(
        ["<output>13</output>", "<output>13</output>", "<output>13</output>", "<output>12</output>"]
    )
    seen = []
    reward = CodeChallengerReward(
        CodeVoter(solver, cfg.labeling), cfg, tmp_path / "s.jsonl", iteration=1, on_step=seen.append
    )
    assert reward([[]], [VALID]) == [pytest.approx(0.5)]  # p_hat 3/4: 1 - 2 * 0.25
    assert seen[0]["label_accuracy"] == 0.0 and seen[0]["n_labelled"] == 1


def test_pseudo_label_reward_trains_on_the_label_and_records_the_truth():
    task = CodeTask(kind="deduction", program=ADD, input="(1, 2)", output="3").to_json()
    reward = PseudoLabelReward()
    # the label is wrong (4); completions: 4, 3, none
    got = reward(
        [[]] * 3,
        ["<output>4</output>", "<output>3</output>", "x"],
        label=["4"] * 3,
        task=[task] * 3,
    )
    assert got == [1.0, 0.0, 0.0]  # rewarded for agreeing with the (wrong) label
    assert reward.steps[0]["true_rate"] == pytest.approx(1 / 3)  # one of three is truly right
    assert reward.steps[0]["label_accuracy"] == 0.0


# -- Absolute Zero's per-type numbers -------------------------------------------------------------


def test_rate_fields_carry_a_wilson_interval():
    fields = rate_fields("solve", 0, 4)
    assert fields["solve_rate"] == 0.0 and fields["solve_ci_low"] == 0.0
    assert fields["solve_ci_high"] == pytest.approx(0.4899, abs=1e-3)  # Wilson k=0, n=4


def test_proposer_by_type_counts_valid_and_averages_r_bar_of_valid_only():
    rows = [
        {"kind": "deduction", "valid": True, "r_bar": 0.25, "reward": 0.75},
        {"kind": "deduction", "valid": True, "r_bar": 1.0, "reward": 0.0},
        {"kind": "deduction", "valid": False, "r_bar": None, "reward": -1.0},
        {"kind": "induction", "valid": False, "r_bar": None, "reward": -0.5},
    ]
    got = proposer_by_type(rows, ["deduction", "induction"])
    assert got["deduction/valid"] == 2 and got["deduction/valid_rate"] == pytest.approx(2 / 3)
    assert got["deduction/mean_r_bar"] == pytest.approx(0.625)  # (0.25 + 1.0) / 2
    assert got["deduction/mean_reward"] == pytest.approx(-0.25 / 3)  # (0.75 + 0 - 1) / 3
    assert got["induction/valid_rate"] == 0.0


def test_solver_log_counts_solves_per_type():
    ded = CodeTask(kind="deduction", program=ADD, input="(1, 2)", output="3").to_json()
    abd = CodeTask(kind="abduction", program=ADD, input="(1, 2)", output="3").to_json()
    log = SolverLog(ExecutorSolverReward())
    rewards = log(
        [[]] * 4,
        [
            "<output>3</output>",
            "<output>4</output>",
            "<input>(0, 3)</input>",
            "<input>(5, 5)</input>",
        ],
        task=[ded, ded, abd, abd],
    )
    assert rewards == [1.0, 0.0, 1.0, 0.0]  # f(0, 3) = 3 solves the abduction task too
    assert log.counts == {"deduction": [2, 1], "abduction": [2, 1]}
    assert log.steps[0]["deduction/solve_rate"] == 0.5
