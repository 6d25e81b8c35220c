"""Table cells and tables the systems' reports share: numbers with their intervals, paired
differences, the evaluation table read from the watch's increment curve
(`iter_KK/eval/increments.json`), and the link to a run's label audit."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rzero.render import Html, Panel, Series, link
from rzero.reports import committed
from rzero.rundir import RunDir

Table = tuple[str, list[str], list[list[Any]]]


def num(value: Any, fmt: str = "{:.3f}") -> str:
    return fmt.format(value) if isinstance(value, (int, float)) else "–"


def ranged(value: Any, low: Any, high: Any) -> str:
    """`0.500 [0.300, 0.700]`, or the value alone without bounds, or – without a value."""
    if not isinstance(value, (int, float)):
        return "–"
    if not isinstance(low, (int, float)):
        return f"{value:.3f}"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def paired(d: dict[str, Any] | None) -> str:
    """A paired difference: `+0.031 [-0.020, +0.081], McNemar p 0.250`."""
    if not d:
        return "–"
    p = f", McNemar p {d['mcnemar_p']:.3f}" if d.get("mcnemar_p") is not None else ""
    return f"{d['delta']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]{p}"


def increment_curve(run: RunDir) -> dict[str, Any] | None:
    """The latest evaluation's increment curve (every evaluated iteration, paired)."""
    for k in reversed(run.trained_iterations()):
        path = run.iter_dir(k) / "eval" / "increments.json"
        if path.is_file():
            return json.loads(path.read_text())
    return None


def eval_table(run: RunDir, phases: Sequence[str]) -> Table:
    """pass@1 per iteration and benchmark, paired against the previous iteration and the
    base (the base alone before any trained iteration was evaluated)."""
    curve = increment_curve(run)
    rows = []
    if curve:
        for entry in curve["iterations"]:
            for name in curve["benchmarks"]:
                rows.append(
                    [
                        entry["iteration"],
                        name,
                        num(entry["pass@1"][name]),
                        paired(entry.get("vs_previous", {}).get(name)),
                        paired(entry.get("vs_base", {}).get(name)),
                    ]
                )
    else:
        for k, m in committed(run, phases).items():
            for key, v in m.get("eval", {}).get("metrics", {}).items():
                if key.endswith("/pass@1"):
                    rows.append([k, key[: -len("/pass@1")], num(v), "–", "–"])
    return (
        "Evaluation (paired against the previous iteration and the base)",
        ["iteration", "benchmark", "pass@1", "vs previous Δ [95 %]", "vs base Δ [95 %]"],
        rows,
    )


def audit_link(run: RunDir) -> list[Html]:
    """A paragraph linking the label audit's page (RUN_DIR/audit/report.html, every judged
    item) once `rzero audit` or the loop's audit phase wrote it; nothing before."""
    if not (run.path / "audit" / "report.html").is_file():
        return []
    return [
        Html(
            f"<p>Label audit by the judge, every judged item: "
            f"{link('audit/report.html', 'audit/report.html')}</p>"
        )
    ]


def update_panel(run: RunDir, phase: str, title: str) -> Panel:
    """TRL's log of every optimiser update of a GRPO phase (the markers' ``updates``), over
    the run's iterations in turn: the mean reward and the share of groups whose answers all
    scored alike (``frac_reward_zero_std``, which carry no gradient). The axis reaches
    below 0 when a reward does (a format penalty)."""
    series, start, lowest = [], 0, 0.0
    for k in run.trained_iterations():
        marker = run.marker(k, phase) or {}
        log = marker.get("updates", marker.get("train_log", []))  # train_log: older runs
        x = [start + i + 1 for i in range(len(log))]
        start += len(log)
        if not log:
            continue
        reward = [r.get("reward", 0.0) for r in log]
        lowest = min(lowest, *reward)
        series.append(Series(f"iteration {k}: reward", x, reward, fmt="o-"))
        series.append(
            Series(
                f"iteration {k}: groups with no reward variance",
                x,
                [r.get("frac_reward_zero_std", 0.0) for r in log],
                fmt="x:",
            )
        )
    return Panel(
        title,
        "update",
        "mean reward / share",
        series,
        ylim=(min(0.0, lowest - 0.05), 1.05),
        empty_text=f"the {phase} phase did not train",
    )
