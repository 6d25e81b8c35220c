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

The forms of r_unc (``challenger.reward_form``), one function each: the paper's tent
(`paper_uncertainty`), the official code's (`reference_uncertainty`), and the curriculum
rewards the seed (§6.1) compares it with: Absolute Zero's learnability
(`learnability_reward`), the variance s(1 − s) (`variance_reward`) and learnability on a
Beta posterior mean (`beta_learnability_reward`).

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rzero.challenger.repetition import (
    BleuVariant,
    distinct_n,
    repetition_penalties,
    structure_count,
)
from rzero.config import ChallengerConfig
from rzero.engine import distributed
from rzero.faults import crash_point
from rzero.io import append_jsonl
from rzero.labeling.answers import extract_boxed, extract_question
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.chat import completion_text
from rzero.stats import mean
from rzero.training.steps import StepState

__all__ = [
    "ChallengerReward",
    "RewardParts",
    "UncertaintyForm",
    "challenger_reward",
    "challenger_rewards",
    "beta_learnability_reward",
    "learnability_reward",
    "paper_uncertainty",
    "reference_uncertainty",
    "step_summary",
    "uncertainty_reward",
    "variance_reward",
]

UncertaintyForm = Literal["paper", "reference", "learnability", "variance", "beta_learnability"]
_FORMS = ("paper", "reference", "learnability", "variance", "beta_learnability")
# Beta(a, b) prior of `beta_learnability_reward`: uniform, so the posterior mean is Laplace's
# rule of succession (k + 1) / (m + 2) and no vote count reads as certainty.
BETA_PRIOR = (1.0, 1.0)


def _check_p_hat(p_hat: float) -> None:
    if isinstance(p_hat, bool) or not isinstance(p_hat, (int, float)):
        raise ValueError(f"p_hat must be a number in [0, 1], got {p_hat!r}")
    if not (math.isfinite(p_hat) and 0.0 <= p_hat <= 1.0):
        raise ValueError(f"p_hat must be in [0, 1], got {p_hat!r}")


def paper_uncertainty(p_hat: float) -> float:
    """r = 1 − 2·|p̂ − ½| (R-Zero, Huang et al. 2025, §3.1: the challenger's uncertainty
    reward): 1 at p̂ = ½, 0 at p̂ ∈ {0, 1}; a tent, linear on either side of ½."""
    return 1.0 - 2.0 * abs(p_hat - 0.5)


def reference_uncertainty(p_hat: float) -> float:
    """r = min(p̂, 1 − p̂) (the official R-Zero code, ``caller_penalty.py``): the paper's tent
    at half the scale, 0.5 at p̂ = ½."""
    return min(p_hat, 1.0 - p_hat)


def learnability_reward(p_hat: float) -> float:
    """r = 1 − s for 0 < s, and 0 at s = 0 (Absolute Zero, Zhao et al. 2025, eq. 4: the
    proposer's learnability), with s = p̂.

    The seed (§6.1) on this form: 1 − s favours ever harder questions for s > 0 and has no
    peak at middling difficulty; the zero rule cuts off the never-solved ones, so the maximum
    sits at the first observed success, s = 1/m, and the reward jumps from 0 to 1 − 1/m
    between k = 0 and k = 1 successes: it is as noisy as that one sample. Here s is the vote
    share, which is ≥ 1/m whenever any answer parsed, so k = 0 means "no vote parsed".
    """
    return 0.0 if p_hat == 0.0 else 1.0 - p_hat


def variance_reward(p_hat: float) -> float:
    """r = 4·s·(1 − s) with s = p̂: the Bernoulli variance s(1 − s), the seed's smoother
    choice (§6.1), scaled by 4 so that it peaks at 1 at s = ½ like the paper's form (the
    penalty λ·r_rep then weighs the same against every form).

    Where the paper's tent falls linearly from ½, this parabola is flat near ½ and steep near
    0 and 1: p̂ = 0.3 earns 4·0.3·0.7 = 0.84 here and 0.6 in the paper's form, so the reward
    cares less about exact balance and more about leaving the certain ends.
    """
    return 4.0 * p_hat * (1.0 - p_hat)


def beta_learnability_reward(
    p_hat: float, num_votes: int, prior: tuple[float, float] = BETA_PRIOR
) -> float:
    """r = 1 − s̃, Absolute Zero's learnability with the posterior mean of a Beta(a, b) prior
    in place of the raw rate (the seed's smoothing, §6.1):

        k = p̂·m (votes in the largest group of m),   s̃ = (k + a) / (m + a + b).

    Why (seed §6.1): for a question with true success rate s, G samples see no success with
    probability (1 − s)^G; at s = 0.05, G = 8 that is 0.95^8 ≈ 0.663, so two thirds of such
    frontier questions read as k = 0 and AZR's zero rule calls them unlearnable. The posterior
    mean never says s = 0: k = 0 of m = 10 gives s̃ = 1/12 under the uniform prior.

    Choices, both documented rather than estimated:
    - s is the vote share p̂ (the majority group's share of m votes), the only success rate
      a run without truth has. It is not AZR's solve rate: p̂ ≥ 1/m whenever one answer
      parsed, so k = 0 means no vote parsed, and a low k means the votes scattered.
    - the prior is `BETA_PRIOR` = Beta(1, 1) (uniform: no view on difficulty).

    Caveat the seed names: with no zero rule this form is largest at k = 0 (m = 10: 1 − 1/12
    ≈ 0.917, against 0.5 at k = 5), so it pays for questions whose votes do not parse or
    scatter; a challenger can exploit that estimate uncertainty. Watch the parse rate and the
    answer fragmentation (`rzero.selfplay.collapse`) when training with it.
    """
    a, b = prior
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"prior must be two positive numbers (a, b), got {prior!r}")
    if isinstance(num_votes, bool) or not isinstance(num_votes, int) or num_votes < 1:
        raise ValueError(f"num_votes must be an int >= 1, got {num_votes!r}")
    k = round(p_hat * num_votes)
    if abs(k - p_hat * num_votes) > 1e-6:
        raise ValueError(f"p_hat={p_hat!r} is not a vote share of num_votes={num_votes}")
    return 1.0 - (k + a) / (num_votes + a + b)


def uncertainty_reward(
    p_hat: float, form: UncertaintyForm = "paper", *, num_votes: int | None = None
) -> float:
    """Reward for a question the frozen solver answers with majority share `p_hat`, in the
    form `form` (the run's ``challenger.reward_form``):

    - ``"paper"``: `paper_uncertainty`, 1 − 2·|p̂ − ½|;
    - ``"reference"``: `reference_uncertainty`, min(p̂, 1 − p̂);
    - ``"learnability"``: `learnability_reward`, 1 − p̂ and 0 at p̂ = 0;
    - ``"variance"``: `variance_reward`, 4·p̂·(1 − p̂);
    - ``"beta_learnability"``: `beta_learnability_reward`, 1 − (k + 1)/(m + 2) with
      k = p̂·m; needs `num_votes` (m).

    Raises ValueError for p̂ outside [0, 1] or an unknown form.
    """
    _check_p_hat(p_hat)
    if form == "paper":
        return paper_uncertainty(p_hat)
    if form == "reference":
        return reference_uncertainty(p_hat)
    if form == "learnability":
        return learnability_reward(p_hat)
    if form == "variance":
        return variance_reward(p_hat)
    if form == "beta_learnability":
        if num_votes is None:
            raise ValueError("form='beta_learnability' needs num_votes (the m of p_hat = k/m)")
        return beta_learnability_reward(p_hat, num_votes)
    raise ValueError(f"form must be one of {_FORMS}, got {form!r}")


def format_gate(question: str | None, own_answer: str | None, *, need_answer: bool = True) -> bool:
    """R-Zero's format check of one challenger completion: a ``<question>…</question>``
    and, with `need_answer` (this project's default, ``challenger.format_gate:
    tags_and_answer``), a boxed answer of its own; the paper's check and the official code
    need only the tags."""
    return question is not None and (own_answer is not None or not need_answer)


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
    num_votes: int | None = None,
) -> RewardParts:
    """Reward of one challenger completion, with its parts.

    ``valid=False`` (no ``<question>``, empty question, or no parseable ``\\boxed{}``
    answer) -> `invalid_reward` (paper: 0; reference code: −1). Otherwise
    r = max(0, r_unc(p̂) − λ·r_rep) with r_unc = `uncertainty_reward`(p̂, `form`); with
    ``clip=False`` the max is dropped, as in the reference code. `num_votes` (m) is needed
    by ``form="beta_learnability"`` only.
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
    r_unc = uncertainty_reward(p_hat, form, num_votes=num_votes)
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
    num_votes: int | None = None,
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
    shares = repetition_penalties(
        [questions[i] or "" for i in kept], tau, variant, batch_size=batch
    )  # |C_k| / B over the whole batch
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
            num_votes=num_votes,
        )
        for i in range(batch)
    ]


class ChallengerReward(StepState):
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
    checkpointed = ("step", "seconds", "summaries")  # the step seeds the frozen solver's votes

    def __init__(
        self,
        solver: FrozenSolver | None,
        cfg: ChallengerConfig,
        log_path: str | Path,
        iteration: int,
        *,
        seed: int,
        on_step: Callable[[dict[str, float]], None] | None = None,
    ):
        self.solver = solver  # None on processes other than the main one
        self.cfg = cfg
        self.log_path = Path(log_path)
        self.iteration = iteration
        self.seed = seed
        self.on_step = on_step
        self.step = 0
        self.seconds = 0.0  # wall time inside reward calls, frozen-solver sampling included
        self.summaries: list[dict[str, float]] = []  # `step_summary` of each step, main process

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        t0 = time.perf_counter()
        local = [completion_text(x) for x in completions]
        slices = distributed.gather(local)
        rewards = distributed.on_main(self._score, [t for part in slices for t in part])
        start = sum(len(part) for part in slices[: distributed.rank()])
        self.seconds += time.perf_counter() - t0
        self.step += 1
        crash_point("challenger:mid")
        return rewards[start : start + len(local)]

    def _score(self, texts: list[str]) -> list[float]:
        """Rewards of one step's whole batch; appends its rows to the step log."""
        assert self.solver is not None, "the main process scores with the frozen solver"
        c = self.cfg
        questions = [extract_question(t) for t in texts]
        own_answers = [extract_boxed(t) for t in texts]
        need_answer = c.format_gate == "tags_and_answer"
        valid_idx = [
            i
            for i, (q, a) in enumerate(zip(questions, own_answers, strict=True))
            if format_gate(q, a, need_answer=need_answer)
        ]
        answers, votes = self.solver.vote(
            [questions[i] for i in valid_idx],
            self.seed * 100_003 + self.iteration * 1_009 + self.step,
        )
        p_hats: list[float | None] = [None] * len(texts)
        for v, i in zip(votes, valid_idx, strict=True):
            p_hats[i] = v.p_hat
        parts = challenger_rewards(
            [questions[i] if p_hats[i] is not None else None for i in range(len(texts))],
            p_hats,
            tau=c.tau,
            variant=c.bleu_variant,
            form=c.reward_form,
            lam=c.repetition_lambda,
            clip=c.clip_reward,
            invalid_reward=c.invalid_reward,
            num_votes=self.solver.labeling.num_votes,
        )
        rows = [
            dict(
                iteration=self.iteration,
                step=self.step,
                global_step=(self.iteration - 1) * c.steps + self.step,
                completion=texts[i][:4000],
                question=questions[i],
                challenger_answer=own_answers[i],
                valid=False,
                answers=[],
                label=None,
                p_hat=None,
                num_groups=0,
                top2_margin=None,
                parse_rate=None,
                r_unc=None,
                r_rep=None,
                reward=parts[i].reward,
            )
            for i in range(len(texts))
        ]
        for k, i in enumerate(valid_idx):
            v = votes[k]
            rows[i].update(
                valid=parts[i].valid,
                answers=answers[k],
                label=v.label,
                p_hat=v.p_hat,
                num_groups=v.num_groups,
                top2_margin=v.top2_margin,
                parse_rate=v.parse_rate,
                r_unc=parts[i].uncertainty,
                r_rep=parts[i].repetition,
            )
        append_jsonl(self.log_path, rows)
        self.summaries.append(step_summary(rows))
        if self.on_step is not None:
            self.on_step(self.summaries[-1])
        return [p.reward for p in parts]


def step_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per-step numbers over one step's completions: the means of the reward components,
    and the diversity of the step's well-formed questions (`rzero.selfplay.collapse`):

    - ``questions``: well-formed questions (those the repetition penalty clustered);
    - ``cluster_ratio``: BLEU clusters / questions, with the clusters the penalty formed.
      A question's ``r_rep`` is |C(x)| / B, so Σ_x 1 / (r_rep(x) · B) adds 1/|C| once per
      member of each cluster C, which is the number of clusters: no second clustering;
    - ``distinct_2``: distinct word bigrams / all bigrams of the questions;
    - ``structure_ratio``: distinct structures (numbers masked) / questions.

    With no well-formed question every ratio is 0, as every mean is.
    """
    valid = [r for r in rows if r["valid"]]

    def mean_of(key: str) -> float:
        return mean(r[key] for r in valid if r[key] is not None)

    questions = [r["question"] for r in valid]
    batch = len(rows)
    clusters = round(sum(1.0 / (r["r_rep"] * batch) for r in valid)) if valid else 0
    return {
        "step": rows[0]["step"] if rows else 0,
        "completions": len(rows),
        "valid_rate": len(valid) / len(rows) if rows else 0.0,
        "mean_p_hat": mean_of("p_hat"),
        "mean_r_unc": mean_of("r_unc"),
        "mean_r_rep": mean_of("r_rep"),
        "mean_reward": sum(r["reward"] for r in rows) / len(rows) if rows else 0.0,
        "mean_parse_rate": mean_of("parse_rate"),
        "questions": len(questions),
        "cluster_ratio": clusters / len(questions) if questions else 0.0,
        "distinct_2": distinct_n(questions, 2),
        "structure_ratio": structure_count(questions) / len(questions) if questions else 0.0,
    }
