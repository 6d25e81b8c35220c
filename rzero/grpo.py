"""The one module that imports trl: `train_grpo` wraps TRL's GRPOTrainer for either role.

Rewards arrive as TRL reward functions `(prompts, completions, **columns) -> list[float]`,
so this module knows nothing about what is being rewarded. One GRPO step here is one
optimiser step: `prompts_per_step` prompts x `group_size` completions are generated, scored
and used once (`num_iterations=1`), as in the reference recipe. With `micro_batch_size` the
step's forward/backward passes run over micro-batches whose gradients are accumulated (TRL's
`steps_per_generation` = `gradient_accumulation_steps`), which bounds activation memory
without changing the update.

On CPU, `bf16` means float32 master weights with bf16 compute (accelerate's autocast), and
`generation_dtype` sends TRL's rollouts through `rzero.decoding` on a copy of the weights in
that dtype (see `rollouts_through_decode`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rzero import distributed


@dataclass(frozen=True)
class GRPOSettings:
    steps: int
    group_size: int
    prompts_per_step: int
    learning_rate: float
    beta: float
    epsilon: float
    epsilon_high: float
    max_completion_length: int
    temperature: float
    micro_batch_size: int = 0  # 0: the whole step batch in one forward/backward
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    bf16: bool = False
    gradient_checkpointing: bool = False
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.3
    deepspeed: str | None = None
    # CPU rollouts through rzero.decoding in this dtype (None: TRL's `model.generate`)
    generation_dtype: str | None = None


@dataclass
class TrainStats:
    seconds_total: float = 0.0
    seconds_optimizer: float = 0.0  # forward/backward/step, not rollouts or rewards
    steps: int = 0


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


def save_trained(trainer, tokenizer, target: Path) -> None:
    """Every training process takes part (ZeRO-3 gathers its parameter shards here); the main
    process writes a temp dir and renames it, so a checkpoint dir is complete or absent."""
    tmp = target.with_name(f".{target.name}.tmp")
    if distributed.is_main():
        shutil.rmtree(tmp, ignore_errors=True)
    distributed.barrier()
    trainer.save_model(str(tmp))
    if distributed.is_main():
        tokenizer.save_pretrained(tmp)
        (tmp / "training_args.bin").unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    distributed.barrier()


def split_batch(settings: GRPOSettings, processes: int = 1) -> tuple[int, int]:
    """(sequences per forward/backward on each process, micro-batches accumulated per step)
    for a step of prompts_per_step x group_size sequences spread over `processes`."""
    batch = settings.prompts_per_step * settings.group_size
    if batch % processes:
        raise ValueError(f"a step's {settings.prompts_per_step} prompts x G "
                         f"{settings.group_size} = {batch} sequences do not split evenly over "
                         f"{processes} training processes")
    per_process = batch // processes
    micro = settings.micro_batch_size or per_process
    if per_process % micro:
        raise ValueError(f"micro_batch_size {micro} does not divide the {per_process} "
                         f"sequences each of {processes} training process(es) gets per step")
    return micro, per_process // micro


def train_grpo(model, tokenizer, rows: list[dict[str, Any]],
               reward_funcs: list[Callable[..., list[float | None]]],
               settings: GRPOSettings, output_dir: str | Path,
               *, log: Callable[[dict[str, float]], None] | None = None,
               desc: str = "grpo", save_to: str | Path | None = None) -> TrainStats:
    """Train `model` in place with GRPO on `rows` (each has a 'prompt' chat plus columns that
    the reward functions receive as keyword lists). Returns timings. With `save_to`, the
    trained weights are saved there as a Hugging Face checkpoint (see `save_trained`).

    `model` must have been loaded with `from_pretrained(dir)`: TRL rebuilds the frozen KL
    reference from `model.config._name_or_path`, i.e. the weights at the start of the phase.
    """
    from datasets import Dataset
    from tqdm.auto import tqdm
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    stats = TrainStats()
    if settings.steps == 0:
        return stats
    if not rows:
        raise ValueError("train_grpo: no training rows")
    on_cpu = not torch.cuda.is_available()
    if settings.bf16 and on_cpu and any(p.dtype != torch.float32 for p in model.parameters()):
        # bf16=True on CPU is autocast over float32 weights; bf16 weights would round away an
        # update of lr ~1e-6 (a bf16 weight of 0.02 moves in steps of 1.2e-4)
        raise ValueError("GRPO with bf16 on CPU needs the model in float32 (the master "
                         "weights); bf16=True already computes in bf16 under autocast")
    micro, accumulate = split_batch(settings, distributed.world_size())
    # enough rows for every step to see distinct prompts; repeat the list when it is short
    need = settings.steps * settings.prompts_per_step
    data = [rows[i % len(rows)] for i in range(max(need, len(rows)))]
    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=settings.steps,
        # one generation of `batch` sequences per optimiser step, its loss and gradient
        # accumulated over `accumulate` micro-batches (TRL's default "dapo" loss divides by
        # the token count of the whole generation batch, so the update is the full-batch one)
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulate,
        steps_per_generation=accumulate,
        num_iterations=1,
        num_generations=settings.group_size,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=settings.beta,
        epsilon=settings.epsilon,
        epsilon_high=settings.epsilon_high,
        max_completion_length=settings.max_completion_length,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k if settings.top_k > 0 else 0,
        seed=settings.seed,
        data_seed=settings.seed,
        bf16=settings.bf16,
        fp16=False,
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=settings.gradient_checkpointing,
        use_vllm=settings.use_vllm,
        vllm_mode=settings.vllm_mode,
        vllm_gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
        deepspeed=settings.deepspeed,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        shuffle_dataset=True,
        log_completions=False,
        mask_truncated_completions=False,
    )

    class _Progress(TrainerCallback):
        """One compact progress bar instead of TRL's dict printing."""

        def on_train_begin(self, args, state, control, **kwargs):
            self.bar = tqdm(total=state.max_steps, desc=desc, unit="step", leave=False,
                            disable=not distributed.is_main())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs:
                return
            scalars = {k: float(v) for k, v in logs.items() if isinstance(v, (int, float))}
            if "reward" in scalars:
                self.bar.set_postfix(reward=f"{scalars['reward']:.3f}",
                                     kl=f"{scalars.get('kl', 0.0):.4f}")
            if log is not None:
                log(scalars)

        def on_step_end(self, args, state, control, **kwargs):
            self.bar.update(1)

        def on_train_end(self, args, state, control, **kwargs):
            self.bar.close()

    rollouts = contextlib.nullcontext()
    if settings.generation_dtype and on_cpu and not settings.use_vllm:
        # entered before the trainer exists: the sampling copy is made of the plain model
        from rzero.decoding import rollouts_through_decode

        rollouts = rollouts_through_decode(model, getattr(torch, settings.generation_dtype))
    with rollouts:
        trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args,
                              train_dataset=Dataset.from_list(data), processing_class=tokenizer,
                              callbacks=[_timed_callback(stats), _Progress()])
        trainer.remove_callback(ProgressCallback)
        trainer.remove_callback(PrinterCallback)
        t0 = time.perf_counter()
        trainer.train()
        stats.seconds_total = time.perf_counter() - t0
    if save_to is not None:
        save_trained(trainer, tokenizer, Path(save_to))
    # free the reference model and optimiser state before the next phase
    del trainer
    return stats
