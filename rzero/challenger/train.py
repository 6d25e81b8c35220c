"""Challenger phase pieces: the GRPO reward against a frozen solver, and the question pool.

`ChallengerReward` is a TRL reward function. For each GRPO step's batch of completions it
extracts the questions, asks the frozen solver for m answers to every valid question in one
batched call, votes, and combines uncertainty, repetition penalty and format gate with
`challenger_reward`. Every completion's record is appended to `challenger_steps.jsonl`,
which the label-accuracy audit reads.

The repetition penalty clusters the step's well-formed questions and divides cluster sizes
by the whole batch size B, as the paper's |C_k| / B (see `challenger_rewards`). Under several
training processes the batch is gathered first, so B is the global batch, and only the main
process queries the frozen solver and writes the log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rzero import distributed
from rzero.challenger.rewards import challenger_rewards
from rzero.config import RZeroConfig
from rzero.faults import crash_point
from rzero.generation import Generator, SamplingParams
from rzero.labeling.answers import extract_boxed, extract_question
from rzero.labeling.voting import majority_vote
from rzero.prompts import solver_chat


def completion_text(completion: Any) -> str:
    """TRL passes conversational completions as [{'role': 'assistant', 'content': ...}]."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion)


def vote_params(cfg: RZeroConfig, seed: int) -> SamplingParams:
    lab = cfg.labeling
    return SamplingParams(temperature=lab.temperature, top_p=lab.top_p, top_k=lab.top_k,
                          max_new_tokens=lab.max_new_tokens, seed=seed)


def solver_votes(solver: Generator, questions: Sequence[str], cfg: RZeroConfig, seed: int):
    """m answers per question from the solver in one batched call, and their votes."""
    if not questions:
        return [], []
    prompts = [solver_chat(q, cfg.solver.prompt_file) for q in questions]
    texts = solver.generate(prompts, cfg.labeling.num_votes, vote_params(cfg, seed))
    answers = [[extract_boxed(t) for t in row] for row in texts]
    return answers, [majority_vote(a) for a in answers]


class ChallengerReward:
    """TRL reward function: r = max(0, r_unc(p_hat) - lambda * r_rep) for valid questions."""

    __name__ = "challenger"  # TRL names the logged reward column after this

    def __init__(self, solver: Generator, cfg: RZeroConfig, log_path: str | Path,
                 iteration: int, *, on_step: Callable[[dict[str, float]], None] | None = None):
        self.solver = solver
        self.cfg = cfg
        self.log_path = Path(log_path)
        self.iteration = iteration
        self.on_step = on_step
        self.step = 0
        self.seconds = 0.0  # wall time inside reward calls, frozen-solver sampling included

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        t0 = time.perf_counter()
        local = [completion_text(x) for x in completions]
        # under several training processes each holds a slice of the step's batch: score the
        # whole batch once, on the main process, and hand every process its slice
        slices = distributed.gather(local)
        rewards = distributed.on_main(self._score, [t for part in slices for t in part])
        start = sum(len(part) for part in slices[:distributed.rank()])
        self.seconds += time.perf_counter() - t0
        self.step += 1
        crash_point("challenger:mid")
        return rewards[start:start + len(local)]

    def _score(self, texts: list[str]) -> list[float]:
        """Rewards of one step's whole batch; appends its rows to the step log."""
        c = self.cfg.challenger
        questions = [extract_question(t) for t in texts]
        own_answers = [extract_boxed(t) for t in texts]
        valid = [q is not None and a is not None for q, a in zip(questions, own_answers,
                                                                 strict=True)]
        valid_idx = [i for i, v in enumerate(valid) if v]
        valid_qs = [questions[i] for i in valid_idx]

        seed = self.cfg.run.seed * 100_003 + self.iteration * 1_009 + self.step
        answers, votes = solver_votes(self.solver, valid_qs, self.cfg, seed)
        p_hats: list[float | None] = [None] * len(texts)
        for k, i in enumerate(valid_idx):
            p_hats[i] = votes[k].p_hat
        parts = challenger_rewards([questions[i] if valid[i] else None
                                    for i in range(len(texts))], p_hats,
                                   tau=c.tau, variant=c.bleu_variant, form=c.reward_form,
                                   lam=c.repetition_lambda, clip=c.clip_reward,
                                   invalid_reward=c.invalid_reward)
        rewards = [p.reward for p in parts]
        global_step = (self.iteration - 1) * c.steps + self.step
        rows = [dict(iteration=self.iteration, step=self.step, global_step=global_step,
                     completion=texts[i][:4000],
                     question=questions[i], challenger_answer=own_answers[i], valid=False,
                     answers=[], label=None, p_hat=None, num_groups=0, top2_margin=None,
                     parse_rate=None, r_unc=None, r_rep=None, reward=rewards[i])
                for i in range(len(texts))]
        for k, i in enumerate(valid_idx):
            v = votes[k]
            rows[i].update(valid=True, answers=answers[k], label=v.label, p_hat=v.p_hat,
                           num_groups=v.num_groups, top2_margin=v.top2_margin,
                           parse_rate=v.parse_rate, r_unc=parts[i].uncertainty,
                           r_rep=parts[i].repetition)

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as f:
            f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        if self.on_step is not None:
            self.on_step(step_summary(rows))
        return rewards


def step_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per-step means of the reward components over one step's completions."""
    valid = [r for r in rows if r["valid"]]

    def mean(key: str) -> float:
        vals = [r[key] for r in valid if r[key] is not None]
        return sum(vals) / len(vals) if vals else 0.0

    return {
        "step": rows[0]["step"] if rows else 0,
        "completions": len(rows),
        "valid_rate": len(valid) / len(rows) if rows else 0.0,
        "mean_p_hat": mean("p_hat"),
        "mean_r_unc": mean("r_unc"),
        "mean_r_rep": mean("r_rep"),
        "mean_reward": sum(r["reward"] for r in rows) / len(rows) if rows else 0.0,
        "mean_parse_rate": mean("parse_rate"),
    }


def sample_pool(challenger: Generator, cfg: RZeroConfig, seed: int,
                chunk: int = 64) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """N questions from the challenger; malformed ones dropped, exact duplicates removed."""
    from tqdm.auto import tqdm

    from rzero.prompts import challenger_chat

    c = cfg.challenger
    params = SamplingParams(temperature=c.pool_temperature, top_p=c.pool_top_p, top_k=0,
                            max_new_tokens=c.max_completion_length, seed=seed)
    prompt = challenger_chat(c.prompt_file)
    texts: list[str] = []
    with tqdm(total=c.pool_size, desc="pool", unit="q", leave=False) as bar:
        for start in range(0, c.pool_size, chunk):
            n = min(chunk, c.pool_size - start)
            texts += challenger.generate([prompt], n, replace(params, seed=seed + start))[0]
            bar.update(n)
            crash_point("pool:mid")
    seen: set[str] = set()
    pool, malformed, duplicates = [], 0, 0
    for t in texts:
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
    return pool, {"sampled": len(texts), "malformed": malformed, "duplicates": duplicates,
                  "kept": len(pool)}
