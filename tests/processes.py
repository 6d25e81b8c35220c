"""The processes of a run under test: the `rzero iterate` command a test starts, and what
`/proc` says of the processes it spawned (command line, environment, whether still running)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def iterate_command(run_dir: Path, sets: list[str]) -> tuple[list[str], dict[str, str]]:
    """`python -m rzero iterate --run-dir RUN_DIR --set ...` and its environment: one torch
    thread, unbuffered output, no GPU, and a rendezvous port free now (MASTER_PORT, as a
    cluster sets it), since the default 29500 may be another test's."""
    from rzero.engine.serving import free_port

    cmd = [sys.executable, "-m", "rzero", "iterate", "--run-dir", str(run_dir)]
    cmd += [arg for s in sets for arg in ("--set", s)]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "MASTER_PORT": str(free_port()),
    }
    return cmd, env


def cmdline(pid: int) -> str:
    """The process's command line, space-joined; "" once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def environ(pid: int) -> dict[str, str]:
    """The process's environment; {} once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return {}
    return dict(x.decode(errors="replace").split("=", 1) for x in raw if b"=" in x)


def alive(pids: set[int]) -> set[int]:
    """The pids of `pids` still running (a zombie has ended)."""
    return {p for p in pids if _state(p) != "Z"}


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
