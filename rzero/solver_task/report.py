"""`report.md` and `report.html` of a solver-task run, rebuilt from its markers after every
commit, and the measurement a grid of such runs is read by (`solver_outcome`).

Per run: the labels (source, kept, exact accuracy against the known answers), the training
(updates, reward, well-formed rate, the share of groups with no reward variance, seconds per
completion), and on every evaluated benchmark the base against the trained solver: greedy
pass@1, the well-formed rate and the accuracy among well-formed answers (format learnt
against arithmetic learnt), the paired difference with its 95 % interval and McNemar's p.
report.md opens with the run's finding in one line (`rzero.reports.headline`).
The figure draws TRL's log of every update and the development draw's curve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rzero.config import RZeroConfig
from rzero.io import write_text_atomic
from rzero.render import (
    Panel,
    Series,
    errorbar_png,
    figure,
    heading,
    html_page,
    html_table,
    markdown_table,
)
from rzero.reports import committed, phase_times, write_metrics
from rzero.reports.cells import num
from rzero.reports.headline import run_headline
from rzero.rundir import RunDir
from rzero.solver_task.layout import LAYOUT
from rzero.stats import paired_difference, wilson_interval


def solver_outcome(base: dict[str, Any], trained: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per benchmark of two greedy eval.json results on the same items (paired by id): n,
    pass@1 of each, their well-formed rates (a boxed answer) and accuracy among well-formed
    answers, and the paired difference trained − base (`paired_difference`: bootstrap 95 %
    interval, items up n01 and down n10, exact McNemar p)."""
    out: dict[str, dict[str, Any]] = {}
    names = dict.fromkeys(r["benchmark"] for r in trained["items"])
    for name in names:
        a = {r["id"]: r for r in base["items"] if r["benchmark"] == name}
        b = {r["id"]: r for r in trained["items"] if r["benchmark"] == name}
        ids = [i for i in b if i in a]
        if not ids:
            continue

        diff = paired_difference(
            [float(a[i]["correct"][0]) for i in ids], [float(b[i]["correct"][0]) for i in ids]
        )
        out[name] = {
            "n": len(ids),
            "base": _side(a, ids),
            "trained": _side(b, ids),
            "difference": diff.to_dict(),
        }
    return out


def _side(rows: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """pass@1, well-formed rate and accuracy among well-formed answers of one model's rows."""
    right = [bool(rows[i]["correct"][0]) for i in ids]
    formed = [rows[i]["predictions"][0] is not None for i in ids]
    n_formed = sum(formed)
    return {
        "pass@1": sum(right) / len(ids),
        "well_formed": n_formed / len(ids),
        "accuracy_well_formed": (sum(r for r, f in zip(right, formed, strict=True) if f) / n_formed)
        if n_formed
        else None,
    }


def _eval(run: RunDir, k: int) -> dict[str, Any] | None:
    path = run.iter_dir(k) / "eval" / "eval.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _evaluated(run: RunDir) -> list[tuple[int, dict[str, Any]]]:
    """(iteration, eval.json) of every trained iteration that was evaluated, in order."""
    evals = ((k, _eval(run, k)) for k in run.trained_iterations())
    return [(k, ev) for k, ev in evals if ev is not None]


def iteration_outcomes(run: RunDir) -> list[tuple[int, dict[str, dict[str, Any]]]]:
    """`solver_outcome` of the base (iteration 0) against each evaluated iteration, in order."""
    base = _eval(run, 0)
    return [(k, solver_outcome(base, ev)) for k, ev in _evaluated(run)] if base else []


def run_outcome(run: RunDir) -> dict[str, dict[str, Any]] | None:
    """`solver_outcome` of the base (iteration 0) against the last evaluated iteration."""
    base, evaluated = _eval(run, 0), _evaluated(run)
    return solver_outcome(base, evaluated[-1][1]) if base and evaluated else None


def pct(x: Any) -> str:
    return f"{100 * x:.1f} %" if isinstance(x, (int, float)) else "–"


def points(d: dict[str, Any]) -> str:
    """`+16.3 points [+11.9, +20.6]`, McNemar p: a paired difference in percentage points."""
    p = f"{d['mcnemar_p']:.2g}" if d.get("mcnemar_p") is not None else "–"
    return f"{100 * d['delta']:+.1f} [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}], p {p}"


OUTCOME_HEADER = [
    "iteration",
    "benchmark",
    "n",
    "base pass@1",
    "trained pass@1",
    "Δ points [95 %], McNemar p",
    "up / down",
    "well-formed base → trained",
    "accuracy among well-formed base → trained",
]


def outcome_rows(outcomes: list[tuple[int, dict[str, dict[str, Any]]]]) -> list[list[str]]:
    """A row per evaluated iteration and benchmark: the base against that iteration's solver."""
    rows = []
    for k, outcome in outcomes:
        for name, o in outcome.items():
            rows.append([k, name, *_outcome_cells(o)])
    return rows


def _outcome_cells(o: dict[str, Any]) -> list[Any]:
    d, a, b = o["difference"], o["base"], o["trained"]
    return [
        o["n"],
        pct(a["pass@1"]),
        pct(b["pass@1"]),
        points(d),
        f"{d.get('n01', '–')} / {d.get('n10', '–')}",
        f"{pct(a['well_formed'])} → {pct(b['well_formed'])}",
        f"{pct(a['accuracy_well_formed'])} → {pct(b['accuracy_well_formed'])}",
    ]


def _intro(cfg: RZeroConfig) -> list[str]:
    t, s = cfg.solver_task, cfg.solver
    source = {
        "truth": "their known answers (the positive control)",
        "vote": f"the solver's majority vote over {cfg.labeling.num_votes} samples "
        f"(R-Zero's solver phase, TTRL){' in the band' if t.band else ''}",
        "shuffled": "the known answers shuffled across questions (the negative control)",
        "noisy": f"labels of accuracy exactly {t.label_accuracy:g}: a seeded "
        f"{t.label_accuracy:.0%} of the questions keep their known answer, the others get the "
        "base solver's most common wrong vote (else another question's answer)",
    }[t.labels]
    return [
        "The solver alone, trained with GRPO on fixed questions labelled by " + source + ".",
        f"- questions `{t.questions}`{f' (first {t.count})' if t.count else ''}; "
        f"development draw `{t.dev}` ({t.dev_items} items)",
        f"- {s.steps * s.updates_per_step} updates of {s.update_prompts} questions x G "
        f"{s.group_size}, lr {s.learning_rate:g}, β {s.beta:g}, temperature "
        f"{s.temperature:g}, {s.max_completion_length} new tokens; TRL options {s.trl or '{}'}",
        f"- model `{cfg.model.name}`, {cfg.run.iterations} iteration(s), seed {cfg.run.seed}",
    ]


def label_rows(run: RunDir) -> list[list[str]]:
    rows = []
    for k, marks in committed(run, LAYOUT.phases).items():
        m = marks.get("labelling")
        if m is None:
            continue
        x = m["metrics"]
        rows.append(
            [
                k,
                m.get("labels", "–"),
                x["questions"],
                x["labelled"],
                x["kept"],
                pct(x["label_accuracy"]),
                pct(x["kept_label_accuracy"]),
            ]
        )
    return rows


def vote_share_rows(run: RunDir) -> list[list[str]]:
    """Per iteration and per value of the vote's share p̂ (the frozen solver's majority share
    over its m samples): how many questions had it, how many of their vote labels are the
    true answer (with the 95 % Wilson interval), and how many were kept. Only vote labels
    with a known answer have a row: this is where R-Zero's band, which keeps the middle
    values of p̂, is read against the labels' accuracy."""
    out = []
    for k, marks in committed(run, LAYOUT.phases).items():
        if "labelling" not in marks:
            continue
        groups: dict[float, list[dict[str, Any]]] = {}
        for r in run.rows(k, "labelled"):
            if r.get("p_hat") is not None and r["label_correct"] is not None:
                groups.setdefault(round(r["p_hat"], 4), []).append(r)
        for share in sorted(groups):
            rows = groups[share]
            right = sum(r["label_correct"] for r in rows)
            lo, hi = wilson_interval(right, len(rows))
            out.append(
                [
                    k,
                    f"{share:.3f}",
                    len(rows),
                    f"{right} ({pct(right / len(rows))})",
                    f"[{pct(lo)}, {pct(hi)}]",
                    sum(r["kept"] for r in rows),
                ]
            )
    return out


def training_rows(run: RunDir) -> list[list[str]]:
    rows = []
    for k, marks in committed(run, LAYOUT.phases).items():
        m = marks.get("solver")
        if m is None or m.get("skipped"):
            continue
        x = m["metrics"]
        rows.append(
            [
                k,
                x["updates"],
                num(x["mean_reward"]),
                num(x["final_reward"]),
                pct(x["final_well_formed"]),
                num(x["final_frac_reward_zero_std"]),
                f"{num(x.get('dev_first'))} → {num(x.get('dev_last'))}",
                num(x["seconds_per_completion"], "{:.2f}"),
            ]
        )
    return rows


LABEL_HEADER = [
    "iteration",
    "labels",
    "questions",
    "labelled",
    "kept",
    "label accuracy",
    "kept labels' accuracy",
]
VOTE_SHARE_HEADER = [
    "iteration",
    "vote share p̂",
    "questions",
    "labels right",
    "95 % Wilson",
    "kept",
]
TRAIN_HEADER = [
    "iteration",
    "updates",
    "mean reward",
    "reward, last fifth",
    "well-formed, last fifth",
    "zero-std groups, last fifth",
    "dev pass@1 first → last",
    "s per completion",
]


def tables(run: RunDir) -> list[tuple[str, list[str], list[list[str]]]]:
    votes = run.config().solver_task.labels == "vote"  # no share to read truth or shuffled by
    return [
        ("Labels", LABEL_HEADER, label_rows(run)),
        *(
            [("Vote labels' accuracy by the vote's share", VOTE_SHARE_HEADER, vote_share_rows(run))]
            if votes
            else []
        ),
        ("Training", TRAIN_HEADER, training_rows(run)),
        (
            "Base against trained (held out, greedy)",
            OUTCOME_HEADER,
            outcome_rows(iteration_outcomes(run)),
        ),
    ]


# a share's axis, a little beyond [0, 1] so that a curve at 0 or 1 is not drawn on the frame
_SHARE = (-0.03, 1.03)


def curve_panels(run: RunDir) -> list[Panel]:
    """TRL's log of every update and the development curve, over the run's updates."""
    reward, formed, zero, dev = [], [], [], []
    offset = 0
    for k in run.trained_iterations():
        m = run.marker(k, "solver")
        if m is None:
            continue
        ups = m.get("updates", [])
        x = [offset + int(u["update"]) for u in ups]
        reward.append(Series(f"iteration {k}", x, [u["reward"] for u in ups], fmt="-"))
        formed.append(
            Series(f"iteration {k}", x, [u.get("well_formed", 0.0) for u in ups], fmt="-")
        )
        zero.append(
            Series(f"iteration {k}", x, [u.get("frac_reward_zero_std", 0.0) for u in ups], fmt="-")
        )
        # one point per update, the first scored: a curve resumed before that fix re-scored
        # its start on the resumed weights under the label of update 0
        first: dict[int, dict] = {}
        for p in m.get("curve", []):
            first.setdefault(p["update"], p)
        pts = sorted(first.values(), key=lambda p: p["update"])
        dev.append(
            Series(
                f"iteration {k}",
                [offset + p["update"] for p in pts],
                [p["dev_pass@1"] for p in pts],
            )
        )
        offset += len(ups)
    return [
        Panel(
            "training reward (agreement with the label)",
            "update",
            "mean reward",
            reward,
            ylim=_SHARE,
        ),
        Panel("well-formed rollouts (boxed answer)", "update", "share", formed, ylim=_SHARE),
        Panel(
            "groups with no reward variance", "update", "frac_reward_zero_std", zero, ylim=_SHARE
        ),
        Panel(
            "development draw: greedy pass@1",
            "update",
            "pass@1",
            dev,
            ylim=_SHARE,
            empty_text="not scored during training\n(solver_task.curve_every)",
        ),
    ]


def render_markdown(run: RunDir, cfg: RZeroConfig) -> str:
    lines = [run_headline(run, cfg), "", f"# Solver task: {run.path.name}", "", *_intro(cfg), ""]
    for name, header, rows in tables(run):
        lines += [f"## {name}", "", markdown_table(header, rows) if rows else "(none yet)\n"]
    times, warnings = phase_times(run, LAYOUT.phases)
    lines += ["## Phase times (s) and peak memory", ""] + [f"- {t}" for t in times]
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    lines += [
        "",
        "Files: `metrics.jsonl` (a row per phase and per update: TRL's log), "
        "`iter_KK/labelled.jsonl` (every question, its label and whether the label is "
        "right), `iter_KK/solver/` (the checkpoint), `iter_KK/eval/`; report.html draws "
        "the curves.",
        "",
    ]
    return "\n".join(lines)


def render_html(run: RunDir, cfg: RZeroConfig) -> str:
    parts: list[Any] = [line.removeprefix("- ").replace("`", "") for line in _intro(cfg)]
    if run.trained_iterations():
        parts.append(
            figure(
                errorbar_png(curve_panels(run), size=(16.0, 4.2)),
                "Per update: training reward, well-formed rollouts and the share "
                "of groups whose G answers all scored alike (TRL's log); the "
                "development draw's greedy pass@1 every few updates.",
            )
        )
    for name, header, rows in tables(run):
        parts += [heading(name), html_table(header, rows) if rows else "(none yet)"]
    times, warnings = phase_times(run, LAYOUT.phases)
    parts += [heading("Phase times (s) and peak memory"), *times]
    if warnings:
        parts += [heading("Warnings"), *warnings]
    return html_page(f"Solver task: {run.path.name}", parts)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    """`metrics.jsonl`, `best.json` once a model was evaluated, `report.md`, `report.html`."""
    write_metrics(run, cfg, LAYOUT.phases)
    write_text_atomic(run.path / "report.md", render_markdown(run, cfg))
    write_text_atomic(run.path / "report.html", render_html(run, cfg))


def grid_rows(run_dirs: list[Path]) -> list[list[str]]:
    """One row per run of a grid (`rzero ablate` of a solver-task recipe) per benchmark."""
    rows = []
    for path in run_dirs:
        run = RunDir(path)
        if not (path / "config.yaml").is_file():
            continue
        cfg = run.config()
        outcome = run_outcome(run) or {}
        lab = run.marker(1, "labelling") or {}
        sol = run.marker(1, "solver") or {}
        for name, o in outcome.items():
            d = o["difference"]
            rows.append(
                [
                    path.name,
                    cfg.solver_task.labels,
                    cfg.run.seed,
                    name,
                    o["n"],
                    pct(o["base"]["pass@1"]),
                    pct(o["trained"]["pass@1"]),
                    points(d),
                    f"{pct(o['base']['accuracy_well_formed'])} → "
                    f"{pct(o['trained']['accuracy_well_formed'])}",
                    pct(lab.get("metrics", {}).get("kept_label_accuracy")),
                    num(sol.get("seconds"), "{:.0f}"),
                    _per_update(sol.get("metrics", {})),
                ]
            )
    return rows


GRID_HEADER = [
    "run",
    "labels",
    "seed",
    "benchmark",
    "n",
    "base",
    "trained",
    "Δ points [95 %], McNemar p",
    "accuracy among well-formed",
    "label accuracy",
    "solver phase (s)",
    "s per update (updates timed)",
]


def _per_update(m: dict[str, Any]) -> str:
    """Training seconds per update over the updates the phase's last process made: a
    phase resumed from a step checkpoint timed only those after it (older markers did not
    count them: –)."""
    if not m.get("timed_updates"):
        return "–"
    return f"{m['train_seconds'] / m['timed_updates']:.1f} ({m['timed_updates']})"


def grid_report(run_dirs: list[Path], out_dir: Path) -> Path:
    """`OUT/grid.md` and `OUT/grid.html`: the grid's table and each run's curves."""
    rows = grid_rows(run_dirs)
    md = [
        "# Solver task grid",
        "",
        "Greedy pass@1 on the held-out benchmark, base against each trained solver, "
        "paired by item (bootstrap 95 % interval of the difference in points, exact "
        "McNemar p); label accuracy is over the kept labels, against the known answers.",
        "",
        markdown_table(GRID_HEADER, rows) if rows else "(no run evaluated yet)",
        "",
        "Each run's report: " + ", ".join(f"`{p.name}/report.html`" for p in run_dirs),
        "",
    ]
    parts: list[Any] = [md[2], html_table(GRID_HEADER, rows) if rows else "(no run yet)"]
    for path in run_dirs:
        run = RunDir(path)
        if (path / "config.yaml").is_file() and run.trained_iterations():
            parts += [
                heading(path.name),
                figure(errorbar_png(curve_panels(run), size=(16.0, 4.2)), path.name),
            ]
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "grid.md", "\n".join(md))
    write_text_atomic(out_dir / "grid.html", html_page("Solver task grid", parts))
    return out_dir / "grid.md"
