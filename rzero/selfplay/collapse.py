"""Collapse watch (seed §6.1, SPEC §9): how varied the challenger's questions are, how split
the solver's votes are, and the thresholds that turn those numbers into plain-English
warnings (and, through `run.stop_on`, into a stop).

Diversity of a batch of questions, four ways, because each misses something the others see:

- BLEU clusters per question (`cluster_ratio`): the clustering of the repetition penalty
  (`rzero.challenger.repetition.cluster_labels`, d = 1 − BLEU, average linkage, τ), divided
  by the number of questions: 1 when all differ, 1/B when all are one question reworded.
- distinct-n (Li et al. 2016): distinct n-grams / all n-grams over the batch, n = 1, 2.
- mean pairwise BLEU distance: the mean of d_ij over pairs i ≠ j.
- structures per question (`structure_ratio`): every number masked (each digit run, with its
  decimal or thousands part, becomes ``#``), case and spacing folded, then exact match. The
  seed's point: the repetition penalty compares wording, so one template restated with new
  numbers passes it as a new question; here it counts once.

Answer types (integer, fraction, decimal, expression, text) classify boxed answers: a
challenger that drifts to one kind of answer narrows the curriculum even when wording varies.

Answer fragmentation of a labelled pool: mean number of answer groups (and per vote), mean
top-2 margin, mean parse rate. Ten different answers to one question and a 5–5 split both
give p̂ = ½-ish rewards, but only the second is two strong hypotheses (seed §6.1).

Label concentration of the questions the solver trains on (the band): the share of them
whose pseudo-label is the most common one. A frozen solver has habitual answers (the embedded
model's few-shot prompt ends on "15 - 8 = 7 ... \\boxed{7}"); on ill-posed questions such an
answer can win the vote with p̂ near ½, so the band fills with questions labelled 7, and the
solver trained on them learns to answer 7 whatever is asked (seen on the tiny recipe: 17 of
25 questions in the band labelled 7, then 81 of 160 evaluation answers 7 and pass@1 down
from 20 % to 11 %).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rzero.challenger.repetition import (
    BleuVariant,
    bleu_distance_matrix,
    cluster_labels,
    distinct_n,
    question_structure,
    structure_count,
)
from rzero.config import RunConfig, WatchConfig
from rzero.labeling.filtering import label_key
from rzero.rundir.run import stopping, warning_name
from rzero.stats import mean

__all__ = [
    "ANSWER_TYPES",
    "WARNINGS",
    "answer_fragmentation",
    "answer_type",
    "answer_types",
    "collapse_warnings",
    "label_concentration",
    "distinct_n",
    "question_diversity",
    "question_structure",
    "should_stop",
    "stopping",
    "structure_count",
    "warning_name",
]

# The names a warning starts with ("diversity: ..."), which `run.stop_on` lists.
WARNINGS = (
    "diversity",
    "structure",
    "wording",
    "well_formed",
    "parse",
    "fragmentation",
    "band",
    "label_mode",
    "label_accuracy",
    "co_error",
    "increment",
)
ANSWER_TYPES = ("integer", "fraction", "decimal", "expression", "text", "none")


# the numbers a grid's table gives of each arm's questions (BLEU clusters and structures per
# question, distinct bigrams)
HEADLINE_DIVERSITY = ("cluster_ratio", "structure_ratio", "distinct_2")


def question_diversity(
    questions: Sequence[str],
    *,
    tau: float = 0.5,
    variant: BleuVariant = "sacrebleu",
    sample: int | None = 2048,
    seed: int = 0,
) -> dict[str, Any]:
    """Diversity numbers of one batch of questions (see the module docstring).

    Returns ``questions`` (n), ``clusters``, ``cluster_ratio`` (clusters / questions of the
    BLEU sample), ``distinct_1``, ``distinct_2``, ``mean_bleu_distance``, ``structures``,
    ``structure_ratio``, and ``bleu_sample`` (how many questions the BLEU numbers used).
    BLEU clustering is O(n²) in time and memory, so above `sample` questions (None: never)
    the BLEU numbers come from a seeded random sample of that size (the official batch B is
    2,048, so a pool sampled to 2,048 reads on the scale of a GRPO step); the other numbers
    use every question. No questions: every ratio is 0.
    """
    n = len(questions)
    out: dict[str, Any] = {
        "questions": n,
        "clusters": 0,
        "cluster_ratio": 0.0,
        "distinct_1": distinct_n(questions, 1),
        "distinct_2": distinct_n(questions, 2),
        "mean_bleu_distance": 0.0,
        "structures": structure_count(questions),
        "structure_ratio": 0.0,
        "bleu_sample": 0,
    }
    if n == 0:
        return out
    out["structure_ratio"] = out["structures"] / n
    chosen = list(questions)
    if sample is not None and n > sample:
        pick = np.random.default_rng(seed).choice(n, size=sample, replace=False)
        chosen = [questions[i] for i in sorted(pick)]
    labels = cluster_labels(chosen, tau, variant)
    out["clusters"] = int(len(set(labels.tolist())))
    out["cluster_ratio"] = out["clusters"] / len(chosen)
    out["bleu_sample"] = len(chosen)
    if len(chosen) > 1:
        d = bleu_distance_matrix(chosen, variant)  # [b, b], zero diagonal
        out["mean_bleu_distance"] = float(d.sum() / (len(chosen) * (len(chosen) - 1)))
    return out


# ---------------------------------------------------------------- answers


_INTEGER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)")
_DECIMAL = re.compile(r"[+-]?\d*\.\d+")
_FRACTION = re.compile(r"[+-]?(?:\d+/\d+|\\[dt]?frac(?:\{[+-]?\d+\}\{\d+\}|\d\d))")
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
_WORDS = re.compile(r"[A-Za-z][A-Za-z' -]*")


def answer_type(answer: str | None) -> str:
    """The kind of a boxed answer, one of `ANSWER_TYPES`.

    ``-12``, ``1,000`` -> integer; ``3/4``, ``\\frac{3}{4}``, ``-\\dfrac{1}{2}`` -> fraction;
    ``0.25`` -> decimal; ``yes``, ``\\text{Tuesday}`` (words, one of 3+ letters, nothing
    else) -> text; anything else non-empty (``2\\sqrt{3}``, ``x+1``, ``(1, 2)``) ->
    expression; None or empty -> none. Dollar signs, ``\\%``, degree marks and thin spaces
    are dropped first; the test is on the whole answer, so ``12 cm`` is an expression.
    """
    if answer is None:
        return "none"
    text = answer.strip().strip("$").strip()
    for junk in (
        "\\!",
        "\\,",
        "\\;",
        "{,}",
        "\\%",
        "%",
        "^\\circ",
        "^{\\circ}",
        "\\left",
        "\\right",
    ):
        text = text.replace(junk, "," if junk == "{,}" else "")
    text = text.replace(" ", "")
    if not text:
        return "none"
    if _INTEGER.fullmatch(text):
        return "integer"
    if _DECIMAL.fullmatch(text):
        return "decimal"
    if _FRACTION.fullmatch(text):
        return "fraction"
    words = _TEXT_WRAP.sub(r"\1", answer.strip().strip("$")).strip()
    if _WORDS.fullmatch(words) and re.search(r"[A-Za-z]{3}", words):
        return "text"
    return "expression"


def answer_types(answers: Sequence[str | None]) -> dict[str, Any]:
    """Counts of `answer_type` over the answers, the number of types present (``none``
    excluded), and the most common type's share of the typed answers (``top_type``,
    ``top_share``; 0 with none)."""
    counts = Counter(answer_type(a) for a in answers)
    typed = {t: counts[t] for t in ANSWER_TYPES if t != "none" and counts[t]}
    total = sum(typed.values())
    top = max(typed, key=lambda t: typed[t]) if typed else None
    return {
        "counts": {t: counts[t] for t in ANSWER_TYPES},
        "types": len(typed),
        "top_type": top,
        "top_share": typed[top] / total if top else 0.0,
    }


def answer_fragmentation(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """How split the solver's votes are, over labelled rows (``labelled.jsonl``, or the
    valid rows of ``challenger_steps.jsonl``): the means of ``num_groups``, of
    ``num_groups / m`` (``groups_per_vote``, m = the row's number of ``answers``; 1 when every
    vote differs, 0.1 for one answer of ten), of ``top2_margin`` and of ``parse_rate``.
    Rows with no ``parse_rate`` (a malformed GRPO completion never voted on) are skipped;
    no rows: every mean is 0."""
    voted = [r for r in rows if r.get("parse_rate") is not None]

    return {
        "rows": len(voted),
        "mean_num_groups": mean([r["num_groups"] for r in voted]),
        "groups_per_vote": mean(
            [r["num_groups"] / len(r["answers"]) for r in voted if r.get("answers")]
        ),
        "mean_top2_margin": mean(
            [r["top2_margin"] for r in voted if r.get("top2_margin") is not None]
        ),
        "mean_parse_rate": mean([r["parse_rate"] for r in voted]),
    }


def label_concentration(
    rows: Sequence[Mapping[str, Any]], min_questions: int = 5
) -> dict[str, Any]:
    """The most common pseudo-label among the questions the solver trains on
    (``labelled.jsonl`` rows with ``kept`` true, or every row without the key; rows with no
    label skipped):
    ``top_label``, ``top_label_count``, ``kept_questions`` and ``top_label_share`` =
    max_y #{kept questions labelled y} / #kept (labels compared as written, spaces
    stripped). The share is None under `min_questions` kept questions, where 2 of 3 says
    little; ``capped_questions`` counts the band's questions that `labeling.cap_label_share`
    dropped. None of this is in the paper; it is the audit of one way self-play collapses."""
    labels = [
        label_key(r["label"]) for r in rows if r.get("kept", True) and r.get("label") is not None
    ]
    capped = sum(bool(r.get("capped")) for r in rows)  # in the band, dropped by the label cap
    if not labels:
        return {
            "kept_questions": 0,
            "top_label": None,
            "top_label_count": 0,
            "top_label_share": None,
            "capped_questions": capped,
        }
    top, count = Counter(labels).most_common(1)[0]
    share = count / len(labels) if len(labels) >= min_questions else None
    return {
        "kept_questions": len(labels),
        "top_label": top,
        "top_label_count": count,
        "top_label_share": share,
        "capped_questions": capped,
    }


# ---------------------------------------------------------------- warnings


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def collapse_warnings(
    metrics: Mapping[str, Any], thresholds: WatchConfig, *, where: str = ""
) -> list[str]:
    """Plain-English warnings for the watched numbers in `metrics` that cross `thresholds`
    (the run's ``watch:`` section; a threshold of None is off). Each warning starts with its
    name from `WARNINGS` and a colon, which is what ``run.stop_on`` matches; `where` (e.g.
    ``"iteration 2 pool"``) follows it. Keys that are absent are not checked, so one call
    fits any phase's metrics:

        cluster_ratio, structure_ratio, distinct_2   (with ``questions`` >= 2)
        valid_rate, mean_parse_rate, groups_per_vote, kept_fraction
        top_label_share (+ top_label, top_label_count, kept_questions)
        label_accuracy (+ label_accuracy_ci_low/_high), co_error_phi (+ co_error_ci_low)
        increment, increment_ci_low, increment_ci_high   (average pass@1 vs the previous
            iteration; warned when the whole paired interval lies below 0, no threshold)
    """
    t = thresholds
    at = f"{where}: " if where else ""
    out: list[str] = []

    def value(key: str) -> float | None:
        v = metrics.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def low(key: str, limit: float | None, name: str, field: str, what: str, why: str) -> None:
        v = value(key)
        if limit is not None and v is not None and v < limit:
            out.append(f"{name}: {at}{what} {_fmt(v)} is below watch.{field} = {limit}; {why}")

    diverse = value("questions") is None or value("questions") >= 2
    if diverse:
        low(
            "cluster_ratio",
            t.min_cluster_ratio,
            "diversity",
            "min_cluster_ratio",
            "BLEU clusters per question",
            "many questions are rewordings of each other",
        )
        low(
            "structure_ratio",
            t.min_structure_ratio,
            "structure",
            "min_structure_ratio",
            "structures per question (numbers masked)",
            "the challenger restates a few templates with new numbers",
        )
        low(
            "distinct_2",
            t.min_distinct_2,
            "wording",
            "min_distinct_2",
            "distinct-2",
            "the questions share most of their word pairs",
        )
    low(
        "valid_rate",
        t.min_valid_rate,
        "well_formed",
        "min_valid_rate",
        "well-formed rate",
        "most completions have no <question> or no boxed answer",
    )
    low(
        "mean_parse_rate",
        t.min_parse_rate,
        "parse",
        "min_parse_rate",
        "solver parse rate",
        "the solver's votes often have no boxed answer, so p_hat "
        "measures format failure as much as difficulty",
    )
    gpv = value("groups_per_vote")
    if t.max_groups_per_vote is not None and gpv is not None and gpv > t.max_groups_per_vote:
        out.append(
            f"fragmentation: {at}answer groups per vote {_fmt(gpv)} is above "
            f"watch.max_groups_per_vote = {t.max_groups_per_vote}; the votes scatter "
            f"over many answers, so a majority label is a weak guess (ambiguous or "
            f"ill-posed questions read as hard ones)"
        )
    low(
        "kept_fraction",
        t.min_kept_fraction,
        "band",
        "min_kept_fraction",
        "share of the pool in the band",
        "the challenger's questions are too easy or too hard for the solver to train on",
    )
    share = value("top_label_share")
    if t.max_label_share is not None and share is not None and share > t.max_label_share:
        label, count, kept = (
            metrics.get("top_label"),
            value("top_label_count"),
            value("kept_questions"),
        )
        counted = (
            f"{count:.0f} of {kept:.0f} questions the solver trains on carry the label {label}"
            if count is not None and kept is not None
            else "one label dominates the training set"
        )
        out.append(
            f"label_mode: {at}{counted} ({_fmt(share)}), above watch.max_label_share = "
            f"{t.max_label_share}; trained on them, the solver learns to give that "
            f"answer whatever is asked"
        )
    acc = value("label_accuracy")
    if t.min_label_accuracy is not None and acc is not None and acc < t.min_label_accuracy:
        lo, hi = value("label_accuracy_ci_low"), value("label_accuracy_ci_high")
        ci = f" [{_fmt(lo)}, {_fmt(hi)}]" if lo is not None and hi is not None else ""
        out.append(
            f"label_accuracy: {at}pseudo-label accuracy {_fmt(acc)}{ci} is below "
            f"watch.min_label_accuracy = {t.min_label_accuracy}; the solver trains on "
            f"wrong labels about as often as on right ones"
        )
    phi = value("co_error_phi")
    if t.max_co_error_phi is not None and phi is not None and phi > t.max_co_error_phi:
        ci = value("co_error_ci_low")
        out.append(
            f"co_error: {at}the two roles' errors correlate with phi {_fmt(phi)}"
            + (f" (lower bound {_fmt(ci)})" if ci is not None else "")
            + f", above watch.max_co_error_phi = {t.max_co_error_phi}; one role "
            f"catches few of the other's mistakes"
        )
    inc, hi = value("increment"), value("increment_ci_high")
    if inc is not None and hi is not None and hi < 0:
        lo = value("increment_ci_low")
        out.append(
            f"increment: {at}average pass@1 fell {inc:+.3f}"
            + (f" [{lo:+.3f}, {hi:+.3f}]" if lo is not None else "")
            + " against the previous iteration, and the whole paired 95 % interval "
            "is below 0"
        )
    return out


def should_stop(warnings: Sequence[str], run: RunConfig) -> bool:
    """Whether the run stops after the phase that raised `warnings`: one of them is named in
    ``run.stop_on`` (empty by default: warnings are only reported)."""
    return bool(stopping(warnings, run.stop_on))
