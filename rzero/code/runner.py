"""What both code loops share: the run folder, the phase runner, the sandbox settings.

`CodeRun` holds the run's `rzero.rundir.RunDir` (config fingerprint, iteration folders,
markers written last, resume checks) and the math loop's `PhaseRunner` (resume-or-run,
timing, peak memory, the commit crash point, tracker folders), with the self-play watch
before each commit (the challenger's trends and step warnings, the evaluation's increment
curve, the stop rules; `rzero.selfplay.watch.after_phase`) and the code tier's own report
(`rzero.code.report.rebuild`) after it. The phase names are the
math loop's, so the layout is the same: challenger (the proposer's GRPO phase), pool,
labelling, solver, eval, audit. It runs in one process (the config refuses several
training GPUs for the code tier).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rzero import preflight
from rzero.code.report import rebuild
from rzero.config import RZeroConfig
from rzero.engine.models import load_for_training, resolve_model
from rzero.evaluation import evaluation_phase
from rzero.executor.sandbox import Limits
from rzero.labeling.equivalence import use_settings
from rzero.rundir import RunDir
from rzero.selfplay import watch


def sandbox_options(cfg: RZeroConfig) -> dict[str, Any]:
    """Keyword arguments of the executor's batch functions (validate_triplets, judge, ...)."""
    c = cfg.code
    return {"timeout_s": c.timeout_s, "limits": Limits(memory_bytes=c.memory_mb * 2**20),
            "max_workers": c.workers}


class CodeRun:
    """One code-tier run: its config, folder and base model, and the phase runner."""

    def __init__(self, cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
        self.cfg = cfg
        self.rundir = RunDir(run_dir)
        preflight.check(cfg)  # outside inputs (benchmarks), before anything is written
        self.rundir.prepare(cfg, fresh)
        self.rundir.verify(cfg, full=cfg.run.verify == "full")
        # the math evaluation's grader (eval.enabled), as the math loop sets it
        use_settings(timeout_s=cfg.labeling.equivalence_timeout, direction=cfg.labeling.equivalence)
        self.base = resolve_model(cfg.model.name)
        self.sandbox = sandbox_options(cfg)
        self.trackers, self.phases = watch.watched_phases(cfg, self.rundir, rebuild)
        self.timing = self.phases.timing

    def load(self, checkpoint: str):  # -> (model, tokenizer)
        return load_for_training(checkpoint, self.cfg.model)

    def generator(self, checkpoint: str):  # closed when the phase ends
        return self.phases.generator(checkpoint)

    def run_phase(self, k: int, phase: str, fn: Callable[..., dict], *args: str) -> dict:
        """`PhaseRunner.run`: skip a committed phase, else run, measure and commit it."""
        return self.phases.run(k, phase, fn, *args)

    def run(self) -> Path:
        """The iterations (`iterate`); a warning named in `run.stop_on` ends them after its
        phase; the trackers close."""
        watch.run_watched(self.iterate, self.trackers)
        return self.rundir.path

    def iterate(self) -> None:
        raise NotImplementedError

    def eval_phase(self, k: int, solver: str) -> dict:
        """The math evaluation of the new solver (AZR's claim is transfer from code to math)."""
        return evaluation_phase(self.generator(solver), self.cfg,
                                self.rundir.iter_dir(k) / "eval") | {
            "checkpoint": self.rundir.relative(solver)}

    def skipped_solver(self, k: int, start: str, why: str) -> dict:
        """The marker of a solver phase with nothing to train on: the solver carries over."""
        return {"checkpoint": self.rundir.relative(start), "start": self.rundir.relative(start),
                "skipped": True, "warning": f"iteration {k}: {why}; the solver phase was "
                                            f"skipped and the solver carried over",
                "metrics": {"train_tasks": 0}}
