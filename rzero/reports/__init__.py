"""What every system's report shares (each system's own is its `report.py`), and the
reports across runs.

    __init__.py    metrics.jsonl and best.json from the markers; committed markers and
                   phase times by iteration
    cells.py       table cells with intervals, the evaluation table, the audit's link
    headline.py    a run's finding in one line: report.md's first line, `rzero iterate`'s last
    comparison.py  `rzero compare`: runs side by side, paired differences with intervals
    comparison_page.py  its comparison.md, comparison.html and comparison.png
    contrasts.py   the variant contrasts of an ablation or sweep
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rzero.config import RZeroConfig
from rzero.io import write_json_atomic, write_jsonl_atomic
from rzero.rundir import RunDir

# a marker's per-step lists, as rows of metrics.jsonl
STEP_ROWS = (("steps", "challenger_step"), ("train_steps", "solver_step"))


def metrics_rows(run: RunDir, phases: Sequence[str]) -> list[dict[str, Any]]:
    """One row per committed phase, per GRPO step (``challenger_step``, and the code
    tier's ``solver_step``) and per optimiser update of a GRPO phase (``challenger_update``,
    ``solver_update``: TRL's log, kl, grad_norm, frac_reward_zero_std, ...), in run order, from the markers, so metrics.jsonl never holds a
    duplicated or missing row. A phase's row carries the warnings it recorded (``warning``:
    the loop's own, ``warnings``: the collapse watch's) and, when it stopped the run,
    ``stop``."""
    rows = []
    for k in run.iterations():
        for phase in phases:
            m = run.marker(k, phase)
            if m is None:
                continue
            for key, name in STEP_ROWS:
                rows += [{"iteration": k, "phase": name, **s} for s in m.get(key, [])]
            # TRL's log of every optimiser update of a GRPO phase
            rows += [
                {"iteration": k, "phase": f"{phase}_update", **u} for u in m.get("updates", [])
            ]
            rows.append(
                {
                    "iteration": k,
                    "phase": phase,
                    "seconds": m["seconds"],
                    **m.get("metrics", {}),
                    **{key: m[key] for key in ("warning", "warnings", "stop") if m.get(key)},
                }
            )
    return rows


def committed(run: RunDir, phases: Sequence[str]) -> dict[int, dict[str, dict[str, Any]]]:
    """{iteration: {phase: marker}} of `phases` committed so far, in run order."""
    return {
        k: {p: m for p in phases if (m := run.marker(k, p)) is not None} for k in run.iterations()
    }


def phase_times(run: RunDir, phases: Sequence[str]) -> tuple[list[str], list[str]]:
    """(one line per iteration: each phase's seconds and peak resident memory; every warning
    the markers recorded, the loop's own ``warning`` and the watch's ``warnings``)."""
    times, warnings = [], []
    for k, marks in committed(run, phases).items():
        parts = [
            f"{p} {m['seconds']:.0f}"
            + (f" ({m['peak_rss_gib']:.1f} GiB peak)" if m.get("peak_rss_gib") else "")
            for p, m in marks.items()
        ]
        if parts:
            times.append(f"iteration {k}: " + ", ".join(parts))
        warnings += [
            w
            for m in marks.values()
            for w in ([m["warning"]] if m.get("warning") else []) + m.get("warnings", [])
        ]
    return times, warnings


def write_metrics(run: RunDir, cfg: RZeroConfig, phases: Sequence[str]) -> None:
    """`metrics.jsonl` (the markers of `phases`, the system's) and, once a solver was
    evaluated, `best.json`."""
    write_jsonl_atomic(run.path / "metrics.jsonl", metrics_rows(run, phases))
    best = run.best_solver(cfg)
    if best is not None:
        write_json_atomic(run.path / "best.json", best)
