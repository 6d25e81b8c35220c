"""How right must pseudo-labels be? A run's measured label accuracy read against the curve
measured on the embedded model (SPEC §13; docs/solver-task.md, "How right must labels be").

The curve: the solver alone (`configs/learn-solver.yaml`: 240 questions of `easy:7`, 128 GRPO
updates of 32 completions) trained on labels of a known accuracy a, and the change of its
greedy pass@1 on the held-out `easy` against the base, with the paired 95 % bootstrap
interval. Its points are measurements, one run each, listed in `CURVE` with their record;
nothing between them is fitted. The seed (000 §4.3) saw no common threshold across scales
(the 0.6B model began to decline while its labels were still 70.6 % right, the 4B only at
48.8 %), so the curve is read only for the model it was measured on.
"""

from __future__ import annotations

from dataclasses import dataclass

EMBEDDED = "embedded:smollm2-135m-instruct"
SOURCE = "docs/solver-task.md, 'How right must labels be'"


@dataclass(frozen=True)
class CurvePoint:
    """One measured point: labels `accuracy` right gave `delta` points on `easy` against the
    base [`low`, `high`] (paired 95 %), in the run `run` (seed `seed`)."""

    run: str
    accuracy: float
    delta: float
    low: float
    high: float
    seed: int = 0


# the measured points at seed 0, by label accuracy: shuffled, vote and truth from
# docs/solver-task.md's tables (Intel Xeon with AMX, base 28.3 %); the noisy arms from their
# records in results/label-curve/ (AMD EPYC, base 29.2 %; a test holds them to the records)
CURVE: tuple[CurvePoint, ...] = (
    CurvePoint("shuffled-0", 0.012, -10.2, -14.4, -6.0),
    CurvePoint("vote-0", 0.186, -3.8, -7.7, 0.2),
    CurvePoint("noisy-0.2-0", 0.2, 3.1, -0.6, 7.1),
    CurvePoint("noisy-0.5-0", 0.5, 2.7, -1.5, 6.7),
    CurvePoint("truth-0", 1.0, 25.8, 21.5, 30.2),
)


def _point(p: CurvePoint) -> str:
    return f"a = {p.accuracy:.2f} ({p.run}: {p.delta:+.1f} [{p.low:+.1f}, {p.high:+.1f}])"


def threshold_sentence(
    model: str,
    accuracy: float | None,
    interval: tuple[float, float] | None = None,
    what: str = "the labels",
    curve: tuple[CurvePoint, ...] = CURVE,
) -> str | None:
    """One sentence placing a measured label accuracy on the curve: for the embedded model,
    the measured points just below and just above it, and the highest accuracy measured to
    cost skill and the lowest measured to add it; for any other model, that the threshold is
    not known to transfer across scales, and the accuracy alone. None when no accuracy was
    measured."""
    if accuracy is None:
        return None
    acc = f"{100 * accuracy:.1f} %" + (
        f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]" if interval else ""
    )
    if model != EMBEDDED:
        return (
            f"{what.capitalize()} are {acc} right. Where labels stop teaching is measured only "
            f"on the embedded SmolLM2-135M ({SOURCE}), and the seed (000 §4.3) found no common "
            f"threshold across scales, so it is not known for {model}."
        )
    points = sorted(curve, key=lambda p: p.accuracy)
    below = [p for p in points if p.accuracy <= accuracy]
    above = [p for p in points if p.accuracy > accuracy]
    at = [p for p in points if abs(p.accuracy - accuracy) < 5e-4]
    where = (
        f"at the measured {_point(at[0])}"
        if at
        else f"between the measured {_point(below[-1])} and {_point(above[0])}"
        if below and above
        else f"above every measured point, the highest {_point(below[-1])}"
        if below
        else f"below every measured point, the lowest {_point(above[0])}"
    )
    cost = [p for p in points if p.high < 0]
    gain = [p for p in points if p.low > 0]
    reading = (
        "; labels cost skill measurably up to "
        + (f"a = {cost[-1].accuracy:.2f}" if cost else "no measured a")
        + " and add it from "
        + (f"a = {gain[0].accuracy:.2f}" if gain else "no measured a")
    )
    return (
        f"{what.capitalize()} are {acc} right: on the label-accuracy curve of this model "
        f"(the solver alone at learn-solver's budget, Δ points on easy against the base) "
        f"that lies {where}{reading} ({SOURCE})."
    )
