"""The challenger's reward: uncertainty of the frozen solver, minus repetition, gated.

For one challenger completion with question x (SPEC §1.1):

    r(x) = max(0, r_unc(p̂(x)) − λ · r_rep(x))          if the completion is well-formed
    r(x) = invalid_reward (0 in the paper)               otherwise

where p̂(x) is the solver's majority vote share (`rzero.labeling.voting`), r_unc one of
the forms of `uncertainty_reward`, and r_rep(x) = |cluster(x)| / B the BLEU-cluster
share of x in its batch (`rzero.challenger.repetition`).

Where the official R-Zero code departs from the paper, and how to select it here:

- it uses r_unc = min(p̂, 1 − p̂) (``form="reference"``), which is half the paper's
  1 − 2|p̂ − ½| and peaks at 0.5;
- it does not clip: r = r_unc − r_rep can be negative (``clip=False``);
- a malformed completion gets −1 (``invalid_reward=-1.0``); the code also subtracts the
  (small) repetition share of the empty question from it, which we do not: a malformed
  completion's reward does not depend on the rest of the batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rzero.challenger.repetition import BleuVariant, cluster_labels

__all__ = [
    "RewardParts",
    "UncertaintyForm",
    "challenger_reward",
    "challenger_reward_parts",
    "challenger_rewards",
    "uncertainty_reward",
]

UncertaintyForm = Literal["paper", "reference", "learnability"]
_FORMS = ("paper", "reference", "learnability")


def uncertainty_reward(p_hat: float, form: UncertaintyForm = "paper") -> float:
    """Reward for a question the frozen solver answers with majority share `p_hat`.

    - ``"paper"``: r = 1 − 2·|p̂ − ½| (R-Zero, Huang et al. 2025, the uncertainty reward
      of the challenger): 1 at p̂ = ½, 0 at p̂ ∈ {0, 1}.
    - ``"reference"``: r = min(p̂, 1 − p̂) (the official R-Zero code,
      ``caller_penalty.py``): the same shape at half the scale, 0.5 at p̂ = ½.
    - ``"learnability"``: r = 1 − p̂, and 0 at p̂ = 0 (Absolute Zero, Zhao et al. 2025,
      the proposer's learnability reward): rewards hard-but-solvable questions, with no
      credit for ones the solver never gets right.

    Raises ValueError for p̂ outside [0, 1] or an unknown form.
    """
    if isinstance(p_hat, bool) or not isinstance(p_hat, (int, float)):
        raise ValueError(f"p_hat must be a number in [0, 1], got {p_hat!r}")
    if not (math.isfinite(p_hat) and 0.0 <= p_hat <= 1.0):
        raise ValueError(f"p_hat must be in [0, 1], got {p_hat!r}")
    if form == "paper":
        return 1.0 - 2.0 * abs(p_hat - 0.5)
    if form == "reference":
        return min(p_hat, 1.0 - p_hat)
    if form == "learnability":
        return 0.0 if p_hat == 0.0 else 1.0 - p_hat
    raise ValueError(f"form must be one of {_FORMS}, got {form!r}")


@dataclass(frozen=True)
class RewardParts:
    """One completion's reward and what it was made of (for logging)."""

    valid: bool
    p_hat: float | None
    uncertainty: float  # r_unc (0.0 for an invalid completion)
    repetition: float  # r_rep, the cluster share
    reward: float


def challenger_reward_parts(
    p_hat: float | None,
    repetition_penalty: float,
    *,
    valid: bool,
    form: UncertaintyForm = "paper",
    lam: float = 1.0,
    clip: bool = True,
    invalid_reward: float = 0.0,
) -> RewardParts:
    """`challenger_reward` with its parts."""
    if not (math.isfinite(repetition_penalty) and 0.0 <= repetition_penalty <= 1.0):
        raise ValueError(f"repetition_penalty must be in [0, 1], got {repetition_penalty!r}")
    if not (math.isfinite(lam) and lam >= 0.0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if not math.isfinite(invalid_reward):
        raise ValueError(f"invalid_reward must be finite, got {invalid_reward!r}")
    if not valid:
        return RewardParts(False, p_hat, 0.0, repetition_penalty, float(invalid_reward))
    if p_hat is None:
        raise ValueError("a valid completion needs a p_hat (the solver's vote share)")
    r_unc = uncertainty_reward(p_hat, form)
    reward = r_unc - lam * repetition_penalty
    if clip:
        reward = max(0.0, reward)
    return RewardParts(True, p_hat, r_unc, repetition_penalty, reward)


def challenger_reward(
    p_hat: float | None,
    repetition_penalty: float,
    *,
    valid: bool,
    form: UncertaintyForm = "paper",
    lam: float = 1.0,
    clip: bool = True,
    invalid_reward: float = 0.0,
) -> float:
    """Reward of one challenger completion.

    ``valid=False`` (no ``<question>``, empty question, or no parseable ``\\boxed{}``
    answer) -> `invalid_reward` (paper: 0; reference code: −1). Otherwise
    r = max(0, r_unc(p̂) − λ·r_rep) with r_unc = `uncertainty_reward`(p̂, `form`); with
    ``clip=False`` the max is dropped, as in the reference code.
    """
    return challenger_reward_parts(
        p_hat,
        repetition_penalty,
        valid=valid,
        form=form,
        lam=lam,
        clip=clip,
        invalid_reward=invalid_reward,
    ).reward


def challenger_rewards(
    questions: Sequence[str | None],
    p_hats: Sequence[float | None],
    *,
    tau: float = 0.5,
    variant: BleuVariant = "sacrebleu",
    form: UncertaintyForm = "paper",
    lam: float = 1.0,
    clip: bool = True,
    invalid_reward: float = 0.0,
) -> list[RewardParts]:
    """Rewards for one GRPO batch of challenger completions.

    `questions[i]` is the extracted question, ``None`` for a malformed completion;
    `p_hats[i]` the solver's vote share on it. The repetition penalty clusters the
    well-formed questions only, and divides cluster sizes by the whole batch size B, as
    the paper's |C_k| / B (in the reference code malformed completions enter the
    clustering as empty strings, which only ever cluster with each other: the same).
    """
    if len(questions) != len(p_hats):
        raise ValueError(f"got {len(questions)} questions but {len(p_hats)} p_hats")
    batch = len(questions)
    valid = [
        q is not None and q.strip() != "" and p is not None
        for q, p in zip(questions, p_hats, strict=True)
    ]
    kept = [i for i in range(batch) if valid[i]]
    labels = cluster_labels([questions[i] or "" for i in kept], tau=tau, variant=variant)
    sizes = np.bincount(labels) if len(kept) else np.zeros(0, dtype=np.int64)
    repetition = [0.0] * batch
    for i, label in zip(kept, labels, strict=True):
        repetition[i] = float(sizes[label]) / batch  # |C_k| / B
    return [
        challenger_reward_parts(
            p_hats[i],
            repetition[i],
            valid=valid[i],
            form=form,
            lam=lam,
            clip=clip,
            invalid_reward=invalid_reward,
        )
        for i in range(batch)
    ]
