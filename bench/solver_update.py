"""One solver GRPO update on CPU, split into its parts, against TRL's default path.

The learning recipe's update (`configs/learn-solver.yaml`: prompts_per_update questions of a
development draw x G completions, its completion budget, β, prompt) is run `--updates` times
through `rzero.training.grpo.train_grpo`, and the same updates through a plain
`trl.GRPOTrainer` with TRL's own rollouts (`model.generate`) and LM head, the same
algorithm options, the same model, rows and seed. Each update's seconds are split into

  rollout      sampling the completions (TRL's `_generate`)
  reward       the reward functions (`_calculate_rewards`)
  logp fwd     the no-grad forwards of the rollout: the old policy's log-probs (only when an
               update reuses a rollout) and the KL reference's (only at β > 0)
  fwd/bwd      the loss's forward and backward passes (`training_step` less the above)
  optimiser    AdamW's step, clipping and the scheduler (the rest of the update)

and printed per completion, with the share of the FLOP floor: 6 x (non-embedding
parameters + the head's rows scored) x the tokens of the update's forward/backward, at the
machine's measured bf16 (or float32) matmul rate. The first update of each side is a
warm-up and not counted. The ratio printed last is TRL's default seconds per completion
over rzero's, measured in this run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

PARTS = ("rollout", "reward", "logp fwd", "fwd/bwd", "optimiser")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                flags = Path("/proc/cpuinfo").read_text()
                extra = [f for f in ("amx_bf16", "avx512_bf16") if f in flags]
                return f"{line.split(':', 1)[1].strip()} ({', '.join(extra) or 'no bf16 matmul'})"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def matmul_rate(dtype: torch.dtype, n: int = 1024, repeats: int = 8) -> float:
    """FLOP/s of an n x n x n matmul in `dtype` on this machine (best of `repeats`)."""
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


class PartTimer:
    """Wraps GRPOTrainer's methods to add their wall time into per-update buckets."""

    def __init__(self):
        self.updates: list[dict[str, float]] = []
        self.current: dict[str, float] = defaultdict(float)
        self.tokens: list[int] = []

    @contextlib.contextmanager
    def installed(self, trainer_cls):
        originals = {}

        def wrap(name, part):
            fn = getattr(trainer_cls, name)
            originals[name] = fn

            def timed(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    self.current[part] += time.perf_counter() - t0

            setattr(trainer_cls, name, timed)

        wrap("_generate", "rollout")
        wrap("_calculate_rewards", "reward")
        wrap("_generate_and_score_completions", "_prepare")
        wrap("training_step", "_step")
        original_loss = trainer_cls._compute_loss
        originals["_compute_loss"] = original_loss
        timer = self

        def loss(self_, model, inputs):
            # the tokens of the forward/backward: prompts and completions, padding not counted
            timer.tokens.append(int(inputs["prompt_mask"].sum() + inputs["completion_mask"].sum()))
            return original_loss(self_, model, inputs)

        trainer_cls._compute_loss = loss
        original_logps = trainer_cls._get_per_token_logps_and_entropies
        originals["_get_per_token_logps_and_entropies"] = original_logps

        def logps(self_, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original_logps(self_, *args, **kwargs)
            finally:
                if not torch.is_grad_enabled():
                    timer.current["logp fwd"] += time.perf_counter() - t0

        trainer_cls._get_per_token_logps_and_entropies = logps
        try:
            yield
        finally:
            for name, fn in originals.items():
                setattr(trainer_cls, name, fn)

    def close_update(self, seconds: float) -> None:
        c = self.current
        step = c.pop("_step", 0.0)
        prepare = c.pop("_prepare", 0.0)
        other_prepare = prepare - c["rollout"] - c["reward"] - c["logp fwd"]
        parts = {
            "rollout": c["rollout"],
            "reward": c["reward"],
            "logp fwd": c["logp fwd"],
            "fwd/bwd": step - prepare + max(0.0, other_prepare),
            "optimiser": max(0.0, seconds - step),
        }
        parts["total"] = seconds
        parts["tokens"] = sum(self.tokens)
        self.updates.append(parts)
        self.current = defaultdict(float)
        self.tokens = []


def run_side(name: str, args, rows, out: Path) -> list[dict[str, float]]:
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    import rzero.training.grpo as grpo
    from rzero.config import ModelConfig
    from rzero.engine.models import load_model, load_tokenizer
    from rzero.solver.rewards import SolverReward

    recipe = args.recipe
    model_cfg = (
        recipe.model
        if name == "rzero"
        else ModelConfig(
            dtype="float32", device="cpu", generation_dtype="float32", train_compute="float32"
        )
    )
    model = load_model(recipe.model.name, dtype="float32", device="cpu")
    tokenizer = load_tokenizer(recipe.model.name)
    timer = PartTimer()

    class _Clock(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.t0 = time.perf_counter()
            timer.current = defaultdict(
                float,
                {
                    k: v
                    for k, v in timer.current.items()
                    if k in ("_prepare", "rollout", "reward", "logp fwd")
                },
            )

        def on_step_end(self, a, state, control, **kw):
            timer.close_update(time.perf_counter() - self.t0)

    role = recipe.solver.__class__(
        **{
            **recipe.solver.__dict__,
            "steps": args.updates,
            "prompts_per_step": recipe.solver.update_prompts,
            "prompts_per_update": 0,
        }
    )
    reward = SolverReward(role.reward)
    if name == "rzero":
        # the trainer class train_grpo builds (its CPU log-probability subclass), timed
        real_callback, real_class = grpo._timed_callback, grpo.trainer_class
        cls = real_class(True)
        grpo._timed_callback = lambda stats: _Clock()
        grpo.trainer_class = lambda cpu_logps: cls
        try:
            with timer.installed(cls):
                grpo.train_grpo(
                    model, tokenizer, rows, [reward], role, out, seed=0, model_cfg=model_cfg
                )
        finally:
            grpo._timed_callback, grpo.trainer_class = real_callback, real_class
    else:
        # TRL's default path: its own rollouts (transformers' generate), its own LM head, in
        # TRL's default precision for a CPU (float32), with the same algorithm options
        config = grpo.grpo_config(role, out, seed=0, model_cfg=model_cfg)
        data = [rows[i % len(rows)] for i in range(args.updates * role.prompts_per_step)]
        from datasets import Dataset

        with timer.installed(GRPOTrainer):
            trainer = GRPOTrainer(
                model=model,
                reward_funcs=[reward],
                args=config,
                train_dataset=Dataset.from_list(data),
                processing_class=tokenizer,
                callbacks=[_Clock()],
            )
            trainer.train()
    return timer.updates[1:]  # the first is a warm-up


def summarise(name: str, updates, completions: int, flop_rate: float, params: int) -> float:
    per = {p: statistics.median(u[p] for u in updates) / completions for p in PARTS}
    total = statistics.median(u["total"] for u in updates) / completions
    tokens = statistics.median(u["tokens"] for u in updates)
    floor = 6 * params * tokens / flop_rate / completions
    print(
        f"{name:12s} "
        + " ".join(f"{per[p]:9.3f}" for p in PARTS)
        + f" {total:9.3f} {100 * floor / total:7.1f}%"
    )
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/learn-solver.yaml")
    parser.add_argument(
        "--updates", type=int, default=4, help="updates per side (the first is a warm-up)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="a config override, as rzero's --set",
    )
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--sides", default="rzero,trl")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TQDM_DISABLE", "1")

    from rzero.config import load_config
    from rzero.engine.models import load_model
    from rzero.solver_task.questions import training_rows

    args.recipe = load_config(args.config, args.overrides)
    cfg = args.recipe
    rows = training_rows(cfg)
    completions = cfg.solver.update_prompts * cfg.solver.group_size
    model = load_model(cfg.model.name, dtype="float32", device="cpu")
    embed = model.get_input_embeddings().weight.numel()
    params = sum(p.numel() for p in model.parameters()) - embed
    del model
    print(
        f"CPU: {cpu_name()}, {torch.get_num_threads()} torch threads; recipe {args.config} "
        f"{' '.join(args.overrides)}"
    )
    print(
        f"update: {cfg.solver.update_prompts} questions x G {cfg.solver.group_size} = "
        f"{completions} completions, <= {cfg.solver.max_completion_length} new tokens, "
        f"beta {cfg.solver.beta}"
    )
    rates = {"bf16": matmul_rate(torch.bfloat16), "fp32": matmul_rate(torch.float32)}
    print(
        f"matmul rate: bf16 {rates['bf16'] / 1e9:.0f} GFLOP/s, fp32 "
        f"{rates['fp32'] / 1e9:.0f} GFLOP/s"
    )
    print(
        f"{'s/completion':12s} "
        + " ".join(f"{p:>9s}" for p in PARTS)
        + f" {'total':>9s} {'floor':>8s}"
    )
    totals = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in args.sides.split(","):
            updates = run_side(side, args, rows, Path(tmp) / side)
            from rzero.engine.models import train_compute

            dt = (
                "bf16"
                if side == "rzero"
                and train_compute(cfg.model.train_compute, cfg.model.dtype, "cpu") == "bfloat16"
                else "fp32"
            )
            totals[side] = summarise(side, updates, completions, rates[dt], params)
    if "trl" in totals and "rzero" in totals:
        print(
            f"TRL default / rzero: {totals['trl'] / totals['rzero']:.2f}x seconds per "
            f"completion (rzero {totals['rzero']:.3f} s)"
        )


if __name__ == "__main__":
    main()
