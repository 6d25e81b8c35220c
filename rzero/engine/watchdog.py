"""`python -m rzero.engine.watchdog PID`: when process PID dies, kill what it had started.

A model engine is several processes: vLLM's offline engine runs its engine core and workers
as children of the process that built it, and a solver server runs its own engine cores
beside it. Stopped in order (a phase ending, Ctrl-C, SIGTERM) they are shut down by their
owners. Killed with SIGKILL — by an out-of-memory killer, a scheduler, or `kill -9` of the
launcher, whose ranks then die with it (`distributed.init`) — the owner runs no code, the
engine core is adopted by init, and it holds its gigabytes until someone finds it.

This watchdog is the one process that outlives the owner on purpose. It polls every
POLL_S seconds which processes descend from PID; once PID is gone it SIGKILLs every one it
knew of and whatever those started since, then exits. It runs in a session of its own, so
a terminal's Ctrl-C or a group kill of the owner does not reach it first. Linux only (it
reads /proc); elsewhere `ensure` does nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.5
_started_for: int | None = None  # the pid whose watchdog this process has started


def parents() -> dict[int, int]:
    """pid -> parent pid of every process now running (from /proc/PID/stat)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended while we looked
        # the command name (field 2) is in parentheses and may hold spaces
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":  # a zombie has already exited
            out[int(entry.name)] = int(fields[1])
    return out


def descendants(roots: set[int], tree: dict[int, int] | None = None) -> set[int]:
    """Every running process below any of `roots` (not the roots themselves)."""
    tree = parents() if tree is None else tree
    children: dict[int, list[int]] = {}
    for pid, ppid in tree.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def watch(root: int) -> set[int]:
    """Wait for `root` to die, then SIGKILL its last known descendants and theirs; returns
    the pids it signalled."""
    me = os.getpid()
    known: set[int] = set()
    while True:
        tree = parents()
        if root not in tree:
            break
        known = descendants({root}, tree) - {me}
        time.sleep(POLL_S)
    victims = (known | descendants(known)) - {me}
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return victims


def ensure() -> None:
    """Start this process's watchdog, once (a no-op off Linux)."""
    global _started_for
    if _started_for == os.getpid() or not Path("/proc/self/stat").exists():
        return
    subprocess.Popen(
        [sys.executable, "-m", "rzero.engine.watchdog", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    _started_for = os.getpid()


if __name__ == "__main__":
    watch(int(sys.argv[1]))
