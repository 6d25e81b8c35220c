"""The solver task's training set: fixed questions, and their labels from one of three
sources (`solver_task.labels`).

    truth      each question's known answer
    vote       the majority of m answers of the solver that starts the iteration (R-Zero's
               solver phase, TTRL's method), kept in R-Zero's band when solver_task.band
    shuffled   the known answers permuted across questions by a derangement, so no question
               keeps its own answer (the negative control); a shuffled label can still be
               right where two questions share an answer, and that share is recorded
    noisy      labels of an exact accuracy a: a seeded round(a·n) keep the known answer, the
               rest get a wrong one, the base solver's most common wrong vote where it has
               one (`noisy_labels`); each row records its `label_kind`

Every labelled row records whether its label is equivalent to the known answer
(`label_correct`, None where no answer is known), so a vote run's label accuracy is exact.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from rzero.config import ConfigError, RZeroConfig
from rzero.evaluation import label_correct, load_question_set
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.solver import solver_chat
from rzero.solver.dataset import label_pool


def load_questions(spec: str, count: int = 0) -> list[dict[str, Any]]:
    """[{id, question, answer or None}] of `solver_task.questions` (`load_question_set`)."""
    return load_question_set(spec, count, key="solver_task.questions")


def derangement(n: int, seed: int) -> list[int]:
    """A uniformly drawn cyclic permutation of range(n) (Sattolo's algorithm): no index maps
    to itself when n > 1."""
    order = list(range(n))
    rng = random.Random(seed)
    for i in range(n - 1, 0, -1):
        j = rng.randrange(i)
        order[i], order[j] = order[j], order[i]
    return order


def fixed_labels(
    rows: Sequence[dict[str, Any]], source: str, seed: int, direction: str
) -> list[dict[str, Any]]:
    """truth or shuffled labels for `rows`, every row kept."""
    if any(r["answer"] is None for r in rows):
        missing = sum(r["answer"] is None for r in rows)
        raise ConfigError(
            f"solver_task.labels={source}: {missing} of {len(rows)} questions "
            f"have no answer; give answers, or use labels vote"
        )
    answers = [r["answer"] for r in rows]
    if source == "shuffled":
        answers = [answers[j] for j in derangement(len(rows), seed)]
    return [
        {**r, "label": a, "kept": True, "label_correct": label_correct(a, r["answer"], direction)}
        for r, a in zip(rows, answers, strict=True)
    ]


def vote_labels(
    solver: FrozenSolver, rows: Sequence[dict[str, Any]], seed: int, band: bool, direction: str
) -> list[dict[str, Any]]:
    """The frozen solver's majority label of every row (`label_pool`); kept when it has a
    label and, with `band`, lies in R-Zero's band."""
    voted = label_pool(solver, [r["question"] for r in rows], seed=seed)
    out = []
    for r, v in zip(rows, voted, strict=True):
        keep = v["kept"] if band else v["label"] is not None
        out.append(
            {
                **r,
                **{k: v[k] for k in ("answers", "label", "p_hat", "num_groups", "parse_rate")},
                "in_band": v["kept"],
                "kept": keep,
                "label_correct": label_correct(v["label"], r["answer"], direction),
            }
        )
    return out


LABEL_KINDS = ("truth", "wrong_vote", "other_answer")


def noisy_labels(
    rows: Sequence[dict[str, Any]],
    votes: Sequence[dict[str, int]],
    accuracy: float,
    seed: int,
    direction: str,
) -> list[dict[str, Any]]:
    """Labels of exactly `accuracy` a: a subset of round(a·n) rows drawn by `seed` keep their
    known answer (`label_kind` truth); every other row gets a wrong label, the most common of
    the base solver's answers to it (`votes`: answer -> count, in order of first appearance;
    ties go to the first seen) that is not equivalent to its answer (wrong_vote, R-Zero's
    errors being the model's own plausible mistakes), else the first answer of another row,
    in a seeded order, that is not equivalent to its own (other_answer). A row with no wrong
    label to give (every other answer is equivalent to its own) is an error, not a silent
    truth. Every row is kept."""
    if any(r["answer"] is None for r in rows):
        raise ConfigError("solver_task.labels=noisy: every question needs its known answer")
    n = len(rows)
    rng = random.Random(f"{seed}:noisy")
    true = set(rng.sample(range(n), round(accuracy * n)))
    others = list(range(n))
    rng.shuffle(others)
    out = []
    for i, (r, counted) in enumerate(zip(rows, votes, strict=True)):
        label, kind = r["answer"], "truth"
        if i not in true:
            wrong = [
                a
                for a, _ in sorted(counted.items(), key=lambda x: -x[1])
                if not label_correct(a, r["answer"], direction)
            ]
            if wrong:
                label, kind = wrong[0], "wrong_vote"
            else:
                label = next(
                    (
                        rows[j]["answer"]
                        for j in others
                        if j != i and not label_correct(rows[j]["answer"], r["answer"], direction)
                    ),
                    None,
                )
                kind = "other_answer"
                if label is None:
                    raise ConfigError(
                        f"solver_task.labels=noisy: question {r['id']} has no wrong label "
                        f"to give (every answer in the set equals its own)"
                    )
        out.append(
            {
                **r,
                "label": label,
                "label_kind": kind,
                "kept": True,
                "label_correct": kind == "truth",
            }
        )
    return out


def training_rows(
    cfg: RZeroConfig, labelled: Sequence[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """GRPO rows (the solver's prompt and the label) of the kept `labelled` rows; without
    them, the recipe's questions with their true answers (the benchmarks use this)."""
    if labelled is None:
        labelled = fixed_labels(
            load_questions(cfg.solver_task.questions, cfg.solver_task.count),
            "truth",
            cfg.run.seed,
            cfg.labeling.equivalence,
        )
    return [
        {"prompt": solver_chat(r["question"], cfg.solver.prompt_file), "label": r["label"]}
        for r in labelled
        if r["kept"]
    ]


def label_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts for the labelling phase's marker: questions, kept, and the labels' accuracy
    against the known answers (over all labelled rows, and over the kept ones); with vote
    labels, the frozen solver's mean majority share p̂ over the labelled rows, as the loop's
    labelling marker has it."""
    known = [r for r in rows if r["label_correct"] is not None]
    kept_known = [r for r in known if r["kept"]]
    voted = [r["p_hat"] for r in rows if r.get("p_hat") is not None and r["label"] is not None]
    return {
        **({"mean_p_hat": sum(voted) / len(voted)} if voted else {}),
        "questions": len(rows),
        "kept": sum(r["kept"] for r in rows),
        "labelled": sum(r["label"] is not None for r in rows),
        "known_answers": len(known),
        "label_accuracy": (sum(r["label_correct"] for r in known) / len(known) if known else None),
        "kept_label_accuracy": (
            sum(r["label_correct"] for r in kept_known) / len(kept_known) if kept_known else None
        ),
    }
