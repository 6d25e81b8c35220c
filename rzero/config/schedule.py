"""One role's GRPO phase in TRL's batch arithmetic: the schedule the config checks and
`rzero.training.grpo.grpo_config` passes to GRPOConfig.

A GRPO step samples a rollout of `prompts_per_step` prompts x G completions once, scores it
with one reward call, and makes `prompts_per_step / prompts_per_update` optimiser updates
over mini-batches of it, as the official R-Zero code (EasyR1/veRL) does. Each training
process holds 1/processes of every rollout and update, in micro-batches of
`micro_batch_size` sequences whose gradients are accumulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rzero.config.roles import GRPOSection


@dataclass(frozen=True)
class RoleSchedule:
    """One role's GRPO phase in sequences, updates and micro-batches."""

    steps: int  # GRPO steps: rollouts
    group_size: int  # G
    prompts_per_step: int  # prompts of one rollout
    prompts_per_update: int  # prompts of one optimiser update (mini-batch)
    processes: int  # training processes
    micro_batch: int  # sequences per forward/backward on one process
    accumulation: int  # micro-batches per optimiser update on one process
    steps_per_generation: int  # micro-batches per rollout on one process (TRL's name)

    @property
    def rollout_sequences(self) -> int:
        return self.prompts_per_step * self.group_size

    @property
    def update_sequences(self) -> int:
        return self.prompts_per_update * self.group_size

    @property
    def updates_per_step(self) -> int:
        return self.prompts_per_step // self.prompts_per_update

    @property
    def updates(self) -> int:
        """Optimiser updates of the phase (TRL's max_steps)."""
        return self.steps * self.updates_per_step

    @property
    def prompts(self) -> int:
        return self.steps * self.prompts_per_step

    @property
    def completions(self) -> int:
        return self.steps * self.rollout_sequences


def role_schedule(role: GRPOSection, processes: int = 1) -> RoleSchedule:
    """The schedule of `role` over `processes` training processes; ValueError, naming the
    field, when an update or a rollout does not split evenly."""
    s = role.section or "grpo"
    update = role.update_prompts * role.group_size
    rollout = role.prompts_per_step * role.group_size
    if processes < 1:
        raise ValueError(f"processes={processes}: must be >= 1")
    if update % processes:
        raise ValueError(
            f"{s}.prompts_per_update: an update's {role.update_prompts} prompts x G "
            f"{role.group_size} = {update} sequences do not split evenly over "
            f"{processes} training processes"
        )
    per_process = update // processes
    micro = role.micro_batch_size or per_process
    if per_process % micro:
        raise ValueError(
            f"{s}.micro_batch_size={micro}: does not divide the {per_process} "
            f"sequences each of {processes} training process(es) gets per update"
        )
    accumulation = per_process // micro
    return RoleSchedule(
        steps=role.steps,
        group_size=role.group_size,
        prompts_per_step=role.prompts_per_step,
        prompts_per_update=role.update_prompts,
        processes=processes,
        micro_batch=micro,
        accumulation=accumulation,
        steps_per_generation=rollout // processes // micro,
    )
