"""Pairwise and supervised fine-tuning through TRL: `train_pairs` wraps TRL's DPOTrainer,
`train_sft` its SFTTrainer, and `pair_logprobs` scores responses as the DPO trainer does.

This module knows pairs (a prompt chat, a chosen and a rejected answer) and rows (a prompt
chat and an answer), not where they came from: SPIN (`rzero.spin`) builds them. With
``loss_type="sigmoid"`` and ``beta=λ`` DPOTrainer minimises −log σ(λ·Δ), Δ = the chosen
answer's log-ratio against the reference minus the rejected one's: SPIN's logistic loss
(`rzero.spin.objective.spin_loss`, checked against TRL in tests/spin/test_spin_objective.py).
The reference is the model as it is when training starts (the opponent), its
log-probabilities precomputed (`precompute_ref_log_probs`), so no second copy is held.

Every option that changes what is optimised is set here from the `spin` section or fixed
(`PAIR_OPTIONS`), not left to a TRL default.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rzero.config import ModelConfig, SpinConfig
from rzero.engine.models import train_compute
from rzero.prompts.chat import Chat
from rzero.training.grpo import save_trained, score_completions_only
from rzero.training.steps import (
    catch_sigterm,
    check_preempted,
    resume_point,
    stateful,
    step_checkpoints,
)

PAIR_OPTIONS: dict[str, Any] = dict(
    loss_type=["sigmoid"],  # −log σ(β·Δ): SPIN's logistic ℓ
    label_smoothing=0.0,
    f_divergence_type="reverse_kl",  # the log-ratio itself, as SPIN's f = λ log(pθ/pθt)
    use_weighting=False,
    ld_alpha=None,  # no length desensitisation: whole-sequence log-probabilities
    precompute_ref_log_probs=True,  # the reference is the start-of-phase weights
    sync_ref_model=False,
    truncation_mode="keep_start",
    disable_dropout=True,
    max_grad_norm=1.0,
    weight_decay=0.0,
)


def updates_for(rows: int, spin: SpinConfig) -> int:
    """Optimiser updates of a phase over `rows` pairs: ⌈epochs · rows / batch_size⌉ (the SFT
    control takes the same number over the same rows)."""
    return max(1, math.ceil(spin.epochs * rows / spin.batch_size))


def trainer_arguments(
    spin: Any,
    output_dir: str | Path,
    *,
    seed: int,
    updates: int,
    model_cfg: ModelConfig,
    report_to: Sequence[str],
    save_steps: int = 0,
) -> dict[str, Any]:
    """The TRL / Trainer arguments of one training phase: `spin` is a section with
    batch_size, micro_batch_size, learning_rate, optimizer, lr_scheduler, warmup_ratio and
    max_length (`SpinConfig`, `SpagConfig`)."""
    return dict(
        output_dir=str(output_dir),
        max_steps=updates,
        per_device_train_batch_size=spin.micro_batch_size,
        gradient_accumulation_steps=spin.batch_size // spin.micro_batch_size,
        learning_rate=spin.learning_rate,
        optim=spin.optimizer,
        lr_scheduler_type=spin.lr_scheduler,
        warmup_steps=round(spin.warmup_ratio * updates),
        max_length=spin.max_length,
        seed=seed,
        data_seed=seed,
        bf16=train_compute(model_cfg.train_compute, model_cfg.dtype, model_cfg.device)
        == "bfloat16",
        fp16=False,
        use_cpu=not torch.cuda.is_available(),
        activation_checkpointing=model_cfg.gradient_checkpointing,
        dataloader_num_workers=0,
        logging_steps=1,
        # a step checkpoint every `save_steps` updates, and on SIGTERM (`rzero.training.steps`)
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        save_only_model=False,
        save_total_limit=None,
        report_to=list(report_to),
        disable_tqdm=True,
    )


def _preference_dataset(prompts: Sequence[Chat], chosen: Sequence[str], rejected: Sequence[str]):
    from datasets import Dataset

    return Dataset.from_list(
        [
            {
                "prompt": list(p),
                "chosen": [{"role": "assistant", "content": c}],
                "rejected": [{"role": "assistant", "content": r}],
            }
            for p, c, r in zip(prompts, chosen, rejected, strict=True)
        ]
    )


def run_trainer(
    trainer_cls,
    model,
    tokenizer,
    dataset,
    args,
    save_to: Path | None,
    desc: str,
    callbacks: Sequence[Any] = (),
) -> dict[str, Any]:
    """Train with `trainer_cls` (a transformers Trainer) and return the log of every update,
    the seconds and the update count (fewer than `args.max_steps` when a callback stopped
    the training). Its work folder `args.output_dir` holds the phase's step checkpoints
    (`rzero.training.steps`), with the state of the `callbacks` that have one: the call
    resumes from the latest one there, and on SIGTERM it saves one after the update in
    progress and raises `Preempted`."""
    import datasets
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from rzero.engine import distributed

    datasets.disable_progress_bars()  # TRL's per-phase tokenising passes, one bar each
    log: list[dict[str, float]] = []

    class _Progress(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=state.max_steps,
                initial=state.global_step,
                desc=desc,
                unit="update",
                leave=False,
                disable=not distributed.is_main(),
            )

        def on_log(self, args, state, control, logs=None, **kwargs):
            scalars = {k: float(v) for k, v in (logs or {}).items() if isinstance(v, (int, float))}
            if "loss" in scalars:
                log.append({"step": state.global_step, **scalars})
                self.bar.set_postfix(loss=f"{scalars['loss']:.4f}")

        def on_step_end(self, args, state, control, **kwargs):
            self.bar.update(1)

        def on_train_end(self, args, state, control, **kwargs):
            self.bar.close()

    objects = stateful(callbacks)
    resume = resume_point(Path(args.output_dir), objects, log, desc, args.max_steps)
    with catch_sigterm() as sigterm, score_completions_only():
        saving = step_checkpoints(sigterm, objects, log)
        trainer = trainer_cls(
            model=model,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[_Progress(), *callbacks, saving],
        )
        trainer.remove_callback(ProgressCallback)
        trainer.remove_callback(PrinterCallback)
        t0 = time.perf_counter()
        trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
        seconds = time.perf_counter() - t0
    check_preempted(saving, trainer, desc)
    if save_to is not None:
        save_trained(trainer, tokenizer, Path(save_to))
    updates = trainer.state.global_step
    del trainer
    return {"train_log": log, "seconds": seconds, "updates": updates}


def train_pairs(
    model,
    tokenizer,
    prompts: Sequence[Chat],
    chosen: Sequence[str],
    rejected: Sequence[str],
    spin: SpinConfig,
    output_dir: str | Path,
    *,
    lam: float,
    seed: int = 0,
    model_cfg: ModelConfig | None = None,
    report_to: Sequence[str] = (),
    desc: str = "pairs",
    save_to: str | Path | None = None,
    save_steps: int = 0,
) -> dict[str, Any]:
    """Train `model` in place on (prompt, chosen, rejected) pairs with TRL's DPOTrainer:
    sigmoid loss at β = `lam`, the reference being `model` as it is now. Returns the TRL
    log of every update (loss, rewards/accuracies, rewards/margins, logps/chosen, ...), the
    training seconds and the update count; with `save_to`, saves the weights there."""
    from trl import DPOConfig, DPOTrainer

    if not prompts:
        raise ValueError("train_pairs: no pairs")
    updates = updates_for(len(prompts), spin)
    args = DPOConfig(
        **trainer_arguments(
            spin,
            output_dir,
            seed=seed,
            updates=updates,
            model_cfg=model_cfg or ModelConfig(),
            report_to=report_to,
            save_steps=save_steps,
        ),
        beta=lam,
        precompute_ref_batch_size=spin.micro_batch_size,
        **PAIR_OPTIONS,
    )
    return run_trainer(
        DPOTrainer,
        model,
        tokenizer,
        _preference_dataset(prompts, chosen, rejected),
        args,
        Path(save_to) if save_to else None,
        desc,
    )


def train_sft(
    model,
    tokenizer,
    prompts: Sequence[Chat],
    responses: Sequence[str],
    spin: SpinConfig,
    output_dir: str | Path,
    *,
    updates: int,
    seed: int = 0,
    model_cfg: ModelConfig | None = None,
    report_to: Sequence[str] = (),
    desc: str = "sft",
    save_to: str | Path | None = None,
    save_steps: int = 0,
    callbacks: Sequence[Any] = (),
) -> dict[str, Any]:
    """Train `model` in place with TRL's SFTTrainer on (prompt, response) rows for `updates`
    optimiser updates of `spin.batch_size` rows (fewer if one of the transformers
    `callbacks` stops it), the loss on the response tokens only (``completion_only_loss``),
    otherwise with the same optimiser, schedule and lengths as `train_pairs`."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if not prompts:
        raise ValueError("train_sft: no rows")
    args = SFTConfig(
        **trainer_arguments(
            spin,
            output_dir,
            seed=seed,
            updates=updates,
            model_cfg=model_cfg or ModelConfig(),
            report_to=report_to,
            save_steps=save_steps,
        ),
        completion_only_loss=True,
        packing=False,
        max_grad_norm=1.0,
        weight_decay=0.0,
    )
    data = Dataset.from_list(
        [
            {"prompt": list(p), "completion": [{"role": "assistant", "content": r}]}
            for p, r in zip(prompts, responses, strict=True)
        ]
    )
    return run_trainer(
        SFTTrainer,
        model,
        tokenizer,
        data,
        args,
        Path(save_to) if save_to else None,
        desc,
        callbacks,
    )


def completion_ids(tokenizer, prompt: Chat, response: str) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids) as TRL's DPO tokenisation makes them: the chat template of
    the prompt with the generation prompt, and of prompt + answer; the completion starts
    where the two diverge."""

    def ids(x):
        out = x if isinstance(x, list) else x["input_ids"]
        return list(out)

    prompt_ids = ids(
        tokenizer.apply_chat_template(
            list(prompt), add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )
    full = ids(
        tokenizer.apply_chat_template(
            [*prompt, {"role": "assistant", "content": response}], tokenize=True, return_dict=False
        )
    )
    n = 0
    while n < min(len(prompt_ids), len(full)) and prompt_ids[n] == full[n]:
        n += 1
    return prompt_ids[:n], full[n:]


@torch.no_grad()
def pair_logprobs(
    model,
    tokenizer,
    prompts: Sequence[Chat],
    responses: Sequence[str],
    *,
    max_length: int,
    batch_size: int = 8,
) -> list[tuple[float, int]]:
    """(log p(response | prompt), response tokens) for each pair, summed over the response's
    tokens as DPOTrainer sums them (its tokenisation, `max_length` keeping the start)."""
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out: list[tuple[float, int]] = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(prompts), batch_size):
            seqs, masks = [], []
            for p, r in zip(
                prompts[start : start + batch_size],
                responses[start : start + batch_size],
                strict=True,
            ):
                prompt_ids, completion = completion_ids(tokenizer, p, r)
                ids = (prompt_ids + completion)[:max_length]
                mask = ([0] * len(prompt_ids) + [1] * len(completion))[:max_length]
                seqs.append(ids)
                masks.append(mask)
            width = max(len(s) for s in seqs)
            input_ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], device=device)
            attention = torch.tensor(
                [[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device
            )
            completion = torch.tensor([m + [0] * (width - len(m)) for m in masks], device=device)
            logits = model(input_ids=input_ids, attention_mask=attention).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            token = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
            weight = completion[:, 1:].to(token.dtype)
            sums = (token * weight).sum(1).tolist()
            counts = weight.sum(1).long().tolist()
            out += list(zip(sums, counts, strict=True))
    finally:
        model.train(was_training)
    return out
