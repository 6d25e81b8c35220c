"""The section of guided self-play (`guidance:`, R-Few, arXiv 2512.02472): R-Zero's math loop
grounded in a few labelled anchors. Off (no `anchors`), the loop is R-Zero's exactly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rzero.config.fields import ConfigError, Section, option


@dataclass(frozen=True)
class GuidanceConfig(Section):
    """R-Few's two groundings of the R-Zero loop: the challenger writes with k anchors in its
    context, and the solver trains on a mixture of anchors (their true answers) and the kept
    synthetic questions (the frozen solver's vote labels), the anchors chosen each iteration
    by the frozen solver's accuracy on them (the difficulty curriculum)."""

    section: ClassVar[str] = "guidance"

    anchors: str = option(
        "",
        "The labelled anchor set: a development draw of the generated "
        "benchmark (easy:7; never the held-out easy) or a JSONL file of "
        "{problem or question, answer} rows. Empty: no guidance (R-Zero).",
    )
    count: int = option(32, "Anchors N: the first N items of `anchors` (0: all of them).", min=0)
    shots: int = option(
        4,
        "Anchors k shown in each challenger prompt (drawn anew for every prompt), as earlier chat turns.",
        min=1,
    )
    ask: str = option(
        "Write a new math problem.",
        "The user turn before every anchor and before the challenger's "
        "own question (its wording changes what a small model writes).",
    )
    anchor_share: float = option(
        0.5,
        "Share of the solver's prompt draws (solver.steps x "
        "prompts_per_step) that are anchors; the rest are kept "
        "synthetic questions (all anchors when no synthetic question is "
        "kept).",
        min=0.0,
        max=1.0,
    )
    curriculum_low: float = option(
        0.125,
        "The curriculum keeps an anchor when the frozen solver's vote "
        "accuracy on it (labeling.num_votes samples against its true "
        "answer) is at least this ...",
        min=0.0,
        max=1.0,
    )
    curriculum_high: float = option(
        0.875,
        "... and at most this (all anchors when none is in range).",
        min=0.0,
        max=1.0,
    )

    @property
    def enabled(self) -> bool:
        return bool(self.anchors)

    def check(self) -> None:
        if self.anchors.strip() == "easy":
            raise ConfigError(
                "guidance.anchors='easy': the held-out evaluation items; anchor on a "
                "development draw such as easy:7, or on a JSONL file"
            )
        if self.curriculum_low > self.curriculum_high:
            raise ConfigError(
                f"guidance.curriculum_low={self.curriculum_low} is above "
                f"guidance.curriculum_high={self.curriculum_high}; give low <= high"
            )
