"""The self-play audit's part of a run's report (SPEC §9, seed §6.1–6.2), as plain values
that `markdown.py` writes as Markdown and `page.py` as HTML:

    science_card      seed §6.1's checklist filled in from the config and the markers:
                      anchor, external signal, controls, increment curve, judge quality,
                      role independence, side effects
    stop_line         why the run stopped, when `run.stop_on` stopped it
    trend_lines       the challenger's reward and well-formed rate over its GRPO steps:
                      least-squares slope with its 95 % interval (SPEC §7: both should rise)
    eval_rows         per iteration and benchmark: pass@1 with its 95 % Wilson interval, the
                      change against the previous iteration and against the base (paired
                      bootstrap interval, exact McNemar p beside it), and the flags in words
    coerror_rows      role co-error per iteration, overall and by item kind
    collapse_rows     the collapse watch: diversity per challenger step and pool, answer
                      types, fragmentation and label concentration per labelled pool, and
                      the warnings the phases recorded
    crossplay         the cross-iteration matrix (solver x pool agreement)
    best_line         the solver with the best held-out evaluation average

Everything is read from the markers (and the files they vouch for), so a rebuilt report
shows what was committed.
"""

from __future__ import annotations

import json
from typing import Any

from rzero.config import RZeroConfig
from rzero.math.layout import LAYOUT
from rzero.reports.headline import base_side
from rzero.rundir import RunDir, stop_of
from rzero.stats import slope_interval, wilson_interval

Table = tuple[list[str], list[list[str]]]


def _ci(lo: float | None, hi: float | None, fmt: str = "{:.2f}") -> str:
    return f"[{fmt.format(lo)}, {fmt.format(hi)}]" if lo is not None and hi is not None else ""


def _delta(d: dict[str, Any] | None) -> str:
    if not d:
        return "–"
    return f"{d['delta']:+.3f} {_ci(d['ci_low'], d['ci_high'], '{:+.3f}')}"


def _evals(run: RunDir, cfg: RZeroConfig) -> dict[int, dict[str, Any]]:
    return {k: m for k in run.iterations() if (m := run.marker(k, "eval")) is not None}


# ---------------------------------------------------------------- the science card


def _variant(c: RZeroConfig) -> str:
    if c.guidance is not None and c.guidance.enabled:
        return "guided by anchors (R-Few)" + (
            "" if c.roles.train_challenger else ", untrained challenger"
        )
    if c.roles.shared:
        return "shared weights (Single-R-Zero)"
    if not c.roles.train_challenger:
        return "untrained challenger"
    if c.challenger.repetition_lambda == 0:
        return "no repetition penalty"
    if not c.labeling.filter:
        return "no band filter"
    return "separate weights (R-Zero)"


def controls(run: RunDir, cfg: RZeroConfig) -> tuple[str, list[str]]:
    """This run's variant, and the sibling runs beside it (same parent folder, same base model
    and seed, as `rzero ablate` lays them out) with theirs."""
    found = []
    parent = run.path.resolve().parent
    for sib in sorted(p for p in parent.iterdir() if p.is_dir() and p != run.path.resolve()):
        if not (sib / "config.yaml").is_file():
            continue
        try:
            other = RunDir(sib).config()
        except Exception:  # noqa: BLE001 - an unreadable sibling is simply not a control
            continue
        if other.roles is None:  # another system's run (SPIN, SPAG, the solver task)
            continue
        if other.model.name == cfg.model.name and other.run.seed == cfg.run.seed:
            found.append(f"{_variant(other)} ({sib.name}/)")
    return _variant(cfg), found


def _increment_verdict(run: RunDir, cfg: RZeroConfig) -> str:
    evals = _evals(run, cfg)
    last = max((k for k, m in evals.items() if m.get("increment")), default=None)
    if not cfg.eval.enabled:
        return "none: evaluation is off (eval.enabled), so there is no increment curve"
    if last is None:
        return "not yet: it needs the base (iteration 0) and at least one trained solver evaluated"
    d = evals[last]["increment"]["vs_base"]["average"]
    word = {  # read as the headline and `rzero compare` read a difference
        "none": "no item's score changed from the base's",
        "above": "above the base: the whole paired 95 % interval is above 0",
        "below": "below the base: the whole paired 95 % interval is below 0",
        "borderline": "borderline: the paired 95 % interval excludes 0 but McNemar's exact "
        "test does not reject at 5 %, so too few items differ to tell",
        "within": "not distinguishable from the base: the paired 95 % interval includes 0",
    }[base_side(d)]
    flags = sum(len(m.get("increment_flags", [])) for m in evals.values())
    return (
        f"iteration {last} vs base, average pass@1 {_delta(d)} over {d['n']} items: "
        f"{word}"
        + (f"; {flags} flag(s) below" if flags else "")
        + " (see Evaluation and the increment curve)"
    )


def _judge(run: RunDir, cfg: RZeroConfig) -> str:
    audits = [(k, m) for k in run.trained_iterations() if (m := run.marker(k, "audit")) is not None]
    report = run.path / "audit" / "report.json"
    if not audits and report.is_file():  # `rzero audit RUN_DIR` ran after the run
        return _audited_afterwards(json.loads(report.read_text()))
    if not audits:
        return (
            "no judge: the pseudo-labels were not audited (audit.enabled is off), so their "
            "accuracy is unknown; `rzero audit RUN_DIR` audits them afterwards"
        )
    k, m = audits[-1]
    s = m.get("metrics", {})
    judge = "a judge"
    if report.is_file():
        judge = _judge_name(json.loads(report.read_text()).get("judge", {}))
    acc = s.get("label_accuracy")
    if acc is None:
        return f"{judge}: no label judged yet"
    return (
        f"{judge}: label accuracy {acc:.2f} "
        f"{_ci(s.get('label_accuracy_ci_low'), s.get('label_accuracy_ci_high'))} over "
        f"{s.get('n_judged')} judged labels ({s.get('n_unjudged')} unjudged), to "
        f"iteration {k}"
    )


def _audited_afterwards(report: dict[str, Any]) -> str:
    """The judge row from RUN_DIR/audit/report.json, where `rzero audit` wrote it after
    the run (the inline audit writes a marker per iteration instead)."""
    o = report["overall"]
    info = report["judge"]
    if o["accuracy"] is None:
        measured = "no label judged"
    else:
        measured = (
            f"label accuracy {o['accuracy']:.2f} {_ci(o['ci_low'], o['ci_high'])} over "
            f"{o['n_judged']} judged labels"
        )
    if info.get("exact") and info.get("model") != "executor":
        need = report.get("need_judge")
        exact = (
            f"exact {measured} of the questions that are one arithmetic expression"
            if o["accuracy"] is not None
            else "no question is one arithmetic expression, so no label was judged exactly"
        )
        return (
            f"no judge (`rzero audit` without one): {exact}"
            + (f"; {need} sampled labels need a judge" if need else "")
            + " (audit/report.html)"
        )
    return f"{_judge_name(info)}, by `rzero audit` after the run: {measured} (audit/report.html)"


def _judge_name(info: dict[str, Any]) -> str:
    """`judge M`, from an audit report's judge section."""
    return f"judge {info.get('model')}" + (
        " (the base model itself: machinery, not truth)" if info.get("embedded") else ""
    )


def _independence(run: RunDir, cfg: RZeroConfig) -> str:
    if cfg.roles.shared:
        return (
            "none: shared weights, one model plays both roles, so their errors coincide "
            "by construction and co-error is not measured"
        )
    text = (
        f"separate weights, both from the same base model {cfg.model.name} (shared "
        f"pretraining, tokenizer and architecture), both trained on labels from one "
        f"majority vote"
    )
    co = [(k, m) for k in run.trained_iterations() if (m := run.marker(k, "coerror")) is not None]
    if not co:
        return text + (
            "; co-error not measured (watch.coerror is off)"
            if not cfg.watch.coerror
            else "; co-error not measured yet"
        )
    k, m = co[-1]
    o = m["coerror"]["overall"]
    phi = (
        "undefined (a role made no error, or every one)"
        if o["phi"] is None
        else f"{o['phi']:.2f} {_ci(*o['phi_ci'])}"
    )
    return (
        text + f"; iteration {k} co-error on {o['n']} {m['benchmark']} items: both wrong "
        f"{o['joint_error']:.2f} against {o['independent']:.2f} if independent, "
        f"phi {phi}"
    )


def _side_effects(cfg: RZeroConfig) -> str:
    if not cfg.eval.enabled:
        return "not checked: evaluation is off"
    e = cfg.eval
    limit = f"the first {e.limit} items of each" if e.limit else "every item"
    decoding = "greedy" if e.num_samples == 1 else f"{e.num_samples} samples"
    return (
        f"held-out evaluation only: {', '.join(e.benchmarks)} ({limit}, {decoding}, "
        f"{e.max_new_tokens} new tokens); not checked: other domains, answer style "
        f"beyond the final box, and behaviour learnt to win (format games, ambiguous "
        f"questions that split votes; the collapse watch below counts the latter)"
    )


def science_card(run: RunDir, cfg: RZeroConfig) -> Table:
    """Seed §6.1's checklist as (header, rows): what to check, and this run's answer."""
    lab = cfg.labeling
    variant, siblings = controls(run, cfg)
    present = ["the base model's evaluation (iteration 0)"] if run.marker(0, "eval") else []
    present.append(f"this run: {variant}")
    missing = [
        v
        for v in (
            "separate weights (R-Zero)",
            "shared weights (Single-R-Zero)",
            "untrained challenger",
        )
        if v != variant and not any(s.startswith(v) for s in siblings)
    ]
    ctrl = "; ".join(present + [f"beside it: {s}" for s in siblings])
    if missing:
        ctrl += f"; not run: {', '.join(missing)} (`rzero ablate --variants ...`)"
    g = cfg.guidance
    external = "none in training: no data or labels from a stronger model"
    anchor = (
        f"the frozen solver's own majority vote over m = {lab.num_votes} samples "
        f"(no executor, no judge): the reference moves with the solver"
    )
    if g.enabled:  # R-Few: true answers enter training, and the control is the anchors alone
        external = (
            f"labelled anchors ({g.anchors}, {g.count or 'all'}): shown to the challenger "
            f"({g.shots} per prompt) and {g.anchor_share:.0%} of the solver's prompt draws "
            f"with their true answers"
        )
        anchor += "; on the anchors, their true answers"
        ctrl += (
            "; the control that makes a gain readable is the solver alone on the same "
            "anchors at the same updates (`rzero ablate --variants guided`: anchors-S)"
        )
    if cfg.audit.enabled:
        external += "; a judge audits a sample of labels, read-only (never trains)"
    rows = [
        ["anchor", anchor],
        ["external signal", external],
        ["controls", ctrl],
        ["increment curve", _increment_verdict(run, cfg)],
        ["judge quality", _judge(run, cfg)],
        ["role independence", _independence(run, cfg)],
        ["side effects", _side_effects(cfg)],
    ]
    return ["check (seed §6.1)", "this run"], rows


# ---------------------------------------------------------------- the stop


def stop_line(run: RunDir, cfg: RZeroConfig) -> str | None:
    """Why the run stopped (the first committed phase whose warnings the current
    `run.stop_on` names), or None."""
    for k in run.iterations():
        for phase in LAYOUT.phases:
            m = run.marker(k, phase)
            if m is not None and (reasons := stop_of(m, cfg.run)):
                return (
                    f"The run stopped after iteration {k}'s {phase} phase, because "
                    f"run.stop_on = {list(cfg.run.stop_on)} names: "
                    + " / ".join(reasons)
                    + ". Everything up to there is committed; "
                    "rerunning stops here again unless run.stop_on changes."
                )
    return None


# ---------------------------------------------------------------- challenger trend


def trend_lines(run: RunDir, cfg: RZeroConfig) -> list[str]:
    """The challenger's reward and well-formed rate against the global GRPO step, over every
    step so far and per iteration (slope, 95 % t interval; needs 3 steps for an interval)."""

    steps = []
    for k in run.trained_iterations():
        for s in (run.marker(k, "challenger") or {}).get("steps", []):
            steps.append(((k - 1) * cfg.challenger.steps + int(s["step"]), s))
    if len({x for x, _ in steps}) < 2:
        return []
    lines = []
    for key, what in (("mean_reward", "reward"), ("valid_rate", "well-formed rate")):
        fit = slope_interval([x for x, _ in steps], [float(s[key]) for _, s in steps])
        if fit.ci_low is None:
            verdict = "too few steps for an interval"
        elif fit.ci_low > 0:
            verdict = "rising (the interval is above 0)"
        elif fit.ci_high < 0:
            verdict = "falling (the interval is below 0)"
        else:
            verdict = "no trend the interval can tell from 0"
        ci = _ci(fit.ci_low, fit.ci_high, "{:+.4f}")
        lines.append(
            f"- {what}: slope {fit.slope:+.4f} per step{' ' + ci if ci else ''} over "
            f"{fit.n} steps: {verdict}"
        )
    return lines


# ---------------------------------------------------------------- evaluation


EVAL_HEADER = [
    "iter",
    "benchmark",
    "n",
    "pass@1 [95 % Wilson]",
    "vs previous [paired 95 %]",
    "vs base [paired 95 %]",
    "McNemar p vs base",
]


def eval_rows(run: RunDir, cfg: RZeroConfig) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows, flags): per iteration and benchmark, pass@1 with its Wilson interval
    and, for every iteration after 0, the paired change against the previous iteration and
    against the base on the same items; the average's change comes from the bootstrap
    stratified by benchmark. Flags: the increment curve's sentences."""
    rows, flags = [], []
    for k, m in _evals(run, cfg).items():
        metrics = m.get("metrics", {})
        inc = m.get("increment") or {}
        names = [key[: -len("/pass@1")] for key in metrics if key.endswith("/pass@1")]
        for name in names + ["average"]:
            if name == "average":
                p, n, wil = (
                    metrics.get("average"),
                    sum(int(metrics.get(f"{x}/n", 0)) for x in names),
                    "",
                )
            else:
                p, n = metrics[f"{name}/pass@1"], int(metrics.get(f"{name}/n", 0))
                wil = _ci(*wilson_interval(round(p * n), n), "{:.3f}") if n else ""
            prev = inc.get("vs_previous", {}).get(name)
            base = inc.get("vs_base", {}).get(name)
            mc = base.get("mcnemar_p") if base else None
            rows.append(
                [
                    str(k),
                    name,
                    str(n),
                    f"{p:.3f} {wil}".strip() if p is not None else "–",
                    _delta(prev) if k else "",
                    _delta(base) if k else "",
                    f"{mc:.3g}" if mc is not None else ("" if not k else "–"),
                ]
            )
        flags += m.get("increment_flags", [])
        if m.get("increment_note"):
            flags.append(f"iteration {k}: {m['increment_note']}")
    return EVAL_HEADER, rows, flags


# ---------------------------------------------------------------- co-error


COERROR_HEADER = [
    "iter",
    "group",
    "n",
    "challenger right [95 %]",
    "solver right [95 %]",
    "both wrong [95 %]",
    "if independent",
    "phi [95 %]",
]


def coerror_rows(run: RunDir, cfg: RZeroConfig) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows, notes): per iteration the overall co-error; each item kind's for the
    last iteration measured."""
    rows, notes = [], []
    last = max((k for k in run.trained_iterations() if run.marker(k, "coerror")), default=None)
    if cfg.roles.shared:
        notes.append(
            "Shared weights: the challenger and the solver are one model, so their "
            "errors coincide by construction; co-error is not measured."
        )
    for k in run.trained_iterations():
        m = run.marker(k, "coerror")
        if m is None:
            continue
        groups = [("overall", m["coerror"]["overall"])]
        if k == last:
            groups += [(f"kind {kind}", c) for kind, c in m["coerror"]["by_kind"].items()]
        for group, c in groups:
            phi = "–" if c["phi"] is None else f"{c['phi']:.2f} {_ci(*c['phi_ci'])}".strip()
            rows.append(
                [
                    str(k),
                    group,
                    str(c["n"]),
                    f"{c['challenger_accuracy']:.2f} {_ci(*c['challenger_ci'])}",
                    f"{c['solver_accuracy']:.2f} {_ci(*c['solver_ci'])}",
                    f"{c['joint_error']:.2f} {_ci(*c['joint_error_ci'])}",
                    f"{c['independent']:.2f}",
                    phi,
                ]
            )
        notes += [f"iteration {k}: {f}" for f in m["coerror"]["flags"]]
        if m.get("solver_from_eval"):
            notes.append(
                f"iteration {k}: the solver's answers are its evaluation's "
                f"({m['benchmark']}, same items and budget)"
            )
    return COERROR_HEADER, rows, notes


# ---------------------------------------------------------------- cross-play and best


COLLAPSE_INTRO = (
    "Diversity of the challenger's well-formed questions: BLEU clusters per "
    "question (the repetition penalty's clustering), distinct-2, and structures "
    "per question (numbers masked, so a template restated with new numbers counts "
    "once). Falling ratios mean the challenger is narrowing."
)
WARNINGS_INTRO = "Warnings (the name before the colon is what `run.stop_on` lists):"


def collapse_rows(
    run: RunDir, cfg: RZeroConfig
) -> tuple[list[str], list[list[Any]], list[str], list[str]]:
    """The collapse watch (`rzero.selfplay.collapse`) from the markers: (header, rows) of
    diversity per challenger GRPO step (the markers' ``steps``) and per pool; one line per
    pool (answer types) and per labelled pool (fragmentation and label concentration); and
    the warnings the phases recorded under ``warnings``."""

    def num(d: dict, key: str, fmt: str = "{:.2f}") -> str:
        v = d.get(key)
        return fmt.format(v) if isinstance(v, (int, float)) else "–"

    rows, lines, warnings = [], [], []
    for k in run.iterations():
        for phase in LAYOUT.phases:
            m = run.marker(k, phase)
            if m is None:
                continue
            warnings += [str(w) for w in m.get("warnings", [])]
            found = [(f"step {s.get('step')}", s) for s in m.get("steps", [])]
            if phase == "pool":
                found.append(("pool", m.get("metrics", {})))
            for where, d in found:
                if "cluster_ratio" in d:
                    rows.append(
                        [
                            k,
                            where,
                            num(d, "questions", "{}"),
                            num(d, "valid_rate"),
                            num(d, "cluster_ratio"),
                            num(d, "distinct_2"),
                            num(d, "structure_ratio"),
                        ]
                    )
            d = m.get("metrics", {})
            if phase == "pool" and m.get("answer_types"):
                t = m["answer_types"]
                counts = ", ".join(f"{name} {n}" for name, n in t["counts"].items() if n)
                lines.append(
                    f"iteration {k} pool: answer types {counts or 'none'}; "
                    f"the most common is {num(t, 'top_share')} of them"
                )
            if phase == "labelling" and "groups_per_vote" in d:
                lines.append(
                    f"iteration {k} labelling: {num(d, 'mean_num_groups')} answer groups per "
                    f"question ({num(d, 'groups_per_vote')} per vote), top-2 margin "
                    f"{num(d, 'mean_top2_margin')}, parse rate {num(d, 'mean_parse_rate')}"
                    + (
                        f"; of the {d['kept_questions']} questions kept for training, "
                        f"{d['top_label_count']} carry the label {d['top_label']}"
                        if d.get("kept_questions")
                        else ""
                    )
                    + (
                        f"; the label cap (labeling.cap_label_share) dropped "
                        f"{d['capped_questions']} more"
                        if d.get("capped_questions")
                        else ""
                    )
                )
    header = [
        "iter",
        "where",
        "questions",
        "well-formed",
        "clusters / question",
        "distinct-2",
        "structures / question",
    ]
    return header, rows, lines, warnings


def crossplay(run: RunDir, cfg: RZeroConfig) -> dict[str, Any] | None:
    """The cross-iteration matrix of the crossplay phase, or None."""
    m = run.marker(cfg.run.iterations, "crossplay")
    return m["crossplay"] if m else None


def best_line(run: RunDir, cfg: RZeroConfig) -> str | None:
    best = run.best_solver(cfg)
    if best is None:
        return None
    k = best["iteration"]
    who = "the base model" if k == 0 else f"the solver of iteration {k}"
    return (
        f"Best solver by held-out evaluation average: {who}, average pass@1 "
        f"{best['average']:.3f}, `{run.resolve(best['checkpoint'])}` (`rzero best RUN_DIR` "
        f"prints it; also in best.json). Chosen on the evaluation items themselves, so the "
        f"pick is optimistic by the noise of those items."
    )
