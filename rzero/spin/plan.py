"""`rzero plan` for a SPIN recipe: what each iteration generates, trains and scores."""

from __future__ import annotations

from rzero.config import RZeroConfig
from rzero.render import markdown_table
from rzero.spin.objective import lambda_for
from rzero.training.preference import updates_for


def merged_pairs(cfg: RZeroConfig, k: int) -> int:
    """Pairs iteration k trains on: round(w_j · prompts) of each iteration j ≤ k in reach of
    `spin.pair_weights` (`rzero.spin.objective.merge_pairs`)."""
    s = cfg.spin
    return sum(round(w * s.prompts) for back, w in enumerate(s.pair_weights) if k - back >= 1)


def spin_plan_markdown(cfg: RZeroConfig, source: str | None = None) -> str:
    s, e = cfg.spin, cfg.eval
    rows = []
    for k in range(1, cfg.run.iterations + 1):
        pairs = merged_pairs(cfg, k)
        rows.append(
            [
                k,
                f"{s.prompts + s.heldout} ({s.prompts} training, {s.heldout} "
                f"held-out), ≤ {s.max_new_tokens} tokens, "
                + ("greedy" if s.temperature == 0 else f"temperature {s.temperature:g}"),
                pairs,
                f"{updates_for(pairs, s)} of {s.batch_size} pairs "
                f"({s.batch_size // s.micro_batch_size} micro-batches of "
                f"{s.micro_batch_size})",
                f"{lambda_for(k, s.lambdas):g}" if s.objective == "spin" else "– (SFT)",
                f"{s.heldout} pairs x {3 if s.discriminator_steps else 2} models",
                f"{', '.join(e.benchmarks)} ({e.limit or 'all'} items)" if e.enabled else "–",
            ]
        )
    what = "SPIN" if s.objective == "spin" else "the SFT control of SPIN"
    lines = [
        f"Plan of `{source or 'the defaults'}`: {what}, {cfg.run.iterations} iterations, "
        f"one process ({cfg.generation.backend} generation, training on "
        f"{cfg.model.device}).",
        "",
        markdown_table(
            [
                "iteration",
                "opponent answers",
                "pairs trained",
                "updates",
                "λ (β)",
                "held-out scoring",
                "evaluation",
            ],
            rows,
        ),
    ]
    start = "the base"
    once = []
    if s.plateau_updates:
        start = "θ_0"
        once.append(
            f"θ_0: SFT of the base on the training rows, at most {s.plateau_updates} updates "
            f"at a constant lr, greedy pass@1 on {s.plateau_dev_items} items of "
            f"`{s.plateau_dev}` every {s.plateau_every}, stopped after "
            f"{s.plateau_patience} scores without a new best; θ_0 is the best"
        )
    once.append(f"{start}'s evaluation and held-out log-likelihood (iteration 0)")
    if s.discriminator_steps:
        once.append(
            f"the frozen discriminator: {s.discriminator_steps} SFT updates of "
            f"{start} (iteration 0)"
        )
    lines += [
        "Once: " + "; ".join(once) + ".",
        f"Training: {s.epochs:g} epoch{'' if s.epochs == 1 else 's'} per iteration, lr {s.learning_rate:g} "
        f"({s.optimizer}, {s.lr_scheduler}, warm-up {s.warmup_ratio:g}), sequences cut "
        f"at {s.max_length} tokens.",
        "",
    ]
    return "\n".join(lines)
