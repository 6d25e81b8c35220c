"""The solver's GRPO reward: agreement of its boxed answer with the pseudo-label."""

from __future__ import annotations

from rzero.faults import crash_point
from rzero.labeling.answers import extract_boxed
from rzero.labeling.equivalence import Direction, equivalent
from rzero.prompts.chat import completion_text

FORMS = ("accuracy", "reference")


def solver_reward(
    answer: str | None, label: str, form: str = "accuracy", direction: Direction | None = None
) -> float:
    """Reward of one solver completion whose last boxed answer is `answer`.

    - ``"accuracy"`` (paper): 1 if `answer` is equivalent to the pseudo-label ỹ, else 0.
    - ``"reference"`` (official code): 0.9·accuracy + 0.1·format, where format is 1 when
      the completion has a parseable ``\\boxed{}``.

    Equivalence is math-verify in `direction` (the run's `labeling.equivalence`; the
    reference code grades the solver one way, gold first).
    """
    if form not in FORMS:
        raise ValueError(f"solver reward form {form!r}: allowed {', '.join(FORMS)}")
    correct = answer is not None and equivalent(label, answer, direction=direction)
    if form == "accuracy":
        return 1.0 if correct else 0.0
    return 0.9 * correct + 0.1 * (answer is not None)


class SolverReward:
    """TRL reward function: `solver_reward` for each completion against its row's `label`."""

    __name__ = "solver"

    def __init__(self, form: str = "accuracy", direction: Direction | None = None):
        if form not in FORMS:
            raise ValueError(f"solver reward form {form!r}: allowed {', '.join(FORMS)}")
        self.form = form
        self.direction = direction

    def __call__(self, prompts: list, completions: list, label: list[str], **kwargs) -> list[float]:
        rewards = [
            solver_reward(extract_boxed(completion_text(c)), y, self.form, self.direction)
            for c, y in zip(completions, label, strict=True)
        ]
        crash_point("solver:mid")
        return rewards
