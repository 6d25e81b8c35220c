"""The code tier's two systems (SPEC §8, seed 003), the tasks rzero_code and azr:

  rzero_code.py  R-Zero's loop on deduction tasks; every pseudo-label checked by the executor
  azr.py         Absolute Zero: proposer/solver over deduction, abduction and induction
  rewards.py     R-Zero's challenger and pseudo-label rewards on code proposals
  votes.py       majority vote over predicted outputs; exact label accuracy, by p̂ bucket
  run.py         what both loops share on the run engine (`CodeRun`, a `rzero.rundir.Run`)
  report.py      report.md / report.html of a code run
  plan.py        `rzero plan` for a code recipe
  layout.py      its run folder (`RZERO_CODE`, `AZR`)

Model-written code runs only through `rzero.executor` (the sandbox); this package never
executes it itself.
"""

from __future__ import annotations

from pathlib import Path

from rzero.code.layout import AZR, RZERO_CODE
from rzero.config import RZeroConfig
from rzero.rundir.folder import RunDir
from rzero.rundir.run import System


def iterate_rzero_code(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for R-Zero's loop on code; returns the finished run."""
    from rzero.code.rzero_code import run_rzero_code

    return run_rzero_code(cfg, run_dir, fresh=fresh)


def iterate_azr(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for Absolute Zero; returns the finished run."""
    from rzero.code.azr import run_azr

    return run_azr(cfg, run_dir, fresh=fresh)


def plan(cfg: RZeroConfig, source: str | None = None) -> str:
    from rzero.code.plan import code_plan_markdown

    return code_plan_markdown(cfg, source)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    from rzero.code.report import rebuild as rebuild_report

    rebuild_report(run, cfg)


# no ablation variants: a code recipe runs with rzero iterate
RZERO_CODE_SYSTEM = System(
    layout=RZERO_CODE, iterate=iterate_rzero_code, plan=plan, rebuild=rebuild
)
AZR_SYSTEM = System(layout=AZR, iterate=iterate_azr, plan=plan, rebuild=rebuild)
