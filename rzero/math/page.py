"""`report.html` of a run: the curves a person would rather look at than read.

One self-contained page (figures embedded, every model-written string escaped), rebuilt from
the markers with `report.md`:

- the challenger's mean reward and well-formed rate per GRPO step, across iterations;
- the vote-share histogram of each iteration's labelled pool, and the kept fraction;
- the solver's training reward per GRPO step;
- evaluation per iteration, per benchmark, with 95 % Wilson intervals, and the increment
  curve: each iteration's change against the base with its paired 95 % interval;
- the self-play audit (`rzero.math.sections`): the science card first, then the challenger's
  trend, the evaluation table with its flags, role co-error, and the cross-iteration matrix
  as a heat map;
- a sample of each iteration's labelled questions with their votes.
"""

from __future__ import annotations

from typing import Any

from rzero.config import RZeroConfig
from rzero.math import guided_report, sections
from rzero.render import (
    Html,
    Panel,
    Series,
    bullets,
    errorbar_png,
    figure,
    heading,
    html_page,
    html_table,
    paragraph,
    preformatted,
)
from rzero.reports.cells import audit_link, update_panel
from rzero.rundir import RunDir
from rzero.selfplay.crossplay import matrix_png
from rzero.stats import wilson_interval

SAMPLE_QUESTIONS = 6  # labelled questions shown per iteration


def _challenger_panels(run: RunDir, cfg: RZeroConfig) -> list[Panel]:
    reward, valid = [], []
    for k in run.trained_iterations():
        steps = (run.marker(k, "challenger") or {}).get("steps", [])
        x = [(k - 1) * cfg.challenger.steps + int(s["step"]) for s in steps]
        reward.append(Series(f"iteration {k}", x, [s["mean_reward"] for s in steps]))
        valid.append(Series(f"iteration {k}", x, [s["valid_rate"] for s in steps]))
    empty = (
        "no data"
        if cfg.roles.train_challenger
        else "the challenger does not train\n(roles.train_challenger is off)"
    )
    return [
        Panel(
            "challenger: mean reward per GRPO step",
            "global step",
            "mean reward",
            reward,
            ylim=(0, 1),
            empty_text=empty,
        ),
        Panel(
            "challenger: well-formed rate per GRPO step",
            "global step",
            "well-formed completions",
            valid,
            ylim=(0, 1),
            empty_text=empty,
        ),
    ]


def _pool_panels(run: RunDir, cfg: RZeroConfig) -> list[Panel]:
    hist, ks, kept = [], [], []
    m = cfg.labeling.num_votes
    for k in run.trained_iterations():
        lab = run.marker(k, "labelling")
        if lab is None:
            continue
        counts = lab.get("p_hat_histogram", {})
        total = sum(counts.values()) or 1
        hist.append(
            Series(
                f"iteration {k}", [int(v) / m for v in counts], [c / total for c in counts.values()]
            )
        )
        ks.append(k)
        kept.append(lab["metrics"]["kept_fraction"])
    return [
        Panel(
            "labelled pool: vote share p̂ of the largest group",
            "p̂",
            "share of questions",
            hist,
            ylim=(0, 1),
        ),
        Panel(
            "labelled pool: kept fraction (in the band)",
            "iteration",
            "kept",
            [Series("kept", ks, kept)],
            ylim=(0, 1),
            xticks=ks,
            width=0.6,
        ),
    ]


def eval_table(run: RunDir, cfg: RZeroConfig) -> dict[str, list[tuple[int, float, int]]]:
    """benchmark -> [(iteration, pass@1, n)] from the eval markers."""
    table: dict[str, list[tuple[int, float, int]]] = {}
    for k in run.iterations():
        metrics = (run.marker(k, "eval") or {}).get("metrics", {})
        for key, value in metrics.items():
            if key.endswith("/pass@1"):
                name = key[: -len("/pass@1")]
                table.setdefault(name, []).append((k, value, int(metrics.get(f"{name}/n", 0))))
    return table


def _eval_panel(run: RunDir, cfg: RZeroConfig) -> Panel:
    series = []
    for name, rows in eval_table(run, cfg).items():
        lows, highs = (
            zip(
                *(wilson_interval(round(p * n), n) if n else (p, p) for _, p, n in rows),
                strict=True,
            )
            if rows
            else ((), ())
        )
        series.append(
            Series(name, [k for k, _, _ in rows], [p for _, p, _ in rows], list(lows), list(highs))
        )
    ticks = list(range(0, cfg.run.iterations + 1))  # the axis of the whole run, as planned
    return Panel(
        "evaluation: pass@1 with 95 % Wilson intervals (0 = base model)",
        "iteration",
        "pass@1",
        series,
        ylim=(0, 1),
        xticks=ticks,
    )


def _questions(run: RunDir, cfg: RZeroConfig) -> list[Html]:
    parts: list[Html] = []
    for k in run.trained_iterations():
        if run.marker(k, "labelling") is None:
            continue
        rows = run.rows(k, "labelled")[:SAMPLE_QUESTIONS]
        parts.append(heading(f"Iteration {k}: the first {len(rows)} labelled questions", 3))
        parts.append(
            html_table(
                ["question", "votes (answer: count)", "label", "p̂", "kept"],
                [
                    [
                        preformatted(r["question"]),
                        ", ".join(f"{a}: {c}" for a, c in r.get("groups", {}).items())
                        or "no answer",
                        r["label"],
                        f"{r['p_hat']:.2f}",
                        "yes" if r["kept"] else "no",
                    ]
                    for r in rows
                ],
            )
        )
    return parts


def _increment_panel(run: RunDir, cfg: RZeroConfig) -> Panel:
    """Each iteration's change of pass@1 against the base, per benchmark and on average, with
    its paired 95 % bootstrap interval (0 = no change)."""
    series: dict[str, tuple[list[int], list[float], list[float], list[float]]] = {}
    for k in run.trained_iterations():
        inc = (run.marker(k, "eval") or {}).get("increment") or {}
        for name, d in inc.get("vs_base", {}).items():
            xs, ys, lo, hi = series.setdefault(name, ([], [], [], []))
            xs.append(k)
            ys.append(d["delta"])
            lo.append(d["ci_low"])
            hi.append(d["ci_high"])
    if len(series) == 2:  # one benchmark: its average is itself, drawn over it
        series.pop("average", None)
    ticks = list(range(1, cfg.run.iterations + 1))  # the axis of the whole run, as planned
    return Panel(
        "increment curve: pass@1 minus the base's, paired 95 % intervals",
        "iteration",
        "change against the base",
        [Series(name, *v, fmt="s--" if name == "average" else "o-") for name, v in series.items()],
        xticks=ticks,
        empty_text="needs the base and a trained solver evaluated",
    )


def _audit_parts(run: RunDir, cfg: RZeroConfig) -> list[Any]:

    parts: list[Any] = []
    if trend := sections.trend_lines(run, cfg):
        parts += [
            heading("Challenger trend (slope per GRPO step, 95 % interval)", 2),
            bullets([line.removeprefix("- ") for line in trend]),
        ]
    header, rows, flags = sections.eval_rows(run, cfg)
    if rows:
        parts += [
            heading("Evaluation and the increment curve", 2),
            paragraph(
                "pass@1 with its 95 % Wilson interval; changes against the previous "
                "iteration and the base on the same items, paired bootstrap 95 % "
                "intervals, exact McNemar p against the base."
            ),
            html_table(header, rows),
        ]
        parts.append(
            bullets(flags) if flags else paragraph("No falling or negative increment flagged.")
        )
    header, rows, notes = sections.coerror_rows(run, cfg)
    if rows or notes:
        parts.append(heading("Role co-error on known answers (seed §6.2)", 2))
        if rows:
            parts.append(html_table(header, rows))
        if notes:
            parts.append(bullets(notes))
    if (matrix := sections.crossplay(run, cfg)) is not None:
        parts += [
            heading("Cross-iteration matrix", 2),
            paragraph(
                "Solver i (0 = base) against pool j's labels: share of sampled "
                "questions whose majority answer matches (pool j was labelled by "
                "solver j − 1)."
            ),
            figure(
                matrix_png(matrix, title="agreement with each pool's label"),
                "solver x pool agreement",
            ),
        ]
        if matrix["flags"]:
            parts.append(bullets(matrix["flags"]))
    header, rows, lines, warnings = sections.collapse_rows(run, cfg)
    if rows or lines or warnings:
        parts += [heading("Collapse watch", 2), paragraph(sections.COLLAPSE_INTRO)]
        if rows:
            parts.append(html_table(header, rows))
        if lines:
            parts.append(bullets(lines))
        if warnings:
            parts += [paragraph(sections.WARNINGS_INTRO.replace("`", "")), bullets(warnings)]
    if (best := sections.best_line(run, cfg)) is not None:
        parts += [heading("Best solver", 2), paragraph(best.replace("`", ""))]
    return parts


def _guided_parts(run: RunDir, cfg: RZeroConfig) -> list[Any]:
    """Guided self-play: the anchors and the synthetic questions apart, per iteration, and a
    sample of the last iteration's kept synthetic questions with their labels and truth."""
    g = cfg.guidance
    header, rows = guided_report.sources_rows(run, cfg)
    parts: list[Any] = [
        heading("Guided self-play: anchors and synthetic questions", 2),
        paragraph(
            f"anchors from {g.anchors} ({g.count or 'all'}), {g.shots} in every challenger prompt; "
            f"{g.anchor_share:.0%} of the solver's prompt draws are anchors. "
            + guided_report.SOURCES_NOTE.replace("`", "")
        ),
    ]
    if not rows:
        return [*parts, paragraph("No iteration has been labelled yet.")]
    parts.append(html_table(header, rows))
    k = int(rows[-1][0])
    sample = guided_report.sample_rows(run, k)
    if sample:
        parts += [
            heading(f"Iteration {k}: kept synthetic questions, their labels and truth", 3),
            html_table(
                ["question", "vote label", "p̂", "exact answer", "label right"],
                [
                    [
                        preformatted(r["question"]),
                        str(r["label"]),
                        f"{r['p_hat']:.2f}",
                        "not computable" if r["truth"] is None else str(r["truth"]),
                        "–"
                        if r["label_correct"] is None
                        else ("yes" if r["label_correct"] else "no"),
                    ]
                    for r in sample
                ],
            ),
        ]
    return parts


def render_html(run: RunDir, cfg: RZeroConfig, summary: list[Any]) -> str:
    """The page; `summary` is the per-iteration table of `report.md` as (header, rows)."""
    header, rows = summary
    mode = "shared weights (Single-R-Zero)" if cfg.roles.shared else "separate weights (R-Zero)"
    if cfg.guidance.enabled:
        mode += f"; guided by anchors from {cfg.guidance.anchors} (R-Few)"
    card_header, card = sections.science_card(run, cfg)
    stop = sections.stop_line(run, cfg)
    parts: list[Any] = [
        paragraph(f"model {cfg.model.name}; {mode}; {cfg.run.iterations} iterations"),
        heading("Science card", 2),
        html_table(card_header, [[cell.replace("`", "") for cell in row] for row in card]),
        *([paragraph(stop, "note")] if stop else []),
        *audit_link(run),
        html_table(header, rows),
        *(_guided_parts(run, cfg) if cfg.guidance.enabled else []),
        figure(errorbar_png(_challenger_panels(run, cfg)), "Challenger GRPO steps"),
        figure(errorbar_png(_pool_panels(run, cfg)), "Labelled pools"),
        figure(
            errorbar_png(
                [
                    update_panel(
                        run,
                        "solver",
                        "solver: training reward per update (agreement with the pseudo-label)",
                    ),
                    _eval_panel(run, cfg),
                ]
            ),
            "Solver training and evaluation",
        ),
        figure(errorbar_png([_increment_panel(run, cfg)], size=(7.0, 4.2)), "Increment curve"),
        *_audit_parts(run, cfg),
        heading("What the challenger wrote and the solver voted", 2),
        *_questions(run, cfg),
    ]
    system = "R-Few" if cfg.guidance.enabled else "R-Zero"
    return html_page(f"{system} run: {run.path.name}", parts)
