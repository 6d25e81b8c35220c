"""What the solver task records while it trains, beside TRL's own log of each update:

FormatCount   the solver's reward (`SolverReward`) that also counts, per reward call
              (one rollout), the share of completions with a boxed answer: the
              well-formed rate, which tells "learnt the format" from "learnt the
              arithmetic" along the curve

The development draw's curve is `rzero.selfplay.curve.DevCurve`, shared with SPIN's plateau.
"""

from __future__ import annotations

from rzero.labeling.answers import extract_boxed
from rzero.prompts.chat import completion_text
from rzero.solver.rewards import SolverReward
from rzero.training.steps import StepState


class FormatCount(SolverReward, StepState):
    """`SolverReward`, and the well-formed share of every rollout it scores."""

    checkpointed = ("well_formed",)

    def __init__(self, form: str = "accuracy", direction=None):
        super().__init__(form, direction)
        self.well_formed: list[float] = []

    def __call__(self, prompts: list, completions: list, label: list[str], **kwargs) -> list[float]:
        boxed = [extract_boxed(completion_text(c)) is not None for c in completions]
        self.well_formed.append(sum(boxed) / len(boxed) if boxed else 0.0)
        return super().__call__(prompts, completions, label, **kwargs)

    def merge(
        self, log: list[dict[str, float]], updates_per_rollout: int
    ) -> list[dict[str, float]]:
        """TRL's update log with each update's rollout's well-formed share added (a rollout
        serves `updates_per_rollout` updates)."""
        return (
            [
                {
                    **row,
                    "well_formed": self.well_formed[
                        min(i // updates_per_rollout, len(self.well_formed) - 1)
                    ],
                }
                for i, row in enumerate(log)
            ]
            if self.well_formed
            else list(log)
        )
