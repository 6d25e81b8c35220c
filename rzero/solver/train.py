"""The solver's GRPO phase: train on the kept questions with the pseudo-labels as answers."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rzero.config import RZeroConfig
from rzero.engine import distributed
from rzero.prompts.solver import solver_chat
from rzero.solver.rewards import SolverReward
from rzero.training.grpo import TrainStats, train_grpo


def train_solver(
    model, tokenizer, cfg: RZeroConfig, kept: list[dict[str, Any]], iteration: int, out_dir: Path
) -> TrainStats:
    """GRPO on `kept` labelled rows (each with `question` and `label`, and with a `source`
    where the rows mix sources, as guided self-play's do), reward `solver_reward`; the trained
    weights are saved to `out_dir`. Returns the timings and TRL's log of every update
    (`TrainStats.log`)."""
    rows = [
        {"prompt": solver_chat(r["question"], cfg.solver.prompt_file), "label": r["label"]}
        | ({"source": r["source"]} if "source" in r else {})
        for r in kept
    ]
    work = out_dir.with_name(".trainer_solver")
    reward = SolverReward(cfg.solver.reward, direction=cfg.labeling.equivalence)
    stats = train_grpo(
        model,
        tokenizer,
        rows,
        [reward],
        cfg.solver,
        work,
        seed=cfg.run.seed + 1000 + iteration,
        model_cfg=cfg.model,
        generation_cfg=cfg.generation,
        report_to=cfg.run.report_to,
        save_steps=cfg.run.save_steps,
        desc=f"iter {iteration} solver",
        save_to=out_dir,
    )
    if distributed.is_main():
        shutil.rmtree(work, ignore_errors=True)
    return stats
