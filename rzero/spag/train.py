"""SPAG's updates on the engine's offline trainer (`rzero.training.offline`): the training rows
of a batch of episodes (`objective.turn_rewards`) rendered with the roles' prompts, the SFT
rows beside them, the offline self-play step (`objective.spag_loss`), the imitation step
(`objective.imitation_loss`), and the cosine between the two roles' gradients.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rzero.config import ModelConfig, SpagConfig
from rzero.prompts.chat import Chat
from rzero.spag.game import ATTACKER, DEFENDER
from rzero.spag.objective import imitation_loss, sequence_logprob, spag_loss, turn_rewards
from rzero.spag.play import role_prompt
from rzero.training.offline import collate, encode, mean_logprobs, token_logprobs, train_weighted


def game_rows(episodes: Sequence[dict[str, Any]], spag: SpagConfig) -> list[dict[str, Any]]:
    """`turn_rewards` of the episodes, each with the prompt its player saw (`role_prompt`)."""
    rows = turn_rewards(episodes, decay=spag.decay)
    for r in rows:
        target = r["target"] if r["role"] == ATTACKER else ""
        r["prompt"] = role_prompt(r["role"], target, r["history"], spag.max_turns)
    return rows


def updates_for(rows: int, spag: SpagConfig) -> int:
    """⌈epochs · rows / batch_size⌉ optimiser updates (the SFT control takes the same)."""
    return max(1, math.ceil(spag.epochs * rows / spag.batch_size))


def selfplay_update(
    model,
    tokenizer,
    rows: Sequence[dict[str, Any]],
    sft: Sequence[tuple[Chat, str]],
    spag: SpagConfig,
    output_dir: str | Path,
    *,
    seed: int,
    model_cfg: ModelConfig,
    report_to: Sequence[str] = (),
    desc: str = "spag",
    save_to: str | Path | None = None,
    updates: int | None = None,
    save_steps: int = 0,
) -> dict[str, Any]:
    """One epoch's offline update of `model` (the collecting policy, as it is now) on the
    winners' turns `rows` and the SFT rows `sft`, with `spag_loss`; π_old is `model`'s own
    log-probability of each turn, scored before the first update. `updates`: the optimiser
    updates (default `updates_for` the rows)."""
    prompts = [r["prompt"] for r in rows] + [p for p, _ in sft]
    responses = [r["response"] for r in rows] + [y for _, y in sft]
    old = mean_logprobs(
        model,
        tokenizer,
        prompts[: len(rows)],
        responses[: len(rows)],
        max_length=spag.max_length,
        batch_size=spag.micro_batch_size,
    )
    columns = {
        "old_logp": old + [0.0] * len(sft),
        "reward": [r["reward"] for r in rows] + [0.0] * len(sft),
        "weight": [r["weight"] for r in rows] + [1.0] * len(sft),
        "is_sft": [0.0] * len(rows) + [1.0] * len(sft),
    }

    def loss(token, mask, c):
        return spag_loss(
            sequence_logprob(token, mask),
            c["old_logp"],
            c["reward"],
            c["weight"],
            c["is_sft"] > 0.5,
            clip=spag.clip,
            kl_coef=spag.kl_coef,
            sft_coef=spag.sft_coef,
        )

    return train_weighted(
        model,
        tokenizer,
        prompts,
        responses,
        columns,
        loss,
        spag,
        output_dir,
        updates=updates or updates_for(len(prompts), spag),
        seed=seed,
        model_cfg=model_cfg,
        report_to=report_to,
        desc=desc,
        save_to=save_to,
        save_steps=save_steps,
    )


def imitation_update(
    model,
    tokenizer,
    rows: Sequence[dict[str, Any]],
    spag: SpagConfig,
    output_dir: str | Path,
    *,
    seed: int,
    model_cfg: ModelConfig,
    report_to: Sequence[str] = (),
    save_to: str | Path | None = None,
    save_steps: int = 0,
) -> dict[str, Any]:
    """The imitation step on a teacher's winning turns, `imitation_loss` toward `model` as it
    is now (the base), at `spag.imitation_lr`."""
    from dataclasses import replace

    prompts = [r["prompt"] for r in rows]
    responses = [r["response"] for r in rows]
    ref = mean_logprobs(
        model,
        tokenizer,
        prompts,
        responses,
        max_length=spag.max_length,
        batch_size=spag.micro_batch_size,
    )
    columns = {"ref_logp": ref, "weight": [r["weight"] for r in rows]}

    def loss(token, mask, c):
        return imitation_loss(
            sequence_logprob(token, mask), c["ref_logp"], c["weight"], kl_coef=spag.imitation_kl
        )

    options = replace(spag, learning_rate=spag.imitation_lr)
    return train_weighted(
        model,
        tokenizer,
        prompts,
        responses,
        columns,
        loss,
        options,
        output_dir,
        updates=updates_for(len(prompts), spag),
        seed=seed,
        model_cfg=model_cfg,
        report_to=report_to,
        desc="imitation",
        save_to=save_to,
        save_steps=save_steps,
    )


def role_gradient_cosine(
    model, tokenizer, rows: Sequence[dict[str, Any]], spag: SpagConfig, limit: int = 16
) -> dict[str, Any] | None:
    """cos(g_A, g_D) (seed §6.2): the gradients, on the shared parameters, of the self-play
    loss on up to `limit` attacker rows and on up to `limit` defender rows, each taken at the
    collecting policy (ρ = 1: the gradient of a row is −w (r − β) ∇ log π, `spag_loss`),
    accumulated over micro-batches of `spag.micro_batch_size` and kept on the CPU. Positive:
    the roles' updates help each other; negative: the shared weights trade one off against
    the other. None when either role has no row."""
    by_role = {
        role: [r for r in rows if r["role"] == role][:limit] for role in (ATTACKER, DEFENDER)
    }
    if not all(by_role.values()):
        return None
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    grads = {}
    was_training = model.training
    model.eval()  # no dropout: the two gradients are taken at the same function
    try:
        for role, rs in by_role.items():
            model.zero_grad(set_to_none=True)
            for start in range(0, len(rs), spag.micro_batch_size):
                chunk = rs[start : start + spag.micro_batch_size]
                enc = [
                    encode(tokenizer, r["prompt"], r["response"], spag.max_length)
                    | {"reward": r["reward"], "weight": r["weight"]}
                    for r in chunk
                ]
                batch = {
                    k: v.to(device) for k, v in collate(enc, pad, ("reward", "weight")).items()
                }
                token, mask = token_logprobs(model, batch)
                logp = sequence_logprob(token, mask)
                loss = spag_loss(
                    logp,
                    logp.detach(),
                    batch["reward"],
                    batch["weight"],
                    torch.zeros(len(chunk), dtype=torch.bool, device=device),
                    clip=spag.clip,
                    kl_coef=spag.kl_coef,
                )
                (loss * len(chunk) / len(rs)).backward()  # the mean over the role's rows
            grads[role] = torch.cat(
                [
                    (p.grad if p.grad is not None else torch.zeros_like(p)).flatten().float().cpu()
                    for p in params
                ]
            )
            model.zero_grad(set_to_none=True)
        a, d = grads[ATTACKER], grads[DEFENDER]
        cos = float(torch.dot(a, d) / (a.norm() * d.norm()).clamp(min=1e-30))
        return {
            "cosine": cos,
            "attacker_rows": len(by_role[ATTACKER]),
            "defender_rows": len(by_role[DEFENDER]),
            "attacker_norm": float(a.norm()),
            "defender_norm": float(d.norm()),
        }
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
