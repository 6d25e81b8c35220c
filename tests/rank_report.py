"""Results of launched child processes, one file per rank.

Ranks launched together share one stdout, and `print` may reach it as two writes (the text,
then the newline; always so under PYTHONUNBUFFERED), so two ranks' `RESULT ...` lines can
land on one line. Each rank instead writes `result-<rank>.json`, atomically, into the
directory named by RZERO_TEST_RESULTS; the test reads the files back in rank order.

Ports: a port picked with `free_port()` and bound later by another process can be taken in
between. Launches here use torchrun's standalone rendezvous instead, whose agent binds port
0 itself and hands the port it got to the workers (MASTER_PORT).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RESULTS_ENV = "RZERO_TEST_RESULTS"
TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent


def report(result: dict[str, Any], rank: int | None = None) -> None:
    """In a child: write this rank's result (rank from the launcher's RANK, default 0)."""
    if rank is None:
        rank = int(os.environ.get("RANK", "0"))
    path = Path(os.environ[RESULTS_ENV]) / f"result-{rank}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)  # the test never reads half a file


def read_results(results: Path, world: int) -> list[dict[str, Any]]:
    """Ranks 0..world-1's results in rank order; fails naming any rank that wrote none, or
    any file from a rank that should not exist."""
    expected = {f"result-{r}.json" for r in range(world)}
    found = {p.name for p in results.glob("result-*.json")}
    assert found == expected, f"rank results: expected {sorted(expected)}, found {sorted(found)}"
    return [json.loads((results / f"result-{r}.json").read_text()) for r in range(world)]


# torchrun reads each option from PET_<NAME> as well, and `accelerate launch` starts
# torchrun in-process with those defaults: with this, its rendezvous is standalone (the port
# given by --main_process_port, or accelerate's default, is then not used)
STANDALONE_RENDEZVOUS = {"PET_STANDALONE": "1"}


def child_env(results: Path, **extra: str) -> dict[str, str]:
    """os.environ for a launched child: it imports this checkout's `rzero` and `rank_report`
    and reports into `results`; `extra` is added last."""
    results.mkdir(parents=True, exist_ok=True)
    path = [str(ROOT), str(TESTS_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), RESULTS_ENV: str(results), **extra}
    env.pop("RZERO_KILL_AT", None)  # a fault injection meant for another test
    return env
