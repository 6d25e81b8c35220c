"""The solver's reward and dataset: `solver_reward`/`SolverReward` and `label_pool`."""

from __future__ import annotations

import pytest
from conftest import ScriptedGenerator

from rzero.config import LabelingConfig
from rzero.labeling.voting import FrozenSolver
from rzero.solver.dataset import label_pool, p_hat_histogram
from rzero.solver.rewards import SolverReward, solver_reward


def test_solver_reward_is_one_for_an_equivalent_answer():
    assert solver_reward("1/2", "0.5") == 1.0
    assert solver_reward("3", "0.5") == 0.0
    assert solver_reward(None, "0.5") == 0.0


def test_reference_reward_adds_a_format_bonus():
    # 0.9 * accuracy + 0.1 * format
    assert solver_reward("0.5", "1/2", "reference") == pytest.approx(1.0)  # 0.9 + 0.1
    assert solver_reward("3", "1/2", "reference") == pytest.approx(0.1)  # 0 + 0.1
    assert solver_reward(None, "1/2", "reference") == 0.0  # 0 + 0


def test_solver_reward_class_scores_trl_completions_against_their_labels():
    reward = SolverReward()
    completions = [
        [{"role": "assistant", "content": "so \\boxed{4}"}],
        [{"role": "assistant", "content": "so \\boxed{5}"}],
        "plain text, no box",
    ]
    assert reward(["p"] * 3, completions, label=["4", "4", "4"]) == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="allowed accuracy, reference"):
        SolverReward("format")


def _pool_solver(**labeling):
    answers = {
        # 2 of 4 say 2, 1 says 3, 1 has no box -> label 2, p_hat 2/4 = 0.5 (in the band),
        # parse rate 3/4, top-2 margin (2 - 1)/4 = 0.25
        "qa": ["\\boxed{2}", "\\boxed{2}", "\\boxed{3}", "no box"],
        # 4 of 4 agree -> p_hat 1.0, |1 - 1/2| = 0.5 > 0.25: too easy, dropped
        "qb": ["\\boxed{7}"] * 4,
        # nothing boxed -> no label, p_hat 0: dropped even with the filter off
        "qc": ["no box"] * 4,
    }
    lab = LabelingConfig(num_votes=4, **labeling)
    return FrozenSolver(ScriptedGenerator(answers, match="exact"), lambda q: q, lab)


def test_label_pool_records_votes_and_keeps_the_band():
    rows = label_pool(_pool_solver(), ["qa", "qb", "qc"], seed=0)
    a, b, c = rows
    assert (a["label"], a["p_hat"], a["parse_rate"], a["top2_margin"]) == ("2", 0.5, 0.75, 0.25)
    assert a["groups"] == {"2": 2, "3": 1} and a["num_groups"] == 2 and a["kept"]
    assert (b["label"], b["p_hat"], b["kept"]) == ("7", 1.0, False)
    assert (c["label"], c["p_hat"], c["kept"]) == (None, 0.0, False)
    assert [len(r["answers"]) for r in rows] == [4, 4, 4]
    # 4 votes: qa has 2 in its largest group, qb 4, qc 0
    assert p_hat_histogram(rows, 4) == {"0": 1, "1": 0, "2": 1, "3": 0, "4": 1}


def test_label_pool_without_the_filter_keeps_every_labelled_question():
    rows = label_pool(_pool_solver(filter=False), ["qa", "qb", "qc"], seed=0)
    assert [r["kept"] for r in rows] == [True, True, False]


def test_label_pool_with_the_reference_band():
    # 0.3 <= p_hat <= 0.8: qa (0.5) in, qb (1.0) out
    rows = label_pool(_pool_solver(band_low=0.3, band_high=0.8), ["qa", "qb"], seed=0)
    assert [r["kept"] for r in rows] == [True, False]


def test_label_pool_votes_in_chunks_of_one_batched_call_each():
    solver = _pool_solver()
    label_pool(solver, ["qa", "qb", "qc"], seed=0, chunk=2)
    assert len(solver.generator.calls) == 2  # [qa, qb], [qc]


def test_label_pool_caps_the_share_of_one_label():
    answers = {f"q{i}": ["\\boxed{1}"] * 2 + ["\\boxed{5}", "\\boxed{6}"] for i in range(4)}
    answers |= {"r0": ["\\boxed{1}"] * 3 + ["\\boxed{5}"], "s": ["\\boxed{2}"] * 2 + ["x"] * 2}
    lab = LabelingConfig(num_votes=4, cap_label_share=0.4)
    solver = FrozenSolver(ScriptedGenerator(answers, match="exact"), lambda q: q, lab)
    rows = label_pool(solver, list(answers), seed=0)
    # 6 in the band, at most floor(0.4 * 6) = 2 labelled 1: q0 and q1 (p_hat 0.5, pool
    # order) stay; q2, q3 (0.5) and r0 (0.75, farthest from 1/2) are dropped by the cap
    assert [r["kept"] for r in rows] == [True, True, False, False, False, True]
    assert [r["capped"] for r in rows] == [False, False, True, True, True, False]
    assert all("capped" not in r for r in label_pool(_pool_solver(), ["qa", "qb"], seed=0))
