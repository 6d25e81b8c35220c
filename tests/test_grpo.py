"""`train_grpo`: micro-batching accumulates to the same update as one full-batch pass."""

from __future__ import annotations

import pytest
import torch

from rzero.grpo import GRPOSettings, train_grpo
from rzero.models import load_model, load_tokenizer


def length_reward(prompts, completions, **kwargs):
    """Varies within a group, so the advantages (and the gradient) are not zero."""
    text = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(t) % 7) / 7.0 for t in text]


def one_step(checkpoint, tmp_path, micro: int):
    model = load_model(str(checkpoint), dtype="float32", device="cpu")
    tokenizer = load_tokenizer(str(checkpoint))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = [{"prompt": [{"role": "user", "content": f"Say a number {i}."}]} for i in range(2)]
    settings = GRPOSettings(steps=1, group_size=4, prompts_per_step=2, learning_rate=1e-3,
                            beta=0.01, epsilon=0.2, epsilon_high=0.3, max_completion_length=12,
                            temperature=1.0, micro_batch_size=micro, seed=3)
    log: list[dict[str, float]] = []
    train_grpo(model, tokenizer, rows, [length_reward], settings, tmp_path / f"out{micro}",
               log=log.append)
    delta = torch.cat([(p.detach() - before[n]).flatten()
                       for n, p in model.named_parameters()])
    (step,) = [row for row in log if "grad_norm" in row]
    return step, delta


def test_micro_batches_give_the_full_batch_update(tiny_checkpoint, tmp_path):
    # batch = 2 prompts x G 4 = 8 sequences: one pass of 8 against four passes of 2
    full, d_full = one_step(tiny_checkpoint, tmp_path, micro=0)
    micro, d_micro = one_step(tiny_checkpoint, tmp_path, micro=2)
    # the same rollouts and rewards (seeded), so the same gradient up to float summation order
    assert micro["reward"] == pytest.approx(full["reward"], abs=1e-6)
    assert full["grad_norm"] > 0
    assert micro["grad_norm"] == pytest.approx(full["grad_norm"], rel=1e-4)
    assert micro["loss"] == pytest.approx(full["loss"], rel=1e-4, abs=1e-7)
    # Adam's first step moves each weight by about lr * sign(grad): the same direction
    moved = d_full.abs() > 1e-4
    assert moved.float().mean() > 0.5
    agree = torch.sign(d_full[moved]) == torch.sign(d_micro[moved])
    assert agree.float().mean() > 0.99


def test_micro_batch_must_divide_the_step_batch(tiny_checkpoint, tmp_path):
    with pytest.raises(ValueError, match="does not divide"):
        one_step(tiny_checkpoint, tmp_path, micro=3)
