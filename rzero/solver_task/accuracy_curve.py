"""How right must pseudo-labels be (SPEC §13)? The label-accuracy curve of a solver-task grid:
the skill each run gained on the held-out benchmark against the label accuracy it trained on.

    curve_points    per finished run: its labels, seed, the exact accuracy of its kept labels,
                    and its last evaluation against the base (paired 95 % interval, McNemar p)
    vote_vs_random  the base's own vote labels against labels of about the same accuracy whose
                    errors fall on a seeded random subset (vote-S against noisy-0.2-S), paired
                    on the same evaluation items
    curve_panel     the figure: Δ points against label accuracy, one series per seed, the vote
                    arm marked apart, the earlier measured points (`rzero.audit.threshold.CURVE`)
                    beside them

No curve is fitted: the points are the measurements, and a reading names the arms that bracket
a threshold with their intervals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rzero.audit.threshold import CURVE
from rzero.io import write_bytes_atomic, write_text_atomic
from rzero.render import Panel, Series, errorbar_png, markdown_table
from rzero.reports.contrasts import paired_eval
from rzero.rundir import RunDir
from rzero.solver_task.report import pct, run_outcome


def curve_points(run_dirs: list[Path], benchmark: str = "easy") -> list[dict[str, Any]]:
    """One point per finished run of `run_dirs` (labels, seed, label accuracy of its kept
    labels, Δ on `benchmark` in points with its interval and McNemar p), by accuracy."""
    points = []
    for path in run_dirs:
        if not (path / "config.yaml").is_file():
            continue
        run = RunDir(path)
        outcome = (run_outcome(run) or {}).get(benchmark)
        lab = (run.marker(1, "labelling") or {}).get("metrics", {})
        accuracy = lab.get("kept_label_accuracy")
        if outcome is None or accuracy is None:
            continue
        d, cfg = outcome["difference"], run.config()
        points.append(
            {
                "run": path.name,
                "labels": cfg.solver_task.labels,
                "seed": cfg.run.seed,
                "accuracy": accuracy,
                "delta": 100 * d["delta"],
                "low": 100 * d["ci_low"],
                "high": 100 * d["ci_high"],
                "p": d.get("mcnemar_p"),
                "base": outcome["base"]["pass@1"],
                "trained": outcome["trained"]["pass@1"],
            }
        )
    return sorted(points, key=lambda p: p["accuracy"])


def _last_eval(run: RunDir) -> dict[str, Any] | None:
    """The last trained iteration's eval.json, when its eval phase is committed."""
    if not (run.path / "config.yaml").is_file() or not (ks := run.trained_iterations()):
        return None
    path = run.iter_dir(ks[-1]) / "eval" / "eval.json"
    if run.marker(ks[-1], "eval") is None or not path.is_file():
        return None
    return json.loads(path.read_text())


def vote_vs_random(vote: Path, noisy: Path, benchmark: str = "easy") -> dict[str, Any] | None:
    """The vote run's last evaluation minus the noisy run's, paired on the same items
    (`PairedDifference.to_dict()` of `benchmark`, in proportions), or None until both ran."""
    ea, eb = _last_eval(RunDir(noisy)), _last_eval(RunDir(vote))
    if ea is None or eb is None:
        return None
    paired = paired_eval(ea, eb)
    return None if paired is None else paired["benchmarks"].get(benchmark)


def curve_panel(points: list[dict[str, Any]]) -> Panel:
    """Δ points on the held-out benchmark against label accuracy: the grid's noisy arms per
    seed, its vote arms apart, and the earlier measured points not rerun in it."""
    series = []
    noisy = [p for p in points if p["labels"] == "noisy"]
    for seed in sorted({p["seed"] for p in noisy}):
        mine = [p for p in noisy if p["seed"] == seed]
        series.append(
            Series(
                f"labels of a chosen accuracy, seed {seed}",
                [p["accuracy"] for p in mine],
                [p["delta"] for p in mine],
                [p["low"] for p in mine],
                [p["high"] for p in mine],
            )
        )
    votes = [p for p in points if p["labels"] == "vote"]
    if votes:
        series.append(
            Series(
                "the base's own vote labels",
                [p["accuracy"] for p in votes],
                [p["delta"] for p in votes],
                [p["low"] for p in votes],
                [p["high"] for p in votes],
                fmt="D",
                color="tab:red",
            )
        )
    rerun = {p["run"] for p in points}
    earlier = [c for c in CURVE if c.run not in rerun]
    if earlier:
        series.append(
            Series(
                "earlier runs (truth, vote, shuffled; seed 0)",
                [c.accuracy for c in earlier],
                [c.delta for c in earlier],
                [c.low for c in earlier],
                [c.high for c in earlier],
                fmt="s",
                color="tab:gray",
            )
        )
    return Panel(
        "skill gained against label accuracy (equal solver compute)",
        "label accuracy (share of training labels right)",
        "Δ pass@1 on easy against the base (points, 95 %)",
        series,
        xticks=[0, 0.2, 0.4, 0.6, 0.8, 1.0],
    )


CURVE_HEADER = [
    "run",
    "labels",
    "seed",
    "label accuracy",
    "base",
    "trained",
    "Δ points [95 %], McNemar p",
]


def curve_report(run_dirs: list[Path], out_dir: Path) -> Path | None:
    """OUT/label-curve.md and OUT/label-accuracy.png for a grid with noisy-label arms (None,
    and nothing written, for a grid without): the curve's table, the figure, and the vote
    arm against the a = 0.2 arm of its seed paired on the same items."""
    points = curve_points(run_dirs)
    if not any(p["labels"] == "noisy" for p in points):
        return None
    rows = [
        [
            p["run"],
            p["labels"],
            str(p["seed"]),
            pct(p["accuracy"]),
            pct(p["base"]),
            pct(p["trained"]),
            f"{p['delta']:+.1f} [{p['low']:+.1f}, {p['high']:+.1f}], p "
            + ("–" if p["p"] is None else f"{p['p']:.2g}"),
        ]
        for p in points
    ]
    md = [
        "# The label-accuracy curve",
        "",
        "Each run's kept labels' exact accuracy and its last evaluation against the base, "
        "paired on the same items (bootstrap 95 % interval, exact McNemar p). No curve is "
        "fitted. The figure: label-accuracy.png.",
        "",
        markdown_table(CURVE_HEADER, rows).rstrip(),
        "",
    ]
    by_name = {p.name: p for p in run_dirs}
    for seed in sorted({p["seed"] for p in points}):
        vote, noisy = by_name.get(f"vote-{seed}"), by_name.get(f"noisy-0.2-{seed}")
        d = vote_vs_random(vote, noisy) if vote and noisy else None
        if d is not None:
            md.append(
                f"- seed {seed}: the base's own vote labels minus labels of accuracy 0.2 whose "
                f"errors fall at random: {100 * d['delta']:+.1f} points "
                f"[{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}] on the same items"
                + (f", McNemar p {d['mcnemar_p']:.2g}" if d.get("mcnemar_p") is not None else "")
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(
        out_dir / "label-accuracy.png", errorbar_png([curve_panel(points)], size=(8.0, 5.0))
    )
    write_text_atomic(out_dir / "label-curve.md", "\n".join(md) + "\n")
    return out_dir / "label-curve.md"
