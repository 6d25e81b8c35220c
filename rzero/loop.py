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

Each phase is a short method calling its role's module; `rzero.rundir.RunDir` keeps the run
folder (markers, resume, metrics, report): a committed phase is skipped, an interrupted one
redone. The self-play audit (`rzero.selfplay.watch`) adds its numbers and warnings to each
marker before it commits and measures the last two phases; `run.stop_on` ends a run cleanly.

Departures from the paper, each deliberate:
- Shared weights (`roles.shared`, Single-R-Zero): the one model's challenger phase is
  rewarded by a frozen copy of itself at the start of the phase; labelling and the solver
  phase then use the weights the challenger phase produced, so both phases update one model.
- A pool with nothing in the band skips the solver phase with a recorded warning (the reference
  code crashes on the empty dataloader); the solver carries over unchanged.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from rzero import preflight
from rzero.config import RZeroConfig
from rzero.engine import distributed, trackers
from rzero.engine.models import compute_dtypes, load_model, load_tokenizer, resolve_model
from rzero.evaluation import evaluate, load_benchmarks, write_results
from rzero.faults import crash_point
from rzero.io import write_jsonl_atomic
from rzero.labeling.equivalence import use_settings
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.solver import solver_chat
from rzero.rundir import RunDir, Timing, peak_rss_gib, release_memory, reset_peak_rss
from rzero.selfplay import watch

TRAINING_PHASES = ("challenger", "solver")  # run on every training process


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0  # 0 for no values, as the report shows


class RZeroRun:
    def __init__(self, cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
        distributed.init()  # several processes under accelerate/torchrun; else a no-op
        self.cfg = cfg
        self.rundir = RunDir(run_dir)
        distributed.on_main(preflight.check, cfg)  # outside inputs, before anything is written
        watch.preflight(cfg)  # the trackers and the calibration set, likewise
        distributed.on_main(self.rundir.prepare, cfg, fresh)
        distributed.on_main(self.rundir.verify, cfg, full=cfg.run.verify == "full")
        # one grader (labeling.equivalence) for votes, solver reward and evaluation
        use_settings(timeout_s=cfg.labeling.equivalence_timeout, direction=cfg.labeling.equivalence)
        self.timing = Timing()
        # the main process converts the embedded model once; the others then find it cached
        distributed.on_main(resolve_model, cfg.model.name)
        self.base = resolve_model(cfg.model.name)
        self._generators: list = []  # the current phase's, closed when it ends

    def load(self, checkpoint: str):  # -> (model, tokenizer)
        c = self.cfg.model
        return (load_model(checkpoint, dtype=c.dtype, device=c.device,
                           attn_implementation=c.attn_implementation), load_tokenizer(checkpoint))

    def generator(self, checkpoint: str):
        from rzero.engine.generation import make_generator

        self._generators.append(gen := make_generator(self.cfg, checkpoint))
        return gen

    def held_out(self) -> list[str]:  # every evaluation item (not only eval.limit's)
        e = self.cfg.eval
        return [i["problem"] for items in load_benchmarks(e.benchmarks).values()
                for i in items] if e.enabled else []

    def frozen(self, generator) -> FrozenSolver:
        return FrozenSolver(generator, partial(solver_chat, path=self.cfg.solver.prompt_file),
                            self.cfg.labeling)

    # ------------------------------------------------------------ the phases

    def challenger_phase(self, k: int, start: str, frozen_solver: str) -> dict:
        from rzero.challenger.train import train_challenger
        from rzero.engine.replicas import frozen_solver as serve_frozen

        it = self.rundir.iter_dir(k)
        model, tokenizer = self.load(start)
        with ExitStack() as stack:
            # only the main process scores the challenger's steps, so only it holds S_{k-1}
            solver = distributed.on_main(lambda: stack.enter_context(
                serve_frozen(self.cfg, self.rundir.resolve(frozen_solver), it)), share=False)
            frozen = None
            if solver is not None:
                self._generators.append(solver)
                frozen = self.frozen(solver)
            result = train_challenger(model, tokenizer, self.cfg, frozen, k, it / "challenger",
                                      it / "challenger_steps.jsonl")
        self.timing.optimizer += result.stats.seconds_optimizer - result.reward_seconds
        return {"checkpoint": self.rundir.relative(it / "challenger"), "steps": result.steps,
                "start": self.rundir.relative(start), "metrics": result.metrics(),
                "frozen_solver": self.rundir.relative(frozen_solver)}

    def pool_phase(self, k: int, challenger: str) -> dict:
        from rzero.challenger.train import sample_pool

        pool, counts = sample_pool(self.generator(challenger), self.cfg,
                                   self.cfg.run.seed * 7919 + k, held_out=self.held_out())
        write_jsonl_atomic(self.rundir.iter_dir(k) / "pool.jsonl", pool)
        counts["valid_rate"] = (counts["sampled"] - counts["malformed"]) / max(1, counts["sampled"])
        return {"challenger": self.rundir.relative(challenger), "metrics": counts}

    def labelling_phase(self, k: int, solver: str) -> dict:
        from rzero.solver.dataset import label_pool, p_hat_histogram

        questions = [r["question"] for r in self.rundir.rows(k, "pool")]
        rows = label_pool(self.frozen(self.generator(solver)), questions,
                          seed=self.cfg.run.seed * 104729 + k)
        write_jsonl_atomic(self.rundir.iter_dir(k) / "labelled.jsonl", rows)
        kept = sum(r["kept"] for r in rows)
        return {"solver": self.rundir.relative(solver),
                "metrics": {"questions": len(rows), "kept": kept,
                            "kept_fraction": kept / len(rows) if rows else 0.0,
                            "mean_p_hat": mean([r["p_hat"] for r in rows]),
                            "mean_parse_rate": mean([r["parse_rate"] for r in rows])},
                "p_hat_histogram": p_hat_histogram(rows, self.cfg.labeling.num_votes)}

    def solver_phase(self, k: int, start: str) -> dict:
        from rzero.solver.train import train_solver

        kept = [r for r in self.rundir.rows(k, "labelled") if r["kept"]]
        if not kept:
            return {"checkpoint": self.rundir.relative(start), "start": self.rundir.relative(start),
                    "skipped": True,
                    "warning": f"iteration {k}: no pooled question fell in the band; the "
                               f"solver phase was skipped and the solver carried over",
                    "metrics": {"train_questions": 0}}
        out = self.rundir.iter_dir(k) / "solver"
        stats, log = train_solver(*self.load(start), self.cfg, kept, k, out)
        self.timing.optimizer += stats.seconds_optimizer
        return {"checkpoint": self.rundir.relative(out), "start": self.rundir.relative(start),
                "train_log": [{"reward": r["reward"]} for r in log if "reward" in r],
                "metrics": {"train_questions": len(kept),
                            "mean_reward": mean([r["reward"] for r in log if "reward" in r])}}

    def eval_phase(self, k: int, solver: str) -> dict:
        e = self.cfg.eval
        results = evaluate(self.generator(solver), e.benchmarks, limit=e.limit,
                           max_new_tokens=e.max_new_tokens, num_samples=e.num_samples,
                           seed=self.cfg.run.seed, prompt_path=self.cfg.solver.prompt_file,
                           direction=self.cfg.labeling.equivalence)
        write_results(results, self.rundir.iter_dir(k) / "eval")
        metrics = {f"{name}/{key}": r[key] for name, r in results["benchmarks"].items()
                   for key in ("pass@1", "n")}
        return {"metrics": {"average": results["average"], **metrics},
                "checkpoint": self.rundir.relative(solver)}

    def audit_phase(self, k: int) -> dict:
        from rzero.audit import audit_run

        report = audit_run(self.rundir, self.cfg.audit, model_spec=self.cfg.model.name,
                           direction=self.cfg.labeling.equivalence)
        return {"metrics": {key: v for key, v in report.get("summary", {}).items()
                            if isinstance(v, (int, float))}}

    def _run_phase(self, k: int, phase: str, fn, *args: str) -> dict[str, Any]:
        """Skip a committed phase; else run it, measure it and commit its marker. Returns
        the marker with its checkpoint resolved against this run directory."""
        done = distributed.on_main(self.rundir.marker, k, phase)
        if done is None:
            def work() -> tuple[dict, float]:
                reset_peak_rss()
                trackers.enter_phase(self.rundir.path, k, phase)  # where TRL's logs go
                self._generators = []
                t0 = time.perf_counter()
                try:
                    info = {**fn(k, *args), "compute": compute_dtypes(self.cfg)}
                finally:
                    for g in self._generators:  # an engine's processes end with its phase
                        g.close()
                if self._generators:
                    info["engines"] = sorted({g.engine for g in self._generators})
                if phase in TRAINING_PHASES:
                    info["launch"] = distributed.launch_info()
                self.timing.generation += sum(g.stats.seconds for g in self._generators)
                self._generators = []
                release_memory()  # the phase's models and buffers, before the next phase's
                peak = peak_rss_gib()
                if peak is not None:
                    info["peak_rss_gib"] = round(peak, 3)
                return info, time.perf_counter() - t0

            def commit(info: dict, seconds: float) -> dict:
                crash_point(f"{phase}:commit")
                info = watch.after_phase(self.cfg, self.rundir, k, phase, info)
                self.timing.record(f"{k}/{phase}", seconds, info.get("peak_rss_gib"))
                return self.rundir.commit(self.cfg, k, phase, info, seconds)

            if phase in TRAINING_PHASES:
                # every training process trains; the main one commits, the others get it
                done = distributed.on_main(commit, *work())
            else:
                done = distributed.on_main(lambda: commit(*work()))
        watch.check_stop(done, self.cfg.run)  # a committed stop fires again on a rerun
        if "checkpoint" in done:
            done = {**done, "checkpoint": self.rundir.resolve(done["checkpoint"])}
        return done

    # ------------------------------------------------------------ the algorithm

    @watch.stops_cleanly  # a warning in run.stop_on ends the run there, all committed
    def run(self) -> Path:
        cfg = self.cfg
        challenger = solver = self.base
        if cfg.eval.enabled:
            self._run_phase(0, "eval", self.eval_phase, self.base)
        for k in range(1, cfg.run.iterations + 1):
            # -- challenger phase: train Q_k against the frozen solver
            if cfg.roles.train_challenger:
                start = solver if cfg.roles.shared else challenger
                challenger = self._run_phase(k, "challenger", self.challenger_phase,
                                             start, solver)["checkpoint"]
            # -- question pool from the (trained) challenger
            self._run_phase(k, "pool", self.pool_phase, challenger)
            # -- labelling by the current solver (shared: the one model, as it is now)
            labeller = challenger if cfg.roles.shared and cfg.roles.train_challenger else solver
            self._run_phase(k, "labelling", self.labelling_phase, labeller)
            # -- solver phase on the kept questions
            solver = self._run_phase(k, "solver", self.solver_phase, labeller)["checkpoint"]
            if cfg.roles.shared:
                challenger = solver
            # -- evaluation, audit, the roles' co-error on known answers (shared: one model)
            if cfg.eval.enabled:
                self._run_phase(k, "eval", self.eval_phase, solver)
            if cfg.audit.enabled:
                self._run_phase(k, "audit", self.audit_phase)
            if cfg.watch.coerror and not cfg.roles.shared:
                self._run_phase(k, "coerror", partial(watch.coerror_phase, self), challenger,
                                solver)
        # -- cross-play: every solver S_0..S_K votes on every pool
        if cfg.watch.crossplay:
            self._run_phase(cfg.run.iterations, "crossplay", partial(watch.crossplay_phase, self))
        self.rundir.close()
        return self.rundir.path


def run_iterations(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> RZeroRun:
    run = RZeroRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
