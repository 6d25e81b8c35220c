"""The challenger's two jobs in an iteration: its GRPO phase against the frozen solver
(`train_challenger`), and writing the question pool (`sample_pool`).

The reward (`ChallengerReward`) is in `rewards.py`; this module only runs it through
`rzero.training.grpo.train_grpo` and summarises the steps it logged.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rzero.challenger.repetition import near_duplicates
from rzero.challenger.rewards import ChallengerReward
from rzero.config import RZeroConfig
from rzero.engine import distributed
from rzero.faults import crash_point
from rzero.generation.interface import Generator, SamplingParams
from rzero.labeling.answers import extract_boxed, extract_question
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.challenger import challenger_chat
from rzero.prompts.chat import Chat
from rzero.training.grpo import TrainStats, train_grpo
from rzero.training.steps import latest_checkpoint


@dataclass(frozen=True)
class ChallengerResult:
    steps: list[dict[str, float]]  # `step_summary` of every GRPO step
    stats: TrainStats
    reward_seconds: float  # inside the reward: frozen-solver sampling and voting

    def metrics(self) -> dict[str, float]:
        """The phase's means over its steps, for its marker and the report."""

        def mean(key: str) -> float:
            return sum(s[key] for s in self.steps) / len(self.steps) if self.steps else 0.0

        return {
            "completions": sum(int(s["completions"]) for s in self.steps),
            "valid_rate": mean("valid_rate"),
            "mean_reward": mean("mean_reward"),
            "mean_p_hat": mean("mean_p_hat"),
        }


def train_challenger(
    model,
    tokenizer,
    cfg: RZeroConfig,
    solver: FrozenSolver | None,
    iteration: int,
    out_dir: Path,
    steps_log: Path,
    prompts: Sequence[Chat] | None = None,
) -> ChallengerResult:
    """GRPO on the challenger prompt: each step samples prompts x G questions and rewards
    them by the frozen solver's uncertainty minus repetition; the trained weights are saved
    to `out_dir`. `solver` is None on processes other than the main one. `prompts`: the
    prompts to train on instead of the one challenger prompt (guided self-play's grounded
    prompts, one per prompt draw of the phase)."""
    work = out_dir.with_name(".trainer_challenger")
    if distributed.is_main() and latest_checkpoint(work) is None:
        steps_log.unlink(missing_ok=True)  # a redone phase starts its log afresh
    summaries: list[dict[str, float]] = []
    reward = ChallengerReward(
        solver, cfg.challenger, steps_log, iteration, seed=cfg.run.seed, on_step=summaries.append
    )
    rows = [{"prompt": p} for p in prompts or [challenger_chat(cfg.challenger.prompt_file)]]
    stats = train_grpo(
        model,
        tokenizer,
        rows,
        [reward],
        cfg.challenger,
        work,
        seed=cfg.run.seed + iteration,
        model_cfg=cfg.model,
        generation_cfg=cfg.generation,
        report_to=cfg.run.report_to,
        save_steps=cfg.run.save_steps,
        desc=f"iter {iteration} challenger",
        save_to=out_dir,
    )
    if distributed.is_main():
        shutil.rmtree(work, ignore_errors=True)
    return ChallengerResult(summaries, stats, reward.seconds)


def sample_pool(
    challenger: Generator,
    cfg: RZeroConfig,
    seed: int,
    chunk: int = 64,
    held_out: Sequence[str] = (),
    prompts: Sequence[Chat] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """N questions from the challenger; malformed ones dropped, exact duplicates removed, and
    any question that is (or nearly is) a `held_out` evaluation item dropped and counted
    (`near_duplicates`), so evaluation items never reach training. `prompts`: one prompt per
    question (guided self-play's, N of them) instead of N samples of the challenger prompt;
    each pool row then records the index of its prompt (`prompt_index`)."""
    from tqdm.auto import tqdm

    c = cfg.challenger
    if prompts is not None and len(prompts) != c.pool_size:
        raise ValueError(f"sample_pool: {len(prompts)} prompts for a pool of {c.pool_size}")
    params = SamplingParams(
        temperature=c.pool_temperature,
        top_p=c.pool_top_p,
        top_k=0,
        max_new_tokens=c.max_completion_length,
        seed=seed,
    )
    prompt = challenger_chat(c.prompt_file)
    texts: list[str] = []
    with tqdm(total=c.pool_size, desc="pool", unit="q", leave=False) as bar:
        for start in range(0, c.pool_size, chunk):
            n = min(chunk, c.pool_size - start)
            p = replace(params, seed=seed + start)
            if prompts is None:
                texts += challenger.generate([prompt], n, p)[0]
            else:
                texts += [out[0] for out in challenger.generate(prompts[start : start + n], 1, p)]
            bar.update(n)
            crash_point("pool:mid")
    seen: set[str] = set()
    pool, malformed, duplicates = [], 0, 0
    for i, t in enumerate(texts):
        q, a = extract_question(t), extract_boxed(t)
        if q is None or a is None:
            malformed += 1
            continue
        key = " ".join(q.split())
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        pool.append({"question": q, "challenger_answer": a})
        if prompts is not None:
            pool[-1]["prompt_index"] = i
    overlap = near_duplicates([r["question"] for r in pool], held_out)
    pool = [r for r, o in zip(pool, overlap, strict=True) if not o]
    return pool, {
        "sampled": len(texts),
        "malformed": malformed,
        "duplicates": duplicates,
        "eval_overlap": sum(overlap),
        "kept": len(pool),
    }
