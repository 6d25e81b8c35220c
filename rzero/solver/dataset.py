"""Solver phase pieces: labelling the pool by majority vote, and the solver's GRPO reward."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tqdm.auto import tqdm

from rzero.challenger.train import completion_text, solver_votes
from rzero.config import RZeroConfig
from rzero.faults import crash_point
from rzero.generation import Generator
from rzero.labeling.answers import extract_boxed
from rzero.labeling.equivalence import equivalent
from rzero.labeling.filtering import in_band


def label_pool(solver: Generator, questions: Sequence[str], cfg: RZeroConfig, seed: int,
               chunk: int = 16) -> list[dict[str, Any]]:
    """m solver answers per question; majority vote gives label and p_hat; the band decides."""
    lab = cfg.labeling
    rows: list[dict[str, Any]] = []
    for start in tqdm(range(0, len(questions), chunk), desc="labelling", unit="chunk",
                      leave=False):
        part = list(questions[start:start + chunk])
        answers, votes = solver_votes(solver, part, cfg, seed + start)
        for q, a, v in zip(part, answers, votes, strict=True):
            if not lab.filter:
                kept = v.label is not None
            elif lab.band_low is not None:
                kept = v.label is not None and in_band(v.p_hat, low=lab.band_low,
                                                       high=lab.band_high)
            else:
                kept = v.label is not None and in_band(v.p_hat, lab.delta)
            rows.append({"question": q, "answers": a, "label": v.label, "p_hat": v.p_hat,
                         "num_groups": v.num_groups, "top2_margin": v.top2_margin,
                         "parse_rate": v.parse_rate, "groups": dict(v.groups), "kept": kept})
        crash_point("labelling:mid")
    return rows


def p_hat_histogram(rows: Sequence[dict[str, Any]], m: int) -> dict[str, int]:
    """Count of questions by number of votes in the largest group (0..m)."""
    hist = {str(k): 0 for k in range(m + 1)}
    for r in rows:
        hist[str(round(r["p_hat"] * m))] += 1
    return hist


class SolverReward:
    """TRL reward function: 1 if the boxed answer is equivalent to the pseudo-label, else 0.

    form='reference' gives the official code's 0.9 * accuracy + 0.1 * format, where format
    is 1 when the completion has a parseable `\\boxed{}`.
    """

    __name__ = "solver"

    def __init__(self, form: str = "accuracy"):
        if form not in ("accuracy", "reference"):
            raise ValueError(f"solver reward form {form!r}: allowed accuracy, reference")
        self.form = form

    def __call__(self, prompts: list, completions: list, label: list[str],
                 **kwargs) -> list[float]:
        rewards = []
        for completion, y in zip(completions, label, strict=True):
            answer = extract_boxed(completion_text(completion))
            correct = answer is not None and equivalent(answer, y)
            if self.form == "accuracy":
                rewards.append(1.0 if correct else 0.0)
            else:
                rewards.append(0.9 * correct + 0.1 * (answer is not None))
        crash_point("solver:mid")
        return rewards
