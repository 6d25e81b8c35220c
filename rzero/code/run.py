"""What both code loops share on the run engine (`rzero.rundir.run.Run`: folder, phase
runner, trackers, stop): the sandbox settings, the self-play watch before each commit (the
challenger's trends and step warnings, the evaluation's increment curve, the stop rules;
`rzero.selfplay.watch.after_phase`) and the code tier's own report
(`rzero.code.report.rebuild`) after it. The phase names are the math loop's
(`rzero.code.RZERO_CODE`). It runs in one process (the config refuses several training GPUs
for the code tier).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from rzero import preflight
from rzero.code.report import rebuild
from rzero.config import RZeroConfig
from rzero.evaluation import evaluation_phase
from rzero.executor.sandbox import Limits
from rzero.rundir import Run
from rzero.selfplay import watch


def sandbox_options(cfg: RZeroConfig) -> dict[str, Any]:
    """Keyword arguments of the executor's batch functions (validate_triplets, judge, ...)."""
    c = cfg.code
    return {
        "timeout_s": c.timeout_s,
        "limits": Limits(memory_bytes=c.memory_mb * 2**20),
        "max_workers": c.workers,
    }


class CodeRun(Run):
    """One code-tier run on the run engine (`rzero.rundir.run.Run`): the sandbox settings,
    the self-play watch before each commit, the code tier's report after it."""

    def check_inputs(self) -> None:
        preflight.check(self.cfg)  # outside inputs (benchmarks), before anything is written

    def configure(self) -> None:
        self.sandbox = sandbox_options(self.cfg)

    def before_commit(self) -> list:
        return [partial(watch.after_phase, self.cfg, self.rundir)]

    def rebuild(self) -> None:
        rebuild(self.rundir, self.cfg)

    def run_phase(self, k: int, phase: str, fn: Callable[..., dict], *args: str) -> dict:
        """`PhaseRunner.run`: skip a committed phase, else run, measure and commit it."""
        return self.phases.run(k, phase, fn, *args)

    def eval_phase(self, k: int, solver: str) -> dict:
        """The math evaluation of the new solver (AZR's claim is transfer from code to math)."""
        return evaluation_phase(
            self.generator(solver), self.cfg, self.rundir.iter_dir(k) / "eval"
        ) | {"checkpoint": self.rundir.relative(solver)}

    def skipped_solver(self, k: int, start: str, why: str) -> dict:
        """The marker of a solver phase with nothing to train on: the solver carries over."""
        return {
            "checkpoint": self.rundir.relative(start),
            "start": self.rundir.relative(start),
            "skipped": True,
            "warning": f"iteration {k}: {why}; the solver phase was "
            f"skipped and the solver carried over",
            "metrics": {"train_tasks": 0},
        }
