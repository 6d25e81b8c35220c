"""The label-accuracy report: numbers (JSON), a readable summary (Markdown), a plot (PNG) and a
page with every audited item (HTML).

Label accuracy is correct / (correct + wrong). Items the judge called ill-posed and items it
could not judge (call failed, timed out, no boxed answer) are counted and shown but are in
neither the numerator nor the denominator: an unjudged item is never a wrong label.
Every accuracy carries a 95 % Wilson interval, and the report says so in words when a sample is
too small for its number to mean anything.

Rendering goes through rzero.render, which escapes everything a model wrote (questions,
labels, judge answers) in the HTML page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rzero.audit.threshold import threshold_sentence
from rzero.io import write_bytes_atomic, write_json_atomic, write_text_atomic
from rzero.render import (
    Html,
    Panel,
    Series,
    errorbar_png,
    escape,
    figure,
    heading,
    html_page,
    html_table,
    markdown_table,
    paragraph,
    preformatted,
)
from rzero.stats import mean, wilson_interval  # one definition, shared by every report

VERDICTS = ("correct", "wrong", "ill_posed", "unjudged")
# p_hat buckets: [lo, hi) except the last, which is closed so that p_hat = 1 is counted.
P_HAT_BINS = ((0.0, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.0))
# Below this many judged items, or above this interval width, an accuracy says nothing.
MIN_JUDGED = 10
MAX_WIDTH = 0.5


def p_hat_bucket(p_hat: float) -> str:
    for lo, hi in P_HAT_BINS:
        if lo <= p_hat < hi or (hi == P_HAT_BINS[-1][1] and p_hat == hi):
            return _bin_name(lo, hi)
    raise ValueError(f"p_hat={p_hat}: outside [0, 1]")


def _bin_name(lo: float, hi: float) -> str:
    return f"[{lo:.1f}, {hi:.1f}]" if hi == P_HAT_BINS[-1][1] else f"[{lo:.1f}, {hi:.1f})"


def summarize(verdicts: Iterable[str]) -> dict[str, Any]:
    """Counts, accuracy, Wilson interval and a plain-words caveat for one group of verdicts."""
    counts = Counter(verdicts)
    unknown = set(counts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdicts {sorted(unknown)}; allowed: {VERDICTS}")
    correct, wrong = counts["correct"], counts["wrong"]
    n = correct + wrong
    lo, hi = wilson_interval(correct, n)
    out: dict[str, Any] = {
        "n_audited": sum(counts.values()),
        "n_judged": n,
        "correct": correct,
        "wrong": wrong,
        "n_ill_posed": counts["ill_posed"],
        "n_unjudged": counts["unjudged"],
        "accuracy": correct / n if n else None,
        "ci_low": lo,
        "ci_high": hi,
    }
    if n == 0:
        out["caveat"] = "nothing judged"
    elif n < MIN_JUDGED or hi - lo > MAX_WIDTH:
        out["caveat"] = (
            f"too few judged items to say anything (n = {n}, interval width {hi - lo:.2f})"
        )
    else:
        out["caveat"] = None
    return out


# ---------------------------------------------------------------- building the report


def build_report(
    items: Sequence[dict[str, Any]], judge: dict[str, Any], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The report dict from audited items.

    Each item: {"source": "step" | "labelled_kept" | "labelled_all", "iteration", "step",
    "global_step", "question", "label", "p_hat", "kept", "key", "verdict", "judge_answer",
    "reason"}. An item sampled into two groups (say a kept question drawn for both labelled
    samples) appears once per group; the vote-share buckets count each distinct (question,
    label) once.
    """
    per_step = []
    steps = sorted({(it["iteration"], it["step"]) for it in items if it["source"] == "step"})
    for iteration, step in steps:
        group = [
            it
            for it in items
            if it["source"] == "step" and it["iteration"] == iteration and it["step"] == step
        ]
        per_step.append(
            {
                "iteration": iteration,
                "step": step,
                "global_step": group[0].get("global_step"),
                "mean_p_hat": mean(it["p_hat"] for it in group),
                **summarize(it["verdict"] for it in group),
            }
        )

    per_iteration = []
    for iteration in sorted({it["iteration"] for it in items}):
        row: dict[str, Any] = {"iteration": iteration}
        for source, name in (
            ("step", "challenger_steps"),
            ("labelled_kept", "labelled_kept"),
            ("labelled_all", "labelled_all"),
        ):
            group = [it for it in items if it["iteration"] == iteration and it["source"] == source]
            row[name] = summarize(it["verdict"] for it in group) if group else None
        per_iteration.append(row)

    distinct = {it["key"]: it for it in items}
    buckets = []
    for lo, hi in P_HAT_BINS:
        name = _bin_name(lo, hi)
        group = [it for it in distinct.values() if p_hat_bucket(it["p_hat"]) == name]
        buckets.append(
            {"bucket": name, "low": lo, "high": hi, **summarize(it["verdict"] for it in group)}
        )

    reasons = Counter(it["reason"] for it in distinct.values() if it["verdict"] == "unjudged")
    overall = summarize(it["verdict"] for it in distinct.values())
    return {
        "judge": judge,
        **(extra or {}),
        "summary": _flat_summary(overall, per_iteration, extra or {}),
        "overall": overall,
        "per_step": per_step,
        "per_iteration": per_iteration,
        "vote_share_buckets": buckets,
        "unjudged_reasons": dict(reasons.most_common()),
        "items": list(items),
    }


def _flat_summary(
    overall: dict[str, Any], per_iteration: list[dict[str, Any]], extra: dict[str, Any]
) -> dict[str, float | int | None]:
    """Flat numbers for metric logs: overall, and the latest iteration's sets."""
    out: dict[str, float | int | None] = {
        "label_accuracy": overall["accuracy"],
        "label_accuracy_ci_low": overall["ci_low"],
        "label_accuracy_ci_high": overall["ci_high"],
        "n_judged": overall["n_judged"],
        "n_unjudged": overall["n_unjudged"],
        "n_ill_posed": overall["n_ill_posed"],
    }
    if per_iteration:
        last = per_iteration[-1]
        for name in ("challenger_steps", "labelled_kept", "labelled_all"):
            s = last[name]
            out[f"{name}_label_accuracy"] = s["accuracy"] if s else None
            out[f"{name}_n_judged"] = s["n_judged"] if s else 0
    for key in ("requests", "cached"):
        if key in extra:
            out[key] = extra[key]
    return out


# ---------------------------------------------------------------- rendering

SETS = ("challenger_steps", "labelled_kept", "labelled_all")
ACC_HEADER = ["accuracy [95 % CI]", "judged", "unjudged", "ill-posed", "note"]
DEFINITION = (
    "Label accuracy = correct / (correct + wrong), with a 95 % Wilson interval. "
    "Ill-posed and unjudged items are counted but excluded: an unjudged item (failed "
    "call, timeout, no boxed answer) is never counted as wrong."
)


def _acc(s: dict[str, Any] | None) -> str:
    if not s or s["accuracy"] is None:
        return "–"
    return f"{s['accuracy']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"


def _acc_cells(s: dict[str, Any]) -> list[Any]:
    return [_acc(s), s["n_judged"], s["n_unjudged"], s["n_ill_posed"], s["caveat"] or ""]


def _judge_lines(judge: dict[str, Any]) -> list[str]:
    lines = [
        f"Judge model: {judge['model']} at host {judge['host']}; prompt version "
        f"{judge['prompt_version']}; temperature {judge['temperature']}, max tokens "
        f"{judge['max_tokens']}."
    ]
    if judge.get("note"):
        lines.append(judge["note"])
    return lines


def _tables(report: dict[str, Any]) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, header, rows) of the summary tables, as plain values; each format escapes them."""
    per_step = [
        [r["iteration"], r["step"], r["global_step"], f"{r['mean_p_hat']:.2f}", *_acc_cells(r)]
        for r in report["per_step"]
    ]
    per_iteration = [
        [r["iteration"], name, *_acc_cells(r[name])]
        for r in report["per_iteration"]
        for name in SETS
        if r[name] is not None
    ]
    buckets = [[r["bucket"], *_acc_cells(r)] for r in report["vote_share_buckets"]]
    return [
        ("Per challenger step", ["iter", "step", "global step", "mean p̂", *ACC_HEADER], per_step),
        ("Per iteration", ["iter", "set", *ACC_HEADER], per_iteration),
        ("By vote share p̂ (distinct items)", ["p̂ bucket", *ACC_HEADER], buckets),
    ]


def threshold_line(report: dict[str, Any]) -> str | None:
    """The audited labels' accuracy placed on the embedded model's label-accuracy curve, or
    said not to transfer to the run's model (`rzero.audit.threshold`); None when nothing was
    judged or the report does not name the run's model."""
    ov = report["overall"]
    if "model" not in report or ov["accuracy"] is None:
        return None
    return threshold_sentence(
        report["model"], ov["accuracy"], (ov["ci_low"], ov["ci_high"]), "the audited labels"
    )


def render_markdown(report: dict[str, Any]) -> str:
    out = ["# Label-accuracy audit", ""]
    out += [f"> {line}" for line in _judge_lines(report["judge"])] + [""]
    out += [DEFINITION, ""]
    ov = report["overall"]
    out += [
        f"**Overall** (distinct items): accuracy {_acc(ov)}, n judged {ov['n_judged']}, "
        f"unjudged {ov['n_unjudged']}, ill-posed {ov['n_ill_posed']}."
        + (f" *{ov['caveat']}.*" if ov["caveat"] else ""),
        "",
    ]
    if (line := threshold_line(report)) is not None:
        out += [line, ""]
    if "requests" in report:
        out += [
            f"Judge requests this run: {report['requests']} "
            f"({report.get('cached', 0)} verdicts came from the cache).",
            "",
        ]
    for title, header, rows in _tables(report):
        out += [f"## {title}", "", markdown_table(header, rows)]
    if report["unjudged_reasons"]:
        out += ["## Why items are unjudged", ""]
        out += [f"- {reason}: {n}" for reason, n in report["unjudged_reasons"].items()] + [""]
    out += [
        "![accuracy over steps](accuracy.png)",
        "",
        "Every audited item is listed in report.html.",
        "",
    ]
    return "\n".join(out)


VERDICT_CSS = """.correct{background:#e6f4e6}.wrong{background:#fbe3e3}
.ill_posed{background:#fff4d6}.unjudged{background:#eee}"""


def _answer_cell(item: dict[str, Any]) -> Html:
    cell = preformatted(item["judge_answer"])
    if item.get("response"):
        cell += f"<details><summary>full reply</summary>{preformatted(item['response'])}</details>"
    return Html(cell)


def _verdict_cell(item: dict[str, Any]) -> Html:
    reason = f"<br><small>{escape(item['reason'])}</small>" if item.get("reason") else ""
    return Html(escape(item["verdict"]) + reason)


def render_html(report: dict[str, Any], png: bytes | None = None) -> str:
    """The report page with every audited item; `png` (plot_accuracy's) is embedded."""
    judge = report["judge"]
    parts: list[Any] = [_judge_lines(judge)[0]]
    if judge.get("note"):
        parts.append(paragraph(judge["note"], "note"))
    parts.append(DEFINITION)
    if (line := threshold_line(report)) is not None:
        parts.append(paragraph(line))
    if png is not None:
        parts.append(figure(png, "label accuracy over challenger steps and per labelled set"))
    for title, header, rows in _tables(report):
        parts += [heading(title), html_table(header, rows)]
    items = report["items"]
    parts += [
        heading("Audited items"),
        html_table(
            ["set", "iter", "step", "p̂", "question", "label", "judge answer", "verdict"],
            (
                [
                    it["source"],
                    it["iteration"],
                    "" if it["step"] is None else it["step"],
                    f"{it['p_hat']:.2f}",
                    preformatted(it["question"]),
                    preformatted(it["label"]),
                    _answer_cell(it),
                    _verdict_cell(it),
                ]
                for it in items
            ),
            row_classes=[it["verdict"] for it in items],
        ),
    ]
    return html_page("Label-accuracy audit", parts, css=VERDICT_CSS)


def plot_accuracy(report: dict[str, Any]) -> bytes:
    """PNG: accuracy per challenger step (left) and per labelled set (right), Wilson bars."""

    def series(label: str, xs: list[float], summaries: list[dict[str, Any]], fmt: str) -> Series:
        return Series(
            label,
            xs,
            [s["accuracy"] for s in summaries],
            low=[s["ci_low"] for s in summaries],
            high=[s["ci_high"] for s in summaries],
            fmt=fmt,
        )

    steps = [r for r in report["per_step"] if r["accuracy"] is not None]
    xs = [r["global_step"] if r["global_step"] is not None else i for i, r in enumerate(steps)]
    left = Panel(
        "Challenger steps",
        "challenger global step",
        "label accuracy (95 % Wilson interval)",
        [series("sample of each step's questions", xs, steps, "o-")],
        ylim=(-0.02, 1.02),
        empty_text="no judged items",
        width=2,
    )
    sets = []
    for offset, name, fmt in ((-0.1, "labelled_kept", "s"), (0.1, "labelled_all", "D")):
        rows = [r for r in report["per_iteration"] if r[name] and r[name]["accuracy"] is not None]
        sets.append(
            series(
                name.replace("_", " "),
                [r["iteration"] + offset for r in rows],
                [r[name] for r in rows],
                fmt,
            )
        )
    right = Panel(
        "Labelled sets",
        "iteration",
        "",
        sets,
        ylim=(-0.02, 1.02),
        xticks=[r["iteration"] for r in report["per_iteration"]],
        empty_text="no judged items",
    )
    title = f"Pseudo-label accuracy, judge {report['judge']['model']}"
    title = title if len(title) < 100 else title[:97] + "..."
    if report["judge"].get("embedded"):
        title += "\n(the base model judging itself: shows the machinery, not the truth)"
    return errorbar_png([left, right], title=title, size=(11, 4.8))


def write_report(report: dict[str, Any], audit_dir: str | Path) -> dict[str, Path]:
    """Write report.json, report.md, report.html and accuracy.png into audit_dir."""
    audit_dir = Path(audit_dir)
    paths = {
        name: audit_dir / name
        for name in ("report.json", "report.md", "report.html", "accuracy.png")
    }
    png = plot_accuracy(report)
    write_bytes_atomic(paths["accuracy.png"], png)
    write_json_atomic(paths["report.json"], report)
    write_text_atomic(paths["report.md"], render_markdown(report))
    write_text_atomic(paths["report.html"], render_html(report, png))
    return paths
