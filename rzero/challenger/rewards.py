"""The challenger's reward: uncertainty of the frozen solver, minus repetition, gated.

`ChallengerReward` is the TRL reward function of the challenger phase: for one GRPO step's
completions it extracts the questions, has the frozen solver vote on every well-formed one
(`rzero.labeling.voting.FrozenSolver`), and scores the batch with `challenger_rewards`.

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

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rzero import distributed
from rzero.challenger.repetition import BleuVariant, repetition_penalties
from rzero.config import ChallengerConfig
from rzero.faults import crash_point
from rzero.labeling.answers import completion_text, extract_boxed, extract_question
from rzero.labeling.voting import FrozenSolver

__all__ = [
    "ChallengerReward",
    "RewardParts",
    "UncertaintyForm",
    "challenger_reward",
    "challenger_rewards",
    "step_summary",
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


def challenger_reward(
    p_hat: float | None,
    repetition_penalty: float,
    *,
    valid: bool,
    form: UncertaintyForm = "paper",
    lam: float = 1.0,
    clip: bool = True,
    invalid_reward: float = 0.0,
) -> RewardParts:
    """Reward of one challenger completion, with its parts.

    ``valid=False`` (no ``<question>``, empty question, or no parseable ``\\boxed{}``
    answer) -> `invalid_reward` (paper: 0; reference code: −1). Otherwise
    r = max(0, r_unc(p̂) − λ·r_rep) with r_unc = `uncertainty_reward`(p̂, `form`); with
    ``clip=False`` the max is dropped, as in the reference code.
    """
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
    shares = repetition_penalties([questions[i] or "" for i in kept], tau, variant,
                                  batch_size=batch)  # |C_k| / B over the whole batch
    repetition = [0.0] * batch
    for i, share in zip(kept, shares, strict=True):
        repetition[i] = share
    return [
        challenger_reward(
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


class ChallengerReward:
    """TRL reward function of the challenger phase: `challenger_rewards` of each step's batch
    against the frozen solver's votes. Every completion's record (question, m answers,
    label, p̂, reward parts) is appended to `log_path` (`challenger_steps.jsonl`), which the
    label-accuracy audit reads.

    Under several training processes each holds a slice of the step's batch: the batch is
    gathered, scored once on the main process (so B is the global batch, as in the paper,
    and only the main process queries the frozen solver and writes the log), and every
    process gets its slice back.
    """

    __name__ = "challenger"  # TRL names the logged reward column after this

    def __init__(self, solver: FrozenSolver | None, cfg: ChallengerConfig, log_path: str | Path,
                 iteration: int, *, seed: int,
                 on_step: Callable[[dict[str, float]], None] | None = None):
        self.solver = solver  # None on processes other than the main one
        self.cfg = cfg
        self.log_path = Path(log_path)
        self.iteration = iteration
        self.seed = seed
        self.on_step = on_step
        self.step = 0
        self.seconds = 0.0  # wall time inside reward calls, frozen-solver sampling included

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        t0 = time.perf_counter()
        local = [completion_text(x) for x in completions]
        slices = distributed.gather(local)
        rewards = distributed.on_main(self._score, [t for part in slices for t in part])
        start = sum(len(part) for part in slices[:distributed.rank()])
        self.seconds += time.perf_counter() - t0
        self.step += 1
        crash_point("challenger:mid")
        return rewards[start:start + len(local)]

    def _score(self, texts: list[str]) -> list[float]:
        """Rewards of one step's whole batch; appends its rows to the step log."""
        assert self.solver is not None, "the main process scores with the frozen solver"
        c = self.cfg
        questions = [extract_question(t) for t in texts]
        own_answers = [extract_boxed(t) for t in texts]
        # the format gate: this project's default also needs the challenger's own boxed
        # answer; the paper's check and the official code need only the tags
        need_answer = c.format_gate == "tags_and_answer"
        valid_idx = [i for i, (q, a) in enumerate(zip(questions, own_answers, strict=True))
                     if q is not None and (a is not None or not need_answer)]
        answers, votes = self.solver.vote([questions[i] for i in valid_idx],
                                          self.seed * 100_003 + self.iteration * 1_009
                                          + self.step)
        p_hats: list[float | None] = [None] * len(texts)
        for v, i in zip(votes, valid_idx, strict=True):
            p_hats[i] = v.p_hat
        parts = challenger_rewards([questions[i] if p_hats[i] is not None else None
                                    for i in range(len(texts))], p_hats,
                                   tau=c.tau, variant=c.bleu_variant, form=c.reward_form,
                                   lam=c.repetition_lambda, clip=c.clip_reward,
                                   invalid_reward=c.invalid_reward)
        rows = [dict(iteration=self.iteration, step=self.step,
                     global_step=(self.iteration - 1) * c.steps + self.step,
                     completion=texts[i][:4000], question=questions[i],
                     challenger_answer=own_answers[i], valid=False, answers=[], label=None,
                     p_hat=None, num_groups=0, top2_margin=None, parse_rate=None, r_unc=None,
                     r_rep=None, reward=parts[i].reward)
                for i in range(len(texts))]
        for k, i in enumerate(valid_idx):
            v = votes[k]
            rows[i].update(valid=parts[i].valid, answers=answers[k], label=v.label,
                           p_hat=v.p_hat, num_groups=v.num_groups, top2_margin=v.top2_margin,
                           parse_rate=v.parse_rate, r_unc=parts[i].uncertainty,
                           r_rep=parts[i].repetition)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as f:
            f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        if self.on_step is not None:
            self.on_step(step_summary(rows))
        return [p.reward for p in parts]


def step_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per-step means of the reward components over one step's completions."""
    valid = [r for r in rows if r["valid"]]

    def mean(key: str) -> float:
        vals = [r[key] for r in valid if r[key] is not None]
        return sum(vals) / len(vals) if vals else 0.0

    return {
        "step": rows[0]["step"] if rows else 0,
        "completions": len(rows),
        "valid_rate": len(valid) / len(rows) if rows else 0.0,
        "mean_p_hat": mean("p_hat"),
        "mean_r_unc": mean("r_unc"),
        "mean_r_rep": mean("r_rep"),
        "mean_reward": sum(r["reward"] for r in rows) / len(rows) if rows else 0.0,
        "mean_parse_rate": mean("parse_rate"),
    }
