"""The solver's training data: the pool labelled by the frozen solver's majority vote, and
the band filter that keeps the informative questions (SPEC §1.3).

Each labelled row records all m answers, the answer groups, the number of groups, the
top-2 margin, the parse rate, p̂, the pseudo-label ỹ and whether `keep_question` kept it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tqdm.auto import tqdm

from rzero.config import LabelingConfig
from rzero.faults import crash_point
from rzero.labeling.filtering import cap_label_share, keep_question
from rzero.labeling.voting import FrozenSolver, Votes


def kept(votes: Votes, labeling: LabelingConfig) -> bool:
    """The run's band decision for one question: `keep_question` with the configured band
    (|p̂ − ½| ≤ δ, or `band_low` ≤ p̂ ≤ `band_high`); with the filter off (ablation), every
    question that has a label."""
    if not labeling.filter:
        return votes.label is not None
    return keep_question(votes, labeling.delta, low=labeling.band_low, high=labeling.band_high)


def label_pool(
    solver: FrozenSolver, questions: Sequence[str], seed: int, chunk: int = 16
) -> list[dict[str, Any]]:
    """m solver answers per question; majority vote gives label and p̂; the band decides,
    then `labeling.cap_label_share` (`cap_label_share`), when set."""
    rows: list[dict[str, Any]] = []
    for start in tqdm(range(0, len(questions), chunk), desc="labelling", unit="chunk", leave=False):
        part = list(questions[start : start + chunk])
        answers, votes = solver.vote(part, seed + start)
        for q, a, v in zip(part, answers, votes, strict=True):
            rows.append(
                {
                    "question": q,
                    "answers": a,
                    "label": v.label,
                    "p_hat": v.p_hat,
                    "num_groups": v.num_groups,
                    "top2_margin": v.top2_margin,
                    "parse_rate": v.parse_rate,
                    "groups": dict(v.groups),
                    "kept": kept(v, solver.labeling),
                }
            )
        crash_point("labelling:mid")
    share = solver.labeling.cap_label_share
    if share is not None:
        flags = cap_label_share(
            [r["label"] for r in rows], [r["p_hat"] for r in rows], [r["kept"] for r in rows], share
        )
        for r, flag in zip(rows, flags, strict=True):
            r["capped"] = r["kept"] and not flag  # in the band, dropped by the label cap
            r["kept"] = flag
    return rows


def p_hat_histogram(rows: Sequence[dict[str, Any]], m: int) -> dict[str, int]:
    """Count of questions by number of votes in the largest group (0..m)."""
    hist = {str(k): 0 for k in range(m + 1)}
    for r in rows:
        hist[str(round(r["p_hat"] * m))] += 1
    return hist
