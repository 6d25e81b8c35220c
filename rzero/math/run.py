"""R-Zero's alternating iterations, written as the paper's algorithm (SPEC §1).

    for k = 1..K:
        challenger phase   train Q with GRPO against the frozen solver S_{k-1}
        question pool      Q writes N questions; malformed and duplicate ones dropped
        labelling          S_{k-1} answers each m times; majority vote -> (label, p_hat);
                           keep |p_hat - 1/2| <= delta
        solver phase       train S with GRPO on the kept questions, reward = [answer == label]
        evaluation         score the new solver (the base model once, as iteration 0)
        audit (optional)   an external judge checks the pseudo-labels
        co-error (opt.)    both roles answer known items: do their errors coincide?
    cross-play (optional, at the end): every solver votes on every pool

Each phase is a short method calling its role's module; `rzero.rundir.PhaseRunner` runs it
in the run folder (markers, resume, timing): a committed phase is skipped, an interrupted
one redone. The self-play audit (`rzero.selfplay.watch`) adds its numbers and warnings to
each marker before it commits, the trackers and the report (`rzero.math.report.rebuild`)
follow each commit, and a warning named in `run.stop_on` ends the run cleanly
(`rzero.rundir.StopRun`, caught in `Run.run`). The co-error and cross-play phases are the
audit's measurements, run as phases of this loop.

Guided self-play (R-Few; a `guidance:` section naming anchors, `rzero.math.guidance`) changes
three steps and nothing else: the challenger's prompts (its GRPO phase and the pool) each show
k anchors; the labelling phase also measures the frozen solver's accuracy on every anchor (the
curriculum); the solver phase trains on a fixed mixture of the curriculum's anchors with their
true answers and the kept questions with their vote labels.

Departures from the paper, each deliberate:
- Shared weights (`roles.shared`, Single-R-Zero): the one model's challenger phase is
  rewarded by a frozen copy of itself at the start of the phase; labelling and the solver
  phase then use the weights the challenger phase produced, so both phases update one model.
- A pool with nothing in the band skips the solver phase with a recorded warning (the reference
  code crashes on the empty dataloader); the solver carries over unchanged.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from rzero import preflight
from rzero.audit import audit_run
from rzero.challenger.train import sample_pool, train_challenger
from rzero.config import RZeroConfig
from rzero.config.schedule import role_schedule
from rzero.evaluation import (
    evaluate,
    evaluation_phase,
    label_correct,
    load_benchmark,
    load_benchmarks,
)
from rzero.generation.backends import make_generator
from rzero.generation.solver_server import frozen_solver as serve_frozen
from rzero.io import write_json_atomic, write_jsonl_atomic
from rzero.labeling.computable import computed_answer
from rzero.labeling.voting import FrozenSolver
from rzero.math import guidance as guided
from rzero.math import report
from rzero.math.layout import LAYOUT
from rzero.prompts.solver import solver_chat
from rzero.rundir import Run, release_memory
from rzero.selfplay import watch
from rzero.selfplay.coerror import role_co_error
from rzero.selfplay.crossplay import cross_iteration_matrix
from rzero.solver.dataset import label_pool, p_hat_histogram
from rzero.solver.train import train_solver
from rzero.stats import mean


def computable_labels(rows: list[dict[str, Any]], direction: str) -> list[dict[str, Any]]:
    """The labelled pool with, on each question that is one arithmetic expression
    (`rzero.labeling.computable`), its exact answer and whether the vote label matches it:
    the labels' accuracy where it can be known without a judge."""
    out = []
    for r in rows:
        answer = computed_answer(r["question"])
        if answer is not None:
            r = {
                **r,
                "computed_answer": answer,
                "label_correct": label_correct(r["label"], answer, direction),
            }
        out.append(r)
    return out


def computable_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The computable questions' count and their labels' accuracy, over all labelled
    questions and over the kept ones (the solver's training set)."""
    known = [r for r in rows if r.get("label_correct") is not None]
    kept = [r for r in known if r["kept"]]
    return {
        "computable": len(known),
        "computable_label_accuracy": mean([float(r["label_correct"]) for r in known])
        if known
        else None,
        "kept_computable": len(kept),
        "kept_computable_label_accuracy": mean([float(r["label_correct"]) for r in kept])
        if kept
        else None,
    }


class MathRun(Run):
    """R-Zero's math loop on the run engine (`rzero.rundir.run.Run`)."""

    layout = LAYOUT

    def check_inputs(self) -> None:
        preflight.check(self.cfg)
        preflight.check_coerror(self.cfg)
        if self.cfg.guidance.enabled:  # a bad anchor set fails before any work
            self.anchors = guided.load_anchors(self.cfg.guidance, self.held_out())

    def grounded(self, n: int, seed: int) -> tuple[list | None, list[list[str]]]:
        """Guided self-play's n challenger prompts and their anchors' ids (None: R-Zero's
        one prompt)."""
        if not self.cfg.guidance.enabled:
            return None, []
        return guided.challenger_prompts(
            self.anchors, self.cfg.guidance, n, seed, self.cfg.challenger.prompt_file
        )

    def before_commit(self) -> list:
        return [partial(watch.after_phase, self.cfg, self.rundir, math=True)]

    def rebuild(self) -> None:
        report.rebuild(self.rundir, self.cfg)

    def held_out(self) -> list[str]:  # every evaluation item (not only eval.limit's)
        e = self.cfg.eval
        return (
            [i["problem"] for items in load_benchmarks(e.benchmarks).values() for i in items]
            if e.enabled
            else []
        )

    def frozen(self, generator) -> FrozenSolver:
        return FrozenSolver(
            generator, partial(solver_chat, path=self.cfg.solver.prompt_file), self.cfg.labeling
        )

    # ------------------------------------------------------------ the phases

    def challenger_phase(self, k: int, start: str, frozen_solver: str) -> dict:

        it = self.rundir.iter_dir(k)
        model, tokenizer = self.load(start)
        with ExitStack() as stack:
            # only the main process scores the challenger's steps, so only it holds S_{k-1}
            # (its server may run on every machine)
            solver = stack.enter_context(
                serve_frozen(self.cfg, self.rundir.resolve(frozen_solver), it)
            )
            frozen = None
            if solver is not None:
                frozen = self.frozen(self.phases.track(solver))
            draws = role_schedule(self.cfg.challenger, self.cfg.run.training_processes).prompts
            prompts, _ = self.grounded(draws, self.cfg.run.seed * 7919 + 100 * k)
            result = train_challenger(
                model,
                tokenizer,
                self.cfg,
                frozen,
                k,
                it / "challenger",
                it / "challenger_steps.jsonl",
                prompts=prompts,
            )
        self.timing.optimizer += result.stats.seconds_optimizer - result.reward_seconds
        return {
            "checkpoint": self.rundir.relative(it / "challenger"),
            "steps": result.steps,
            "start": self.rundir.relative(start),
            "metrics": result.metrics(),
            "updates": result.stats.log,
            "frozen_solver": self.rundir.relative(frozen_solver),
        }

    def pool_phase(self, k: int, challenger: str) -> dict:

        seed = self.cfg.run.seed * 7919 + k
        prompts, shown = self.grounded(self.cfg.challenger.pool_size, seed)
        pool, counts = sample_pool(
            self.generator(challenger), self.cfg, seed, held_out=self.held_out(), prompts=prompts
        )
        if prompts is not None:  # guided: each question's anchors; copies of an anchor dropped
            pool = [{**r, "anchor_ids": shown[r["prompt_index"]]} for r in pool]
            copies = guided.verbatim(
                [r["question"] for r in pool], [a["question"] for a in self.anchors]
            )
            pool = [r for r, c in zip(pool, copies, strict=True) if not c]
            counts["anchor_copies"] = sum(copies)
            counts["kept"] = len(pool)
        write_jsonl_atomic(self.rundir.iter_dir(k) / "pool.jsonl", pool)
        counts["valid_rate"] = (counts["sampled"] - counts["malformed"]) / max(1, counts["sampled"])
        return {"challenger": self.rundir.relative(challenger), "metrics": counts}

    def labelling_phase(self, k: int, solver: str) -> dict:

        questions = [r["question"] for r in self.rundir.rows(k, "pool")]
        frozen = self.frozen(self.generator(solver))  # one model for the pool and the anchors
        rows = label_pool(frozen, questions, seed=self.cfg.run.seed * 104729 + k)
        rows = computable_labels(rows, self.cfg.labeling.equivalence)
        write_jsonl_atomic(self.rundir.iter_dir(k) / "labelled.jsonl", rows)
        kept = sum(r["kept"] for r in rows)
        anchors = self.anchor_curriculum(k, frozen) if self.cfg.guidance.enabled else {}
        warning = anchors.pop("warning", None)
        return {
            "solver": self.rundir.relative(solver),
            "metrics": {
                "questions": len(rows),
                "kept": kept,
                "kept_fraction": kept / len(rows) if rows else 0.0,
                "mean_p_hat": mean([r["p_hat"] for r in rows]),
                "mean_parse_rate": mean([r["parse_rate"] for r in rows]),
                **computable_summary(rows),
                **anchors,
            },
            "p_hat_histogram": p_hat_histogram(rows, self.cfg.labeling.num_votes),
            **({"warning": warning} if warning else {}),
        }

    def anchor_curriculum(self, k: int, frozen: FrozenSolver) -> dict[str, Any]:
        """Guided self-play: the frozen solver S_{k-1} votes on every anchor; its accuracy on
        each decides the curriculum (`guidance.curriculum`); anchors.jsonl records both, and
        a curriculum with no anchor in range (every anchor kept) is a warning."""
        g = self.cfg.guidance
        rows = guided.anchor_accuracy(
            frozen,
            self.anchors,
            seed=self.cfg.run.seed * 104729 + 50_000 + k,
            direction=self.cfg.labeling.equivalence,
        )
        keep = guided.curriculum([r["accuracy"] for r in rows], g.curriculum_low, g.curriculum_high)
        rows = [{**r, "kept": flag} for r, flag in zip(rows, keep, strict=True)]
        write_jsonl_atomic(self.rundir.iter_dir(k) / "anchors.jsonl", rows)
        in_range = [g.curriculum_low <= r["accuracy"] <= g.curriculum_high for r in rows]
        warning = (
            None
            if any(in_range)
            else f"iteration {k}: no anchor's vote accuracy lies in the curriculum's "
            f"[{g.curriculum_low}, {g.curriculum_high}]; every anchor trains the solver, and "
            f"GRPO gets no signal from them (each group's rewards are equal)"
        )
        return {
            **({"warning": warning} if warning else {}),
            "anchors": len(rows),
            "anchors_kept": sum(keep),
            "anchor_accuracy": mean([r["accuracy"] for r in rows]),
            "anchor_vote_accuracy": mean([float(bool(r["vote_correct"])) for r in rows]),
        }

    def solver_phase(self, k: int, start: str) -> dict:

        kept = [r for r in self.rundir.rows(k, "labelled") if r["kept"]]
        mix: dict[str, Any] = {}
        if self.cfg.guidance.enabled:  # the mixture: curriculum anchors and kept questions
            anchors = [r for r in self.rundir.rows(k, "anchors") if r["kept"]]
            draws = role_schedule(self.cfg.solver, self.cfg.run.training_processes).prompts
            synthetic = len(kept)
            kept = guided.solver_mixture(
                anchors, kept, draws, self.cfg.guidance.anchor_share, self.cfg.run.seed * 31 + k
            )
            write_jsonl_atomic(self.rundir.iter_dir(k) / "mixture.jsonl", kept)
            mix = {
                "anchor_draws": sum(r["source"] == "anchor" for r in kept),
                "synthetic_draws": sum(r["source"] == "synthetic" for r in kept),
                "anchors_trained": len(anchors),
                "synthetic_trained": synthetic,
            }
        if not kept:
            return {
                "checkpoint": self.rundir.relative(start),
                "start": self.rundir.relative(start),
                "skipped": True,
                "warning": f"iteration {k}: no pooled question fell in the band; the "
                f"solver phase was skipped and the solver carried over",
                "metrics": {"train_questions": 0},
            }
        out = self.rundir.iter_dir(k) / "solver"
        stats = train_solver(*self.load(start), self.cfg, kept, k, out)
        self.timing.optimizer += stats.seconds_optimizer
        return {
            "checkpoint": self.rundir.relative(out),
            "start": self.rundir.relative(start),
            "updates": stats.log,
            "metrics": {
                "train_questions": len(kept),
                "mean_reward": mean([r["reward"] for r in stats.log]),
                **mix,
            },
        }

    def eval_phase(self, k: int, solver: str) -> dict:
        return evaluation_phase(
            self.generator(solver),
            self.cfg,
            self.rundir.iter_dir(k) / "eval",
            prompt_path=self.cfg.solver.prompt_file,
        ) | {"checkpoint": self.rundir.relative(solver)}

    def audit_phase(self, k: int) -> dict:

        report = audit_run(
            self.rundir,
            self.cfg.audit,
            model_spec=self.cfg.model.name,
            direction=self.cfg.labeling.equivalence,
        )
        return {
            "metrics": {
                key: v
                for key, v in report.get("summary", {}).items()
                if isinstance(v, (int, float))
            }
        }

    # ------------------------------------------------------------ the self-play audit's phases

    def _with_model(self, checkpoint: str, use: Callable[[Any], Any]) -> Any:
        """`use(generator)` for one checkpoint, then the generator is dropped and its memory
        returned, so these phases hold one model at a time (cross-play visits K + 1 of them);
        its generation time counts in the run's timing like any phase's."""

        gen = make_generator(self.cfg, checkpoint)
        try:
            return use(gen)
        finally:
            self.timing.generation += gen.stats.seconds
            gen.close()
            del gen
            release_memory()

    def _answers(self, checkpoint: str, name: str, items: list[dict]) -> dict[str, bool]:
        """Item id -> right or wrong, for one model answering greedily with the solver prompt."""
        cfg = self.cfg
        res = self._with_model(
            checkpoint,
            lambda gen: evaluate(
                gen,
                {name: items},
                max_new_tokens=cfg.eval.max_new_tokens,
                seed=cfg.run.seed,
                prompt_path=cfg.solver.prompt_file,
                direction=cfg.labeling.equivalence,
            ),
        )
        return {r["id"]: bool(r["correct"][0]) for r in res["items"]}

    def _from_eval(self, k: int, name: str, ids: list[str]) -> dict[str, bool] | None:
        """The solver's verdicts on `ids` from iteration k's eval.json when it scored all of them
        greedily with the same budget, so the co-error does not answer them twice."""
        path = self.rundir.iter_dir(k) / "eval" / "eval.json"
        if not path.is_file():
            return None
        res = json.loads(path.read_text())
        s = res.get("settings", {})
        if s.get("num_samples") != 1 or s.get("max_new_tokens") != self.cfg.eval.max_new_tokens:
            return None
        found = {
            r["id"]: bool(r["correct"][0])
            for r in res["items"]
            if r["benchmark"] == name and len(r["correct"]) == 1
        }
        return found if all(i in found for i in ids) else None

    def coerror_phase(self, k: int, challenger: str, solver: str) -> dict[str, Any]:
        """Role co-error of iteration k (seed §6.2): Q_k and S_k answer the first
        `watch.coerror_items` items of `watch.coerror_benchmark`; `role_co_error` overall and by
        item kind. The solver's answers come from this iteration's evaluation when it scored
        those items the same way."""
        w = self.cfg.watch
        name, items = load_benchmark(w.coerror_benchmark)
        items = items[: w.coerror_items]
        ids = [i["id"] for i in items]
        a = self._answers(challenger, name, items)
        b = self._from_eval(k, name, ids)
        reused = b is not None
        b = b if b is not None else self._answers(solver, name, items)
        kinds = [str(i.get("kind", name)) for i in items]
        result = role_co_error([a[i] for i in ids], [b[i] for i in ids], kinds)
        write_json_atomic(
            self.rundir.iter_dir(k) / "coerror.json",
            {
                **result,
                "benchmark": name,
                "items": [
                    {"id": i, "kind": kind, "challenger_correct": a[i], "solver_correct": b[i]}
                    for i, kind in zip(ids, kinds, strict=True)
                ],
            },
        )
        o = result["overall"]
        return {
            "benchmark": name,
            "challenger": self.rundir.relative(challenger),
            "solver": self.rundir.relative(solver),
            "solver_from_eval": reused,
            "coerror": {key: result[key] for key in ("overall", "by_kind", "flags")},
            "metrics": {
                "n": o["n"],
                "challenger_accuracy": o["challenger_accuracy"],
                "solver_accuracy": o["solver_accuracy"],
                "joint_error": o["joint_error"],
                "independent": o["independent"],
            }
            | result["watch"],
        }

    def crossplay_phase(self, k: int) -> dict[str, Any]:
        """The cross-iteration matrix at the end of the run: solvers S_0 (the base) .. S_K each
        vote (m samples, the labelling's settings) on `watch.crossplay_items` labelled questions
        sampled from every pool j; cell (i, j) is the share whose majority answer is equivalent
        to pool j's label."""
        cfg, rd = self.cfg, self.rundir
        solvers = {0: self.base} | {
            i: rd.resolve(m["checkpoint"])
            for i in range(1, k + 1)
            if (m := rd.marker(i, "solver")) is not None
        }
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
            _, votes = self._with_model(
                checkpoint,
                lambda gen, i=i: self.frozen(gen).vote(questions, cfg.run.seed * 7 + 1_000 * i),
            )
            labels = iter(v.label for v in votes)
            for j in pools:
                answers[(i, j)] = [next(labels) for _ in pools[j]]
        matrix = cross_iteration_matrix(
            answers, {j: [r["label"] for r in rows] for j, rows in pools.items()}
        )
        write_json_atomic(
            rd.iter_dir(k) / "crossplay.json",
            {
                "matrix": matrix,
                "solvers": {str(i): rd.relative(c) for i, c in solvers.items()},
                "pools": {
                    str(j): [
                        {
                            "question": r["question"],
                            "label": r["label"],
                            "answers": {str(i): answers[(i, j)][n] for i in solvers},
                        }
                        for n, r in enumerate(rows)
                    ]
                    for j, rows in pools.items()
                },
            },
        )
        cells = [c for row in matrix["agreement"] for c in row if c is not None and c["n"]]
        return {
            "crossplay": matrix,
            "metrics": {
                "cells": len(cells),
                "questions": len(questions),
                "mean_agreement": sum(c["rate"] for c in cells) / len(cells) if cells else 0.0,
            },
        }

    # ------------------------------------------------------------ the algorithm

    def iterate(self) -> None:
        cfg = self.cfg
        run_phase = self.phases.run
        challenger = solver = self.base
        if cfg.eval.enabled:
            run_phase(0, "eval", self.eval_phase, self.base)
        for k in range(1, cfg.run.iterations + 1):
            # -- challenger phase: train Q_k against the frozen solver
            if cfg.roles.train_challenger:
                start = solver if cfg.roles.shared else challenger
                challenger = run_phase(k, "challenger", self.challenger_phase, start, solver)[
                    "checkpoint"
                ]
            # -- question pool from the (trained) challenger
            run_phase(k, "pool", self.pool_phase, challenger)
            # -- labelling by the current solver (shared: the one model, as it is now)
            labeller = challenger if cfg.roles.shared and cfg.roles.train_challenger else solver
            run_phase(k, "labelling", self.labelling_phase, labeller)
            # -- solver phase on the kept questions
            solver = run_phase(k, "solver", self.solver_phase, labeller)["checkpoint"]
            if cfg.roles.shared:
                challenger = solver
            # -- evaluation, audit, the roles' co-error on known answers (shared: one model)
            if cfg.eval.enabled:
                run_phase(k, "eval", self.eval_phase, solver)
            if cfg.audit.enabled:
                run_phase(k, "audit", self.audit_phase)
            if cfg.watch.coerror and not cfg.roles.shared:
                run_phase(k, "coerror", self.coerror_phase, challenger, solver)
        # -- cross-play: every solver S_0..S_K votes on every pool
        if cfg.watch.crossplay:
            run_phase(cfg.run.iterations, "crossplay", self.crossplay_phase)


def run_iterations(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> MathRun:
    run = MathRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
