"""`rzero plan`: the schedule arithmetic, the table, and report.md opening with it (after
the science card)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rzero.cli import main
from rzero.config import ChallengerConfig, ConfigError, load_config
from rzero.config.schedule import role_schedule
from rzero.math.plan import plan_rows, plan_value

CONFIGS = Path(__file__).parents[2] / "configs"
QWEN = CONFIGS / "r-zero-qwen3-4b.yaml"
REFERENCE = CONFIGS / "r-zero-reference.yaml"


def test_role_schedule_of_the_official_challenger_step():
    role = ChallengerConfig(
        steps=5, group_size=4, prompts_per_step=512, prompts_per_update=16, micro_batch_size=8
    )
    s = role_schedule(role, processes=4)
    # rollout 512 x 4 = 2,048 sequences, 512 per process = 64 micro-batches of 8;
    # update 16 x 4 = 64 sequences, 16 per process = 2 micro-batches; 512 / 16 = 32 updates
    assert (s.rollout_sequences, s.update_sequences) == (2048, 64)
    assert (s.micro_batch, s.accumulation, s.steps_per_generation) == (8, 2, 64)
    assert (s.updates_per_step, s.updates) == (32, 160)
    assert (s.prompts, s.completions) == (2560, 10240)


def test_one_update_per_step_is_the_default():
    s = role_schedule(ChallengerConfig(steps=3, group_size=4, prompts_per_step=2))
    # no prompts_per_update: the update is the rollout, in one pass of 2 x 4 = 8
    assert (s.updates_per_step, s.updates, s.accumulation, s.steps_per_generation) == (1, 3, 1, 1)


@pytest.mark.parametrize(
    "sets, message",
    [
        (
            ["challenger.prompts_per_step=8", "challenger.prompts_per_update=3"],
            "challenger.prompts_per_update=3: must divide challenger.prompts_per_step (8)",
        ),
        (
            ["challenger.prompts_per_step=8", "challenger.prompts_per_update=16"],
            "challenger.prompts_per_update=16: must divide challenger.prompts_per_step (8)",
        ),
        # update 2 prompts x G 4 = 8 sequences: micro-batches of 3 do not tile it
        (
            [
                "challenger.prompts_per_step=8",
                "challenger.prompts_per_update=2",
                "challenger.micro_batch_size=3",
            ],
            "challenger.micro_batch_size=3: must divide the update batch challenger.prompts_per_update "
            "x challenger.group_size = 8",
        ),
        # 2 x 4 = 8 sequences per update over 3 training processes
        (["run.train_gpus=[0,1,2]"], "do not split evenly over 3 training processes"),
        # 2 x 4 = 8 sequences per update over 2 processes = 4 each: micro-batches of 8 do not fit
        (
            ["run.train_gpus=[0,1]", "challenger.micro_batch_size=8"],
            "challenger.micro_batch_size=8: does not divide the 4 sequences",
        ),
    ],
)
def test_schedule_errors_name_the_field(sets, message):
    with pytest.raises(ConfigError) as info:
        load_config(None, sets)
    assert message in str(info.value)


def test_the_gpu_recipe_does_160_and_60_updates_with_b_2048():
    rows = plan_rows(load_config(QWEN))
    assert plan_value(rows, "challenger", "updates") == 160  # 5 x 512 / 16
    assert plan_value(rows, "solver", "updates") == 60  # 15 x 512 / 128
    assert plan_value(rows, "challenger", "B") == 2048  # 512 x 4
    assert plan_value(rows, "challenger", "completions") == 10240
    assert plan_value(rows, "solver", "prompts") == 7680
    # the recipe claims the official schedule: every official number beside it agrees except
    # labelling's votes (m = 10 here, 9 in the official labelling script)
    differs = {(r.phase, r.key) for r in rows if r.official is not None and r.official != r.value}
    assert differs == {("labelling", "solver_generations")}


def test_plan_command_prints_the_table(capsys):
    assert main(["plan", "--config", str(QWEN)]) == 0
    out = capsys.readouterr().out
    assert "| challenger | optimiser updates | 160 (32 per step" in out
    assert "| solver | optimiser updates | 60 (4 per step" in out
    assert (
        "| challenger | repetition penalty B (questions clustered together) | 2,048 | 2,048 |"
        in out
    )


def test_plan_command_applies_overrides(capsys):
    assert main(["plan", "--config", str(QWEN), "--set", "solver.prompts_per_update=0"]) == 0
    out = capsys.readouterr().out
    # one update per step: 15 updates, not the official 60
    assert "| solver | optimiser updates | 15 (1 per step" in out
    assert "| 60 (differs) |" in out


def test_plan_without_the_claim_has_no_official_column(capsys):
    assert main(["plan", "--config", str(CONFIGS / "tiny.yaml")]) == 0
    out = capsys.readouterr().out
    assert "| phase | quantity | this recipe |\n" in out
    assert "official" not in out


def test_report_starts_with_the_plan_and_names_the_prompt_files(tmp_path):
    from rzero.math.layout import LAYOUT
    from rzero.math.report import render_report
    from rzero.rundir import RunDir

    (tmp_path / "run").mkdir()
    text = render_report(RunDir(tmp_path / "run", LAYOUT), load_config(REFERENCE))
    finding, _, text = text.partition("\n\n")  # the run's finding comes first
    assert finding.startswith("Finding:")
    first, _, rest = text.partition("\n\n")
    assert first == "# R-Zero run: run"
    # the science card (seed 6.1's checklist) opens the report; the plan comes right after it
    assert rest.startswith("## Science card")
    card, _, after = rest.partition("\n\n")[2].partition("\n\n")
    assert card.startswith("| check (seed §6.1) | this run |")
    assert after.startswith("Plan of `config.yaml`")
    assert "| challenger | optimiser updates | 160" in text
    # the recipe names the shipped zero-shot prompts by bare file name
    assert "- challenger prompt: `challenger_zero_shot.txt` (rzero/prompts/)" in text
    assert "- solver prompt: `solver_zero_shot.txt` (rzero/prompts/)" in text


def test_report_marks_the_built_in_prompts(tmp_path):
    from rzero.math.report import prompt_files

    lines = prompt_files(load_config(CONFIGS / "tiny.yaml"))
    assert lines[0].startswith("- challenger prompt: `challenger.txt` (rzero/prompts/)")
    assert lines[0].endswith("the built-in few-shot default")
