"""What both code loops share: the run folder, the phase runner, the sandbox settings.

`CodeRunDir` is `rzero.rundir.RunDir` (config fingerprint, iteration folders, markers written
last, resume checks) with the code tier's own `metrics.jsonl` and report
(`rzero.code.report`). The phase names are the math loop's, so the layout is the same:
challenger (the proposer's GRPO phase), pool, labelling, solver, eval, audit.

`CodeRun` runs a phase unless its marker is committed, measures its time and peak memory,
and commits its marker; it runs in one process (the config refuses several training GPUs
for the code tier).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rzero import preflight
from rzero.config import RZeroConfig
from rzero.engine.models import load_model, load_tokenizer, resolve_model
from rzero.executor.sandbox import Limits
from rzero.io import write_json_atomic, write_jsonl_atomic, write_text_atomic
from rzero.labeling.equivalence import use_settings
from rzero.rundir import PHASES, RunDir, peak_rss_gib, release_memory, reset_peak_rss


def sandbox_options(cfg: RZeroConfig) -> dict[str, Any]:
    """Keyword arguments of the executor's batch functions (validate_triplets, judge, ...)."""
    c = cfg.code
    return {"timeout_s": c.timeout_s, "limits": Limits(memory_bytes=c.memory_mb * 2**20),
            "max_workers": c.workers}


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0  # 0 for no values, as the report shows


def _scalars(d: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class CodeRunDir(RunDir):
    """A run folder of the code tier: RunDir with the code report and metrics."""

    def rebuild(self, cfg: RZeroConfig) -> None:
        """`metrics.jsonl` (one row per committed phase and per GRPO step of either role, as
        ``challenger_step`` / ``solver_step``), `report.md`, `report.html` and, once a solver
        was evaluated, `best.json`, from the markers."""
        from rzero.code.report import render_html, render_markdown

        rows = []
        for k in range(0, cfg.run.iterations + 1):
            for phase in PHASES:
                m = self.marker(k, phase)
                if m is None:
                    continue
                for key, name in (("steps", "challenger_step"), ("train_steps", "solver_step")):
                    rows += [{"iteration": k, "phase": name, **s} for s in m.get(key, [])]
                rows.append({"iteration": k, "phase": phase, "seconds": m["seconds"],
                             **m.get("metrics", {}),
                             **({"warning": m["warning"]} if m.get("warning") else {})})
        write_jsonl_atomic(self.path / "metrics.jsonl", rows)
        best = self.best_solver(cfg)  # only with eval.enabled: the math evaluation's best
        if best is not None:
            write_json_atomic(self.path / "best.json", best)
        write_text_atomic(self.path / "report.md", render_markdown(self, cfg))
        write_text_atomic(self.path / "report.html", render_html(self, cfg))

    def log_tracker(self, cfg: RZeroConfig, k: int, info: dict[str, Any]) -> None:
        """The scalar metrics and challenger steps only (the p̂ buckets are lists)."""
        super().log_tracker(cfg, k, {**info, "metrics": _scalars(info.get("metrics", {})),
                                     "steps": [_scalars(s) for s in info.get("steps", [])]})


class CodeRun:
    """One code-tier run: its config, folder and base model, and the phase runner."""

    def __init__(self, cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
        self.cfg = cfg
        self.rundir = CodeRunDir(run_dir)
        preflight.check(cfg)  # outside inputs (benchmarks), before anything is written
        self.rundir.prepare(cfg, fresh)
        self.rundir.verify(cfg, full=cfg.run.verify == "full")
        # the math evaluation's grader (eval.enabled), as the math loop sets it
        use_settings(timeout_s=cfg.labeling.equivalence_timeout, direction=cfg.labeling.equivalence)
        self.base = resolve_model(cfg.model.name)
        self.sandbox = sandbox_options(cfg)
        self._generators: list = []

    def load(self, checkpoint: str):  # -> (model, tokenizer)
        c = self.cfg.model
        return (load_model(checkpoint, dtype=c.dtype, device=c.device,
                           attn_implementation=c.attn_implementation), load_tokenizer(checkpoint))

    def generator(self, checkpoint: str):
        from rzero.engine.generation import make_generator

        self._generators.append(gen := make_generator(self.cfg, checkpoint))
        return gen

    def run_phase(self, k: int, phase: str, fn: Callable[..., dict], *args: str) -> dict:
        """Skip a committed phase; else run it, measure it and commit its marker. Returns
        the marker with its checkpoint resolved against this run directory."""
        done = self.rundir.marker(k, phase)
        if done is None:
            reset_peak_rss()
            t0 = time.perf_counter()
            self._generators = []
            try:
                info = fn(k, *args)
            finally:
                for g in self._generators:  # an engine's processes end with its phase
                    g.close()
                self._generators = []
            release_memory()  # the phase's models and buffers, before the next phase's
            peak = peak_rss_gib()
            if peak is not None:
                info["peak_rss_gib"] = round(peak, 3)
            done = self.rundir.commit(self.cfg, k, phase, info, time.perf_counter() - t0)
        if "checkpoint" in done:
            done = {**done, "checkpoint": self.rundir.resolve(done["checkpoint"])}
        return done

    def eval_phase(self, k: int, solver: str) -> dict:
        """The math evaluation of the new solver (AZR's claim is transfer from code to math)."""
        from rzero.evaluation import evaluate, write_results

        e = self.cfg.eval
        results = evaluate(self.generator(solver), e.benchmarks, limit=e.limit,
                           max_new_tokens=e.max_new_tokens, num_samples=e.num_samples,
                           seed=self.cfg.run.seed, direction=self.cfg.labeling.equivalence)
        write_results(results, self.rundir.iter_dir(k) / "eval")
        metrics = {"average": results["average"]} | {
            f"{name}/{key}": r[key] for name, r in results["benchmarks"].items()
            for key in ("pass@1", "n")}
        return {"metrics": metrics, "checkpoint": self.rundir.relative(solver)}

    def skipped_solver(self, k: int, start: str, why: str) -> dict:
        """The marker of a solver phase with nothing to train on: the solver carries over."""
        return {"checkpoint": self.rundir.relative(start), "start": self.rundir.relative(start),
                "skipped": True, "warning": f"iteration {k}: {why}; the solver phase was "
                                            f"skipped and the solver carried over",
                "metrics": {"train_tasks": 0}}
