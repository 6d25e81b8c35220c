"""SPIN's loop (rzero.spin) on a tiny in-process model: the run folder, the pairs and their
merge, the held-out dynamics, the report, resume after a kill, the SFT control, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import iterate_cli, tiny_llama

from rzero.config import ConfigError, load_config
from rzero.data.sft import EMBEDDED, embedded_rows, load_sft, worked_solution
from rzero.rundir import RunDir
from rzero.spin.run import run_spin


@pytest.fixture(scope="module")
def spin_model(tmp_path_factory, tokenizer) -> Path:
    path = tmp_path_factory.mktemp("spin") / "model"
    tiny_llama(tokenizer, hidden=64, layers=2, seed=1).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def spin_overrides(model: Path, **extra) -> list[str]:
    sets = {
        "run.task": "spin",
        "model.name": str(model),
        "model.device": "cpu",
        "spin.prompts": 6,
        "spin.heldout": 4,
        "spin.batch_size": 4,
        "spin.micro_batch_size": 2,
        "spin.max_new_tokens": 12,
        "spin.learning_rate": 1e-3,
        "spin.optimizer": "adamw_torch",
        "spin.lambdas": "[0.5]",
        "eval.benchmarks": "[easy]",
        "eval.limit": 3,
        "eval.max_new_tokens": 12,
        "run.iterations": 2,
        "run.report_to": "[]",
    }
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


@pytest.fixture(scope="module")
def spin_run(spin_model, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("spinrun") / "run"
    run_spin(
        load_config(None, spin_overrides(spin_model, **{"spin.discriminator_steps": 2})), run_dir
    )
    return run_dir


def _marker(run: Path, k: int, phase: str) -> dict:
    return json.loads((run / f"iter_{k:02d}" / "phases" / f"{phase}.json").read_text())


@pytest.mark.slow
def test_a_spin_run_writes_pairs_merges_them_and_measures_the_dynamics(spin_run):
    run = RunDir(spin_run)
    assert run.iterations() == [0, 1, 2]
    for phase in ("eval", "dynamics", "discriminator"):
        assert _marker(spin_run, 0, phase)
    pairs = run.rows(1, "pairs")
    assert [p["split"] for p in pairs].count("train") == 6
    assert [p["split"] for p in pairs].count("heldout") == 4
    assert all(p["chosen"].endswith(f"\\boxed{{{p['answer']}}}.") for p in pairs)
    # iteration 2 trains on its own 6 pairs and iteration 1's 6 (pair_weights [1.0, 1.0])
    train2 = _marker(spin_run, 2, "train")
    assert train2["from_iterations"] == {"1": 6, "2": 6}
    assert train2["metrics"]["pairs"] == 12 and train2["metrics"]["updates"] == 6
    assert train2["start"] == "run:iter_01/model" and train2["lambda"] == 0.5
    dyn = _marker(spin_run, 2, "dynamics")
    assert dyn["dynamics"]["main"]["n"] == 4 and "discriminator" in dyn["dynamics"]
    assert set(dyn["metrics"]) >= {
        "disc_accuracy",
        "margin",
        "loglik_per_token",
        "frozen_disc_accuracy",
    }
    rows = run.rows(2, "heldout")
    assert len(rows) == 4 and {"policy_chosen", "opponent_rejected", "disc_chosen"} <= set(rows[0])
    # trained against its opponent, the main player separates the held-out pairs
    assert dyn["dynamics"]["main"]["margin"] > 0
    assert "increment" in _marker(spin_run, 2, "eval")
    text = (spin_run / "report.md").read_text()
    assert "## Dynamics on held-out pairs" in text and "6 of iteration 2 + 6 of iteration 1" in text
    # how many training prompts the opponent answered with the data answer word for word
    identical = sum(p["identical"] for p in pairs if p["split"] == "train")
    assert _marker(spin_run, 1, "generate")["metrics"]["identical_train"] == identical
    assert f"| {identical} of 6 training |" in text
    assert "vs base" in text and "McNemar p" in text
    assert "<img" in (spin_run / "report.html").read_text()
    phases = [
        (r["iteration"], r["phase"])
        for r in map(json.loads, (spin_run / "metrics.jsonl").read_text().splitlines())
    ]
    assert (2, "train") in phases and (2, "dynamics") in phases
    assert json.loads((spin_run / "best.json").read_text())["iteration"] in (0, 1, 2)


def test_scores_carried_from_the_iteration_before_are_what_scoring_again_gives(spin_run):
    """Iteration 2 takes its opponent's and the frozen discriminator's scores of the data
    answers from iteration 1's rows; scored afresh they are the same."""
    from rzero.engine.models import load_for_training
    from rzero.training.preference import pair_logprobs

    run = RunDir(spin_run)
    cfg = run.config()
    held = [p for p in run.rows(2, "pairs") if p["split"] == "heldout"]
    rows = {r["id"]: r for r in run.rows(2, "heldout")}
    for column, checkpoint in (
        ("opponent_chosen", "iter_01/model"),
        ("disc_chosen", "iter_00/discriminator"),
    ):
        model, tokenizer = load_for_training(str(spin_run / checkpoint), cfg.model)
        fresh = pair_logprobs(
            model,
            tokenizer,
            [p["prompt"] for p in held],
            [p["chosen"] for p in held],
            max_length=cfg.spin.max_length,
            batch_size=cfg.spin.micro_batch_size,
        )
        for p, (logp, tokens) in zip(held, fresh, strict=True):
            assert rows[p["id"]][column] == pytest.approx(logp, rel=1e-5, abs=1e-5)
            assert rows[p["id"]]["chosen_tokens"] == tokens
    # and iteration 1's opponent, the base, is scored as iteration 0 scored it
    base = {r["id"]: r["policy_chosen"] for r in run.rows(0, "heldout")}
    assert all(
        run.rows(1, "heldout")[i]["opponent_chosen"] == base[r["id"]]
        for i, r in enumerate(run.rows(1, "heldout"))
    )


@pytest.mark.slow
def test_a_spin_run_killed_after_training_resumes_to_the_same_numbers(
    spin_model, spin_run, tmp_path
):
    overrides = spin_overrides(spin_model, **{"spin.discriminator_steps": 2})
    run_dir = tmp_path / "run"
    # killed after iteration 1's model was saved, before its marker: the phase is redone
    killed = iterate_cli(run_dir, overrides, kill_at="train:commit")
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (run_dir / "iter_01" / "model").is_dir()
    assert not (run_dir / "iter_01" / "phases" / "train.json").exists()
    done = iterate_cli(run_dir, overrides)
    assert done.returncode == 0, done.stderr[-2000:]
    for k in (1, 2):
        assert RunDir(run_dir).rows(k, "pairs") == RunDir(spin_run).rows(k, "pairs")
        ours = _marker(run_dir, k, "dynamics")["dynamics"]["main"]["margin"]
        theirs = _marker(spin_run, k, "dynamics")["dynamics"]["main"]["margin"]
        assert ours == pytest.approx(theirs, rel=1e-4, abs=1e-4)


@pytest.mark.slow
def test_the_sft_control_spends_the_same_updates_without_an_opponent(spin_model, tmp_path):
    run = run_spin(
        load_config(
            None,
            spin_overrides(
                spin_model, **{"spin.objective": "sft", "run.iterations": 1, "eval.enabled": False}
            ),
        ),
        tmp_path / "run",
    )
    train = _marker(run.rundir.path, 1, "train")
    assert train["objective"] == "sft" and train["metrics"]["updates"] == 3
    assert "train_margins" not in train["metrics"]
    assert "SFT control" in (run.rundir.path / "report.md").read_text()


@pytest.mark.slow
def test_spin_from_the_sft_plateau_starts_every_iteration_from_the_kept_checkpoint(
    spin_model, tmp_path, caplog
):
    import torch
    from transformers import AutoModelForCausalLM

    sets = {
        "spin.plateau_updates": 8,
        "spin.plateau_every": 2,
        "spin.plateau_patience": 1,
        "spin.plateau_dev": "easy:7",
        "spin.plateau_dev_items": 3,
        "run.iterations": 1,
    }
    with caplog.at_level("INFO", logger="rzero"):
        run = run_spin(load_config(None, spin_overrides(spin_model, **sets)), tmp_path / "run")
    path = run.rundir.path
    # each point of the curve is said as it is scored
    assert "easy:7 after update 0: pass@1 0.000 on 3 items" in caplog.text
    assert "easy:7 after update 2: pass@1 0.000 on 3 items\n" in caplog.text + "\n"
    plateau = _marker(path, 0, "plateau")
    curve = plateau["curve"]
    assert [p["update"] for p in curve][:2] == [0, 2] and all(p["dev_n"] == 3 for p in curve)
    # a random tiny model answers nothing: the second score is no new best, so the SFT stops
    # there and θ_0 is the base's weights, saved before the first update
    assert [p["dev_pass@1"] for p in curve] == [0.0, 0.0]
    assert plateau["metrics"]["updates"] == 2 and plateau["metrics"]["stopped"]
    assert plateau["metrics"]["best_update"] == 0
    kept = AutoModelForCausalLM.from_pretrained(path / "iter_00" / "plateau")
    base = AutoModelForCausalLM.from_pretrained(spin_model)
    assert all(torch.equal(a, b) for a, b in zip(kept.parameters(), base.parameters(), strict=True))
    # everything of iteration 0 and the first opponent is θ_0
    assert _marker(path, 0, "eval")["checkpoint"] == "run:iter_00/plateau"
    assert _marker(path, 1, "generate")["opponent"] == "run:iter_00/plateau"
    assert _marker(path, 1, "train")["start"] == "run:iter_00/plateau"
    report = (path / "report.md").read_text()
    assert "θ_0 is the base after 0 updates of SFT" in report
    assert "0 (θ_0)" in report and "stopped after 2 updates" in report
    assert "θ_0: SFT of the base" in (path / "report.html").read_text()


def test_the_plateau_is_where_no_new_best_came_for_patience_scores():
    from rzero.selfplay.curve import best_point, plateaued

    assert not plateaued([0.1, 0.2, 0.3], 1)
    assert plateaued([0.1, 0.3, 0.3], 1)  # a tie is no rise
    assert not plateaued([0.1, 0.3, 0.2, 0.4], 2)
    assert plateaued([0.1, 0.3, 0.2, 0.25], 2)
    assert not plateaued([0.5], 1) and not plateaued([0.5, 0.1], 0)
    points = [{"update": u, "dev_pass@1": v} for u, v in [(0, 0.1), (8, 0.3), (16, 0.3)]]
    assert best_point(points)["update"] == 8  # the earliest of the best


def test_a_spin_comparison_speaks_of_spin_not_of_r_zeros_labels(spin_run, tmp_path):
    import shutil

    from rzero.reports.comparison import compare

    shutil.copytree(spin_run, tmp_path / "again")
    md = compare([spin_run, tmp_path / "again"], "spin", tmp_path / "cmp")["md"].read_text()
    assert md.startswith("# SPIN ablation: comparison")
    assert "## Evaluation per iteration" in md and "## Differences between the variants" in md
    for rzero_only in ("label acc", "solver step", "labelled pool", "Qwen3-4B-Base"):
        assert rzero_only not in md, rzero_only


def test_the_embedded_sft_set_never_holds_an_evaluation_item():
    from rzero.evaluation.easy import easy_benchmark, easy_dev_benchmark

    rows = embedded_rows(600)
    problems = {r.prompt[-1]["content"] for r in rows}
    assert len(problems) == 600
    assert not problems & {i["problem"] for i in easy_benchmark()}
    assert not problems & {i["problem"] for i in easy_dev_benchmark(7)}
    assert {r.response.splitlines()[-1] for r in rows[:12]} == {
        f"The answer is \\boxed{{{r.answer}}}." for r in rows[:12]
    }


def test_worked_solutions_follow_one_style_for_every_template():
    assert worked_solution("What is 9 times 2, plus 14?") == (
        "First, 9 * 2 = 18.\nThen, 18 + 14 = 32.\nThe answer is \\boxed{32}."
    )
    assert worked_solution(
        "Ivy had 17 shells and gave 12 of them away. How many shells does Ivy have left?"
    ) == (
        "Ivy starts with 17 shells.\nGiving away 12 "
        "leaves 17 - 12 = 5 shells.\nThe answer is "
        "\\boxed{5}."
    )
    with pytest.raises(ValueError, match="not an easy-template problem"):
        worked_solution("Prove Fermat's last theorem.")


def test_sft_files_are_read_and_bad_ones_refused_in_one_line(tmp_path):
    good = tmp_path / "sft.jsonl"
    good.write_text(
        json.dumps({"prompt": "Hi?", "response": "Hello."})
        + "\n"
        + json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "2+2?"},
                    {"role": "assistant", "content": "4"},
                ]
            }
        )
        + "\n"
    )
    rows = load_sft(str(good), 2)
    assert rows[0].prompt == [{"role": "user", "content": "Hi?"}] and rows[1].response == "4"
    ultrachat = tmp_path / "ultrachat.jsonl"
    ultrachat.write_text(
        json.dumps(
            {
                "prompt": "Name a colour.",
                "prompt_id": "p1",
                "messages": [
                    {"role": "user", "content": "Name a colour."},
                    {"role": "assistant", "content": "Red."},
                    {"role": "user", "content": "Another?"},
                    {"role": "assistant", "content": "Blue."},
                ],
            }
        )
    )
    [row] = load_sft(str(ultrachat), 1)
    assert (row.id, row.prompt[-1]["content"], row.response) == ("p1", "Name a colour.", "Red.")
    with pytest.raises(ConfigError, match="2 rows, but"):
        load_sft(str(good), 3)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x"}\n')
    with pytest.raises(ConfigError, match="neither 'prompt' and 'response' nor 'messages'"):
        load_sft(str(bad), 1)
    with pytest.raises(ConfigError, match="no such file"):
        load_sft(str(tmp_path / "missing.jsonl"), 1)
    assert len(load_sft(EMBEDDED, 5)) == 5


@pytest.mark.slow
def test_spin_config_errors_name_the_key(spin_model, tmp_path):
    with pytest.raises(ConfigError, match="a run.task='spin' recipe has no audit section"):
        load_config(None, spin_overrides(spin_model, **{"audit.enabled": True}))
    with pytest.raises(ConfigError, match="spin.plateau_dev='easy': the held-out"):
        load_config(None, spin_overrides(spin_model, **{"spin.plateau_dev": "easy"}))
    with pytest.raises(ConfigError, match="spin.batch_size=6: not a multiple"):
        load_config(
            None, spin_overrides(spin_model, **{"spin.batch_size": 6, "spin.micro_batch_size": 4})
        )
    out = iterate_cli(
        tmp_path / "run", spin_overrides(spin_model, **{"spin.data": str(tmp_path / "none.jsonl")})
    )
    assert out.returncode == 2 and "spin.data=" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()  # nothing written


@pytest.mark.slow
def test_rzero_plan_shows_a_spin_recipe(spin_model):
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rzero",
            "plan",
            *[
                a
                for o in spin_overrides(spin_model, **{"spin.discriminator_steps": 2})
                for a in ("--set", o)
            ],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    # iteration 2 trains on both iterations' pairs: 12 pairs, 3 updates per epoch x 2 epochs
    assert (
        "| 2 | 10 (6 training, 4 held-out), ≤ 12 tokens, greedy | 12 | 6 of 4 pairs" in out.stdout
    )
    assert "the frozen discriminator: 2 SFT updates" in out.stdout


@pytest.mark.slow
def test_the_spin_pairs_export_as_a_dataset(spin_run, tmp_path):
    import datasets

    from rzero.cli import main

    assert main(["export", str(spin_run), "--to", str(tmp_path / "out")]) == 0
    pairs = datasets.load_dataset(str(tmp_path / "out"), "pairs", split="train")
    run = RunDir(spin_run)
    expected = [row for k in run.iterations() for row in run.rows(k, "pairs")]
    assert pairs.num_rows == len(expected) > 0
    assert pairs["prompt"] == [row["prompt"] for row in expected]
