"""rzero.engine.watchdog: what a process started outlives it by SIGKILL no longer than a poll."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from rzero.engine.watchdog import descendants, parents

# an owner that starts its watchdog, then an engine-like child in a session of its own (as
# model servers run), which itself starts a worker; it prints their pids and waits
OWNER = textwrap.dedent("""
    import subprocess, sys, time
    from rzero.engine import watchdog
    watchdog.ensure()
    core = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time; w = subprocess.Popen(['sleep', '300']); "
        "print(w.pid, flush=True); time.sleep(300)"],
        start_new_session=True, stdout=subprocess.PIPE, text=True)
    worker = core.stdout.readline().strip()
    print(core.pid, worker, flush=True)
    time.sleep(300)
""")


def _is_watchdog(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"rzero.engine.watchdog" in f.read()
    except OSError:
        return False  # it ended while we looked


def _alive(pid: int) -> bool:
    return pid in parents()


def test_descendants_walks_the_whole_tree():
    tree = {2: 1, 3: 2, 4: 3, 5: 1, 6: 9}
    assert descendants({2}, tree) == {3, 4}
    assert descendants({1}, tree) == {2, 3, 4, 5}
    assert descendants({7}, tree) == set()


def test_a_sigkilled_owner_takes_its_engine_processes_with_it():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    core, worker = (int(p) for p in owner.stdout.readline().split())
    assert _alive(core) and _alive(worker)
    time.sleep(1.0)  # two polls: the watchdog has seen both
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 10
    while (_alive(core) or _alive(worker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(core) and not _alive(worker)


def test_an_owner_that_exits_normally_leaves_no_watchdog():
    code = "from rzero.engine import watchdog; watchdog.ensure(); print('ok')"
    before = set(parents())
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = {pid for pid in set(parents()) - before if _is_watchdog(pid)}
        if not left:
            break
        time.sleep(0.2)
    assert not left
