"""rzero.training.preference against TRL itself, on a tiny Llama: `pair_logprobs` gives the
numbers DPOTrainer precomputes for its reference, TRL's sigmoid loss is `spin_loss` of them,
and both trainers update the weights for the planned number of updates."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from rzero.config import SpinConfig
from rzero.spin.objective import spin_loss
from rzero.training.preference import pair_logprobs, train_pairs, train_sft, updates_for

SYSTEM = {"role": "system", "content": "Solve it."}
PROMPTS = [
    [SYSTEM, {"role": "user", "content": f"What is {a} + {b}?"}]
    for a, b in [(2, 3), (10, 7), (4, 4), (31, 9), (6, 1), (12, 12)]
]
CHOSEN = [
    f"We compute {a} + {b} = {a + b}.\nThe answer is \\boxed{{{a + b}}}."
    for a, b in [(2, 3), (10, 7), (4, 4), (31, 9), (6, 1), (12, 12)]
]
REJECTED = ["5", "It is 18, I think.", "\\boxed{9}", "forty", "The answer is 7.", "24!!"]
SPIN = SpinConfig(
    batch_size=2,
    micro_batch_size=2,
    epochs=1.0,
    learning_rate=1e-3,
    optimizer="adamw_torch",
    warmup_ratio=0.0,
    max_length=96,
)


def _model(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


@pytest.mark.slow
def test_pair_logprobs_match_trls_reference_and_its_loss_is_spin_loss(
    tiny_checkpoint, tokenizer, tmp_path
):
    from trl import DPOConfig, DPOTrainer

    from rzero.training.preference import PAIR_OPTIONS, _preference_dataset

    model = _model(tiny_checkpoint)
    args = DPOConfig(
        output_dir=str(tmp_path / "dpo"),
        beta=0.3,
        max_length=96,
        per_device_train_batch_size=6,
        use_cpu=True,
        report_to=[],
        precompute_ref_batch_size=3,
        **{k: v for k, v in PAIR_OPTIONS.items() if k != "max_grad_norm"},
    )
    trainer = DPOTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        train_dataset=_preference_dataset(PROMPTS, CHOSEN, REJECTED),
    )
    ref_chosen = torch.tensor(trainer.train_dataset["ref_chosen_logps"], dtype=torch.float64)
    ref_rejected = torch.tensor(trainer.train_dataset["ref_rejected_logps"], dtype=torch.float64)
    chosen = pair_logprobs(model, tokenizer, PROMPTS, CHOSEN, max_length=96, batch_size=4)
    rejected = pair_logprobs(model, tokenizer, PROMPTS, REJECTED, max_length=96, batch_size=4)
    assert torch.allclose(
        torch.tensor([c for c, _ in chosen], dtype=torch.float64), ref_chosen, atol=5e-3
    )  # float32 sums, padded differently
    assert torch.allclose(
        torch.tensor([r for r, _ in rejected], dtype=torch.float64), ref_rejected, atol=5e-3
    )
    assert all(n > 5 for _, n in chosen)

    # perturb the policy, then TRL's loss on the whole batch == mean spin_loss of the pairs
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(PROMPTS))])
    model.train()
    trl_loss = trainer.compute_loss(model, batch).item()
    pc = torch.tensor(
        [c for c, _ in pair_logprobs(model, tokenizer, PROMPTS, CHOSEN, max_length=96)],
        dtype=torch.float64,
    )
    pr = torch.tensor(
        [r for r, _ in pair_logprobs(model, tokenizer, PROMPTS, REJECTED, max_length=96)],
        dtype=torch.float64,
    )
    ours = spin_loss(pc, pr, ref_chosen, ref_rejected, 0.3).mean().item()
    assert abs(trl_loss - ours) < 1e-3, (trl_loss, ours)


@pytest.mark.slow
def test_train_pairs_raises_the_chosen_margin_and_sft_the_chosen_likelihood(
    tiny_checkpoint, tokenizer, tmp_path
):
    def margin(model):
        c = pair_logprobs(model, tokenizer, PROMPTS, CHOSEN, max_length=96)
        r = pair_logprobs(model, tokenizer, PROMPTS, REJECTED, max_length=96)
        return sum(a for a, _ in c) - sum(b for b, _ in r)

    base = _model(tiny_checkpoint)
    before = margin(base)
    model = _model(tiny_checkpoint)
    out = train_pairs(
        model,
        tokenizer,
        PROMPTS,
        CHOSEN,
        REJECTED,
        SPIN,
        tmp_path / "w",
        lam=0.5,
        save_to=tmp_path / "spin",
    )
    assert out["updates"] == updates_for(6, SPIN) == 3 and len(out["train_log"]) == 3
    assert {"loss", "rewards/margins", "rewards/accuracies"} <= set(out["train_log"][0])
    assert margin(model) > before + 1.0
    assert (tmp_path / "spin" / "model.safetensors").is_file()

    sft = _model(tiny_checkpoint)
    likelihood = sum(a for a, _ in pair_logprobs(sft, tokenizer, PROMPTS, CHOSEN, max_length=96))
    out = train_sft(sft, tokenizer, PROMPTS, CHOSEN, SPIN, tmp_path / "s", updates=3)
    assert out["updates"] == 3
    after = sum(a for a, _ in pair_logprobs(sft, tokenizer, PROMPTS, CHOSEN, max_length=96))
    assert after > likelihood + 1.0
