"""A run directory you can trust: moved runs use their own files, markers vouch for their
outputs, readers are strict, and bad input is refused before anything is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tiny_overrides

from rzero.config import ConfigError, load_config
from rzero.io import DamagedFileError, read_jsonl
from rzero.math.run import run_iterations
from rzero.rundir import RunDir, RunDirConflict

ROOT = Path(__file__).parents[2]


def _rows(path: Path) -> int:
    return len(path.read_text().splitlines())


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


# ---------------------------------------------------------------- strict readers


def test_a_garbled_line_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "labelled.jsonl"
    lines = [json.dumps({"i": i}) for i in range(12)]
    lines[2] = '{"i": 2, "questi'  # line 3 of 12
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DamagedFileError, match=r"labelled.jsonl: line 3 is not valid JSON"):
        read_jsonl(path)


def test_only_an_appended_log_may_lose_a_torn_last_line(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a"')  # a process killed mid-append
    assert read_jsonl(path, torn_tail_ok=True) == [{"a": 1}, {"a": 2}]
    with pytest.raises(DamagedFileError, match="line 3"):
        read_jsonl(path)


def test_a_damaged_marker_names_its_file(tmp_path):
    run = RunDir(tmp_path)
    run.marker_path(1, "pool").parent.mkdir(parents=True)
    run.marker_path(1, "pool").write_text('{"phase": "po')
    with pytest.raises(DamagedFileError, match=r"iter_01/phases/pool.json: damaged phase marker"):
        run.marker(1, "pool")


# ---------------------------------------------------------------- resume


def test_a_moved_run_resumes_on_its_own_files(
    one_iteration, format_checkpoint, tmp_path, monkeypatch
):
    import rzero.engine.models

    copy = _copy(one_iteration, tmp_path / "moved" / "run")
    # the evaluation of iteration 1 is redone in the copy: it must load the copy's solver,
    # never the original's at the path the run was made in
    RunDir(copy).marker_path(1, "eval").unlink()
    loads = []
    real = rzero.engine.models.load_model

    def watching(spec, *args, **kwargs):
        loads.append(str(spec))
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(rzero.engine.models, "load_model", watching)
    run_iterations(load_config(None, tiny_overrides(format_checkpoint)), copy)
    assert RunDir(copy).marker(1, "eval")["checkpoint"] == "run:iter_01/solver"
    assert loads == [str(copy / "iter_01/solver")]


@pytest.mark.slow
def test_a_truncated_file_redoes_its_phase_and_the_ones_after(
    one_iteration, format_checkpoint, tmp_path, capsys
):
    copy = _copy(one_iteration, tmp_path / "run")
    labelled = copy / "iter_01/labelled.jsonl"
    text = labelled.read_text()
    labelled.write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")  # cut mid-file
    before = RunDir(copy).marker(1, "challenger")
    run_iterations(load_config(None, tiny_overrides(format_checkpoint)), copy)
    err = capsys.readouterr().err
    assert "labelled.jsonl has" in err and "redoing iteration 1 labelling" in err
    assert _rows(labelled) == _rows(copy / "iter_01/pool.jsonl")
    # the challenger phase before it was kept as committed
    assert RunDir(copy).marker(1, "challenger") == before


@pytest.mark.slow
def test_a_deleted_checkpoint_redoes_the_phase_that_wrote_it(
    one_iteration, format_checkpoint, tmp_path, capsys
):
    copy = _copy(one_iteration, tmp_path / "run")
    (copy / "iter_01/challenger/model.safetensors").unlink()
    run_iterations(load_config(None, tiny_overrides(format_checkpoint)), copy)
    assert "challenger/model.safetensors is missing" in capsys.readouterr().err
    assert (copy / "iter_01/challenger/model.safetensors").is_file()
    for phase in ("challenger", "pool", "labelling", "solver", "eval"):
        assert RunDir(copy).marker(1, phase) is not None


def test_deleting_config_yaml_does_not_hide_a_changed_config(
    one_iteration, format_checkpoint, tmp_path
):
    copy = _copy(one_iteration, tmp_path / "run")
    (copy / "config.yaml").unlink()
    cfg = load_config(None, tiny_overrides(format_checkpoint, **{"challenger.steps": 3}))
    with pytest.raises(RunDirConflict, match="committed by a run with a different config"):
        run_iterations(cfg, copy)
    assert not (copy / "config.yaml").exists()  # nothing rewritten


# ---------------------------------------------------------------- bad input, nothing written


@pytest.mark.parametrize(
    "override, message",
    [
        ("challenger.prompt_file=/nonexistent/prompt.txt", "challenger.prompt_file='/nonexistent"),
        ("eval.benchmarks=/nonexistent/bench.jsonl", "eval.benchmarks="),
    ],
)
def test_bad_inputs_are_refused_before_the_run_directory_exists(
    override, message, format_checkpoint, tmp_path
):
    cfg = load_config(None, tiny_overrides(format_checkpoint) + [override])
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        run_iterations(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_solver_prompt_without_the_question_field_is_refused(format_checkpoint, tmp_path):
    prompt = tmp_path / "solver.txt"
    prompt.write_text("system: Solve it.\nuser: Here is a problem.\n")
    cfg = load_config(None, tiny_overrides(format_checkpoint, **{"solver.prompt_file": prompt}))
    with pytest.raises(ConfigError, match=r"solver.prompt_file=.*has no \{question\} field"):
        run_iterations(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rzero", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_user_errors_are_one_line_and_exit_2(one_iteration, format_checkpoint, tmp_path):
    # a damaged marker and a damaged config.yaml, through the CLI: one line, exit 2
    copy = _copy(one_iteration, tmp_path / "run")
    (copy / "iter_01/phases/pool.json").write_text("{")
    sets = [a for o in tiny_overrides(format_checkpoint) for a in ("--set", o)]
    proc = _cli("iterate", "--run-dir", str(copy), *sets)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0 and "pool.json: damaged phase marker" in proc.stderr
    (copy / "iter_01/phases/pool.json").unlink()
    (copy / "config.yaml").write_text("model: [unclosed\n")
    proc = _cli("iterate", "--run-dir", str(copy), *sets)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "config.yaml: not valid YAML" in proc.stderr
    assert "Traceback" not in proc.stderr
