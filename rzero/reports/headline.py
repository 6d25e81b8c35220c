"""A run's finding in one line: the first line of every system's report.md and what
`rzero iterate` prints before the report's path.

    Finding: easy pass@1 20.0 % -> 23.1 % -> 15.6 % (iterations 0-2); iteration 2 against
    the base model -4.4 points [-11.3, +2.5] (McNemar p 0.23): within the evaluation noise;
    3 collapse-watch warnings, 0 audit warnings.

The numbers are those of the science card's increment-curve row (`rzero.math.sections`):
the latest evaluated iteration's paired difference against iteration 0 from the watch's
increment curve (`iter_KK/eval/increments.json`, `rzero.selfplay.increments`), read with the
rule `rzero compare` reads every difference with (`rzero.reports.contrasts.side`): outside
the evaluation noise when the whole paired 95 % interval lies on one side of 0 and McNemar's
exact test rejects at 5 %; borderline when only the interval does. The warnings are those
the phases' markers recorded: the collapse watch's (``warnings`` of every phase but the
audit), the audit's (``warnings`` of the audit phase), and the loop's own (``warning``).

`headline` is a pure function of those values; `run_headline` reads them from a run folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rzero.reports.cells import increment_curve
from rzero.reports.contrasts import side
from rzero.rundir import RunDir, stop_of
from rzero.rundir.folder import RUN_PREFIX

# at most this many scores in the line; a longer curve shows its first and last ones
MAX_SCORES = 6


def base_side(d: Mapping[str, Any]) -> str:
    """The reading of a paired difference against iteration 0, as `rzero compare` reads
    every difference (`side`): 'none' (no item changed), 'above' or 'below' (outside the
    evaluation noise), 'borderline' (the interval alone excludes 0), else 'within'."""
    return side(d)


SIDE_WORDS = {
    "none": "no item's score changed",
    "above": "above it, outside the evaluation noise (the whole paired 95 % interval is above 0)",
    "below": "below it, outside the evaluation noise (the whole paired 95 % interval is below 0)",
    "borderline": "borderline (the paired 95 % interval excludes 0 but McNemar's exact test "
    "does not reject at 5 %: too few items differ to tell)",
    "within": "within the evaluation noise (the paired 95 % interval includes 0)",
}


def _scores(values: Sequence[float]) -> str:
    shown = [f"{100 * v:.1f} %" for v in values]
    if len(shown) > MAX_SCORES:
        shown = [*shown[:2], "...", *shown[-3:]]
    return " -> ".join(shown)


def _points(d: Mapping[str, Any]) -> str:
    return (
        f"{100 * d['delta']:+.1f} points [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]"
        + (f" (McNemar p {d['mcnemar_p']:.2g})" if d.get("mcnemar_p") is not None else "")
    )


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def headline(
    curve: Mapping[str, Any] | None,
    *,
    start: str = "the base model",
    collapse: int = 0,
    audit: int = 0,
    other: int = 0,
    base: float | None = None,
    note: str | None = None,
    stopped: str | None = None,
) -> str:
    """The finding in one line, from the increment curve `curve` (increments.json's dict:
    ``benchmarks`` and ``iterations``, each with ``pass@1`` and, from 1, ``vs_base``) and
    the counts of the collapse watch's, the audit's and the loop's own warnings.

    Without a curve: `base` (iteration 0's average pass@1) when only it was evaluated, and
    `note` (why there is no curve: the evaluation is off, nothing evaluated yet). `start`
    names iteration 0 (the base model, or SPIN's θ_0); `stopped` says where `run.stop_on`
    ended the run."""
    parts = []
    if curve and curve.get("iterations"):
        names = list(curve["benchmarks"])
        key = names[0] if len(names) == 1 else "average"
        what = f"{names[0]} pass@1" if len(names) == 1 else f"average pass@1 of {', '.join(names)}"
        entries = curve["iterations"]
        last = entries[-1]
        parts.append(
            f"{what} {_scores([e['pass@1'][key] for e in entries])} "
            f"(iterations {entries[0]['iteration']}-{last['iteration']})"
        )
        if "vs_base" in last:
            d = last["vs_base"][key]
            parts.append(
                f"iteration {last['iteration']} against {start} {_points(d)}: "
                f"{SIDE_WORDS[base_side(d)]}"
            )
    elif base is not None:
        parts.append(
            f"only iteration 0 ({start}) evaluated so far: average pass@1 {100 * base:.1f} %"
        )
    else:
        parts.append(note or "no evaluation yet")
    warned = f"{_plural(collapse, 'collapse-watch warning')}, {_plural(audit, 'audit warning')}"
    if other:
        warned += f", {_plural(other, 'other warning')}"
    parts.append(warned)
    if stopped:
        parts.append(stopped)
    return "Finding: " + "; ".join(parts) + "."


# ---------------------------------------------------------------- from a run folder


def warning_counts(run: RunDir, phases: Sequence[str]) -> dict[str, int]:
    """How many warnings the committed markers of `phases` recorded: ``collapse`` (the
    watch's ``warnings`` of every phase but the audit), ``audit`` (the audit phase's) and
    ``other`` (the loop's own ``warning``)."""
    counts = {"collapse": 0, "audit": 0, "other": 0}
    for k in run.iterations():
        for phase in phases:
            m = run.marker(k, phase)
            if m is None:
                continue
            counts["audit" if phase == "audit" else "collapse"] += len(m.get("warnings", []))
            counts["other"] += bool(m.get("warning"))
    return counts


def _stopped(run: RunDir, phases: Sequence[str], cfg: Any) -> str | None:
    for k in run.iterations():
        for phase in phases:
            m = run.marker(k, phase)
            if m is not None and stop_of(m, cfg.run):
                return f"stopped by run.stop_on after iteration {k}'s {phase} phase"
    return None


def start_name(run: RunDir) -> str:
    """What iteration 0 evaluated: the base model, or a checkpoint the run trained itself
    (SPIN's SFT plateau), θ_0 (as `rzero.reports.contrasts.start_of` names it)."""
    where = str((run.marker(0, "eval") or {}).get("checkpoint", ""))
    if where.startswith(RUN_PREFIX):
        return f"θ_0 ({where[len(RUN_PREFIX) :]})"
    return "the base model"


def run_headline(run: RunDir, cfg: Any = None) -> str:
    """`headline` of the run folder `run` (opened with its system's layout); `cfg`: its
    config (default: its config.yaml)."""
    cfg = cfg if cfg is not None else run.config()
    phases = run.layout.phases
    base = (run.marker(0, "eval") or {}).get("metrics", {}).get("average")
    note = None
    if not cfg.eval.enabled:
        note = "no evaluation: eval.enabled is off"
    return headline(
        increment_curve(run),
        start=start_name(run),
        **warning_counts(run, phases),
        base=base,
        note=note,
        stopped=_stopped(run, phases, cfg),
    )
