"""The self-play audit in a run (SPEC §9, seed §6.1–6.2): what each phase adds to its marker
before it commits. A system's run (`rzero.rundir.run.Run.before_commit`) hands it to its
phase runner; the stop it records is enforced there (`rzero.rundir.run.check_stop`).

    after_phase      called with each phase's marker before it commits:
                     challenger  per-step warnings; slope of reward and well-formed rate over
                                 the steps (SPEC §7: both should rise), with 95 % intervals
                     pool        question diversity (BLEU clusters, distinct-n, structures with
                                 numbers masked), answer types; warnings (math only)
                     labelling   answer fragmentation, share of the pool in the band (whether
                                 or not the filter is on); warnings (math only)
                     eval        the increment curve against the previous iteration and the
                                 base, paired intervals (iter_KK/eval/increments.json); warnings
                     audit       pseudo-label accuracy warnings
                     coerror     co-error warnings
                     and, when a warning is named in `run.stop_on`, ``stop``

The co-error (`MathRun.coerror_phase`, seed §6.2) and the cross-iteration matrix
(`MathRun.crossplay_phase`) are phases of the loop measured with `rzero.selfplay.coerror`
and `rzero.selfplay.crossplay`.

Warnings are computed once, when their phase commits, with the thresholds of the `watch:`
section then in force; `watch.*` and `run.stop_on` are outside the config fingerprint, so
changing them neither refuses nor redoes a run.
"""

from __future__ import annotations

from typing import Any

from rzero.config import RZeroConfig
from rzero.io import write_json_atomic
from rzero.labeling.filtering import in_band
from rzero.rundir import RunDir
from rzero.selfplay.collapse import (
    answer_fragmentation,
    answer_types,
    collapse_warnings,
    label_concentration,
    question_diversity,
    stopping,
)
from rzero.selfplay.increments import align_eval_items, increment_curve
from rzero.stats import slope_interval

__all__ = ["after_phase"]


# ---------------------------------------------------------------- before each commit


def after_phase(
    cfg: RZeroConfig, run: RunDir, k: int, phase: str, info: dict[str, Any], *, math: bool = False
) -> dict[str, Any]:
    """`info` (the phase's marker-to-be) with the audit's numbers, ``warnings`` and, when
    one of them is named in `run.stop_on`, ``stop``. The pool's and the labelling's
    measures read math questions and their votes (`math`: R-Zero's math loop), so another
    system gets the challenger's, the evaluation's and the audit's, and the stop."""
    where = f"iteration {k} {phase}"
    if phase == "challenger":
        _challenger(cfg, k, info)
    elif phase == "pool" and math:
        _pool(cfg, run, k, info)
    elif phase == "labelling" and math:
        _labelling(cfg, run, k, info)
    elif phase == "eval":
        _eval(cfg, run, k, info)
    elif phase in ("audit", "coerror"):
        info["warnings"] = collapse_warnings(info.get("metrics", {}), cfg.watch, where=where)
    reasons = stopping(info.get("warnings", []), cfg.run.stop_on)
    if reasons:
        info["stop"] = {
            "iteration": k,
            "phase": phase,
            "stop_on": list(cfg.run.stop_on),
            "warnings": reasons,
        }
    return info


def _trend(xs: list[float], ys: list[float]) -> dict[str, Any] | None:
    """Least-squares slope with its 95 % interval (None below 2 distinct x)."""
    if len(set(xs)) < 2:
        return None
    return slope_interval(xs, ys).to_dict()


def _challenger(cfg: RZeroConfig, k: int, info: dict[str, Any]) -> None:
    steps = info.get("steps", [])
    warnings: list[str] = []
    for s in steps:
        warnings += collapse_warnings(
            s, cfg.watch, where=f"iteration {k} challenger step {s.get('step')}"
        )
    x = [float(s["step"]) for s in steps]
    trend = {
        key: _trend(x, [float(s[key]) for s in steps]) for key in ("mean_reward", "valid_rate")
    }
    info["trend"] = trend
    for key, name in (("mean_reward", "reward_slope"), ("valid_rate", "valid_rate_slope")):
        if trend[key] is not None:
            info["metrics"][name] = trend[key]["slope"]
    info["warnings"] = warnings


def _pool(cfg: RZeroConfig, run: RunDir, k: int, info: dict[str, Any]) -> None:
    rows = run.rows(k, "pool")
    c = cfg.challenger
    diversity = question_diversity(
        [r["question"] for r in rows], tau=c.tau, variant=c.bleu_variant, seed=cfg.run.seed + k
    )
    types = answer_types([r.get("challenger_answer") for r in rows])
    info["metrics"] |= {
        key: diversity[key]
        for key in (
            "cluster_ratio",
            "distinct_1",
            "distinct_2",
            "mean_bleu_distance",
            "structure_ratio",
            "bleu_sample",
        )
    } | {
        "questions": diversity["questions"],
        "answer_types": types["types"],
        "top_answer_type_share": types["top_share"],
    }
    info["answer_types"] = types
    info["warnings"] = collapse_warnings(info["metrics"], cfg.watch, where=f"iteration {k} pool")


def _labelling(cfg: RZeroConfig, run: RunDir, k: int, info: dict[str, Any]) -> None:
    rows = run.rows(k, "labelled")
    lab = cfg.labeling
    fragmentation = answer_fragmentation(rows)
    # the band is watched whether or not the filter is on (off, every question is "kept")
    band = (
        sum(in_band(r["p_hat"], lab.delta, low=lab.band_low, high=lab.band_high) for r in rows)
        / len(rows)
        if rows
        else 0.0
    )
    info["metrics"] |= {
        key: fragmentation[key]
        for key in ("mean_num_groups", "groups_per_vote", "mean_top2_margin")
    } | {"in_band_fraction": band}
    info["metrics"] |= label_concentration(rows)
    info["warnings"] = collapse_warnings(
        info["metrics"] | {"kept_fraction": band}, cfg.watch, where=f"iteration {k} labelling"
    )


def _eval(cfg: RZeroConfig, run: RunDir, k: int, info: dict[str, Any]) -> None:
    """The increment curve of iterations 0..k (each eval.json's per-item scores, paired by
    item id), written to iter_KK/eval/increments.json; the marker keeps iteration k's entry."""
    info["warnings"] = []
    if k < 1:
        return
    import json

    paths = [run.iter_dir(j) / "eval" / "eval.json" for j in range(k + 1)]
    if not all(p.is_file() for p in paths):
        info["increment_note"] = (
            "no increment curve: an earlier iteration (or the base, iteration 0) was not evaluated"
        )
        return
    aligned = align_eval_items([json.loads(p.read_text()) for p in paths])
    if not aligned:
        info["increment_note"] = "no increment curve: no benchmark item was scored every time"
        return
    curve = increment_curve(aligned, seed=cfg.run.seed)
    write_json_atomic(run.iter_dir(k) / "eval" / "increments.json", curve)
    entry = curve["iterations"][k]
    info["increment"] = entry
    info["increment_flags"] = entry["flags"]
    info["metrics"] |= entry["watch"] | {"increment_vs_base": entry["vs_base"]["average"]["delta"]}
    info["warnings"] = collapse_warnings(entry["watch"], cfg.watch, where=f"iteration {k} eval")
