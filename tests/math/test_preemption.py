"""Preemption inside a GRPO phase, as a scheduler does it: SIGTERM to `rzero iterate` in the
middle of the challenger phase (one process, and the launching process of two under
`accelerate launch`) finishes the update in progress, writes a step checkpoint, says so in one
line and exits 75; the same command resumes inside the phase and ends with the weights, step
log and per-step summaries of a run that was never stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import tiny_overrides
from processes import iterate_command
from safetensors.torch import load_file

from rzero.training.steps import PREEMPTED_EXIT

pytestmark = pytest.mark.slow

STEPS = 6


def _command(run_dir: Path, checkpoint: Path, processes: int) -> tuple[list[str], dict]:
    sets = tiny_overrides(
        checkpoint,
        **{
            "run.cpu_processes": processes,
            "challenger.steps": STEPS,
            "eval.enabled": False,
            "run.report_to": "none",
        },
    )
    return iterate_command(run_dir, sets)


def _steps_logged(path: Path) -> int:
    if not path.exists():
        return 0
    return len({json.loads(x)["step"] for x in path.read_text().splitlines() if x.strip()})


def _marker(run_dir: Path, phase: str) -> dict:
    return json.loads((run_dir / "iter_01" / "phases" / f"{phase}.json").read_text())


@pytest.mark.parametrize("processes", [1, 2])
def test_sigterm_in_the_challenger_phase_resumes_inside_it_to_the_same_weights(
    format_checkpoint, tmp_path, processes
):
    whole_dir = tmp_path / "whole"
    cmd, env = _command(whole_dir, format_checkpoint, processes)
    whole = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert whole.returncode == 0, whole.stderr[-3000:]

    run_dir = tmp_path / "stopped"
    cmd, env = _command(run_dir, format_checkpoint, processes)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    steps_log = run_dir / "iter_01" / "challenger_steps.jsonl"
    deadline = time.monotonic() + 600
    while _steps_logged(steps_log) < 2:  # two of the six steps made
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the challenger phase never got going"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=400)
    seconds = time.monotonic() - sent
    print(f"{processes} process(es): exited {seconds:.1f} s after SIGTERM\n{err[-3000:]}")
    assert proc.returncode == PREEMPTED_EXIT, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("preempted: stopped by SIGTERM in iter 1 challenger after update "), last
    assert "rerun the same command to resume there" in last
    work = run_dir / "iter_01" / ".trainer_challenger"
    (checkpoint,) = work.glob("checkpoint-*")
    update = int(checkpoint.name.split("-")[1])
    assert 2 <= update < STEPS and f"after update {update}/{STEPS}" in last
    if processes == 2:  # ZeRO-2's sharded optimiser state is in it (DeepSpeed's own folder)
        assert list(checkpoint.glob("global_step*/*optim_states.pt"))
    assert not (run_dir / "iter_01" / "phases" / "challenger.json").exists()

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"resuming after update {update}/{STEPS}" in rerun.stderr
    assert not work.exists()  # the step checkpoints go once the phase is committed

    got = load_file(run_dir / "iter_01" / "challenger" / "model.safetensors")
    expected = load_file(whole_dir / "iter_01" / "challenger" / "model.safetensors")
    assert got.keys() == expected.keys()
    assert all((got[k] == expected[k]).all() for k in expected)
    # the step log holds each step once, as the uninterrupted run's does
    rows = (whole_dir / "iter_01" / "challenger_steps.jsonl").read_text()
    assert steps_log.read_text() == rows
    assert _marker(run_dir, "challenger")["steps"] == _marker(whole_dir, "challenger")["steps"]
    assert _marker(run_dir, "solver")["checkpoint"]
