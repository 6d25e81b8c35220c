"""What one iteration of a recipe computes, counted before anything runs (`rzero plan`).

A GRPO step of either role samples a *rollout* of `prompts_per_step` prompts x G completions
once, scores it with one reward call (so the challenger's repetition penalty clusters the
whole rollout: B = prompts_per_step x G), and then makes `prompts_per_step /
prompts_per_update` optimiser updates over mini-batches of it, as the official R-Zero code
(EasyR1/veRL) does: 512 prompts per step, mini-batches of 16 (challenger) and 128 (solver)
prompts, so 32 and 4 updates per step, 160 and 60 per phase. `role_schedule` maps that onto
TRL's batch arithmetic (`rzero.config.schedule`); `rzero.training.grpo.grpo_config` passes it to
GRPOConfig.

`plan_rows` lists, per phase, the prompts sampled, completions, optimiser updates,
sequences per micro-batch and process, B and the frozen solver's generations; with
`run.reference_schedule` each row carries the official code's number beside it.
`plan_markdown` is the table `rzero plan` prints and report.md shows after its science card.
"""

from __future__ import annotations

from dataclasses import dataclass

from rzero.config import GRPOSection, RZeroConfig
from rzero.config.schedule import RoleSchedule, role_schedule

# The official code's schedule (scripts/questioner_train_penalty.sh, solver_train.sh and
# examples/config.yaml of the R-Zero repository): rollout_batch_size 512, rollout.n 4 / 5,
# actor global_batch_size 16 / 128 prompts, 5 / 15 steps; the frozen solver's vLLM server
# samples 10 answers per question in the challenger reward, labelling keeps 0.3..0.8 of 9.
OFFICIAL = {
    "challenger": {
        "steps": 5,
        "group_size": 4,
        "prompts_per_step": 512,
        "prompts_per_update": 16,
        "votes": 10,
    },
    "pool": {"questions": 8000},
    "labelling": {"votes": 9},
    "solver": {"steps": 15, "group_size": 5, "prompts_per_step": 512, "prompts_per_update": 128},
}


@dataclass(frozen=True)
class PlanRow:
    phase: str  # challenger, pool, labelling, solver
    key: str  # stable name of the quantity, e.g. "updates"
    label: str
    value: int  # the number (an upper bound where `text` starts with ≤)
    text: str  # as shown
    official: int | None = None  # the official code's number, where the recipe claims it


def _n(x: int) -> str:
    return f"{x:,}"


def plan_rows(cfg: RZeroConfig) -> list[PlanRow]:
    """Per phase of one iteration: what it samples, generates and updates."""
    procs = cfg.run.training_processes
    claim = cfg.run.reference_schedule
    m = cfg.labeling.num_votes
    rows: list[PlanRow] = []

    def add(phase, key, label, value, text, official=None):
        rows.append(PlanRow(phase, key, label, value, text, official if claim else None))

    def role_rows(name: str, role: GRPOSection, ref: dict) -> RoleSchedule:
        sch = role_schedule(role, procs)
        g = role.group_size
        add(name, "steps", "GRPO steps (rollouts)", sch.steps, _n(sch.steps), ref["steps"])
        add(
            name,
            "prompts",
            "prompts sampled",
            sch.prompts,
            f"{_n(sch.prompts)} ({_n(sch.prompts_per_step)} per step)",
            ref["steps"] * ref["prompts_per_step"],
        )
        add(
            name,
            "completions",
            "completions",
            sch.completions,
            f"{_n(sch.completions)} (G = {g})",
            ref["steps"] * ref["prompts_per_step"] * ref["group_size"],
        )
        add(
            name,
            "updates",
            "optimiser updates",
            sch.updates,
            f"{_n(sch.updates)} ({sch.updates_per_step} per step, each "
            f"{_n(sch.prompts_per_update)} prompts x {g} = {_n(sch.update_sequences)} sequences)",
            ref["steps"] * ref["prompts_per_step"] // ref["prompts_per_update"],
        )
        add(
            name,
            "micro_batch",
            "sequences per micro-batch and process",
            sch.micro_batch,
            f"{sch.micro_batch} on each of {procs} process(es); {sch.accumulation} "
            f"micro-batch(es) per update, {sch.steps_per_generation} per rollout",
        )
        return sch

    if cfg.roles.train_challenger:  # else the base challenger writes the pool untrained
        c = role_rows("challenger", cfg.challenger, OFFICIAL["challenger"])
        ref = OFFICIAL["challenger"]
        b = c.rollout_sequences
        add(
            "challenger",
            "B",
            "repetition penalty B (questions clustered together)",
            b,
            _n(b),
            ref["prompts_per_step"] * ref["group_size"],
        )
        votes = c.completions * m
        add(
            "challenger",
            "solver_generations",
            "frozen-solver generations",
            votes,
            f"≤ {_n(votes)} (m = {m} per well-formed question)",
            ref["steps"] * ref["prompts_per_step"] * ref["group_size"] * ref["votes"],
        )
    n = cfg.challenger.pool_size
    add("pool", "questions", "questions sampled (N)", n, _n(n), OFFICIAL["pool"]["questions"])
    add(
        "labelling",
        "solver_generations",
        "frozen-solver generations",
        n * m,
        f"≤ {_n(n * m)} (m = {m} per well-formed, distinct pool question)",
        OFFICIAL["pool"]["questions"] * OFFICIAL["labelling"]["votes"],
    )
    role_rows("solver", cfg.solver, OFFICIAL["solver"])
    return rows


def plan_value(rows: list[PlanRow], phase: str, key: str) -> int:
    (row,) = [r for r in rows if r.phase == phase and r.key == key]
    return row.value


def plan_markdown(cfg: RZeroConfig, source: str | None = None) -> str:
    """The plan as a Markdown table, with a header line naming the recipe."""
    rows = plan_rows(cfg)
    claim = cfg.run.reference_schedule
    what = f"`{source}`" if source else "this config"
    lines = [
        f"Plan of {what}: per iteration ({cfg.run.iterations} iterations), "
        f"{cfg.run.training_processes} training process(es)"
        + ("; beside it, the official R-Zero code's numbers" if claim else "")
        + ".",
        "",
    ]
    if claim:
        lines += ["| phase | quantity | this recipe | official code |", "|---|---|---|---|"]
    else:
        lines += ["| phase | quantity | this recipe |", "|---|---|---|"]
    for r in rows:
        line = f"| {r.phase} | {r.label} | {r.text} |"
        if claim:
            if r.official is None:
                ref = "–"
            else:
                bound = "≤ " if r.text.startswith("≤") else ""
                ref = bound + _n(r.official) + ("" if r.official == r.value else " (differs)")
            line += f" {ref} |"
        lines.append(line)
    return "\n".join(lines) + "\n"
