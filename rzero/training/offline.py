"""Offline training on scored rows with a caller's loss: `train_weighted` runs transformers'
`Trainer` over (prompt chat, response) rows that carry per-row numbers (a reward, a weight,
the collecting policy's log-probability, ...), and hands each micro-batch's per-token
log-probabilities of the responses to a loss function the caller writes; `mean_logprobs`
scores rows the same way without gradients.

Why `Trainer` and not a TRL trainer: SPAG's update (`rzero.spag.objective.spag_loss`) is a
clipped importance-weighted advantage on turns that were collected before the update, mixed
with SFT rows; TRL's trainers are online (GRPO, RLOO: they sample during training) or fixed
losses on pairs and demonstrations (DPO, SFT), and none takes per-row rewards with a
caller's loss. The official SPAG code subclasses the same `Trainer` the same way.

This module knows rows and a loss, not games: `rzero.spag` builds both. A row's prompt is
rendered with the tokenizer's chat template and the generation prompt, its response is the
assistant turn; the loss sees only the response's tokens (mask 1). Rows longer than
`max_length` keep their end (the response and the latest part of the prompt), as the
official code's left truncation does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from rzero.config import ModelConfig
from rzero.prompts.chat import Chat
from rzero.training.preference import completion_ids, run_trainer, trainer_arguments

# (token log-probs [rows, positions], response mask [rows, positions], columns) -> loss
LossFn = Callable[[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]], torch.Tensor]


def encode(tokenizer, prompt: Chat, response: str, max_length: int) -> dict[str, list[int]]:
    """input_ids and response mask of one row, cut from the start to `max_length`."""
    prompt_ids, completion = completion_ids(tokenizer, prompt, response)
    ids, mask = prompt_ids + completion, [0] * len(prompt_ids) + [1] * len(completion)
    return {"input_ids": ids[-max_length:], "response_mask": mask[-max_length:]}


def collate(
    rows: Sequence[dict[str, Any]], pad: int, columns: Sequence[str]
) -> dict[str, torch.Tensor]:
    width = max(len(r["input_ids"]) for r in rows)
    out = {
        "input_ids": torch.tensor(
            [r["input_ids"] + [pad] * (width - len(r["input_ids"])) for r in rows]
        ),
        "attention_mask": torch.tensor(
            [[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rows]
        ),
        "response_mask": torch.tensor(
            [r["response_mask"] + [0] * (width - len(r["response_mask"])) for r in rows]
        ),
    }
    for c in columns:
        out[c] = torch.tensor([float(r[c]) for r in rows], dtype=torch.float32)
    return out


def token_logprobs(model, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p of each next token [rows, positions − 1], the response mask aligned with it)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    token = logp.gather(-1, batch["input_ids"][:, 1:, None]).squeeze(-1)
    return token, batch["response_mask"][:, 1:].to(token.dtype)


@torch.no_grad()
def mean_logprobs(
    model,
    tokenizer,
    prompts: Sequence[Chat],
    responses: Sequence[str],
    *,
    max_length: int,
    batch_size: int = 8,
) -> list[float]:
    """Each row's mean log-probability per response token (the rows as `train_weighted`
    encodes them)."""
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    out: list[float] = []
    try:
        for start in range(0, len(prompts), batch_size):
            rows = [
                encode(tokenizer, p, r, max_length)
                for p, r in zip(
                    prompts[start : start + batch_size],
                    responses[start : start + batch_size],
                    strict=True,
                )
            ]
            batch = {k: v.to(device) for k, v in collate(rows, pad, ()).items()}
            token, mask = token_logprobs(model, batch)
            out += ((token * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist()
    finally:
        model.train(was_training)
    return out


def train_weighted(
    model,
    tokenizer,
    prompts: Sequence[Chat],
    responses: Sequence[str],
    columns: dict[str, Sequence[float]],
    loss_fn: LossFn,
    options: Any,
    output_dir: str | Path,
    *,
    updates: int,
    seed: int = 0,
    model_cfg: ModelConfig | None = None,
    report_to: Sequence[str] = (),
    desc: str = "offline",
    save_to: str | Path | None = None,
    save_steps: int = 0,
) -> dict[str, Any]:
    """Train `model` in place for `updates` optimiser updates of `options.batch_size` rows
    (micro-batches of `options.micro_batch_size`; optimiser, schedule, warm-up, learning
    rate and `max_length` from `options` as for `rzero.training.preference`), the loss of each
    micro-batch `loss_fn(token_logprobs, response_mask, columns)`, the mean over the
    gradient-accumulation steps. Returns the log of every update, the seconds and the
    update count; with `save_to`, saves the weights there."""
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    if not prompts:
        raise ValueError("train_weighted: no rows")
    names = list(columns)
    rows = [
        encode(tokenizer, p, r, options.max_length) | {c: float(columns[c][i]) for c in names}
        for i, (p, r) in enumerate(zip(prompts, responses, strict=True))
    ]
    kwargs = trainer_arguments(
        options,
        output_dir,
        seed=seed,
        updates=updates,
        model_cfg=model_cfg or ModelConfig(),
        report_to=report_to,
        save_steps=save_steps,
    )
    kwargs.pop("max_length")
    args = TrainingArguments(
        **kwargs, remove_unused_columns=False, max_grad_norm=1.0, weight_decay=0.0
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    class _Weighted(Trainer):
        loss_is_scaled_for_ga = False  # Trainer divides by the accumulation steps

        def __init__(self, **kw):
            super().__init__(data_collator=lambda b: collate(b, pad, names), **kw)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            token, mask = token_logprobs(model, inputs)
            return loss_fn(token, mask, {c: inputs[c] for c in names})

    return run_trainer(
        _Weighted,
        model,
        tokenizer,
        Dataset.from_list(rows),
        args,
        Path(save_to) if save_to else None,
        desc,
    )
