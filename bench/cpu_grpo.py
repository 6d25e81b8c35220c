"""One GRPO step on CPU: float32 as before against bf16 compute with rzero's rollouts.

The embedded SmolLM2 trains one step of configs/tiny.yaml's shape (2 prompts x G 4, 160
completion tokens, micro-batches of 1) with a cheap reward, so the step is rollout +
reference and policy log-probs + backward + AdamW:

  (a) float32: `model.train_compute=float32`, TRL's rollouts through its own
      `model.generate` (the path before `rzero.generation.decoding`);
  (b) new: `train_compute=bfloat16` (autocast over float32 master weights) and rollouts
      through `rzero.generation.decoding` in `generation_dtype("auto")`.

The two run interleaved, `--repeats` times each, from the same checkpoint and seed; the best
wall time of each is compared (target >= 2x). Mean completion lengths are printed so that the
work done by each side can be compared.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import torch

import rzero.generation.decoding
from rzero.config import ModelConfig, SolverConfig
from rzero.engine.models import DEFAULT_MODEL, generation_dtype, load_model, load_tokenizer
from rzero.training.grpo import train_grpo

# requests for long answers: both sides then mostly run to max_completion_length, so their
# rollouts are of similar size (a step samples only 8 completions: lengths vary a lot)
QUESTIONS = [
    "Write a long, detailed story about a lighthouse keeper and a storm.",
    "Explain in detail, step by step, how to plan a garden for a whole year.",
]


def length_reward(prompts, completions, **kwargs) -> list[float]:
    """Cheap and varied within a group, so the advantages and the gradient are not zero."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(t) % 7) / 7.0 for t in texts]


def one_step(model_spec: str, fast: bool, args, out_dir: Path) -> tuple[float, float]:
    model = load_model(model_spec, dtype="float32", device="cpu")
    tokenizer = load_tokenizer(model_spec)
    rows = [{"prompt": [{"role": "user", "content": q}]} for q in QUESTIONS]
    role = SolverConfig(
        steps=1,
        group_size=args.group_size,
        prompts_per_step=len(QUESTIONS),
        learning_rate=1e-6,
        beta=0.01,
        epsilon=0.2,
        epsilon_high=0.3,
        max_completion_length=args.max_completion_length,
        temperature=1.0,
        micro_batch_size=args.micro_batch_size,
    )
    model_cfg = ModelConfig(
        dtype="float32",
        device="cpu",
        generation_dtype="auto" if fast else "float32",
        train_compute="bfloat16" if fast else "float32",
    )
    logs: list[dict[str, float]] = []
    real = rzero.generation.decoding.rollouts_through_decode
    if not fast:  # the reference: TRL's own model.generate
        rzero.generation.decoding.rollouts_through_decode = lambda model, dtype: (
            contextlib.nullcontext()
        )
    try:
        t0 = time.perf_counter()
        train_grpo(
            model,
            tokenizer,
            rows,
            [length_reward],
            role,
            out_dir,
            seed=0,
            model_cfg=model_cfg,
            log=logs.append,
        )
        seconds = time.perf_counter() - t0
    finally:
        rzero.generation.decoding.rollouts_through_decode = real
    lengths = [row["completions/mean_length"] for row in logs if "completions/mean_length" in row]
    return seconds, lengths[0] if lengths else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=160)
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
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

    from rzero.engine.models import resolve_model

    spec = resolve_model(args.model)
    print(
        f"one GRPO step: {len(QUESTIONS)} prompts x G {args.group_size}, max "
        f"{args.max_completion_length} completion tokens, micro-batches of "
        f"{args.micro_batch_size}; new path rollouts in {generation_dtype('auto', 'cpu')}; "
        f"torch threads {torch.get_num_threads()}"
    )
    best = {"float32": (float("inf"), 0.0), "new": (float("inf"), 0.0)}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name in best:
                seconds, length = one_step(spec, name == "new", args, Path(tmp) / f"{name}{r}")
                print(
                    f"  repeat {r} {name}: {seconds:.1f} s, mean completion {length:.0f} tokens",
                    flush=True,
                )
                if seconds < best[name][0]:
                    best[name] = (seconds, length)
    (ref, ref_len), (new, new_len) = best.values()
    print(f"float32 step: {ref:.1f} s (mean completion {ref_len:.0f} tokens)")
    print(f"new step:     {new:.1f} s (mean completion {new_len:.0f} tokens)")
    print(f"ratio {ref / new:.2f}x (target >= 2x)")


if __name__ == "__main__":
    main()
