"""Each trainer learns: on a tiny in-process model, a target the model can reach goes from
chance to near certain within a bounded number of updates, through the same wrappers the
systems train with (`train_grpo` for R-Zero and the solver task, `train_sft` and
`train_pairs` for SPIN and SPAG). Each check also runs with the update broken (learning rate
0; the advantage's or the preference's sign flipped) and must then report no learning, so a
trainer that silently stops learning fails here, not after hours of a flat run."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import tiny_llama

from rzero.config import ModelConfig, SolverConfig, SpinConfig
from rzero.training.grpo import train_grpo
from rzero.training.preference import pair_logprobs, train_pairs, train_sft

PROMPTS = [[{"role": "user", "content": f"Say something about {n}."}] for n in range(8)]
CPU = ModelConfig(
    dtype="float32", device="cpu", generation_dtype="float32", train_compute="float32"
)


def low_half(tokenizer):
    """The GRPO target: a completion whose first token has an id in the lower half of the
    vocabulary (chance 1/2 for a random model)."""
    half = len(tokenizer) // 2
    first_ids = []

    def reward(prompts, completions, completion_ids, **kwargs) -> list[float]:
        first_ids.extend(ids[0] for ids in completion_ids if ids)
        return [1.0 if ids and ids[0] < half else 0.0 for ids in completion_ids]

    reward.__name__ = "low_half"
    return reward


def grpo_reward_curve(
    tokenizer, tmp_path, *, learning_rate: float, flip: bool = False, updates: int = 80
) -> list[float]:
    """TRL's mean reward of every update of `updates` GRPO updates (16 completions each) on
    the low-half target; `flip` negates the reward, which flips every advantage."""
    model = tiny_llama(tokenizer, hidden=32, layers=1, seed=3)
    target = low_half(tokenizer)

    def trained_on(prompts, completions, completion_ids, **kwargs):
        r = target(prompts, completions, completion_ids)
        return [-x for x in r] if flip else r

    trained_on.__name__ = "target"
    role = SolverConfig(
        steps=updates,
        group_size=8,
        prompts_per_step=2,
        learning_rate=learning_rate,
        beta=0.0,
        max_completion_length=2,
        temperature=1.0,
        trl={"lr_scheduler_type": "constant"},
    )
    logged = []
    stats = train_grpo(
        model,
        tokenizer,
        [{"prompt": p} for p in PROMPTS],
        [trained_on],
        role,
        tmp_path / "grpo",
        seed=0,
        model_cfg=CPU,
        log=logged.append,
    )
    assert len(stats.log) == updates
    sign = -1.0 if flip else 1.0
    return [sign * row["reward"] for row in stats.log]


def grpo_learns(curve: list[float]) -> bool:
    """Chance at the start, near 1 over the last five updates."""
    return sum(curve[:3]) / 3 < 0.8 and sum(curve[-5:]) / 5 >= 0.9


@pytest.mark.slow
def test_grpo_lifts_a_reachable_reward_from_chance_to_near_one(tokenizer, tmp_path):
    curve = grpo_reward_curve(tokenizer, tmp_path, learning_rate=3e-2)
    assert grpo_learns(curve), [round(r, 2) for r in curve]


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["learning rate 0", "advantage sign flipped"])
def test_grpo_with_a_broken_update_does_not_learn(tokenizer, tmp_path, broken):
    curve = grpo_reward_curve(
        tokenizer,
        tmp_path,
        learning_rate=0.0 if "rate" in broken else 3e-2,
        flip="flipped" in broken,
    )
    assert not grpo_learns(curve), [round(r, 2) for r in curve]
    if "flipped" in broken:  # it learns the opposite
        assert sum(curve[-5:]) / 5 <= sum(curve[:5]) / 5 - 0.2, [round(r, 2) for r in curve]


SFT_TARGET = "So \\boxed{7}."
CHOSEN, REJECTED = "Yes.", "No."


def preference_section(learning_rate: float, epochs: float = 1.0) -> SpinConfig:
    """SPIN's section as the SFT and DPO wrappers read it; a learning rate of 0, which the
    config refuses, is set past the check (the broken update)."""
    section = SpinConfig(
        batch_size=4,
        micro_batch_size=4,
        learning_rate=1e-3,
        optimizer="adamw_torch",
        lr_scheduler="constant",
        warmup_ratio=0.0,
        max_length=64,
        epochs=epochs,
    )
    object.__setattr__(section, "learning_rate", learning_rate)
    return section


def target_probability(model, tokenizer, response: str) -> float:
    """Mean over the prompts of the per-token probability of `response` (exp of the mean
    log-probability over its tokens)."""
    scored = pair_logprobs(model, tokenizer, PROMPTS, [response] * len(PROMPTS), max_length=64)
    return sum(math.exp(lp / n) for lp, n in scored) / len(scored)


def sft_probabilities(tokenizer, tmp_path, learning_rate: float) -> tuple[float, float]:
    model = tiny_llama(tokenizer, hidden=32, layers=1, seed=4)
    before = target_probability(model, tokenizer, SFT_TARGET)
    train_sft(
        model,
        tokenizer,
        PROMPTS,
        [SFT_TARGET] * len(PROMPTS),
        preference_section(learning_rate),
        tmp_path / "sft",
        updates=60,
        seed=0,
        model_cfg=CPU,
    )
    return before, target_probability(model, tokenizer, SFT_TARGET)


def sft_learns(before: float, after: float) -> bool:
    return before < 0.05 and after >= 0.9


@pytest.mark.slow
def test_sft_lifts_the_target_from_chance_to_near_certain(tokenizer, tmp_path):
    before, after = sft_probabilities(tokenizer, tmp_path, 3e-2)
    assert sft_learns(before, after), (before, after)


@pytest.mark.slow
def test_sft_with_learning_rate_0_does_not_learn(tokenizer, tmp_path):
    before, after = sft_probabilities(tokenizer, tmp_path, 0.0)
    assert not sft_learns(before, after) and after == pytest.approx(before, rel=1e-4)


def preference_share(model, tokenizer) -> float:
    """Mean over the prompts of σ(log p(chosen) − log p(rejected)): ½ when indifferent."""
    chosen = pair_logprobs(model, tokenizer, PROMPTS, [CHOSEN] * len(PROMPTS), max_length=64)
    rejected = pair_logprobs(model, tokenizer, PROMPTS, [REJECTED] * len(PROMPTS), max_length=64)
    return sum(
        1 / (1 + math.exp(-(c - r))) for (c, _), (r, _) in zip(chosen, rejected, strict=True)
    ) / len(PROMPTS)


def dpo_shares(
    tokenizer, tmp_path, learning_rate: float, flip: bool = False
) -> tuple[float, float]:
    """The preference share before and after 4 epochs of DPO on (chosen, rejected) pairs;
    `flip` swaps the pair (the preference's sign flipped)."""
    model = tiny_llama(tokenizer, hidden=32, layers=1, seed=5)
    before = preference_share(model, tokenizer)
    good, bad = (REJECTED, CHOSEN) if flip else (CHOSEN, REJECTED)
    section = preference_section(learning_rate, epochs=8.0)
    with torch.random.fork_rng():
        train_pairs(
            model,
            tokenizer,
            PROMPTS,
            [good] * len(PROMPTS),
            [bad] * len(PROMPTS),
            section,
            tmp_path / "dpo",
            lam=0.5,
            seed=0,
            model_cfg=CPU,
        )
    return before, preference_share(model, tokenizer)


def dpo_learns(before: float, after: float) -> bool:
    return 0.1 < before < 0.9 and after >= 0.95


def test_dpo_lifts_the_preference_from_indifference_to_near_certain(tokenizer, tmp_path):
    before, after = dpo_shares(tokenizer, tmp_path, 1e-2)
    assert dpo_learns(before, after), (before, after)


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["learning rate 0", "preference sign flipped"])
def test_dpo_with_a_broken_update_does_not_learn(tokenizer, tmp_path, broken):
    before, after = dpo_shares(
        tokenizer, tmp_path, 0.0 if "rate" in broken else 1e-2, flip="flipped" in broken
    )
    assert not dpo_learns(before, after), (before, after)
    if "flipped" in broken:
        assert after <= 0.05, (before, after)
