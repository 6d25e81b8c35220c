"""Ablations (SPEC §2): variants of one recipe, each run as a normal resumable run.

`rzero ablate` runs the variants with the same base model, seed and sizes in OUT/<variant>
(rerunning the command resumes every one of them), then compares them with
rzero.reports.comparison, or with the system's own table (`System.summary`: the solver
task's grid, OUT/grid.md and OUT/grid.html, rebuilt after every run).

Each system declares its variants and their defaults in its package (`System.variants`):
R-Zero's math loop (`rzero.math`: separate, shared, base_challenger, no_repetition_penalty,
no_band_filter), SPIN's (`rzero.spin`: spin, sft, one_opponent), SPAG's (`rzero.spag`: spag,
sft, separate_roles) and the solver task's (`rzero.solver_task`: truth-S, vote-S,
shuffled-S for S in 0, 1, 2).
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from collections.abc import Callable
from pathlib import Path

from rzero.config import ConfigError, RZeroConfig, apply_override, config_from_dict
from rzero.config.schema import sections_for
from rzero.reports.comparison import compare
from rzero.rundir.lock import RunLock
from rzero.rundir.record import keep_record, record_of
from rzero.rundir.run import System

DEFAULT_OUT = "runs/ablate"


def variant_config(system: System, cfg: RZeroConfig, variant: str) -> RZeroConfig:
    """`cfg` with the overrides of `variant` applied (validated like any config)."""
    allowed = system.variants
    if variant not in allowed:
        raise ConfigError(
            f"variant {variant!r}: unknown for a {system.name} recipe; "
            f"allowed variants are {', '.join(allowed)}"
        )
    raw = cfg.to_dict()
    for text in system.variant_overrides(cfg, variant):
        apply_override(raw, text)
        task = raw["run"].get("task", cfg.run.task)
        if task != cfg.run.task:  # an arm of another task: the recipe's sections it reads
            raw = {name: value for name, value in raw.items() if name in sections_for(task)}
    return config_from_dict(raw)


def parse_variants(system: System, text: str | None) -> list[str]:
    """'separate, shared' -> ['separate', 'shared']; 'all' -> every variant of `system`; the
    name of one of its groups -> that group's variants; None: its defaults; checked."""
    allowed = system.variants
    if not allowed:
        raise ConfigError(
            f"rzero ablate: a {system.name} recipe has no ablation variants; "
            "run it with rzero iterate"
        )
    if text is None:
        return list(system.default_variants)
    names = [v.strip() for v in text.split(",") if v.strip()]
    if names == ["all"]:
        return list(allowed)
    if len(names) == 1 and names[0] in system.groups:
        return list(system.groups[names[0]])
    if not names:
        raise ConfigError(f"--variants {text!r}: name at least one of {', '.join(allowed)}")
    unknown = [v for v in names if v not in allowed]
    if unknown:
        raise ConfigError(
            f"--variants: unknown variant(s) {', '.join(map(repr, unknown))} for "
            f"a {system.name} recipe; allowed: {', '.join(allowed)} (or 'all'"
            + "".join(f", {g!r}" for g in system.groups)
            + ")"
        )
    return list(dict.fromkeys(names))


def ablate(
    system: System,
    cfg: RZeroConfig,
    variants: list[str] | tuple[str, ...],
    out_dir: str | Path,
    fresh: bool = False,
    system_of: Callable[[RZeroConfig], System] | None = None,
    records: str | Path | None = None,
) -> Path:
    """Run each variant in OUT/<variant> (resuming), then compare; returns the table's
    Markdown file (comparison.md, or the system's own). One ablation writes OUT at a time
    (`RunLock` on OUT; each variant's run locks its own folder). A variant that sets another
    `run.task` (an arm of a control on the solver task) is run by `system_of(its config)`;
    a grid whose system has no table of its own (`System.summary`) writes the comparison of
    the arms finished so far (records included) after each arm, and ends with the whole.

    With `records`, each variant's finished run is kept as a record in RECORDS/<variant>
    (`rzero.rundir.record`: the folder without its weights), and a variant with no run in
    OUT but a record of its config there is read from the record instead of being run: a
    grid longer than one machine's life goes on from its records on the next machine."""
    if not variants:
        raise ConfigError(f"ablate: no variants given; choose from {', '.join(system.variants)}")
    if records is not None and Path(records).resolve() == Path(out_dir).resolve():
        raise ConfigError(f"ablate: --records {records} is --out itself; keep records elsewhere")
    with RunLock(out_dir):
        return _ablate(
            system,
            cfg,
            variants,
            Path(out_dir),
            fresh,
            system_of,
            Path(records) if records is not None else None,
        )


def _hand_audits(out_dir: Path, records: Path | None) -> list[Path]:
    """Where a grid's hand audits are kept (`rzero.audit.hand`): beside its runs, and beside
    its records, where they travel with the grid to a new machine."""
    return [out_dir] + ([records] if records is not None else [])


def _ablate(
    system: System,
    cfg: RZeroConfig,
    variants: list[str] | tuple[str, ...],
    out_dir: Path,
    fresh: bool,
    system_of: Callable[[RZeroConfig], System] | None,
    records: Path | None,
) -> Path:
    configs: dict[str, RZeroConfig] = {}
    systems: dict[str, System] = {}
    for variant in dict.fromkeys(variants):
        vcfg = variant_config(system, cfg, variant)
        configs[variant] = dataclasses.replace(
            vcfg, run=dataclasses.replace(vcfg.run, output_dir=str(out_dir / variant))
        )
        if vcfg.run.task == cfg.run.task:
            systems[variant] = system
        elif system_of is None:
            raise ConfigError(
                f"variant {variant!r}: sets run.task={vcfg.run.task!r}; "
                "ablate was given no way to run another task"
            )
        else:
            systems[variant] = system_of(vcfg)
    mixed = any(s is not system for s in systems.values())

    # -- where each variant's run is read from: its run dir, or (with no run there) its record
    where = {variant: out_dir / variant for variant in configs}
    if records is not None and not fresh:
        for variant, vcfg in configs.items():
            if (where[variant] / "config.yaml").is_file():
                continue
            why_not = record_of(records / variant, vcfg)
            if why_not is None:
                where[variant] = records / variant
            elif (records / variant).exists():
                print(f"ablate: variant {variant}: {why_not}; running it", file=sys.stderr)

    # -- before any work: every run dir must be new or resumable with its variant's config,
    #    so a conflict in the last variant does not surface after hours spent on the first
    if not fresh:
        for variant, vcfg in configs.items():
            if where[variant] == out_dir / variant:
                systems[variant].open(out_dir / variant).prepare(vcfg)
    by_fingerprint: dict[str, str] = {}
    for variant, vcfg in configs.items():
        twin = by_fingerprint.setdefault(vcfg.fingerprint(), variant)
        if twin != variant:
            print(
                f"ablate: warning: variants {twin} and {variant} have the same config "
                f"(the recipe already sets what {variant} changes); their runs will match",
                file=sys.stderr,
            )

    # -- the runs, one after another (each is an ordinary resumable run)
    for i, (variant, vcfg) in enumerate(configs.items(), 1):
        run_dir = out_dir / variant
        if where[variant] != run_dir:
            print(
                f"ablate: variant {variant} ({i}/{len(configs)}): finished before; read from "
                f"its record {where[variant]} (no weights: rerun it in {run_dir} to get them)",
                flush=True,
            )
            continue
        print(
            f"ablate: variant {variant} ({i}/{len(configs)}): "
            f"{' '.join(system.variant_overrides(cfg, variant))} -> {run_dir}",
            flush=True,
        )
        systems[variant].iterate(vcfg, run_dir, fresh=fresh)
        gc.collect()
        if records is not None:
            keep_record(run_dir, records / variant)
        if system.summary is not None and not mixed:  # the table grows run by run
            system.summary(list(where.values()), out_dir)
        elif i < len(configs):  # the comparison of the arms finished so far, records included
            done = [v for j, v in enumerate(configs, 1) if j <= i or where[v] != out_dir / v]
            compare([where[v] for v in done], system.name, out_dir, _hand_audits(out_dir, records))

    if system.summary is not None and not mixed:
        return system.summary(list(where.values()), out_dir)

    # -- one table over all of them
    paths = compare(list(where.values()), system.name, out_dir, _hand_audits(out_dir, records))
    return paths["md"]
