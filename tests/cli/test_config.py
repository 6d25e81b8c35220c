import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rzero.config import ConfigError, RZeroConfig, describe_fields, load_config

CONFIGS = sorted(Path(__file__).parents[2].glob("configs/*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_recipe_loads(path):
    cfg = load_config(path)
    assert isinstance(cfg, RZeroConfig)


def test_tiny_is_the_embedded_cpu_default():
    cfg = load_config("configs/tiny.yaml")
    assert cfg.model.name == "embedded:smollm2-135m-instruct"
    assert cfg.generation.backend == "hf"


def test_override_parses_yaml_scalars():
    cfg = load_config(
        None,
        [
            "run.iterations=4",
            "labeling.delta=0.2",
            "roles.shared=true",
            "eval.benchmarks=synthetic,gsm8k",
        ],
    )
    assert cfg.run.iterations == 4
    assert cfg.labeling.delta == 0.2
    assert cfg.roles.shared is True
    assert cfg.eval.benchmarks == ["synthetic", "gsm8k"]


PAPER = "configs/r-zero-qwen3-4b.yaml"


def test_an_override_of_a_mapping_merges_into_the_recipes_and_can_replace_it():
    paper = load_config(PAPER).challenger.trl
    assert {"loss_type", "weight_decay", "top_p"} <= set(paper)
    whole = load_config(PAPER, ["challenger.trl={log_completions: true}"]).challenger.trl
    assert whole == {**paper, "log_completions": True}
    one = load_config(PAPER, ["challenger.trl.weight_decay=0.02"]).challenger.trl
    assert one == {**paper, "weight_decay": 0.02}
    assert load_config(PAPER, ["challenger.trl:={log_completions: true}"]).challenger.trl == {
        "log_completions": True
    }
    # below a field the recipe leaves unset, the default mapping is the start
    assert load_config(None, ["solver.trl.top_p=0.9"]).solver.trl == {"top_p": 0.9}
    # the other role's mapping and the file on disk are untouched
    assert (
        load_config(PAPER, ["challenger.trl.top_p=1.0"]).solver.trl == load_config(PAPER).solver.trl
    )


def test_rzero_config_shows_the_merged_mapping():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rzero",
            "config",
            "--config",
            PAPER,
            "--set",
            "challenger.trl={log_completions: true}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    challenger = yaml.safe_load(out)["challenger"]["trl"]
    assert challenger["loss_type"] == "grpo" and challenger["log_completions"] is True


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "run.iterations.x=1",
            "run.iterations=3 is not a mapping; set it whole with run.iterations=value",
        ),
        ("run=3", "the key must be section.key"),
        ("run.bogus.x=1", "run.bogus: unknown key"),
    ],
)
def test_a_dotted_key_below_a_field_that_is_no_mapping_is_refused(override, expected):
    with pytest.raises(ConfigError, match=expected):
        load_config(None, [override])


def test_int_accepted_for_float():
    assert load_config(None, ["challenger.learning_rate=1"]).challenger.learning_rate == 1.0


@pytest.mark.parametrize(
    "override, expected",
    [
        ("run.foo=1", "run.foo: unknown key; allowed keys in 'run' are iterations"),
        ("runs.iterations=1", "runs: unknown section"),
        ("run.iterations=abc", "run.iterations='abc': expected int"),
        ("run.iterations=1.5", "run.iterations=1.5: expected int"),
        ("roles.shared=3", "roles.shared=3: expected bool"),
        ("run.iterations=0", "run.iterations=0: must be >= 1"),
        ("labeling.delta=0.9", "labeling.delta=0.9: must be <= 0.5"),
        ("labeling.temperature=0", "labeling.temperature=0.0: must be > 0.0"),
        (
            "challenger.reward_form=x",
            "challenger.reward_form='x': allowed values are paper, reference, learnability",
        ),
        ("run.iterations", "expected section.key=value"),
    ],
)
def test_bad_value_names_key_value_and_allowed(override, expected):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert expected in str(info.value)


def test_unknown_key_in_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("solver:\n  stepz: 3\n")
    with pytest.raises(ConfigError, match="solver.stepz: unknown key"):
        load_config(path)


def test_band_edges_must_come_together():
    with pytest.raises(ConfigError, match="set both or neither"):
        load_config(None, ["labeling.band_low=0.3"])
    cfg = load_config(None, ["labeling.band_low=0.3", "labeling.band_high=0.8"])
    assert (cfg.labeling.band_low, cfg.labeling.band_high) == (0.3, 0.8)


def test_micro_batch_must_divide_the_step_batch():
    # solver step batch = 2 questions x G 4 = 8: micro-batches of 2 or 4 tile it, 3 does not
    assert load_config(None, ["solver.group_size=4", "solver.micro_batch_size=4"])
    with pytest.raises(ConfigError, match=r"solver.micro_batch_size=3: must divide .* = 8"):
        load_config(None, ["solver.group_size=4", "solver.micro_batch_size=3"])


def test_every_field_has_help():
    rows = describe_fields()
    assert len(rows) > 60
    assert all(help_text.strip() for _, _, _, help_text in rows)


def test_fingerprint_ignores_output_dir_only():
    a = load_config(None, ["run.output_dir=a"])
    b = load_config(None, ["run.output_dir=b"])
    c = load_config(None, ["run.seed=1"])
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_cli_bad_set_prints_one_line_and_exits_2():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rzero",
            "iterate",
            "--config",
            "configs/tiny.yaml",
            "--set",
            "run.iterations=many",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == ["error: run.iterations='many': expected int"]


def test_sections_built_in_code_are_validated_and_frozen():
    import dataclasses

    from rzero.config import ChallengerConfig, SolverConfig

    with pytest.raises(ConfigError, match=r"challenger.steps=0: must be >= 1"):
        ChallengerConfig(steps=0)
    with pytest.raises(ConfigError, match=r"solver.micro_batch_size=3: must divide"):
        SolverConfig(group_size=4, micro_batch_size=3)  # 2 prompts x G 4 = 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        ChallengerConfig().steps = 3  # type: ignore[misc]


def test_roles_share_one_grpo_section_type_with_their_own_defaults():
    from rzero.config import GRPOSection

    cfg = RZeroConfig()
    assert isinstance(cfg.challenger, GRPOSection) and isinstance(cfg.solver, GRPOSection)
    # paper: challenger 5 steps x G 4, solver 15 steps x G 5
    assert (cfg.challenger.steps, cfg.challenger.group_size) == (5, 4)
    assert (cfg.solver.steps, cfg.solver.group_size) == (15, 5)


def test_trl_options_pass_through_and_unknown_or_managed_ones_are_refused():
    from rzero.training.grpo import grpo_config

    cfg = load_config(None, ["solver.trl={weight_decay: 0.01, loss_type: grpo}"])
    args = grpo_config(cfg.solver, "/tmp/unused", seed=0)
    assert (args.weight_decay, args.loss_type) == (0.01, "grpo")
    # the recipe loads (the config imports no TRL); the run's preflight refuses the option
    from rzero.preflight import check

    with pytest.raises(ConfigError, match="solver.trl.weight_decy: not an option"):
        check(load_config(None, ["solver.trl={weight_decy: 0.01}"]))
    for managed in ("learning_rate", "gradient_checkpointing", "report_to"):
        with pytest.raises(ConfigError, match=f"solver.trl.{managed}: set by rzero itself"):
            check(load_config(None, [f"solver.trl={{{managed}: 1}}"]))


def test_every_config_field_is_read_somewhere():
    # a field nothing reads is a switch that silently does nothing
    import dataclasses
    import re

    import rzero

    root = Path(rzero.__file__).parent
    source = "\n".join(p.read_text() for p in root.rglob("*.py") if p.name != "schema.py")
    from rzero.config.schema import SECTION_DEFAULTS

    unread = []
    for section in dataclasses.fields(RZeroConfig):
        for f in dataclasses.fields(SECTION_DEFAULTS[section.name]()):
            if not re.search(rf"\.{f.name}\b", source):
                unread.append(f"{section.name}.{f.name}")
    assert unread == []


def test_reference_recipe_is_the_official_code_where_it_departs_from_the_paper():
    paper = load_config("configs/r-zero-qwen3-4b.yaml")
    ref = load_config("configs/r-zero-reference.yaml")
    c = ref.challenger
    assert (c.reward_form, c.clip_reward, c.invalid_reward) == ("reference", False, -1.0)
    assert (c.format_gate, c.bleu_variant) == ("tags", "reference")
    lab = ref.labeling
    assert (lab.equivalence, lab.num_votes, lab.band_low, lab.band_high) == ("either", 9, 0.3, 0.8)
    assert ref.run.iterations == 5
    # the schedule is the same in both: 512-prompt rollouts, updates of 16 and 128 prompts
    for a, b in ((paper.challenger, c), (paper.solver, ref.solver)):
        assert (a.prompts_per_step, a.prompts_per_update) == (
            b.prompts_per_step,
            b.prompts_per_update,
        )


def test_prompts_per_update_zero_is_one_update_per_step():
    cfg = load_config(None, ["solver.prompts_per_step=4"])
    assert cfg.solver.prompts_per_update == 0
    assert (cfg.solver.update_prompts, cfg.solver.updates_per_step) == (4, 1)


def test_fields_of_one_task_list_only_the_sections_it_reads(capsys):
    from rzero.cli import main
    from rzero.cli.systems import SYSTEMS
    from rzero.config.schema import TASK_SECTIONS

    assert set(TASK_SECTIONS) == set(SYSTEMS)
    assert main(["config", "--fields", "--task", "spin"]) == 0
    sections = {
        line.split(".")[0]
        for line in capsys.readouterr().out.splitlines()
        if line and not line.startswith(" ")
    }
    assert "spin" in sections and "run" in sections
    assert not sections & {"challenger", "solver", "roles", "code", "spag", "solver_task"}
    assert main(["config", "--fields", "--task", "chess"]) == 2
    assert "--task 'chess': the tasks are math" in capsys.readouterr().err


# ---------------------------------------------------------------- one task, its sections

# each recipe's fingerprint as rzero computed it when every config carried every section
# (main at 927fe48): the fingerprint in the markers of a run folder made then
EVERY_SECTION_FINGERPRINTS = {
    "ablate-tiny.yaml": "1672dbc8af44f4df",
    "azr-tiny.yaml": "884372779267190e",
    "cpu-learn.yaml": "59e16bc2a32ff5c6",
    "learn-solver.yaml": "b737140d1d93b2b2",
    "r-zero-code-tiny.yaml": "12ea176663fb34e5",
    "r-zero-qwen3-4b.yaml": "b745aa98b677898d",
    "r-zero-reference.yaml": "3615ae095c05dfbd",
    "rehearsal.yaml": "60125e8048f3a26c",
    "spag-llama2-7b.yaml": "252fb7fe8ba5753a",
    "spag-tiny.yaml": "7e3a96d0be4038aa",
    "spin-tiny.yaml": "99a40bee712bbfd5",
    "spin-zephyr.yaml": "54669db12ac37d5b",
    "tiny.yaml": "bcdbf77e47cf9432",
}


def test_a_recipe_has_only_its_tasks_sections_and_another_is_one_line_naming_the_task():
    from rzero.config.schema import SHARED_SECTIONS, TASK_SECTIONS

    for task, own in TASK_SECTIONS.items():
        judge = ["audit.judge=executor"] if task == "rzero_code" else []
        cfg = load_config(None, [f"run.task={task}", *judge])
        assert set(cfg.sections) == set(SHARED_SECTIONS) | set(own)
        assert set(cfg.to_dict()) == set(cfg.sections)
    spin = load_config("configs/spin-tiny.yaml")
    assert spin.challenger is None and spin.solver is None and spin.audit is None
    with pytest.raises(ConfigError) as err:
        load_config("configs/spin-tiny.yaml", ["challenger.steps=3"])
    assert str(err.value).startswith("challenger: a run.task='spin' recipe has no challenger")
    assert "\n" not in str(err.value)


def test_the_fingerprint_is_the_sections_that_exist():
    spin = load_config("configs/spin-tiny.yaml")
    # another task's defaults are not part of it: only what a SPIN run reads is
    assert (
        spin.fingerprint()
        != load_config("configs/spin-tiny.yaml", ["spin.learning_rate=3e-7"]).fingerprint()
    )
    assert "challenger" not in spin.to_yaml() and "spin:" in spin.to_yaml()


# what changed in a recipe since then, set back: learn-solver's rollouts were at temperature
# 1.0 (runs/learn-temp1.0); cpu-learn's solver took 10 updates, at the settings docs/cpu.md
# measured, before it became the claims grid's recipe
SINCE = {
    "learn-solver.yaml": ["solver.temperature=1.0"],
    "cpu-learn.yaml": [
        "challenger.learning_rate=5e-6",
        "challenger.pool_size=48",
        "solver.steps=5",
        "solver.prompts_per_update=2",
        "solver.beta=0.01",
        "solver.temperature=0.7",
        "labeling.temperature=0.7",
        "eval.max_new_tokens=192",
    ],
}


@pytest.mark.parametrize("name", sorted(EVERY_SECTION_FINGERPRINTS))
def test_every_recipe_still_has_the_fingerprint_its_old_run_folders_hold(name):
    cfg = load_config(Path(__file__).parents[2] / "configs" / name, SINCE.get(name, []))
    assert cfg.legacy_fingerprint() == EVERY_SECTION_FINGERPRINTS[name]


def test_a_run_folder_made_with_every_section_resumes(tmp_path):
    import dataclasses
    import json

    from rzero.config.schema import SECTION_DEFAULTS
    from rzero.rundir import RunDir
    from rzero.spin.layout import LAYOUT

    cfg = load_config("configs/spin-tiny.yaml")
    # the run folder as rzero wrote it then: config.yaml with every section (the audit
    # off, as a SPIN recipe had to say), a committed marker with the old fingerprint
    old = {
        name: cfg.to_dict().get(name) or dataclasses.asdict(SECTION_DEFAULTS[name]())
        for name in SECTION_DEFAULTS
    }
    old["audit"]["enabled"] = False
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old, sort_keys=False))
    marker = RunDir(tmp_path, LAYOUT).marker_path(0, LAYOUT.phases[0])
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"fingerprint": EVERY_SECTION_FINGERPRINTS["spin-tiny.yaml"]}))
    assert RunDir(tmp_path).config() == cfg
    RunDir(tmp_path, LAYOUT).prepare(cfg)  # accepted: no RunDirConflict
    assert "challenger" not in (tmp_path / "config.yaml").read_text()
    # a changed config is still refused
    from rzero.rundir.folder import RunDirConflict

    with pytest.raises(RunDirConflict, match="spin.learning_rate"):
        RunDir(tmp_path, LAYOUT).prepare(
            load_config("configs/spin-tiny.yaml", ["spin.learning_rate=3e-7"])
        )


def test_a_removed_field_reads_in_an_old_run_folder_and_is_one_line_in_a_recipe():
    from rzero.config import config_from_dict

    old = {"generation": {"solver_data_parallel": False}}
    assert config_from_dict(old, run_folder=True) == load_config()  # still readable
    with pytest.raises(ConfigError, match="generation.solver_data_parallel=False: the frozen"):
        config_from_dict(old)
