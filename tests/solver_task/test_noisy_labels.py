"""Labels of a chosen accuracy (`solver_task.labels: noisy`, `noisy_labels`)."""

from __future__ import annotations

import pytest

from rzero.config import ConfigError, load_config
from rzero.solver_task.questions import noisy_labels


def questions(n: int) -> list[dict]:
    return [
        {"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(n)
    ]


@pytest.mark.parametrize("a", [0.0, 0.2, 0.5, 0.7, 0.85, 1.0])
def test_noisy_labels_hit_their_accuracy_exactly(a):
    # 40 questions: round(a x 40) keep the truth (a = 0.85 -> 34), none of the others does
    rows = questions(40)
    votes = [{str(i + 2): 5, str(i + 1): 3} if i % 2 else {} for i in range(40)]
    out = noisy_labels(rows, votes, a, seed=0, direction="both")
    right = [r for r in out if r["label"] == r["answer"]]
    assert len(right) == round(a * 40)
    assert all(r["label_correct"] == (r["label_kind"] == "truth") for r in out)
    assert all(r["label"] != r["answer"] for r in out if r["label_kind"] != "truth")


def test_a_wrong_label_is_the_most_common_wrong_vote_where_there_is_one():
    rows = questions(3)
    # q0: votes 7 (wrong) x2, 1 (right) x5, 9 (wrong) x1 -> 7, the most common wrong one
    # q1: every vote right -> another question's answer; q2: no votes -> another's answer
    votes = [{"1": 5, "7": 2, "9": 1}, {"2": 8}, {}]
    out = noisy_labels(rows, votes, 0.0, seed=0, direction="both")
    assert out[0]["label"] == "7" and out[0]["label_kind"] == "wrong_vote"
    assert out[1]["label_kind"] == "other_answer" and out[1]["label"] in {"1", "3"}
    assert out[2]["label_kind"] == "other_answer" and out[2]["label"] in {"1", "2"}


def test_an_equivalent_vote_is_not_a_wrong_label():
    # "2.0" is the answer 2 written otherwise: not wrong, so the next most common vote is taken
    rows = [{"id": "q0", "question": "What is 1 + 1?", "answer": "2"}] + questions(3)[2:]
    out = noisy_labels(rows, [{"2.0": 6, "5": 2}, {}], 0.0, seed=1, direction="both")
    assert out[0]["label"] == "5"


def test_the_truthful_subset_is_seeded():
    rows, votes = questions(30), [{} for _ in range(30)]
    a = noisy_labels(rows, votes, 0.5, seed=3, direction="both")
    b = noisy_labels(rows, votes, 0.5, seed=3, direction="both")
    c = noisy_labels(rows, votes, 0.5, seed=4, direction="both")
    kinds = [[r["label_kind"] for r in x] for x in (a, b, c)]
    assert kinds[0] == kinds[1] and kinds[0] != kinds[2]
    assert [r["label"] for r in a] == [r["label"] for r in b]


def test_label_accuracy_is_a_checked_field():
    with pytest.raises(ConfigError, match="solver_task.label_accuracy"):
        load_config(None, ["run.task=solver", "solver_task.label_accuracy=1.5"])
    # an accuracy only noisy labels can have
    with pytest.raises(ConfigError, match="only noisy labels have a chosen accuracy"):
        load_config(None, ["run.task=solver", "solver_task.label_accuracy=0.5"])


@pytest.mark.slow
def test_the_grid_draws_the_label_accuracy_curve_and_pairs_vote_with_random_errors(
    format_checkpoint, tmp_path
):
    # a two-arm grid on the tiny model: vote labels, and labels of accuracy 0.2 over two
    # iterations (fixed labels: drawn once from the base solver's votes), seed 0
    from test_solver_task import task_overrides

    from rzero.rundir import RunDir
    from rzero.solver_task import grid
    from rzero.solver_task.run import run_solver_task

    arms = {
        "vote-0": {"solver_task.labels": "vote"},
        "noisy-0.2-0": {
            "solver_task.labels": "noisy",
            "solver_task.label_accuracy": 0.2,
            "run.iterations": 2,
        },
    }
    for name, sets in arms.items():
        sets = {**sets, "solver_task.count": 10, "solver_task.curve_every": 0, "solver.steps": 1}
        run_solver_task(
            load_config(None, task_overrides(format_checkpoint, **sets)), tmp_path / name
        )
    grid([tmp_path / name for name in arms], tmp_path)
    md = (tmp_path / "label-curve.md").read_text()
    png = (tmp_path / "label-accuracy.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    # one row per arm; the noisy arm's kept labels are 2 of 10 right: 20.0 %
    assert "| noisy-0.2-0 | noisy | 0 | 20.0 % |" in md
    assert "| vote-0 | vote | 0 |" in md
    assert "seed 0: the base's own vote labels minus labels of accuracy 0.2" in md
    # the noisy arm: 2 of 10 labels true in both iterations, the same labels, with the votes
    run = RunDir(tmp_path / "noisy-0.2-0")
    first, second = run.rows(1, "labelled"), run.rows(2, "labelled")
    assert sum(r["label_kind"] == "truth" for r in first) == 2
    assert [r["label"] for r in first] == [r["label"] for r in second]
    assert all(len(r["answers"]) == 4 for r in first)
    marker = run.marker(1, "labelling")
    assert marker["metrics"]["label_accuracy"] == 0.2
    assert sum(marker["label_kinds"].values()) == 10
