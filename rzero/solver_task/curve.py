"""What the solver task records while it trains, beside TRL's own log of each update:

FormatCount   the solver's reward (`SolverReward`) that also counts, per reward call
              (one rollout), the share of completions with a boxed answer: the
              well-formed rate, which tells "learnt the format" from "learnt the
              arithmetic" along the curve
DevCurve      a transformers TrainerCallback: greedy pass@1 and the well-formed rate on
              the development draw before the first update and every `every` updates,
              sampled from the weights as they are (the run's generator over the
              training model, its bf16 copy refreshed at each call)
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from rzero.evaluation import evaluate
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


class DevCurve(TrainerCallback, StepState):
    """Greedy pass@1 on `items` (the development draw) at update 0 and every `every`
    updates, and after the last; `points` holds {update, dev_pass@1, dev_well_formed, dev_n}."""

    checkpointed = ("points",)

    def __init__(self, generator, name: str, items: list[dict[str, Any]], cfg, every: int):
        self.generator, self.name, self.items = generator, name, items
        self.cfg, self.every = cfg, every
        self.points: list[dict[str, float]] = []

    def score(self, update: int) -> None:
        if self.points and self.points[-1]["update"] == update:
            return
        cfg = self.cfg
        result = evaluate(
            self.generator,
            {self.name: self.items},
            max_new_tokens=cfg.eval.max_new_tokens,
            seed=cfg.run.seed,
            prompt_path=cfg.solver.prompt_file,
            direction=cfg.labeling.equivalence,
        )
        items = result["items"]
        self.points.append(
            {
                "update": update,
                "dev_pass@1": result["average"],
                "dev_well_formed": sum(r["predictions"][0] is not None for r in items) / len(items),
                "dev_n": len(items),
            }
        )

    def on_train_begin(self, args, state, control, **kwargs):
        # the phase's start, or on a resume the update it resumes after (already scored)
        self.score(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every == 0:
            self.score(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self.score(state.global_step)
