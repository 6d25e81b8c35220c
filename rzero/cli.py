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
from rzero.models import DEFAULT_MODEL, ModelSpecError


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="YAML recipe (default: built-in defaults)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE", help="override one config field (repeatable)")


def cmd_info(args) -> int:
    import torch
    import transformers
    import trl

    from rzero import __version__
    from rzero.models import cache_dir, resolve_model

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
    from rzero.generation import HFGenerator, SamplingParams

    gen = HFGenerator.from_spec(args.model, batch_size=max(1, args.n))
    params = SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                            max_new_tokens=args.max_new_tokens, seed=args.seed)
    for i, text in enumerate(gen.generate([args.prompt], args.n, params)[0], 1):
        print(f"--- sample {i}/{args.n}")
        print(text.strip())
    return 0


def cmd_iterate(args) -> int:
    from rzero import distributed
    from rzero.loop import RunDirConflict, run_iterations

    cfg = load_config(args.config, args.overrides)
    run_dir = Path(args.run_dir or cfg.run.output_dir)
    from rzero.launch import format_command, iterate_launch, needs_launcher

    if needs_launcher(cfg):
        # several training GPUs: run this same command once per GPU under accelerate
        forwarded = [*(["--config", args.config] if args.config else []),
                     *[a for o in args.overrides for a in ("--set", o)],
                     "--run-dir", str(run_dir), *(["--fresh"] if args.fresh else [])]
        argv, env = iterate_launch(cfg, forwarded)
        print(f"launching: {format_command(argv, env)}", file=sys.stderr, flush=True)
        return subprocess.call(argv, env={**os.environ, **env})
    try:
        run_iterations(cfg, run_dir, fresh=args.fresh)
    except RunDirConflict as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except distributed.MainProcessFailed as exc:  # the main process printed the details
        print(f"error (process {distributed.rank()}): {exc}", file=sys.stderr)
        return 1
    if distributed.is_main():
        print(f"run finished: {run_dir}\nreport: {run_dir / 'report.md'}")
    return 0


def cmd_config(args) -> int:
    if args.fields:
        for key, tp, default, help_text in describe_fields():
            print(f"{key} ({tp}, default {default!r})\n    {help_text}")
        return 0
    print(load_config(args.config, args.overrides).to_yaml(), end="")
    return 0


def cmd_audit(args) -> int:
    from rzero.labeling.audit import audit_run

    run_dir = Path(args.run_dir)
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        print(f"error: {run_dir} is not a run directory (no config.yaml)", file=sys.stderr)
        return 2
    cfg = load_config(saved, args.overrides)
    audit_run(run_dir, cfg.audit, model_spec=args.judge_model or cfg.model.name)
    print(f"audit report: {run_dir / 'audit' / 'report.html'}")
    return 0


def cmd_eval(args) -> int:
    from rzero import evaluation

    return evaluation.run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rzero", description="R-Zero: challenger/solver self-play for math reasoning.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="versions, device and the embedded model path")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("generate", help="sample N completions for one prompt")
    p.add_argument("--model", default=DEFAULT_MODEL)
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

    p = sub.add_parser("audit", help="label-accuracy audit of a run by an external judge")
    p.add_argument("run_dir")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="audit.KEY=VALUE", help="override an audit field (repeatable)")
    p.add_argument("--judge-model", default=None,
                   help="model spec served locally as the judge when audit.base_url is unset "
                        "(default: the run's base model)")
    p.set_defaults(func=cmd_audit)

    from rzero import ablation

    p = sub.add_parser("ablate", help="run ablation variants (separate vs shared weights, ...) "
                                      "as resumable runs and compare them")
    ablation.add_arguments(p)
    p.set_defaults(func=ablation.run)

    p = sub.add_parser("compare", help="one table over runs: eval average and audited label "
                                       "accuracy per iteration")
    ablation.add_compare_arguments(p)
    p.set_defaults(func=ablation.run_compare)

    from rzero import evaluation

    p = sub.add_parser("eval", help="score a model on benchmarks")
    evaluation.add_arguments(p)
    p.set_defaults(func=cmd_eval)

    from rzero import launch

    p = sub.add_parser("serve-solver", help="serve the frozen solver as OpenAI-compatible "
                                            "replicas (vllm serve; --engine transformers on CPU)")
    launch.add_serve_solver_arguments(p)
    p.set_defaults(func=launch.cmd_serve_solver)
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
    try:
        return args.func(args)
    except (ConfigError, ModelSpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
