"""The section of the solver-only task (`solver_task:`, run.task solver): GRPO for the solver
on a fixed set of questions, with the label source a field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rzero.config.fields import ConfigError, Section, option

LABEL_SOURCES = ("truth", "vote", "shuffled", "noisy")


@dataclass(frozen=True)
class SolverTaskConfig(Section):
    """run.task solver: the solver trains with GRPO on fixed questions (R-Zero's solver phase
    and TTRL's method on a set the user gives), labelled by the truth, the frozen base's
    majority vote, or the truth shuffled across questions (the negative control)."""

    section: ClassVar[str] = "solver_task"

    questions: str = option(
        "easy:7",
        "The training questions: a benchmark spec (a development "
        "draw such as easy:7, never the held-out easy) or a JSONL file of "
        "{question, answer} rows, the answer optional (needed by the "
        "truth and shuffled labels; with vote labels it only measures "
        "the labels' accuracy).",
    )
    count: int = option(0, "The first `count` questions of the set (0: all of them).", min=0)
    labels: str = option(
        "truth",
        "Where each question's label comes from: truth (its known "
        "answer), vote (the majority of labeling.num_votes answers of the "
        "solver at the start of the iteration: R-Zero's solver phase, "
        "TTRL's method) or shuffled (the known answers permuted across "
        "questions, none left on its own question: the negative control) "
        "or noisy (exactly round(label_accuracy x n) questions keep their "
        "known answer, the others get a wrong one: the base solver's most "
        "common wrong vote, else another question's answer).",
        choices=LABEL_SOURCES,
    )
    label_accuracy: float = option(
        1.0,
        "With noisy labels, the share a of questions whose label is their "
        "known answer (a seeded subset of round(a x n)); the run's label "
        "accuracy is then a by construction.",
        min=0.0,
        max=1.0,
    )
    band: bool = option(
        False,
        "With vote labels, train only on questions in R-Zero's band "
        "(|p̂ − ½| ≤ labeling.delta, or labeling.band_low/high); off: every "
        "question with a majority label.",
    )
    dev: str = option(
        "easy:8",
        "The development draw the learning curve is scored on (never "
        "the held-out easy, never the training questions' draw).",
    )
    dev_items: int = option(64, "Items of the development draw scored at each curve point.", min=1)
    curve_every: int = option(
        0,
        "Score the development draw greedily every this many "
        "optimiser updates (and before the first); 0: no curve.",
        min=0,
    )

    def check(self) -> None:
        if self.label_accuracy != 1.0 and self.labels != "noisy":
            raise ConfigError(
                f"solver_task.label_accuracy={self.label_accuracy}: only noisy labels have "
                f"a chosen accuracy; set solver_task.labels=noisy, or leave it at 1.0"
            )
        if self.dev == self.questions:
            raise ConfigError(
                f"solver_task.dev={self.dev!r}: the curve's draw is the training "
                f"set; give another draw (e.g. easy:8)"
            )
        if self.dev == "easy":
            raise ConfigError(
                "solver_task.dev='easy': the held-out evaluation items; give a "
                "development draw such as easy:8"
            )
        if self.questions == "easy":
            raise ConfigError(
                "solver_task.questions='easy': the held-out evaluation items; "
                "train on a development draw such as easy:7"
            )
