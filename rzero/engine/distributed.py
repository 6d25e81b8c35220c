"""The loop under a multi-process launch (`accelerate launch`, `torchrun`): who does what.

Training phases run on every process: TRL's GRPOTrainer splits each step's sequences over
them and all-reduces the gradients. Everything else — the question pool, labelling,
evaluation, the audit, serving the frozen solver, the phase markers and reports — runs once,
on the main process (global rank 0), while the others wait at a barrier and then read the
committed marker. Inside a challenger step the reward is computed once over the *global*
batch (the repetition penalty clusters all B questions of the step, as in the paper) and
each process receives its own slice.

With one process (the CPU default) every function here is a no-op or the identity.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from rzero.engine.serving import die_with_parent

# non-training phases (a pool of 8000 questions, labelling, evaluation) can take hours
# while the other ranks wait at a barrier; the default 30-minute timeout would kill them
BARRIER_TIMEOUT = timedelta(hours=24)


def world_size() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def local_rank() -> int:
    """This process's rank on its own machine (the launcher's LOCAL_RANK; 0 alone)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def init() -> None:
    """Join the process group when launched with several processes (a no-op otherwise).

    accelerate's PartialState reads the launcher's environment (RANK, WORLD_SIZE,
    MASTER_ADDR, ...) and picks NCCL on GPUs and gloo on CPU; the Trainer later reuses it.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    import torch.distributed as dist
    from accelerate import PartialState

    # a rank whose launcher was SIGKILLed would otherwise wait at the next barrier for a
    # day (BARRIER_TIMEOUT); this way it is killed with the launcher, and so are the model
    # servers it started (they die with their parent in turn)
    die_with_parent()

    if not dist.is_initialized():
        PartialState(timeout=BARRIER_TIMEOUT)
        atexit.register(_leave)


def _leave() -> None:
    """Leave the process group before exit (gloo's threads abort the process otherwise)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    import torch.distributed as dist

    if world_size() > 1 and dist.is_initialized():
        dist.barrier()


def broadcast(obj: Any) -> Any:
    """The main process's `obj` on every process."""
    import torch.distributed as dist

    if world_size() <= 1 or not dist.is_initialized():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(items: list[Any]) -> list[list[Any]]:
    """Every process's list, in rank order, on every process."""
    import torch.distributed as dist

    if world_size() <= 1 or not dist.is_initialized():
        return [items]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, items)
    return out


class MainProcessFailed(RuntimeError):
    """Raised on the other processes when the main process's share of the work failed."""


def collective_failure(exc: BaseException) -> str | None:
    """When `exc` (or what it was raised from) is a collective that failed in a run of
    several processes (torch's DistBackendError, an NCCL error; gloo's transport raises a
    plain RuntimeError, "Connection reset by peer" when another process ended), the
    backend's message in one line; else None."""
    import torch.distributed as dist

    def failed_collective(e: BaseException) -> bool:
        return isinstance(e, dist.DistBackendError) or (
            isinstance(e, RuntimeError) and "/gloo/transport/" in str(e)
        )

    if world_size() <= 1:
        return None
    seen: BaseException | None = exc
    while seen is not None and not failed_collective(seen):
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return None
    text = " ".join(str(seen).split()) or type(seen).__name__
    # gloo prefixes its source position: "[.../gloo/transport/tcp/pair.cc:553] Connection ..."
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    return text.split(". ", 1)[0]


def on_main(fn: Callable[..., Any], *args: Any, share: bool = True, **kwargs: Any) -> Any:
    """Run `fn` on the main process only. Every process returns its result (or, with
    `share=False`, the main process gets it and the others None), and if it raised, every
    process raises: the main one the original error, the others `MainProcessFailed` naming it.
    This is also a synchronisation point: nobody returns before the main process is done."""
    if world_size() <= 1:
        return fn(*args, **kwargs)
    failure: BaseException | None = None
    result: Any = None
    outcome: tuple[str, Any] = ("ok", None)
    if is_main():
        try:
            result = fn(*args, **kwargs)
            outcome = ("ok", result if share else None)
        except BaseException as exc:  # the others must not wait for an answer that never comes
            failure = exc
            outcome = ("error", f"{type(exc).__name__}: {exc}")
    outcome = broadcast(outcome)
    if failure is not None:
        raise failure
    if outcome[0] == "error":
        raise MainProcessFailed(f"the main process failed: {outcome[1]}")
    return result if is_main() else outcome[1]


def on_each_machine(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
    """Run `fn` once on every machine, on its first process (LOCAL_RANK 0), and return the
    results of all machines, in the order of those processes' global ranks, on every
    process. If it raised on any machine, every process raises: that machine the original
    error, the others `MainProcessFailed` naming the machine and the error. Like `on_main`,
    a synchronisation point; with one process it is `[fn(...)]`."""
    if world_size() <= 1:
        return [fn(*args, **kwargs)]
    failure: BaseException | None = None
    outcome: tuple[str, Any] = ("idle", None)
    if local_rank() == 0:
        try:
            outcome = ("ok", fn(*args, **kwargs))
        except BaseException as exc:  # the other machines must not wait for an answer
            failure = exc
            outcome = ("error", f"{type(exc).__name__}: {exc}")
    outcomes = [(r, o) for r, (o,) in enumerate(gather([outcome])) if o[0] != "idle"]
    if failure is not None:
        raise failure
    for machine, (r, (status, what)) in enumerate(outcomes):
        if status == "error":
            raise MainProcessFailed(f"machine {machine} (global rank {r}) failed: {what}")
    return [what for _, (_, what) in outcomes]


def launch_info() -> dict[str, Any]:
    """How the training processes were launched, for a training phase's marker: how many,
    and the DeepSpeed config accelerate handed them (None without DeepSpeed)."""
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true"
    return {
        "processes": world_size(),
        "deepspeed": os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "yes")
        if deepspeed
        else None,
    }
