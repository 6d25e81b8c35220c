"""CPU generation: plain float32 `model.generate` (the reference) against the `hf` backend.

The same labelling-style rows (solver prompts x votes), sampled with temperature 1 and
top_k 40 as the recipe's labelling does, go through

  (a) `model.generate` on the float32 model, in left-padded batches of `--batch`, as before;
  (b) `HFGenerator` in the generation dtype `generation_dtype("auto")` picks here, at most
      `--batch` rows at once (with `--batches` > 1 its batch is refilled as rows finish).

Part 1 forces every row to `--new-tokens` (EOS suppressed on both sides) so tokens/s compares
like with like. Part 2 lets rows end at EOS (and, on (b), after the boxed answer); only real
tokens count, and the wall time of the same job is compared. The two sides run interleaved,
`--repeats` times each, and the best run of each is kept. Achieved GFLOP/s is
2 x parameters x tokens / s (+ attention: 4 x layers x context x hidden per token), also as a
share of an nn.Linear(576, 1536) bf16 on 512 rows timed in the same run.
"""

from __future__ import annotations

import argparse
import time

import torch

from rzero.engine.models import DEFAULT_MODEL, generation_dtype, load_model, load_tokenizer
from rzero.generation.backends import HFGenerator
from rzero.generation.interface import SamplingParams
from rzero.prompts.solver import solver_chat

QUESTIONS = [
    f"A class has {a} rows of {b} desks. {c} desks are empty. How many are taken?"
    for a, b, c in zip(range(3, 67), range(5, 69), range(2, 66), strict=True)
]


def linear_limit(dtype: torch.dtype, repeats: int = 30) -> float:
    """GFLOP/s of nn.Linear(576, 1536) on 512 rows: the model's matmul shape at its best."""
    lin = torch.nn.Linear(576, 1536).to(dtype)
    x = torch.randn(512, 576, dtype=dtype)
    with torch.inference_mode():
        for _ in range(3):
            lin(x)
        t0 = time.perf_counter()
        for _ in range(repeats):
            lin(x)
        seconds = time.perf_counter() - t0
    return 2 * 512 * 576 * 1536 * repeats / seconds / 1e9


def plain_generate(
    model, tokenizer, prompts: list[list[int]], params: SamplingParams, eos: bool
) -> list[list[int]]:
    """The reference: one left-padded `model.generate` call, no rzero code."""
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])  # [B, P]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # [B, P]
    torch.manual_seed(params.seed)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=params.temperature,
            top_k=params.top_k,
            top_p=None,
            max_new_tokens=params.max_new_tokens,
            min_new_tokens=None if eos else params.max_new_tokens,
            pad_token_id=pad,
            eos_token_id=tokenizer.eos_token_id,
        )
    new = out[:, width:].tolist()
    # real tokens: up to and including the first EOS
    end = tokenizer.eos_token_id
    return [row[: row.index(end) + 1] if eos and end in row else row for row in new]


def flops_per_token(model, context: float) -> float:
    c = model.config
    weights = 2 * sum(p.numel() for p in model.parameters())
    attention = 4 * c.num_hidden_layers * context * c.num_attention_heads * c.head_dim
    return weights + attention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--batch", type=int, default=48, help="sequences per batch (labelling)")
    parser.add_argument(
        "--batches",
        type=int,
        default=1,
        help="rows = batches x batch; the reference runs them batch by batch, "
        "the hf backend refills its batch as rows finish",
    )
    parser.add_argument("--new-tokens", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-eos", action="store_true", help="only part 1")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (0: torch's default); 1 is steadier on a busy "
        "machine, where two threads wait on each other",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    tokenizer = load_tokenizer(args.model)
    ref_model = load_model(args.model, dtype="float32", device="cpu").eval()
    dtype = generation_dtype("auto", "cpu")
    fast = HFGenerator.from_spec(args.model, batch_size=args.batch, dtype=dtype, device="cpu")
    votes = 4
    questions = QUESTIONS[: max(1, args.batch * args.batches // votes)]
    chats = [solver_chat(q) for q in questions]
    prompts = [p for p in fast.encode(chats) for _ in range(votes)]
    rows = len(prompts)
    mean_prompt = sum(len(p) for p in prompts) / rows
    print(
        f"{rows} rows ({len(questions)} solver prompts x {votes} votes, mean prompt "
        f"{mean_prompt:.0f} tokens), max {args.new_tokens} new tokens, temperature 1, "
        f"top_k 40; new path dtype {dtype}, torch threads {torch.get_num_threads()}"
    )
    limit = max(linear_limit(torch.bfloat16), linear_limit(torch.bfloat16))
    print(
        f"matmul limit: nn.Linear(576,1536) bf16 on 512 rows {limit:.0f} GFLOP/s, "
        f"float32 {linear_limit(torch.float32):.0f} GFLOP/s"
    )

    def ours(params: SamplingParams) -> list[int]:
        before = fast.stats.new_tokens
        fast.generate(chats, votes, params)
        return fast.stats.new_tokens - before

    parts = [("1: every row to max tokens", False)]
    if not args.skip_eos:
        parts.append(("2: EOS and boxed-answer stop on", True))
    for title, eos in parts:
        params = SamplingParams(
            temperature=1.0,
            top_k=40,
            max_new_tokens=args.new_tokens,
            min_new_tokens=0 if eos else args.new_tokens,
            stop_after_boxed=eos,
        )
        best = {"plain fp32 generate": (0.0, 0, 0.0), "rzero hf backend": (0.0, 0, 0.0)}
        for r in range(args.repeats):
            for name in best:
                seeded = SamplingParams(**{**params.__dict__, "seed": r})
                t0 = time.perf_counter()
                if name == "plain fp32 generate":
                    tokens = sum(
                        len(x)
                        for start in range(0, rows, args.batch)
                        for x in plain_generate(
                            ref_model, tokenizer, prompts[start : start + args.batch], seeded, eos
                        )
                    )
                else:
                    tokens = ours(seeded)
                seconds = time.perf_counter() - t0
                print(
                    f"  repeat {r} {name}: {tokens} tokens in {seconds:.1f} s = "
                    f"{tokens / seconds:.1f} tok/s",
                    flush=True,
                )
                if tokens / seconds > best[name][0]:
                    best[name] = (tokens / seconds, tokens, seconds)
        (ref_rate, _, ref_s), (new_rate, new_tokens, new_s) = best.values()
        context = mean_prompt + new_tokens / rows / 2
        gflops = new_rate * flops_per_token(fast.sampler, context) / 1e9
        weights_gflops = new_rate * 2 * sum(p.numel() for p in fast.sampler.parameters()) / 1e9
        print(f"part {title}:")
        print(f"  plain fp32 generate: {ref_rate:.1f} tok/s ({ref_s:.1f} s)")
        print(f"  rzero hf backend:    {new_rate:.1f} tok/s ({new_s:.1f} s)")
        print(
            f"  ratio {new_rate / ref_rate:.2f}x tok/s, {ref_s / new_s:.2f}x wall time; "
            f"new path {weights_gflops:.0f} GFLOP/s weights only, {gflops:.0f} with "
            f"attention = {gflops / limit:.0%} of the bf16 matmul limit"
        )


if __name__ == "__main__":
    main()
