"""LoRA for a role (`challenger.lora`, `solver.lora`; rzero.engine.lora): the config's one-line
errors, the merged weights the CPU rollouts sample with against peft's own forward, and a
GRPO phase that trains only the adapter and saves the merged model with the adapter beside
it."""

from __future__ import annotations

import copy

import pytest
import torch

from rzero.config import ConfigError, SolverConfig, load_config
from rzero.engine.lora import ADAPTER_DIR, has_adapter, lora_config, merged_parameters
from rzero.engine.models import load_model, load_tokenizer
from rzero.generation.decoding import sync_weights
from rzero.training.grpo import train_grpo


def test_the_lora_mapping_is_checked_in_one_line():
    cfg = load_config(None, ["solver.lora.r=8", "solver.lora.target_modules=[q_proj, v_proj]"])
    assert cfg.solver.lora == {"r": 8, "target_modules": ["q_proj", "v_proj"]}
    assert cfg.challenger.lora == {}
    for override, message in (
        (
            "solver.lora.rank=8",
            r"solver.lora.rank: not a LoRA setting; the keys are r, "
            r"alpha, dropout, target_modules, use_rslora",
        ),
        ("solver.lora.r=0", r"solver.lora.r=0: expected an integer >= 1"),
        ("solver.lora.dropout=1.5", r"solver.lora.dropout=1.5: expected a number in"),
        ("challenger.lora={alpha: 16}", r"challenger.lora=\{'alpha': 16\}: needs r"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_config(None, [override])
    # LoRA changes what is trained: another run, not a resume
    assert (
        load_config(None, ["solver.lora.r=8"]).fingerprint() != load_config(None, []).fingerprint()
    )
    cfg = lora_config({"r": 4})
    assert (cfg.r, cfg.lora_alpha, cfg.target_modules) == (4, 8, "all-linear")


def adapted(model, seed: int = 0):
    """`model` with LoRA adapters whose B is random (peft starts B at zero, which would make
    the merge trivially equal to the base)."""
    from peft import get_peft_model

    torch.manual_seed(seed)
    peft_model = get_peft_model(model, lora_config({"r": 4, "alpha": 8}))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    return peft_model


def test_the_merged_weights_give_peft_forward_on_random_inputs(tiny_checkpoint):
    model = load_model(str(tiny_checkpoint), dtype="float32", device="cpu")
    plain = copy.deepcopy(model)  # as the rollouts' sampling copy is made: before peft wraps
    peft_model = adapted(model)
    assert has_adapter(model) and not has_adapter(plain)
    sync_weights(model, plain)
    names = {n for n, _ in merged_parameters(model)}
    assert names == {n for n, _ in plain.named_parameters()}  # the base architecture's names
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        ids = torch.randint(0, model.config.vocab_size, (2, 9), generator=gen)
        with torch.no_grad():
            want = peft_model(input_ids=ids).logits
            got = plain(input_ids=ids).logits
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # and the adapter mattered: the base weights alone give other logits
    with torch.no_grad(), peft_model.disable_adapter():
        base = peft_model(input_ids=ids).logits
    assert (base - want).abs().max() > 1e-3


def length_reward(prompts, completions, **kwargs):
    text = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(t) % 7) / 7.0 for t in text]


def test_a_lora_phase_moves_only_the_adapter_and_saves_the_merged_model(tiny_checkpoint, tmp_path):
    from peft import PeftModel

    model = load_model(str(tiny_checkpoint), dtype="float32", device="cpu")
    tokenizer = load_tokenizer(str(tiny_checkpoint))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = [{"prompt": [{"role": "user", "content": f"Say a number {i}."}]} for i in range(2)]
    role = SolverConfig(
        steps=2,
        group_size=4,
        prompts_per_step=2,
        learning_rate=1e-2,
        max_completion_length=10,
        lora={"r": 4, "alpha": 8},
    )
    log: list[dict] = []
    out = tmp_path / "solver"
    train_grpo(
        model,
        tokenizer,
        rows,
        [length_reward],
        role,
        tmp_path / "work",
        seed=3,
        save_to=out,
        log=log.append,
    )
    assert any(row.get("grad_norm", 0) > 0 for row in log)
    # the checkpoint is merged (no adapter config at the top: a plain from_pretrained reads
    # it, as the frozen solver and `vllm serve` do) with the adapter beside it
    assert not (out / "adapter_config.json").exists()
    assert (out / ADAPTER_DIR / "adapter_config.json").is_file()
    merged = load_model(str(out), dtype="float32", device="cpu")
    after = dict(merged.named_parameters())
    assert after.keys() == before.keys()
    moved = {n for n in before if not torch.equal(after[n], before[n])}
    # only the adapted (linear) layers' weights changed; embeddings and norms did not
    assert moved and all(n.endswith("_proj.weight") for n in moved)
    assert not any("norm" in n or "embed" in n for n in moved)
    # the base weights under the adapter did not train: base + adapter is the merged model
    fresh = load_model(str(tiny_checkpoint), dtype="float32", device="cpu")
    for n, p in fresh.named_parameters():
        assert torch.equal(p, before[n])
    rebuilt = PeftModel.from_pretrained(fresh, str(out / ADAPTER_DIR))
    ids = torch.randint(
        0, fresh.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        torch.testing.assert_close(
            merged(input_ids=ids).logits, rebuilt(input_ids=ids).logits, rtol=1e-5, atol=1e-5
        )
