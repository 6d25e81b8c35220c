"""`report.md` of a run: what was run, then per iteration the challenger's, the pool's, the
labelling's, the solver's and the evaluation's numbers, phase times and peak memory, and
the warnings the phases recorded. Rebuilt from the markers at every commit."""

from __future__ import annotations

from rzero.config import RZeroConfig
from rzero.rundir import PHASES, RunDir


def render_report(run: RunDir, cfg: RZeroConfig) -> str:
    """The run's report.md, from its markers."""
    run_dir = run.path
    mode = "shared weights (Single-R-Zero)" if cfg.roles.shared else "separate weights (R-Zero)"
    lines = [f"# R-Zero run: {run_dir.name}", "",
             f"- model: `{cfg.model.name}`; {mode}; iterations: {cfg.run.iterations}",
             f"- challenger: {cfg.challenger.steps} GRPO steps x {cfg.challenger.prompts_per_step}"
             f" prompts x G={cfg.challenger.group_size}; pool N={cfg.challenger.pool_size}",
             f"- labelling: m={cfg.labeling.num_votes} votes, band |p_hat - 1/2| <= "
             f"{cfg.labeling.delta}" + ("" if cfg.labeling.filter else " (filter off)"),
             f"- solver: {cfg.solver.steps} GRPO steps x {cfg.solver.prompts_per_step} questions"
             f" x G={cfg.solver.group_size}", "",
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
