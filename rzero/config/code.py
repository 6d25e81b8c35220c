"""The section of the code tier (`code:`, run.task rzero_code or azr; seed 003): its tasks and
the sandbox's limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rzero.config.fields import Section, option


@dataclass(frozen=True)
class CodeConfig(Section):
    """The code tier (run.task rzero_code or azr; seed 003): tasks and sandbox limits."""

    section: ClassVar[str] = "code"

    task_types: list[str] = option(
        ["deduction", "abduction", "induction"],
        "azr: task types the proposer writes and the solver solves (AZR: all three).",
        choices=("deduction", "abduction", "induction"),
    )
    references: int = option(
        3,
        "azr: K reference triplets from the buffer in each deduction/"
        "abduction proposer prompt (AZR: 6; 0 is AZR's no-reference "
        "ablation).",
        min=0,
    )
    induction_inputs: int = option(
        4,
        "azr: inputs an induction proposal is asked to write "
        "(AZR: 10); half are shown to the solver, half held out.",
        min=2,
    )
    solver_samples: int = option(
        4,
        "azr: samples of the frozen solver per valid proposal for "
        "its success rate r-bar (AZR: 8), drawn as the labeling "
        "votes are.",
        min=1,
    )
    tasks_per_type: int = option(
        8,
        "azr: solver-phase tasks per type: the iteration's valid "
        "proposals, topped up from the buffer (AZR's top-up).",
        min=1,
    )
    format_penalty: bool = option(
        True,
        "azr: AZR's format penalties (eq. 6) for both roles: "
        "-0.5 for a well-formed but invalid proposal, -1 for a "
        "broken format or no readable answer. False: 0.",
    )
    timeout_s: float = option(
        2.0, "Wall-clock limit of one program run in the sandbox (s).", min=0.0, min_exclusive=True
    )
    memory_mb: int = option(512, "Address-space limit of one sandboxed run (MiB).", min=64)
    workers: int = option(2, "Sandboxed runs at once (each one process on one core).", min=1)
