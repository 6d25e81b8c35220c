"""Tokens/s of the `hf` backend against a plain `model.generate` of the same batch.

40 sequences (10 prompts x 4 samples) x 128 new tokens with the embedded SmolLM2, sampled
with the same settings; each side runs `--repeats` times, interleaved, and the best run of
each is compared. Prints the ratio backend / plain (target >= 0.95).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from rzero.engine.models import DEFAULT_MODEL
from rzero.generation.backends import HFGenerator
from rzero.generation.interface import SamplingParams

PROMPTS = [
    f"Solve step by step: what is {a} times {b} plus {a + b}?"
    for a, b in zip(range(3, 13), range(17, 27), strict=True)
]


def plain_generate(model, tokenizer, rows: list[str], new_tokens: int, seed: int) -> int:
    """The reference: one batched generate call, left-padded, no rzero code."""
    tokenizer.padding_side = "left"
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": r}], add_generation_prompt=True, tokenize=False
        )
        for r in rows
    ]
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(
            **batch,
            do_sample=True,
            temperature=1.0,
            top_k=None,
            top_p=None,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=tokenizer.pad_token_id,
        )
    return int(out[:, batch["input_ids"].shape[1] :].numel())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    gen = HFGenerator.from_spec(args.model, batch_size=len(PROMPTS) * args.samples, device="cpu")
    # the same fixed length on both sides (min = max), so tokens/s compares like with like
    params = SamplingParams(
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        seed=0,
        max_new_tokens=args.new_tokens,
        min_new_tokens=args.new_tokens,
    )
    rows = [p for p in PROMPTS for _ in range(args.samples)]
    ours, plain = [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        n = plain_generate(gen.model, gen.tokenizer, rows, args.new_tokens, seed=r)
        plain.append(n / (time.perf_counter() - t0))
        before = gen.stats.new_tokens
        t0 = time.perf_counter()
        gen.generate(PROMPTS, args.samples, replace(params, seed=r))
        ours.append((gen.stats.new_tokens - before) / (time.perf_counter() - t0))
        print(f"repeat {r}: plain {plain[-1]:.1f} tok/s, hf backend {ours[-1]:.1f} tok/s")
    print(f"sequences: {len(rows)} x {args.new_tokens} new tokens")
    print(f"plain model.generate: {max(plain):.1f} tok/s (best of {args.repeats})")
    print(f"rzero hf backend:     {max(ours):.1f} tok/s (best of {args.repeats})")
    print(f"ratio hf/plain: {max(ours) / max(plain):.3f} (target >= 0.95)")


if __name__ == "__main__":
    main()
