"""The solver task (run.task solver): GRPO for the solver alone on fixed questions, labelled
by the truth, the solver's own majority vote or the truth shuffled (`solver_task:`):

  questions.py  the question set (a benchmark draw or a JSONL file) and the three label sources
  curve.py      the well-formed count of every rollout and the development draw's curve
  run.py        the iterations (labelling, solver, evaluation) on the phase runner
  report.py     report.md / report.html of a run, and the table of a grid of runs
  plan.py       `rzero plan` for a solver-task recipe
"""

from __future__ import annotations

from pathlib import Path

from rzero.config import RZeroConfig


def run_solver_task(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for run.task solver; returns the finished run."""
    from rzero.solver_task.run import run_solver_task as run

    return run(cfg, run_dir, fresh=fresh)
