"""R-Zero's majority vote on deduction tasks, and its exact label accuracy.

The frozen solver predicts the output of `f(input)` m times (`CodeVoter`); the outputs are
grouped by `outputs_equal` (equal reprs after `literal_eval`), the largest group is the
pseudo-label ỹ and p̂ = |largest group| / m (`code_vote`). Unlike math, the truth is at hand:
the executor ran the program when the proposal was validated, so every label is checked
exactly (`exact_label_accuracy`, `accuracy_by_p_hat`), with a 95 % Wilson interval.

Departure from `rzero.labeling.voting.majority_vote_many`: grouping is by the canonical repr
(`rzero.executor.tasks.canonical`), not through an equivalence checker. `outputs_equal` is
equality of canonical forms, so this is the same partition the checker would build, but the
math vote's string fast path (`normalize_answer`) squeezes whitespace and would merge the
different outputs `'1 2'` and `'12'` without asking the checker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rzero.audit.report import P_HAT_BINS, p_hat_bucket
from rzero.config import LabelingConfig
from rzero.executor.parsing import parse_answer
from rzero.executor.prompts import solver_messages
from rzero.executor.tasks import CodeTask, canonical
from rzero.generation.interface import Generator
from rzero.labeling.voting import Votes, vote_params
from rzero.stats import wilson_interval

MAX_LOGGED_ANSWER = 300  # characters of one vote kept in the run's JSONL files


def code_vote(answers: Sequence[str | None]) -> Votes:
    """Majority vote over predicted outputs (R-Zero's ỹ and p̂ on a deduction task).

    Answers are grouped by canonical repr; ``None`` (no <output> tag) counts in m and forms
    no group. ỹ is the canonical repr of the largest group (ties: the group seen first),
    p̂ = |largest| / m, top-2 margin = (|largest| − |second|) / m. Example: outputs
    ``["(1, 2)", "(1,2)", "3", None]`` -> groups {"(1, 2)": 2, "3": 1}, ỹ = "(1, 2)",
    p̂ = 2/4 = 0.5, parse rate 3/4.
    """
    reps: list[str] = []
    counts: list[int] = []
    index: dict[str, int] = {}
    assignments: list[int | None] = []
    for answer in answers:
        if answer is None or not answer.strip():
            assignments.append(None)
            continue
        key = canonical(answer)
        if key not in index:
            index[key] = len(reps)
            reps.append(key)
            counts.append(0)
        counts[index[key]] += 1
        assignments.append(index[key])
    m = len(answers)
    parse_rate = sum(a is not None for a in assignments) / m if m else 0.0
    if not reps:
        return Votes(None, 0.0, {}, 0, 0.0, parse_rate, m, tuple(assignments))
    top = max(range(len(reps)), key=lambda g: (counts[g], -g))
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


@dataclass(frozen=True)
class CodeVoter:
    """The frozen solver S_{k-1} voting on deduction tasks: m samples of the solver prompt
    per task, drawn as R-Zero's votes are (`labeling`: m, temperature, top_k, ...)."""

    generator: Generator
    labeling: LabelingConfig

    def vote(
        self, tasks: Sequence[CodeTask], seed: int
    ) -> tuple[list[list[str | None]], list[Votes]]:
        """The m predicted outputs of every task (None where no <output> was written) and
        their votes, in task order."""
        if not tasks:
            return [], []
        texts = self.generator.generate(
            [solver_messages(t) for t in tasks],
            self.labeling.num_votes,
            vote_params(self.labeling, seed),
        )
        answers = [[parse_answer("deduction", x) for x in row] for row in texts]
        return answers, [code_vote(a) for a in answers]


def vote_row(task: CodeTask, answers: Sequence[str | None], votes: Votes) -> dict[str, Any]:
    """What a run records of one vote, beside the truth: the label is `correct` when it
    equals the executor's output; `label_correct` is None when no answer parsed."""
    correct = None if votes.label is None else votes.label == canonical(task.output)
    return {
        "answers": [a[:MAX_LOGGED_ANSWER] if a is not None else None for a in answers],
        "label": votes.label,
        "p_hat": votes.p_hat,
        "num_groups": votes.num_groups,
        "top2_margin": votes.top2_margin,
        "parse_rate": votes.parse_rate,
        "groups": dict(votes.groups),
        "truth": task.output,
        "label_correct": correct,
    }


# ---------------------------------------------------------------- exact label accuracy


def exact_label_accuracy(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Exact accuracy of majority-vote labels: correct / labelled, with a 95 % Wilson interval.

    A row is labelled when its vote has a label (some answer parsed); its label is correct
    when it equals the executor's output (`vote_row`). Rows without a label are counted in
    ``n_unlabelled``, never as wrong. Example: labels right on 3 of 4 labelled rows ->
    accuracy 0.75, Wilson [0.30, 0.95].
    """
    labelled = [r for r in rows if r.get("label") is not None]
    correct = sum(bool(r["label_correct"]) for r in labelled)
    n = len(labelled)
    lo, hi = wilson_interval(correct, n)
    return {
        "n_labelled": n,
        "n_unlabelled": len(rows) - n,
        "correct": correct,
        "label_accuracy": correct / n if n else None,
        "ci_low": lo,
        "ci_high": hi,
    }


def accuracy_by_p_hat(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`exact_label_accuracy` within each vote-share bucket of the audit report
    (`rzero.audit.report.P_HAT_BINS`), labelled rows only; empty buckets are left out."""
    out = []
    labelled = [r for r in rows if r.get("label") is not None]
    for lo, hi in P_HAT_BINS:
        group = [r for r in labelled if lo <= r["p_hat"] < hi or (hi == 1.0 and r["p_hat"] == hi)]
        if group:
            out.append({"bucket": p_hat_bucket(group[0]["p_hat"]), **exact_label_accuracy(group)})
    return out


def accuracy_fields(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Overall exact accuracy and its p̂ buckets, as a marker's metrics hold them."""
    return {**exact_label_accuracy(rows), "by_p_hat": accuracy_by_p_hat(rows)}
