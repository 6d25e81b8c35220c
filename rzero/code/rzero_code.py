"""R-Zero's loop on code deduction tasks, with every pseudo-label checked exactly (SPEC §8).

    for k = 1..K:
        challenger phase   train Q with GRPO against the frozen solver S_{k-1}: Q writes a
                           program and an input; S_{k-1} predicts f(input) m times; majority
                           vote -> (ỹ, p̂); reward r_unc(p̂) − λ·r_rep (rzero.code.rewards)
        question pool      Q writes N proposals; unparsable, refused and duplicate ones dropped
        labelling          S_{k-1} votes m times on each; keep |p̂ − ½| ≤ δ (the band)
        solver phase       train S with GRPO on the kept tasks, reward = [output == ỹ]
        evaluation         (optional) the math evaluation of the new solver
        audit (optional)   `rzero audit` with the executor as judge (audit.judge: executor)

The executor's output is the truth of every task. It enters no reward and no filter; it is
recorded beside each vote, so every challenger step and every labelled pool reports the exact
accuracy of its majority-vote labels with a 95 % Wilson interval, overall and by p̂ bucket
(`rzero.code.votes`). This is the measurement the seed asks of R-Zero: how often is ỹ right,
and does p̂ say when?

Departures from R-Zero's math loop, each deliberate:
- the format gate is "parses and runs": a proposal whose program the executor refuses or that
  fails on its input gets `challenger.invalid_reward` (a math question cannot be run);
- the challenger prompt is AZR's deduction proposer prompt with the identity triplet as its
  one reference, fixed across iterations as R-Zero's challenger prompt is;
- the solver phase logs, per GRPO step, the share of its completions that are *truly* right
  (`true_rate`), beside the pseudo-label reward it was trained on.
Shared weights (`roles.shared`) and the untrained challenger (`roles.train_challenger`) work
as in the math loop.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from tqdm.auto import tqdm

from rzero.audit import audit_run
from rzero.code.layout import RZERO_CODE
from rzero.code.rewards import (
    CodeChallengerReward,
    PseudoLabelReward,
    challenger_prompt,
    read_proposals,
    refusal_counts,
    task_text,
)
from rzero.code.run import CodeRun
from rzero.code.votes import CodeVoter, accuracy_fields, vote_row
from rzero.config import RZeroConfig
from rzero.executor.prompts import solver_messages
from rzero.executor.tasks import CodeTask
from rzero.generation.interface import SamplingParams
from rzero.generation.solver_server import frozen_solver as serve_frozen
from rzero.io import read_jsonl, write_jsonl_atomic
from rzero.solver.dataset import kept as in_band
from rzero.solver.dataset import p_hat_histogram
from rzero.stats import mean
from rzero.training.grpo import train_grpo
from rzero.training.steps import latest_checkpoint

POOL_CHUNK = 32  # proposals sampled per generate call
LABEL_CHUNK = 16  # tasks voted on per generate call


class RZeroCodeRun(CodeRun):
    layout = RZERO_CODE

    # ------------------------------------------------------------ the phases

    def challenger_phase(self, k: int, start: str, frozen_solver: str) -> dict:

        it = self.rundir.iter_dir(k)
        steps_log = it / "challenger_steps.jsonl"
        if latest_checkpoint(it / ".trainer_challenger") is None:
            steps_log.unlink(missing_ok=True)  # a redone phase starts its log afresh
        model, tokenizer = self.load(start)
        summaries: list[dict] = []
        with serve_frozen(self.cfg, self.rundir.resolve(frozen_solver), it) as solver:
            reward = CodeChallengerReward(
                CodeVoter(solver, self.cfg.labeling),
                self.cfg,
                steps_log,
                k,
                on_step=summaries.append,
            )
            work = it / ".trainer_challenger"
            stats = train_grpo(
                model,
                tokenizer,
                [{"prompt": challenger_prompt()}],
                [reward],
                self.cfg.challenger,
                work,
                seed=self.cfg.run.seed + k,
                model_cfg=self.cfg.model,
                generation_cfg=self.cfg.generation,
                report_to=self.cfg.run.report_to,
                save_steps=self.cfg.run.save_steps,
                desc=f"iter {k} challenger",
                save_to=it / "challenger",
            )
            shutil.rmtree(work, ignore_errors=True)
        rows = read_jsonl(steps_log)
        valid = [r for r in rows if r["valid"]]
        return {
            "checkpoint": self.rundir.relative(it / "challenger"),
            "steps": summaries,
            "updates": stats.log,
            "start": self.rundir.relative(start),
            "frozen_solver": self.rundir.relative(frozen_solver),
            "metrics": {
                "completions": len(rows),
                "valid_rate": len(valid) / max(1, len(rows)),
                "mean_reward": mean([r["reward"] for r in rows]),
                "mean_p_hat": mean([r["p_hat"] for r in valid]),
                **accuracy_fields(valid),
                "refusals": refusal_counts(rows),
            },
        }

    def pool_phase(self, k: int, challenger: str) -> dict:
        c = self.cfg.challenger
        seed = self.cfg.run.seed * 7919 + k
        params = SamplingParams(
            temperature=c.pool_temperature,
            top_p=c.pool_top_p,
            top_k=0,
            max_new_tokens=c.max_completion_length,
            seed=seed,
        )
        generator = self.generator(challenger)
        texts: list[str] = []
        for start in tqdm(range(0, c.pool_size, POOL_CHUNK), desc="pool", leave=False):
            n = min(POOL_CHUNK, c.pool_size - start)
            texts += generator.generate(
                [challenger_prompt()], n, replace(params, seed=seed + start)
            )[0]
        proposals = read_proposals(texts, self.sandbox)
        seen: set[tuple[str, str]] = set()
        pool, duplicates = [], 0
        for p in proposals:
            if p.task is None:
                continue
            if (p.task.program, p.task.input) in seen:
                duplicates += 1
                continue
            seen.add((p.task.program, p.task.input))
            pool.append({"question": task_text(p.task), "task": p.task.to_json()})
        write_jsonl_atomic(self.rundir.iter_dir(k) / "pool.jsonl", pool)
        refused = [{"valid": False, "reason": p.reason} for p in proposals if p.task is None]
        return {
            "challenger": self.rundir.relative(challenger),
            "metrics": {
                "sampled": len(texts),
                "invalid": len(refused),
                "duplicates": duplicates,
                "kept": len(pool),
                "valid_rate": (len(texts) - len(refused)) / max(1, len(texts)),
                "refusals": refusal_counts(refused),
            },
        }

    def labelling_phase(self, k: int, solver: str) -> dict:
        pool = self.rundir.rows(k, "pool")
        voter = CodeVoter(self.generator(solver), self.cfg.labeling)
        rows = []
        for start in tqdm(range(0, len(pool), LABEL_CHUNK), desc="labelling", leave=False):
            part = pool[start : start + LABEL_CHUNK]
            tasks = [CodeTask.from_json(r["task"]) for r in part]
            answers, votes = voter.vote(tasks, self.cfg.run.seed * 104729 + k * 1000 + start)
            for r, t, a, v in zip(part, tasks, answers, votes, strict=True):
                rows.append({**r, **vote_row(t, a, v), "kept": in_band(v, self.cfg.labeling)})
        write_jsonl_atomic(self.rundir.iter_dir(k) / "labelled.jsonl", rows)
        kept = [r for r in rows if r["kept"]]
        return {
            "solver": self.rundir.relative(solver),
            "metrics": {
                "questions": len(rows),
                "kept": len(kept),
                "kept_fraction": len(kept) / len(rows) if rows else 0.0,
                "mean_p_hat": mean([r["p_hat"] for r in rows]),
                "mean_parse_rate": mean([r["parse_rate"] for r in rows]),
                **accuracy_fields(rows),
                "kept_accuracy": accuracy_fields(kept),
            },
            "p_hat_histogram": p_hat_histogram(rows, self.cfg.labeling.num_votes),
        }

    def solver_phase(self, k: int, start: str) -> dict:
        kept = [r for r in self.rundir.rows(k, "labelled") if r["kept"]]
        if not kept:
            return self.skipped_solver(k, start, "no pooled task fell in the band")
        out = self.rundir.iter_dir(k) / "solver"
        rows = [
            {
                "prompt": solver_messages(CodeTask.from_json(r["task"])),
                "label": r["label"],
                "task": r["task"],
            }
            for r in kept
        ]
        reward = PseudoLabelReward()
        work = out.with_name(".trainer_solver")
        stats = train_grpo(
            *self.load(start),
            rows,
            [reward],
            self.cfg.solver,
            work,
            seed=self.cfg.run.seed + 1000 + k,
            model_cfg=self.cfg.model,
            generation_cfg=self.cfg.generation,
            save_steps=self.cfg.run.save_steps,
            report_to=self.cfg.run.report_to,
            desc=f"iter {k} solver",
            save_to=out,
        )
        shutil.rmtree(work, ignore_errors=True)
        return {
            "checkpoint": self.rundir.relative(out),
            "start": self.rundir.relative(start),
            "train_steps": reward.steps,
            "updates": stats.log,
            "metrics": {
                "train_tasks": len(kept),
                "mean_reward": mean([s["mean_reward"] for s in reward.steps]),
                "true_rate": mean([s["true_rate"] for s in reward.steps]),
            },
        }

    def audit_phase(self, k: int) -> dict:

        report = audit_run(self.rundir, self.cfg.audit)
        return {
            "metrics": {
                key: v
                for key, v in report.get("summary", {}).items()
                if isinstance(v, (int, float))
            }
        }

    # ------------------------------------------------------------ the algorithm

    def iterate(self) -> None:
        cfg = self.cfg
        challenger = solver = self.base
        if cfg.eval.enabled:
            self.run_phase(0, "eval", self.eval_phase, self.base)
        for k in range(1, cfg.run.iterations + 1):
            # -- challenger phase: train Q_k against the frozen solver
            if cfg.roles.train_challenger:
                start = solver if cfg.roles.shared else challenger
                challenger = self.run_phase(k, "challenger", self.challenger_phase, start, solver)[
                    "checkpoint"
                ]
            # -- proposals from the (trained) challenger, run by the executor
            self.run_phase(k, "pool", self.pool_phase, challenger)
            # -- majority-vote labels by the current solver, checked against the executor
            labeller = challenger if cfg.roles.shared and cfg.roles.train_challenger else solver
            self.run_phase(k, "labelling", self.labelling_phase, labeller)
            # -- solver phase on the kept tasks and their pseudo-labels
            solver = self.run_phase(k, "solver", self.solver_phase, labeller)["checkpoint"]
            if cfg.roles.shared:
                challenger = solver
            if cfg.eval.enabled:
                self.run_phase(k, "eval", self.eval_phase, solver)
            if cfg.audit.enabled:
                self.run_phase(k, "audit", self.audit_phase)


def run_rzero_code(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> RZeroCodeRun:
    run = RZeroCodeRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
