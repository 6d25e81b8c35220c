"""`report.md` and `report.html` of a code-tier run, rebuilt from its markers after every
commit (`rebuild`, the code loops' hook; metrics.jsonl and best.json are `rzero.reports`').

R-Zero on code: per iteration the challenger's, pool's, labelling's and solver's numbers;
the exact label accuracy of every challenger step with its 95 % Wilson interval; the same by
p̂ bucket for every step and labelled pool; a few labelled tasks with their votes and truth.
AZR: per iteration and task type the proposer's valid rate (interval), mean r̄ and reward, and
the solver's solve rate (interval); the proposer's steps; why proposals were refused.
Both: the run's finding in one line first (`rzero.reports.headline`), phase times and
peak memory, warnings. Every table is built once (`tables`) and
rendered to both formats; the HTML escapes everything a model wrote.
"""

from __future__ import annotations

from typing import Any

from rzero.config import RZeroConfig
from rzero.executor.tasks import CodeTask, call_text
from rzero.io import write_text_atomic
from rzero.render import (
    errorbar_png,
    figure,
    heading,
    html_page,
    html_table,
    markdown_table,
    preformatted,
)
from rzero.reports import committed, phase_times, write_metrics
from rzero.reports.cells import audit_link, update_panel
from rzero.reports.headline import run_headline
from rzero.rundir import RunDir

Table = tuple[str, list[str], list[list[Any]]]
EXAMPLES = 4  # labelled tasks (R-Zero) or valid proposals per type (AZR) shown per iteration


def num(value: Any, fmt: str = "{:.3f}") -> str:
    return fmt.format(value) if isinstance(value, (int, float)) else "–"


def interval(k: Any, n: Any, lo: Any, hi: Any) -> str:
    """k of n as ``0.500 [0.150, 0.850] (2/4)``; "–" when nothing was counted."""
    if not isinstance(n, int) or not isinstance(k, int) or n == 0:
        return "–"
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}] ({k}/{n})"


def accuracy(d: dict[str, Any] | None) -> str:
    """An `exact_label_accuracy` dict as one cell: right / labelled, with the interval."""
    if not d:
        return "–"
    return interval(d.get("correct"), d.get("n_labelled"), d.get("ci_low"), d.get("ci_high"))


# ---------------------------------------------------------------- R-Zero on code


def rzero_code_tables(run: RunDir, cfg: RZeroConfig) -> list[Table]:
    marks = committed(run, run.layout.phases)
    summary, steps, buckets = [], [], []
    for k in run.trained_iterations():
        m = {p: x.get("metrics", {}) for p, x in marks[k].items()}
        if not m:
            continue
        ch, pool, lab, sol = (m.get(p, {}) for p in ("challenger", "pool", "labelling", "solver"))
        summary.append(
            [
                k,
                num(ch.get("valid_rate")),
                num(ch.get("mean_reward")),
                num(ch.get("mean_p_hat")),
                accuracy(ch),
                num(pool.get("valid_rate")),
                num(pool.get("kept"), "{}"),
                num(lab.get("kept"), "{}"),
                accuracy(lab),
                accuracy(lab.get("kept_accuracy")),
                num(sol.get("mean_reward")),
                num(sol.get("true_rate")),
                num(m.get("eval", {}).get("average")),
                f"{sum(x['seconds'] for x in marks[k].values()):.0f}",
            ]
        )
        for s in marks[k].get("challenger", {}).get("steps", []):
            steps.append(
                [
                    k,
                    s["step"],
                    (k - 1) * cfg.challenger.steps + s["step"],
                    f"{round(s['valid_rate'] * s['completions'])}/{s['completions']}",
                    num(s.get("mean_p_hat"), "{:.2f}"),
                    num(s.get("mean_reward")),
                    accuracy(s),
                ]
            )
            buckets += [
                [k, f"step {s['step']}", b["bucket"], accuracy(b)] for b in s.get("by_p_hat", [])
            ]
        for where, d in (("pool, all", lab), ("pool, kept", lab.get("kept_accuracy") or {})):
            buckets += [[k, where, b["bucket"], accuracy(b)] for b in d.get("by_p_hat", [])]
    return [
        (
            "Per iteration",
            [
                "iter",
                "GRPO valid",
                "GRPO reward",
                "GRPO mean p̂",
                "GRPO label accuracy [95 % CI] (right/labelled)",
                "pool valid",
                "pool tasks",
                "kept",
                "pool label accuracy",
                "kept label accuracy",
                "solver reward (ỹ)",
                "solver true rate",
                "eval avg",
                "time (s)",
            ],
            summary,
        ),
        (
            "Exact label accuracy per challenger step",
            [
                "iter",
                "step",
                "global step",
                "valid",
                "mean p̂",
                "mean reward",
                "label accuracy [95 % CI] (right/labelled)",
            ],
            steps,
        ),
        (
            "Exact label accuracy by vote share p̂",
            ["iter", "where", "p̂ bucket", "label accuracy [95 % CI]"],
            buckets,
        ),
    ]


def rzero_code_examples(run: RunDir, cfg: RZeroConfig) -> list[tuple[str, str, str]]:
    """(title, program, votes line) of the first labelled tasks of each iteration's pool."""
    out = []
    for k in run.iterations():
        if run.marker(k, "labelling") is None:
            continue
        for r in [r for r in run.rows(k, "labelled") if r.get("label") is not None][:EXAMPLES]:
            task = CodeTask.from_json(r["task"])
            mark = "right" if r["label_correct"] else "wrong"
            votes = ", ".join(f"{label} x{n}" for label, n in r["groups"].items())
            out.append(
                (
                    f"iteration {k}: {call_text(task.input)}",
                    task.program,
                    f"votes {votes}; label {r['label']} (p̂ {r['p_hat']:.2f}, "
                    f"{'kept' if r['kept'] else 'not kept'}); truth {task.output}: {mark}",
                )
            )
    return out


# ---------------------------------------------------------------- Absolute Zero


def azr_tables(run: RunDir, cfg: RZeroConfig) -> list[Table]:
    marks = committed(run, run.layout.phases)
    per_type, steps, refusals = [], [], []
    for k in run.trained_iterations():
        m = {p: x.get("metrics", {}) for p, x in marks[k].items()}
        if not m:
            continue
        ch, pool, sol = (m.get(p, {}) for p in ("challenger", "pool", "solver"))
        for kind in cfg.code.task_types:

            def g(d: dict, key: str, kind: str = kind) -> Any:
                return d.get(f"{kind}/{key}")

            per_type.append(
                [
                    k,
                    kind,
                    num(g(ch, "proposals"), "{}"),
                    interval(
                        g(ch, "valid"),
                        g(ch, "proposals"),
                        g(ch, "valid_ci_low"),
                        g(ch, "valid_ci_high"),
                    ),
                    num(g(ch, "mean_r_bar")),
                    num(g(ch, "mean_reward")),
                    f"{num(g(pool, 'proposed'), '{}')} + {num(g(pool, 'from_buffer'), '{}')}",
                    interval(
                        g(sol, "solved"),
                        g(sol, "rollouts"),
                        g(sol, "solve_ci_low"),
                        g(sol, "solve_ci_high"),
                    ),
                ]
            )
        for s in marks[k].get("challenger", {}).get("steps", []):
            steps.append(
                [
                    k,
                    s["step"],
                    s["completions"],
                    num(s["valid_rate"]),
                    num(s["mean_reward"]),
                    "; ".join(
                        f"{kind} {num(s.get(f'{kind}/valid_rate'), '{:.2f}')}"
                        for kind in cfg.code.task_types
                    ),
                ]
            )
        refusals += [[k, reason, n] for reason, n in ch.get("refusals", {}).items()]
    return [
        (
            "Per iteration and task type",
            [
                "iter",
                "type",
                "proposals",
                "valid [95 % CI] (valid/proposals)",
                "mean r̄ (valid)",
                "proposer reward",
                "solver tasks (new + buffer)",
                "solve rate [95 % CI] (solved/rollouts)",
            ],
            per_type,
        ),
        (
            "Proposer steps",
            ["iter", "step", "completions", "valid", "mean reward", "valid by type"],
            steps,
        ),
        ("Why proposals were refused (most common)", ["iter", "reason", "count"], refusals),
    ]


def azr_examples(run: RunDir, cfg: RZeroConfig) -> list[tuple[str, str, str]]:
    """(title, program, detail) of valid proposals of the last proposer phase, per type."""
    done = [k for k in run.iterations() if run.marker(k, "challenger") is not None]
    if not done:
        return []
    rows = [r for r in run.rows(done[-1], "challenger_steps") if r["valid"]]
    out = []
    for kind in cfg.code.task_types:
        for r in [r for r in rows if r["kind"] == kind][:EXAMPLES]:
            t = CodeTask.from_json(r["task"])
            detail = (
                f"{call_text(t.input)} == {t.output}"
                if kind != "induction"
                else f"message {t.message!r}; pairs "
                + ", ".join(f"{call_text(i)} == {o}" for i, o in t.visible + t.hidden)
            )
            out.append(
                (f"iteration {done[-1]}, {kind} (r̄ {num(r['r_bar'], '{:.2f}')})", t.program, detail)
            )
    return out


# ---------------------------------------------------------------- rendering


def _intro(run: RunDir, cfg: RZeroConfig) -> list[str]:
    c = cfg.code
    sandbox = (
        f"sandbox: {c.timeout_s} s and {c.memory_mb} MiB per run, {c.workers} at once "
        "(rzero/executor/sandbox.py says what it does not protect against)"
    )
    if run.layout.name == "azr":
        return [
            f"- Absolute Zero on `{cfg.model.name}`: task types {', '.join(c.task_types)}; "
            f"{'one model' if cfg.roles.shared else 'separate proposer and solver'}; "
            f"iterations: {cfg.run.iterations}",
            f"- proposer: {cfg.challenger.steps} GRPO steps of {cfg.challenger.prompts_per_step}"
            f" prompts x G {cfg.challenger.group_size}; r̄ over {c.solver_samples} frozen-solver"
            f" samples; reward 1 − r̄ (0 at r̄ ∈ {{0, 1}}); format penalty "
            f"{'on' if c.format_penalty else 'off'}",
            f"- solver: {cfg.solver.steps} GRPO steps; {c.tasks_per_type} tasks per type; "
            "reward = the executor's verdict; the solve rate is over the solver phase's "
            "rollouts",
            f"- {sandbox}",
        ]
    lab = cfg.labeling
    band = (
        f"{lab.band_low} <= p̂ <= {lab.band_high}"
        if lab.band_low is not None
        else f"|p̂ − 1/2| <= {lab.delta}"
    )
    return [
        f"- R-Zero on code deduction tasks, `{cfg.model.name}`; "
        f"{'shared weights' if cfg.roles.shared else 'separate weights'}; "
        f"iterations: {cfg.run.iterations}",
        f"- labelling: m={lab.num_votes} votes, band {band}"
        + ("" if lab.filter else " (filter off)"),
        "- label accuracy is exact: the executor ran every proposed program on its input, "
        "and a label is right when it equals that output; accuracy = right / labelled "
        "(votes with no parsed answer are unlabelled, not wrong), 95 % Wilson interval",
        f"- {sandbox}",
    ]


def _content(run: RunDir, cfg: RZeroConfig):
    if run.layout.name == "azr":
        return "Absolute Zero run", azr_tables(run, cfg), azr_examples(run, cfg)
    return ("R-Zero on code run", rzero_code_tables(run, cfg), rzero_code_examples(run, cfg))


def render_markdown(run: RunDir, cfg: RZeroConfig) -> str:
    title, tables, examples = _content(run, cfg)
    lines = [run_headline(run, cfg), "", f"# {title}: {run.path.name}", "", *_intro(run, cfg), ""]
    for name, header, rows in tables:
        lines += [f"## {name}", "", markdown_table(header, rows) if rows else "(none yet)\n"]
    if examples:
        lines += ["## Examples", ""]
        for what, program, detail in examples:
            lines += [
                f"- {what}: {detail}",
                "",
                "  ```python",
                *[f"  {line}" for line in program.replace("```", "'''").splitlines()],
                "  ```",
                "",
            ]
    times, warnings = phase_times(run, run.layout.phases)
    lines += ["## Phase times (s) and peak memory", ""] + [f"- {t}" for t in times]
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    lines += [
        "",
        "Files: `metrics.jsonl`, `iter_KK/challenger_steps.jsonl` (every proposal "
        "with its reward parts), `iter_KK/pool.jsonl`, "
        + ("`iter_KK/labelled.jsonl` (votes, label, truth), " if run.layout.name != "azr" else "")
        + "`iter_KK/challenger/`, `iter_KK/solver/` (checkpoints).",
        "",
    ]
    return "\n".join(lines)


def render_html(run: RunDir, cfg: RZeroConfig) -> str:
    title, tables, examples = _content(run, cfg)
    # the intro's Markdown list items as plain paragraphs (no bullets or backticks in HTML)
    parts: list[Any] = [line.removeprefix("- ").replace("`", "") for line in _intro(run, cfg)]
    parts += audit_link(run)
    parts.append(
        figure(
            errorbar_png(
                [
                    update_panel(run, "challenger", "proposer: reward per update"),
                    update_panel(run, "solver", "solver: reward per update"),
                ]
            ),
            "TRL's log of every update: the mean reward (solid) and the share of groups whose "
            "answers all scored alike (dotted), which carry no gradient.",
        )
    )
    for name, header, rows in tables:
        parts += [heading(name), html_table(header, rows) if rows else "(none yet)"]
    if examples:
        parts.append(heading("Examples"))
        parts += [
            html_table(
                ["task", "program", "outcome"],
                [[what, preformatted(program), detail] for what, program, detail in examples],
            )
        ]
    times, warnings = phase_times(run, run.layout.phases)
    parts += [heading("Phase times (s) and peak memory"), *times]
    if warnings:
        parts += [heading("Warnings"), *warnings]
    return html_page(f"{title}: {run.path.name}", parts)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    """`metrics.jsonl` (one row per committed phase and per GRPO step of either role, as
    ``challenger_step`` / ``solver_step``), `best.json` once a solver was evaluated (the
    math evaluation's best), `report.md` and `report.html`, from the markers."""
    write_metrics(run, cfg, run.layout.phases)
    write_text_atomic(run.path / "report.md", render_markdown(run, cfg))
    write_text_atomic(run.path / "report.html", render_html(run, cfg))
