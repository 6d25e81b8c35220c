"""The shape of a system: `Run`, the base every system's run subclasses (R-Zero's math
loop, the code tier's two loops, SPIN, SPAG, the solver task), and the stop rule.

A system declares its run folder's `Layout` (phases, outputs, row files) and writes its
algorithm (`iterate`, each phase through `self.phases.run`), its report (`rebuild`) and the
check of what it reads from outside its config (`check_inputs`). `Run` does the rest, the
same way for every system:

    set-up      the outside inputs checked before anything is written, the folder's lock
                taken (`RunLock`: one writer per folder), the folder created
                or its config checked against the saved one (`RunDir.prepare`), committed
                outputs verified (`RunDir.verify`), the grader's settings, the base model
    phases      one `PhaseRunner`: resume-or-run, timing, memory, generator lifetimes;
                before each commit the system's hooks (the self-play audit), after it the
                trackers (`TrackerLog`), the report rebuild and, with `run.push_to_hub`, the
                hub push (`HubPush`); every marker, committed now or before, meets the stop
    the stop    a committed marker whose warnings `run.stop_on` names ends the run after
                that phase (`StopRun`) as the end of the last iteration would: what was
                committed stays, one line on stderr, the trackers close
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rzero.config import RunConfig, RZeroConfig
from rzero.engine import distributed
from rzero.engine.models import load_for_training, resolve_model
from rzero.labeling.equivalence import use_settings
from rzero.rundir.folder import Layout, RunDir
from rzero.rundir.hub import HubPush
from rzero.rundir.lock import RunLock
from rzero.rundir.phases import Hook, PhaseRunner, TrackerLog

__all__ = ["Run", "StopRun", "System", "check_stop", "stop_of", "stopping", "warning_name"]


# ---------------------------------------------------------------- the stop


class StopRun(Exception):
    """A committed phase recorded a warning that `run.stop_on` names."""


def warning_name(warning: str) -> str:
    """The name a warning starts with (``"diversity: ..."`` -> ``"diversity"``)."""
    return warning.split(":", 1)[0].strip()


def stopping(warnings: Sequence[str], stop_on: Sequence[str]) -> list[str]:
    """The warnings whose name is in `stop_on`, in order."""
    names = set(stop_on)
    return [w for w in warnings if warning_name(w) in names]


def stop_of(marker: dict[str, Any], run: RunConfig) -> list[str]:
    """The warnings of a committed marker that `run.stop_on` names now (a rerun fires the
    same stop from the stored marker; emptying `run.stop_on` lets the run go on)."""
    return stopping(marker.get("warnings", []), run.stop_on)


def check_stop(marker: dict[str, Any], run: RunConfig) -> None:
    """Raise `StopRun` after a phase whose warnings `run.stop_on` names."""
    reasons = stop_of(marker, run)
    if reasons:
        raise StopRun(
            f"after iteration {marker.get('iteration')} {marker.get('phase')}, "
            f"because run.stop_on lists {warning_name(reasons[0])}: {reasons[0]}"
        )


# ---------------------------------------------------------------- the base


class Run:
    """One run of a system in its folder. Subclasses set `layout` and write `iterate`,
    `rebuild` and `check_inputs`; `before_commit` and `configure` are optional hooks."""

    layout: ClassVar[Layout]

    def __init__(self, cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
        distributed.init()  # several processes under accelerate/torchrun; else a no-op
        self.cfg = cfg
        self.rundir = RunDir(run_dir, self.layout)
        # outside inputs, before anything is written (every process: a subclass may keep
        # what it read)
        self.check_inputs()
        # one writer per folder: the main process holds the lock for the run's life
        self.lock = RunLock(run_dir)
        distributed.on_main(lambda: self.lock.acquire() and None)
        distributed.on_main(self.rundir.prepare, cfg, fresh)
        distributed.on_main(self.rundir.verify, cfg, full=cfg.run.verify == "full")
        # one grader (labeling.equivalence) for votes, rewards and evaluation
        use_settings(timeout_s=cfg.labeling.equivalence_timeout, direction=cfg.labeling.equivalence)
        # the main process converts the embedded model once; the others then find it cached
        distributed.on_main(resolve_model, cfg.model.name)
        self.base = resolve_model(cfg.model.name)
        self.configure()
        self.trackers = TrackerLog(cfg, self.rundir.path)
        # the hub push comes after the report: the model card quotes its science card
        pushes = [HubPush(cfg, self.rundir)] if cfg.run.push_to_hub else []
        self.phases = PhaseRunner(
            cfg,
            self.rundir,
            before_commit=self.before_commit(),
            after_commit=[self.trackers, self._rebuild_after_commit, *pushes],
            on_marker=[lambda marker: check_stop(marker, cfg.run)],
        )
        self.timing = self.phases.timing
        self.committed = 0  # phases this process committed (each rebuilt the report)

    # ------------------------------------------------------------ what a system writes

    def check_inputs(self) -> None:
        """Raise ConfigError for the first outside input a phase could not use."""
        raise NotImplementedError

    def configure(self) -> None:
        """Set-up after the folder is ready and the base model resolved (optional)."""

    def before_commit(self) -> list[Hook]:
        """`(k, phase, info) -> info` hooks run on each marker before it commits."""
        return []

    def rebuild(self) -> None:
        """Render the run's report from its folder (after every commit)."""
        raise NotImplementedError

    def iterate(self) -> None:
        """The system's algorithm: every phase through `self.phases.run`."""
        raise NotImplementedError

    # ------------------------------------------------------------ what every system uses

    def _rebuild_if_nothing_committed(self) -> None:
        if not self.committed:
            self.rebuild()

    def _rebuild_after_commit(self, k: int, phase: str, marker: dict[str, Any]) -> None:
        self.committed += 1
        self.rebuild()

    def load(self, checkpoint: str):  # -> (model, tokenizer), for training
        return load_for_training(checkpoint, self.cfg.model)

    def generator(self, checkpoint: str):  # closed when the phase ends
        return self.phases.generator(checkpoint)

    def run(self) -> Path:
        """`iterate`; a `StopRun` ends it after the phase that committed the warning, with
        one line on stderr. The trackers close and the folder's lock is released either
        way. A resumed run that committed nothing rebuilds the report once at the end, so it
        still leaves the report this rzero writes (every commit rebuilt it otherwise)."""
        try:
            stopped(self.iterate, self.trackers.close)
            # every process calls on_main (a collective); the main one, which committed,
            # decides
            distributed.on_main(self._rebuild_if_nothing_committed)
        finally:
            self.lock.release()
        return self.rundir.path


def stopped(iterate: Callable[[], None], close: Callable[[], None]) -> None:
    """`iterate()`, a `StopRun` printed as one line; `close()` after, either way."""
    try:
        iterate()
    except StopRun as stop:
        print(f"run stopped {stop}", file=sys.stderr, flush=True)
    finally:
        close()


# ---------------------------------------------------------------- what the CLI sees


@dataclass(frozen=True)
class System:
    """A system as the CLI and `rzero ablate` see it, declared in its package's
    `__init__` without importing its engines (the functions import them when called):

    layout            its run folder
    iterate           `(cfg, run_dir, *, fresh)` -> the finished `Run`
    plan              `(cfg, config_path)` -> what a run of the recipe computes (Markdown)
    rebuild           `(RunDir, cfg)`: its report from the folder (after `rzero audit`)
    variants          the ablation's variants: name -> config overrides
    default_variants  what `rzero ablate` runs without --variants
    groups            named lists of variants (`--variants NAME`): a grid run as one command
    overrides         `(cfg, variant)` -> the overrides, where one depends on the recipe
    summary           `(run_dirs, out_dir)` -> the ablation's table (None: `rzero compare`'s)
    launcher          whether `rzero iterate` may start it under `accelerate launch` (several
                      training processes); the others run in one process
    estimate          `(cfg, hardware, length_fraction, params_b)` -> its wall time on that
                      hardware (Markdown; `rzero plan --hardware`); None: not estimated
    """

    layout: Layout
    iterate: Callable[..., Run]
    plan: Callable[[RZeroConfig, str | None], str]
    rebuild: Callable[[RunDir, RZeroConfig], None]
    variants: Mapping[str, Sequence[str]] = field(default_factory=dict)
    default_variants: tuple[str, ...] = ()
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)
    overrides: Callable[[RZeroConfig, str], list[str]] | None = None
    summary: Callable[[list[Path], Path], Path] | None = None
    launcher: bool = False
    estimate: Callable[..., str] | None = None

    @property
    def name(self) -> str:
        return self.layout.name

    def variant_overrides(self, cfg: RZeroConfig, variant: str) -> list[str]:
        """The config overrides of one ablation variant of `cfg`."""
        if self.overrides is not None:
            return self.overrides(cfg, variant)
        return list(self.variants[variant])

    def open(self, path: str | Path) -> RunDir:
        """The run folder at `path`, read with this system's layout."""
        return RunDir(path, self.layout)
