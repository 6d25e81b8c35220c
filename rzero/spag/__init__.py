"""SPAG, self-play of an adversarial language game (Cheng et al. 2024; seed 000 §2), on the
run engine:

  game.py   Adversarial Taboo's rules as pure code: the judge, guess parsing, the two word
            match modes, the spelling probe
  words.py  the target words (wordfreq), filtered, split so evaluation words never train
  play.py   the roles' prompts, model and scripted players, batched collection of games
  objective.py   the formulas: turn rewards, the offline self-play loss, imitation
  population.py  the zero-sum audit: win matrix, Bradley–Terry, non-transitivity,
                 exploitability
  train.py       the offline update's rows and trainer, imitation, the roles' gradients
  run.py         the epochs (games, train, tournament, evaluation) on the phase runner
  report.py      report.md / report.html of a SPAG run
  plan.py        `rzero plan` for a SPAG recipe
  layout.py      its run folder (`LAYOUT`)
"""

from __future__ import annotations

from pathlib import Path

from rzero.config import RZeroConfig
from rzero.rundir.folder import RunDir
from rzero.rundir.run import System
from rzero.spag.layout import LAYOUT


def iterate(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for SPAG; returns the finished run."""
    from rzero.spag.run import run_spag

    return run_spag(cfg, run_dir, fresh=fresh)


def plan(cfg: RZeroConfig, source: str | None = None) -> str:
    from rzero.spag.plan import spag_plan_markdown

    return spag_plan_markdown(cfg, source)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    from rzero.spag.report import rebuild as rebuild_report

    rebuild_report(run, cfg)


# the ablation (the paper's AlpacaSFT control, seed §2.1)
VARIANTS: dict[str, list[str]] = {
    # SPAG with one model in both roles (the paper)
    "spag": ["spag.objective=spag", "spag.roles=shared"],
    # the same updates per epoch spent on the SFT rows alone (the games are played, stored
    # and audited, and train nothing)
    "sft": ["spag.objective=sft", "spag.roles=shared"],
    # an attacker model and a defender model, each trained on its own role's turns (seed
    # §2.2: does one role's skill need the other's weights?); not among the defaults
    "separate_roles": ["spag.objective=spag", "spag.roles=separate"],
}

SYSTEM = System(
    layout=LAYOUT,
    iterate=iterate,
    plan=plan,
    rebuild=rebuild,
    variants=VARIANTS,
    default_variants=("spag", "sft"),
)
