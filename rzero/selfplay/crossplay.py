"""The cross-iteration matrix (seed §6.1, SPEC §9): every solver against every question pool.

Pool j was written by challenger j and labelled by the vote of solver j − 1. Asking solver i
about pool j's questions and comparing its majority answer with pool j's label shows what
one number per iteration hides: whether later solvers still agree with earlier labels
(drift), and, where the true answers are known, whether a later solver lost what an earlier
one could do (forgetting: "new models beat recent versions and lose to early ones again").

    cell (i, j) agreement = share of pool j's labelled questions on which solver i's majority
                            answer is equivalent to pool j's label
    cell (i, j) accuracy  = share of pool j's questions with a known answer on which solver
                            i's majority answer is equivalent to it
Each with its 95 % Wilson interval. A solver answer of None (no vote parsed) disagrees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rzero.render import heatmap_png, markdown_table
from rzero.stats import wilson_interval

__all__ = ["cross_iteration_matrix", "cross_matrix_markdown", "matrix_png"]

Equivalent = Callable[[Sequence[tuple[str | None, str | None]]], list[bool]]


def _cell(verdicts: list[bool]) -> dict[str, Any]:
    k, n = sum(verdicts), len(verdicts)
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": k / n if n else None, "ci_low": lo, "ci_high": hi}


def cross_iteration_matrix(
    solver_answers: Mapping[tuple[int, int], Sequence[str | None]],
    pool_labels: Mapping[int, Sequence[str | None]],
    truth: Mapping[int, Sequence[str | None]] | None = None,
    *,
    equivalent: Equivalent | None = None,
) -> dict[str, Any]:
    """Agreement (and accuracy where truth is known) of solver i on pool j, for every (i, j)
    in `solver_answers`.

    `solver_answers[(i, j)]`: solver i's majority answer on each of pool j's questions
    (`Votes.label` of its m votes), in pool order; `pool_labels[j]`: pool j's pseudo-labels
    (None where nothing parsed; such questions are left out of agreement); `truth[j]`: the
    known answers of pool j (None where unknown). `equivalent` compares answer pairs; the
    default is the run's math-verify checker (`rzero.labeling.equivalence.equivalent_many`).

    Returns JSON-able ``solvers``, ``pools`` (sorted ids), ``agreement`` and ``accuracy``
    (matrices [solver][pool] of cells {k, n, rate, ci_low, ci_high}, None where a pair was
    not asked; ``accuracy`` is None with no truth at all), and ``flags`` (words).
    """
    if equivalent is None:
        from rzero.labeling.equivalence import equivalent_many as equivalent
    truth = truth or {}
    solvers = sorted({i for i, _ in solver_answers})
    pools = sorted({j for _, j in solver_answers})
    for (i, j), answers in solver_answers.items():
        if j not in pool_labels:
            raise ValueError(f"solver {i} answered pool {j}, which has no labels")
        if len(answers) != len(pool_labels[j]):
            raise ValueError(
                f"solver {i} gave {len(answers)} answers to pool {j}'s "
                f"{len(pool_labels[j])} questions"
            )
        if j in truth and len(truth[j]) != len(pool_labels[j]):
            raise ValueError(
                f"pool {j}: {len(truth[j])} known answers for {len(pool_labels[j])} questions"
            )
    # one batch of checks for every cell: (answer, label) pairs, then (answer, truth) pairs
    pairs: list[tuple[str | None, str | None]] = []
    slots: list[tuple[str, int, int]] = []
    for (i, j), answers in sorted(solver_answers.items()):
        for q, answer in enumerate(answers):
            if pool_labels[j][q] is not None:
                pairs.append((answer, pool_labels[j][q]))
                slots.append(("agreement", i, j))
            if j in truth and truth[j][q] is not None:
                pairs.append((answer, truth[j][q]))
                slots.append(("accuracy", i, j))
    verdicts = [
        bool(v) and a is not None
        for v, (a, _) in zip(equivalent(pairs) if pairs else [], pairs, strict=True)
    ]
    found: dict[tuple[str, int, int], list[bool]] = {}
    for slot, v in zip(slots, verdicts, strict=True):
        found.setdefault(slot, []).append(v)

    def matrix(metric: str) -> list[list[dict[str, Any] | None]]:
        return [
            [
                _cell(found.get((metric, i, j), [])) if (i, j) in solver_answers else None
                for j in pools
            ]
            for i in solvers
        ]

    out: dict[str, Any] = {
        "solvers": solvers,
        "pools": pools,
        "agreement": matrix("agreement"),
        "accuracy": matrix("accuracy") if truth else None,
    }
    out["flags"] = _forgetting(out)
    return out


def _forgetting(m: dict[str, Any]) -> list[str]:
    """For each pool with known answers: the last solver asked against the best earlier one,
    flagged when their Wilson intervals do not overlap."""
    if m["accuracy"] is None:
        return []
    flags = []
    for col, j in enumerate(m["pools"]):
        cells = [
            (i, m["accuracy"][row][col])
            for row, i in enumerate(m["solvers"])
            if m["accuracy"][row][col] is not None and m["accuracy"][row][col]["n"]
        ]
        if len(cells) < 2:
            continue
        last_i, last = cells[-1]
        best_i, best = max(cells[:-1], key=lambda c: c[1]["rate"])
        if last["ci_high"] < best["ci_low"]:
            flags.append(
                f"pool {j}: solver {last_i} answers {last['rate']:.1%} "
                f"[{last['ci_low']:.1%}, {last['ci_high']:.1%}] correctly, below "
                f"solver {best_i}'s {best['rate']:.1%} [{best['ci_low']:.1%}, "
                f"{best['ci_high']:.1%}]: later training lost what pool {j} asks"
            )
    return flags


def cross_matrix_markdown(m: dict[str, Any], metric: str = "agreement") -> str:
    """The matrix as a Markdown table: rows are solvers, columns pools, cells `rate [lo, hi]
    (n)`; `–` where a pair was not asked or had no items."""
    cells = m[metric]
    if cells is None:
        raise ValueError(f"no {metric} in this matrix (no known answers)")

    def text(c: dict[str, Any] | None) -> str:
        if c is None or not c["n"]:
            return "–"
        return f"{c['rate']:.2f} [{c['ci_low']:.2f}, {c['ci_high']:.2f}] ({c['n']})"

    header = [f"solver \\ pool ({metric})"] + [f"pool {j}" for j in m["pools"]]
    rows = [
        [f"solver {i}"] + [text(c) for c in row] for i, row in zip(m["solvers"], cells, strict=True)
    ]
    return markdown_table(header, rows, align="l" + "r" * len(m["pools"]))


def matrix_png(m: dict[str, Any], metric: str = "agreement", title: str | None = None) -> bytes:
    """The matrix as a heat map PNG (`rzero.render.heatmap_png`; rows: solvers, columns:
    pools, colour: rate on [0, 1], each cell annotated with its rate and n; blank where not
    asked)."""
    cells = m[metric]
    if cells is None:
        raise ValueError(f"no {metric} in this matrix (no known answers)")
    rates = [[c["rate"] if c is not None else None for c in row] for row in cells]
    notes = [
        [
            f"{c['rate']:.2f}\nn={c['n']}" if c is not None and c["rate"] is not None else ""
            for c in row
        ]
        for row in cells
    ]
    return heatmap_png(
        rates,
        [f"solver {i}" for i in m["solvers"]],
        [f"pool {j}" for j in m["pools"]],
        title or metric,
        metric,
        notes=notes,
        axes=("question pool (labelled by solver j - 1)", "solver"),
    )
