"""Rewards of the code tasks: the formulas, and TRL-shaped batch callables for both roles.

Formulas, one function each: `learnability` (proposer, AZR eq. 4), `solver_verdict`
(solver, AZR eq. 5), `format_reward` (AZR eq. 6's penalties). The callables
`ExecutorProposerReward` and `ExecutorSolverReward` have TRL's reward shape,
`(prompts, completions, **columns) -> list[float | None]`, and pickle when what they hold
(the solver sampler, the buffer) pickles.

Departures from AZR: the proposer's r̄ is estimated inside the reward call, from
`num_samples` fresh samples of a solver given through `SolverSampler` (AZR uses the
solver rollouts of the same step); the solver's reward is the plain verdict unless
`format_penalty=True`; the proposer's applies AZR's penalties by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rzero.executor.buffer import TaskBuffer
from rzero.executor.parsing import parse_answer, parse_induction_proposal, parse_program_proposal
from rzero.executor.prompts import Messages, solver_messages
from rzero.executor.sandbox import DEFAULT_LIMITS, Limits
from rzero.executor.tasks import (
    DEFAULT_TIMEOUT_S,
    CodeTask,
    ProposalCheck,
    judge,
    validate_induction,
    validate_triplets,
)
from rzero.prompts.chat import completion_text


def learnability(r_bar: float) -> float:
    """The proposer's reward (AZR eq. 4): r_propose = 1 - r̄, and 0 when r̄ is 0 or 1.

    r̄ is the solver's success rate over its samples of the proposed task: a task it always
    or never solves teaches nothing, one it sometimes solves teaches most. Same formula as
    AZR; only how r̄ is sampled differs (see the module docstring).
    """
    if not 0.0 <= r_bar <= 1.0:
        raise ValueError(f"r_bar={r_bar} must be a success rate in [0, 1]")
    if r_bar in (0.0, 1.0):
        return 0.0
    return 1.0 - r_bar


def solver_verdict(correct: bool | None) -> float:
    """The solver's reward (AZR eq. 5): r_solve = 1 if the executor accepts the answer, else 0.

    `None` (no answer could be read) counts as wrong; the same as AZR, where a missing
    answer only matters through the format penalty.
    """
    return 1.0 if correct else 0.0


def format_reward(role_reward: float | None, well_formed: bool) -> float:
    """AZR eq. 6: the role's reward when the response is passable, else -0.5 when it is
    well-formed but wrong (an invalid proposal; an answer the executor cannot use) and -1
    when its format is broken. `role_reward` None means "not passable".
    """
    if role_reward is not None:
        return role_reward
    return -0.5 if well_formed else -1.0


class SolverSampler(Protocol):
    """Draws the solver's completions for the proposer's r̄: `num_samples` per prompt."""

    def __call__(self, prompts: list[Messages], num_samples: int) -> list[list[str]]: ...


class ExecutorSolverReward:
    """TRL reward for the solver: `solver_verdict` of each answer on its row's `task`.

    Dataset column `task`: `CodeTask.to_json()`. With `format_penalty`, a completion with
    no readable answer gets -1 instead of 0 (AZR eq. 6).
    """

    __name__ = "code_solver"  # TRL names the logged reward column after this

    def __init__(
        self,
        *,
        format_penalty: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        limits: Limits = DEFAULT_LIMITS,
        max_workers: int | None = None,
    ) -> None:
        self.format_penalty = format_penalty
        self.timeout_s = timeout_s
        self.limits = limits
        self.max_workers = max_workers

    def __call__(
        self, prompts: list, completions: list, task: Sequence[str], **kwargs: Any
    ) -> list[float | None]:
        tasks = [CodeTask.from_json(t) for t in task]
        answers = [
            parse_answer(t.kind, completion_text(c))
            for t, c in zip(tasks, completions, strict=True)
        ]
        verdicts = judge(
            tasks,
            answers,
            timeout_s=self.timeout_s,
            limits=self.limits,
            max_workers=self.max_workers,
        )
        if not self.format_penalty:
            return [solver_verdict(v) for v in verdicts]
        return [
            format_reward(solver_verdict(v) if a is not None else None, False)
            for v, a in zip(verdicts, answers, strict=True)
        ]


class ExecutorProposerReward:
    """TRL reward for the proposer: `learnability` of each valid proposal, AZR's penalties
    for the rest; valid proposals go into `buffer` (AZR keeps them whatever their reward).

    Dataset columns: `kind` (deduction, abduction or induction) and, for induction rows,
    `program` (the buffer program the inputs are for). After each call `records` holds one
    dict per completion: kind, valid, reason, r_bar, reward, and task (`CodeTask.to_json()`
    of a valid proposal, else None).
    """

    __name__ = "code_proposer"

    def __init__(
        self,
        sample_solver: SolverSampler,
        *,
        num_samples: int = 8,
        buffer: TaskBuffer | None = None,
        format_penalty: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        limits: Limits = DEFAULT_LIMITS,
        max_workers: int | None = None,
    ) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples={num_samples} must be at least 1 (AZR uses 8)")
        self.sample_solver = sample_solver
        self.num_samples = num_samples
        self.buffer = buffer
        self.format_penalty = format_penalty
        self.timeout_s = timeout_s
        self.limits = limits
        self.max_workers = max_workers
        self.records: list[dict[str, Any]] = []

    def __call__(
        self,
        prompts: list,
        completions: list,
        kind: Sequence[str],
        program: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        texts = [completion_text(c) for c in completions]
        programs = list(program) if program is not None else [""] * len(texts)
        checks, well_formed = self._validate(list(kind), texts, programs)
        r_bars = self._success_rates([c.task for c in checks])
        rewards: list[float | None] = []
        for ok_format, r_bar in zip(well_formed, r_bars, strict=True):
            role = learnability(r_bar) if r_bar is not None else None
            rewards.append(
                format_reward(role, ok_format)
                if self.format_penalty
                else (role if role is not None else 0.0)
            )
        valid = [c.task for c in checks if c.task is not None]
        if self.buffer is not None:
            self.buffer.add_all(valid)
        self.records = [
            dict(
                kind=k,
                valid=c.task is not None,
                reason=c.reason,
                r_bar=r,
                reward=w,
                task=c.task.to_json() if c.task is not None else None,
            )
            for k, c, r, w in zip(kind, checks, r_bars, rewards, strict=True)
        ]
        return rewards

    def _validate(
        self, kinds: list[str], texts: list[str], programs: list[str]
    ) -> tuple[list[ProposalCheck], list[bool]]:
        opts = dict(timeout_s=self.timeout_s, limits=self.limits, max_workers=self.max_workers)
        checks: list[ProposalCheck] = [ProposalCheck(None, "unparsable")] * len(texts)
        well_formed = [False] * len(texts)
        triplet_rows: list[int] = []
        triplet_jobs: list[tuple[str, str, str]] = []
        for i, (k, text) in enumerate(zip(kinds, texts, strict=True)):
            if k == "induction":
                ind = parse_induction_proposal(text)
                if ind is not None:
                    well_formed[i] = True
                    checks[i] = validate_induction(programs[i], ind.inputs, ind.message, **opts)
            else:
                prop = parse_program_proposal(text)
                if prop is not None:
                    well_formed[i] = True
                    triplet_rows.append(i)
                    triplet_jobs.append((k, prop.program, prop.input))
        for i, check in zip(triplet_rows, validate_triplets(triplet_jobs, **opts), strict=True):
            checks[i] = check
        return checks, well_formed

    def _success_rates(self, tasks: list[CodeTask | None]) -> list[float | None]:
        """r̄ of each valid task over `num_samples` solver samples; None for invalid ones."""
        valid = [t for t in tasks if t is not None]
        if not valid:
            return [None] * len(tasks)
        samples = self.sample_solver([solver_messages(t) for t in valid], self.num_samples)
        if len(samples) != len(valid) or any(len(s) != self.num_samples for s in samples):
            raise ValueError(
                f"the solver sampler returned {[len(s) for s in samples]} "
                f"samples for {len(valid)} prompts; expected {self.num_samples} each"
            )
        flat_tasks = [t for t in valid for _ in range(self.num_samples)]
        flat_answers = [
            parse_answer(t.kind, s) for t, group in zip(valid, samples, strict=True) for s in group
        ]
        verdicts = judge(
            flat_tasks,
            flat_answers,
            timeout_s=self.timeout_s,
            limits=self.limits,
            max_workers=self.max_workers,
        )
        rates = iter(
            [
                sum(v is True for v in verdicts[j : j + self.num_samples]) / self.num_samples
                for j in range(0, len(verdicts), self.num_samples)
            ]
        )
        return [next(rates) if t is not None else None for t in tasks]
