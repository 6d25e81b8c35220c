"""Majority vote over the solver's m answers: the pseudo-label ỹ and its vote share p̂.

R-Zero (SPEC §1): answers are grouped by mathematical equivalence; the largest group is
the pseudo-label ỹ and p̂ = |largest group| / m. Unparsed answers (``None``: no
``\\boxed{}``) count in the denominator m and never form the label, so a question the
solver cannot even answer in format gets a low p̂ rather than a confident label.

Grouping is greedy in order of appearance: each answer is compared with each existing
group's representative (its first member), stopping at the first match, so there is at
most one equivalence check per (answer, existing group), not one per pair of answers;
an answer whose normalised string equals one already seen joins that group with no check
at all. Ties between equally large groups go to the group whose first member came first.

`majority_vote_many` votes on many questions at once in lock-step: in every round each
question contributes at most its one pending check, and the round goes to the
math-verify worker as one batch. The result is identical to voting question by question.
`sample_and_vote` is what the pipeline calls: the frozen solver's m samples per question
in one batched generation, then `majority_vote_many` over them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from rzero.config import LabelingConfig
from rzero.generation import interface as generator
from rzero.labeling.answers import extract_boxed, normalize_answer
from rzero.labeling.equivalence import EquivalenceChecker, get_checker
from rzero.prompts.chat import Prompt

__all__ = [
    "FrozenSolver",
    "Votes",
    "majority_vote",
    "majority_vote_many",
    "sample_and_vote",
    "vote_params",
]


@dataclass(frozen=True)
class Votes:
    """The outcome of one vote.

    Attributes:
        label: representative (first member, stripped) of the largest group; ``None`` when
            no answer parsed.
        p_hat: size of the largest group / number of votes (0.0 for no votes).
        groups: representative -> group size, in order of first appearance.
        num_groups: number of groups (unparsed answers form none).
        top2_margin: (largest - second largest group size) / number of votes.
        parse_rate: share of answers that are not ``None``.
        num_votes: number of answers, parsed or not (the paper's m).
        assignments: per answer, the index of its group in `groups`, ``None`` if unparsed.
    """

    label: str | None
    p_hat: float
    groups: dict[str, int]
    num_groups: int
    top2_margin: float
    parse_rate: float
    num_votes: int
    assignments: tuple[int | None, ...]


# A grouping in progress: yields (answer, representative) pairs to check, is sent the
# verdict, and returns (representatives, counts, assignments).
_Grouping = Generator[tuple[str, str], bool, tuple[list[str], list[int], list[int | None]]]


def _group(answers: Sequence[str | None]) -> _Grouping:
    reps: list[str] = []
    counts: list[int] = []
    group_of_key: dict[str, int] = {}
    assignments: list[int | None] = []
    for raw in answers:
        answer = raw.strip() if raw is not None else ""
        key = normalize_answer(answer) if answer else ""
        if not key:
            assignments.append(None)
            continue
        group = group_of_key.get(key)
        if group is None:
            for index, rep in enumerate(reps):
                if (yield (answer, rep)):
                    group = index
                    break
            else:
                group = len(reps)
                reps.append(answer)
                counts.append(0)
            group_of_key[key] = group
        counts[group] += 1
        assignments.append(group)
    return reps, counts, assignments


def _tally(reps: list[str], counts: list[int], assignments: list[int | None]) -> Votes:
    m = len(assignments)
    parse_rate = sum(a is not None for a in assignments) / m if m else 0.0
    if not reps:
        return Votes(None, 0.0, {}, 0, 0.0, parse_rate, m, tuple(assignments))
    top = max(range(len(counts)), key=lambda g: (counts[g], -g))  # ties: first group wins
    ranked = sorted(counts, reverse=True) + [0]
    return Votes(
        label=reps[top],
        p_hat=counts[top] / m,
        groups=dict(zip(reps, counts, strict=True)),
        num_groups=len(reps),
        top2_margin=(ranked[0] - ranked[1]) / m,
        parse_rate=parse_rate,
        num_votes=m,
        assignments=tuple(assignments),
    )


def majority_vote(
    answers: Sequence[str | None],
    *,
    checker: EquivalenceChecker | None = None,
    budget_s: float | None = None,
) -> Votes:
    """Group `answers` by equivalence and return the label, p̂ and the vote statistics.

    `checker` defaults to the process-wide one (math-verify in both directions, 5 s hard
    limit per check). `budget_s` optionally caps the worker time this vote may spend
    (see `majority_vote_many`).

    Example: 8 of 10 answers agree -> p̂ = 0.8; ``["1/2", "0.5", None]`` -> one group of
    two, p̂ = 2/3, parse_rate = 2/3.
    """
    return majority_vote_many([answers], checker=checker, budget_s=budget_s)[0]


def majority_vote_many(
    answer_lists: Sequence[Sequence[str | None]],
    *,
    checker: EquivalenceChecker | None = None,
    budget_s: float | None = None,
) -> list[Votes]:
    """`majority_vote` for many questions, batching their checks round by round.

    `budget_s`: per question, the most worker seconds its checks may use in total
    (default: unlimited, each check still bounded by the checker's hard limit). Once a
    question's budget is spent its remaining checks count as "not equivalent" (its
    answers then stay in separate groups, lowering p̂), so an adversarial question cannot
    stall the labelling of a whole batch.
    """
    checker = checker or get_checker()
    groupings = [_group(answers) for answers in answer_lists]
    spent = [0.0] * len(groupings)
    results: list[Votes | None] = [None] * len(groupings)
    pending: dict[int, tuple[str, str]] = {}

    def advance(q: int, verdict: bool | None) -> None:
        try:
            pair = next(groupings[q]) if verdict is None else groupings[q].send(verdict)
        except StopIteration as done:
            results[q] = _tally(*done.value)
            pending.pop(q, None)
        else:
            pending[q] = pair

    for q in range(len(groupings)):
        advance(q, None)
    while pending:
        questions = list(pending)
        pairs = [pending[q] for q in questions]
        deadlines = None
        if budget_s is not None:
            deadlines = [budget_s - spent[q] for q in questions]
        checks = checker.check_many(pairs, deadlines=deadlines)
        for q, check in zip(questions, checks, strict=True):
            spent[q] += check.seconds
            advance(q, check.equivalent)
    return [r for r in results if r is not None]


def sample_and_vote(
    solver: generator.Generator,
    prompts: Sequence[Prompt],
    num_votes: int,
    params: generator.SamplingParams,
    *,
    budget_s: float | None = None,
) -> tuple[list[list[str | None]], list[Votes]]:
    """The frozen solver answers each prompt `num_votes` (m) times in one batched call; the
    last `\\boxed{}` of each sample is its answer, and `majority_vote_many` gives every
    question its label ỹ and share p̂ (with `budget_s` as there). Returns the answers (None
    where nothing was boxed) and the votes, in prompt order."""
    if not prompts:
        return [], []
    texts = solver.generate(list(prompts), num_votes, params)
    answers = [[extract_boxed(t) for t in row] for row in texts]
    return answers, majority_vote_many(answers, budget_s=budget_s)


def vote_params(labeling: LabelingConfig, seed: int) -> generator.SamplingParams:
    """How the frozen solver samples its m votes (paper: temperature 1.0, top_k 40)."""
    return generator.SamplingParams(
        temperature=labeling.temperature,
        top_p=labeling.top_p,
        top_k=labeling.top_k,
        max_new_tokens=labeling.max_new_tokens,
        seed=seed,
    )


@dataclass(frozen=True)
class FrozenSolver:
    """The solver S_{k-1} as the vote needs it: a sampling backend, the solver's prompt for
    a question, and the run's labelling settings. The challenger's reward and the labelling
    of the pool both vote through it, so both ask the same way."""

    generator: generator.Generator
    prompt: Callable[[str], Prompt]
    labeling: LabelingConfig

    def vote(
        self, questions: Sequence[str], seed: int
    ) -> tuple[list[list[str | None]], list[Votes]]:
        """m answers per question and their votes (`sample_and_vote`)."""
        lab = self.labeling
        return sample_and_vote(
            self.generator,
            [self.prompt(q) for q in questions],
            lab.num_votes,
            vote_params(lab, seed),
            budget_s=lab.vote_budget_s,
        )
