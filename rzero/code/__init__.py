"""The code tier's loops (SPEC §8, seed 003), selected by `run.task`:

  rzero_code.py  R-Zero's loop on deduction tasks; every pseudo-label checked by the executor
  azr.py         Absolute Zero: proposer/solver over deduction, abduction and induction
  rewards.py     R-Zero's challenger and pseudo-label rewards on code proposals
  votes.py       majority vote over predicted outputs; exact label accuracy, by p̂ bucket
  runner.py      the run folder (RunDir, same layout as the math loop) and the phase runner
  report.py      report.md / report.html of a code run

Model-written code runs only through `rzero.executor` (the sandbox); this package never
executes it itself.
"""

from __future__ import annotations

from pathlib import Path

from rzero.config import RZeroConfig


def run_code_iterations(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for run.task rzero_code or azr; returns the finished run."""
    if cfg.run.task == "azr":
        from rzero.code.azr import run_azr

        return run_azr(cfg, run_dir, fresh=fresh)
    if cfg.run.task == "rzero_code":
        from rzero.code.rzero_code import run_rzero_code

        return run_rzero_code(cfg, run_dir, fresh=fresh)
    raise ValueError(f"run.task={cfg.run.task!r} is not a code task (rzero_code, azr)")
