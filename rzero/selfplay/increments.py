"""The increment curve (seed §6.1 checklist, SPEC §9): how much each iteration adds.

Self-play gains shrink and then turn negative (SPIN's per-round gain fell from 2.66 to 0.19;
R-Zero declines after iteration 3), so a run reports, per iteration k and benchmark, the
change of pass@1 against iteration k − 1 and against the base (iteration 0), each with a
paired 95 % interval (`rzero.stats.paired_difference`: the same items scored twice, so the
item-to-item variation cancels), and says in words where the increment fell or went negative.
The average over benchmarks is unweighted, as in the paper's tables, and its interval comes
from a bootstrap stratified by benchmark (`rzero.stats.stratified_paired_difference`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rzero.stats import PairedDifference, mean, paired_difference, stratified_paired_difference

__all__ = ["align_eval_items", "increment_curve", "paired_scores"]


def increment_curve(
    correct: Mapping[str, Sequence[Sequence[float]]], *, n_boot: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """Per-iteration changes with paired intervals, and flags in words.

    `correct[benchmark][k]` is iteration k's per-item score on that benchmark (0/1 for
    greedy pass@1, or mean@k fractions), in one item order for every k; k = 0 is the base
    model. Every benchmark needs the same iterations.

    Returns ``benchmarks``; ``iterations``, one entry per k with ``pass@1`` ({benchmark:
    mean, "average": mean of means}) and, for k >= 1, ``vs_previous`` and ``vs_base``
    ({benchmark or "average": `PairedDifference.to_dict()`}) and ``watch`` (``increment``,
    ``increment_ci_low``, ``increment_ci_high``: the average against k − 1, for
    `rzero.selfplay.collapse.collapse_warnings`) and ``flags``, sentences for: a drop
    against k − 1 whose interval lies below 0 (or that the interval cannot tell from 0),
    a gain that shrank from the iteration before, and a score below the base; and
    ``flags``, every iteration's flags in order.
    """
    if not correct:
        raise ValueError("increment_curve: no benchmarks")
    names = list(correct)
    counts = {name: len(correct[name]) for name in names}
    if len(set(counts.values())) != 1:
        raise ValueError(f"every benchmark needs the same iterations, got {counts}")
    num = counts[names[0]]
    if num < 1:
        raise ValueError("increment_curve: no iterations (need at least the base, k = 0)")

    def compare(j: int, k: int) -> dict[str, PairedDifference]:
        return paired_scores(
            {name: (correct[name][j], correct[name][k]) for name in names}, n_boot=n_boot, seed=seed
        )

    iterations: list[dict[str, Any]] = []
    flags: list[str] = []
    previous_gain: PairedDifference | None = None
    for k in range(num):
        scores = {name: _mean(correct[name][k]) for name in names}
        scores["average"] = sum(scores[name] for name in names) / len(names)
        entry: dict[str, Any] = {"iteration": k, "pass@1": scores}
        if k >= 1:
            prev, base = compare(k - 1, k), compare(0, k)
            gain = prev["average"]
            entry["vs_previous"] = {n: d.to_dict() for n, d in prev.items()}
            entry["vs_base"] = {n: d.to_dict() for n, d in base.items()}
            entry["watch"] = {
                "increment": gain.delta,
                "increment_ci_low": gain.ci_low,
                "increment_ci_high": gain.ci_high,
            }
            entry["flags"] = _flags(k, prev, base, previous_gain)
            flags += entry["flags"]
            previous_gain = gain
        iterations.append(entry)
    return {"benchmarks": names, "iterations": iterations, "flags": flags}


def paired_scores(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    n_boot: int = 10_000,
    seed: int = 0,
) -> dict[str, PairedDifference]:
    """Per benchmark, mean(b) − mean(a) on the same items (`paired_difference`), and under
    ``"average"`` the change of the unweighted average over benchmarks, its interval from a
    bootstrap stratified by benchmark; with one benchmark the average is that benchmark's
    own difference (so it keeps the McNemar analysis)."""
    if not pairs:
        raise ValueError("paired_scores: no benchmarks")
    out = {
        name: paired_difference(a, b, n_boot=n_boot, seed=seed) for name, (a, b) in pairs.items()
    }
    out["average"] = (
        next(iter(out.values()))
        if len(pairs) == 1
        else stratified_paired_difference(list(pairs.values()), n_boot=n_boot, seed=seed)
    )
    return out


def align_eval_items(results: Sequence[Mapping[str, Any]]) -> dict[str, list[list[float]]]:
    """`increment_curve`'s input from each iteration's ``eval.json`` (k = 0, 1, ...): per
    benchmark, each iteration's per-item score (``mean``: 0/1 for greedy pass@1, mean@k
    otherwise), matched by item ``id``. Only items every iteration scored are kept, in the
    base's order, so a changed ``eval.limit`` cannot pair different items; a benchmark some
    iteration lacks is left out."""
    per_iteration = [
        {(r["benchmark"], r["id"]): float(r["mean"]) for r in res["items"]} for res in results
    ]
    if not per_iteration:
        return {}
    out: dict[str, list[list[float]]] = {}
    for bench, item in per_iteration[0]:
        key = (bench, item)
        if all(key in scores for scores in per_iteration):
            rows = out.setdefault(bench, [[] for _ in per_iteration])
            for row, scores in zip(rows, per_iteration, strict=True):
                row.append(scores[key])
    return out


def _mean(values: Sequence[float]) -> float:
    if len(values) == 0:
        raise ValueError("increment_curve: a benchmark with no items")
    return mean(values)


def _flags(
    k: int,
    prev: dict[str, PairedDifference],
    base: dict[str, PairedDifference],
    previous_gain: PairedDifference | None,
) -> list[str]:
    out = []
    gain = prev["average"]
    if gain.ci_high < 0:
        out.append(
            f"iteration {k} is below iteration {k - 1} on average: {gain.words()} "
            f"(paired 95 % interval, entirely below 0)"
        )
    elif gain.delta < 0:
        out.append(
            f"iteration {k} scored below iteration {k - 1} on average: {gain.words()}; "
            f"the interval includes 0, so the drop may be noise"
        )
    if previous_gain is not None and previous_gain.delta > 0 and gain.delta < previous_gain.delta:
        out.append(
            f"the gain per iteration fell: {previous_gain.delta:+.3f} at iteration "
            f"{k - 1}, {gain.delta:+.3f} at iteration {k} (point estimates; intervals "
            f"{previous_gain.words()} and {gain.words()})"
        )
    if base["average"].ci_high < 0:
        out.append(f"iteration {k} is below the base model on average: {base['average'].words()}")
    for name, d in prev.items():
        if name != "average" and d.ci_high < 0:
            out.append(f"iteration {k} is below iteration {k - 1} on {name}: {d.words()}")
    return out
