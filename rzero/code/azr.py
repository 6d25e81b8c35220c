"""Absolute Zero's loop (Zhao et al. 2025; seed 003): one model proposes and solves code tasks.

    for k = 1..K:
        proposer phase   GRPO on proposer prompts of every task type (code.task_types):
                         deduction/abduction prompts show K buffer triplets, induction prompts
                         one buffer program; a valid proposal (parsed, run twice by the
                         executor with equal outputs) gets the learnability 1 − r̄ of the
                         frozen solver's r̄ over code.solver_samples tries (0 at r̄ ∈ {0, 1}),
                         an invalid one AZR's format penalty; valid ones join the buffer
        pool             the solver's tasks per type: this iteration's valid proposals, topped
                         up uniformly from the buffer (seeded with the identity triplet)
        solver phase     GRPO on those tasks; reward = the executor's verdict (deduction:
                         equal output; abduction: the program maps the answer to the output;
                         induction: the answer program passes the held-out pairs)
        evaluation       (optional) the math evaluation of the new solver

Rewards, validity and judging are `rzero.executor`'s (`ExecutorProposerReward`, `ExecutorSolverReward`); this
module logs them per task type and runs them through `rzero.training.grpo.train_grpo`.

Departures from AZR, each deliberate:
- Optimiser. AZR updates both roles jointly every step with Task-Relative REINFORCE++
  (TRR++): six baselines, one per (task type, role), each the mean reward of that pair in
  the batch, advantages normalised per pair. Here each role has its own GRPO phase through
  the same TRL wrapper as R-Zero (rzero.training.grpo): the advantage is normalised within the G
  completions of one prompt, and every prompt is of one task type, so the baseline is per
  prompt, finer than TRR++'s per type, and no advantage ever mixes task types or roles. The
  wrapper's KL term (`beta`) and PPO clip apply.
- r̄ comes from fresh samples of a frozen copy of the solver at the start of the proposer
  phase (`ExecutorProposerReward`), not from the solver rollouts of the same step.
- The proposer prompts (and their buffer references) are drawn at the start of the phase;
  proposals that become valid during it serve the pool and later phases.
- Solver tasks are the latest `code.tasks_per_type` valid proposals of the iteration per type,
  topped up from the buffer (AZR: the step's proposals, topped up the same way).
- `roles.shared: false` trains a separate proposer and solver (AZR has one model).
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rzero.code.layout import AZR
from rzero.code.rewards import refusal_counts
from rzero.code.run import CodeRun
from rzero.config import LabelingConfig, RZeroConfig
from rzero.executor.buffer import TaskBuffer
from rzero.executor.prompts import Messages, proposer_messages, solver_messages
from rzero.executor.rewards import ExecutorProposerReward, ExecutorSolverReward
from rzero.executor.tasks import CodeTask
from rzero.generation.interface import Generator
from rzero.generation.solver_server import frozen_solver as serve_frozen
from rzero.io import append_jsonl, read_jsonl, write_jsonl_atomic
from rzero.labeling.voting import vote_params
from rzero.prompts.chat import completion_text
from rzero.stats import mean, wilson_interval
from rzero.training.grpo import train_grpo
from rzero.training.steps import StepState, latest_checkpoint


class GeneratorSampler:
    """`SolverSampler` for the proposer's r̄: the frozen solver's samples, drawn as the
    labelling votes are (labeling.temperature, top_k, max_new_tokens), a new seed per call."""

    def __init__(self, generator: Generator, labeling: LabelingConfig, seed: int):
        self.generator = generator
        self.labeling = labeling
        self.seed = seed
        self.calls = 0

    def __call__(self, prompts: list[Messages], num_samples: int) -> list[list[str]]:
        self.calls += 1
        return self.generator.generate(
            prompts, num_samples, vote_params(self.labeling, self.seed + self.calls)
        )


def rate_fields(prefix: str, k: int, n: int) -> dict[str, float | int]:
    """k of n as `prefix`_rate with its 95 % Wilson interval (for valid and solve rates)."""
    lo, hi = wilson_interval(k, n)
    return {f"{prefix}_rate": k / n if n else 0.0, f"{prefix}_ci_low": lo, f"{prefix}_ci_high": hi}


def proposer_by_type(rows: Sequence[dict[str, Any]], kinds: Sequence[str]) -> dict[str, Any]:
    """Per task type: proposals, valid ones (rate and interval), mean r̄ of the valid ones
    (None without any) and mean proposer reward, as flat ``{kind}/{name}`` keys."""
    out: dict[str, Any] = {}
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind]
        valid = [r for r in mine if r["valid"]]
        out |= {
            f"{kind}/proposals": len(mine),
            f"{kind}/valid": len(valid),
            **{
                f"{kind}/{key}": v for key, v in rate_fields("valid", len(valid), len(mine)).items()
            },
            f"{kind}/mean_r_bar": (mean([r["r_bar"] for r in valid]) if valid else None),
            f"{kind}/mean_reward": mean([r["reward"] for r in mine]),
        }
    return out


class ProposerLog(StepState):
    """TRL reward of the proposer phase: `ExecutorProposerReward`, with one row per completion
    appended to `log_path` (kind, valid, reason, r̄, reward, task) and a per-type summary of
    each step passed to `on_step`."""

    __name__ = "azr_proposer"
    checkpointed = ("step", "summaries")

    def __init__(
        self,
        reward: ExecutorProposerReward,
        log_path: Path,
        iteration: int,
        steps: int,
        kinds: Sequence[str],
        on_step: Callable[[dict[str, Any]], None],
    ):
        self.reward = reward
        self.log_path = log_path
        self.iteration = iteration
        self.steps = steps
        self.kinds = list(kinds)
        self.on_step = on_step
        self.step = 0
        self.summaries: list[dict[str, Any]] = []

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "sampler_calls": self.reward.sample_solver.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Also the solver sampler's seed counter, and the task buffer as it was at the
        checkpoint: as it stood before the phase plus the valid proposals the step log
        keeps (cut back to the checkpoint), in their order."""
        super().load_state_dict(state)
        self.reward.sample_solver.calls = state["sampler_calls"]
        if self.reward.buffer is not None and self.log_path.exists():
            self.reward.buffer.add_all(
                CodeTask.from_json(r["task"]) for r in read_jsonl(self.log_path) if r["valid"]
            )

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        rewards = self.reward(prompts, completions, **columns)
        self.step += 1
        rows = [
            dict(
                iteration=self.iteration,
                step=self.step,
                global_step=(self.iteration - 1) * self.steps + self.step,
                completion=completion_text(c)[:4000],
                **record,
            )
            for c, record in zip(completions, self.reward.records, strict=True)
        ]
        append_jsonl(self.log_path, rows)
        self.summaries.append(
            {
                "step": self.step,
                "completions": len(rows),
                "valid_rate": sum(r["valid"] for r in rows) / len(rows),
                "mean_reward": mean([r["reward"] for r in rows]),
                **proposer_by_type(
                    rows, [k for k in self.kinds if any(r["kind"] == k for r in rows)]
                ),
            }
        )
        self.on_step(self.summaries[-1])
        return rewards


class SolverLog(StepState):
    """TRL reward of the solver phase: `ExecutorSolverReward` (the executor's verdict), with the solve
    rate of each step per task type kept in `steps` and counted in `counts`."""

    __name__ = "azr_solver"
    checkpointed = ("steps", "counts")

    def __init__(self, reward: ExecutorSolverReward):
        self.reward = reward
        self.steps: list[dict[str, Any]] = []
        self.counts: dict[str, list[int]] = {}  # kind -> [rollouts, solved]

    def __call__(
        self, prompts: list, completions: list, task: Sequence[str], **kwargs: Any
    ) -> list[float | None]:
        rewards = self.reward(prompts, completions, task=task, **kwargs)
        kinds = [json.loads(t)["kind"] for t in task]
        row: dict[str, Any] = {
            "step": len(self.steps) + 1,
            "completions": len(rewards),
            "mean_reward": mean([r or 0.0 for r in rewards]),
        }
        for kind in dict.fromkeys(kinds):
            solved = [r == 1.0 for r, k in zip(rewards, kinds, strict=True) if k == kind]
            count = self.counts.setdefault(kind, [0, 0])
            count[0] += len(solved)
            count[1] += sum(solved)
            row[f"{kind}/solve_rate"] = sum(solved) / len(solved)
        self.steps.append(row)
        return rewards


def proposer_rows(
    buffer: TaskBuffer, cfg: RZeroConfig, n: int, rng: random.Random
) -> list[dict[str, Any]]:
    """`n` proposer prompts, the task types in turn; references drawn from `buffer`."""
    kinds = cfg.code.task_types
    rows = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        if kind == "induction":
            program = buffer.sample_program(rng)
            prompt = proposer_messages(kind, program=program, num_inputs=cfg.code.induction_inputs)
        else:
            program = ""
            prompt = proposer_messages(kind, buffer.sample_references(cfg.code.references, rng))
        rows.append({"prompt": prompt, "kind": kind, "program": program})
    return rows


class AZRRun(CodeRun):
    layout = AZR

    def buffer_before(self, k: int) -> TaskBuffer:
        """The buffer as iteration k starts: the identity triplet, then every valid proposal
        of iterations 1..k-1 in order (rebuilt from their step logs, so resume needs no
        other file)."""
        buffer = TaskBuffer()
        for j in range(1, k):
            buffer.add_all(
                CodeTask.from_json(r["task"])
                for r in self.rundir.rows(j, "challenger_steps")
                if r["valid"]
            )
        return buffer

    # ------------------------------------------------------------ the phases

    def challenger_phase(self, k: int, start: str, frozen_solver: str) -> dict:

        cfg, it = self.cfg, self.rundir.iter_dir(k)
        steps_log = it / "challenger_steps.jsonl"
        if latest_checkpoint(it / ".trainer_challenger") is None:
            steps_log.unlink(missing_ok=True)  # a redone phase starts its log afresh
        it.mkdir(parents=True, exist_ok=True)
        buffer = self.buffer_before(k)
        rows = proposer_rows(
            buffer,
            cfg,
            cfg.challenger.steps * cfg.challenger.prompts_per_step,
            random.Random(cfg.run.seed * 31 + k),
        )
        summaries: list[dict[str, Any]] = []
        model, tokenizer = self.load(start)
        with serve_frozen(cfg, self.rundir.resolve(frozen_solver), it) as solver:
            sampler = GeneratorSampler(solver, cfg.labeling, cfg.run.seed * 100_003 + k * 1_009)
            reward = ExecutorProposerReward(
                sampler,
                num_samples=cfg.code.solver_samples,
                buffer=buffer,
                format_penalty=cfg.code.format_penalty,
                **self.sandbox,
            )
            log = ProposerLog(
                reward, steps_log, k, cfg.challenger.steps, cfg.code.task_types, summaries.append
            )
            work = it / ".trainer_challenger"
            stats = train_grpo(
                model,
                tokenizer,
                rows,
                [log],
                cfg.challenger,
                work,
                seed=cfg.run.seed + k,
                model_cfg=cfg.model,
                generation_cfg=cfg.generation,
                report_to=cfg.run.report_to,
                save_steps=cfg.run.save_steps,
                desc=f"iter {k} proposer",
                save_to=it / "challenger",
            )
            shutil.rmtree(work, ignore_errors=True)
        logged = self.rundir.rows(k, "challenger_steps")
        return {
            "checkpoint": self.rundir.relative(it / "challenger"),
            "steps": summaries,
            "updates": stats.log,
            "start": self.rundir.relative(start),
            "frozen_solver": self.rundir.relative(frozen_solver),
            "metrics": {
                "completions": len(logged),
                "valid_rate": mean([float(r["valid"]) for r in logged]),
                "mean_reward": mean([r["reward"] for r in logged]),
                **proposer_by_type(logged, cfg.code.task_types),
                "buffer_triplets": len(buffer.triplets),
                "buffer_induction": len(buffer.induction),
                "refusals": refusal_counts(logged),
            },
        }

    def pool_phase(self, k: int) -> dict:
        cfg = self.cfg
        buffer = self.buffer_before(k + 1)
        proposed = list(
            dict.fromkeys(r["task"] for r in self.rundir.rows(k, "challenger_steps") if r["valid"])
        )
        rng = random.Random(cfg.run.seed * 131 + k)
        n = cfg.code.tasks_per_type
        rows, metrics = [], {}
        for kind in cfg.code.task_types:
            mine = [t for t in proposed if json.loads(t)["kind"] == kind][-n:]
            extra = [t.to_json() for t in buffer.sample_tasks(kind, n - len(mine), rng)]
            rows += [{"kind": kind, "task": t, "source": "proposed"} for t in mine]
            rows += [{"kind": kind, "task": t, "source": "buffer"} for t in extra]
            metrics |= {f"{kind}/proposed": len(mine), f"{kind}/from_buffer": len(extra)}
        for r in rows:
            r["question"] = solver_messages(CodeTask.from_json(r["task"]))[-1]["content"]
        write_jsonl_atomic(self.rundir.iter_dir(k) / "pool.jsonl", rows)
        return {
            "metrics": {
                "tasks": len(rows),
                **metrics,
                "buffer_triplets": len(buffer.triplets),
                "buffer_induction": len(buffer.induction),
            }
        }

    def solver_phase(self, k: int, start: str) -> dict:
        pool = self.rundir.rows(k, "pool")
        if not pool:
            return self.skipped_solver(k, start, "no task to solve")
        out = self.rundir.iter_dir(k) / "solver"
        rows = [
            {"prompt": solver_messages(CodeTask.from_json(r["task"])), "task": r["task"]}
            for r in pool
        ]
        log = SolverLog(
            ExecutorSolverReward(format_penalty=self.cfg.code.format_penalty, **self.sandbox)
        )
        work = out.with_name(".trainer_solver")
        stats = train_grpo(
            *self.load(start),
            rows,
            [log],
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
        metrics: dict[str, Any] = {
            "train_tasks": len(pool),
            "mean_reward": mean([s["mean_reward"] for s in log.steps]),
        }
        for kind, (n, solved) in log.counts.items():
            metrics |= {
                f"{kind}/rollouts": n,
                f"{kind}/solved": solved,
                **{f"{kind}/{key}": v for key, v in rate_fields("solve", solved, n).items()},
            }
        return {
            "checkpoint": self.rundir.relative(out),
            "start": self.rundir.relative(start),
            "train_steps": log.steps,
            "updates": stats.log,
            "metrics": metrics,
        }

    # ------------------------------------------------------------ the algorithm

    def iterate(self) -> None:
        cfg = self.cfg
        proposer = solver = self.base
        if cfg.eval.enabled:
            self.run_phase(0, "eval", self.eval_phase, self.base)
        for k in range(1, cfg.run.iterations + 1):
            # -- propose: learnability against the frozen solver; valid tasks join the buffer
            start = solver if cfg.roles.shared else proposer
            proposer = self.run_phase(k, "challenger", self.challenger_phase, start, solver)[
                "checkpoint"
            ]
            # -- the solver's tasks per type: new proposals, topped up from the buffer
            self.run_phase(k, "pool", self.pool_phase)
            # -- solve: the executor's verdict (one model: it starts where proposing left it)
            start = proposer if cfg.roles.shared else solver
            solver = self.run_phase(k, "solver", self.solver_phase, start)["checkpoint"]
            if cfg.roles.shared:
                proposer = solver
            if cfg.eval.enabled:
                self.run_phase(k, "eval", self.eval_phase, solver)


def run_azr(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> AZRRun:
    run = AZRRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
