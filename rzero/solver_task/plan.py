"""`rzero plan` for a solver-task recipe: what each iteration labels, trains and evaluates."""

from __future__ import annotations

from rzero.config import RZeroConfig
from rzero.config.schedule import role_schedule
from rzero.render import markdown_table


def solver_task_plan_markdown(cfg: RZeroConfig, source: str | None = None) -> str:
    t, s, e, lab = cfg.solver_task, cfg.solver, cfg.eval, cfg.labeling
    sch = role_schedule(s, 1)
    questions = f"`{t.questions}`" + (f", first {t.count}" if t.count else "")
    labels = {
        "truth": "their known answers",
        "vote": f"majority of {lab.num_votes} samples each (≤ {lab.max_new_tokens} "
        f"tokens, temperature {lab.temperature:g})" + (", kept in the band" if t.band else ""),
        "shuffled": "known answers shuffled across questions (a derangement)",
    }[t.labels]
    updates = s.steps * s.updates_per_step
    curve = (
        f"greedy pass@1 on {t.dev_items} items of `{t.dev}` at update 0 and every "
        f"{t.curve_every} ({updates // t.curve_every + 1} points)"
        if t.curve_every
        else "–"
    )
    rows = [
        ["labelling", f"{questions}: {labels}"],
        [
            "solver",
            f"{updates} updates of {s.update_prompts} questions x G {s.group_size} = "
            f"{s.update_prompts * s.group_size} completions (≤ "
            f"{s.max_completion_length} tokens, temperature {s.temperature:g}), "
            f"{sch.accumulation} micro-batch(es) of {sch.micro_batch}; lr "
            f"{s.learning_rate:g}, β {s.beta:g}; {updates * s.update_prompts * s.group_size:,} "
            f"completions in all",
        ],
        ["curve", curve],
        [
            "evaluation",
            f"{', '.join(e.benchmarks)} ({e.limit or 'all'} items), the base "
            f"once and each iteration's solver"
            if e.enabled
            else "–",
        ],
    ]
    return "\n".join(
        [
            f"Plan of `{source or 'the defaults'}`: the solver alone on fixed questions, "
            f"{cfg.run.iterations} iteration(s), one process ({cfg.generation.backend} "
            f"generation, training on {cfg.model.device}).",
            "",
            markdown_table(["per iteration", "what"], rows),
            "",
        ]
    )
