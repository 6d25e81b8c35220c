"""TRL's fused LM head on CPU: every position scored (TRL's default off Triton) against the
labelled positions only (`rzero.training.grpo.score_completions_only`).

The embedded SmolLM2, bf16 autocast over float32 weights (`model.train_compute` auto), runs
one forward and backward through the fused head for one micro-batch shaped like
configs/tiny.yaml's challenger phase: `--rows` sequences of a `--prompt`-token prompt and a
`--completion`-token completion, one row ending halfway. The two sides alternate,
`--repeats` times each; the best wall time of each is compared, and the per-token
log-probabilities and the head's gradient of the two sides are checked against each other.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch

from rzero.engine.models import DEFAULT_MODEL, load_model
from rzero.training.grpo import score_completions_only


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4)  # tiny.yaml's micro_batch_size
    ap.add_argument("--prompt", type=int, default=202)  # the challenger prompt's tokens
    ap.add_argument("--completion", type=int, default=128)  # max_completion_length
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = load_model(DEFAULT_MODEL, dtype="float32", device="cpu")
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))  # as GRPOTrainer does
    width = args.prompt + args.completion
    ids = torch.randint(0, model.config.vocab_size, (args.rows, width))
    attention = torch.ones_like(ids)
    attention[-1, args.prompt + args.completion // 2 :] = 0  # one completion ends halfway
    labels = ids.masked_fill(attention == 0, -100)
    labels[:, : args.prompt] = -100
    valid = labels[:, 1:] != -100

    def step(compact: bool):
        model.zero_grad()
        switch = score_completions_only() if compact else contextlib.nullcontext()
        t0 = time.perf_counter()
        with switch, torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True)
            (out.log_probs * valid).sum().backward()
        seconds = time.perf_counter() - t0
        return seconds, out.log_probs.detach() * valid, model.lm_head.weight.grad.clone()

    times = {False: [], True: []}
    results = {}
    for _ in range(args.repeats):
        for compact in (False, True):
            seconds, logps, grad = step(compact)
            times[compact].append(seconds)
            results[compact] = (logps, grad)
    (full_lp, full_g), (new_lp, new_g) = results[False], results[True]
    print(
        f"micro-batch: {args.rows} rows x ({args.prompt} prompt + {args.completion} "
        f"completion) tokens, {int(valid.sum())} of {valid.numel()} positions labelled; "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"every position (TRL's CPU default): best {min(times[False]):.2f} s of "
        f"{', '.join(f'{t:.2f}' for t in times[False])}"
    )
    print(
        f"labelled positions only           : best {min(times[True]):.2f} s of "
        f"{', '.join(f'{t:.2f}' for t in times[True])}"
    )
    print(f"ratio (every / labelled): {min(times[False]) / min(times[True]):.2f}x")
    print(
        f"max |log-prob difference| {float((full_lp - new_lp).abs().max()):.2e}; "
        f"max |head gradient difference| {float((full_g - new_g).abs().max()):.2e} "
        f"(largest entry {float(full_g.abs().max()):.2e})"
    )


if __name__ == "__main__":
    main()
