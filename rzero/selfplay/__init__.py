"""The self-play audit (SPEC §9, seed §5–6): the numbers that tell a run that is improving from
one that is collapsing, as pure functions over a run's rows; `rzero.stats` holds their
interval arithmetic.

    collapse.py    question diversity (BLEU clusters, distinct-n, structures with numbers
                   masked), answer types, answer fragmentation; thresholds -> warnings;
                   should_stop (run.stop_on)
    coerror.py     role co-error on a calibration set with known answers (seed §6.2)
    increments.py  the increment curve: each iteration against the previous and the base,
                   paired intervals, falling or negative increments in words
    crossplay.py   solver i against pool j: agreement and accuracy matrix, heat map
    curve.py       a training phase's development-draw curve (a trainer callback) and
                   where it stops rising: the solver task's curve, SPIN's plateau
    watch.py       the audit inside a run: what each phase adds to its marker before it
                   commits, the co-error and cross-play phases, and the stop (run.stop_on)

The curriculum-reward variants of seed §6.1 are reward forms of the challenger
(`rzero.challenger.rewards`), where the reward lives.
"""

from rzero.selfplay.coerror import co_error, role_co_error
from rzero.selfplay.collapse import (
    ANSWER_TYPES,
    WARNINGS,
    answer_fragmentation,
    answer_type,
    answer_types,
    collapse_warnings,
    distinct_n,
    label_concentration,
    question_diversity,
    question_structure,
    should_stop,
    stopping,
    structure_count,
    warning_name,
)
from rzero.selfplay.crossplay import cross_iteration_matrix, cross_matrix_markdown, matrix_png
from rzero.selfplay.increments import align_eval_items, increment_curve

__all__ = [
    "ANSWER_TYPES",
    "WARNINGS",
    "align_eval_items",
    "answer_fragmentation",
    "answer_type",
    "answer_types",
    "co_error",
    "collapse_warnings",
    "cross_iteration_matrix",
    "cross_matrix_markdown",
    "distinct_n",
    "increment_curve",
    "label_concentration",
    "matrix_png",
    "question_diversity",
    "question_structure",
    "role_co_error",
    "should_stop",
    "stopping",
    "structure_count",
    "warning_name",
]
