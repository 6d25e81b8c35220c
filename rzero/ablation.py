"""Ablations (SPEC §2): variants of one recipe, each run as a normal resumable run.

`rzero ablate` runs the variants with the same base model, seed and sizes in OUT/<variant>
(rerunning the command resumes every one of them), then compares them with
rzero.reports.comparison.

Variants (`VARIANTS`):
    separate               R-Zero: challenger and solver keep their own weights
    shared                 Single-R-Zero: one model, both phases update it
    base_challenger        the solver learns from questions of the untrained challenger
    no_repetition_penalty  challenger reward without the BLEU-cluster penalty (lambda = 0)
    no_band_filter         every labelled question trains the solver, whatever its p_hat

SPIN's (a recipe with run.task spin; seed §1.3 and §6.1 ask for both controls):
    spin                   SPIN as the recipe sets it
    sft                    the same updates spent on plain SFT of the data answers
    one_opponent           one iteration against the base only, trained for as many updates
                           as all of the recipe's iterations together (no new opponent)

SPAG's (a recipe with run.task spag; the paper's AlpacaSFT control, seed §2.1):
    spag                   SPAG with one model in both roles (the paper)
    sft                    the same updates per epoch spent on the SFT rows alone (the games
                           are played, stored and audited, and train nothing)
    separate_roles         an attacker model and a defender model, each trained on its own
                           role's turns (seed §2.2: does one role's skill need the other's
                           weights?); not among the defaults

The solver task's (a recipe with run.task solver): the label source at a seed, the rest of
the recipe (questions, updates, learning rate) the same, so every variant spends the same
compute; the grid's table and curves go to OUT/grid.md and OUT/grid.html:
    truth-S                the questions' known answers (the positive control), seed S
    vote-S                 the base solver's majority vote over labeling.num_votes samples
    shuffled-S             the known answers shuffled across questions (the negative control)
  for S in 0, 1, 2; the defaults are truth at three seeds, vote and shuffled at seed 0.

Where we depart from the paper, and why: every variant but `shared` pins roles.shared=false,
so each ablation is "R-Zero minus one thing" even when the recipe itself sets shared weights.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from pathlib import Path

from rzero.config import ConfigError, RZeroConfig, apply_override, config_from_dict
from rzero.loop import run_iterations
from rzero.reports.comparison import compare
from rzero.rundir import RunDir
from rzero.solver_task.report import grid_report
from rzero.solver_task.run import run_solver_task
from rzero.spag.run import run_spag
from rzero.spin.plan import merged_pairs
from rzero.spin.run import run_spin

VARIANTS: dict[str, list[str]] = {
    "separate": ["roles.shared=false"],
    "shared": ["roles.shared=true"],
    "base_challenger": ["roles.shared=false", "roles.train_challenger=false"],
    "no_repetition_penalty": ["roles.shared=false", "challenger.repetition_lambda=0"],
    "no_band_filter": ["roles.shared=false", "labeling.filter=false"],
}
SPIN_VARIANTS: dict[str, list[str]] = {
    "spin": ["spin.objective=spin"],
    "sft": ["spin.objective=sft"],
    "one_opponent": ["spin.objective=spin", "run.iterations=1"],  # + epochs, `_overrides`
}
SPAG_VARIANTS: dict[str, list[str]] = {
    "spag": ["spag.objective=spag", "spag.roles=shared"],
    "sft": ["spag.objective=sft", "spag.roles=shared"],
    "separate_roles": ["spag.objective=spag", "spag.roles=separate"],
}
SOLVER_VARIANTS: dict[str, list[str]] = {
    f"{labels}-{seed}": [f"solver_task.labels={labels}", f"run.seed={seed}"]
    for labels in ("truth", "vote", "shuffled") for seed in (0, 1, 2)}
DEFAULT_VARIANTS = ("separate", "shared")
# the three label sources at seed 0 first, so the grid's first three runs are its contrast
DEFAULT_SOLVER_VARIANTS = ("truth-0", "vote-0", "shuffled-0", "truth-1", "truth-2")
DEFAULT_SPIN_VARIANTS = ("spin", "sft")
DEFAULT_SPAG_VARIANTS = ("spag", "sft")
DEFAULT_OUT = "runs/ablate"


def variants_for(task: str) -> dict[str, list[str]]:
    """The variants of a recipe of `task` (`run.task`)."""
    return {"spin": SPIN_VARIANTS, "spag": SPAG_VARIANTS,
            "solver": SOLVER_VARIANTS}.get(task, VARIANTS)


def default_variants(task: str) -> tuple[str, ...]:
    return {"spin": DEFAULT_SPIN_VARIANTS, "spag": DEFAULT_SPAG_VARIANTS,
            "solver": DEFAULT_SOLVER_VARIANTS}.get(task, DEFAULT_VARIANTS)


def _overrides(cfg: RZeroConfig, variant: str) -> list[str]:
    overrides = list(variants_for(cfg.run.task)[variant])
    if variant == "one_opponent":
        # the same optimiser updates as the whole recipe, all against the base (θ_0)
        from rzero.engine.preference import updates_for

        s = cfg.spin
        total = sum(updates_for(merged_pairs(cfg, k), s) for k in range(1, cfg.run.iterations + 1))
        overrides.append(f"spin.epochs={total * s.batch_size / s.prompts!r}")
    return overrides


def variant_config(cfg: RZeroConfig, variant: str) -> RZeroConfig:
    """`cfg` with the overrides of `variant` applied (validated like any config)."""
    allowed = variants_for(cfg.run.task)
    if variant not in allowed:
        raise ConfigError(f"variant {variant!r}: unknown for run.task={cfg.run.task!r}; "
                          f"allowed variants are {', '.join(allowed)}")
    raw = cfg.to_dict()
    for text in _overrides(cfg, variant):
        apply_override(raw, text)
    return config_from_dict(raw)


def parse_variants(text: str | None, task: str = "math") -> list[str]:
    """'separate, shared' -> ['separate', 'shared']; 'all' -> every variant of `task`; None:
    the task's defaults; checked."""
    allowed = variants_for(task)
    if text is None:
        return list(default_variants(task))
    names = [v.strip() for v in text.split(",") if v.strip()]
    if names == ["all"]:
        return list(allowed)
    if not names:
        raise ConfigError(f"--variants {text!r}: name at least one of {', '.join(allowed)}")
    unknown = [v for v in names if v not in allowed]
    if unknown:
        raise ConfigError(f"--variants: unknown variant(s) {', '.join(map(repr, unknown))} for "
                          f"run.task={task!r}; allowed: {', '.join(allowed)} (or 'all')")
    return list(dict.fromkeys(names))


def ablate(cfg: RZeroConfig, variants: list[str] | tuple[str, ...], out_dir: str | Path,
           fresh: bool = False) -> Path:
    """Run each variant in OUT/<variant> (resuming), then compare; returns comparison.md."""

    if not variants:
        raise ConfigError(f"ablate: no variants given; choose from "
                          f"{', '.join(variants_for(cfg.run.task))}")
    out_dir = Path(out_dir)
    configs: dict[str, RZeroConfig] = {}
    for variant in dict.fromkeys(variants):
        vcfg = variant_config(cfg, variant)
        configs[variant] = dataclasses.replace(
            vcfg, run=dataclasses.replace(vcfg.run, output_dir=str(out_dir / variant)))

    # -- before any work: every run dir must be new or resumable with its variant's config,
    #    so a conflict in the last variant does not surface after hours spent on the first
    if not fresh:
        for variant, vcfg in configs.items():
            RunDir(out_dir / variant).prepare(vcfg)
    by_fingerprint: dict[str, str] = {}
    for variant, vcfg in configs.items():
        twin = by_fingerprint.setdefault(vcfg.fingerprint(), variant)
        if twin != variant:
            print(f"ablate: warning: variants {twin} and {variant} have the same config "
                  f"(the recipe already sets what {variant} changes); their runs will match",
                  file=sys.stderr)

    # -- the runs, one after another (each is an ordinary resumable run)
    for i, (variant, vcfg) in enumerate(configs.items(), 1):
        run_dir = out_dir / variant
        print(f"ablate: variant {variant} ({i}/{len(configs)}): "
              f"{' '.join(_overrides(cfg, variant))} -> {run_dir}", flush=True)
        runner = {"spin": run_spin, "spag": run_spag,
                  "solver": run_solver_task}.get(cfg.run.task, run_iterations)
        runner(vcfg, run_dir, fresh=fresh)
        gc.collect()
        if cfg.run.task == "solver":  # the table grows run by run
            grid_report([out_dir / v for v in configs], out_dir)

    if cfg.run.task == "solver":
        return grid_report([out_dir / v for v in configs], out_dir)

    # -- one table over all of them
    paths = compare([out_dir / v for v in configs], out_dir)
    return paths["md"]
