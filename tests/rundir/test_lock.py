"""One writer per run folder (rzero.rundir.lock): a second writer is refused in one line
naming the holder, a SIGKILLed holder's lock is taken over, one process may hold it twice,
and `--fresh` keeps the lock it holds."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from rzero.cli import main
from rzero.rundir import RunLock, RunLocked

HOLD = """
import sys, time
from rzero.rundir import RunLock
RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def hold(run_dir) -> subprocess.Popen:
    """Another process holding the folder's lock (it prints `held` once it does)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_naming_the_holder_and_a_killed_holder_is_taken_over(tmp_path):
    run_dir = tmp_path / "run"
    holder = hold(run_dir)
    try:
        with pytest.raises(
            RunLocked,
            match=rf"is being written by pid {holder.pid} on "
            rf"{socket.gethostname()} since ",
        ):
            RunLock(run_dir).acquire()
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # the kernel drops its flock
        holder.wait()
    with RunLock(run_dir) as lock:
        assert lock.held
        assert f'"pid": {os.getpid()}' in (run_dir / ".lock").read_text()


def test_one_process_may_hold_a_folder_twice_and_the_last_release_unlocks(tmp_path):
    a, b = RunLock(tmp_path), RunLock(tmp_path)
    a.acquire()
    b.acquire()  # a run and the audit it runs, in one process
    a.release()
    probe = subprocess.run(
        [sys.executable, "-c", HOLD.replace("time.sleep(600)", ""), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode != 0 and "RunLocked" in probe.stderr  # b still holds it
    b.release()
    probe = subprocess.run(
        [sys.executable, "-c", HOLD.replace("time.sleep(600)", ""), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0 and probe.stdout.strip() == "held"


def test_iterate_audit_and_ablate_on_a_held_folder_are_one_line_and_exit_2(tmp_path, capsys):
    run_dir = tmp_path / "run"
    holder = hold(run_dir)
    try:
        (run_dir / "config.yaml").write_text("run:\n  iterations: 1\n")
        before = sorted(p.name for p in run_dir.iterdir())
        started = time.monotonic()
        for argv in (
            ["iterate", "--run-dir", str(run_dir), "--set", "eval.enabled=false"],
            ["audit", str(run_dir)],
            ["ablate", "--out", str(run_dir), "--variants", "separate"],
        ):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and f"being written by pid {holder.pid}" in err[0], argv
        assert time.monotonic() - started < 60
        assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing written
    finally:
        holder.kill()
        holder.wait()


def test_fresh_keeps_the_lock_it_holds_and_the_launch_log(tmp_path):
    from rzero.config import load_config
    from rzero.math.layout import LAYOUT
    from rzero.rundir import RunDir

    cfg = load_config(None)
    with RunLock(tmp_path):
        run = RunDir(tmp_path, LAYOUT)
        run.prepare(cfg)
        (tmp_path / "iter_01").mkdir()
        # the launcher of this very run writes logs/launch.log before its ranks start
        (tmp_path / "logs").mkdir()
        (tmp_path / "logs" / "launch.log").write_text("$ accelerate launch ...\n")
        run.prepare(cfg, fresh=True)
        assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "config.yaml", "logs"]
        assert (tmp_path / "logs" / "launch.log").read_text() == "$ accelerate launch ...\n"
        with pytest.raises(Exception):  # noqa: B017 - a second process is still refused
            subprocess.run(
                [sys.executable, "-c", HOLD.replace("time.sleep(600)", ""), str(tmp_path)],
                check=True,
                capture_output=True,
                timeout=60,
            )
