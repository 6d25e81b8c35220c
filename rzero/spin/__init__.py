"""SPIN, self-play fine-tuning (Chen et al. 2024; seed 000 §1.3), on the run engine:

  objective.py  the formulas: SPIN's loss, Theorem 5.4's update, the pair merge, λ per
                iteration
  dynamics.py   held-out discriminator accuracy, margin, loss and log-likelihood; the stall
                test
  run.py        the iterations (generate, train, dynamics, evaluation) on the phase runner
  report.py     report.md / report.html of a SPIN run
  plan.py       `rzero plan` for a SPIN recipe
  layout.py     its run folder (`LAYOUT`)

The SFT set it trains on (embedded worked solutions, a JSONL file, a hub dataset) is
`rzero.data.sft`'s. `SYSTEM` below is what the CLI and `rzero ablate` see of it.
"""

from __future__ import annotations

from pathlib import Path

from rzero.config import RZeroConfig
from rzero.rundir.folder import RunDir
from rzero.rundir.run import System
from rzero.spin.layout import LAYOUT


def iterate(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for SPIN; returns the finished run."""
    from rzero.spin.run import run_spin as run

    return run(cfg, run_dir, fresh=fresh)


def plan(cfg: RZeroConfig, source: str | None = None) -> str:
    from rzero.spin.plan import spin_plan_markdown

    return spin_plan_markdown(cfg, source)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    from rzero.spin.report import rebuild as rebuild_report

    rebuild_report(run, cfg)


# the ablation (seed §1.3 and §6.1 ask for both controls)
VARIANTS: dict[str, list[str]] = {
    "spin": ["spin.objective=spin"],  # SPIN as the recipe sets it
    "sft": ["spin.objective=sft"],  # the same updates spent on plain SFT of the data answers
    # one iteration against the base only, trained for as many updates as all of the
    # recipe's iterations together (no new opponent); its epochs in `overrides`
    "one_opponent": ["spin.objective=spin", "run.iterations=1"],
}


def overrides(cfg: RZeroConfig, variant: str) -> list[str]:
    out = list(VARIANTS[variant])
    if variant == "one_opponent":
        # the same optimiser updates as the whole recipe, all against the base (θ_0)
        from rzero.spin.plan import merged_pairs
        from rzero.training.preference import updates_for

        s = cfg.spin
        total = sum(updates_for(merged_pairs(cfg, k), s) for k in range(1, cfg.run.iterations + 1))
        out.append(f"spin.epochs={total * s.batch_size / s.prompts!r}")
    return out


SYSTEM = System(
    layout=LAYOUT,
    iterate=iterate,
    plan=plan,
    rebuild=rebuild,
    variants=VARIANTS,
    default_variants=("spin", "sft"),
    overrides=overrides,
)
