"""The self-play audit in a run (SPEC §9, seed §6.1–6.2): what each phase adds to its marker
before it commits, the two phases the audit runs itself, and the stop.

    after_phase      called by the loop with each phase's marker before it commits:
                     challenger  per-step warnings; slope of reward and well-formed rate over
                                 the steps (SPEC §7: both should rise), with 95 % intervals
                     pool        question diversity (BLEU clusters, distinct-n, structures with
                                 numbers masked), answer types; warnings
                     labelling   answer fragmentation, share of the pool in the band (whether
                                 or not the filter is on); warnings
                     eval        the increment curve against the previous iteration and the
                                 base, paired intervals (iter_KK/eval/increments.json); warnings
                     audit       pseudo-label accuracy warnings
                     coerror     co-error warnings
                     and, when a warning is named in `run.stop_on`, ``stop``
    coerror_phase    the challenger model and the solver model answer the same calibration
                     items with known answers (greedy, the solver's prompt): seed §6.2's
                     co-error (iter_KK/coerror.json)
    crossplay_phase  at the end: every solver S_0..S_K votes on a sample of every pool's
                     labelled questions; agreement with the pool's label (crossplay.json)
    check_stop, stops_cleanly   a committed marker whose warnings `run.stop_on` names ends
                     the run after that phase; a rerun fires the same stop from the stored
                     marker (with the current `run.stop_on`, so emptying it lets a run go on)

Warnings are computed once, when their phase commits, with the thresholds of the `watch:`
section then in force; `watch.*` and `run.stop_on` are outside the config fingerprint, so
changing them neither refuses nor redoes a run.
"""

from __future__ import annotations

import functools
import random
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rzero.config import ConfigError, RunConfig, RZeroConfig
from rzero.engine import trackers
from rzero.io import write_json_atomic
from rzero.labeling.filtering import in_band
from rzero.rundir import RunDir, release_memory
from rzero.selfplay.coerror import role_co_error
from rzero.selfplay.collapse import (
    answer_fragmentation,
    answer_types,
    collapse_warnings,
    label_concentration,
    question_diversity,
    stopping,
)
from rzero.selfplay.crossplay import cross_iteration_matrix
from rzero.selfplay.increments import align_eval_items, increment_curve
from rzero.stats import slope_interval

if TYPE_CHECKING:
    from rzero.loop import RZeroRun

__all__ = ["StopRun", "after_phase", "check_stop", "coerror_phase", "crossplay_phase",
           "preflight", "stop_of", "stops_cleanly"]


def preflight(cfg: RZeroConfig) -> None:
    """Before anything is written: the trackers of `run.report_to` are installed (and become
    TRL's, `rzero.engine.trackers.use`), and the co-error's calibration set loads."""
    trackers.check_installed(cfg.run.report_to)
    trackers.use(cfg.run.report_to)
    if cfg.watch.coerror and not cfg.roles.shared:
        from rzero.evaluation import BenchmarkError, load_benchmark

        try:
            load_benchmark(cfg.watch.coerror_benchmark)
        except BenchmarkError as exc:
            raise ConfigError(f"watch.coerror_benchmark={cfg.watch.coerror_benchmark!r}: "
                              f"{exc}") from None


# ---------------------------------------------------------------- before each commit


def after_phase(cfg: RZeroConfig, run: RunDir, k: int, phase: str,
                info: dict[str, Any]) -> dict[str, Any]:
    """`info` (the phase's marker-to-be) with the audit's numbers, ``warnings`` and, when
    one of them is named in `run.stop_on`, ``stop``."""
    where = f"iteration {k} {phase}"
    if phase == "challenger":
        _challenger(cfg, k, info)
    elif phase == "pool":
        _pool(cfg, run, k, info)
    elif phase == "labelling":
        _labelling(cfg, run, k, info)
    elif phase == "eval":
        _eval(cfg, run, k, info)
    elif phase in ("audit", "coerror"):
        info["warnings"] = collapse_warnings(info.get("metrics", {}), cfg.watch, where=where)
    reasons = stopping(info.get("warnings", []), cfg.run.stop_on)
    if reasons:
        info["stop"] = {"iteration": k, "phase": phase, "stop_on": list(cfg.run.stop_on),
                        "warnings": reasons}
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
        warnings += collapse_warnings(s, cfg.watch, where=f"iteration {k} challenger step "
                                                          f"{s.get('step')}")
    x = [float(s["step"]) for s in steps]
    trend = {key: _trend(x, [float(s[key]) for s in steps])
             for key in ("mean_reward", "valid_rate")}
    info["trend"] = trend
    for key, name in (("mean_reward", "reward_slope"), ("valid_rate", "valid_rate_slope")):
        if trend[key] is not None:
            info["metrics"][name] = trend[key]["slope"]
    info["warnings"] = warnings


def _pool(cfg: RZeroConfig, run: RunDir, k: int, info: dict[str, Any]) -> None:
    rows = run.rows(k, "pool")
    c = cfg.challenger
    diversity = question_diversity([r["question"] for r in rows], tau=c.tau,
                                   variant=c.bleu_variant, seed=cfg.run.seed + k)
    types = answer_types([r.get("challenger_answer") for r in rows])
    info["metrics"] |= {key: diversity[key] for key in (
        "cluster_ratio", "distinct_1", "distinct_2", "mean_bleu_distance", "structure_ratio",
        "bleu_sample")} | {"questions": diversity["questions"], "answer_types": types["types"],
                           "top_answer_type_share": types["top_share"]}
    info["answer_types"] = types
    info["warnings"] = collapse_warnings(info["metrics"], cfg.watch, where=f"iteration {k} pool")


def _labelling(cfg: RZeroConfig, run: RunDir, k: int, info: dict[str, Any]) -> None:
    rows = run.rows(k, "labelled")
    lab = cfg.labeling
    fragmentation = answer_fragmentation(rows)
    # the band is watched whether or not the filter is on (off, every question is "kept")
    band = sum(in_band(r["p_hat"], lab.delta, low=lab.band_low, high=lab.band_high)
               for r in rows) / len(rows) if rows else 0.0
    info["metrics"] |= {key: fragmentation[key] for key in (
        "mean_num_groups", "groups_per_vote", "mean_top2_margin")} | {"in_band_fraction": band}
    info["metrics"] |= label_concentration(rows)
    info["warnings"] = collapse_warnings(info["metrics"] | {"kept_fraction": band}, cfg.watch,
                                         where=f"iteration {k} labelling")


def _eval(cfg: RZeroConfig, run: RunDir, k: int, info: dict[str, Any]) -> None:
    """The increment curve of iterations 0..k (each eval.json's per-item scores, paired by
    item id), written to iter_KK/eval/increments.json; the marker keeps iteration k's entry."""
    info["warnings"] = []
    if k < 1:
        return
    import json

    paths = [run.iter_dir(j) / "eval" / "eval.json" for j in range(k + 1)]
    if not all(p.is_file() for p in paths):
        info["increment_note"] = ("no increment curve: an earlier iteration (or the base, "
                                  "iteration 0) was not evaluated")
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


# ---------------------------------------------------------------- the stop


class StopRun(Exception):
    """A committed phase recorded a warning that `run.stop_on` names."""


def stop_of(marker: dict[str, Any], run: RunConfig) -> list[str]:
    """The warnings of a committed marker that `run.stop_on` names now."""
    return stopping(marker.get("warnings", []), run.stop_on)


def check_stop(marker: dict[str, Any], run: RunConfig) -> None:
    """Raise `StopRun` after a phase whose warnings `run.stop_on` names."""
    reasons = stop_of(marker, run)
    if reasons:
        raise StopRun(f"after iteration {marker.get('iteration')} {marker.get('phase')}, "
                      f"because run.stop_on lists {reasons[0].split(':')[0]}: {reasons[0]}")


def stops_cleanly(method: Callable[[RZeroRun], Any]) -> Callable[[RZeroRun], Any]:
    """`RZeroRun.run` that ends at a `StopRun` as at the end of the last iteration: what was
    committed stays, the trackers are closed, and the run directory is returned."""
    @functools.wraps(method)
    def run(self: RZeroRun):
        try:
            return method(self)
        except StopRun as stop:
            print(f"run stopped {stop}", file=sys.stderr, flush=True)
            self.rundir.close()
            return self.rundir.path
    return run


# ---------------------------------------------------------------- the audit's own phases


def _with_model(run: RZeroRun, checkpoint: str, use: Callable[[Any], Any]) -> Any:
    """`use(generator)` for one checkpoint, then the generator is dropped and its memory
    returned, so these phases hold one model at a time (cross-play visits K + 1 of them);
    its generation time counts in the run's timing like any phase's."""
    from rzero.engine.generation import make_generator

    gen = make_generator(run.cfg, checkpoint)
    try:
        return use(gen)
    finally:
        run.timing.generation += gen.stats.seconds
        gen.close()
        del gen
        release_memory()


def _answers(run: RZeroRun, checkpoint: str, name: str, items: list[dict]) -> dict[str, bool]:
    """Item id -> right or wrong, for one model answering greedily with the solver prompt."""
    from rzero.evaluation import evaluate

    cfg = run.cfg
    res = _with_model(run, checkpoint, lambda gen: evaluate(
        gen, {name: items}, max_new_tokens=cfg.eval.max_new_tokens, seed=cfg.run.seed,
        prompt_path=cfg.solver.prompt_file, direction=cfg.labeling.equivalence))
    return {r["id"]: bool(r["correct"][0]) for r in res["items"]}


def _from_eval(run: RZeroRun, k: int, name: str, ids: list[str]) -> dict[str, bool] | None:
    """The solver's verdicts on `ids` from iteration k's eval.json when it scored all of them
    greedily with the same budget, so the co-error does not answer them twice."""
    import json

    path = run.rundir.iter_dir(k) / "eval" / "eval.json"
    if not path.is_file():
        return None
    res = json.loads(path.read_text())
    s = res.get("settings", {})
    if s.get("num_samples") != 1 or s.get("max_new_tokens") != run.cfg.eval.max_new_tokens:
        return None
    found = {r["id"]: bool(r["correct"][0]) for r in res["items"]
             if r["benchmark"] == name and len(r["correct"]) == 1}
    return found if all(i in found for i in ids) else None


def coerror_phase(run: RZeroRun, k: int, challenger: str, solver: str) -> dict[str, Any]:
    """Role co-error of iteration k (seed §6.2): Q_k and S_k answer the first
    `watch.coerror_items` items of `watch.coerror_benchmark`; `role_co_error` overall and by
    item kind. The solver's answers come from this iteration's evaluation when it scored
    those items the same way."""
    from rzero.evaluation import load_benchmark

    w = run.cfg.watch
    name, items = load_benchmark(w.coerror_benchmark)
    items = items[:w.coerror_items]
    ids = [i["id"] for i in items]
    a = _answers(run, challenger, name, items)
    b = _from_eval(run, k, name, ids)
    reused = b is not None
    b = b if b is not None else _answers(run, solver, name, items)
    kinds = [str(i.get("kind", name)) for i in items]
    result = role_co_error([a[i] for i in ids], [b[i] for i in ids], kinds)
    write_json_atomic(run.rundir.iter_dir(k) / "coerror.json",
                      {**result, "benchmark": name, "items": [
                          {"id": i, "kind": kind, "challenger_correct": a[i],
                           "solver_correct": b[i]} for i, kind in zip(ids, kinds, strict=True)]})
    o = result["overall"]
    return {"benchmark": name, "challenger": run.rundir.relative(challenger),
            "solver": run.rundir.relative(solver), "solver_from_eval": reused,
            "coerror": {key: result[key] for key in ("overall", "by_kind", "flags")},
            "metrics": {"n": o["n"], "challenger_accuracy": o["challenger_accuracy"],
                        "solver_accuracy": o["solver_accuracy"], "joint_error": o["joint_error"],
                        "independent": o["independent"]} | result["watch"]}


def crossplay_phase(run: RZeroRun, k: int) -> dict[str, Any]:
    """The cross-iteration matrix at the end of the run: solvers S_0 (the base) .. S_K each
    vote (m samples, the labelling's settings) on `watch.crossplay_items` labelled questions
    sampled from every pool j; cell (i, j) is the share whose majority answer is equivalent
    to pool j's label."""
    cfg, rd = run.cfg, run.rundir
    solvers = {0: run.base} | {i: rd.resolve(m["checkpoint"]) for i in range(1, k + 1)
                              if (m := rd.marker(i, "solver")) is not None}
    pools: dict[int, list[dict[str, Any]]] = {}
    for j in range(1, k + 1):
        if rd.marker(j, "labelling") is None:
            continue
        labelled = [r for r in rd.rows(j, "labelled") if r["label"] is not None]
        rng = random.Random(f"{cfg.run.seed}:crossplay:{j}")
        pools[j] = rng.sample(labelled, min(cfg.watch.crossplay_items, len(labelled)))
    questions = [r["question"] for j in pools for r in pools[j]]
    answers: dict[tuple[int, int], list[str | None]] = {}
    for i, checkpoint in solvers.items():
        _, votes = _with_model(run, checkpoint, lambda gen, i=i: run.frozen(gen).vote(
            questions, cfg.run.seed * 7 + 1_000 * i))
        labels = iter(v.label for v in votes)
        for j in pools:
            answers[(i, j)] = [next(labels) for _ in pools[j]]
    matrix = cross_iteration_matrix(answers, {j: [r["label"] for r in rows]
                                              for j, rows in pools.items()})
    write_json_atomic(rd.iter_dir(k) / "crossplay.json", {
        "matrix": matrix, "solvers": {str(i): rd.relative(c) for i, c in solvers.items()},
        "pools": {str(j): [{"question": r["question"], "label": r["label"],
                            "answers": {str(i): answers[(i, j)][n] for i in solvers}}
                           for n, r in enumerate(rows)] for j, rows in pools.items()}})
    cells = [c for row in matrix["agreement"] for c in row if c is not None and c["n"]]
    return {"crossplay": matrix, "metrics": {
        "cells": len(cells), "questions": len(questions),
        "mean_agreement": sum(c["rate"] for c in cells) / len(cells) if cells else 0.0}}
