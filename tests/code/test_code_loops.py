"""The code tier's loops (rzero.code) with a tiny in-process model trained to write the code
formats: R-Zero on deduction tasks with exact label accuracy, and Absolute Zero over the
three task types; run folder, markers, metrics, report, resume and the executor audit."""

import json
import random
from pathlib import Path

import pytest
import torch
from conftest import iterate_cli, tiny_llama, train_on_replies
from safetensors.torch import load_file

from rzero.config import ConfigError, load_config
from rzero.executor.prompts import proposer_messages, solver_messages
from rzero.executor.sandbox import run_program
from rzero.executor.tasks import IDENTITY, CodeTask
from rzero.rundir import RunDir


def _transcripts(tokenizer, n: int, rng: random.Random) -> list[tuple[list[int], int]]:
    """Chats in the code formats: proposals `f(x) = x <op> a` with a small input, and solver
    answers drawn from a fixed mix (so votes agree often, not always)."""
    out = []
    for _ in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        op = rng.choice("+-*")
        program = f"def f(x):\n    return x {op} {a}"
        task = CodeTask(
            kind="deduction", program=program, input=str(b), output=str(eval(f"{b} {op} {a}"))
        )
        role = rng.choice(["deduction", "abduction", "induction", "solve", "solve"])
        if role in ("deduction", "abduction"):
            chat = proposer_messages(role, [IDENTITY]) + [
                {"role": "assistant", "content": f"```python\n{program}\n```\n<input>{b}</input>"}
            ]
        elif role == "induction":
            inputs = "\n".join(f"<input>{rng.randint(0, 9)}</input>" for _ in range(3))
            chat = proposer_messages("induction", program=program, num_inputs=3) + [
                {"role": "assistant", "content": f"{inputs}\n<message>Apply {op}.</message>"}
            ]
        else:
            kind = rng.choice(["deduction", "abduction", "induction"])
            shown = (
                task.as_kind(kind)
                if kind != "induction"
                else CodeTask(
                    kind="induction",
                    program=program,
                    message="Apply it.",
                    visible=((str(b), task.output),),
                    hidden=(),
                )
            )
            guess = rng.choice([1, 1, 1, 2, 2])
            answer = {
                "deduction": f"<output>{guess}</output>",
                "abduction": f"<input>{guess}</input>",
                "induction": f"```python\ndef f(x):\n    return x + {guess}\n```",
            }[kind]
            chat = solver_messages(shown) + [{"role": "assistant", "content": answer}]
        ids = tokenizer.apply_chat_template(chat, tokenize=True)
        prompt = tokenizer.apply_chat_template(chat[:-1], tokenize=True, add_generation_prompt=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        out.append((ids, len(prompt)))
    return out


@pytest.fixture(scope="module")
def code_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A tiny Llama trained for a few seconds to write code proposals and tagged answers."""
    rng = random.Random(0)
    model = tiny_llama(tokenizer, hidden=64, layers=2, seed=2)
    examples = _transcripts(tokenizer, 96, rng)
    train_on_replies(model, examples, 100, rng, tokenizer.pad_token_id)
    path = tmp_path_factory.mktemp("code") / "model"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def code_overrides(model: Path, task: str, **extra) -> list[str]:
    sets = {
        "run.task": task,
        "model.name": str(model),
        "model.device": "cpu",
        "challenger.steps": 1,
        "challenger.group_size": 4,
        "challenger.prompts_per_step": 2,
        "challenger.max_completion_length": 40,
        "challenger.pool_size": 8,
        "challenger.learning_rate": 1e-3,
        "solver.steps": 1,
        "solver.group_size": 4,
        "solver.prompts_per_step": 2,
        "solver.max_completion_length": 24,
        "solver.learning_rate": 1e-3,
        "labeling.num_votes": 4,
        "labeling.max_new_tokens": 16,
        "labeling.filter": False,
        "eval.enabled": False,
        "run.iterations": 1,
        "code.solver_samples": 2,
        "code.tasks_per_type": 2,
        "code.induction_inputs": 3,
        # lambda 1 clipped every valid proposal of this tiny model to 0 (r_unc 0.5, r_rep
        # >= 0.5): no reward variance, no GRPO update; 0.5 keeps the penalty and a signal
        "challenger.repetition_lambda": 0.5,
    }
    if task == "rzero_code":
        sets["audit.judge"] = "executor"
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def changed(a, b) -> bool:
    wa, wb = (load_file(str(Path(p) / "model.safetensors")) for p in (a, b))
    return any(not torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def rzero_code_run(code_checkpoint, tmp_path_factory) -> Path:
    from rzero.cli.systems import system_of

    run_dir = tmp_path_factory.mktemp("rzc") / "run"
    cfg = load_config(None, code_overrides(code_checkpoint, "rzero_code"))
    system_of(cfg).iterate(cfg, run_dir)
    return run_dir


@pytest.fixture(scope="module")
def azr_run(code_checkpoint, tmp_path_factory) -> Path:
    from rzero.cli.systems import system_of

    run_dir = tmp_path_factory.mktemp("azr") / "run"
    cfg = load_config(
        None,
        code_overrides(
            code_checkpoint,
            "azr",
            **{"roles.shared": True, "run.iterations": 2, "challenger.prompts_per_step": 3},
        ),
    )
    system_of(cfg).iterate(cfg, run_dir)
    return run_dir


# -- R-Zero on code ------------------------------------------------------------------------


@pytest.mark.slow
def test_rzero_code_writes_the_math_loops_layout(rzero_code_run):
    for name in [
        "config.yaml",
        "metrics.jsonl",
        "report.md",
        "report.html",
        "iter_01/challenger_steps.jsonl",
        "iter_01/pool.jsonl",
        "iter_01/labelled.jsonl",
        "iter_01/challenger/model.safetensors",
        "iter_01/solver/model.safetensors",
    ]:
        assert (rzero_code_run / name).is_file(), name
    for phase in ["challenger", "pool", "labelling", "solver"]:
        assert RunDir(rzero_code_run).marker(1, phase) is not None, phase


def test_every_challenger_label_is_checked_against_the_executor(rzero_code_run):
    logged = rows(rzero_code_run / "iter_01/challenger_steps.jsonl")
    assert len(logged) == 8  # 1 step x 2 prompts x G 4
    valid = [r for r in logged if r["valid"]]
    assert valid, "the code-trained challenger wrote no valid proposal"
    for r in valid:
        task = CodeTask.from_json(r["task"])
        assert r["truth"] == task.output == run_program(task.program, task.input).output
        assert r["label_correct"] == (r["label"] == task.output if r["label"] else None)
        # paper form, clipped, lambda 0.5: r = max(0, 1 - 2|p - 1/2| - 0.5 r_rep)
        assert r["reward"] == pytest.approx(
            max(0.0, 1 - 2 * abs(r["p_hat"] - 0.5) - 0.5 * r["r_rep"])
        )
    assert all(r["reward"] == 0.0 for r in logged if not r["valid"])  # invalid_reward 0


def test_step_accuracy_counts_right_labels_over_labelled_rows(rzero_code_run):
    logged = [r for r in rows(rzero_code_run / "iter_01/challenger_steps.jsonl") if r["valid"]]
    step = RunDir(rzero_code_run).marker(1, "challenger")["steps"][0]
    labelled = [r for r in logged if r["label"] is not None]
    assert step["n_labelled"] == len(labelled)
    assert step["correct"] == sum(r["label_correct"] for r in labelled)
    assert step["ci_low"] <= (step["label_accuracy"] or 0.0) <= step["ci_high"]
    assert sum(b["n_labelled"] for b in step["by_p_hat"]) == len(labelled)


def test_labelled_pool_records_votes_truth_and_band(rzero_code_run):
    labelled = rows(rzero_code_run / "iter_01/labelled.jsonl")
    assert labelled
    for r in labelled:
        assert len(r["answers"]) == 4 and r["kept"] is (r["label"] is not None)  # filter off
        assert r["truth"] == CodeTask.from_json(r["task"]).output
    metrics = RunDir(rzero_code_run).marker(1, "labelling")["metrics"]
    assert metrics["n_labelled"] == sum(r["label"] is not None for r in labelled)


def test_metrics_and_report_carry_the_exact_accuracy(rzero_code_run):
    metric_rows = rows(rzero_code_run / "metrics.jsonl")
    steps = [r for r in metric_rows if r["phase"] == "challenger_step"]
    assert len(steps) == 1 and "label_accuracy" in steps[0] and "by_p_hat" in steps[0]
    assert [r["phase"] for r in metric_rows if r["phase"] in ("labelling", "solver")] == [
        "labelling",
        "solver",
    ]
    report = (rzero_code_run / "report.md").read_text()
    assert "## Exact label accuracy per challenger step" in report
    assert "## Exact label accuracy by vote share p̂" in report


def test_rzero_code_trains_both_roles(rzero_code_run, code_checkpoint):
    logged = rows(rzero_code_run / "iter_01/challenger_steps.jsonl")
    assert len({r["reward"] for r in logged}) > 1  # else GRPO's advantages are all 0
    assert changed(code_checkpoint, rzero_code_run / "iter_01/challenger")
    assert changed(code_checkpoint, rzero_code_run / "iter_01/solver")
    solver = RunDir(rzero_code_run).marker(1, "solver")
    assert solver["train_steps"] and 0.0 <= solver["metrics"]["true_rate"] <= 1.0


def test_rzero_iterate_dispatches_by_task_and_resumes_a_finished_run(
    rzero_code_run, code_checkpoint, capsys
):
    from rzero.cli import main

    before = {
        p: RunDir(rzero_code_run).marker(1, p)["seconds"]
        for p in ("challenger", "pool", "labelling", "solver")
    }
    sets = [a for o in code_overrides(code_checkpoint, "rzero_code") for a in ("--set", o)]
    assert main(["iterate", "--run-dir", str(rzero_code_run), *sets]) == 0
    after = {p: RunDir(rzero_code_run).marker(1, p)["seconds"] for p in before}
    assert after == before  # every phase committed: nothing redone
    assert "run finished" in capsys.readouterr().out


def test_rzero_audit_on_a_code_run_says_it_is_exact(rzero_code_run, capsys):
    from rzero.cli import main

    assert main(["audit", str(rzero_code_run)]) == 0
    assert "exact label accuracy (the executor checked every label)" in capsys.readouterr().out


def test_executor_audit_judges_every_label_exactly(rzero_code_run):
    from rzero.audit import audit_run

    report = audit_run(rzero_code_run, RunDir(rzero_code_run).config().audit)
    steps = [
        r
        for r in rows(rzero_code_run / "iter_01/challenger_steps.jsonl")
        if r["valid"] and r["label"] is not None
    ]
    assert report["judge"]["model"] == "executor" and report["judge"]["exact"]
    step_items = [it for it in report["items"] if it["source"] == "step"]
    assert len(step_items) == len(steps)  # every label, no sample
    assert [it["verdict"] == "correct" for it in step_items] == [r["label_correct"] for r in steps]
    assert (rzero_code_run / "audit" / "report.md").read_text().count("The judge is the executor")


# -- Absolute Zero --------------------------------------------------------------------------


@pytest.mark.slow
def test_azr_logs_proposals_of_every_type_with_learnability(azr_run):
    logged = rows(azr_run / "iter_01/challenger_steps.jsonl")
    assert len(logged) == 12  # 1 step x 3 prompts (one per type) x G 4
    assert {r["kind"] for r in logged} == {"deduction", "abduction", "induction"}
    for r in logged:
        if r["valid"]:  # learnability 1 - r_bar, 0 at r_bar in {0, 1}
            assert r["reward"] == (0.0 if r["r_bar"] in (0.0, 1.0) else 1 - r["r_bar"])
        else:  # AZR's penalties: -0.5 well-formed but invalid, -1 broken
            assert r["reward"] in (-0.5, -1.0)


def test_azr_buffer_carries_valid_proposals_into_the_next_iteration(azr_run):
    from rzero.code.azr import AZRRun

    valid = [r for r in rows(azr_run / "iter_01/challenger_steps.jsonl") if r["valid"]]
    run = AZRRun.__new__(AZRRun)
    run.rundir = RunDir(azr_run)
    buffer = run.buffer_before(2)
    assert len(buffer) == 1 + len(
        {
            (
                json.loads(r["task"])["program"],
                json.loads(r["task"])["input"],
                json.loads(r["task"])["message"],
            )
            for r in valid
        }
    )  # identity + new


def test_azr_pool_has_tasks_per_type_and_solver_reports_solve_rates(azr_run):
    pool = rows(azr_run / "iter_01/pool.jsonl")
    for kind in ("deduction", "abduction"):
        assert sum(r["kind"] == kind for r in pool) == 2  # code.tasks_per_type
    metrics = RunDir(azr_run).marker(1, "solver")["metrics"]
    kinds = [k for k in ("deduction", "abduction", "induction") if f"{k}/rollouts" in metrics]
    for kind in kinds:  # the types the step's 2 prompts happened to draw
        rate = metrics[f"{kind}/solve_rate"]
        assert metrics[f"{kind}/solve_ci_low"] <= rate <= metrics[f"{kind}/solve_ci_high"]
    assert sum(metrics[f"{k}/rollouts"] for k in kinds) == 8  # 1 step x 2 prompts x G 4


def test_azr_shared_weights_chain_through_both_phases(azr_run, code_checkpoint):
    m = RunDir(azr_run)
    assert m.marker(1, "solver")["start"] == "run:iter_01/challenger"
    assert m.marker(2, "challenger")["start"] == "run:iter_01/solver"
    assert changed(code_checkpoint, azr_run / "iter_01/challenger")


def test_azr_report_has_the_per_type_table(azr_run):
    report = (azr_run / "report.md").read_text()
    assert "## Per iteration and task type" in report
    for kind in ("deduction", "abduction", "induction"):
        assert f"| 2 | {kind} |" in report
    page = (azr_run / "report.html").read_text()
    assert "<script" not in page
    # TRL's log of every update of both GRPO phases, drawn (an inlined PNG)
    assert "TRL&#x27;s log of every update" in page or "TRL's log of every update" in page
    assert page.count("data:image/png;base64,") >= 1
    assert len(RunDir(azr_run).marker(2, "solver")["updates"]) > 0


# -- config ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sets, message",
    [
        (["run.task=rzero_code"], "audit.judge='model' with run.task='rzero_code'"),
        (["audit.judge=executor"], "audit.judge='executor' with run.task='math'"),
        (["run.task=azr", "roles.train_challenger=false"], "roles.train_challenger=false"),
        (["run.task=azr", "audit.enabled=true"], "recipe has no audit section"),
        (["run.task=azr", "challenger.prompt_file=x.txt"], "challenger.prompt_file"),
        (["run.task=azr", "run.train_gpus=[0,1]"], "trains in one process"),
    ],
)
def test_code_tier_config_errors_name_the_fix(sets, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config(None, sets)


def test_auditing_an_azr_run_says_there_is_nothing_to_audit(azr_run):
    from rzero.audit import audit_run

    with pytest.raises(ConfigError, match="no pseudo-labels to audit"):
        audit_run(azr_run, RunDir(azr_run).config().audit)


# -- the shared phase runner ------------------------------------------------------------


@pytest.mark.slow
def test_a_code_phase_killed_after_its_outputs_is_redone_on_resume(
    code_checkpoint, rzero_code_run, tmp_path
):
    # the code tier runs on the math loop's phase runner: SIGKILL between a phase's outputs
    # and its marker (the `PHASE:commit` crash point) leaves the phase uncommitted, and the
    # rerun redoes it and finishes, with the pool the uninterrupted run wrote
    overrides = code_overrides(code_checkpoint, "rzero_code")
    run_dir = tmp_path / "run"
    killed = iterate_cli(run_dir, overrides, kill_at="pool:commit")
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (run_dir / "iter_01" / "pool.jsonl").is_file()  # the outputs were written
    assert RunDir(run_dir).marker(1, "challenger") is not None
    assert RunDir(run_dir).marker(1, "pool") is None  # ... and the marker was not
    resumed = iterate_cli(run_dir, overrides)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    done = RunDir(run_dir)
    for phase in ("challenger", "pool", "labelling", "solver"):
        marker = done.marker(1, phase)
        assert marker is not None, phase
        assert marker["peak_rss_gib"] > 0 and "compute" in marker, phase  # measured alike
    assert rows(run_dir / "iter_01" / "pool.jsonl") == rows(
        rzero_code_run / "iter_01" / "pool.jsonl"
    )
    # the self-play watch ran before the commit: the challenger's trends and warnings
    challenger = done.marker(1, "challenger")
    assert "trend" in challenger and "warnings" in challenger
    # the tracker folders of the math loop: TRL's logs of each training phase, this run's
    assert (run_dir / "tensorboard" / "trl" / "iter_01_challenger").is_dir()
    phases = [r["phase"] for r in rows(run_dir / "metrics.jsonl")]
    assert phases.count("pool") == 1  # the redone phase is one row, not two


@pytest.mark.slow
def test_azr_sigterm_in_the_proposer_phase_resumes_inside_it_to_the_same_run(
    code_checkpoint, tmp_path
):
    # the proposer phase's state beyond the weights: the task buffer (grown by each step's
    # valid proposals), the frozen solver sampler's seed counter, the step log
    import os
    import signal
    import subprocess
    import sys
    import time

    from rzero.training.steps import PREEMPTED_EXIT

    sets = code_overrides(
        code_checkpoint,
        "azr",
        **{"roles.shared": True, "challenger.steps": 4, "challenger.prompts_per_step": 3},
    )

    def command(run_dir: Path) -> list[str]:
        args = [sys.executable, "-m", "rzero", "iterate", "--run-dir", str(run_dir)]
        return args + [a for s in sets for a in ("--set", s)]

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    whole = subprocess.run(command(tmp_path / "whole"), env=env, capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr[-3000:]

    run_dir = tmp_path / "stopped"
    proc = subprocess.Popen(
        command(run_dir), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    steps_log = run_dir / "iter_01" / "challenger_steps.jsonl"
    deadline = time.monotonic() + 600
    while (
        not steps_log.exists()
        or len({json.loads(x)["step"] for x in steps_log.read_text().splitlines() if x.strip()}) < 2
    ):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == PREEMPTED_EXIT, err[-3000:]
    assert "preempted: stopped by SIGTERM in iter 1 proposer after update" in err

    rerun = subprocess.run(command(run_dir), env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "iter 1 proposer: resuming after update" in rerun.stderr
    for name in ("challenger", "solver"):
        got = load_file(run_dir / "iter_01" / name / "model.safetensors")
        expected = load_file(tmp_path / "whole" / "iter_01" / name / "model.safetensors")
        assert all(torch.equal(got[k], expected[k]) for k in expected), name
    for rows in ("challenger_steps.jsonl", "pool.jsonl"):
        assert (run_dir / "iter_01" / rows).read_text() == (
            tmp_path / "whole" / "iter_01" / rows
        ).read_text(), rows
