"""`rzero plan` for a SPAG recipe: what each epoch plays, trains and evaluates."""

from __future__ import annotations

from rzero.config import RZeroConfig
from rzero.render import markdown_table


def tournament_pairs(cfg: RZeroConfig, k: int) -> int:
    """Pairs the tournament of epoch k plays: the new player against every earlier one and
    the scripted anchor; the first tournament also plays the base against π_0 and both
    against the anchor."""
    earlier = 1 + bool(cfg.spag.teacher_url) + (k - 1)  # base, [imitation], epochs < k
    if k == 1:
        players = earlier + 2  # ... plus epoch_1 and the anchor
        return players * (players - 1) // 2
    return earlier + 1


def spag_plan_markdown(cfg: RZeroConfig, source: str | None = None) -> str:
    from rzero.spag.train import updates_for

    s, e = cfg.spag, cfg.eval
    rows = []
    for k in range(1, cfg.run.iterations + 1):
        pairs = tournament_pairs(cfg, k)
        most = s.games * s.max_turns  # winner turns: at most max_turns per decided game
        rows.append(
            [
                k,
                f"{s.games} games, ≤ {2 * s.max_turns} batched turns of ≤ "
                f"{s.max_new_tokens} tokens, temperature {s.temperature:g}",
                f"≤ {most} winner turns + {s.sft_rows} SFT rows; ≤ "
                f"{updates_for(most + s.sft_rows, s)} updates of {s.batch_size}",
                f"{pairs} pairs x 2 roles x {s.tournament_games} games"
                if s.tournament_games
                else "–",
                f"{', '.join(e.benchmarks)} ({e.limit or 'all'} items)" if e.enabled else "–",
            ]
        )
    roles = (
        "an attacker model and a defender model, each trained on its own role's turns"
        if s.roles == "separate"
        else "one model in both roles"
    )
    lines = [
        f"Plan of `{source or 'the defaults'}`: SPAG, {cfg.run.iterations} epochs, {roles}, "
        f"one process ({cfg.generation.backend} generation, training on "
        f"{cfg.model.device}).",
        "",
        markdown_table(
            ["epoch", "self-play", "update", "tournament (held-out words)", "evaluation"], rows
        ),
    ]
    once = ["the base model's evaluation (iteration 0)"] if e.enabled else []
    if s.teacher_url:
        once.append(
            f"imitation: {s.teacher_model} at {s.teacher_url} plays "
            f"{s.imitation_games} games; the base imitates its winners' turns "
            f"(lr {s.imitation_lr:g}, KL {s.imitation_kl:g})"
        )
    if once:
        lines.append("Once: " + "; ".join(once) + ".")
    lines += [
        f"Loss: decay {s.decay:g}, clip {s.clip:g}, KL {s.kl_coef:g}, SFT α {s.sft_coef:g} "
        f"on `{s.sft_data}`; lr {s.learning_rate:g} ({s.optimizer}, {s.lr_scheduler}, "
        f"warm-up {s.warmup_ratio:g}), rows cut at {s.max_length} tokens from the start; "
        f"words: {s.vocabulary} frequency ranks, {s.eval_share:g} held out for the "
        f"tournament; match `{s.match}`.",
        "",
    ]
    return "\n".join(lines)
