"""`train_grpo` wraps TRL's GRPOTrainer (`rzero.training.trainer`) for either role.

Rewards arrive as TRL reward functions `(prompts, completions, **columns) -> list[float]`,
so this module knows nothing about what is being rewarded.

One GRPO step samples a rollout of `prompts_per_step` prompts x `group_size` completions
once and scores it with one reward call, then makes `prompts_per_step / prompts_per_update`
optimiser updates over mini-batches of it (`rzero.config.schedule.role_schedule`), as the official
R-Zero code does (32 challenger and 4 solver updates per 512-prompt rollout). In TRL's terms
the rollout is the generation batch: `steps_per_generation` micro-batches per process, of
which every `gradient_accumulation_steps` make one update, and `max_steps` counts updates.
Because the reward sees the whole generation batch at once (`GRPOTrainer._calculate_rewards`
runs on the output of `_generate_and_score_completions`, once per `steps_per_generation`
micro-steps), the challenger's repetition penalty clusters the whole rollout (B = prompts x
G). With one update per step (`prompts_per_update` 0) the PPO ratio is 1 and clipping never
acts; with several, the later updates are off-policy and the clip range matters.

Every TRL option that changes the algorithm is set here (`ALGORITHM_OPTIONS`), not left to
TRL's default; a role's `trl:` mapping may override these, never the ones computed from its
fields (`managed_options`, checked by `check_trl_options` before a run starts).

On CPU, bf16 training means float32 master weights with bf16 compute (accelerate's
autocast; `model.train_compute`), and TRL's rollouts go through `rzero.generation.decoding` on a copy of
the weights in `model.generation_dtype` (see `rollouts_through_decode`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rzero.config import ConfigError, GenerationConfig, GRPOSection, ModelConfig
from rzero.config.schedule import role_schedule
from rzero.engine import distributed
from rzero.engine.lora import has_adapter, lora_config, save_lora
from rzero.engine.models import generation_dtype, quiet_save, train_compute
from rzero.training.steps import (
    catch_sigterm,
    check_preempted,
    resume_point,
    stateful,
    step_checkpoints,
)
from rzero.training.trainer import trainer_class

# rzero's value for each TRL option that changes what is optimised or sampled, so a TRL
# upgrade that changes a default cannot change a run. A recipe's `trl:` mapping overrides
# them (the GPU recipes: loss_type grpo, weight_decay 0.01, top_p 0.99).
ALGORITHM_OPTIONS: dict[str, Any] = dict(
    # loss aggregation: "dapo" sums token losses over the generation batch and divides by its
    # token count, so micro-batching does not change the update; "grpo" averages each
    # sequence over its tokens and then the sequences (the paper's objective, the official
    # code's per-sequence average)
    loss_type="dapo",
    scale_rewards="group",  # advantage (r - mean) / std within each prompt's G completions
    importance_sampling_level="token",  # PPO ratio per token, as in GRPO
    use_bias_correction_kl=False,  # the KL term is not weighted by the PPO ratio (official code)
    # TRL's default (True) reweights every token by the vLLM-vs-trainer probability ratio;
    # the official code has no such correction: off unless a recipe asks for it
    vllm_importance_sampling_correction=False,
    delta=None,  # no two-sided clip of the ratio
    off_policy_mask_threshold=None,
    top_entropy_quantile=1.0,  # every token carries loss
    entropy_coef=0.0,
    weight_decay=0.0,  # AdamW decay (official code: 0.01)
    max_grad_norm=1.0,  # gradient clipping (official code: 1.0)
    lr_scheduler_type="constant",
    warmup_steps=0,
    # rollout sampling besides the role's temperature (official code: top_p 0.99)
    top_p=1.0,
    top_k=0,
    min_p=None,
    repetition_penalty=1.0,
    mask_truncated_completions=False,
)


@dataclass
class TrainStats:
    seconds_total: float = 0.0
    seconds_optimizer: float = 0.0  # forward/backward/step, not rollouts or rewards
    steps: int = 0
    # TRL's log of every optimiser update, its scalars as TRL names them (reward, reward_std,
    # frac_reward_zero_std, kl, grad_norm, clip_ratio/..., completions/mean_length, ...),
    # with the update's number as `update`
    log: list[dict[str, float]] = field(default_factory=list)


def _timed_callback(stats: TrainStats):
    from transformers import TrainerCallback

    class _Timer(TrainerCallback):
        """Times from the first micro-batch's loss to the optimiser step."""

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            stats.seconds_optimizer += time.perf_counter() - self._t0
            stats.steps += 1

    return _Timer()


@contextlib.contextmanager
def score_completions_only():
    """TRL's fused LM head (`trl.trainer.utils.add_fused_lm_head`) projects only the positions
    that carry a label (the completion tokens) where it runs its Triton kernel, and every
    position elsewhere, to keep tile shapes fixed for compilers. On a CPU nothing compiles,
    and every prompt and padding position then costs a [positions, vocabulary] projection in
    the forward and two float32 GEMMs in the backward: the challenger's prompt is about 200
    tokens against at most 128 of completion. Inside this context the head scores the labelled
    positions only on CPU as well. The log-probabilities are the same numbers (each position's
    projection is its own row); only the gradient's float32 summation order changes
    (`tests/training/test_grpo_fused_head.py`; `bench/fused_head.py` times it). A TRL without the
    switch leaves the head as it is."""
    import trl.trainer.utils as trl_utils

    original = getattr(trl_utils, "_use_triton", None)
    if original is None:
        yield
        return
    trl_utils._use_triton = lambda device: device.type == "cpu" or original(device)
    try:
        yield
    finally:
        trl_utils._use_triton = original


def save_trained(trainer, tokenizer, target: Path) -> None:
    """Every training process takes part (ZeRO-3 gathers its parameter shards here); the main
    process writes a temp dir and renames it, so a checkpoint dir is complete or absent. A
    LoRA phase's checkpoint is the merged model with its adapter beside it
    (`lora.save_lora`)."""
    tmp = target.with_name(f".{target.name}.tmp")
    if distributed.is_main():
        shutil.rmtree(tmp, ignore_errors=True)
    distributed.barrier()
    if has_adapter(trainer.model):
        if distributed.is_main():
            save_lora(trainer, tokenizer, tmp)
    else:
        with quiet_save():
            trainer.save_model(str(tmp))
    if distributed.is_main():
        tokenizer.save_pretrained(tmp)
        (tmp / "training_args.bin").unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    distributed.barrier()


def trl_option_names() -> tuple[frozenset[str], str]:
    """The option names of the installed TRL's GRPOConfig, and TRL's version."""
    import dataclasses

    import trl

    return frozenset(f.name for f in dataclasses.fields(trl.GRPOConfig)), trl.__version__


def grpo_config(
    role: GRPOSection,
    output_dir: str | Path,
    *,
    seed: int,
    model_cfg: ModelConfig | None = None,
    generation_cfg: GenerationConfig | None = None,
    deepspeed: str | None = None,
    report_to: Sequence[str] = (),
    save_steps: int = 0,
):
    """TRL's GRPOConfig for one role's phase: the role's schedule and fields, the run's
    precision, rollout backend and trackers (`run.report_to`), `ALGORITHM_OPTIONS`, then
    the role's `trl:` options (which may override `ALGORITHM_OPTIONS` but not the rest)."""
    from trl import GRPOConfig

    options = {
        **managed_options(
            role,
            output_dir,
            seed=seed,
            model_cfg=model_cfg,
            generation_cfg=generation_cfg,
            deepspeed=deepspeed,
            report_to=report_to,
            save_steps=save_steps,
        ),
        "dataloader_num_workers": 0,
        "shuffle_dataset": True,
        "log_completions": False,
        **ALGORITHM_OPTIONS,
    }
    # a recipe's own TRL options win over ALGORITHM_OPTIONS (top_p, loss_type, ...); the
    # preflight refuses the ones `managed_options` sets (`check_trl_options`)
    return GRPOConfig(**{**options, **role.trl})


def managed_options(
    role: GRPOSection,
    output_dir: str | Path,
    *,
    seed: int = 0,
    model_cfg: ModelConfig | None = None,
    generation_cfg: GenerationConfig | None = None,
    deepspeed: str | None = None,
    report_to: Sequence[str] = (),
    save_steps: int = 0,
) -> dict[str, Any]:
    """The GRPOConfig options rzero sets from the role's fields and the run's settings; a
    recipe's `trl:` section may not set these (`check_trl_options`). `save_steps`: a step
    checkpoint every that many updates (`rzero.training.steps`; 0: none but the one SIGTERM
    asks for)."""
    model_cfg = model_cfg or ModelConfig()
    gen = generation_cfg or GenerationConfig()
    sch = role_schedule(role, distributed.world_size())
    return dict(
        output_dir=str(output_dir),
        # one rollout of prompts_per_step x G per GRPO step (TRL's generation batch), split
        # into updates_per_step optimiser updates of `accumulation` micro-batches each
        max_steps=sch.updates,
        per_device_train_batch_size=sch.micro_batch,
        gradient_accumulation_steps=sch.accumulation,
        steps_per_generation=sch.steps_per_generation,
        num_iterations=1,
        num_generations=role.group_size,
        learning_rate=role.learning_rate,
        beta=role.beta,
        epsilon=role.epsilon,
        epsilon_high=role.epsilon_high,
        max_completion_length=role.max_completion_length,
        temperature=role.temperature,
        seed=seed,
        data_seed=seed,
        bf16=train_compute(model_cfg.train_compute, model_cfg.dtype, model_cfg.device)
        == "bfloat16",
        fp16=False,
        use_cpu=not torch.cuda.is_available(),
        activation_checkpointing=model_cfg.gradient_checkpointing,
        use_vllm=gen.trl_use_vllm,
        vllm_mode=gen.trl_vllm_mode,
        vllm_gpu_memory_utilization=gen.gpu_memory_utilization,
        deepspeed=deepspeed,
        logging_steps=1,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        save_only_model=False,  # the optimiser, scheduler and RNG too: a resumable checkpoint
        save_total_limit=None,  # `steps.save_state` removes the earlier ones, once complete
        report_to=list(report_to),
        disable_tqdm=True,
    )


def check_trl_options(role: GRPOSection) -> None:
    """ConfigError for a `trl:` option of `role` that TRL's GRPOConfig does not have, or that
    rzero sets itself from a field of the role (`managed_options`; gradient_checkpointing is
    model.gradient_checkpointing, passed as activation_checkpointing)."""
    known, version = trl_option_names()
    managed = set(managed_options(role, "unused")) | {"gradient_checkpointing"}
    section = role.section
    for key in role.trl:
        if key in managed:
            raise ConfigError(
                f"{section}.trl.{key}: set by rzero itself; use the "
                f"'{section}' field of that meaning instead (rzero config --fields)"
            )
        if key not in known:
            raise ConfigError(
                f"{section}.trl.{key}: not an option of TRL's GRPOConfig "
                f"(trl {version}); check the spelling"
            )


def train_grpo(
    model,
    tokenizer,
    rows: list[dict[str, Any]],
    reward_funcs: list[Callable[..., list[float | None]]],
    role: GRPOSection,
    output_dir: str | Path,
    *,
    seed: int = 0,
    model_cfg: ModelConfig | None = None,
    generation_cfg: GenerationConfig | None = None,
    deepspeed: str | None = None,
    report_to: Sequence[str] = (),
    log: Callable[[dict[str, float]], None] | None = None,
    desc: str = "grpo",
    save_to: str | Path | None = None,
    callbacks: Sequence[Any] = (),
    cpu_logps: bool = True,
    save_steps: int = 0,
) -> TrainStats:
    """Train `model` in place with GRPO on `rows` (each has a 'prompt' chat plus columns that
    the reward functions receive as keyword lists), with the settings of one role's section
    (`grpo_config`). Returns timings and TRL's log of every update (`TrainStats.log`; `log`
    also receives each row as it comes). With `save_to`, the trained weights are saved there
    as a Hugging Face checkpoint (see `save_trained`). `callbacks`: further transformers
    TrainerCallbacks (a learning curve, say). `cpu_logps`: on CPU the per-token
    log-probabilities come from `rzero.training.logprobs` (`trainer_class`; TRL's numbers,
    faster); False keeps TRL's own forward.

    Step checkpoints (`rzero.training.steps`): every `save_steps` updates (0: never) and when
    SIGTERM arrives, a checkpoint in `output_dir`; SIGTERM then ends the phase with
    `Preempted` after the update in progress. Called again with the same `output_dir`, it
    resumes from the latest complete checkpoint there, the state of the reward functions and
    callbacks that have one (`state_dict`/`load_state_dict`) included.

    `model` must have been loaded with `from_pretrained(dir)`: TRL rebuilds the frozen KL
    reference from `model.config._name_or_path`, i.e. the weights at the start of the phase.
    """
    from datasets import Dataset
    from tqdm.auto import tqdm
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    stats = TrainStats()
    if not rows:
        raise ValueError("train_grpo: no training rows")
    model_cfg = model_cfg or ModelConfig()
    args = grpo_config(
        role,
        output_dir,
        seed=seed,
        model_cfg=model_cfg,
        generation_cfg=generation_cfg,
        deepspeed=deepspeed,
        report_to=report_to,
        save_steps=save_steps,
    )
    on_cpu = not torch.cuda.is_available()
    if args.bf16 and on_cpu and any(p.dtype != torch.float32 for p in model.parameters()):
        # bf16 on CPU is autocast over float32 weights; bf16 weights would round away an
        # update of lr ~1e-6 (a bf16 weight of 0.02 moves in steps of 1.2e-4)
        raise ValueError(
            "GRPO with bf16 on CPU needs the model in float32 (the master "
            "weights): set model.dtype=float32; model.train_compute=bfloat16 "
            "computes in bf16 under autocast"
        )
    # enough rows for every step to see distinct prompts; repeat the list when it is short
    need = role.steps * role.prompts_per_step
    data = [rows[i % len(rows)] for i in range(max(need, len(rows)))]

    objects = stateful([*reward_funcs, *callbacks])
    resume = resume_point(Path(output_dir), objects, stats.log, desc, args.max_steps)

    class _Progress(TrainerCallback):
        """One compact progress bar instead of TRL's dict printing."""

        def on_train_begin(self, args, state, control, **kwargs):
            self.bar = tqdm(
                total=state.max_steps,
                initial=state.global_step,
                desc=desc,
                unit="step",
                leave=False,
                disable=not distributed.is_main(),
            )

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs:
                return
            scalars = {
                k: float(v)
                for k, v in logs.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            if "reward" not in scalars:  # the end-of-training summary (train_runtime, ...)
                return
            scalars = {"update": float(state.global_step), **scalars}
            stats.log.append(scalars)
            self.bar.set_postfix(
                reward=f"{scalars['reward']:.3f}", kl=f"{scalars.get('kl', 0.0):.4f}"
            )
            if log is not None:
                log(scalars)

        def on_step_end(self, args, state, control, **kwargs):
            self.bar.update(1)

        def on_train_end(self, args, state, control, **kwargs):
            self.bar.close()

    rollouts = contextlib.nullcontext()
    if on_cpu and not args.use_vllm:
        # entered before the trainer exists: the sampling copy is made of the plain model
        from rzero.generation.decoding import rollouts_through_decode

        dtype = generation_dtype(model_cfg.generation_dtype, model_cfg.device)
        rollouts = rollouts_through_decode(model, getattr(torch, dtype), lora=bool(role.lora))

    with catch_sigterm() as sigterm, rollouts, score_completions_only():
        saving = step_checkpoints(sigterm, objects, stats.log)
        # a role's `lora:` trains adapters on frozen base weights (TRL's peft_config); the KL
        # reference is then the model with the adapter disabled
        trainer = trainer_class(cpu_logps and on_cpu)(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=Dataset.from_list(data),
            processing_class=tokenizer,
            callbacks=[_timed_callback(stats), _Progress(), *callbacks, saving],
            peft_config=lora_config(role.lora) if role.lora else None,
        )
        trainer.remove_callback(ProgressCallback)
        trainer.remove_callback(PrinterCallback)
        t0 = time.perf_counter()
        trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
        stats.seconds_total = time.perf_counter() - t0
    check_preempted(saving, trainer, desc)
    if save_to is not None:
        save_trained(trainer, tokenizer, Path(save_to))
    # free the reference model and optimiser state before the next phase
    del trainer
    return stats
