"""report.md / report.html of a SPAG run, rebuilt from its folder after every commit: the
self-play games per epoch (outcome rates with intervals, length, the cheating probes, the
roles' gradient cosine), the population audit of the tournaments (the win-rate matrix as a
table and a heat map, Bradley–Terry ratings with their calibration, the non-transitive
share, the exploitability of the history), each player against the fixed anchors, the
math evaluation with paired intervals, and example games; report.md opens with the run's
finding in one line (`rzero.reports.headline`)."""

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
    heatmap_png,
    html_page,
    html_table,
    markdown_table,
    preformatted,
)
from rzero.reports import committed, phase_times, write_metrics
from rzero.reports.cells import Table, eval_table, num, ranged
from rzero.reports.headline import run_headline
from rzero.rundir import RunDir
from rzero.spag.game import ATTACKER_WINS, DEFENDER_WINS, TIE, VIOLATION
from rzero.spag.layout import LAYOUT
from rzero.spag.population import bradley_terry, exploitability, nontransitivity, score, win_matrix
from rzero.stats import mean_interval, wilson_interval

SCRIPTED = "scripted"
EXAMPLES = 2  # games shown from the last epoch


def _rate(k: int, n: int) -> str:
    if not n:
        return "–"
    low, high = wilson_interval(k, n)
    return f"{k / n:.3f} [{low:.3f}, {high:.3f}]"


def _final_loss(metrics: dict[str, Any]) -> str:
    if "attacker_final_loss" in metrics:  # spag.roles separate: one model per role
        return (
            f"{num(metrics['attacker_final_loss'], '{:.4f}')} / "
            f"{num(metrics['defender_final_loss'], '{:.4f}')}"
        )
    return num(metrics.get("final_loss"), "{:.4f}")


def selfplay_table(run: RunDir) -> Table:
    rows = []
    for k, m in committed(run, LAYOUT.phases).items():
        g = m.get("games", {}).get("metrics")
        if not g:
            continue
        t = m.get("train", {}).get("metrics", {})
        n = g["games"]
        rows.append(
            [
                k,
                n,
                _rate(g[ATTACKER_WINS], n),
                _rate(g[DEFENDER_WINS], n),
                _rate(g[TIE], n),
                _rate(g[VIOLATION], n),
                num(g["mean_messages"], "{:.1f}"),
                f"{num(g['attacker_words'], '{:.1f}')} / {num(g['defender_words'], '{:.1f}')}",
                f"{g['spelled']}/{g['attacker_turns']}",
                f"{g['guesses']} ({g['first_turn_guesses']} at the first turn)",
                f"{t.get('attacker_rows', '–')} / {t.get('defender_rows', '–')}",
                num(t.get("gradient_cosine")),
                _final_loss(t),
            ]
        )
    return (
        "Self-play games per epoch (95 % Wilson intervals)",
        [
            "epoch",
            "games",
            "attacker wins",
            "defender wins",
            "ties",
            "violations",
            "messages",
            "words per turn A / D",
            "attacker turns spelling the word",
            "defender guesses",
            "winner turns trained A / D",
            "cos(g_A, g_D)",
            "final loss (A / D with separate roles)",
        ],
        rows,
    )


def tournament_games(run: RunDir) -> list[dict[str, Any]]:
    return [
        r
        for k in run.trained_iterations()
        if run.marker(k, "tournament")
        for r in run.rows(k, "tournament")
    ]


def players_of(run: RunDir, games: list[dict[str, Any]]) -> list[str]:
    """The players in the order they appeared, the scripted anchor last."""
    seen: list[str] = []
    for g in games:
        for p in (g["attacker"], g["defender"]):
            if p not in seen:
                seen.append(p)
    return [p for p in seen if p != SCRIPTED] + ([SCRIPTED] if SCRIPTED in seen else [])


def population(run: RunDir) -> dict[str, Any] | None:
    """The win-rate matrix of every tournament so far, its Bradley–Terry fit, the
    non-transitive share, and the exploitability of the uniform mixture over the trained
    history after each epoch (the scripted anchor a player of the max, not of the mixture)."""
    games = tournament_games(run)
    if not games:
        return None
    players = players_of(run, games)
    w, n = win_matrix(games, players)
    models = [p for p in players if p != SCRIPTED]
    history = []
    for upto in range(1, len(models) + 1):
        keep = set(models[:upto]) | ({SCRIPTED} if SCRIPTED in players else set())
        sub = [i for i, p in enumerate(players) if p in keep]
        ws = [[w[i][j] for j in sub] for i in sub]
        mix = [1.0 / upto if players[i] in models[:upto] else 0.0 for i in sub]
        history.append({"players": models[:upto], "exploitability": exploitability(ws, mix)})
    return {
        "players": players,
        "w": w,
        "n": n,
        "bt": bradley_terry(w, n),
        "cycles": nontransitivity(w),
        "history": history,
        "games": len(games),
        "violations": sum(g["outcome"] == VIOLATION for g in games),
        "ties": sum(g["outcome"] == TIE for g in games),
    }


def matrix_table(pop: dict[str, Any]) -> Table:
    players, w, n = pop["players"], pop["w"], pop["n"]
    rows = [
        [p]
        + [
            f"{w[i][j]:.2f} ({n[i][j]})" if w[i][j] is not None else "–"
            for j in range(len(players))
        ]
        for i, p in enumerate(players)
    ]
    return (
        "Win-rate matrix W_ij: row's mean score against column (1 win, ½ tie), both "
        "roles, held-out words (games)",
        ["player", *players],
        rows,
    )


def rating_table(pop: dict[str, Any]) -> Table:
    bt = pop["bt"]
    rows = [
        [p, f"{bt['elo'][i]:+.0f}", f"{bt['strength'][i]:.3f}"]
        for i, p in enumerate(pop["players"])
    ]
    return ("Bradley–Terry fit (Elo scale, geometric mean 0)", ["player", "Elo", "strength"], rows)


def anchor_table(run: RunDir, games: list[dict[str, Any]]) -> Table:
    """Each trained player's mean score against the fixed anchors (the base, the scripted
    player), with a 95 % interval over its games."""
    rows = []
    players = players_of(run, games)
    for p in players:
        if p in ("base", SCRIPTED):
            continue
        cells = [p]
        for anchor in ("base", SCRIPTED):
            scores = [
                s
                for g in games
                for s in [
                    score(g["outcome"], "attacker")
                    if (g["attacker"], g["defender"]) == (p, anchor)
                    else score(g["outcome"], "defender")
                    if (g["attacker"], g["defender"]) == (anchor, p)
                    else None
                ]
                if s is not None
            ]
            if scores:
                cells.append(f"{ranged(*mean_interval(scores))} ({len(scores)})")
            else:
                cells.append("–")
        rows.append(cells)
    return (
        "Against the fixed anchors: mean score [95 %] (games)",
        ["player", "vs base", "vs scripted"],
        rows,
    )


def _summary(pop: dict[str, Any] | None) -> list[str]:
    if pop is None:
        return []
    lines = [
        f"Tournament games: {pop['games']}, of which {pop['violations']} were violations "
        f"(the attacker said the word or guessed; not counted in W) and {pop['ties']} "
        f"ties."
    ]
    gap = pop["bt"]["calibration_gap"]
    if gap is not None:
        lines.append(
            f"Bradley–Terry calibration: mean |W_ij − predicted| = {gap:.3f} over "
            f"{len(pop['bt']['pairs'])} pairs."
        )
    if pop["cycles"] is not None:
        c = pop["cycles"]
        lines.append(
            f"Non-transitive share of W − ½: {c['cyclic_share']:.3f} (0: one ranking "
            f"explains every result), of ‖W − ½‖ = {c['norm']:.3f} (near 0 the "
            f"results are draws and the share describes noise)."
        )
    else:
        lines.append("Non-transitive share: needs three or more players with every pair played.")
    lines += [
        f"Exploitability of the uniform mixture over {', '.join(h['players'])}: "
        f"{h['exploitability']:+.3f}"
        for h in pop["history"]
    ]
    return lines


def _figure(run: RunDir) -> bytes | None:
    epochs = [
        (k, m["games"]["metrics"]) for k, m in committed(run, LAYOUT.phases).items() if "games" in m
    ]
    if not epochs:
        return None
    xs = [k for k, _ in epochs]

    def rate(key: str, label: str) -> Series:
        ivs = [wilson_interval(g[key], g["games"]) for _, g in epochs]
        return Series(
            label,
            xs,
            [g[key] / g["games"] for _, g in epochs],
            [lo for lo, _ in ivs],
            [hi for _, hi in ivs],
        )

    panels = [
        Panel(
            "self-play outcomes",
            "epoch",
            "share of games",
            [
                rate(ATTACKER_WINS, "attacker wins"),
                rate(DEFENDER_WINS, "defender wins"),
                rate(TIE, "ties"),
                rate(VIOLATION, "violations"),
            ],
            ylim=(0.0, 1.0),
            xticks=xs,
        ),
        Panel(
            "game and turn length",
            "epoch",
            "mean",
            [
                Series("messages per game", xs, [g["mean_messages"] for _, g in epochs]),
                Series(
                    "attacker words per turn", xs, [g["attacker_words"] or 0 for _, g in epochs]
                ),
                Series(
                    "defender words per turn", xs, [g["defender_words"] or 0 for _, g in epochs]
                ),
            ],
            xticks=xs,
        ),
    ]
    return errorbar_png(panels, title="SPAG self-play per epoch, 95 % intervals")


def _examples(run: RunDir) -> list[tuple[str, str]]:
    for k in reversed(run.trained_iterations()):
        if run.marker(k, "games") is None:
            continue
        games = run.rows(k, "games")
        decided = [g for g in games if g["outcome"] in (ATTACKER_WINS, DEFENDER_WINS)]
        shown = (decided + [g for g in games if g not in decided])[:EXAMPLES]
        return [
            (
                f"epoch {k}, target '{g['target']}': {g['outcome']} ({g['reason']})",
                "\n".join(f"{t['role']}: {t['text']}" for t in g["turns"]),
            )
            for g in shown
        ]
    return []


def _intro(cfg: RZeroConfig) -> list[str]:
    s = cfg.spag
    teacher = (
        f"imitation of {s.teacher_model} ({s.imitation_games} games) first"
        if s.teacher_url
        else "no imitation step (no teacher)"
    )
    who = (
        "an attacker model and a defender model (spag.roles separate) play Adversarial "
        "Taboo against each other; each epoch each one's winning turns are reinforced "
        "offline, with SFT rows mixed in; the math evaluation scores the defender"
        if s.roles == "separate"
        else "one model plays both roles of Adversarial Taboo against itself; each epoch its "
        "winners' turns are reinforced offline, with SFT rows mixed in"
    )
    return [
        f"SPAG: {who}.",
        f"- {s.games} games per epoch, at most {s.max_turns} turns each, match "
        f"`{s.match}`, temperature {s.temperature:g}, {s.max_new_tokens} tokens a turn; "
        f"{teacher}",
        f"- loss: decay {s.decay:g}, clip {s.clip:g}, KL {s.kl_coef:g}, SFT α "
        f"{s.sft_coef:g} on {s.sft_rows} rows of `{s.sft_data}`; lr {s.learning_rate:g}",
        f"- model `{cfg.model.name}`, {cfg.run.iterations} epochs, seed {cfg.run.seed}; "
        f"tournament: {s.tournament_games} games per pair and role on held-out words",
    ]


def tables(run: RunDir) -> tuple[list[Table], dict[str, Any] | None]:
    pop = population(run)
    out = [selfplay_table(run)]
    if pop is not None:
        out += [matrix_table(pop), rating_table(pop), anchor_table(run, tournament_games(run))]
    out.append(eval_table(run, LAYOUT.phases))
    return out, pop


def render_markdown(run: RunDir, cfg: RZeroConfig) -> str:
    lines = [run_headline(run, cfg), "", f"# SPAG run: {run.path.name}", "", *_intro(cfg), ""]
    ts, pop = tables(run)
    for name, header, rows in ts:
        lines += [f"## {name}", "", markdown_table(header, rows) if rows else "(none yet)\n"]
    lines += [f"- {x}" for x in _summary(pop)] + [""]
    for what, text in _examples(run):
        lines += [f"## Game: {what}", "", "```", text.replace("```", "'''"), "```", ""]
    times, warnings = phase_times(run, LAYOUT.phases)
    lines += ["## Phase times (s) and peak memory", ""] + [f"- {t}" for t in times]
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    lines += [
        "",
        "Files: `metrics.jsonl`, `iter_KK/games.jsonl` (every self-play game: turns, "
        "roles, outcome, reason), `iter_KK/tournament.jsonl` (every evaluation game), "
        "`iter_00/teacher_games.jsonl` (with a teacher), `iter_KK/model/`, "
        "`iter_KK/eval/`.",
        "",
    ]
    return "\n".join(lines)


def render_html(run: RunDir, cfg: RZeroConfig) -> str:
    parts: list[Any] = [line.removeprefix("- ").replace("`", "") for line in _intro(cfg)]
    png = _figure(run)
    if png is not None:
        parts.append(
            figure(
                png,
                "Per epoch: the self-play games' outcomes with Wilson "
                "intervals, and the games' and turns' lengths.",
            )
        )
    ts, pop = tables(run)
    if pop is not None:
        parts.append(
            figure(
                heatmap_png(
                    pop["w"],
                    pop["players"],
                    pop["players"],
                    "W_ij: row's mean score against column",
                    "mean score",
                ),
                "The win-rate matrix of every tournament so far (both roles, held-out words).",
            )
        )
    for name, header, rows in ts:
        parts += [heading(name), html_table(header, rows) if rows else "(none yet)"]
    parts += _summary(pop)
    examples = _examples(run)
    if examples:
        parts += [
            heading("Games"),
            html_table(["game", "dialogue"], [[w, preformatted(t)] for w, t in examples]),
        ]
    times, warnings = phase_times(run, LAYOUT.phases)
    parts += [heading("Phase times (s) and peak memory"), *times]
    if warnings:
        parts += [heading("Warnings"), *warnings]
    return html_page(f"SPAG run: {run.path.name}", parts)


def rebuild(run: RunDir, cfg: RZeroConfig) -> None:
    """`metrics.jsonl`, `best.json` once a model was evaluated, `report.md`, `report.html`."""
    write_metrics(run, cfg, LAYOUT.phases)
    write_text_atomic(run.path / "report.md", render_markdown(run, cfg))
    write_text_atomic(run.path / "report.html", render_html(run, cfg))
