"""R-Zero's alternating iterations, written as the paper's algorithm (SPEC §1).

    for k = 1..K:
        challenger phase   train Q with GRPO against the frozen solver S_{k-1}
        question pool      Q writes N questions; malformed and duplicate ones dropped
        labelling          S_{k-1} answers each m times; majority vote -> (label, p_hat);
                           keep |p_hat - 1/2| <= delta
        solver phase       train S with GRPO on the kept questions, reward = [answer == label]
        evaluation         score the new solver (the base model once, as iteration 0)
        audit (optional)   an external judge checks the pseudo-labels

Every phase writes its outputs atomically and is committed by a marker written last
(`iter_KK/phases/<phase>.json`, holding the phase's metrics and resulting checkpoint), so
rerunning the same command skips committed phases and redoes an interrupted one from its
start. `metrics.jsonl` and `report.md` are rebuilt from the markers, so they never hold a
duplicated or missing row.

Departures from the paper, each deliberate:
- Shared weights (`roles.shared`, Single-R-Zero): the one model's challenger phase is
  rewarded by a frozen copy of itself at the start of the phase; labelling and the solver
  phase then use the weights the challenger phase produced, so both phases update one model.
- A pool with nothing in the band skips the solver phase with a recorded warning (the
  reference code crashes on the empty dataloader); the solver carries over unchanged.
"""

from __future__ import annotations

import gc
import shutil
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rzero import distributed
from rzero.config import RZeroConfig, config_from_dict
from rzero.faults import crash_point
from rzero.io import read_jsonl, write_json_atomic, write_jsonl_atomic, write_text_atomic
from rzero.models import load_model, load_tokenizer, resolve_model

PHASES = ("challenger", "pool", "labelling", "solver", "eval", "audit")
TRAINING_PHASES = ("challenger", "solver")  # run on every training process


class RunDirConflict(RuntimeError):
    """RUN_DIR holds a run made with a different config."""


@dataclass
class Timing:
    """Where the wall time went, for the overhead ratio of bench/iteration.py."""
    generation: float = 0.0  # inside model.generate (rollouts, votes, pool, eval)
    optimizer: float = 0.0  # GRPO steps minus their reward calls
    phases: dict[str, float] = field(default_factory=dict)
    peak_rss_gib: dict[str, float] = field(default_factory=dict)  # per phase, this process


def iter_dir(run_dir: Path, k: int) -> Path:
    return run_dir / f"iter_{k:02d}"


def marker_path(run_dir: Path, k: int, phase: str) -> Path:
    return iter_dir(run_dir, k) / "phases" / f"{phase}.json"


def read_marker(run_dir: Path, k: int, phase: str) -> dict[str, Any] | None:
    import json

    path = marker_path(run_dir, k, phase)
    return json.loads(path.read_text()) if path.is_file() else None


def prepare_run_dir(cfg: RZeroConfig, run_dir: Path, fresh: bool = False) -> None:
    """Create RUN_DIR, or check that the one there was made with this config."""
    saved = run_dir / "config.yaml"
    if fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    if saved.is_file():
        old = config_from_dict(yaml.safe_load(saved.read_text()))
        if old.fingerprint() != cfg.fingerprint():
            changed = [f"{s}.{k}" for s, sec in cfg.to_dict().items() for k, v in sec.items()
                       if old.to_dict()[s][k] != v and f"{s}.{k}" != "run.output_dir"]
            raise RunDirConflict(
                f"{run_dir} holds a run made with a different config (changed: "
                f"{', '.join(changed) or 'unknown'}); use another RUN_DIR, or pass --fresh "
                f"to delete it and start over")
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(saved, cfg.to_yaml())


class RZeroRun:
    def __init__(self, cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False):
        distributed.init()  # several processes under accelerate/torchrun; else a no-op
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        distributed.on_main(prepare_run_dir, cfg, self.run_dir, fresh)
        self.timing = Timing()
        # the main process converts the embedded model once; the others then find it cached
        distributed.on_main(resolve_model, cfg.model.name)
        self.base = resolve_model(cfg.model.name)
        self._tb = None

    # ------------------------------------------------------------ phase bookkeeping

    def commit(self, k: int, phase: str, info: dict[str, Any], seconds: float) -> dict:
        info = {"phase": phase, "iteration": k, "seconds": round(seconds, 3), **info}
        write_json_atomic(marker_path(self.run_dir, k, phase), info)
        self.timing.phases[f"{k}/{phase}"] = seconds
        if info.get("peak_rss_gib") is not None:
            self.timing.peak_rss_gib[f"{k}/{phase}"] = info["peak_rss_gib"]
        self.log_tensorboard(k, info)
        self.rebuild_metrics()
        return info

    def log_tensorboard(self, k: int, info: dict[str, Any]) -> None:
        try:
            if self._tb is None:
                from torch.utils.tensorboard import SummaryWriter
                self._tb = SummaryWriter(str(self.run_dir / "tensorboard"))
        except ImportError:
            return
        for key, value in info.get("metrics", {}).items():
            if isinstance(value, (int, float)):
                self._tb.add_scalar(f"{info['phase']}/{key}", value, k)
        for row in info.get("steps", []):
            gstep = (k - 1) * self.cfg.challenger.steps + int(row["step"])
            for key, value in row.items():
                if key != "step":
                    self._tb.add_scalar(f"challenger_step/{key}", value, gstep)
        self._tb.flush()

    def rebuild_metrics(self) -> None:
        rows = []
        for k in range(0, self.cfg.run.iterations + 1):
            for phase in PHASES:
                m = read_marker(self.run_dir, k, phase)
                if m is None:
                    continue
                for step in m.get("steps", []):
                    rows.append({"iteration": k, "phase": "challenger_step", **step})
                rows.append({"iteration": k, "phase": phase, "seconds": m["seconds"],
                             **m.get("metrics", {}),
                             **({"warning": m["warning"]} if m.get("warning") else {})})
        write_jsonl_atomic(self.run_dir / "metrics.jsonl", rows)
        write_text_atomic(self.run_dir / "report.md", render_report(self.run_dir, self.cfg))

    def load(self, checkpoint: str):
        c = self.cfg.model
        model = load_model(checkpoint, dtype=c.dtype, device=c.device,
                           attn_implementation=c.attn_implementation)
        return model, load_tokenizer(checkpoint)

    def generator(self, checkpoint: str, model=None, tokenizer=None):
        from rzero.generation import make_generator

        return make_generator(self.cfg, checkpoint, model=model, tokenizer=tokenizer)

    def grpo_settings(self, role: str, seed: int):
        from rzero.grpo import GRPOSettings

        r = getattr(self.cfg, role)
        g = self.cfg.generation
        return GRPOSettings(
            steps=r.steps, group_size=r.group_size, prompts_per_step=r.prompts_per_step,
            learning_rate=r.learning_rate, beta=r.beta, epsilon=r.epsilon,
            epsilon_high=r.epsilon_high, max_completion_length=r.max_completion_length,
            micro_batch_size=r.micro_batch_size, temperature=r.temperature, seed=seed, bf16=self.cfg.model.dtype == "bfloat16",
            gradient_checkpointing=self.cfg.model.gradient_checkpointing,
            use_vllm=g.trl_use_vllm, vllm_mode=g.trl_vllm_mode,
            vllm_gpu_memory_utilization=g.gpu_memory_utilization)

    def _account(self, *generators) -> None:
        for gen in generators:
            self.timing.generation += gen.stats.seconds

    # ------------------------------------------------------------ the phases

    def challenger_phase(self, k: int, start: str, frozen_solver: str) -> dict:
        from rzero.generation import GenerationError, frozen_solver_generator

        it = iter_dir(self.run_dir, k)
        steps_log = it / "challenger_steps.jsonl"
        if distributed.is_main():
            steps_log.unlink(missing_ok=True)  # a redone phase starts its log afresh
        with ExitStack() as stack:
            g = self.cfg.generation
            service = None

            def frozen():
                """The frozen solver: only the main process scores challenger steps."""
                nonlocal service
                if g.solver_replicas == 0:
                    return frozen_solver_generator(self.cfg, frozen_solver)
                # S_{k-1} changes every iteration, so the phase serves it for itself
                from rzero.generation import OpenAIGenerator
                from rzero.launch import SolverReplicas

                service = stack.enter_context(SolverReplicas.from_config(
                    self.cfg, frozen_solver, replicas=g.solver_replicas, gpus=g.solver_gpus,
                    urls_file=it / "solver_urls.txt", log_dir=it / "solver_logs"))
                return OpenAIGenerator(service.urls, service.model, api_key_env=g.api_key_env,
                                       concurrency=g.concurrency, timeout=g.timeout,
                                       retries=g.retries)

            solver = distributed.on_main(frozen, share=False)
            try:
                return self._train_challenger(k, it, start, frozen_solver, solver, steps_log)
            except GenerationError:
                if service is not None:
                    service.check_alive()  # a dead replica: name its URL and log instead
                raise

    def _train_challenger(self, k: int, it: Path, start: str, frozen_solver: str, solver,
                          steps_log: Path) -> dict:
        from rzero.challenger.train import ChallengerReward
        from rzero.grpo import train_grpo
        from rzero.prompts import challenger_chat

        summaries: list[dict[str, float]] = []
        reward = ChallengerReward(solver, self.cfg, steps_log, k, on_step=summaries.append)
        model, tokenizer = self.load(start)
        rows = [{"prompt": challenger_chat(self.cfg.challenger.prompt_file)}]
        stats = train_grpo(model, tokenizer, rows, [reward],
                           self.grpo_settings("challenger", self.cfg.run.seed + k),
                           it / ".trainer_challenger", desc=f"iter {k} challenger",
                           save_to=it / "challenger")
        if solver is not None:
            self._account(solver)
        self.timing.optimizer += stats.seconds_optimizer - reward.seconds
        checkpoint = str(it / "challenger")
        if distributed.is_main():
            shutil.rmtree(it / ".trainer_challenger", ignore_errors=True)
        del model, solver
        n = len(read_jsonl(steps_log))
        valid = [s["valid_rate"] for s in summaries]
        return {"checkpoint": checkpoint, "start": start, "frozen_solver": frozen_solver,
                "steps": summaries,
                "metrics": {"completions": n,
                            "valid_rate": sum(valid) / len(valid) if valid else 0.0,
                            "mean_reward": (sum(s["mean_reward"] for s in summaries)
                                            / len(summaries)) if summaries else 0.0,
                            "mean_p_hat": (sum(s["mean_p_hat"] for s in summaries)
                                           / len(summaries)) if summaries else 0.0}}

    def pool_phase(self, k: int, challenger: str) -> dict:
        from rzero.challenger.train import sample_pool

        gen = self.generator(challenger)
        pool, counts = sample_pool(gen, self.cfg, seed=self.cfg.run.seed * 7919 + k)
        self._account(gen)
        write_jsonl_atomic(iter_dir(self.run_dir, k) / "pool.jsonl", pool)
        counts["valid_rate"] = (counts["sampled"] - counts["malformed"]) / max(1, counts["sampled"])
        return {"challenger": challenger, "metrics": counts}

    def labelling_phase(self, k: int, solver: str) -> dict:
        from rzero.solver.train import label_pool, p_hat_histogram

        it = iter_dir(self.run_dir, k)
        questions = [r["question"] for r in read_jsonl(it / "pool.jsonl")]
        gen = self.generator(solver)
        rows = label_pool(gen, questions, self.cfg, seed=self.cfg.run.seed * 104729 + k)
        self._account(gen)
        write_jsonl_atomic(it / "labelled.jsonl", rows)
        kept = sum(r["kept"] for r in rows)
        p_hats = [r["p_hat"] for r in rows]
        return {"solver": solver, "metrics": {"questions": len(rows), "kept": kept,
                            "kept_fraction": kept / len(rows) if rows else 0.0,
                            "mean_p_hat": sum(p_hats) / len(p_hats) if p_hats else 0.0,
                            "mean_parse_rate": (sum(r["parse_rate"] for r in rows) / len(rows)
                                                if rows else 0.0)},
                "p_hat_histogram": p_hat_histogram(rows, self.cfg.labeling.num_votes)}

    def solver_phase(self, k: int, start: str) -> dict:
        from rzero.grpo import train_grpo
        from rzero.prompts import solver_chat
        from rzero.solver.train import SolverReward

        it = iter_dir(self.run_dir, k)
        kept = [r for r in read_jsonl(it / "labelled.jsonl") if r["kept"]]
        if not kept:
            return {"checkpoint": start, "start": start, "skipped": True,
                    "warning": f"iteration {k}: no pooled question fell in the band; the "
                               f"solver phase was skipped and the solver carried over",
                    "metrics": {"train_questions": 0}}
        rows = [{"prompt": solver_chat(r["question"], self.cfg.solver.prompt_file),
                 "label": r["label"]} for r in kept]
        model, tokenizer = self.load(start)
        log: list[dict[str, float]] = []
        stats = train_grpo(model, tokenizer, rows, [SolverReward(self.cfg.solver.reward)],
                           self.grpo_settings("solver", self.cfg.run.seed + 1000 + k),
                           it / ".trainer_solver", log=log.append,
                           desc=f"iter {k} solver", save_to=it / "solver")
        self.timing.optimizer += stats.seconds_optimizer
        checkpoint = str(it / "solver")
        if distributed.is_main():
            shutil.rmtree(it / ".trainer_solver", ignore_errors=True)
        del model
        rewards = [row["reward"] for row in log if "reward" in row]
        return {"checkpoint": checkpoint, "start": start,
                "metrics": {"train_questions": len(rows),
                            "mean_reward": sum(rewards) / len(rewards) if rewards else 0.0}}

    def eval_phase(self, k: int, solver: str) -> dict:
        from rzero.evaluation import evaluate, write_results

        e = self.cfg.eval
        gen = self.generator(solver)
        results = evaluate(gen, e.benchmarks, limit=e.limit, max_new_tokens=e.max_new_tokens,
                           num_samples=e.num_samples, seed=self.cfg.run.seed,
                           prompt_path=self.cfg.solver.prompt_file)
        self._account(gen)
        write_results(results, iter_dir(self.run_dir, k) / "eval")
        metrics = {"average": results["average"]}
        for name, r in results["benchmarks"].items():
            metrics[f"{name}/pass@1"] = r["pass@1"]
        return {"metrics": metrics, "checkpoint": solver}

    def audit_phase(self, k: int) -> dict:
        from rzero.labeling.audit import audit_run

        report = audit_run(self.run_dir, self.cfg.audit, model_spec=self.cfg.model.name)
        return {"metrics": {key: v for key, v in report.get("summary", {}).items()
                            if isinstance(v, (int, float))}}

    def _run_phase(self, k: int, phase: str, fn, *args) -> dict:
        done = read_marker(self.run_dir, k, phase)
        if done is not None:
            return done
        def work() -> tuple[dict, float]:
            reset_peak_rss()
            t0 = time.perf_counter()
            info = fn(k, *args)
            release_memory()  # the phase's models and buffers, before the next phase's own
            peak = peak_rss_gib()
            if peak is not None:
                info["peak_rss_gib"] = round(peak, 3)
            return info, time.perf_counter() - t0

        def commit(info: dict, seconds: float) -> dict:
            crash_point(f"{phase}:commit")
            return self.commit(k, phase, info, seconds)

        if phase in TRAINING_PHASES:
            # every training process trains; the main one commits, the others get the marker
            return distributed.on_main(commit, *work())
        return distributed.on_main(lambda: commit(*work()))

    # ------------------------------------------------------------ the algorithm

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
            # -- evaluation and audit
            if cfg.eval.enabled:
                self._run_phase(k, "eval", self.eval_phase, solver)
            if cfg.audit.enabled:
                self._run_phase(k, "audit", self.audit_phase)
        if self._tb is not None:
            self._tb.close()
        return self.run_dir


# ---------------------------------------------------------------- memory


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc keeps them otherwise,
    so the next phase's models would stack on the last phase's high-water mark)."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc


def reset_peak_rss() -> None:
    """Start a new peak-memory window (Linux: writing 5 to clear_refs resets VmHWM)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # not Linux, or not permitted: the peak is then the process's peak so far


def peak_rss_gib() -> float | None:
    """Peak resident memory of this process since the last `reset_peak_rss`, in GiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB -> GiB
    except OSError:
        pass
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


# ---------------------------------------------------------------- report


def render_report(run_dir: Path, cfg: RZeroConfig) -> str:
    mode = "shared weights (Single-R-Zero)" if cfg.roles.shared else "separate weights (R-Zero)"
    lines = [f"# R-Zero run: {run_dir.name}", "",
             f"- model: `{cfg.model.name}`; {mode}; iterations: {cfg.run.iterations}",
             f"- challenger: {cfg.challenger.steps} GRPO steps x {cfg.challenger.prompts_per_step}"
             f" prompts x G={cfg.challenger.group_size}; pool N={cfg.challenger.pool_size}",
             f"- labelling: m={cfg.labeling.num_votes} votes, band |p_hat - 1/2| <= "
             f"{cfg.labeling.delta}" + ("" if cfg.labeling.filter else " (filter off)"),
             f"- solver: {cfg.solver.steps} GRPO steps x {cfg.solver.prompts_per_step} questions"
             f" x G={cfg.solver.group_size}", "",
             "| iter | valid questions (GRPO) | mean challenger reward | mean p_hat (GRPO) "
             "| pool valid | pool kept | labelled mean p_hat | kept fraction | solver reward "
             "| eval avg | time (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    warnings = []
    base = read_marker(run_dir, 0, "eval")
    if base is not None:
        lines.append(f"| 0 (base) | | | | | | | | | {base['metrics']['average']:.3f} "
                     f"| {base['seconds']:.0f} |")
    for k in range(1, cfg.run.iterations + 1):
        m = {p: read_marker(run_dir, k, p) for p in PHASES}
        if not any(m.values()):
            continue

        def g(phase, key, fmt="{:.3f}", m=m):
            v = (m[phase] or {}).get("metrics", {}).get(key)
            return fmt.format(v) if isinstance(v, (int, float)) else "–"

        seconds = sum(x["seconds"] for x in m.values() if x)
        lines.append(
            f"| {k} | {g('challenger', 'valid_rate')} | {g('challenger', 'mean_reward')} "
            f"| {g('challenger', 'mean_p_hat')} | {g('pool', 'valid_rate')} "
            f"| {g('pool', 'kept', '{}')} | {g('labelling', 'mean_p_hat')} "
            f"| {g('labelling', 'kept_fraction')} | {g('solver', 'mean_reward')} "
            f"| {g('eval', 'average')} | {seconds:.0f} |")
        warnings += [x["warning"] for x in m.values() if x and x.get("warning")]
    lines += ["", "Phase times (s) and peak resident memory:", ""]
    for k in range(0, cfg.run.iterations + 1):
        parts = [f"{p} {m['seconds']:.0f}"
                 + (f" ({m['peak_rss_gib']:.1f} GiB peak)" if m.get("peak_rss_gib") else "")
                 for p in PHASES if (m := read_marker(run_dir, k, p)) is not None]
        if parts:
            lines.append(f"- iteration {k}: " + ", ".join(parts))
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    lines += ["", "Files: `iter_KK/challenger_steps.jsonl` (every GRPO question with its votes), "
              "`iter_KK/pool.jsonl`, `iter_KK/labelled.jsonl`, `iter_KK/challenger/` and "
              "`iter_KK/solver/` (Hugging Face checkpoints), `metrics.jsonl`, `tensorboard/`.",
              ""]
    return "\n".join(lines)


def run_iterations(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> RZeroRun:
    run = RZeroRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
