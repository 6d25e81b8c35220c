"""rzero.rewards in a plain TRL script: each reward function against the loop's own
functions on scripted votes, and docs/trl.md's script, as written there, run with a real
`trl.GRPOTrainer` on a tiny model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ScriptedGenerator

from rzero.challenger.rewards import challenger_rewards
from rzero.rewards import (
    ChallengerReward,
    FormatGate,
    RepetitionPenalty,
    UncertaintyReward,
    VoteLabelReward,
    frozen_solver,
    vote_labels,
)

DOC = Path(__file__).parents[2] / "docs" / "trl.md"


def completion(question: str, answer: str = "1") -> list[dict[str, str]]:
    return [
        {"role": "assistant", "content": f"<question>{question}</question> \\boxed{{{answer}}}"}
    ]


# the frozen solver's 4 votes on each question, by its text: p̂ 1/2, 1, 3/4
VOTES = {
    "What is 2 + 2?": ["\\boxed{4}", "\\boxed{4}", "\\boxed{5}", "\\boxed{6}"],
    "What is 3 + 3?": ["\\boxed{6}"] * 4,
    "What is 4 + 4?": ["\\boxed{8}"] * 3 + ["\\boxed{9}"],
}


def solver() -> object:
    return frozen_solver(ScriptedGenerator(VOTES), num_votes=4)


def test_each_reward_is_the_loops_function_on_the_solvers_votes():
    batch = [completion(q) for q in VOTES] + [
        completion("What is 2 + 2?"),
        [{"role": "assistant", "content": "no question"}],
    ]
    questions = [*VOTES, "What is 2 + 2?", None]
    p_hats = [0.5, 1.0, 0.75, 0.5, None]
    reward = ChallengerReward(solver())
    assert reward([None] * 5, batch) == [p.reward for p in challenger_rewards(questions, p_hats)]
    assert [r["p_hat"] for r in reward.rows] == p_hats
    assert reward.rows[0]["label"] == "4" and len(reward.history) == 5
    assert UncertaintyReward(solver())([None] * 5, batch) == [1.0, 0.0, 0.5, 1.0, 0.0]
    # the two copies of "What is 2 + 2?" share a cluster: 2 of a batch of 5
    assert RepetitionPenalty()([None] * 5, batch)[0] == pytest.approx(-2 / 5)
    assert RepetitionPenalty()([None] * 5, batch)[4] == 0.0
    assert FormatGate()([None] * 5, batch) == [1.0, 1.0, 1.0, 1.0, 0.0]


def test_vote_labels_and_the_solvers_reward():
    rows = vote_labels(solver(), list(VOTES))
    assert [(r["label"], r["p_hat"], r["in_band"]) for r in rows] == [
        ("4", 0.5, True),
        ("6", 1.0, False),
        ("8", 0.75, True),
    ]
    assert (
        rows[0]["prompt"][-1]["content"].endswith("What is 2 + 2?")
        or "What is 2 + 2?" in (rows[0]["prompt"][-1]["content"])
    )
    got = VoteLabelReward()(
        None,
        [
            [{"role": "assistant", "content": "so \\boxed{4}"}],
            [{"role": "assistant", "content": "\\boxed{5}"}],
        ],
        label=["4", "4"],
    )
    assert got == [1.0, 0.0]


def script(model: Path) -> str:
    """docs/trl.md's script, with a tiny model and two steps of each phase."""
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    small = {
        'MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"': f"MODEL = {str(model)!r}",
        "max_steps=20": "max_steps=2",
        "per_device_train_batch_size=8": "per_device_train_batch_size=4",
        "num_generations=8": "num_generations=4",
        "max_completion_length=256": "max_completion_length=48",
        # the tiny model was trained on the tests' short prompts
        "num_votes=10": "num_votes=4, max_new_tokens=24, prompt=SHORT_SOLVER_CHAT",
        "[challenger_chat()]": "[challenger_chat(SHORT_CHALLENGER)]",
        '"challenger")': 'str(OUT / "challenger"))',
        '"solver")': 'str(OUT / "solver"))',
    }
    for old, new in small.items():
        assert old in code, old
        code = code.replace(old, new)
    return code


@pytest.mark.slow
def test_the_docs_script_trains_both_phases_with_a_real_grpo_trainer(format_checkpoint, tmp_path):
    from conftest import SHORT_CHALLENGER, SHORT_SOLVER

    from rzero.prompts.solver import solver_chat

    code = script(format_checkpoint)
    scope: dict = {
        "OUT": tmp_path,
        "SHORT_CHALLENGER": str(SHORT_CHALLENGER),
        "SHORT_SOLVER_CHAT": lambda q: solver_chat(q, str(SHORT_SOLVER)),
    }
    exec(compile(code, str(DOC), "exec"), scope)  # noqa: S102 - the documented script itself
    reward = scope["reward"]
    assert reward.calls == 2 and len(reward.history) == 2 * 4  # two steps of 4 completions
    assert any(r["question"] is not None for r in reward.history), "no well-formed question"
    assert (tmp_path / "challenger").is_dir()
    assert all(r["in_band"] for r in scope["rows"])
    if scope["rows"]:
        assert (tmp_path / "solver").is_dir()
