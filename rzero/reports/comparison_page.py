"""The comparison's pages (`rzero.reports.comparison`): comparison.md, comparison.html (the
figure embedded) and comparison.png, from the table `build_comparison` made. A SPIN or SPAG
ablation has no challenger and no labels, so its tables show the evaluation only."""

from __future__ import annotations

import json
from typing import Any

from rzero.render import (
    Panel,
    Series,
    bullets,
    errorbar_png,
    figure,
    heading,
    html_page,
    html_table,
    markdown_cell,
    markdown_table,
)
from rzero.reports.contrasts import contrast_table
from rzero.stats import wilson_interval

DISPLAY = {"separate": "R-Zero (separate)", "shared": "Single-R-Zero (shared)"}
# The seed's table (§4.3), Qwen3-4B-Base: solver step -> (performance, label accuracy %).
PAPER = {
    "R-Zero": {15: (48.06, 71.0), 30: (48.44, 56.2), 45: (49.12, 48.8), 60: (46.52, 42.2)},
    "Single-R-Zero": {15: (47.31, 63.4), 30: (46.95, 46.6), 45: (45.57, 32.6), 60: (43.89, 33.8)},
}
CONTRAST_TITLE = "Differences between the variants and against the base (paired, same items)"


def _pct(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}"


def _acc(s: dict[str, Any] | None, with_n: bool = True) -> str:
    if s is None:
        return "–"
    text = f"{100 * s['accuracy']:.1f}% [{100 * s['ci_low']:.1f}, {100 * s['ci_high']:.1f}]"
    if with_n:
        text += f" n={s['n_judged']}"
    return text + (" †" if s.get("caveat") else "")


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def _steps(row: dict[str, Any]) -> str:
    return " / ".join(str(s) for s in dict.fromkeys(row["solver_step"].values()))


def _display(name: str) -> str:
    return DISPLAY.get(name, name)


def _value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


SYMMETRIC = {"spin": "SPIN", "spag": "SPAG"}  # system -> name; no challenger, no labels


def _symmetric(comp: dict[str, Any]) -> bool:
    return comp.get("system") in SYMMETRIC


def _differences(comp: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The config differences as a table, when there are any."""
    names = [r["name"] for r in comp["runs"]]
    if not comp["config_differences"]:
        return []
    return [
        (
            "Config differences (run.output_dir ignored)",
            ["field", *names],
            [
                [key, *(_value(vals[n]) for n in names)]
                for key, vals in comp["config_differences"].items()
            ],
        )
    ]


def _title(comp: dict[str, Any]) -> str:
    return f"{SYMMETRIC.get(comp.get('system'), 'R-Zero')} ablation: comparison"


def _caption(comp: dict[str, Any]) -> str:
    return (
        "eval average per iteration"
        if _symmetric(comp)
        else "eval average and label accuracy per iteration"
    )


def _start(comp: dict[str, Any]) -> str:
    """What iteration 0 is (`rzero.reports.contrasts.start_of`)."""
    return (comp.get("contrasts") or {}).get("start", "the base model")


def _symmetric_tables(comp: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """A SPIN or SPAG ablation's: the evaluation average per iteration (nothing is labelled,
    no solver step is counted) and the config differences."""
    names = [r["name"] for r in comp["runs"]]
    zero = "0 (θ_0)" if _start(comp).startswith("θ_0") else "0 (base)"
    rows = [
        [
            zero if row["iteration"] == 0 else str(row["iteration"]),
            *(_pct(row["variants"][n]["eval_average"]) for n in names),
        ]
        for row in comp["rows"]
    ]
    tables = [
        (
            "Evaluation per iteration",
            ["iter", *(f"{_display(n)}: eval avg (%)" for n in names)],
            rows,
        )
    ]
    return tables + _differences(comp)


def _known(cell: dict[str, Any]) -> str:
    """`41.2 % of 17`: the kept labels' exact accuracy on the questions whose answer is known."""
    acc, n = cell.get("known_label_accuracy"), cell.get("known_labels")
    return "–" if acc is None or not n else f"{100 * acc:.1f} % of {n}"


def _hand(h: dict[str, Any] | None) -> str:
    """`25/40 ill-posed; 3/15 right`: a person's audit of a seeded sample of the kept
    questions (`rzero.audit.hand`)."""
    if not h:
        return "–"
    text = f"{h['ill_posed']}/{h['n']} ill-posed"
    return text + (f"; {h['correct']}/{h['well_posed']} right" if h["well_posed"] else "")


def _diverse(d: dict[str, float] | None) -> str:
    return "–" if not d else f"{d['cluster_ratio']:.2f} / {d['structure_ratio']:.2f}"


def _tables(comp: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of the tables, as plain text; md and html escape it their way."""
    if _symmetric(comp):
        return _symmetric_tables(comp)
    names = [r["name"] for r in comp["runs"]]
    main_header = ["iter", "solver step"]
    ctx_header = ["iter"]
    for n in names:
        d = _display(n)
        main_header += [f"{d}: eval avg (%)", f"{d}: label acc [95 % CI]"]
        ctx_header += [
            f"{d}: kept / labelled",
            f"{d}: mean p̂",
            f"{d}: label acc, all labelled",
            f"{d}: kept labels right, where known",
            f"{d}: kept questions read by hand: ill-posed; well-posed labels right",
            f"{d}: questions: clusters / structures per question",
        ]
    main, ctx = [], []
    for row in comp["rows"]:
        k = row["iteration"]
        it = "0 (base)" if k == 0 else str(k)
        cells = [it, _steps(row)]
        ctx_cells = [it]
        for n in names:
            c = row["variants"][n]
            cells += [_pct(c["eval_average"]), _acc(c.get("label_accuracy"))]
            if k > 0:
                kept = (
                    "–"
                    if c["kept_fraction"] is None
                    else f"{c['kept']}/{c['questions']} ({c['kept_fraction']:.2f})"
                )
                ctx_cells += [
                    kept + (" (solver skipped)" if c["solver_skipped"] else ""),
                    _num(c["mean_p_hat"]),
                    _acc(c.get("label_accuracy_labelled_all")),
                    _known(c),
                    _hand(c.get("hand_audit")),
                    _diverse(c.get("diversity")),
                ]
        main.append(cells)
        if k > 0:
            ctx.append(ctx_cells)
    tables = [
        ("Performance and label accuracy per iteration", main_header, main),
        ("Context: the labelled pool", ctx_header, ctx),
    ]
    return tables + _differences(comp)


def _machine_lines(comp: dict[str, Any]) -> list[str]:
    """Which CPU each run ran on, where its record says (a run folder does not keep it)."""
    machines = {r["name"]: r.get("machine") for r in comp["runs"]}
    if not any(machines.values()):
        return []
    line = (
        "Machines, as recorded: "
        + ", ".join(f"{n} {m or 'not recorded (a run folder)'}" for n, m in machines.items())
        + "."
    )
    if len({m for m in machines.values() if m}) > 1:
        line += (
            " bf16 arithmetic differs between CPUs, so the same base model's evaluation can "
            "differ by a few items between them, and a paired difference between runs of "
            "two machines holds that difference as well as the variants'."
        )
    return [line]


def _header_lines(comp: dict[str, Any]) -> list[str]:
    names = [r["name"] for r in comp["runs"]]
    common = comp["common"]
    runs = ", ".join(f"{n} ({r['path']})" for n, r in zip(names, comp["runs"], strict=True))
    lines = [
        f"Runs: {runs}.",
        *_machine_lines(comp),
        f"Base model {common.get('model.name', '(differs, see below)')}, seed "
        f"{common.get('run.seed', '(differs, see below)')}.",
        "Config differences: "
        + (
            "; ".join(
                f"{key} = " + ", ".join(f"{_value(v)} ({n})" for n, v in vals.items())
                for key, vals in comp["config_differences"].items()
            )
            or "none (apart from run.output_dir)"
        )
        + ".",
    ]
    if _symmetric(comp):
        unit = "epoch" if comp["system"] == "spag" else "iteration"
        lines.append(
            f"Eval avg: the evaluation average (pass@1, %) of the model after that "
            f"{unit}; iteration 0 is {_start(comp)}."
        )
        if len(names) > 1:
            lines.append(
                "Whether two variants differ is the paired difference on the same items (below)."
            )
        return lines
    if any(r["solver_steps"] != comp["runs"][0]["solver_steps"] for r in comp["runs"]):
        lines.append(
            "The runs differ in solver.steps, so one iteration is a different "
            "number of solver steps in each (shown separated by /)."
        )
    lines.append(
        "Eval avg: the evaluation average (pass@1, %) of the solver after that "
        "iteration; iteration 0 is the base model. Solver step = iteration x "
        "solver.steps (the paper's steps 15/30/45/60 are iterations 1-4 at 15 "
        "solver steps each)."
    )
    if len(names) > 1:
        lines.append(
            "The figure's bars are each score's own 95 % interval; whether two "
            "variants differ is the paired difference on the same items (below), "
            "which is much narrower than the overlap of two bars suggests."
        )
    audited = [r for r in comp["runs"] if r["audit"]]
    lines.append(
        "Label acc: audited accuracy of the pseudo-labels of the questions the solver trained "
        "on in that iteration (judged sample of the kept questions), with its 95 % Wilson "
        "interval and n judged; † marks a sample too small to say anything; – means not "
        "audited (`rzero audit RUN_DIR`)."
        + ("" if audited else " None of these runs has been audited yet.")
    )
    lines.append(
        "Questions: BLEU clusters and number-masked structures per question "
        "(`rzero.selfplay.collapse`; 1.00 when every question differs): the challenger's "
        "pool of a loop, the kept questions of the solver task. "
        "Kept labels right, where known: exact, with no judge, over the kept questions whose "
        "answer is known: a loop's questions that are one arithmetic expression (a small "
        "subset, skewed to the easiest; `rzero.labeling.computable`), the solver task's "
        "benchmark draw (all of it)."
    )
    for r in audited:
        judge = r["audit"]["judge"] or {}
        text = f"Judge of {r['name']}: {judge.get('model', '?')}."
        if judge.get("embedded"):
            text += (
                " This is the run's own base model judging itself: it shows that the "
                "machinery works, not whether the labels are true."
            )
        lines.append(text)
    return lines


def _warnings(comp: dict[str, Any]) -> list[str]:
    return [
        f"{n}: {w}"
        for row in comp["rows"]
        for n, c in row["variants"].items()
        for w in c.get("warnings", [])
    ]


def _paper_table() -> tuple[list[str], list[list[str]]]:
    header = ["solver step"] + [
        f"{v}: {col}" for v in PAPER for col in ("performance", "label acc")
    ]
    rows = [
        [str(step)]
        + [x for v in PAPER for x in (f"{PAPER[v][step][0]:.2f}", f"{PAPER[v][step][1]:.1f}%")]
        for step in PAPER["R-Zero"]
    ]
    return header, rows


def render_markdown(comp: dict[str, Any]) -> str:
    out = [f"# {_title(comp)}", ""]
    out += [f"- {markdown_cell(line)}" for line in _header_lines(comp)] + [""]
    for title, header, rows in _tables(comp):
        out += [f"## {title}", "", markdown_table(header, rows)]
    if len(comp["runs"]) > 1:
        header, rows = contrast_table(comp["contrasts"])
        out += [f"## {CONTRAST_TITLE}", "", markdown_table(header, rows)]
        out += [f"- {markdown_cell(s)}" for s in comp["contrasts"]["sentences"]] + [""]
    if warnings := _warnings(comp):
        out += ["## Warnings", ""] + [f"- {markdown_cell(w)}" for w in warnings] + [""]
    out += [f"![{_caption(comp)}](comparison.png)", ""]
    if not _symmetric(comp):
        header, rows = _paper_table()
        out += ["## For reference: the paper (Qwen3-4B-Base, seed §4.3)", ""]
        out += [markdown_table(header, rows)]
    return "\n".join(out)


def render_html(comp: dict[str, Any], png: bytes | None = None) -> str:
    """The comparison page; `png` (plot_comparison's) is embedded when given."""
    parts: list[Any] = [bullets(_header_lines(comp))]
    for title, header, rows in _tables(comp):
        parts += [heading(title), html_table(header, rows)]
    if len(comp["runs"]) > 1:
        header, rows = contrast_table(comp["contrasts"])
        parts += [
            heading(CONTRAST_TITLE),
            html_table(header, rows),
            bullets(comp["contrasts"]["sentences"]),
        ]
    if warnings := _warnings(comp):
        parts += [heading("Warnings"), bullets(warnings)]
    if png is not None:
        parts.append(figure(png, _caption(comp)))
    if not _symmetric(comp):
        header, rows = _paper_table()
        parts += [
            heading("For reference: the paper (Qwen3-4B-Base, seed §4.3)"),
            html_table(header, rows),
        ]
    return html_page(_title(comp), parts)


def _wilson_bar(metrics: dict[str, Any] | None) -> tuple[float, float] | None:
    """The 95 % Wilson interval of an evaluation on one benchmark (pass@1 of n items); None
    for several benchmarks, whose unweighted average has no Wilson interval."""
    names = [key[: -len("/pass@1")] for key in (metrics or {}) if key.endswith("/pass@1")]
    if len(names) != 1 or not metrics.get(f"{names[0]}/n"):
        return None
    n = int(metrics[f"{names[0]}/n"])
    return wilson_interval(round(metrics[f"{names[0]}/pass@1"] * n), n)


def label_points(
    rows: list[dict[str, Any]], name: str
) -> tuple[list[tuple[int, float, float, float, int]], str]:
    """One run's label accuracy per iteration as (iteration, accuracy, Wilson low, high,
    labels judged), and where it comes from: the judge audit ("audit") when the run has
    one, else the exact accuracy of the kept labels whose answer is known ("exact"; the
    whole band of a fixed pool, a loop's arithmetic-expression subset), else nothing."""
    audited = [
        (r["iteration"], s["accuracy"], s["ci_low"], s["ci_high"], s["n_judged"])
        for r in rows
        if (s := r["variants"][name].get("label_accuracy")) is not None
    ]
    if audited:
        return audited, "audit"
    exact = []
    for r in rows:
        cell = r["variants"][name]
        n, acc = cell.get("known_labels"), cell.get("known_label_accuracy")
        if n and acc is not None:
            exact.append((r["iteration"], acc, *wilson_interval(round(acc * n), n), n))
    return exact, "exact"


def plot_comparison(comp: dict[str, Any]) -> bytes:
    """PNG: eval average (left; with 95 % Wilson bars when there is one benchmark) and label
    accuracy with Wilson bars (right; `label_points`: the audit's, else exact where known)
    per iteration; a SPIN or SPAG ablation's: the eval average alone."""
    names = [r["name"] for r in comp["runs"]]
    rows = comp["rows"]
    # small horizontal offsets and one marker each keep equal values of variants visible
    width = 0.08 * (len(names) - 1)
    evals, accs = [], []
    for i, name in enumerate(names):
        dx = i * 0.08 - width / 2
        style = {"fmt": "osD^v<>p"[i % 8] + "-", "color": f"C{i}"}
        pts = [
            (r["iteration"], r["variants"][name])
            for r in rows
            if r["variants"][name]["eval_average"] is not None
        ]
        bars = [_wilson_bar(c["eval"]) for _, c in pts]
        with_bars = bool(bars) and all(b is not None for b in bars)
        evals.append(
            Series(
                _display(name),
                [k + dx for k, _ in pts],
                [100 * c["eval_average"] for _, c in pts],
                low=[100 * b[0] for b in bars] if with_bars else None,
                high=[100 * b[1] for b in bars] if with_bars else None,
                **style,
            )
        )
        acc, source = label_points(rows, name)
        where_known = ", ".join(str(n) for *_, n in acc)
        accs.append(
            Series(
                _display(name) + ("" if source == "audit" else f" (exact, n {where_known})"),
                [k + dx for k, *_ in acc],
                [100 * a for _, a, *_ in acc],
                low=[100 * lo for _, _, lo, *_ in acc],
                high=[100 * hi for *_, hi, _ in acc],
                **style,
            )
        )
    ticks = [r["iteration"] for r in rows]
    if _symmetric(comp):  # no solver steps, nothing labelled to audit
        return errorbar_png(
            [
                Panel(
                    "Evaluation average",
                    "iteration",
                    "pass@1 (%), 95 % Wilson (one benchmark)",
                    evals,
                    ylim=(-2, 102),
                    xticks=ticks,
                    xticklabels=[str(k) for k in ticks],
                )
            ]
        )
    labels = [f"{r['iteration']}\n(step {_steps(r)})" for r in rows]
    xlabel = "iteration (solver step)"
    return errorbar_png(
        [
            Panel(
                "Evaluation average",
                xlabel,
                "pass@1 (%), 95 % Wilson (one benchmark)",
                evals,
                ylim=(-2, 102),
                xticks=ticks,
                xticklabels=labels,
            ),
            Panel(
                "Label accuracy of the solver's training set",
                xlabel,
                "accuracy (%), 95 % Wilson",
                accs,
                ylim=(-2, 102),
                xticks=ticks,
                xticklabels=labels,
                empty_text="no audit and no label known\n(rzero audit RUN_DIR)",
            ),
        ]
    )
