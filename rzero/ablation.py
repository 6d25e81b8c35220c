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

Where we depart from the paper, and why: every variant but `shared` pins roles.shared=false,
so each ablation is "R-Zero minus one thing" even when the recipe itself sets shared weights.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from pathlib import Path

import yaml

from rzero.config import ConfigError, RZeroConfig, config_from_dict
from rzero.loop import run_iterations
from rzero.reports.comparison import compare
from rzero.rundir import RunDir

VARIANTS: dict[str, list[str]] = {
    "separate": ["roles.shared=false"],
    "shared": ["roles.shared=true"],
    "base_challenger": ["roles.shared=false", "roles.train_challenger=false"],
    "no_repetition_penalty": ["roles.shared=false", "challenger.repetition_lambda=0"],
    "no_band_filter": ["roles.shared=false", "labeling.filter=false"],
}
DEFAULT_VARIANTS = ("separate", "shared")
DEFAULT_OUT = "runs/ablate"


def variant_config(cfg: RZeroConfig, variant: str) -> RZeroConfig:
    """`cfg` with the overrides of `variant` applied (validated like any config)."""
    if variant not in VARIANTS:
        raise ConfigError(f"variant {variant!r}: unknown; allowed variants are "
                          f"{', '.join(VARIANTS)}")
    raw = cfg.to_dict()
    for text in VARIANTS[variant]:
        key, _, value = text.partition("=")
        section, name = key.split(".")
        raw[section][name] = yaml.safe_load(value)
    return config_from_dict(raw)


def parse_variants(text: str) -> list[str]:
    """'separate, shared' -> ['separate', 'shared']; 'all' -> every variant; checked."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    if names == ["all"]:
        return list(VARIANTS)
    if not names:
        raise ConfigError(f"--variants {text!r}: name at least one of {', '.join(VARIANTS)}")
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise ConfigError(f"--variants: unknown variant(s) {', '.join(map(repr, unknown))}; "
                          f"allowed: {', '.join(VARIANTS)} (or 'all')")
    return list(dict.fromkeys(names))


def ablate(cfg: RZeroConfig, variants: list[str] | tuple[str, ...], out_dir: str | Path,
           fresh: bool = False) -> Path:
    """Run each variant in OUT/<variant> (resuming), then compare; returns comparison.md."""

    if not variants:
        raise ConfigError(f"ablate: no variants given; choose from {', '.join(VARIANTS)}")
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
        print(f"ablate: variant {variant} ({i}/{len(configs)}): {' '.join(VARIANTS[variant])}"
              f" -> {run_dir}", flush=True)
        run_iterations(vcfg, run_dir, fresh=fresh)
        gc.collect()

    # -- one table over all of them
    paths = compare([out_dir / v for v in configs], out_dir)
    return paths["md"]
