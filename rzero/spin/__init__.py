"""SPIN, self-play fine-tuning (Chen et al. 2024; seed 000 §1.3), on the run engine:

  objective.py  the formulas: SPIN's loss, Theorem 5.4's update, the pair merge, λ per iteration
  data.py       the SFT set (embedded worked solutions, a JSONL file, a hub dataset) and its split
  dynamics.py   held-out discriminator accuracy, margin, loss and log-likelihood; the stall test
  run.py        the iterations (generate, train, dynamics, evaluation) on the phase runner
  report.py     report.md / report.html of a SPIN run
"""

from __future__ import annotations

from pathlib import Path

from rzero.config import RZeroConfig


def run_spin(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for run.task spin; returns the finished run."""
    from rzero.spin.run import run_spin as run

    return run(cfg, run_dir, fresh=fresh)
