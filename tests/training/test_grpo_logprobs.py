"""`rzero.training.logprobs`: GRPO's log-probabilities on CPU (the prompts' shared prefix run
once, one log-softmax over the completion positions) give the log-probabilities, entropies,
loss and gradients of TRL's fused-head forward, on random left-padded batches with and
without a shared prefix and at a sampling temperature; and a GRPO update through
`train_grpo` logs the same loss, reward and gradient norm with and without it."""

from __future__ import annotations

import random

import pytest
import torch
from conftest import tiny_llama

from rzero.config import ModelConfig, SolverConfig
from rzero.training.grpo import score_completions_only, train_grpo
from rzero.training.logprobs import completion_logps, shared_prefix_length

VOCAB = 300


def _batch(seed: int, shared: int):
    """Rows that start with the same `shared` tokens, then a prompt rest of 1-8 tokens,
    left-padded to one width, then completions of random lengths right-padded: the layout
    TRL hands `_get_per_token_logps_and_entropies`."""
    rng = random.Random(seed)
    rows, completion_width = rng.randint(2, 6), rng.randint(2, 10)
    head = [rng.randrange(3, VOCAB) for _ in range(shared)]
    prompts = [
        head + [rng.randrange(3, VOCAB) for _ in range(rng.randint(1, 8))] for _ in range(rows)
    ]
    width = max(len(p) for p in prompts)
    ids = torch.zeros(rows, width + completion_width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) : width] = torch.tensor(p)
        mask[r, width - len(p) : width] = 1
        n = rng.randint(1, completion_width)
        ids[r, width : width + n] = torch.tensor([rng.randrange(3, VOCAB) for _ in range(n)])
        mask[r, width : width + n] = 1
    return ids, mask, completion_width


def naive_shared_length(ids, mask, completion_width) -> int:
    prompts = [
        [
            int(t)
            for t, m in zip(row[:-completion_width], mrow[:-completion_width], strict=True)
            if m
        ]
        for row, mrow in zip(ids, mask, strict=True)
    ]
    n = 0
    while n < min(len(p) for p in prompts) - 1 and all(p[n] == prompts[0][n] for p in prompts):
        n += 1
    return n


@pytest.mark.parametrize("seed", range(20))
def test_shared_prefix_length_matches_a_naive_scan(seed):
    ids, mask, width = _batch(seed, shared=random.Random(seed).randint(0, 12))
    assert shared_prefix_length(ids, mask, width) == naive_shared_length(ids, mask, width)


@pytest.fixture(scope="module")
def fused_model(tokenizer):
    return tiny_llama(tokenizer, hidden=64, layers=2, seed=7)


def _loss_and_grads(model, run):
    model.zero_grad()
    with score_completions_only():
        logps, entropy, keep = run()
    weights = torch.linspace(-1.0, 1.0, logps.numel()).view_as(logps)  # advantages, say
    loss = (logps * weights * keep).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logps.detach() * keep, entropy.detach() * keep, loss.detach(), grads


@pytest.mark.parametrize(
    "seed,shared,temperature",
    [
        (seed, shared, temperature)
        for seed in range(4)
        for shared in (0, 20)
        for temperature in (1.0, 0.7)
    ],
)
def test_cpu_logps_give_the_fused_heads_numbers(fused_model, seed, shared, temperature):
    import trl.trainer.utils as trl_utils

    ids, mask, width = _batch(seed, shared=shared)
    if shared:
        assert shared_prefix_length(ids, mask, width) >= 20
    keep = mask[:, -width:].float()

    def full():  # TRL's call, its fused head at the temperature TRL installs it with
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-width] = -100
        original = fused_model.forward
        trl_utils.add_fused_lm_head(
            fused_model, temperature=temperature, outputs=("log_probs", "entropy")
        )
        try:
            out = fused_model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        finally:
            fused_model.forward = original
        return out.log_probs[:, -width:], out.entropy[:, -width:], keep

    def ours():
        lp, ent = completion_logps(
            fused_model, ids, mask, width, temperature=temperature, compute_entropy=True
        )
        return lp, ent, keep

    a_lp, a_ent, a_loss, a_grads = _loss_and_grads(fused_model, full)
    b_lp, b_ent, b_loss, b_grads = _loss_and_grads(fused_model, ours)
    torch.testing.assert_close(b_lp, a_lp, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(b_ent, a_ent, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(b_loss, a_loss, atol=1e-4, rtol=1e-4)
    assert a_grads.keys() == b_grads.keys()
    for name in a_grads:
        torch.testing.assert_close(
            b_grads[name],
            a_grads[name],
            atol=1e-5,
            rtol=1e-3,
            msg=lambda m, name=name: f"{name}: {m}",
        )


@pytest.mark.slow
def test_a_grpo_update_logs_the_same_loss_reward_and_gradient_norm(
    tokenizer, tmp_path, monkeypatch
):
    """One update of 2 prompts x G 4 in micro-batches of 2 through `train_grpo`, TRL's
    forward and shuffled micro-batches against `completion_logps` and micro-batches sorted by
    completion length: the same rollouts (same seed), so the same reward, and the same loss
    and gradient norm within float rounding."""
    prompts = [
        [
            {"role": "system", "content": "Answer with one number in \\boxed{}. " * 4},
            {"role": "user", "content": f"What is {n} + {n}?"},
        ]
        for n in (3, 11)
    ]

    def varied(prompts, completions, completion_ids, **kwargs):
        return [float(ids[0] % 2) if ids else 0.0 for ids in completion_ids]

    role = SolverConfig(
        steps=1,
        group_size=4,
        prompts_per_step=2,
        learning_rate=1e-4,
        beta=0.0,
        max_completion_length=6,
        temperature=1.0,
        micro_batch_size=2,
    )
    cpu = ModelConfig(
        dtype="float32", device="cpu", generation_dtype="float32", train_compute="float32"
    )
    import rzero.training.logprobs as logprobs

    calls = []
    real = logprobs._completion_hidden
    monkeypatch.setattr(
        logprobs, "_completion_hidden", lambda *a, **k: calls.append(a[4]) or real(*a, **k)
    )
    logs = {}
    for share in (False, True):
        model = tiny_llama(tokenizer, hidden=64, layers=2, seed=7)
        stats = train_grpo(
            model,
            tokenizer,
            [{"prompt": p} for p in prompts],
            [varied],
            role,
            tmp_path / str(share),
            seed=0,
            model_cfg=cpu,
            cpu_logps=share,
        )
        logs[share] = stats.log[0]
    assert calls and min(calls) >= 16  # the shared path ran, with the system line shared
    assert logs[True]["reward"] == logs[False]["reward"]
    assert logs[True]["reward_std"] > 0  # a gradient to compare
    assert logs[True]["grad_norm"] == pytest.approx(logs[False]["grad_norm"], rel=1e-4)
    assert logs[True]["loss"] == pytest.approx(logs[False]["loss"], rel=1e-4, abs=1e-7)
