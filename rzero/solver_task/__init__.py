"""The solver task (`task: solver` in a recipe's `run:` section): GRPO for the solver alone
on fixed questions, labelled by the truth, the solver's own majority vote or the truth
shuffled (`solver_task:`):

  questions.py  the question set (a benchmark draw or a JSONL file) and the label sources (truth, vote, shuffled, noisy)
  curve.py      the well-formed count of every rollout and the development draw's curve
  run.py        the iterations (labelling, solver, evaluation) on the phase runner
  report.py     report.md / report.html of a run, and the table of a grid of runs
  accuracy_curve.py  the label-accuracy curve of a grid with noisy-label arms
  plan.py       `rzero plan` for a solver-task recipe
  layout.py     its run folder (`LAYOUT`)
"""

from __future__ import annotations

from pathlib import Path

from rzero.config import RZeroConfig
from rzero.rundir.folder import RunDir
from rzero.rundir.run import System
from rzero.solver_task.layout import LAYOUT


def iterate(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for the solver task; returns the finished run."""
    from rzero.solver_task.run import run_solver_task as run

    return run(cfg, run_dir, fresh=fresh)


def plan(cfg: RZeroConfig, source: str | None = None) -> str:
    from rzero.solver_task.plan import solver_task_plan_markdown

    return solver_task_plan_markdown(cfg, source)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    from rzero.solver_task.report import rebuild as rebuild_report

    rebuild_report(run, cfg)


def grid(run_dirs: list[Path], out_dir: Path) -> Path:
    from rzero.solver_task.accuracy_curve import curve_report
    from rzero.solver_task.report import grid_report

    curve_report(run_dirs, out_dir)  # a grid with noisy-label arms: the label-accuracy curve
    return grid_report(run_dirs, out_dir)


# the grid: the label source at a seed, the rest of the recipe (questions, updates, learning
# rate) the same, so every variant spends the same compute; truth-S (the known answers, the
# positive control), vote-S (the base solver's majority vote over labeling.num_votes
# samples), shuffled-S (the known answers shuffled across questions, the negative control)
VARIANTS: dict[str, list[str]] = {
    f"{labels}-{seed}": [f"solver_task.labels={labels}", f"run.seed={seed}"]
    for labels in ("truth", "vote", "shuffled")
    for seed in (0, 1, 2)
}

# How right must pseudo-labels be (SPEC §13)? Labels of an exact accuracy a at the recipe's
# budget (configs/learn-solver.yaml): noisy-A-S, a = A at seed S; the wrong labels are the base
# solver's own wrong votes. With truth (a = 1), vote (the base's own accuracy) and shuffled
# arms the curve's points; vote-0 is rerun beside them so it pairs with the a = 0.2 arm on the
# same items.
for _seed in (0, 1):
    for _a in ("0.2", "0.5", "0.7", "0.85"):
        VARIANTS[f"noisy-{_a}-{_seed}"] = [
            "solver_task.labels=noisy",
            f"solver_task.label_accuracy={_a}",
            f"run.seed={_seed}",
        ]
# in the order run: seed 0 across the range, then the middle of it again at seed 1
CURVE = (
    "noisy-0.5-0",
    "noisy-0.2-0",
    "noisy-0.7-0",
    "noisy-0.85-0",
    "vote-0",
    "noisy-0.5-1",
    "noisy-0.7-1",
)

# the label sources (truth, vote, shuffled, noisy) at seed 0 first, so the grid's first three runs are its contrast
SYSTEM = System(
    layout=LAYOUT,
    iterate=iterate,
    plan=plan,
    rebuild=rebuild,
    variants=VARIANTS,
    default_variants=("truth-0", "vote-0", "shuffled-0", "truth-1", "truth-2"),
    summary=grid,
    groups={"curve": CURVE},
)
