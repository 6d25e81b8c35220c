"""R-Zero's two rewards on deduction tasks, with every pseudo-label checked by the executor.

The challenger proposes a program and an input (`challenger_prompt`: AZR's deduction
proposer prompt with the identity triplet as its one reference, fixed like R-Zero's
challenger prompt). A proposal is well-formed when it parses and the executor runs it twice
with the same output (`read_proposals`); that output is the truth, never shown to the solver.

    challenger   r = max(0, r_unc(p̂) − λ·r_rep)   for a well-formed proposal
                 r = challenger.invalid_reward     otherwise
    solver       r = 1 if the predicted output equals the pseudo-label ỹ, else 0

with p̂ and ỹ from the frozen solver's m votes (`rzero.code.votes.code_vote`), r_unc and r_rep
exactly the math loop's (`rzero.challenger.rewards.challenger_rewards`: the configured
uncertainty form, BLEU clustering of the batch's program-and-call texts). The truth enters
no reward; it is only recorded, so the run can report how often ỹ was right.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rzero.challenger.rewards import challenger_rewards
from rzero.code.run import sandbox_options
from rzero.code.votes import CodeVoter, accuracy_fields, exact_label_accuracy, vote_row
from rzero.config import RZeroConfig
from rzero.executor.parsing import parse_answer, parse_program_proposal
from rzero.executor.prompts import Messages, proposer_messages
from rzero.executor.tasks import IDENTITY, CodeTask, call_text, outputs_equal, validate_triplets
from rzero.io import append_jsonl
from rzero.prompts.chat import completion_text
from rzero.training.steps import StepState


def challenger_prompt() -> Messages:
    """The challenger's one prompt: write a new deduction puzzle (references: the identity)."""
    return proposer_messages("deduction", [IDENTITY])


def task_text(task: CodeTask) -> str:
    """A task as the report shows it and the repetition penalty compares it."""
    return f"```python\n{task.program}\n```\n{call_text(task.input)}"


@dataclass(frozen=True)
class Proposal:
    """One challenger completion read and run: the task, or why there is none."""

    task: CodeTask | None
    reason: str | None  # "unparsable", or the executor's refusal


def read_proposals(texts: Sequence[str], sandbox: dict[str, Any]) -> list[Proposal]:
    """Parse each completion (```python block + <input>) and validate it in the sandbox
    (`validate_triplets`: the filter, two runs with equal outputs)."""
    parsed = [parse_program_proposal(t) for t in texts]
    rows = [i for i, p in enumerate(parsed) if p is not None]
    checks = validate_triplets(
        [("deduction", parsed[i].program, parsed[i].input) for i in rows], **sandbox
    )
    out = [Proposal(None, "unparsable")] * len(texts)
    for i, c in zip(rows, checks, strict=True):
        out[i] = Proposal(c.task, c.reason)
    return out


def refusal_counts(rows: Sequence[dict[str, Any]], top: int = 5) -> dict[str, int]:
    """The most common reasons proposals were refused (first line, error type and text)."""
    reasons = Counter(
        (r.get("reason") or "").splitlines()[0][:80] if r.get("reason") else ""
        for r in rows
        if not r.get("valid")
    )
    reasons.pop("", None)
    return dict(reasons.most_common(top))


class CodeChallengerReward(StepState):
    """TRL reward of the challenger phase. Each call (one GRPO step) reads and runs the
    proposals, has the frozen solver vote on the valid ones, scores the batch and appends
    one row per completion to `log_path` (`challenger_steps.jsonl`): the task, its m votes,
    ỹ, p̂, the truth, whether ỹ is right, and the reward parts."""

    __name__ = "code_challenger"
    checkpointed = ("step", "seconds", "summaries")  # the step seeds the frozen solver's votes

    def __init__(
        self,
        voter: CodeVoter,
        cfg: RZeroConfig,
        log_path: str | Path,
        iteration: int,
        *,
        on_step: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.voter = voter
        self.cfg = cfg
        self.log_path = Path(log_path)
        self.iteration = iteration
        self.on_step = on_step
        self.sandbox = sandbox_options(cfg)
        self.step = 0
        self.seconds = 0.0
        self.summaries: list[dict[str, Any]] = []  # `step_summary` of each step

    def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list[float]:
        t0 = time.perf_counter()
        self.step += 1
        c = self.cfg.challenger
        texts = [completion_text(x) for x in completions]
        proposals = read_proposals(texts, self.sandbox)
        valid = [i for i, p in enumerate(proposals) if p.task is not None]
        seed = self.cfg.run.seed * 100_003 + self.iteration * 1_009 + self.step
        answers, votes = self.voter.vote([proposals[i].task for i in valid], seed)
        p_hats: list[float | None] = [None] * len(texts)
        for i, v in zip(valid, votes, strict=True):
            p_hats[i] = v.p_hat
        questions = [task_text(p.task) if p.task is not None else None for p in proposals]
        parts = challenger_rewards(
            questions,
            p_hats,
            tau=c.tau,
            variant=c.bleu_variant,
            form=c.reward_form,
            lam=c.repetition_lambda,
            clip=c.clip_reward,
            invalid_reward=c.invalid_reward,
            num_votes=self.cfg.labeling.num_votes,
        )
        rows = [
            dict(
                iteration=self.iteration,
                step=self.step,
                global_step=(self.iteration - 1) * c.steps + self.step,
                completion=texts[i][:4000],
                question=questions[i],
                task=None,
                valid=False,
                reason=proposals[i].reason,
                label=None,
                p_hat=None,
                r_unc=None,
                r_rep=None,
                reward=parts[i].reward,
            )
            for i in range(len(texts))
        ]
        for i, a, v in zip(valid, answers, votes, strict=True):
            task = proposals[i].task
            rows[i].update(
                task=task.to_json(),
                valid=True,
                **vote_row(task, a, v),
                r_unc=parts[i].uncertainty,
                r_rep=parts[i].repetition,
            )
        append_jsonl(self.log_path, rows)
        self.summaries.append(step_summary(rows))
        if self.on_step is not None:
            self.on_step(self.summaries[-1])
        self.seconds += time.perf_counter() - t0
        return [p.reward for p in parts]


def step_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One challenger step: reward means over its completions, and the exact accuracy of its
    labels with the Wilson interval, overall and by p̂ bucket."""
    valid = [r for r in rows if r["valid"]]

    def avg(key: str) -> float:
        vals = [r[key] for r in valid if r[key] is not None]
        return sum(vals) / len(vals) if vals else 0.0

    return {
        "step": rows[0]["step"] if rows else 0,
        "completions": len(rows),
        "valid_rate": len(valid) / len(rows) if rows else 0.0,
        "mean_reward": sum(r["reward"] for r in rows) / len(rows) if rows else 0.0,
        "mean_p_hat": avg("p_hat"),
        "mean_r_unc": avg("r_unc"),
        "mean_r_rep": avg("r_rep"),
        "mean_parse_rate": avg("parse_rate"),
        **accuracy_fields(valid),
    }


class PseudoLabelReward(StepState):
    """TRL reward of the solver phase: 1 when the predicted output equals the pseudo-label
    (`outputs_equal`), else 0. Dataset columns: `label` (ỹ) and `task` (`CodeTask.to_json()`,
    for the record only). Per call (GRPO step) `steps` gains the mean reward, the share of
    completions whose output is the true one (`true_rate`), and the exact accuracy of the
    step's labels: what training on pseudo-labels was training towards."""

    __name__ = "code_pseudo_label"
    checkpointed = ("steps",)

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def __call__(
        self,
        prompts: list,
        completions: list,
        label: Sequence[str],
        task: Sequence[str],
        **kwargs: Any,
    ) -> list[float]:
        answers = [parse_answer("deduction", completion_text(c)) for c in completions]
        truths = [CodeTask.from_json(t).output for t in task]
        rewards = [
            1.0 if a is not None and outputs_equal(a, y) else 0.0
            for a, y in zip(answers, label, strict=True)
        ]
        true = [a is not None and outputs_equal(a, t) for a, t in zip(answers, truths, strict=True)]
        rows = [
            {"label": y, "label_correct": outputs_equal(y, CodeTask.from_json(t).output)}
            for t, y in dict(zip(task, label, strict=True)).items()
        ]  # distinct tasks
        self.steps.append(
            {
                "step": len(self.steps) + 1,
                "completions": len(rewards),
                "mean_reward": sum(rewards) / len(rewards) if rewards else 0.0,
                "true_rate": sum(true) / len(true) if true else 0.0,
                "label_accuracy": exact_label_accuracy(rows)["label_accuracy"],
            }
        )
        return rewards
