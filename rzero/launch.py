"""Scale-out (SPEC §6): training under accelerate; the frozen solver's replicas are in
`rzero.serving`.

The reference hardware is one 8-GPU node split in two: GPUs 0-3 train the challenger with
TRL + accelerate + DeepSpeed ZeRO while GPUs 4-7 serve the frozen solver, one `vllm serve`
replica per GPU. The challenger reward reaches the solver through the OpenAI-compatible
protocol: `rzero serve-solver` (or `SolverReplicas` inside a program) writes the replicas'
URLs, one a line, to the file that `generation.solver_urls_file` names, and
`OpenAIGenerator` spreads the reward's requests round-robin over them. Beyond one node the
same two pieces scale independently: more replicas (on any machine that can be reached) in
the URLs file, and more training processes with `accelerate launch --num_machines N`.

What decides *what* runs is a pure function, so the exact commands are tested and can be
printed: `accelerate_command` (the training launch) here, `replica_plan` (per replica:
GPUs, port, URL, argv) in `rzero.serving`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from rzero.config import RZeroConfig, load_config
from rzero.replicas import cuda_visible_devices

DEFAULT_ACCELERATE_CONFIG = "configs/accelerate/deepspeed_zero2.yaml"
MIXED_PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "no"}


# ---------------------------------------------------------------- GPU lists
def parse_gpus(text: str | Sequence[int] | None) -> tuple[int, ...]:
    """'4,5,6,7' or '4-7' (or a list of ints) -> (4, 5, 6, 7); '' or None -> () (CPU)."""
    if text is None:
        return ()
    if not isinstance(text, str):
        return tuple(int(g) for g in text)
    gpus: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            gpus += list(range(int(lo), int(hi) + 1)) if sep else [int(part)]
        except ValueError:
            raise ValueError(f"--gpus {text!r}: expected GPU indices like '4,5,6,7' or "
                             f"'4-7'") from None
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus {text!r}: a GPU is listed twice")
    return tuple(gpus)




# ---------------------------------------------------------------- training launch


def accelerate_command(cfg: str | Path | RZeroConfig, *, num_processes: int,
                       gpus: Sequence[int], num_machines: int = 1, machine_rank: int = 0,
                       main_process_ip: str | None = None, main_process_port: int = 29500,
                       accelerate_config: str | Path = DEFAULT_ACCELERATE_CONFIG,
                       script_args: Sequence[str] | None = None,
                       entry: Sequence[str] = ("-m", "rzero"),
                       launcher: str = "accelerate") -> tuple[list[str], dict[str, str]]:
    """The `accelerate launch` argv and the environment additions for one training launch.

    `num_processes` is accelerate's: the total over all machines, one per training GPU, so
    it must equal len(gpus) x num_machines (`gpus` are this node's training GPUs, given to
    the processes through CUDA_VISIBLE_DEVICES; () trains on CPU). Mixed precision follows
    model.dtype, the same switch that sets GRPOConfig.bf16, so accelerate, the Trainer and
    DeepSpeed's "auto" agree. With a config path and no `script_args` the launched program
    is `rzero iterate --config PATH`.
    """
    if isinstance(cfg, RZeroConfig):
        if script_args is None:
            raise ValueError("accelerate_command: pass script_args when cfg is a config "
                             "object (there is no path to give `rzero iterate --config`)")
        config = cfg
    else:
        config = load_config(cfg)
        if script_args is None:
            script_args = ("iterate", "--config", str(cfg))
    gpus = tuple(gpus)
    if num_machines < 1:
        raise ValueError(f"num_machines={num_machines}: must be >= 1")
    if not 0 <= machine_rank < num_machines:
        raise ValueError(f"machine_rank={machine_rank}: must be in 0..{num_machines - 1}")
    if num_machines > 1 and not main_process_ip:
        raise ValueError("main_process_ip: needed with num_machines > 1 (the address of the "
                         "machine with machine_rank 0)")
    if num_processes < 1:
        raise ValueError(f"num_processes={num_processes}: must be >= 1")
    if gpus and num_processes != len(gpus) * num_machines:
        raise ValueError(f"num_processes={num_processes}: accelerate counts processes over "
                         f"all machines; {len(gpus)} GPUs x {num_machines} machines = "
                         f"{len(gpus) * num_machines}")
    argv = [launcher, "launch", "--config_file", str(accelerate_config),
            "--num_processes", str(num_processes), "--num_machines", str(num_machines),
            "--machine_rank", str(machine_rank)]
    if main_process_ip:
        argv += ["--main_process_ip", main_process_ip]
    argv += ["--main_process_port", str(main_process_port),
             "--mixed_precision", MIXED_PRECISION[config.model.dtype],
             *entry, *script_args]
    return argv, {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(gpus)}


def needs_launcher(cfg: RZeroConfig) -> bool:
    """Whether the config's training placement needs several processes (and we are not
    already one of them)."""
    launched = "WORLD_SIZE" in os.environ or "LOCAL_RANK" in os.environ
    return not launched and (len(cfg.run.train_gpus) > 1 or cfg.run.num_machines > 1)


def iterate_launch(cfg: RZeroConfig, iterate_args: Sequence[str],
                   env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """`accelerate launch ... -m rzero iterate ARGS` from run.train_gpus / run.num_machines;
    on a multi-node run this machine's rank and node 0's address come from RZERO_MACHINE_RANK
    and RZERO_MAIN_PROCESS_IP."""
    env = dict(os.environ if env is None else env)
    r = cfg.run
    gpus = tuple(r.train_gpus) or (0,)
    rank = int(env.get("RZERO_MACHINE_RANK", "0"))
    return accelerate_command(
        cfg, num_processes=len(gpus) * r.num_machines, gpus=gpus, num_machines=r.num_machines,
        machine_rank=rank, main_process_ip=env.get("RZERO_MAIN_PROCESS_IP"),
        main_process_port=r.main_process_port, accelerate_config=r.accelerate_config,
        script_args=("iterate", *iterate_args), launcher=env.get("RZERO_LAUNCHER",
                                                                  "accelerate"))


def format_command(argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """A shell line for a README or a log: `VAR=value prog args…`, quoted where needed."""
    prefix = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    return " ".join([*prefix, *(shlex.quote(a) for a in argv)])


