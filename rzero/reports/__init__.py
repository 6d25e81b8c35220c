"""The run's reports, rebuilt from its folder's markers after every commit.

    markdown.py    report.md: the science card, the plan, the iteration table, the sections
    page.py        report.html: the same with the curves inlined
    sections.py    the self-play sections both share: science card, collapse watch,
                   challenger trend, increments, co-error, cross-play, best solver, stop
    plan.py        what one iteration computes, counted before anything runs (`rzero plan`)
    comparison.py  `rzero compare`: runs side by side, paired differences with intervals
    contrasts.py   the variant contrasts of an ablation or sweep

`rebuild(run, cfg)` is the math loop's `after_commit` hook; the code tier has its own
(`rzero.code.report`) on the same `metrics_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rzero.config import RZeroConfig
from rzero.io import write_json_atomic, write_jsonl_atomic, write_text_atomic
from rzero.reports.markdown import render_report, summary_table
from rzero.reports.page import render_html
from rzero.rundir import RunDir, phases_for

# a marker's per-step lists, as rows of metrics.jsonl
STEP_ROWS = (("steps", "challenger_step"), ("train_steps", "solver_step"))


def metrics_rows(run: RunDir, cfg: RZeroConfig) -> list[dict[str, Any]]:
    """One row per committed phase, per GRPO step (``challenger_step``, and the code
    tier's ``solver_step``) and per optimiser update of a GRPO phase (``challenger_update``,
    ``solver_update``: TRL's log, kl, grad_norm, frac_reward_zero_std, ...), in run order, from the markers, so metrics.jsonl never holds a
    duplicated or missing row. A phase's row carries the warnings it recorded (``warning``:
    the loop's own, ``warnings``: the collapse watch's) and, when it stopped the run,
    ``stop``."""
    rows = []
    for k in run.iterations():
        for phase in phases_for(cfg.run.task):
            m = run.marker(k, phase)
            if m is None:
                continue
            for key, name in STEP_ROWS:
                rows += [{"iteration": k, "phase": name, **s} for s in m.get(key, [])]
            # TRL's log of every optimiser update of a GRPO phase
            rows += [{"iteration": k, "phase": f"{phase}_update", **u}
                     for u in m.get("updates", [])]
            rows.append({"iteration": k, "phase": phase, "seconds": m["seconds"],
                         **m.get("metrics", {}),
                         **{key: m[key] for key in ("warning", "warnings", "stop")
                            if m.get(key)}})
    return rows


def committed(run: RunDir, phases: Sequence[str]) -> dict[int, dict[str, dict[str, Any]]]:
    """{iteration: {phase: marker}} of `phases` committed so far, in run order."""
    return {k: {p: m for p in phases if (m := run.marker(k, p)) is not None}
            for k in run.iterations()}


def phase_times(run: RunDir, phases: Sequence[str]) -> tuple[list[str], list[str]]:
    """(one line per iteration: each phase's seconds and peak resident memory; every warning
    the markers recorded, the loop's own ``warning`` and the watch's ``warnings``)."""
    times, warnings = [], []
    for k, marks in committed(run, phases).items():
        parts = [f"{p} {m['seconds']:.0f}" + (f" ({m['peak_rss_gib']:.1f} GiB peak)"
                                             if m.get("peak_rss_gib") else "")
                 for p, m in marks.items()]
        if parts:
            times.append(f"iteration {k}: " + ", ".join(parts))
        warnings += [w for m in marks.values()
                     for w in ([m["warning"]] if m.get("warning") else []) + m.get("warnings", [])]
    return times, warnings


def write_metrics(run: RunDir, cfg: RZeroConfig) -> None:
    """`metrics.jsonl` and, once a solver was evaluated, `best.json`."""
    write_jsonl_atomic(run.path / "metrics.jsonl", metrics_rows(run, cfg))
    best = run.best_solver(cfg)
    if best is not None:
        write_json_atomic(run.path / "best.json", best)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    """`metrics.jsonl`, `best.json`, `report.md` and `report.html` of a math run."""
    write_metrics(run, cfg)
    write_text_atomic(run.path / "report.md", render_report(run, cfg))
    write_text_atomic(run.path / "report.html", render_html(run, cfg, summary_table(run, cfg)))
