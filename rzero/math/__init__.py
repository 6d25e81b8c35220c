"""R-Zero's math system (seed 000 §4; SPEC §1): a challenger writes math questions, a frozen
solver's majority vote labels them, both train in alternation with GRPO.

    run.py       the alternating iterations, written as the paper's algorithm (`MathRun`)
    guidance.py  guided self-play (R-Few): anchors, grounded prompts, curriculum, mixture
    guided_report.py  its part of the report: the anchors and synthetic questions apart
    report.py    report.md and the rebuild after every commit (metrics.jsonl, best.json)
    page.py      report.html: the same with the curves inlined
    sections.py  the report's self-play sections: science card, collapse watch, challenger
                 trend, increments, co-error, cross-play, best solver, stop
    plan.py      what one iteration computes, counted before anything runs (`rzero plan`)
    estimate.py  its tokens and wall time on given hardware (`rzero plan --hardware`)
    layout.py    its run folder (`LAYOUT`)

`SYSTEM` is what the CLI and `rzero ablate` see of it (`LAYOUT`, its run folder; `VARIANTS`,
its ablation); importing this package loads no model or trainer.
"""

from __future__ import annotations

from pathlib import Path

from rzero.config import ConfigError, RZeroConfig
from rzero.math.layout import LAYOUT
from rzero.rundir.folder import RunDir
from rzero.rundir.run import System


def iterate(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
    """`rzero iterate` for R-Zero's math loop; returns the finished run."""
    from rzero.math.run import run_iterations

    return run_iterations(cfg, run_dir, fresh=fresh)


def plan(cfg: RZeroConfig, source: str | None = None) -> str:
    """`rzero plan`: what one iteration computes, then where each process runs."""
    from rzero.engine.launch import placement_markdown
    from rzero.math.plan import plan_markdown

    return plan_markdown(cfg, source) + "\n" + placement_markdown(cfg, source)


def estimate(cfg: RZeroConfig, hardware, length_fraction: float = 1.0, params_b=None) -> str:
    """`rzero plan --hardware H`: tokens and wall time per phase on that hardware."""
    from rzero.math.estimate import estimate_markdown

    return estimate_markdown(cfg, hardware, length_fraction, params_b)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    from rzero.math.report import rebuild as rebuild_report

    rebuild_report(run, cfg)


# the ablation (SPEC §2; `rzero ablate`). Where we depart from the paper, and why: every
# variant but `shared` pins roles.shared=false, so each ablation is "R-Zero minus one thing"
# even when the recipe itself sets shared weights.
VARIANTS: dict[str, list[str]] = {
    # R-Zero: challenger and solver keep their own weights
    "separate": ["roles.shared=false"],
    # Single-R-Zero: one model, both phases update it
    "shared": ["roles.shared=true"],
    # the solver learns from questions of the untrained challenger
    "base_challenger": ["roles.shared=false", "roles.train_challenger=false"],
    # the challenger's reward without the BLEU-cluster penalty (lambda = 0)
    "no_repetition_penalty": ["roles.shared=false", "challenger.repetition_lambda=0"],
    # every labelled question trains the solver, whatever its p_hat
    "no_band_filter": ["roles.shared=false", "labeling.filter=false"],
}

# R-Zero against its controls at equal solver compute (configs/cpu-learn.yaml; seed 000
# §4.3's claim that a challenger trained for uncertainty teaches more than questions it did
# not shape): per seed S, the loop, the loop with an untrained challenger, and the solver
# task (`rzero.solver_task`) on a fixed pool, a development draw, labelled by the frozen
# solver's majority vote (in R-Zero's band, as the loop's solver phase) or by the truth.
# Every arm trains the solver with the recipe's `solver:` section, so each makes the same
# updates of the same size per iteration; the pool arms take the recipe's shared sections
# (model, labeling, eval, run) and the pool below.
POOL = ["solver_task.questions=easy:7", "solver_task.count=240", "solver_task.dev=easy:8"]
# the R-Zero arms set `guidance.anchors=` (no guidance), so they are R-Zero's also when the
# recipe is guided self-play's (configs/r-few-learn.yaml) and read the same records
for _seed in (0, 1, 2):
    VARIANTS |= {
        f"loop-{_seed}": ["roles.shared=false", "guidance.anchors=", f"run.seed={_seed}"],
        f"untrained-{_seed}": [
            "roles.shared=false",
            "guidance.anchors=",
            "roles.train_challenger=false",
            f"run.seed={_seed}",
        ],
        f"pool-vote-{_seed}": [
            "run.task=solver",
            *POOL,
            "solver_task.labels=vote",
            "solver_task.band=true",
            f"run.seed={_seed}",
        ],
        f"pool-truth-{_seed}": [
            "run.task=solver",
            *POOL,
            "solver_task.labels=truth",
            f"run.seed={_seed}",
        ],
    }
# Guided self-play (R-Few, `rzero.math.guidance`) against the control that makes any gain
# readable, at equal solver compute (configs/r-few-learn.yaml): rfew-S, the recipe itself at
# seed S; anchors-S, the solver task on the same N = 32 anchors (the first 32 of easy:7) with
# their true answers and the recipe's `solver:` section; rfew-untrained-S, guided self-play
# whose challenger never trains (does training the grounded challenger add anything?).
ANCHORS = ["solver_task.questions=easy:7", "solver_task.count=32", "solver_task.dev=easy:8"]
for _seed in (0, 1, 2):
    VARIANTS |= {
        f"rfew-{_seed}": ["roles.shared=false", f"run.seed={_seed}"],
        f"rfew-untrained-{_seed}": [
            "roles.shared=false",
            "roles.train_challenger=false",
            f"run.seed={_seed}",
        ],
        f"anchors-{_seed}": [
            "run.task=solver",
            *ANCHORS,
            "solver_task.labels=truth",
            f"run.seed={_seed}",
        ],
    }
# its grid, in the order it is run: the decisive pair (the control first, the shorter run)
# at seeds 0, 1 and 2, which the verdicts need, then the untrained arm; last the references
# of the claims grid (R-Zero's loop, the pool with 240 true labels), read from their records
GUIDED = (
    "anchors-0",
    "rfew-0",
    "anchors-1",
    "rfew-1",
    "anchors-2",
    "rfew-2",
    "rfew-untrained-0",
    "loop-0",
    "loop-1",
    "loop-2",
    "pool-truth-0",
)
# the claim's grid, in the order it is run: the fixed pool with vote labels first, the
# reference every arm is compared against; every arm at seed 0, then the pair the claim
# turns on (the loop against the pool with vote labels) at seeds 1 and 2
# Single-R-Zero at the learning budget (seed 000 §4.3: shared weights make the labels and
# the model worse): loop-shared-0, paired with loop-0 on the same items
VARIANTS["loop-shared-0"] = ["roles.shared=true", "guidance.anchors=", "run.seed=0"]
CLAIMS = (
    "pool-vote-0",
    "loop-0",
    "untrained-0",
    "pool-truth-0",
    "pool-vote-1",
    "loop-1",
    "pool-vote-2",
    "loop-2",
    "loop-shared-0",
)


def overrides(cfg: RZeroConfig, variant: str) -> list[str]:
    """A variant's overrides; the guided arms need a recipe with a `guidance:` section (they
    take its anchors), so a recipe without one is an error rather than an R-Zero loop under
    R-Few's name."""
    if variant.startswith("rfew") and (cfg.guidance is None or not cfg.guidance.enabled):
        raise ConfigError(
            f"variant {variant!r}: guided self-play needs a recipe with guidance.anchors set "
            f"(configs/r-few-learn.yaml); this recipe has none"
        )
    return list(VARIANTS[variant])


SYSTEM = System(
    layout=LAYOUT,
    iterate=iterate,
    plan=plan,
    rebuild=rebuild,
    variants=VARIANTS,
    default_variants=("separate", "shared"),
    groups={"claims": CLAIMS, "guided": GUIDED},
    overrides=overrides,
    launcher=True,
    estimate=estimate,
)
