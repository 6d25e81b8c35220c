"""A dying engine fails fast: the frozen solver's server killed in the middle of a challenger
phase (the out-of-memory killer's usual victim) stops `rzero iterate` within 60 s with one
line naming what died and its log, leaves no process behind, and the rerun resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from conftest import tiny_overrides
from processes import alive, cmdline, environ, iterate_command

from rzero.engine.watchdog import descendants

pytestmark = pytest.mark.slow


def test_a_dead_solver_server_stops_the_run_in_one_line_and_the_rerun_resumes(
    format_checkpoint, tmp_path
):
    run_dir = tmp_path / "run"
    sets = tiny_overrides(
        format_checkpoint,
        **{"generation.solver_replicas": 1, "challenger.steps": 30, "eval.enabled": False},
    )
    cmd, env = iterate_command(run_dir, sets)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    urls = run_dir / "iter_01" / "solver_urls.txt"
    deadline = time.monotonic() + 600
    while not urls.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the solver server never came up"
        time.sleep(0.5)
    url = urls.read_text().strip()
    port = url.rsplit(":", 1)[1].split("/")[0]
    tree = descendants({proc.pid})
    (server,) = [p for p in tree if "serve" in cmdline(p) and f"--port {port}" in cmdline(p)]
    time.sleep(3)  # the phase is under way: the reward is querying the server
    os.killpg(server, signal.SIGKILL)
    killed = time.monotonic()
    _, err = proc.communicate(timeout=120)
    seconds = time.monotonic() - killed
    print(f"the run stopped {seconds:.1f} s after the server's SIGKILL")
    assert seconds < 60, seconds
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    log = run_dir / "iter_01" / "solver_logs" / f"solver-port{port}.log"
    assert last.startswith(f"error: solver server at {url} exited with code -9"), last
    assert str(log) in last and log.is_file()
    time.sleep(2)
    assert alive(tree) == set()  # nothing left running: ranks, the server, its workers
    assert not (run_dir / "iter_01" / "phases" / "challenger.json").exists()

    # the rerun resumes: the base evaluation kept, the challenger phase redone and committed
    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (run_dir / "iter_01" / "phases" / "challenger.json").is_file()
    assert not urls.exists()


def test_a_dead_training_rank_stops_the_run_in_one_line_and_the_rerun_resumes(
    format_checkpoint, tmp_path
):
    run_dir = tmp_path / "run"
    sets = tiny_overrides(
        format_checkpoint,
        **{"run.cpu_processes": 2, "challenger.steps": 30, "eval.enabled": False},
    )
    cmd, env = iterate_command(run_dir, sets)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    steps = run_dir / "iter_01" / "challenger_steps.jsonl"
    deadline = time.monotonic() + 600
    while not steps.exists():  # the challenger phase has made its first step
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the challenger phase never started"
        time.sleep(0.5)
    tree = descendants({proc.pid})
    (rank1,) = [p for p in tree if environ(p).get("RANK") == "1" and "rzero" in cmdline(p)]
    os.kill(rank1, signal.SIGKILL)
    killed = time.monotonic()
    _, err = proc.communicate(timeout=180)
    seconds = time.monotonic() - killed
    print(f"the run stopped {seconds:.1f} s after rank 1's SIGKILL")
    print(err[-6000:])
    assert seconds < 60, seconds
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        f"error: training process rank 1 (pid {rank1}) died: Signal 9 (SIGKILL);"
    ), last
    assert str(run_dir / "logs" / "launch.log") in last
    time.sleep(2)
    assert alive(tree) == set()
    assert not (run_dir / "iter_01" / "phases" / "challenger.json").exists()

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (run_dir / "iter_01" / "phases" / "challenger.json").is_file()
