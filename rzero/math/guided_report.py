"""Guided self-play's part of a run's report (R-Few, `rzero.math.guidance`): per iteration, the
two sources of the solver's training apart, as plain values `page.py` writes as HTML and
`report.py` as Markdown.

    sources_rows    per iteration: the anchors (in the curriculum, the frozen solver's
                    accuracy on them, their prompt draws) beside the synthetic questions
                    (well-formed pool, exactly computable share, kept, their labels' exact
                    accuracy where computable, their prompt draws)
    sample_rows     kept synthetic questions with their vote label and, where the question
                    is one arithmetic expression, its exact answer

Everything is read from the markers and the files they vouch for.
"""

from __future__ import annotations

from typing import Any

from rzero.config import RZeroConfig
from rzero.rundir import RunDir
from rzero.stats import wilson_interval

SOURCES_HEADER = [
    "iter",
    "anchors in curriculum",
    "anchors: share of the solver's votes right",
    "anchor draws",
    "pool (copies of an anchor dropped)",
    "exactly computable",
    "kept synthetic",
    "kept labels right (computable)",
    "synthetic draws",
]

SOURCES_NOTE = (
    "The solver's prompt draws per iteration are anchors with their true answers and kept "
    "synthetic questions with the frozen solver's vote labels. The curriculum keeps the anchors "
    "the frozen solver answers right in part (its share of right votes inside guidance."
    "curriculum_low..high). The exactly computable share is of the pool's well-formed questions "
    "(one arithmetic expression, `rzero.labeling.computable`): a lower bound on the well-posed "
    "share, which only a judge or a reader can give; the kept labels' accuracy is exact on "
    "those, with its 95 % Wilson interval."
)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def _share(right: int, n: int) -> str:
    if not n:
        return "– (0)"
    lo, hi = wilson_interval(right, n)
    return f"{100 * right / n:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}] ({right}/{n})"


def sources_rows(run: RunDir, cfg: RZeroConfig) -> tuple[list[str], list[list[str]]]:
    """One row per iteration with a labelling marker: the anchors and the synthetic questions
    that trained the solver, side by side."""
    rows = []
    for k in run.trained_iterations():
        lab = run.marker(k, "labelling")
        if lab is None:
            continue
        m = lab.get("metrics", {})
        pool = (run.marker(k, "pool") or {}).get("metrics", {})
        sol = (run.marker(k, "solver") or {}).get("metrics", {})
        labelled = run.rows(k, "labelled")
        computable = [r for r in labelled if r.get("label_correct") is not None]
        kept_known = [r for r in computable if r["kept"]]
        rows.append(
            [
                str(k),
                f"{m.get('anchors_kept', '–')} of {m.get('anchors', '–')}",
                _pct(m.get("anchor_accuracy")),  # of the m votes per anchor, all anchors
                str(sol.get("anchor_draws", "–")),
                f"{len(labelled)} ({pool.get('anchor_copies', 0)})",
                _share(len(computable), len(labelled)),
                str(m.get("kept", "–")),
                _share(sum(bool(r["label_correct"]) for r in kept_known), len(kept_known)),
                str(sol.get("synthetic_draws", "–")),
            ]
        )
    return SOURCES_HEADER, rows


def sample_rows(run: RunDir, k: int, n: int = 10) -> list[dict[str, Any]]:
    """The first `n` kept synthetic questions of iteration k: question, vote label, p̂, and
    the exact answer where the question is computable (else None)."""
    kept = [r for r in run.rows(k, "labelled") if r["kept"]][:n]
    return [
        {
            "question": r["question"],
            "label": r["label"],
            "p_hat": r["p_hat"],
            "truth": r.get("computed_answer"),
            "label_correct": r.get("label_correct"),
        }
        for r in kept
    ]
