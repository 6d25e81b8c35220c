"""Which pseudo-labelled questions of a run directory the judge sees (SPEC §3).

What is sampled (seeded, and stable when later iterations are added):
- from every challenger GRPO step (rows of `iter_KK/challenger_steps.jsonl` with a valid
  question and a label, grouped by (iteration, step)): `audit.per_step` distinct questions;
- from each iteration's labelled pool (`iter_KK/labelled.jsonl`, rows with a label): two
  independent samples of `audit.per_step`, one of the kept questions (the solver's training
  set) and one of all labelled questions, so each reported accuracy is a simple random sample
  of the set it describes. A question drawn twice is judged once.

The run directory is read through `RunDir`, like every other reader of a run; an iteration
without these files yet (iteration 0, or one still in its challenger phase) adds nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rzero.rundir import RunDir


@dataclass(frozen=True)
class AuditItem:
    source: str  # "step" | "labelled_kept" | "labelled_all"
    iteration: int
    step: int | None
    global_step: int | None
    question: str
    label: str
    p_hat: float
    kept: bool | None


def _sample(rows: list[dict[str, Any]], k: int, seed_text: str) -> list[dict[str, Any]]:
    """k distinct (question, label) rows, drawn with a seed that names the group.

    Seeding each group by its own name (not one stream for the whole run) keeps a group's
    sample unchanged when later iterations are added, so their verdicts stay cached.
    """
    distinct: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        distinct.setdefault((r["question"], str(r["label"])), r)
    pool = list(distinct.values())
    return random.Random(seed_text).sample(pool, min(k, len(pool)))


def select_items(run: RunDir | str | Path, per_step: int, seed: int) -> list[AuditItem]:
    """The audit sample of a run directory (see the module docstring)."""
    run = run if isinstance(run, RunDir) else RunDir(run)
    # challenger.steps, for logs that predate `global_step`
    per_iteration = run.config().challenger.steps
    items: list[AuditItem] = []
    for iteration in run.iterations():
        steps: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for r in run.rows(iteration, "challenger_steps"):
            if r.get("valid") and r.get("label") is not None and r.get("question"):
                group = (int(r.get("iteration", iteration)), int(r.get("step", 0)))
                steps.setdefault(group, []).append(r)
        for (it, step), rows in sorted(steps.items()):
            for r in _sample(rows, per_step, f"{seed}:step:{it}:{step}"):
                global_step = r.get("global_step")
                if global_step is None:
                    global_step = (it - 1) * per_iteration + step
                items.append(
                    AuditItem(
                        "step",
                        it,
                        step,
                        global_step,
                        r["question"],
                        str(r["label"]),
                        float(r["p_hat"]),
                        None,
                    )
                )
        labelled = [
            r
            for r in run.rows(iteration, "labelled")
            if r.get("label") is not None and r.get("question")
        ]
        for source, rows in (
            ("labelled_kept", [r for r in labelled if r.get("kept")]),
            ("labelled_all", labelled),
        ):
            for r in _sample(rows, per_step, f"{seed}:{source}:{iteration}"):
                items.append(
                    AuditItem(
                        source,
                        iteration,
                        None,
                        None,
                        r["question"],
                        str(r["label"]),
                        float(r["p_hat"]),
                        bool(r.get("kept")),
                    )
                )
    return items


def labelled_items(k: int, row: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    """Iteration k's labelled `row` as audit items: one in `labelled_all`, and one in
    `labelled_kept` too when the band kept it; `fields` are the judge's own (label, task,
    answer)."""
    kept = bool(row.get("kept"))
    sets = ("labelled_kept", "labelled_all") if kept else ("labelled_all",)
    return [
        dict(
            source=s,
            iteration=k,
            step=None,
            global_step=None,
            question=row["question"],
            p_hat=float(row["p_hat"]),
            kept=kept,
            **fields,
        )
        for s in sets
    ]
