"""`report.md` of a math run, and `rebuild`, the run's after-commit hook: first the run's
finding in one line (`rzero.reports.headline`), then the science card (seed §6.1's
checklist, `rzero.math.sections`) and, when `run.stop_on` stopped the run, why; then the
plan (`rzero.math.plan`: what each phase of an iteration samples, generates and updates,
beside the official code's numbers where the recipe claims its schedule) and the prompt
files used, then per iteration the challenger's,
the pool's, the labelling's, the solver's and the evaluation's numbers, phase times and peak
memory, and the warnings the phases recorded; then the self-play audit: the challenger's
trend, evaluation with the increment curve, the collapse watch, role co-error, the
cross-iteration matrix and the best solver. Rebuilt from the markers at every commit."""

from __future__ import annotations

import hashlib
import json

from rzero.audit.threshold import threshold_sentence
from rzero.config import RZeroConfig
from rzero.io import write_text_atomic
from rzero.math import guided_report, sections
from rzero.math.layout import LAYOUT
from rzero.math.page import render_html
from rzero.math.plan import plan_markdown
from rzero.prompts.templates import template_path
from rzero.render import markdown_table
from rzero.reports import write_metrics
from rzero.reports.headline import run_headline
from rzero.rundir import RunDir
from rzero.selfplay.crossplay import cross_matrix_markdown
from rzero.stats import wilson_interval


def prompt_files(cfg: RZeroConfig) -> list[str]:
    """One line per role: the prompt file it used and the SHA-256 prefix of its text."""
    shipped = template_path(None, "solver.txt").parent
    lines = []
    for role, path, default in (
        ("challenger", cfg.challenger.prompt_file, "challenger.txt"),
        ("solver", cfg.solver.prompt_file, "solver.txt"),
    ):
        try:
            file = template_path(path, default)
        except FileNotFoundError:
            lines.append(f"- {role} prompt: `{path}` (not found now)")
            continue
        where = f"`{file.name}` (rzero/prompts/)" if file.parent == shipped else f"`{file}`"
        digest = hashlib.sha256(file.read_bytes()).hexdigest()[:12]
        lines.append(
            f"- {role} prompt: {where}, sha256 {digest}"
            + (", the built-in few-shot default" if path is None else "")
        )
    return lines


SUMMARY_HEADER = [
    "iter",
    "valid questions (GRPO)",
    "mean challenger reward",
    "mean p_hat (GRPO)",
    "pool valid",
    "pool kept",
    "labelled mean p_hat",
    "kept fraction",
    "solver reward",
    "eval avg",
    "time (s)",
]


def summary_table(run: RunDir, cfg: RZeroConfig) -> tuple[list[str], list[list[str]]]:
    """One row per iteration (0: the base model's evaluation) of the phases' headline
    numbers; "–" where a phase has not run. Shared by report.md and report.html."""
    rows = []
    base = run.marker(0, "eval")
    if base is not None:
        rows.append(
            ["0 (base)", *[""] * 8, f"{base['metrics']['average']:.3f}", f"{base['seconds']:.0f}"]
        )
    for k in run.trained_iterations():
        m = {p: run.marker(k, p) for p in LAYOUT.phases}
        if not any(m.values()):
            continue

        def g(phase, key, fmt="{:.3f}", m=m):
            v = (m[phase] or {}).get("metrics", {}).get(key)
            return fmt.format(v) if isinstance(v, (int, float)) else "–"

        rows.append(
            [
                str(k),
                g("challenger", "valid_rate"),
                g("challenger", "mean_reward"),
                g("challenger", "mean_p_hat"),
                g("pool", "valid_rate"),
                g("pool", "kept", "{}"),
                g("labelling", "mean_p_hat"),
                g("labelling", "kept_fraction"),
                g("solver", "mean_reward"),
                g("eval", "average"),
                f"{sum(x['seconds'] for x in m.values() if x):.0f}",
            ]
        )
    return SUMMARY_HEADER, rows


def compute_line(run: RunDir, cfg: RZeroConfig) -> str:
    """The dtypes the run computed in, as its phase markers recorded them (the config's
    "auto" resolved on the machine that ran the phase)."""
    seen = [
        m["compute"]
        for k in run.iterations()
        for p in LAYOUT.phases
        if (m := run.marker(k, p)) is not None and "compute" in m
    ]
    if not seen:
        return "- compute: no phase recorded yet"
    distinct = {tuple(sorted(c.items())) for c in seen}
    parts = [
        f"generation {c['generation']}, training {c['training']} over {c['weights']} weights"
        for c in (dict(d) for d in sorted(distinct))
    ]
    note = "" if len(distinct) == 1 else " (phases differ: resumed on another machine?)"
    return (
        f"- compute (model.generation_dtype {cfg.model.generation_dtype}, "
        f"model.train_compute {cfg.model.train_compute}): {'; '.join(parts)}{note}"
    )


def label_accuracy_line(run: RunDir, cfg: RZeroConfig) -> str | None:
    """The kept labels' measured accuracy over the run, read against the embedded model's
    label-accuracy curve (`rzero.audit.threshold`): exact on the kept questions that are one
    arithmetic expression, pooled over the iterations; where none is computable, the
    audit's judged accuracy when the run was audited; None when neither exists. A guided
    run's solver also trains on anchors with their true answers, so the accuracy placed on
    the curve is that of its prompt draws: anchor draws right, synthetic draws right at the
    synthetic labels' rate (the interval carried over linearly)."""
    right = n = 0
    anchor_draws = synthetic_draws = 0
    for k in run.trained_iterations():
        if run.marker(k, "labelling") is None:
            continue
        known = [
            r for r in run.rows(k, "labelled") if r["kept"] and r.get("label_correct") is not None
        ]
        right += sum(bool(r["label_correct"]) for r in known)
        n += len(known)
        sol = (run.marker(k, "solver") or {}).get("metrics", {})
        anchor_draws += sol.get("anchor_draws", 0)
        synthetic_draws += sol.get("synthetic_draws", 0)
    if n:
        acc, interval = right / n, wilson_interval(right, n)
        what = f"the kept labels of exactly computable questions ({right} of {n}, exact)"
    else:
        audit = run.path / "audit" / "report.json"
        ov = json.loads(audit.read_text()).get("overall", {}) if audit.is_file() else {}
        if ov.get("accuracy") is None:
            return None
        acc, interval = ov["accuracy"], (ov["ci_low"], ov["ci_high"])
        what = f"the audited labels ({ov['n_judged']} judged)"
    if anchor_draws:
        share = anchor_draws / (anchor_draws + synthetic_draws)
        line = threshold_sentence(
            cfg.model.name,
            share + (1 - share) * acc,
            (share + (1 - share) * interval[0], share + (1 - share) * interval[1]),
            f"the solver's training labels ({share:.0%} of its prompt draws anchors with "
            f"their true answers, the rest synthetic questions whose labels, {what}, are "
            f"{100 * acc:.1f} % right)",
        )
        return line
    return threshold_sentence(cfg.model.name, acc, interval, what)


def render_report(run: RunDir, cfg: RZeroConfig) -> str:
    """The run's report.md, from its markers."""
    run_dir = run.path
    mode = "shared weights (Single-R-Zero)" if cfg.roles.shared else "separate weights (R-Zero)"
    lab = cfg.labeling
    band = (
        f"{lab.band_low} <= p_hat <= {lab.band_high}"
        if lab.band_low is not None
        else f"|p_hat - 1/2| <= {lab.delta}"
    )
    card_header, card = sections.science_card(run, cfg)
    lines = [
        run_headline(run, cfg),
        "",
        f"# {'R-Few' if cfg.guidance.enabled else 'R-Zero'} run: {run_dir.name}",
        "",
        "## Science card",
        "",
        markdown_table(card_header, card).rstrip(),
        "",
    ]
    if (stop := sections.stop_line(run, cfg)) is not None:
        lines += ["## Stopped", "", stop, ""]
    lines += [
        plan_markdown(cfg, "config.yaml"),
        f"- model: `{cfg.model.name}`; {mode}; iterations: {cfg.run.iterations}",
        compute_line(run, cfg),
        f"- labelling: m={lab.num_votes} votes, band {band}"
        + ("" if lab.filter else " (filter off)"),
        *prompt_files(cfg),
        "",
    ]
    header, rows = summary_table(run, cfg)
    lines.append(markdown_table(header, rows))
    if (accuracy := label_accuracy_line(run, cfg)) is not None:
        lines += ["", accuracy]
    if cfg.guidance.enabled:
        g = cfg.guidance
        header, rows = guided_report.sources_rows(run, cfg)
        lines += [
            "",
            "## Guided self-play: anchors and synthetic questions",
            "",
            f"anchors from `{g.anchors}` ({g.count or 'all'}), {g.shots} in every challenger prompt; "
            f"{g.anchor_share:.0%} of the solver's prompt draws are anchors. "
            + guided_report.SOURCES_NOTE,
            "",
            markdown_table(header, rows).rstrip(),
        ]
    warnings = [
        x["warning"]
        for k in run.trained_iterations()
        for p in LAYOUT.phases
        if (x := run.marker(k, p)) and x.get("warning")
    ]
    lines += ["", "Phase times (s) and peak resident memory:", ""]
    for k in run.iterations():
        parts = [
            f"{p} {m['seconds']:.0f}"
            + (f" ({m['peak_rss_gib']:.1f} GiB peak)" if m.get("peak_rss_gib") else "")
            for p in LAYOUT.phases
            if (m := run.marker(k, p)) is not None
        ]
        if parts:
            lines.append(f"- iteration {k}: " + ", ".join(parts))
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    lines += audit_sections(run, cfg)
    lines += [
        "",
        "Files: `iter_KK/challenger_steps.jsonl` (every GRPO question with its votes), "
        "`iter_KK/pool.jsonl`, `iter_KK/labelled.jsonl`, `iter_KK/challenger/` and "
        "`iter_KK/solver/` (Hugging Face checkpoints), `iter_KK/eval/increments.json`, "
        "`iter_KK/coerror.json`, `iter_KK/crossplay.json` (last iteration), "
        "`best.json`, `metrics.jsonl`, `tensorboard/`.",
        "",
    ]
    return "\n".join(lines)


def collapse_watch(run: RunDir, cfg: RZeroConfig) -> list[str]:
    """The "Collapse watch" section (`sections.collapse_rows`). Empty when there is none
    of it."""
    header, rows, lines, warnings = sections.collapse_rows(run, cfg)
    if not (rows or lines or warnings):
        return []
    out = ["", "## Collapse watch", "", sections.COLLAPSE_INTRO, ""]
    if rows:
        out.append(markdown_table(header, rows, align="llrrrrr").rstrip())
    if lines:
        out += [""] + [f"- {line}" for line in lines]
    if warnings:
        out += ["", sections.WARNINGS_INTRO, ""]
        out += [f"- {w}" for w in warnings]
    return out


def audit_sections(run: RunDir, cfg: RZeroConfig) -> list[str]:
    """The self-play audit after the per-iteration numbers (`rzero.math.sections`)."""

    out: list[str] = []
    if trend := sections.trend_lines(run, cfg):
        out += [
            "",
            "## Challenger trend",
            "",
            "Least-squares slope against the global GRPO step, with its 95 % t interval "
            "(SPEC §7: both should rise; steps are not independent, so read the interval "
            "as a rough guide):",
            "",
        ] + trend
    header, rows, flags = sections.eval_rows(run, cfg)
    if rows:
        out += [
            "",
            "## Evaluation and the increment curve",
            "",
            "pass@1 per benchmark with its 95 % Wilson interval; for each iteration after "
            "0, the change against the previous iteration and against the base on the same "
            "items (paired bootstrap 95 % interval; the average's is stratified by "
            "benchmark), with the exact McNemar p against the base beside it.",
            "",
            markdown_table(header, rows, align="llrllll").rstrip(),
        ]
        out += (
            [""] + [f"- {f}" for f in flags]
            if flags
            else ["", "No falling or negative increment flagged."]
        )
    out += collapse_watch(run, cfg)
    header, rows, notes = sections.coerror_rows(run, cfg)
    if rows or notes:
        out += [
            "",
            "## Role co-error",
            "",
            "The challenger model and the solver model answer the same calibration items "
            "with known answers (greedy, the solver prompt); both wrong, against what "
            "independent errors would give, and the correlation phi of their errors "
            "(seed §6.2).",
            "",
        ]
        if rows:
            out.append(markdown_table(header, rows, align="llrlllrl").rstrip())
        out += [""] + [f"- {n}" for n in notes] if notes else []
    if (matrix := sections.crossplay(run, cfg)) is not None:
        out += [
            "",
            "## Cross-iteration matrix",
            "",
            "Solver i (0 = base) votes on a sample of pool j's labelled questions; a cell "
            "is the share whose majority answer matches pool j's label, with its Wilson "
            "interval and n. Pool j was labelled by solver j - 1.",
            "",
            cross_matrix_markdown(matrix).rstrip(),
        ]
        out += [""] + [f"- {f}" for f in matrix["flags"]] if matrix["flags"] else []
    if (best := sections.best_line(run, cfg)) is not None:
        out += ["", "## Best solver", "", best]
    return out


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    """`metrics.jsonl`, `best.json`, `report.md` and `report.html` of a math run."""
    write_metrics(run, cfg, LAYOUT.phases)
    write_text_atomic(run.path / "report.md", render_report(run, cfg))
    write_text_atomic(run.path / "report.html", render_html(run, cfg, summary_table(run, cfg)))
