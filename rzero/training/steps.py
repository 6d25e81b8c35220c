"""Step checkpoints inside a training phase, and preemption (SIGTERM) that keeps them.

A phase's trainer writes TRL's own checkpoint (`checkpoint-N` in its work folder: weights,
optimiser, scheduler, the RNG of every process, `trainer_state.json`) every `run.save_steps`
optimiser updates, and once more when SIGTERM arrives: the update in progress finishes, the
checkpoint is written, and `Preempted` ends the phase. Beside TRL's files each checkpoint holds
what the phase itself keeps between updates (`rzero_state.json`, written last, so a checkpoint
without it is incomplete and never resumed):

- the state of every reward function and callback that has one (`state_dict()` and
  `load_state_dict(state)`: a step counter that seeds the frozen solver's votes, a step log's
  length, a curve's points), and TRL's log of the updates so far;
- the rollout buffer (`rollout-rank{R}.pt`): the rollout being trained on and the position in
  it, so a checkpoint in the middle of a rollout resumes on the same completions.

Rerunning the phase resumes from the latest complete checkpoint (`latest_checkpoint`) through
TRL's `resume_from_checkpoint` and ends with the weights of an uninterrupted run at the same
seed (tests/training/test_step_checkpoints.py).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rzero.engine import distributed

STATE_FILE = "rzero_state.json"
# the exit code of a command stopped by SIGTERM after saving a step checkpoint: EX_TEMPFAIL,
# "try again later" (a scheduler's requeue); a kill without the save exits 143 or -15
PREEMPTED_EXIT = 75
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


class Preempted(Exception):
    """A training phase stopped by SIGTERM after it saved a step checkpoint: rerunning the
    same command resumes it there."""

    def __init__(self, desc: str, update: int, total: int, checkpoint: Path | None):
        self.desc, self.update, self.total, self.checkpoint = desc, update, total, checkpoint
        where = f"; its step checkpoint: {checkpoint}" if checkpoint else ""
        super().__init__(
            f"stopped by SIGTERM in {desc} after update {update}/{total}{where}; "
            "rerun the same command to resume there"
        )


def stateful(objects: Sequence[Any]) -> list[Any]:
    """The reward functions and callbacks among `objects` that carry state between updates."""
    return [o for o in objects if callable(getattr(o, "state_dict", None))]


def latest_checkpoint(work: Path) -> Path | None:
    """The complete step checkpoint of `work` with the most updates, or None."""
    if not work.is_dir():
        return None
    done = [
        (int(m.group(1)), p)
        for p in work.iterdir()
        if (m := _CHECKPOINT.match(p.name)) and (p / STATE_FILE).is_file()
    ]
    return max(done)[1] if done else None


def load_state(checkpoint: Path, objects: Sequence[Any]) -> list[dict[str, float]]:
    """Restore `objects` (`stateful`, in the order they were saved) from `checkpoint`; returns
    the log of the updates it had made."""
    saved = json.loads((checkpoint / STATE_FILE).read_text())
    states = saved["objects"]
    if len(states) != len(objects):
        raise RuntimeError(
            f"{checkpoint}: holds the state of {len(states)} reward functions and callbacks, "
            f"the phase has {len(objects)}; delete it to redo the phase"
        )
    for obj, state in zip(objects, states, strict=True):
        obj.load_state_dict(state)
    return saved["log"]


def save_state(checkpoint: Path, objects: Sequence[Any], log: list[dict[str, float]]) -> None:
    """The main process writes `checkpoint`'s state file (last: it marks the checkpoint
    complete) and removes the earlier checkpoints beside it."""
    if not distributed.is_main():
        return
    from rzero.io import write_json_atomic

    write_json_atomic(
        checkpoint / STATE_FILE, {"objects": [o.state_dict() for o in objects], "log": log}
    )
    for p in checkpoint.parent.iterdir():
        if p != checkpoint and _CHECKPOINT.match(p.name):
            shutil.rmtree(p, ignore_errors=True)


def resume_point(work: Path, objects: Sequence[Any], log: list, desc: str, total: int):
    """The latest complete checkpoint in `work` (None: start the phase), with `objects` and
    `log` (in place) restored from it and the resumption said on the main process."""
    checkpoint = latest_checkpoint(work)
    if checkpoint is not None:
        log[:] = load_state(checkpoint, objects)
        if distributed.is_main():
            import logging

            logging.getLogger("rzero").info(
                "%s: resuming after update %s/%d from its step checkpoint %s",
                desc,
                checkpoint.name.rpartition("-")[2],
                total,
                checkpoint,
            )
    return checkpoint


def step_checkpoints(sigterm: Signal, objects: Sequence[Any], log: list):
    """The trainer callback of a resumable phase: after each update, stop and save when
    SIGTERM reached any process; after each save, the phase's own state beside TRL's files
    (`save_state`). `.stopped` says whether SIGTERM stopped it."""
    from transformers import TrainerCallback

    class StepCheckpoints(TrainerCallback):
        stopped = False

        def on_step_end(self, args, state, control, **kwargs):
            if sigterm.agreed():
                control.should_save = control.should_training_stop = True
                self.stopped = True

        def on_save(self, args, state, control, **kwargs):
            distributed.barrier()  # every process's files of the checkpoint are written
            save_state(Path(args.output_dir) / f"checkpoint-{state.global_step}", objects, log)

    return StepCheckpoints()


def check_preempted(callback, trainer, desc: str) -> None:
    """`Preempted` when SIGTERM stopped `trainer` before its last update (`step_checkpoints`);
    a SIGTERM during the last update lets the phase finish."""
    state = trainer.state
    if callback.stopped and state.global_step < state.max_steps:
        raise Preempted(
            desc,
            state.global_step,
            state.max_steps,
            latest_checkpoint(Path(trainer.args.output_dir)),
        )


class Signal:
    """Whether SIGTERM has arrived since `catch_sigterm` was entered."""

    def __init__(self) -> None:
        self.received = False

    def agreed(self) -> bool:
        """Whether any training process received it: every process must stop after the same
        update, and a signal reaches them at different moments."""
        if distributed.world_size() <= 1:
            return self.received
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            return self.received
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        flag = torch.tensor([1.0 if self.received else 0.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


@contextlib.contextmanager
def catch_sigterm() -> Iterator[Signal]:
    """Inside, SIGTERM is recorded (`Signal.received`) instead of ending the process, for the
    trainer to stop after its current update; outside, it acts as before. A no-op off the
    main thread, where Python cannot take signals."""
    flag = Signal()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def record(signum, frame) -> None:
        flag.received = True

    previous = signal.signal(signal.SIGTERM, record)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGTERM, previous)


class StepState:
    """What a reward function or callback carries from one update to the next, so that it
    crosses a step checkpoint: the attributes named in `checkpointed` (JSON values: a step
    counter that seeds what the reward samples, per-step records); a step log at `log_path`
    (JSONL, appended on the main process), cut back on resume to what it held at the
    checkpoint; and the per-step summaries in `summaries`, handed again to `on_step` on
    resume, as they were the first time."""

    checkpointed: tuple[str, ...] = ()

    def state_dict(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.checkpointed}
        log = getattr(self, "log_path", None)
        if log is not None:
            state["log_bytes"] = Path(log).stat().st_size if Path(log).exists() else 0
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        import copy
        import os

        for name in self.checkpointed:
            setattr(self, name, copy.deepcopy(state[name]))
        log = getattr(self, "log_path", None)
        if log is not None and distributed.is_main():
            if Path(log).exists():
                os.truncate(log, min(state["log_bytes"], Path(log).stat().st_size))
            elif state["log_bytes"]:
                raise RuntimeError(f"{log}: missing; the step checkpoint needs its first rows")
        on_step = getattr(self, "on_step", None)
        if on_step is not None:
            for summary in getattr(self, "summaries", ()):
                on_step(summary)
