"""The solver task (run.task solver) on a tiny in-process model: the label sources, the run
folder (labels, TRL's log of every update, the development curve, the evaluations, the
report), resume, the grid through `rzero ablate`, and bad input."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import SHORT_SOLVER

from rzero.config import ConfigError, load_config
from rzero.rundir import RunDir
from rzero.solver_task.questions import derangement, fixed_labels, load_questions
from rzero.solver_task.run import run_solver_task


@pytest.mark.parametrize("n", [2, 3, 7, 50])
def test_a_derangement_leaves_no_index_in_place(n):
    for seed in range(20):
        order = derangement(n, seed)
        assert sorted(order) == list(range(n))
        assert all(order[i] != i for i in range(n))


def test_shuffled_labels_move_every_answer_and_record_which_are_still_right():
    rows = [{"id": str(i), "question": f"q{i}", "answer": str(i % 3)} for i in range(9)]
    labelled = fixed_labels(rows, "shuffled", seed=1, direction="both")
    assert Counter(r["label"] for r in labelled) == Counter(r["answer"] for r in rows)
    assert [r["label_correct"] for r in labelled] == [r["label"] == r["answer"] for r in labelled]
    truth = fixed_labels(rows, "truth", seed=1, direction="both")
    assert all(r["label_correct"] for r in truth)


def test_a_questions_file_reads_question_and_optional_answer(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"question": "What is 2 + 2?", "answer": "4"}\n{"problem": "What is 3 + 3?"}\n'
    )
    rows = load_questions(str(path))
    assert [(r["question"], r["answer"]) for r in rows] == [
        ("What is 2 + 2?", "4"),
        ("What is 3 + 3?", None),
    ]
    with pytest.raises(ConfigError, match="have no answer; give answers, or use labels vote"):
        fixed_labels(rows, "truth", seed=0, direction="both")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"answer": "4"}\n')
    with pytest.raises(ConfigError, match="line 1 has no 'question' string"):
        load_questions(str(bad))


def task_overrides(model: Path, **extra) -> list[str]:
    sets = {
        "run.task": "solver",
        "model.name": str(model),
        "model.device": "cpu",
        "solver.steps": 4,
        "solver.group_size": 4,
        "solver.prompts_per_step": 2,
        "solver.max_completion_length": 12,
        "solver.learning_rate": 1e-3,
        "solver.prompt_file": SHORT_SOLVER,
        "labeling.num_votes": 4,
        "labeling.max_new_tokens": 12,
        "solver_task.questions": "easy:7",
        "solver_task.count": 6,
        "solver_task.dev": "easy:8",
        "solver_task.dev_items": 4,
        "solver_task.curve_every": 2,
        "eval.benchmarks": "[easy]",
        "eval.limit": 6,
        "eval.max_new_tokens": 12,
        "run.iterations": 1,
        "run.report_to": "[]",
    }
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


@pytest.fixture(scope="module")
def vote_run(format_checkpoint, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("solver_task") / "run"
    run_solver_task(
        load_config(None, task_overrides(format_checkpoint, **{"solver_task.labels": "vote"})),
        run_dir,
    )
    return run_dir


def _marker(run: Path, k: int, phase: str) -> dict:
    return json.loads((run / f"iter_{k:02d}" / "phases" / f"{phase}.json").read_text())


@pytest.mark.slow
def test_a_vote_run_labels_trains_with_every_trl_metric_and_evaluates(vote_run):
    run = RunDir(vote_run)
    assert run.iterations() == [0, 1]
    labelled = run.rows(1, "labelled")
    assert len(labelled) == 6
    for r in labelled:  # every vote label checked against the known answer
        assert len(r["answers"]) == 4 and r["label_correct"] in (True, False)
        assert r["label_correct"] == (r["label"] is not None and r["label"] == r["answer"])
    lab = _marker(vote_run, 1, "labelling")["metrics"]
    kept = [r for r in labelled if r["kept"]]
    assert lab["kept"] == len(kept)
    assert lab["label_accuracy"] == sum(r["label_correct"] for r in labelled) / 6
    voted = [r["p_hat"] for r in labelled if r["label"] is not None]
    assert lab["mean_p_hat"] == pytest.approx(sum(voted) / len(voted))
    solver = _marker(vote_run, 1, "solver")
    updates = solver["updates"]
    assert [u["update"] for u in updates] == [1, 2, 3, 4]
    for key in (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "grad_norm",
        "loss",
        "completions/mean_length",
        "well_formed",
    ):
        assert all(key in u for u in updates), key
    assert [p["update"] for p in solver["curve"]] == [0, 2, 4]
    timed = solver["metrics"]["timed_updates"]
    assert timed == 4  # one process made every update: the time per completion is over all
    assert solver["metrics"]["seconds_per_completion"] == pytest.approx(
        solver["metrics"]["train_seconds"] / (timed * 2 * 4)
    )
    assert all(p["dev_n"] == 4 for p in solver["curve"])
    for k in (0, 1):
        assert (vote_run / f"iter_{k:02d}" / "eval" / "eval.json").is_file()
    rows = [json.loads(line) for line in (vote_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows if r["phase"] == "solver_update"] == [1, 2, 3, 4]
    report = (vote_run / "report.md").read_text()
    assert "Base against trained (held out, greedy)" in report
    assert "accuracy among well-formed" in report and "McNemar" in report
    assert "solver's majority vote over 4 samples" in report
    assert "<img" in (vote_run / "report.html").read_text()


@pytest.mark.slow
def test_the_report_reads_the_vote_labels_accuracy_by_the_vote_share(vote_run, tmp_path):
    from rzero.solver_task.report import iteration_outcomes, outcome_rows, tables, vote_share_rows

    run = RunDir(vote_run)
    labelled = [r for r in run.rows(1, "labelled") if r["p_hat"] is not None]
    rows = vote_share_rows(run)
    shares = sorted({round(r["p_hat"], 4) for r in labelled})
    assert [float(r[1]) for r in rows] == pytest.approx(shares, abs=5e-4)
    assert sum(r[2] for r in rows) == len(labelled)
    assert sum(int(r[3].split()[0]) for r in rows) == sum(r["label_correct"] for r in labelled)
    assert sum(r[5] for r in rows) == sum(r["kept"] for r in labelled)
    assert "Vote labels' accuracy by the vote's share" in (vote_run / "report.md").read_text()
    # the base against every evaluated iteration, a row each
    assert [(r[0], r[1]) for r in outcome_rows(iteration_outcomes(run))] == [(1, "easy")]
    # labels that are not votes have no share to be read by: no such table
    truth_run = tmp_path / "truth"
    shutil.copytree(vote_run, truth_run)
    saved = truth_run / "config.yaml"
    saved.write_text(saved.read_text().replace("labels: vote", "labels: truth"))
    assert [t[0] for t in tables(RunDir(truth_run))] == [
        "Labels",
        "Training",
        "Base against trained (held out, greedy)",
    ]


def test_a_finished_run_resumes_without_redoing_anything(vote_run, format_checkpoint):
    before = {p: p.stat().st_mtime_ns for p in vote_run.glob("iter_*/phases/*.json")}
    run_solver_task(
        load_config(None, task_overrides(format_checkpoint, **{"solver_task.labels": "vote"})),
        vote_run,
    )
    assert {p: p.stat().st_mtime_ns for p in vote_run.glob("iter_*/phases/*.json")} == before


@pytest.mark.slow
def test_the_grid_runs_each_label_source_and_tabulates_them(format_checkpoint, tmp_path):
    recipe = tmp_path / "learn.yaml"
    recipe.write_text("run:\n  task: solver\n")
    args = [
        sys.executable,
        "-m",
        "rzero",
        "ablate",
        "--config",
        str(recipe),
        "--out",
        str(tmp_path / "grid"),
        "--variants",
        "truth-0,shuffled-0",
    ]
    for o in task_overrides(format_checkpoint, **{"solver_task.curve_every": 0, "solver.steps": 1}):
        args += ["--set", o]
    done = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    grid = (tmp_path / "grid" / "grid.md").read_text()
    assert "| truth-0 | truth | 0 | easy | 6 |" in grid
    assert "| shuffled-0 | shuffled | 0 | easy | 6 |" in grid
    assert "s per update (updates timed)" in grid and " (1) |" in grid
    assert "grid:" in done.stdout and "Δ points" in done.stdout
    shuffled = RunDir(tmp_path / "grid" / "shuffled-0").rows(1, "labelled")
    assert all(r["label"] != r["answer"] or r["label_correct"] for r in shuffled)
    truth = _marker(tmp_path / "grid" / "truth-0", 1, "labelling")["metrics"]
    assert truth["label_accuracy"] == 1.0


@pytest.mark.slow
def test_bad_questions_get_one_line_and_write_nothing(format_checkpoint, tmp_path):
    missing = tmp_path / "none.jsonl"
    args = [sys.executable, "-m", "rzero", "iterate", "--run-dir", str(tmp_path / "run")]
    for o in task_overrides(format_checkpoint, **{"solver_task.questions": str(missing)}):
        args += ["--set", o]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert lines == [f"error: solver_task.questions={str(missing)!r}: no such file"]
    assert not (tmp_path / "run").exists()


def test_the_held_out_items_are_refused_as_training_or_curve_questions():
    with pytest.raises(ConfigError, match="the held-out evaluation items"):
        load_config(None, ["run.task=solver", "solver_task.questions=easy"])
    with pytest.raises(ConfigError, match="the held-out evaluation items"):
        load_config(None, ["run.task=solver", "solver_task.dev=easy"])


def test_a_random_draw_of_shuffled_labels_is_mostly_wrong():
    rows = load_questions("easy:7", 200)
    labelled = fixed_labels(
        rows, "shuffled", seed=random.Random(0).randrange(100), direction="both"
    )
    accuracy = sum(r["label_correct"] for r in labelled) / len(labelled)
    assert accuracy < 0.15, accuracy


def test_the_plan_of_the_learning_recipe_says_what_an_iteration_does(capsys):
    from rzero.cli import main

    recipe = Path(__file__).parents[2] / "configs" / "learn-solver.yaml"
    assert main(["plan", "--config", str(recipe), "--set", "solver_task.labels=vote"]) == 0
    out = capsys.readouterr().out
    assert "the solver alone on fixed questions" in out and "challenger" not in out
    assert "majority of 8 samples each" in out
    assert "128 updates of 4 questions x G 8 = 32 completions" in out
    assert "at update 0 and every 16 (9 points)" in out
