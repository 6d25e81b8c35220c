"""`rzero <command>` / `python -m rzero <command>`; the Makefile calls these."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from rzero.config import ConfigError, describe_fields, load_config
from rzero.engine.models import DEFAULT_MODEL, ModelSpecError, generation_dtype


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="YAML recipe (default: built-in defaults)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE",
                   help="override one config field (repeatable; the value is YAML). A mapping "
                        "merges into the recipe's: SECTION.KEY.SUB=VALUE sets one entry, "
                        "SECTION.KEY:=VALUE replaces the mapping whole")


def cmd_info(args) -> int:
    import torch
    import transformers
    import trl

    from rzero import __version__
    from rzero.engine.models import cache_dir, resolve_model

    print(f"rzero {__version__}")
    print(f"python {sys.version.split()[0]}; torch {torch.__version__}; "
          f"transformers {transformers.__version__}; trl {trl.__version__}")
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
    from rzero.engine.generation import SamplingParams, make_generator

    cfg = load_config(args.config, args.overrides)
    preflight.check_engines(cfg)
    gen = make_generator(cfg, args.model or cfg.model.name)
    params = SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                            max_new_tokens=args.max_new_tokens, seed=args.seed)
    try:
        samples = gen.generate([args.prompt], args.n, params)[0]
    finally:
        gen.close()
    for i, text in enumerate(samples, 1):
        print(f"--- sample {i}/{args.n}")
        print(text.strip())
    return 0


def cmd_iterate(args) -> int:
    from rzero.engine import distributed
    from rzero.loop import run_iterations

    cfg = load_config(args.config, args.overrides)
    run_dir = Path(args.run_dir or cfg.run.output_dir)
    if cfg.run.task != "math":  # the code tier (rzero_code, azr), SPIN or SPAG: one process
        if cfg.run.task == "spin":
            from rzero.spin import run_spin as run_task
        elif cfg.run.task == "spag":
            from rzero.spag.run import run_spag as run_task
        else:
            from rzero.code import run_code_iterations as run_task

        run_task(cfg, run_dir, fresh=args.fresh)
        print(f"run finished: {run_dir}\nreport: {run_dir / 'report.md'}")
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
        forwarded = [*(["--config", args.config] if args.config else []),
                     *[a for o in args.overrides for a in ("--set", o)],
                     "--run-dir", str(run_dir), *(["--fresh"] if args.fresh else [])]
        argv, env = iterate_launch(cfg, forwarded)
        print(f"launching: {format_command(argv, env)}", file=sys.stderr, flush=True)
        return launch_and_wait(argv, {**os.environ, **env})
    try:
        run_iterations(cfg, run_dir, fresh=args.fresh)
    except distributed.MainProcessFailed as exc:  # the main process printed the details
        print(f"error (process {distributed.rank()}): {exc}", file=sys.stderr)
        return 1
    if distributed.is_main():
        print(f"run finished: {run_dir}\nreport: {run_dir / 'report.md'}")
    return 0


def launch_and_wait(argv: list[str], env: dict[str, str]) -> int:
    """Run the training launcher and return its exit code. It dies with this process, even
    by SIGKILL (and its ranks with it: `distributed.init`), so no rank outlives the
    command; Ctrl-C and SIGTERM reach it too and it stops its ranks itself."""
    from rzero.engine.serving import die_with_parent

    proc = subprocess.Popen(argv, env=env, preexec_fn=die_with_parent)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            return proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise KeyboardInterrupt from None


def cmd_config(args) -> int:
    if args.fields:
        for key, tp, default, help_text in describe_fields():
            print(f"{key} ({tp}, default {default!r})\n    {help_text}")
        return 0
    print(load_config(args.config, args.overrides).to_yaml(), end="")
    return 0


def cmd_plan(args) -> int:
    from rzero.engine.launch import placement_markdown
    from rzero.reports.plan import plan_markdown

    cfg = load_config(args.config, args.overrides)
    if cfg.run.task == "spin":
        from rzero.spin.plan import spin_plan_markdown

        print(spin_plan_markdown(cfg, args.config), end="")
        return 0
    if cfg.run.task == "spag":
        from rzero.spag.plan import spag_plan_markdown

        print(spag_plan_markdown(cfg, args.config), end="")
        return 0
    print(plan_markdown(cfg, args.config), end="")
    print("\n" + placement_markdown(cfg, args.config), end="")
    return 0


def cmd_audit(args) -> int:
    from rzero.audit import audit_run

    run_dir = Path(args.run_dir)
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        print(f"error: {run_dir} is not a run directory (no config.yaml)", file=sys.stderr)
        return 2
    cfg = load_config(saved, args.overrides)
    report = audit_run(run_dir, cfg.audit, model_spec=args.judge_model or cfg.model.name,
                       direction=cfg.labeling.equivalence)
    overall = report["overall"]
    if cfg.audit.judge == "executor":
        acc = "–" if overall["accuracy"] is None else f"{overall['accuracy']:.3f}"
        print(f"exact label accuracy (the executor checked every label): {acc} "
              f"[{overall['ci_low']:.3f}, {overall['ci_high']:.3f}], "
              f"{overall['n_judged']} judged")
    print(f"audit report: {run_dir / 'audit' / 'report.html'}")
    if overall["n_judged"] == 0:
        why = "; ".join(f"{reason}: {n}" for reason, n in report["unjudged_reasons"].items())
        print(f"error: nothing could be judged ({overall['n_audited']} items"
              f"{': ' + why if why else ''}); the report counts none of them", file=sys.stderr)
        return 1
    return 0


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
    import logging

    from rzero import preflight
    from rzero.engine.generation import HFGenerator, make_generator
    from rzero.evaluation import (
        BenchmarkError,
        evaluate,
        load_benchmarks,
        results_markdown,
        write_results,
    )

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for flag, value in (("--limit", args.limit), ("--max-new-tokens", args.max_new_tokens),
                        ("--num-samples", args.num_samples), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            print(f"rzero eval: {flag}={value}: must be at least 1", file=sys.stderr)
            return 2
    for flag, value, allowed in (("--dtype", args.dtype, ("float32", "bfloat16", "float16")),
                                 ("--device", args.device, ("auto", "cpu", "cuda"))):
        if value is not None and value not in allowed:
            print(f"rzero eval: {flag}={value}: expected one of {', '.join(allowed)}", file=sys.stderr)
            return 2
    cfg = load_config(args.config, args.overrides)
    e = cfg.eval

    def pick(flag, default):
        return default if flag is None else flag

    specs = ([s for s in (part.strip() for part in args.benchmarks.split(",")) if s]
             if args.benchmarks is not None else list(e.benchmarks))
    model = pick(args.model, cfg.model.name)
    limit = pick(args.limit, e.limit)
    batch = pick(args.batch_size, cfg.generation.batch_size)
    try:
        # benchmarks first: a missing file or an offline hub fails before the model loads
        data = load_benchmarks(specs, limit=limit)
        if cfg.generation.backend == "hf":
            generator = HFGenerator.from_spec(model, batch_size=batch,
                                              dtype=pick(args.dtype, generation_dtype(
                                                  cfg.model.generation_dtype, cfg.model.device)),
                                              device=pick(args.device, cfg.model.device))
        else:  # the recipe's engine (vLLM, servers), as its run's evaluation phase uses it
            preflight.check_engines(cfg)
            generator = make_generator(cfg, model)
    except (BenchmarkError, ModelSpecError) as exc:
        print(f"rzero eval: {exc}", file=sys.stderr)
        return 2
    try:
            results = evaluate(generator, data, limit=limit,
                           max_new_tokens=pick(args.max_new_tokens, e.max_new_tokens),
                           num_samples=pick(args.num_samples, e.num_samples),
                           temperature=args.temperature, seed=pick(args.seed, cfg.run.seed),
                           batch=batch, prompt_path=pick(args.prompt, cfg.solver.prompt_file),
                           direction=cfg.labeling.equivalence)
    finally:
        generator.close()
    results = {"model": model, **results}
    json_path, _ = write_results(results, args.output)
    print(results_markdown(results), end="")
    print(f"wrote {json_path} and eval.md")
    return 0


def cmd_ablate(args) -> int:
    from rzero.ablation import ablate, parse_variants
    from rzero.reports.comparison import CompareError, printed_summary
    from rzero.rundir import RunDirConflict

    try:
        cfg = load_config(args.config, args.overrides)
        if cfg.run.task not in ("math", "spin", "spag"):
            raise ConfigError(f"run.task={cfg.run.task!r}: rzero ablate runs the math loop's, "
                              "SPIN's and SPAG's variants; run a code recipe with rzero iterate")
        variants = parse_variants(args.variants, cfg.run.task)
        md = ablate(cfg, variants, args.out, fresh=args.fresh)
    except (ConfigError, RunDirConflict, CompareError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(printed_summary(md), end="")
    return 0


def cmd_compare(args) -> int:
    from rzero.io import DamagedFileError
    from rzero.reports.comparison import CompareError, compare, printed_summary

    try:
        paths = compare(args.run_dirs, args.out)
    except (CompareError, DamagedFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(printed_summary(paths["md"]), end="")
    return 0


def _add_serve_solver_args(p: argparse.ArgumentParser) -> None:
    from rzero.engine.replicas import ENGINES

    p.add_argument("checkpoint", help="model spec to serve: a checkpoint directory (as the run "
                                      "names it), the embedded model, or a hub id (vllm)")
    p.add_argument("--replicas", type=int, default=1, help="server replicas (default 1)")
    p.add_argument("--gpus", default="", help="GPUs for the replicas, e.g. 4,5,6,7 or 4-7; "
                                              "replicas x tensor-parallel-size of them")
    p.add_argument("--urls-file", default="solver_urls.txt",
                   help="file the replicas' URLs are written to, one a line; point "
                        "generation.solver_urls_file at it (default solver_urls.txt)")
    p.add_argument("--port-base", type=int, default=8100,
                   help="replica i listens on port-base + i (default 8100)")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs per replica")
    p.add_argument("--engine", choices=ENGINES, default="vllm",
                   help="vllm (GPU) or transformers (`transformers serve`, CPU testing)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address the servers bind (0.0.0.0 to serve other nodes)")
    p.add_argument("--url-host", default=None,
                   help="host written into the URLs (default: --host, or this machine's "
                        "name when --host is 0.0.0.0)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None,
                   help="vllm: share of each GPU for the engine (vLLM's default: 0.9)")
    p.add_argument("--log-dir", default=None,
                   help="replica logs (default: solver_logs/ beside the URLs file)")
    p.add_argument("--startup-timeout", type=float, default=900.0, help="seconds (default 900)")


def cmd_serve_solver(args) -> int:
    import socket

    from rzero.engine.launch import parse_gpus
    from rzero.engine.models import resolve_model
    from rzero.engine.replicas import SolverReplicas
    from rzero.engine.serving import ServerError

    checkpoint = args.checkpoint
    if args.engine == "transformers" or checkpoint.startswith("embedded:"):
        checkpoint = resolve_model(checkpoint)  # a directory `transformers serve` can load
    url_host = args.url_host or (socket.gethostname() if args.host == "0.0.0.0" else None)
    urls_file = Path(args.urls_file)
    log_dir = Path(args.log_dir) if args.log_dir else urls_file.parent / "solver_logs"
    try:
        gpus = parse_gpus(args.gpus)
        replicas = SolverReplicas(
            checkpoint, replicas=args.replicas, gpus=gpus,
            tensor_parallel_size=args.tensor_parallel_size, port_base=args.port_base,
            host=args.host, url_host=url_host, engine=args.engine, urls_file=urls_file,
            log_dir=log_dir, gpu_memory_utilization=args.gpu_memory_utilization,
            startup_timeout=args.startup_timeout)
    except (ValueError, ServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for spec, log in zip(replicas.specs, replicas.log_paths, strict=True):
        where = f"GPU {spec.cuda_visible_devices}" if spec.gpus else "CPU"
        print(f"replica {spec.index} ({where}): {spec.url}  log {log}", flush=True)

    # `rzero` turns SIGTERM into KeyboardInterrupt (cli.main), so it stops the replicas the
    # same way Ctrl-C does
    try:
        with replicas:
            print(f"{len(replicas.specs)} replicas healthy, serving model {replicas.model!r}; "
                  f"URLs in {urls_file}\nuse: --set generation.solver_urls_file={urls_file}\n"
                  "Ctrl-C stops them", flush=True)
            replicas.monitor()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped the solver replicas", file=sys.stderr)
        return 0
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rzero", description="R-Zero: challenger/solver self-play for math reasoning.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="versions, device and the embedded model path")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("generate", help="sample N completions for one prompt")
    _add_config_args(p)
    p.add_argument("--model", default=None, help=f"model spec (default: model.name, "
                                                 f"{DEFAULT_MODEL} without a config)")
    p.add_argument("--prompt", required=True)
    p.add_argument("-n", type=int, default=1)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("iterate", help="run R-Zero's alternating iterations (resumable)")
    _add_config_args(p)
    p.add_argument("--run-dir", default=None, help="run directory (default: run.output_dir)")
    p.add_argument("--fresh", action="store_true", help="delete RUN_DIR and start over")
    p.set_defaults(func=cmd_iterate)

    p = sub.add_parser("config", help="print the resolved config, or every field's help")
    _add_config_args(p)
    p.add_argument("--fields", action="store_true", help="list every field with its help")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("plan", help="what one iteration samples, generates and updates, per "
                                    "phase (beside the official code's numbers where the "
                                    "recipe claims its schedule)")
    _add_config_args(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("audit", help="label-accuracy audit of a run by an external judge")
    p.add_argument("run_dir")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="audit.KEY=VALUE", help="override an audit field (repeatable)")
    p.add_argument("--judge-model", default=None,
                   help="model spec served locally as the judge when audit.base_url is unset "
                        "(default: the run's base model)")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("best", help="print the checkpoint of a run's best solver (highest "
                                    "held-out evaluation average; iteration 0 is the base)")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_best)

    from rzero.ablation import (
        DEFAULT_OUT,
        DEFAULT_SPAG_VARIANTS,
        DEFAULT_SPIN_VARIANTS,
        DEFAULT_VARIANTS,
        SPAG_VARIANTS,
        SPIN_VARIANTS,
        VARIANTS,
    )

    p = sub.add_parser("ablate", help="run ablation variants (separate vs shared weights, ...) "
                                      "as resumable runs and compare them")
    p.add_argument("--config", default=None,
                   help="YAML recipe every variant starts from (default: built-in defaults)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE",
                   help="override one field of the recipe, for every variant (repeatable)")
    p.add_argument("--variants", default=None,
                   help=f"comma-separated, from {', '.join(VARIANTS)} (R-Zero; default "
                        f"{','.join(DEFAULT_VARIANTS)}), {', '.join(SPIN_VARIANTS)} (a SPIN "
                        f"recipe; default {','.join(DEFAULT_SPIN_VARIANTS)}), "
                        f"{', '.join(SPAG_VARIANTS)} (a SPAG recipe; default "
                        f"{','.join(DEFAULT_SPAG_VARIANTS)}), or 'all'")
    p.add_argument("--out", default=DEFAULT_OUT,
                   help=f"directory holding one run dir per variant and the comparison "
                        f"(default {DEFAULT_OUT})")
    p.add_argument("--fresh", action="store_true",
                   help="delete each variant's run dir and start it over")
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("compare", help="one table over runs: eval average and audited label "
                                       "accuracy per iteration")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="run directories; each one's directory name is its variant name")
    p.add_argument("--out", default=None,
                   help="where comparison.{md,html,json,png} go (default: the run "
                        "directories' common parent)")
    p.set_defaults(func=cmd_compare)

    from rzero.evaluation import HUB_BENCHMARKS

    p = sub.add_parser("eval", help="score a model on benchmarks (math-verify on the final "
                                    "\\boxed{}); defaults from --config")
    _add_config_args(p)
    p.add_argument("--model", default=None,
                   help="model spec: 'embedded:smollm2-135m-instruct', a checkpoint directory "
                        "or a hub id (default: model.name)")
    p.add_argument("--benchmarks", default=None,
                   help=f"synthetic[:SEED], easy[:SEED], {', '.join(HUB_BENCHMARKS)}, "
                        "path.jsonl or name=path.jsonl, comma-separated (default: eval.benchmarks)")
    p.add_argument("--output", required=True, help="directory for eval.json and eval.md")
    p.add_argument("--limit", type=int, default=None,
                   help="score only the first N items of each benchmark (default: eval.limit)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="generation budget per answer (default: eval.max_new_tokens)")
    p.add_argument("--num-samples", type=int, default=None,
                   help="1: greedy pass@1; k > 1: sample k answers and report mean@k and "
                        "maj@k (default: eval.num_samples)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="sampling temperature when --num-samples > 1 (default 1.0)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: run.seed)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="sequences per model.generate call (default: generation.batch_size)")
    p.add_argument("--prompt", default=None,
                   help="solver prompt template file (default: solver.prompt_file, else the "
                        "built-in one)")
    p.add_argument("--dtype", default=None, help="hf backend: the dtype it computes in "
                                                 "(default: model.generation_dtype)")
    p.add_argument("--device", default=None, help="cpu, cuda or auto (default: model.device)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("serve-solver", help="serve the frozen solver as OpenAI-compatible "
                                            "replicas (vllm serve; --engine transformers on CPU)")
    _add_serve_solver_args(p)
    p.set_defaults(func=cmd_serve_solver)
    return parser


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # SIGTERM (kill, a scheduler's preemption) unwinds like Ctrl-C, so model servers and
    # replicas started by this run are stopped on the way out
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
    from rzero.io import DamagedFileError
    from rzero.rundir import RunDirConflict

    try:
        return args.func(args)
    except (ConfigError, ModelSpecError, RunDirConflict, DamagedFileError) as exc:
        # a user error: one line naming the file or field and the fix, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
