"""`report.md` of a run: first the plan (`rzero.plan`: what each phase of an iteration
samples, generates and updates, beside the official code's numbers where the recipe claims
its schedule) and the prompt files used, then per iteration the challenger's, the pool's,
the labelling's, the solver's and the evaluation's numbers, phase times and peak memory, and
the warnings the phases recorded. Rebuilt from the markers at every commit."""

from __future__ import annotations

import hashlib

from rzero.config import RZeroConfig
from rzero.plan import plan_markdown
from rzero.rundir import PHASES, RunDir
from rzero.templates import template_path


def prompt_files(cfg: RZeroConfig) -> list[str]:
    """One line per role: the prompt file it used and the SHA-256 prefix of its text."""
    shipped = template_path(None, "solver.txt").parent
    lines = []
    for role, path, default in (("challenger", cfg.challenger.prompt_file, "challenger.txt"),
                                ("solver", cfg.solver.prompt_file, "solver.txt")):
        try:
            file = template_path(path, default)
        except FileNotFoundError:
            lines.append(f"- {role} prompt: `{path}` (not found now)")
            continue
        where = f"`{file.name}` (rzero/prompts/)" if file.parent == shipped else f"`{file}`"
        digest = hashlib.sha256(file.read_bytes()).hexdigest()[:12]
        lines.append(f"- {role} prompt: {where}, sha256 {digest}"
                     + (", the built-in few-shot default" if path is None else ""))
    return lines


def render_report(run: RunDir, cfg: RZeroConfig) -> str:
    """The run's report.md, from its markers."""
    run_dir = run.path
    mode = "shared weights (Single-R-Zero)" if cfg.roles.shared else "separate weights (R-Zero)"
    lab = cfg.labeling
    band = (f"{lab.band_low} <= p_hat <= {lab.band_high}" if lab.band_low is not None
            else f"|p_hat - 1/2| <= {lab.delta}")
    lines = [f"# R-Zero run: {run_dir.name}", "", plan_markdown(cfg, "config.yaml"),
             f"- model: `{cfg.model.name}`; {mode}; iterations: {cfg.run.iterations}",
             f"- labelling: m={lab.num_votes} votes, band {band}"
             + ("" if lab.filter else " (filter off)"),
             *prompt_files(cfg), "",
             "| iter | valid questions (GRPO) | mean challenger reward | mean p_hat (GRPO) "
             "| pool valid | pool kept | labelled mean p_hat | kept fraction | solver reward "
             "| eval avg | time (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    warnings = []
    base = run.marker(0, "eval")
    if base is not None:
        lines.append(f"| 0 (base) | | | | | | | | | {base['metrics']['average']:.3f} "
                     f"| {base['seconds']:.0f} |")
    for k in range(1, cfg.run.iterations + 1):
        m = {p: run.marker(k, p) for p in PHASES}
        if not any(m.values()):
            continue

        def g(phase, key, fmt="{:.3f}", m=m):
            v = (m[phase] or {}).get("metrics", {}).get(key)
            return fmt.format(v) if isinstance(v, (int, float)) else "–"

        seconds = sum(x["seconds"] for x in m.values() if x)
        lines.append(
            f"| {k} | {g('challenger', 'valid_rate')} | {g('challenger', 'mean_reward')} "
            f"| {g('challenger', 'mean_p_hat')} | {g('pool', 'valid_rate')} "
            f"| {g('pool', 'kept', '{}')} | {g('labelling', 'mean_p_hat')} "
            f"| {g('labelling', 'kept_fraction')} | {g('solver', 'mean_reward')} "
            f"| {g('eval', 'average')} | {seconds:.0f} |")
        warnings += [x["warning"] for x in m.values() if x and x.get("warning")]
    lines += ["", "Phase times (s) and peak resident memory:", ""]
    for k in range(0, cfg.run.iterations + 1):
        parts = [f"{p} {m['seconds']:.0f}"
                 + (f" ({m['peak_rss_gib']:.1f} GiB peak)" if m.get("peak_rss_gib") else "")
                 for p in PHASES if (m := run.marker(k, p)) is not None]
        if parts:
            lines.append(f"- iteration {k}: " + ", ".join(parts))
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    lines += ["", "Files: `iter_KK/challenger_steps.jsonl` (every GRPO question with its votes), "
              "`iter_KK/pool.jsonl`, `iter_KK/labelled.jsonl`, `iter_KK/challenger/` and "
              "`iter_KK/solver/` (Hugging Face checkpoints), `metrics.jsonl`, `tensorboard/`.",
              ""]
    return "\n".join(lines)
