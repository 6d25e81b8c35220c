"""The solver task (`task: solver` in a recipe's `run:` section): GRPO for the solver alone
on fixed questions, on the run engine every system shares (run folder, markers and resume,
trackers, report, hub push).

    evaluation 0       the base solver S_0 once (iteration 0)
    for k = 1..K:
        labelling      the fixed questions' labels (`solver_task.labels`): their known
                       answers, S_{k−1}'s majority vote over m samples (R-Zero's solver
                       phase, TTRL), or the known answers shuffled across questions; every
                       label checked against the known answer where there is one
        solver         S_k = GRPO from S_{k−1} on the kept questions, reward [answer ≡ label]
                       (`SolverReward`, as R-Zero's solver phase); TRL's log of every update
                       and, every `solver_task.curve_every` updates, greedy pass@1 on the
                       development draw (`rzero.selfplay.curve`)
        evaluation     the benchmarks of `eval` (the held-out `easy`), paired with the base

With truth labels this is the positive control of every self-play system here: it shows
that the trainer moves the model on the user's machine at the recipe's budget. Shuffled
labels are the negative control, and vote labels are what R-Zero and TTRL train on.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

from rzero import preflight
from rzero.config import ConfigError, RZeroConfig
from rzero.engine.models import load_for_training
from rzero.evaluation import BenchmarkError, evaluation_phase, load_benchmark
from rzero.generation.backends import make_generator
from rzero.io import write_jsonl_atomic
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.solver import solver_chat
from rzero.rundir import Run
from rzero.selfplay import watch
from rzero.selfplay.collapse import HEADLINE_DIVERSITY, question_diversity
from rzero.selfplay.curve import DevCurve
from rzero.solver.dataset import label_pool
from rzero.solver_task.curve import FormatCount
from rzero.solver_task.layout import LAYOUT
from rzero.solver_task.questions import (
    LABEL_KINDS,
    fixed_labels,
    label_summary,
    load_questions,
    noisy_labels,
    training_rows,
    vote_labels,
)
from rzero.solver_task.report import rebuild
from rzero.stats import mean
from rzero.training.grpo import train_grpo


class SolverTaskRun(Run):
    """The solver task on the run engine (`rzero.rundir.run.Run`)."""

    layout = LAYOUT

    def check_inputs(self) -> None:
        preflight.check(self.cfg)  # outside inputs (benchmarks), before anything is written
        t = self.cfg.solver_task
        self.questions = load_questions(t.questions, t.count)  # a bad set fails first
        if t.labels in ("truth", "shuffled", "noisy") and any(
            q["answer"] is None for q in self.questions
        ):
            missing = sum(q["answer"] is None for q in self.questions)
            raise ConfigError(
                f"solver_task.labels={t.labels}: {missing} of {len(self.questions)} questions "
                f"have no answer; give answers, or use labels vote"
            )
        try:
            self.dev_name, dev = load_benchmark(t.dev)
        except (BenchmarkError, ValueError) as exc:
            raise ConfigError(f"solver_task.dev={t.dev!r}: {exc}") from None
        self.dev_items = dev[: t.dev_items]

    def before_commit(self) -> list:
        return [partial(watch.after_phase, self.cfg, self.rundir)]

    def rebuild(self) -> None:
        rebuild(self.rundir, self.cfg)

    # ------------------------------------------------------------ the phases

    def eval_phase(self, k: int, checkpoint: str) -> dict:
        return evaluation_phase(
            self.phases.generator(checkpoint),
            self.cfg,
            self.rundir.iter_dir(k) / "eval",
            prompt_path=self.cfg.solver.prompt_file,
        ) | {"checkpoint": self.rundir.relative(checkpoint)}

    def labelling_phase(self, k: int, solver: str) -> dict:
        cfg, t = self.cfg, self.cfg.solver_task
        direction = cfg.labeling.equivalence
        if t.labels == "vote":
            frozen = FrozenSolver(
                self.phases.generator(solver),
                lambda q: solver_chat(q, cfg.solver.prompt_file),
                cfg.labeling,
            )
            rows = vote_labels(
                frozen,
                self.questions,
                seed=cfg.run.seed * 104729 + k,
                band=t.band,
                direction=direction,
            )
        elif t.labels == "noisy" and k > 1:  # fixed labels: the first iteration's, again
            rows = self.rundir.rows(1, "labelled")
        elif t.labels == "noisy":
            # the wrong labels are the base solver's own wrong votes (S_0 votes at k = 1)
            frozen = FrozenSolver(
                self.phases.generator(solver),
                lambda q: solver_chat(q, cfg.solver.prompt_file),
                cfg.labeling,
            )
            voted = label_pool(
                frozen, [q["question"] for q in self.questions], cfg.run.seed * 104729 + k
            )
            rows = noisy_labels(
                self.questions,
                [v["groups"] for v in voted],
                t.label_accuracy,
                seed=cfg.run.seed,
                direction=direction,
            )
            rows = [
                {**r, "answers": v["answers"], "vote_label": v["label"], "p_hat": v["p_hat"]}
                for r, v in zip(rows, voted, strict=True)
            ]
        else:
            # the permutation is the seed's, the same in every iteration
            rows = fixed_labels(self.questions, t.labels, seed=cfg.run.seed, direction=direction)
        write_jsonl_atomic(self.rundir.iter_dir(k) / "labelled.jsonl", rows)
        # how varied the kept questions are, in the numbers the loop's pool is watched by:
        # the fixed pool of a claims grid is read beside the challenger's
        kept = [r["question"] for r in rows if r["kept"]]
        diversity = question_diversity(kept, seed=cfg.run.seed + k)
        return {
            "solver": self.rundir.relative(solver),
            "labels": t.labels,
            **(
                {
                    "label_kinds": {
                        kind: sum(r["label_kind"] == kind for r in rows) for kind in LABEL_KINDS
                    }
                }
                if t.labels == "noisy"
                else {}
            ),
            "metrics": label_summary(rows)
            | {f"kept_{key}": diversity[key] for key in HEADLINE_DIVERSITY},
        }

    def solver_phase(self, k: int, start: str) -> dict:
        cfg = self.cfg
        labelled = self.rundir.rows(k, "labelled")
        rows = training_rows(cfg, labelled)
        if not rows:
            return {
                "checkpoint": self.rundir.relative(start),
                "start": self.rundir.relative(start),
                "skipped": True,
                "warning": f"iteration {k}: no question has a label to train on; the "
                f"solver carried over",
                "metrics": {"train_questions": 0},
            }
        out = self.rundir.iter_dir(k) / "solver"
        work = out.with_name(".trainer_solver")
        model, tokenizer = load_for_training(start, cfg.model)
        reward = FormatCount(cfg.solver.reward, direction=cfg.labeling.equivalence)
        callbacks = []
        curve = None
        if cfg.solver_task.curve_every:
            curve = DevCurve(
                make_generator(cfg, start, model=model, tokenizer=tokenizer),
                self.dev_name,
                self.dev_items,
                cfg,
                every=cfg.solver_task.curve_every,
                prompt_path=cfg.solver.prompt_file,
            )
            callbacks.append(curve)
        stats = train_grpo(
            model,
            tokenizer,
            rows,
            [reward],
            cfg.solver,
            work,
            seed=cfg.run.seed + 1000 + k,
            model_cfg=cfg.model,
            generation_cfg=cfg.generation,
            report_to=cfg.run.report_to,
            save_steps=cfg.run.save_steps,
            desc=f"iter {k} solver",
            save_to=out,
            callbacks=callbacks,
        )
        shutil.rmtree(work, ignore_errors=True)
        updates = reward.merge(stats.log, cfg.solver.updates_per_step)
        points = curve.points if curve is not None else []
        last = updates[-max(1, len(updates) // 5) :]  # the last fifth of the updates
        metrics: dict[str, Any] = {
            "train_questions": len(rows),
            "updates": len(updates),
            "mean_reward": mean([u["reward"] for u in updates]),
            "final_reward": mean([u["reward"] for u in last]),
            "final_well_formed": mean([u["well_formed"] for u in last]),
            "final_frac_reward_zero_std": mean([u.get("frac_reward_zero_std", 0.0) for u in last]),
            # the time and updates of this process: a phase resumed from a step checkpoint
            # timed only the updates after it
            "train_seconds": stats.seconds_total,
            "timed_updates": stats.steps,
            "seconds_per_completion": stats.seconds_total
            / max(1, stats.steps * cfg.solver.update_prompts * cfg.solver.group_size),
        }
        if points:
            metrics |= {"dev_first": points[0]["dev_pass@1"], "dev_last": points[-1]["dev_pass@1"]}
        return {
            "checkpoint": self.rundir.relative(out),
            "start": self.rundir.relative(start),
            "updates": updates,
            "curve": points,
            "metrics": metrics,
        }

    # ------------------------------------------------------------ the iterations

    def iterate(self) -> None:
        cfg, run_phase = self.cfg, self.phases.run
        solver = self.base
        if cfg.eval.enabled:
            run_phase(0, "eval", self.eval_phase, self.base)
        for k in range(1, cfg.run.iterations + 1):
            run_phase(k, "labelling", self.labelling_phase, solver)
            solver = run_phase(k, "solver", self.solver_phase, solver)["checkpoint"]
            if cfg.eval.enabled:
                run_phase(k, "eval", self.eval_phase, solver)


def run_solver_task(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> SolverTaskRun:
    """`rzero iterate` for the solver task; returns the finished run."""
    run = SolverTaskRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
