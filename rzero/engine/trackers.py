"""Where a run's numbers go besides its files: `run.report_to` (tensorboard, wandb, mlflow,
trackio; `all` and `none` as transformers spell them, resolved by the config).

Two streams reach the same trackers:

- the loop's own: every committed phase's scalar metrics (by iteration), the challenger's
  GRPO steps (by global step) and the collapse watch's warnings, through `Trackers`
  (`rzero.rundir.TrackerLog` holds one, a hook after each commit);
- TRL's training logs (loss, KL, reward per update): `grpo.grpo_config` passes
  `run.report_to` (handed down by each role's trainer) as GRPOConfig's ``report_to``, and `phase_environment` points
  transformers' tracker callbacks at this run (they read their settings from environment
  variables: ``TENSORBOARD_LOGGING_DIR``, ``WANDB_PROJECT``/``WANDB_DIR``/``WANDB_NAME``,
  ``MLFLOW_TRACKING_URI``/``MLFLOW_EXPERIMENT_NAME``, ``TRACKIO_PROJECT``).

wandb, mlflow and trackio are extras, imported only here, lazily; a run that names one
that is not installed is refused before it starts (`check_installed`). Their own settings
apply as usual (``WANDB_MODE=offline`` keeps wandb local; the tests use it). mlflow's
store is the run folder's ``mlflow.db`` (SQLite; artifacts in ``mlruns/``) unless
``MLFLOW_TRACKING_URI`` says else; the loop
logs through a client of its own (not mlflow's active run), so each trainer's callback
opens its own mlflow run beside the loop's, as it would without rzero.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rzero.config import TRACKERS, ConfigError

PROJECT = "rzero"  # the wandb/mlflow/trackio project, unless their environment says else
# the user's own tracker settings, read once: `enter_phase` writes these variables for each
# phase, and a later run in the same process (an ablation's next variant) must not take the
# previous run's folder for the user's choice
_USER = {
    key: os.environ.get(key)
    for key in (
        "WANDB_PROJECT",
        "WANDB_DIR",
        "MLFLOW_TRACKING_URI",
        "MLFLOW_EXPERIMENT_NAME",
        "TRACKIO_PROJECT",
    )
}


def _user(key: str, default: str) -> str:
    return _USER[key] or default


def check_installed(names: Sequence[str]) -> None:
    """ConfigError naming the tracker and the fix when one of `names` is not importable."""
    for name in names:
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise ConfigError(
                f"run.report_to={list(names)!r}: {name} is not installed; "
                f"`make setup EXTRAS={name}` (or `pip install 'rzero[{name}]'`) "
                f"or drop it from run.report_to"
            )


def mlflow_uri(run_dir: Path) -> str:
    """Where mlflow keeps this run: ``MLFLOW_TRACKING_URI`` when set, else the SQLite store
    RUN_DIR/mlflow.db (mlflow 3 refuses its old file store unless told to allow it)."""
    return _user("MLFLOW_TRACKING_URI", f"sqlite:///{run_dir.resolve() / 'mlflow.db'}")


def mlflow_experiment(client, run_dir: Path) -> str:
    """The id of the run's mlflow experiment (``MLFLOW_EXPERIMENT_NAME``, default rzero),
    made if missing; in the run's own store its artifacts (the warnings) go to
    RUN_DIR/mlruns, not to a folder beside wherever the command was started."""
    name = _user("MLFLOW_EXPERIMENT_NAME", PROJECT)
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    own = _USER["MLFLOW_TRACKING_URI"] is None
    return client.create_experiment(
        name, artifact_location=(run_dir.resolve() / "mlruns").as_uri() if own else None
    )


def mlflow_key(key: str) -> str:
    """`key` as mlflow allows metric names (letters, digits, ``_-. /``): ``pass@1`` is
    ``pass_at_1``."""
    return re.sub(r"[^\w\-. /]", "_", key.replace("@", "_at_"))


def phase_environment(run_dir: Path, k: int, phase: str) -> dict[str, str]:
    """Environment variables that point transformers' tracker callbacks at this run for
    one phase (TRL's logs of iteration k's challenger or solver phase). Existing project
    settings win; the TensorBoard folder is always this run's."""
    name = f"{run_dir.name} iter {k} {phase}"
    logs = run_dir / "tensorboard" / "trl" / f"iter_{k:02d}_{phase}"
    return {
        "TENSORBOARD_LOGGING_DIR": str(logs),
        "WANDB_PROJECT": _user("WANDB_PROJECT", PROJECT),
        "WANDB_DIR": _user("WANDB_DIR", str(run_dir)),
        "WANDB_NAME": name,
        "MLFLOW_TRACKING_URI": mlflow_uri(run_dir),
        "MLFLOW_EXPERIMENT_NAME": _user("MLFLOW_EXPERIMENT_NAME", PROJECT),
        "TRACKIO_PROJECT": _user("TRACKIO_PROJECT", PROJECT),
    }


def enter_phase(run_dir: Path, k: int, phase: str, names: Sequence[str]) -> None:
    """Set `phase_environment` in this process when the run reports to trackers (`names`:
    `run.report_to`; transformers reads it when a trainer is made, so a phase sets it
    before training)."""
    if names:
        os.environ.update(phase_environment(run_dir, k, phase))
    if "mlflow" in names:
        # the experiment exists before a trainer's callback would make it with mlflow's
        # default artifact folder
        from mlflow import MlflowClient

        mlflow_experiment(MlflowClient(tracking_uri=mlflow_uri(run_dir)), run_dir)


class Trackers:
    """The loop's sink: one writer per tracker in `names`, opened on first use."""

    def __init__(self, names: Sequence[str], run_dir: Path):
        self.names = list(names)
        self.run_dir = run_dir
        self._tb = None
        self._wandb = None
        self._trackio = None
        self._mlflow = None  # (client, run id)
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

            self._wandb = wandb.init(
                project=_user("WANDB_PROJECT", PROJECT),
                name=self.run_dir.name,
                dir=_user("WANDB_DIR", str(self.run_dir)),
                reinit=True,
            )
        if "trackio" in self.names:
            import trackio

            self._trackio = trackio
            trackio.init(project=_user("TRACKIO_PROJECT", PROJECT), name=self.run_dir.name)
        if "mlflow" in self.names:
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=mlflow_uri(self.run_dir))
            run = client.create_run(
                mlflow_experiment(client, self.run_dir), run_name=self.run_dir.name
            )
            self._mlflow = (client, run.info.run_id)

    def scalars(self, values: Mapping[str, Any], step: int, axis: str) -> None:
        """The numeric entries of `values` at `step` of `axis` ("iteration" or
        "global_step"); anything that is not a number is left out."""
        nums = {
            k: float(v)
            for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
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
        if self._mlflow is not None:
            # mlflow keeps a step per metric: the loop's axis is the step itself
            from mlflow.entities import Metric

            client, run_id = self._mlflow
            now = int(time.time() * 1000)
            client.log_batch(
                run_id,
                metrics=[Metric(mlflow_key(key), value, now, step) for key, value in nums.items()],
            )

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
        if self._mlflow is not None:
            client, run_id = self._mlflow
            client.log_text(run_id, body, f"{tag}/iter_{step:02d}.md")

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
        if self._mlflow is not None:
            client, run_id = self._mlflow
            client.set_terminated(run_id)
        self._tb = self._wandb = self._trackio = self._mlflow = None
        self._opened = False
