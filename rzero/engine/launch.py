"""Scale-out (SPEC §6): training under accelerate; the frozen solver's server is in
`rzero.generation.solver_server`.

The reference hardware is one 8-GPU node split in two: GPUs 0-3 train the challenger with
TRL + accelerate + DeepSpeed ZeRO while GPUs 4-7 serve the frozen solver as one `vllm serve
--data-parallel-size 4`. The challenger reward reaches the solver through the
OpenAI-compatible protocol: `rzero serve-solver` (or `SolverServer` inside a program) writes
the server's URL to the file that `generation.solver_urls_file` names. Beyond one node the
same two pieces scale together: `accelerate launch --num_machines N` trains on every node's
training GPUs, and every node serves the frozen solver on its own solver GPUs, one URL per
node, the reward's requests spread over all of them
(`rzero.generation.solver_server.frozen_solver`).

What decides *what* runs is a pure function, so the exact commands are tested and can be
printed: `accelerate_command` (the training launch) here, `server_plan` (GPUs, port, URL,
argv) in `rzero.generation.solver_server`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from rzero.config import RZeroConfig, load_config
from rzero.engine.serving import python_module

DEFAULT_ACCELERATE_CONFIG = "configs/accelerate/deepspeed_zero2.yaml"
ACCELERATE_LAUNCH = "accelerate.commands.launch"  # what the `accelerate launch` script runs
MIXED_PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "no"}
# how long torch elastic waits, after passing SIGTERM on to the ranks, before it SIGKILLs
# them (its own default is 30 s): a rank finishes its update and writes a step checkpoint
# in that time (`rzero.training.steps`); `rzero iterate` sets it unless the environment does
SHUTDOWN_SECONDS = 180


# ---------------------------------------------------------------- GPU lists
def cuda_visible_devices(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in gpus)


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
            raise ValueError(
                f"--gpus {text!r}: expected GPU indices like '4,5,6,7' or '4-7'"
            ) from None
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus {text!r}: a GPU is listed twice")
    return tuple(gpus)


# ---------------------------------------------------------------- training launch


def accelerate_command(
    cfg: str | Path | RZeroConfig,
    *,
    num_processes: int,
    gpus: Sequence[int],
    num_machines: int = 1,
    machine_rank: int = 0,
    main_process_ip: str | None = None,
    main_process_port: int = 29500,
    accelerate_config: str | Path = DEFAULT_ACCELERATE_CONFIG,
    script_args: Sequence[str] | None = None,
    entry: Sequence[str] = ("-m", "rzero"),
    launcher: Sequence[str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The `accelerate launch` argv and the environment additions for one training launch.

    `num_processes` is accelerate's: the total over all machines, one per training GPU, so
    it must equal len(gpus) x num_machines (`gpus` are this node's training GPUs, given to
    the processes through CUDA_VISIBLE_DEVICES; () trains on CPU). Mixed precision follows
    model.dtype, the same switch that sets GRPOConfig.bf16, so accelerate, the Trainer and
    DeepSpeed's "auto" agree. With a config path and no `script_args` the launched program
    is `rzero iterate --config PATH`. The launcher is `python -m accelerate.commands.launch`
    with this interpreter (`launcher` replaces that argv prefix), never a bare `accelerate`
    looked up on PATH: `make` runs the venv's rzero without activating the venv.
    """
    if isinstance(cfg, RZeroConfig):
        if script_args is None:
            raise ValueError(
                "accelerate_command: pass script_args when cfg is a config "
                "object (there is no path to give `rzero iterate --config`)"
            )
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
        raise ValueError(
            "main_process_ip: needed with num_machines > 1 (the address of the "
            "machine with machine_rank 0)"
        )
    if num_processes < 1:
        raise ValueError(f"num_processes={num_processes}: must be >= 1")
    if gpus and num_processes != len(gpus) * num_machines:
        raise ValueError(
            f"num_processes={num_processes}: accelerate counts processes over "
            f"all machines; {len(gpus)} GPUs x {num_machines} machines = "
            f"{len(gpus) * num_machines}"
        )
    argv = [
        *(launcher or python_module(ACCELERATE_LAUNCH)),
        "--config_file",
        str(accelerate_config),
        "--num_processes",
        str(num_processes),
        "--num_machines",
        str(num_machines),
        "--machine_rank",
        str(machine_rank),
    ]
    if main_process_ip:
        argv += ["--main_process_ip", main_process_ip]
    argv += [
        "--main_process_port",
        str(main_process_port),
        "--mixed_precision",
        MIXED_PRECISION[config.model.dtype],
        *entry,
        *script_args,
    ]
    return argv, {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(gpus)}


def needs_launcher(cfg: RZeroConfig) -> bool:
    """Whether the config's training placement needs several processes (and we are not
    already one of them)."""
    launched = "WORLD_SIZE" in os.environ or "LOCAL_RANK" in os.environ
    return not launched and cfg.run.training_processes > 1


def rendezvous(env: dict[str, str], cfg: RZeroConfig) -> tuple[int, str | None, int]:
    """(this machine's rank, node 0's address, the rendezvous port) of a training launch,
    from the variables a cluster already sets: RZERO_MACHINE_RANK / RZERO_MAIN_PROCESS_IP
    first, then torchrun's NODE_RANK / MASTER_ADDR / MASTER_PORT, then SLURM's SLURM_NODEID
    (SLURM does not export the first node's address: the sbatch example sets MASTER_ADDR);
    the port defaults to run.main_process_port."""

    def first(*names: str) -> str | None:
        return next((env[n] for n in names if env.get(n)), None)

    rank_text = first("RZERO_MACHINE_RANK", "NODE_RANK", "SLURM_NODEID") or "0"
    port_text = first("MASTER_PORT") or str(cfg.run.main_process_port)
    try:
        rank, port = int(rank_text), int(port_text)
    except ValueError:
        raise ValueError(
            f"machine rank {rank_text!r} / port {port_text!r}: expected whole "
            "numbers (NODE_RANK, SLURM_NODEID, MASTER_PORT)"
        ) from None
    return rank, first("RZERO_MAIN_PROCESS_IP", "MASTER_ADDR"), port


def iterate_launch(
    cfg: RZeroConfig, iterate_args: Sequence[str], env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """`python -m accelerate.commands.launch ... -m rzero iterate ARGS` from run.train_gpus
    (or run.cpu_processes on a CPU-only machine) and run.num_machines; on a multi-node run
    this machine's rank and node 0's address come from the environment (`rendezvous`).
    RZERO_LAUNCHER, when set, replaces the launcher's argv prefix (a shell-quoted line)."""
    env = dict(os.environ if env is None else env)
    r = cfg.run
    gpus = tuple(r.train_gpus)
    rank, main_ip, port = rendezvous(env, cfg)
    launcher = shlex.split(env["RZERO_LAUNCHER"]) if env.get("RZERO_LAUNCHER") else None
    return accelerate_command(
        cfg,
        num_processes=r.training_processes,
        gpus=gpus,
        num_machines=r.num_machines,
        machine_rank=rank,
        main_process_ip=main_ip,
        main_process_port=port,
        accelerate_config=r.accelerate_config,
        script_args=("iterate", *iterate_args),
        launcher=launcher,
    )


def format_command(argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """A shell line for a README or a log: `VAR=value prog args…`, quoted where needed."""
    prefix = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    return " ".join([*prefix, *(shlex.quote(a) for a in argv)])


def placement_markdown(
    cfg: RZeroConfig, source: str | None = None, env: dict[str, str] | None = None
) -> str:
    """Where a recipe's processes run on each machine, and the exact launch line (what
    `rzero plan` prints after the schedule)."""
    r, g = cfg.run, cfg.generation
    if r.train_gpus:
        train = f"GPUs {cuda_visible_devices(r.train_gpus)}, one process each"
    elif r.cpu_processes > 1:
        train = f"{r.cpu_processes} CPU processes (gloo)"
    else:
        train = f"this process, on model.device ({cfg.model.device})"
    if g.solver_replicas:
        engine = "vllm" if g.backend == "vllm" or g.solver_gpus else "transformers serve"
        where = (
            f"GPUs {cuda_visible_devices(g.solver_gpus)}, tensor parallel {g.tensor_parallel_size}"
            if g.solver_gpus
            else "CPU"
        )
        what = (
            f"one `vllm serve --data-parallel-size {g.solver_replicas}` ({g.solver_replicas} "
            "engines behind one endpoint)"
            if engine == "vllm" and g.solver_replicas > 1
            else f"one {engine} server"
        )
        if r.num_machines > 1:
            solver = (
                f"{what} on {where} of every machine, started by its first process for "
                "each challenger phase on a free port of all interfaces, reached at the "
                "machine's host name (RZERO_NODE_ADDRESS overrides); one URL per machine "
                "in iter_KK/solver_urls.txt"
            )
        else:
            solver = (
                f"{what} on {where}, started by the main process for each challenger "
                "phase on a free port of loopback; its URL in iter_KK/solver_urls.txt"
            )
    elif g.solver_urls_file:
        solver = f"the servers listed in {g.solver_urls_file}"
    else:
        solver = f"in the main process ({g.backend} backend)"
    rows = [
        (
            "machines",
            f"{r.num_machines}"
            + (", the run directory on a shared filesystem" if r.num_machines > 1 else ""),
        ),
        ("training (challenger and solver GRPO)", train),
        ("frozen solver of the challenger phase", solver),
        ("pool, labelling, evaluation", f"the main process, {g.backend} backend"),
        ("rendezvous", f"port {r.main_process_port} on machine 0 (MASTER_PORT overrides)"),
    ]
    lines = [
        "Placement on each machine:",
        "",
        "| what | where |",
        "|---|---|",
        *[f"| {what} | {where} |" for what, where in rows],
        "",
    ]
    if r.training_processes > 1:
        args = ["--config", source] if source else []
        node0 = {"MASTER_ADDR": "<node 0's address>"} if r.num_machines > 1 else {}
        argv, launch_env = iterate_launch(cfg, args, env={**node0, **(env or {})})
        lines += [
            "Launch (what `rzero iterate` runs"
            + (" on machine 0; set NODE_RANK on the others" if r.num_machines > 1 else "")
            + "):",
            "",
            "```",
            format_command(argv, launch_env),
            "```",
            "",
        ]
    else:
        lines += ["Launch: one process, no launcher (`rzero iterate` trains in itself).", ""]
    return "\n".join(lines)
