"""Where a run's numbers go besides its files: `run.report_to` (tensorboard, wandb, trackio).

Two streams reach the same trackers:

- the loop's own: every committed phase's scalar metrics (by iteration), the challenger's
  GRPO steps (by global step) and the collapse watch's warnings, through `Trackers`
  (`rzero.rundir.TrackerLog` holds one, a hook after each commit);
- TRL's training logs (loss, KL, reward per update): `grpo.grpo_config` passes
  `run.report_to` (handed down by each role's trainer) as GRPOConfig's ``report_to``, and `phase_environment` points
  transformers' tracker callbacks at this run (they read their settings from environment
  variables: ``TENSORBOARD_LOGGING_DIR``, ``WANDB_PROJECT``/``WANDB_DIR``/``WANDB_NAME``,
  ``TRACKIO_PROJECT``).

wandb and trackio are optional and imported only here, lazily; a run that names one that
is not installed is refused before it starts (`check_installed`). Their own settings apply
as usual (``WANDB_MODE=offline`` keeps wandb local; the tests use it).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rzero.config import ConfigError

TRACKERS = ("tensorboard", "wandb", "trackio")
PROJECT = "rzero"  # the wandb/trackio project, unless WANDB_PROJECT/TRACKIO_PROJECT say else

def check_installed(names: Sequence[str]) -> None:
    """ConfigError naming the tracker and the fix when one of `names` is not importable."""
    module = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
    for name in names:
        if importlib.util.find_spec(module[name]) is None:
            raise ConfigError(f"run.report_to={list(names)!r}: {name} is not installed; "
                              f"`pip install {name}` or drop it from run.report_to")


def phase_environment(run_dir: Path, k: int, phase: str) -> dict[str, str]:
    """Environment variables that point transformers' tracker callbacks at this run for
    one phase (TRL's logs of iteration k's challenger or solver phase). Existing project
    settings win; the TensorBoard folder is always this run's."""
    name = f"{run_dir.name} iter {k} {phase}"
    logs = run_dir / "tensorboard" / "trl" / f"iter_{k:02d}_{phase}"
    return {"TENSORBOARD_LOGGING_DIR": str(logs),
            "WANDB_PROJECT": os.environ.get("WANDB_PROJECT", PROJECT),
            "WANDB_DIR": os.environ.get("WANDB_DIR", str(run_dir)),
            "WANDB_NAME": name,
            "TRACKIO_PROJECT": os.environ.get("TRACKIO_PROJECT", PROJECT)}


def enter_phase(run_dir: Path, k: int, phase: str, names: Sequence[str]) -> None:
    """Set `phase_environment` in this process when the run reports to trackers (`names`:
    `run.report_to`; transformers reads it when a trainer is made, so a phase sets it
    before training)."""
    if names:
        os.environ.update(phase_environment(run_dir, k, phase))


class Trackers:
    """The loop's sink: one writer per tracker in `names`, opened on first use."""

    def __init__(self, names: Sequence[str], run_dir: Path):
        self.names = list(names)
        self.run_dir = run_dir
        self._tb = None
        self._wandb = None
        self._trackio = None
        self._opened = False

    def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        if "tensorboard" in self.names:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.run_dir / "tensorboard"))
        if "wandb" in self.names:
            import wandb

            self._wandb = wandb.init(project=os.environ.get("WANDB_PROJECT", PROJECT),
                                     name=self.run_dir.name,
                                     dir=os.environ.get("WANDB_DIR", str(self.run_dir)),
                                     reinit=True)
        if "trackio" in self.names:
            import trackio

            self._trackio = trackio
            trackio.init(project=os.environ.get("TRACKIO_PROJECT", PROJECT),
                         name=self.run_dir.name)

    def scalars(self, values: Mapping[str, Any], step: int, axis: str) -> None:
        """The numeric entries of `values` at `step` of `axis` ("iteration" or
        "global_step"); anything that is not a number is left out."""
        nums = {k: float(v) for k, v in values.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if not nums or not self.names:
            return
        self._open()
        if self._tb is not None:
            for key, value in nums.items():
                self._tb.add_scalar(key, value, step)
        # wandb and trackio want one rising step per run; the loop's two axes are logged
        # as fields of the row instead, to plot against
        if self._wandb is not None:
            self._wandb.log({**nums, axis: step})
        if self._trackio is not None:
            self._trackio.log({**nums, axis: step})

    def text(self, tag: str, lines: Sequence[str], step: int) -> None:
        """Warnings (or any lines) under `tag` at `step`."""
        if not lines or not self.names:
            return
        self._open()
        body = "\n".join(f"- {line}" for line in lines)
        if self._tb is not None:
            self._tb.add_text(tag, body, step)
        if self._wandb is not None:
            self._wandb.log({tag: body, "iteration": step})
        if self._trackio is not None:
            self._trackio.log({f"{tag}/count": float(len(lines)), "iteration": step})

    def flush(self) -> None:
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._trackio is not None:
            self._trackio.finish()
        self._tb = self._wandb = self._trackio = None
        self._opened = False
