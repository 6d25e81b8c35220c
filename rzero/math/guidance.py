"""Guided self-play (R-Few: Yu, Liang, Huang et al., "Guided Self-Evolving LLMs with Minimal
Human Supervision", arXiv 2512.02472; SPEC §12): R-Zero's loop grounded in N labelled anchors.

    load_anchors        the anchor set: the first N labelled items of a source, held-out
                        evaluation items never among them
    challenger_prompts  the challenger's prompts, each with k anchors drawn for it
    anchor_accuracy     the frozen solver's vote accuracy on each anchor (its difficulty)
    curriculum          the anchors the solver trains on this iteration
    solver_mixture      the solver's prompt draws: anchors (true answers) and kept synthetic
                        questions (vote labels), in a fixed proportion

Everything else is R-Zero's, unchanged: the challenger's reward (uncertainty minus the BLEU
penalty, the format gate), the pool's band, the frozen solver's votes. `rzero.math.run`
calls these functions where a `guidance:` section names anchors.

Departures from the paper, each deliberate; the paper's method section gives none of the
numbers below in what could be read of it (its abstract: "the Challenger samples a small set
of human-labeled examples to guide synthetic question generation, while the Solver jointly
trains on human and synthetic examples under an online, difficulty-based curriculum"):
- k anchors are drawn for every challenger prompt (the finest of the paper's descriptions,
  "at each rollout"); k is fixed (`guidance.shots`), where a summary of the paper reads k as
  drawn from 0..5.
- The anchors are shown as earlier chat turns with a plain ask, which a 135M model follows
  (`rzero.prompts.challenger.grounded_challenger_chat`).
- A pool question that copies an anchor word for word (`verbatim`) is dropped and counted:
  the anchor trains the solver with its true answer already, and a copy would train it
  again with a vote label.
- The curriculum is a band on the frozen solver's vote accuracy on each anchor, recomputed
  every iteration by S_{k-1}; the synthetic questions keep R-Zero's band on p̂, their own
  difficulty measure. The mixture's proportion (`guidance.anchor_share`, 0.5) is this
  project's choice, not the paper's (which is not stated in what could be read).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from rzero.config import ConfigError, GuidanceConfig
from rzero.evaluation import label_correct, load_question_set
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.challenger import grounded_challenger_chat
from rzero.prompts.chat import Chat


def verbatim(questions: Sequence[str], others: Sequence[str]) -> list[bool]:
    """Per question: is it one of `others`, word for word (whitespace aside)? Not BLEU's
    near-duplicates (`near_duplicates`): a templated problem with new numbers scores above
    its 0.7 there ("Ava has 4 boxes with 3 pencils in each box, ..." against the same
    sentence with 5 and 8), and such a problem is a new item, the very thing an anchor
    should lead the challenger to write."""
    known = {" ".join(o.split()) for o in others}
    return [" ".join(q.split()) in known for q in questions]


def load_anchors(g: GuidanceConfig, held_out: Sequence[str]) -> list[dict[str, Any]]:
    """The first `g.count` items of `g.anchors` that are not held-out evaluation items
    (`verbatim`), each {id, question, answer}; ConfigError in one line when an item has no
    answer or too few are left."""
    rows = load_question_set(g.anchors, 0, key="guidance.anchors")
    missing = [r["id"] for r in rows if r["answer"] is None]
    if missing:
        raise ConfigError(
            f"guidance.anchors={g.anchors!r}: {len(missing)} items have no answer "
            f"(first: {missing[0]}); every anchor needs its true answer"
        )
    overlap = verbatim([r["question"] for r in rows], held_out)
    rows = [r for r, o in zip(rows, overlap, strict=True) if not o]
    if g.count and len(rows) < g.count:
        raise ConfigError(
            f"guidance.count={g.count}: {g.anchors!r} has {len(rows)} items that are not "
            f"evaluation items; lower the count or give a larger set"
        )
    return rows[: g.count] if g.count else rows


def challenger_prompts(
    anchors: Sequence[dict[str, Any]],
    g: GuidanceConfig,
    n: int,
    seed: int,
    template: str | None = None,
) -> tuple[list[Chat], list[list[str]]]:
    """`n` grounded challenger prompts, each showing k = min(shots, N) anchors drawn without
    replacement for that prompt (seeded by `seed`), and the anchor ids of each."""
    rng = random.Random(seed)
    k = min(g.shots, len(anchors))
    prompts, ids = [], []
    for _ in range(n):
        shown = rng.sample(list(anchors), k)
        prompts.append(
            grounded_challenger_chat([(a["question"], a["answer"]) for a in shown], g.ask, template)
        )
        ids.append([a["id"] for a in shown])
    return prompts, ids


def anchor_accuracy(
    solver: FrozenSolver, anchors: Sequence[dict[str, Any]], seed: int, direction: str
) -> list[dict[str, Any]]:
    """Each anchor with the frozen solver's m answers and their accuracy: the share of the m
    answers equivalent to the anchor's true answer (an unparsed answer counts as wrong), and
    whether its majority vote is right."""
    answers, votes = solver.vote([a["question"] for a in anchors], seed)
    rows = []
    for a, ans, v in zip(anchors, answers, votes, strict=True):
        right = sum(
            count for rep, count in v.groups.items() if label_correct(rep, a["answer"], direction)
        )
        rows.append(
            {
                **a,
                "answers": ans,
                "accuracy": right / v.num_votes if v.num_votes else 0.0,
                "p_hat": v.p_hat,
                "vote_label": v.label,
                "vote_correct": label_correct(v.label, a["answer"], direction),
            }
        )
    return rows


def curriculum(accuracy: Sequence[float], low: float, high: float) -> list[bool]:
    """The online difficulty curriculum over the anchors: keep anchor i when
    low <= acc_i <= high, acc_i the frozen solver's vote accuracy on it this iteration. An
    anchor it always solves or never solves gives GRPO no signal (every completion of its group
    gets the same reward, so every advantage is 0). With none in range, every anchor is kept,
    so the anchors' share of the mixture holds."""
    keep = [low <= a <= high for a in accuracy]
    return keep if any(keep) else [True] * len(keep)


def solver_mixture(
    anchors: Sequence[dict[str, Any]],
    synthetic: Sequence[dict[str, Any]],
    draws: int,
    anchor_share: float,
    seed: int,
) -> list[dict[str, Any]]:
    """The solver phase's `draws` prompt draws (solver.steps x prompts_per_step, so GRPO takes
    each row once): round(anchor_share x draws) anchors with their true answers and the rest
    kept synthetic questions with their vote labels (every draw an anchor when there is no
    synthetic question, every draw synthetic when there is no anchor). Within a source the
    items are taken in a seeded order and cycled, so each is drawn floor(n/len) or one more
    times. Rows: {question, label, source}."""
    if not anchors and not synthetic:
        raise ValueError("solver_mixture: no anchors and no synthetic questions")
    n_anchor = round(anchor_share * draws)
    if not synthetic:
        n_anchor = draws
    elif not anchors:
        n_anchor = 0
    rng = random.Random(seed)

    def cycled(items: Sequence[dict[str, Any]], n: int, label: str, source: str):
        order = list(items)
        rng.shuffle(order)
        return [
            {"question": r["question"], "label": r[label], "source": source}
            for r in (order[i % len(order)] for i in range(n))
        ]

    rows = cycled(anchors, n_anchor, "answer", "anchor") if n_anchor else []
    rows += cycled(synthetic, draws - n_anchor, "label", "synthetic") if draws > n_anchor else []
    return rows
