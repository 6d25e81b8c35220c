"""`train_grpo`: one rollout per step, several optimiser updates over it, micro-batching that
accumulates to the full update; `grpo_config` leaves nothing that changes the algorithm to
TRL's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from rzero.config import ConfigError, ModelConfig, SolverConfig, load_config
from rzero.engine.models import load_model, load_tokenizer
from rzero.training.grpo import ALGORITHM_OPTIONS, grpo_config, train_grpo

CONFIGS = sorted(Path(__file__).parents[2].glob("configs/*.yaml"))


def length_reward(prompts, completions, **kwargs):
    """Varies within a group, so the advantages (and the gradient) are not zero."""
    text = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(t) % 7) / 7.0 for t in text]


def one_step(checkpoint, tmp_path, micro: int):
    model = load_model(str(checkpoint), dtype="float32", device="cpu")
    tokenizer = load_tokenizer(str(checkpoint))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = [{"prompt": [{"role": "user", "content": f"Say a number {i}."}]} for i in range(2)]
    role = SolverConfig(
        steps=1,
        group_size=4,
        prompts_per_step=2,
        learning_rate=1e-3,
        beta=0.01,
        epsilon=0.2,
        epsilon_high=0.3,
        max_completion_length=12,
        temperature=1.0,
        micro_batch_size=micro,
    )
    log: list[dict[str, float]] = []
    train_grpo(
        model,
        tokenizer,
        rows,
        [length_reward],
        role,
        tmp_path / f"out{micro}",
        seed=3,
        log=log.append,
    )
    delta = torch.cat([(p.detach() - before[n]).flatten() for n, p in model.named_parameters()])
    (step,) = [row for row in log if "grad_norm" in row]
    return step, delta


@pytest.mark.slow
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


def test_micro_batch_must_divide_the_update_batch():
    # update = 2 prompts x G 4 = 8 sequences: 3 does not tile it
    with pytest.raises(ConfigError, match=r"solver.micro_batch_size=3: must divide .* = 8"):
        SolverConfig(steps=1, group_size=4, prompts_per_step=2, micro_batch_size=3)


def test_a_step_samples_one_rollout_and_makes_rollout_over_update_updates(
    tiny_checkpoint, tmp_path
):
    # rollout 8 prompts x G 2 = 16 completions, updates of 2 prompts -> 8 / 2 = 4 updates
    model = load_model(str(tiny_checkpoint), dtype="float32", device="cpu")
    tokenizer = load_tokenizer(str(tiny_checkpoint))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = [{"prompt": [{"role": "user", "content": f"Count to {i}."}]} for i in range(8)]
    role = SolverConfig(
        steps=1,
        group_size=2,
        prompts_per_step=8,
        prompts_per_update=2,
        learning_rate=1e-3,
        max_completion_length=8,
        micro_batch_size=2,
    )
    calls: list[int] = []

    def counting_reward(prompts, completions, **kwargs):
        calls.append(len(completions))
        return length_reward(prompts, completions)

    optimizer_steps = []
    hook = register_optimizer_step_post_hook(lambda opt, args, kwargs: optimizer_steps.append(1))
    try:
        stats = train_grpo(
            model, tokenizer, rows, [counting_reward], role, tmp_path / "out", seed=5
        )
    finally:
        hook.remove()
    assert calls == [16]  # one reward call over the whole rollout: B = 8 x 2
    assert len(optimizer_steps) == 4
    assert stats.steps == 4
    moved = sum(float((p.detach() - before[n]).abs().sum()) for n, p in model.named_parameters())
    assert moved > 0


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_recipe_sets_the_algorithm_explicitly(path, tmp_path):
    # each option that changes the algorithm is rzero's value or the recipe's, never TRL's
    cfg = load_config(path)
    for role in (r for r in (cfg.challenger, cfg.solver) if r is not None):
        args = grpo_config(
            role, tmp_path, seed=0, model_cfg=cfg.model, generation_cfg=cfg.generation
        )
        for key, value in ALGORITHM_OPTIONS.items():
            assert getattr(args, key) == role.trl.get(key, value), (role.section, key)
        assert args.max_steps == role.steps * role.updates_per_step
        # the rollout is TRL's generation batch: prompts_per_step x G (one process here)
        assert args.generation_batch_size == role.prompts_per_step * role.group_size


@pytest.mark.parametrize("name", ["r-zero-qwen3-4b.yaml", "r-zero-reference.yaml"])
def test_gpu_recipes_follow_the_official_optimiser(name, tmp_path):
    cfg = load_config(Path(__file__).parents[2] / "configs" / name)
    args = {
        role.section: grpo_config(
            role, tmp_path, seed=0, model_cfg=cfg.model, generation_cfg=cfg.generation
        )
        for role in (cfg.challenger, cfg.solver)
    }
    assert args["solver"].loss_type == "grpo"  # per-sequence average
    for a in args.values():
        assert (a.weight_decay, a.top_p, a.max_grad_norm) == (0.01, 0.99, 1.0)
        assert a.use_vllm and not a.vllm_importance_sampling_correction
        assert a.use_bias_correction_kl is False
    # 5 steps x 512 / 16 = 160 challenger updates; 15 steps x 512 / 128 = 60 solver updates
    assert (args["challenger"].max_steps, args["solver"].max_steps) == (160, 60)


def test_bf16_on_cpu_trains_fp32_weights_by_exactly_the_adam_update(
    tiny_checkpoint, tmp_path, monkeypatch
):
    import trl

    import rzero.generation.decoding

    trainers, samplers = [], []

    class Recorded(trl.GRPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            trainers.append(self)

    def recorded_decode(model, *args, **kwargs):
        samplers.append(model.dtype)
        return decode(model, *args, **kwargs)

    decode = rzero.generation.decoding.decode
    monkeypatch.setattr(trl, "GRPOTrainer", Recorded)
    monkeypatch.setattr(rzero.generation.decoding, "decode", recorded_decode)
    model = load_model(str(tiny_checkpoint), dtype="float32", device="cpu")
    tokenizer = load_tokenizer(str(tiny_checkpoint))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    computed = []  # the dtype a layer computes in, in passes that build a graph
    model.model.layers[0].mlp.down_proj.register_forward_hook(
        lambda module, args, out: computed.append(out.dtype) if torch.is_grad_enabled() else None
    )
    rows = [{"prompt": [{"role": "user", "content": f"Say a number {i}."}]} for i in range(2)]
    role = SolverConfig(
        steps=1,
        group_size=4,
        prompts_per_step=2,
        learning_rate=1e-6,
        beta=0.01,
        epsilon=0.2,
        epsilon_high=0.3,
        max_completion_length=12,
        temperature=1.0,
    )
    model_cfg = ModelConfig(
        dtype="float32", device="cpu", generation_dtype="bfloat16", train_compute="bfloat16"
    )
    train_grpo(
        model, tokenizer, rows, [length_reward], role, tmp_path / "out", seed=3, model_cfg=model_cfg
    )

    # training computed in bf16 (autocast); the rollout went through rzero's decode loop on
    # a bf16 copy; generate is restored
    assert computed and set(computed) == {torch.bfloat16}
    assert samplers == [torch.bfloat16]
    assert "generate" not in vars(model)
    optimizer = trainers[0].optimizer
    group = optimizer.param_groups[0]
    beta1, beta2 = group["betas"]
    moved = small = total = 0
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32
        state = optimizer.state[p]
        step = float(state["step"])
        # AdamW: p <- p (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps)
        m_hat = state["exp_avg"] / (1 - beta1**step)
        v_hat = state["exp_avg_sq"] / (1 - beta2**step)
        old = before[name]
        expected = -group["lr"] * (
            old * group["weight_decay"] + m_hat / (v_hat.sqrt() + group["eps"])
        )
        delta = p.detach() - old
        # equal up to rounding p_new to float32 (a few ulps of the weight)
        torch.testing.assert_close(
            delta, expected, rtol=1e-4, atol=4 * torch.finfo(torch.float32).eps * old.abs().max()
        )
        moved += int((delta != 0).sum())
        # a bf16 weight moves in steps of 2^-8 of its size: most 1e-6 updates fall below half
        small += int((expected.abs() < old.abs() * 2.0**-9).sum())
        total += p.numel()
    assert moved > 0.5 * total
    assert small > 0.5 * total  # so bf16 master weights would have dropped most of them


def test_bf16_training_on_cpu_refuses_bf16_weights(tiny_checkpoint, tmp_path):
    model = load_model(str(tiny_checkpoint), dtype="bfloat16", device="cpu")
    tokenizer = load_tokenizer(str(tiny_checkpoint))
    rows = [{"prompt": [{"role": "user", "content": "Hi"}]}]
    role = SolverConfig(
        steps=1,
        group_size=2,
        prompts_per_step=1,
        learning_rate=1e-6,
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.3,
        max_completion_length=4,
        temperature=1.0,
    )
    model_cfg = ModelConfig(dtype="bfloat16", device="cpu", train_compute="bfloat16")
    with pytest.raises(ValueError, match="needs the model in float32"):
        train_grpo(
            model, tokenizer, rows, [length_reward], role, tmp_path / "out", model_cfg=model_cfg
        )
