"""`report.md` and `report.html` of a SPIN run, rebuilt from its markers after every commit;
report.md opens with the run's finding in one line (`rzero.reports.headline`).

With `spin.plateau_updates`, first θ_0: the SFT that made it, its development curve (pass@1
with Wilson intervals every few updates, drawn), and where it stopped. The dynamics table
(seed §6.1) per iteration: λ, the pairs trained on (by the iteration
that generated their y′), updates, the final training loss; on held-out pairs the main
player's discriminator accuracy and mean margin against its opponent, each with its
interval, the held-out SPIN loss, the log-likelihood per token of the data answers, and the
frozen discriminator's accuracy; the opponent's own answers (how many were right). Then the
evaluation per iteration with the paired change against the previous iteration and against
the base (bootstrap interval, McNemar p), a figure of margin, accuracy and log-likelihood,
a few held-out pairs, phase times and warnings. Every table is built once and rendered to
both formats; the HTML escapes what a model wrote.
"""

from __future__ import annotations

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
    preformatted,
)
from rzero.reports import committed, phase_times, write_metrics
from rzero.reports.cells import Table, eval_table, num, ranged
from rzero.reports.headline import run_headline
from rzero.rundir import RunDir
from rzero.spin.layout import LAYOUT
from rzero.stats import wilson_interval

EXAMPLES = 3  # held-out pairs shown from the last generated iteration


def _share(d: dict[str, Any] | None) -> str:
    """`0.750 [0.580, 0.870] (24/32)`: a separation's accuracy and its Wilson interval."""
    if not d or d.get("accuracy") is None:
        return "–"
    return (
        f"{d['accuracy']:.3f} [{d['accuracy_low']:.3f}, {d['accuracy_high']:.3f}] "
        f"({d['right']}/{d['n']})"
    )


def _change(d: dict[str, Any] | None) -> str:
    if not d or d.get("low") is None:
        return "–"
    return f"{d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def dynamics_table(run: RunDir) -> Table:
    rows = []
    for k, m in committed(run, LAYOUT.phases).items():
        train, dyn, gen = m.get("train", {}), m.get("dynamics", {}), m.get("generate", {})
        d = dyn.get("dynamics", {})
        ll = d.get("loglik") or dyn.get("loglik") or {}
        tm, gm = train.get("metrics", {}), gen.get("metrics", {})
        pairs = train.get("from_iterations")
        rows.append(
            [
                k,
                num(train.get("lambda"), "{:g}"),
                " + ".join(f"{n} of iteration {j}" for j, n in sorted(pairs.items(), reverse=True))
                if pairs
                else "–",
                tm.get("updates", "–"),
                _identical(gm),
                num(tm.get("final_loss"), "{:.4f}"),
                _share(d.get("main")),
                ranged(
                    d.get("main", {}).get("margin"),
                    d.get("main", {}).get("margin_low"),
                    d.get("main", {}).get("margin_high"),
                ),
                num(d.get("loss"), "{:.4f}"),
                ranged(ll.get("per_token"), ll.get("low"), ll.get("high")),
                _change(d.get("loglik_change")),
                _share(d.get("discriminator")),
                num(gm.get("opponent_correct_rate")),
            ]
        )
    return (
        "Dynamics on held-out pairs (seed §6.1)",
        [
            "iteration",
            "λ",
            "pairs trained",
            "updates",
            "opponent's y′ = y",
            "final loss",
            "discriminator accuracy [95 %]",
            "mean margin Δ [95 %]",
            "held-out loss",
            "log-lik / token of y [95 %]",
            "its change vs k−1 [95 %, paired]",
            "frozen discriminator accuracy",
            "opponent's y′ right",
        ],
        rows,
    )


def _identical(generated: dict[str, Any]) -> str:
    """How many prompts the opponent answered with the data answer word for word: of the
    training prompts (pairs that give SPIN no gradient), or of all, in an older marker."""
    if "identical_train" in generated:
        return f"{generated['identical_train']} of {generated['pairs']} training"
    if "identical" in generated:
        return f"{generated['identical']} of {generated['pairs'] + generated['heldout']} prompts"
    return "–"


def _plateau(run: RunDir) -> dict[str, Any] | None:
    return run.marker(0, "plateau")


def _wilson(p: dict[str, float]) -> tuple[float, float]:
    return wilson_interval(round(p["dev_pass@1"] * p["dev_n"]), p["dev_n"])


def plateau_table(run: RunDir) -> Table:
    """θ_0's development curve: greedy pass@1 (Wilson interval) and the well-formed share at
    every scored update, the kept checkpoint marked."""
    m = _plateau(run) or {}
    best = m.get("metrics", {}).get("best_update")
    rows = [
        [
            p["update"] if p["update"] != best else f"{p['update']} (θ_0)",
            ranged(p["dev_pass@1"], *_wilson(p)),
            num(p["dev_well_formed"]),
            p["dev_n"],
        ]
        for p in m.get("curve", [])
    ]
    return (
        "θ_0: SFT of the base until the development draw stops rising",
        ["SFT update", "dev pass@1 [95 %]", "well-formed", "items"],
        rows,
    )


def _plateau_words(run: RunDir, cfg: RZeroConfig) -> str | None:
    m = _plateau(run)
    if m is None:
        return None
    x, s = m["metrics"], cfg.spin
    how = (
        f"stopped after {x['updates']} updates: {s.plateau_patience} scores in a row without a "
        f"new best"
        if x["stopped"]
        else f"ran its {x['updates']} updates without a plateau"
    )
    return (
        f"θ_0 is the base after {x['best_update']} updates of SFT on the training rows "
        f"(`{s.plateau_dev}`, {s.plateau_dev_items} items, scored every {s.plateau_every} "
        f"updates: {x['dev_first']:.3f} → best {x['dev_best']:.3f}; {how})."
    )


def _plateau_figure(run: RunDir) -> bytes | None:
    m = _plateau(run)
    if m is None or not m.get("curve"):
        return None
    pts = m["curve"]
    bounds = [_wilson(p) for p in pts]
    return errorbar_png(
        [
            Panel(
                "development draw: greedy pass@1",
                "SFT update",
                "pass@1",
                [
                    Series(
                        "θ during the SFT",
                        [p["update"] for p in pts],
                        [p["dev_pass@1"] for p in pts],
                        [lo for lo, _ in bounds],
                        [hi for _, hi in bounds],
                    )
                ],
                ylim=(0.0, 1.0),
                xticks=[p["update"] for p in pts],
            )
        ],
        title="θ_0: SFT until the development draw stops rising, 95 % intervals",
    )


def _figure(run: RunDir) -> bytes | None:
    marks = committed(run, LAYOUT.phases)
    main = [
        (k, m["dynamics"]["dynamics"])
        for k, m in marks.items()
        if k >= 1 and "dynamics" in m and "dynamics" in m["dynamics"]
    ]
    if not main:
        return None
    xs = [k for k, _ in main]

    def series(label: str, key: str, low: str, high: str, pick, shift: float = 0.0) -> Series:
        vals = [pick(d) for _, d in main]
        return Series(
            label,
            [x + shift for x in xs],
            [v[key] for v in vals],
            [v[low] for v in vals],
            [v[high] for v in vals],
        )

    lls = [
        (k, (m["dynamics"].get("dynamics") or {}).get("loglik") or m["dynamics"].get("loglik"))
        for k, m in marks.items()
        if "dynamics" in m
    ]
    lls = [(k, ll) for k, ll in lls if ll and ll.get("low") is not None]
    acc = [series("main player", "accuracy", "accuracy_low", "accuracy_high", lambda d: d["main"])]
    if all("discriminator" in d for _, d in main):
        acc.append(
            series(
                "frozen discriminator",
                "accuracy",
                "accuracy_low",
                "accuracy_high",
                lambda d: d["discriminator"],
                shift=0.08,
            )
        )  # beside, not over
    panels = [
        Panel(
            "mean margin Δ on held-out pairs",
            "iteration",
            "Δ (nats)",
            [series("θ_k vs θ_k−1", "margin", "margin_low", "margin_high", lambda d: d["main"])],
            xticks=xs,
        ),
        Panel(
            "discriminator accuracy (Δ > 0)",
            "iteration",
            "share of pairs",
            acc,
            ylim=(0.0, 1.04),
            xticks=xs,
        ),
        Panel(
            "log-likelihood of held-out data answers",
            "iteration",
            "nats per token",
            [
                Series(
                    "θ_k (0: θ_0)",
                    [k for k, _ in lls],
                    [ll["per_token"] for _, ll in lls],
                    [ll["low"] for _, ll in lls],
                    [ll["high"] for _, ll in lls],
                )
            ],
            xticks=[k for k, _ in lls],
        ),
    ]
    return errorbar_png(panels, title="SPIN's dynamics, 95 % intervals")


def _examples(run: RunDir) -> list[tuple[str, str, str]]:
    for k in reversed(run.trained_iterations()):
        if run.marker(k, "generate") is None:
            continue
        held = [p for p in run.rows(k, "pairs") if p["split"] == "heldout"][:EXAMPLES]
        return [
            (f"iteration {k}: {p['prompt'][-1]['content']}", p["chosen"], p["rejected"])
            for p in held
        ]
    return []


def _intro(cfg: RZeroConfig) -> list[str]:
    s = cfg.spin
    goal = (
        "SPIN (self-play fine-tuning): each iteration the previous model answers the "
        "SFT prompts, and the new one is trained to tell the data answers from those."
    )
    if s.objective == "sft":
        goal = (
            "The SFT control of SPIN: the same updates spent on plain supervised "
            "fine-tuning of the data answers (no opponent)."
        )
    return [
        goal,
        f"- data: `{s.data}`, {s.prompts} training and {s.heldout} held-out prompts; λ "
        f"per iteration {s.lambdas}; pair weights {s.pair_weights}; {s.epochs:g} epoch{'' if s.epochs == 1 else 's'}, "
        f"lr {s.learning_rate:g} ({s.optimizer}, {s.lr_scheduler}), {s.batch_size} pairs "
        f"per update",
        f"- model `{cfg.model.name}`, {cfg.run.iterations} iterations, seed {cfg.run.seed}",
    ]


def tables(run: RunDir) -> list[Table]:
    first = [plateau_table(run)] if _plateau(run) is not None else []
    return [*first, dynamics_table(run), eval_table(run, LAYOUT.phases)]


def render_markdown(run: RunDir, cfg: RZeroConfig) -> str:
    lines = [run_headline(run, cfg), "", f"# SPIN run: {run.path.name}", "", *_intro(cfg), ""]
    plateau = _plateau_words(run, cfg)
    if plateau:
        lines += [plateau, ""]
    for name, header, rows in tables(run):
        lines += [f"## {name}", "", markdown_table(header, rows) if rows else "(none yet)\n"]
    examples = _examples(run)
    if examples:
        lines += ["## Held-out pairs", ""]
        for what, chosen, rejected in examples:
            lines += [
                f"- {what}",
                "",
                "  data answer y:",
                "",
                "  ```",
                *[f"  {x}" for x in chosen.replace("```", "'''").splitlines()],
                "  ```",
                "",
                "  opponent's y′:",
                "",
                "  ```",
                *[f"  {x}" for x in rejected.replace("```", "'''").splitlines()],
                "  ```",
                "",
            ]
    times, warnings = phase_times(run, LAYOUT.phases)
    lines += ["## Phase times (s) and peak memory", ""] + [f"- {t}" for t in times]
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    lines += [
        "",
        "Files: `metrics.jsonl`, `iter_KK/pairs.jsonl` (every prompt with its data "
        "answer and the opponent's), `iter_KK/heldout.jsonl` (per held-out pair the "
        "log-probabilities under θ_k, θ_k−1 and the frozen discriminator), "
        "`iter_KK/model/` (checkpoints), `iter_KK/eval/`.",
        "",
    ]
    return "\n".join(lines)


def render_html(run: RunDir, cfg: RZeroConfig) -> str:
    parts: list[Any] = [line.removeprefix("- ").replace("`", "") for line in _intro(cfg)]
    plateau = _plateau_words(run, cfg)
    if plateau:
        parts.append(plateau.replace("`", ""))
    png = _plateau_figure(run)
    if png is not None:
        parts.append(
            figure(
                png,
                "θ_0: greedy pass@1 on the development draw during the SFT of the base; "
                "SPIN and its control start from the best point.",
            )
        )
    png = _figure(run)
    if png is not None:
        parts.append(
            figure(
                png,
                "Per iteration: the main player's mean margin and "
                "discriminator accuracy on held-out pairs against its "
                "opponent, and the log-likelihood of the held-out data "
                "answers (iteration 0: θ_0, the base or its SFT plateau).",
            )
        )
    for name, header, rows in tables(run):
        parts += [heading(name), html_table(header, rows) if rows else "(none yet)"]
    examples = _examples(run)
    if examples:
        parts += [
            heading("Held-out pairs"),
            html_table(
                ["prompt", "data answer y", "opponent's y′"],
                [[w, preformatted(c), preformatted(r)] for w, c, r in examples],
            ),
        ]
    times, warnings = phase_times(run, LAYOUT.phases)
    parts += [heading("Phase times (s) and peak memory"), *times]
    if warnings:
        parts += [heading("Warnings"), *warnings]
    return html_page(f"SPIN run: {run.path.name}", parts)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    """`metrics.jsonl`, `best.json` once a model was evaluated, `report.md`, `report.html`."""
    write_metrics(run, cfg, LAYOUT.phases)
    write_text_atomic(run.path / "report.md", render_markdown(run, cfg))
    write_text_atomic(run.path / "report.html", render_html(run, cfg))
