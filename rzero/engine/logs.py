"""What the libraries print on a run's terminal: their warnings and INFO lines are turned off
at their source by default, and `--verbose` leaves them as the libraries print them.

Each switch is the library's own, set in this process's environment before the library is
imported, so every process a run starts inherits it (the training ranks, vLLM's engine cores):
- vLLM: `VLLM_LOGGING_LEVEL=ERROR` (its start-up WARNING and INFO lines: Triton not found,
  eager mode, the engine's config, the CPU worker's LD_PRELOAD advice);
- torch's C++ side: `TORCH_CPP_LOG_LEVEL=ERROR` (the NUMA-binding warning of a rank);
- torchrun: its five-line banner about OMP_NUM_THREADS is printed only when the variable is
  unset, so the launch sets the value torchrun would set (1; `launch_env`).
A variable the user already set is kept. A server whose output goes to its own log file (the
frozen solver's, the judge's) logs at vLLM's INFO level there (`server_env`): that file is
what one reads when it dies.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

QUIET = {"VLLM_LOGGING_LEVEL": "ERROR", "TORCH_CPP_LOG_LEVEL": "ERROR"}
# which of QUIET this run set itself (so a server's log can have them back)
MARK = "RZERO_QUIETED"


def quiet_libraries(env: MutableMapping[str, str] | None = None) -> None:
    """Set each of `QUIET` in `env` (default: this process's environment) that is unset."""
    env = os.environ if env is None else env
    set_here = [k for k in QUIET if k not in env]
    for key in set_here:
        env[key] = QUIET[key]
    if set_here:
        env[MARK] = ",".join(sorted(set(env.get(MARK, "").split(",") + set_here) - {""}))


def server_env(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """`env` for a server that writes its own log file: the switches this run set are undone,
    so the log says what the server did."""
    for key in env.get(MARK, "").split(","):
        if key == "VLLM_LOGGING_LEVEL":
            env[key] = "INFO"
        elif key:
            env.pop(key, None)
    return env


def launch_env(env: MutableMapping[str, str], verbose: bool) -> MutableMapping[str, str]:
    """`env` for `accelerate launch`: OMP_NUM_THREADS=1 where it is unset (what torchrun sets
    then anyway, after a five-line warning), unless `verbose`."""
    if not verbose:
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def unfilter_warnings() -> None:
    """`--verbose`: drop the warning filters rzero installs at import (`rzero/__init__.py`)."""
    import warnings

    warnings.filters[:] = [
        f
        for f in warnings.filters
        if not (
            f[0] == "ignore"
            and f[1] is not None
            and any(name in f[1].pattern for name in ("is_gradient_checkpointing", "all_gather"))
        )
    ]
