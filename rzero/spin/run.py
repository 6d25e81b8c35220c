"""SPIN's iterations (Chen et al. 2024; seed 000 §1.3), written as the paper's algorithm.

    plateau 0          (optional) θ_0 from the base: plain SFT on the training rows until
                       the development draw's pass@1 stops rising (`spin.plateau_updates`;
                       the paper starts SPIN from an SFT model); otherwise θ_0 = the base
    evaluation 0       θ_0 once (iteration 0), and its log-likelihood of the held-out data
                       answers
    discriminator 0    (optional) the frozen stronger discriminator: θ_0 plus
                       `spin.discriminator_steps` SFT updates on the training data
    for k = 1..K (the opponent θ_{k−1}):
        generate       θ_{k−1} answers every training and held-out prompt once: y′
        train          θ_k = argmin L_SPIN(θ, θ_{k−1}) over this iteration's pairs (y, y′)
                       merged with earlier iterations' (`merge_pairs`), from θ_{k−1}, with
                       TRL's DPOTrainer (sigmoid loss at β = λ_k, reference θ_{k−1});
                       `spin.objective: sft` trains the same updates with plain SFT on y
        dynamics       on held-out pairs: θ_k's discriminator accuracy and margin against
                       θ_{k−1}, its held-out loss and log-likelihood of y, and the frozen
                       discriminator's accuracy on the same pairs (`rzero.spin.dynamics`)
        evaluation     the benchmarks of `eval`, paired with every earlier iteration's
    θ_k is the next iteration's opponent.

Each phase runs through `rzero.rundir.PhaseRunner` in the run folder (markers, resume,
timing, trackers); the evaluation gets the self-play watch's increment curve and stop rules,
and every commit rebuilds report.md / report.html (`rzero.spin.report`). Departures from the
official scripts are listed in docs/parity.md.
"""

from __future__ import annotations

import dataclasses
import shutil
from functools import partial
from pathlib import Path

from rzero import preflight
from rzero.config import ConfigError, RZeroConfig
from rzero.data.sft import load_sft, split
from rzero.evaluation import BenchmarkError, evaluation_phase, load_benchmark, score_completion
from rzero.generation.backends import make_generator
from rzero.generation.interface import SamplingParams
from rzero.io import write_jsonl_atomic
from rzero.labeling.answers import extract_boxed
from rzero.rundir import Run, release_memory
from rzero.selfplay import watch
from rzero.selfplay.curve import DevCurve, best_point
from rzero.spin.dynamics import (
    drift_warning,
    fixed_point_warning,
    heldout_dynamics,
    loglik_change,
    loglik_summary,
    stall_warning,
)
from rzero.spin.layout import LAYOUT
from rzero.spin.objective import lambda_for, merge_pairs
from rzero.spin.report import rebuild
from rzero.stats import mean
from rzero.training.preference import pair_logprobs, train_pairs, train_sft, updates_for

LAST_UPDATES = 4  # the training summary averages TRL's log over the last updates


class SpinRun(Run):
    """SPIN on the run engine (`rzero.rundir.run.Run`)."""

    layout = LAYOUT

    def check_inputs(self) -> None:
        preflight.check_common(self.cfg)  # outside inputs, before anything is written
        s = self.cfg.spin
        rows = load_sft(s.data, s.heldout + s.prompts)  # a bad set fails before any write
        self.train_rows, self.heldout_rows = split(rows, s.heldout)
        if s.plateau_updates:
            try:
                self.dev_name, dev = load_benchmark(s.plateau_dev)
            except (BenchmarkError, ValueError) as exc:
                raise ConfigError(f"spin.plateau_dev={s.plateau_dev!r}: {exc}") from None
            self.dev_items = dev[: s.plateau_dev_items]

    def before_commit(self) -> list:
        return [partial(watch.after_phase, self.cfg, self.rundir)]

    def rebuild(self) -> None:
        rebuild(self.rundir, self.cfg)

    def logprobs(self, checkpoint: str, prompts: list, *responses: list[str]) -> list[list[tuple]]:
        """(summed log-prob, tokens) of each response of each list under one checkpoint,
        loaded once, then freed."""
        model, tokenizer = self.load(checkpoint)
        s = self.cfg.spin
        try:
            return [
                pair_logprobs(
                    model,
                    tokenizer,
                    prompts,
                    answers,
                    max_length=s.max_length,
                    batch_size=s.micro_batch_size,
                )
                for answers in responses
            ]
        finally:
            del model
            release_memory()

    # ------------------------------------------------------------ the phases

    def eval_phase(self, k: int, checkpoint: str) -> dict:
        return evaluation_phase(
            self.phases.generator(checkpoint), self.cfg, self.rundir.iter_dir(k) / "eval"
        ) | {"checkpoint": self.rundir.relative(checkpoint)}

    def base_dynamics_phase(self, k: int, start: str) -> dict:
        """Iteration 0: θ_0's log-likelihood of the held-out data answers."""
        held = self.heldout_rows
        [scored] = self.logprobs(start, [r.prompt for r in held], [r.response for r in held])
        write_jsonl_atomic(
            self.rundir.iter_dir(k) / "heldout.jsonl",
            [
                {"id": r.id, "policy_chosen": lp, "chosen_tokens": n}
                for r, (lp, n) in zip(held, scored, strict=True)
            ],
        )
        ll = loglik_summary([n for _, n in scored], [lp for lp, _ in scored])
        return {"loglik": ll, "metrics": {"loglik_per_token": ll["per_token"], "pairs": len(held)}}

    def plateau_phase(self, k: int) -> dict:
        """θ_0: plain SFT of the base on the training rows' data answers at a constant
        learning rate, the development draw scored greedily every `spin.plateau_every`
        updates, stopped once `spin.plateau_patience` scores in a row bring no new best (or
        after `spin.plateau_updates`). θ_0 is the weights of the best score: the base itself
        when no update beat it."""
        s, cfg, it = self.cfg.spin, self.cfg, self.rundir.iter_dir(k)
        out, work = it / "plateau", it / ".trainer_plateau"
        model, tokenizer = self.load(self.base)
        curve = DevCurve(
            make_generator(cfg, self.base, model=model, tokenizer=tokenizer),
            self.dev_name,
            self.dev_items,
            cfg,
            every=s.plateau_every,
            patience=s.plateau_patience,
            keep_best=out,
            tokenizer=tokenizer,
        )
        result = train_sft(
            model,
            tokenizer,
            [r.prompt for r in self.train_rows],
            [r.response for r in self.train_rows],
            dataclasses.replace(s, lr_scheduler="constant"),
            work,
            updates=s.plateau_updates,
            seed=cfg.run.seed,
            model_cfg=cfg.model,
            report_to=cfg.run.report_to,
            desc="plateau sft",
            save_steps=cfg.run.save_steps,
            callbacks=[curve],
        )
        shutil.rmtree(work, ignore_errors=True)
        del model
        release_memory()
        best = best_point(curve.points)
        log = result["train_log"]
        return {
            "checkpoint": self.rundir.relative(out),
            "curve": curve.points,
            "train_log": [{"step": r["step"], "loss": r["loss"]} for r in log],
            "metrics": {
                "updates": result["updates"],
                "stopped": result["updates"] < s.plateau_updates,
                "best_update": best["update"],
                "dev_first": curve.points[0]["dev_pass@1"],
                "dev_best": best["dev_pass@1"],
                "dev_last": curve.points[-1]["dev_pass@1"],
                "final_loss": log[-1]["loss"] if log else None,
            },
        }

    def discriminator_phase(self, k: int, start: str) -> dict:
        """The frozen stronger discriminator: θ_0 plus a fixed number of SFT updates on the
        training rows' data answers, trained once."""
        s, it = self.cfg.spin, self.rundir.iter_dir(k)
        model, tokenizer = self.load(start)
        out = it / "discriminator"
        work = it / ".trainer_discriminator"
        result = train_sft(
            model,
            tokenizer,
            [r.prompt for r in self.train_rows],
            [r.response for r in self.train_rows],
            s,
            work,
            updates=s.discriminator_steps,
            seed=self.cfg.run.seed,
            model_cfg=self.cfg.model,
            report_to=self.cfg.run.report_to,
            desc="discriminator",
            save_to=out,
            save_steps=self.cfg.run.save_steps,
        )
        shutil.rmtree(work, ignore_errors=True)
        return {
            "checkpoint": self.rundir.relative(out),
            "metrics": {
                "updates": result["updates"],
                "final_loss": result["train_log"][-1]["loss"] if result["train_log"] else None,
            },
        }

    def generate_phase(self, k: int, opponent: str) -> dict:
        """The opponent θ_{k−1} answers every training and held-out prompt once."""
        s, cfg = self.cfg.spin, self.cfg
        rows = [("train", r) for r in self.train_rows] + [("heldout", r) for r in self.heldout_rows]
        params = SamplingParams(
            temperature=s.temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=s.max_new_tokens,
            seed=cfg.run.seed * 7907 + k,
        )
        answers = self.phases.generator(opponent).generate([r.prompt for _, r in rows], 1, params)
        pairs, right, known = [], 0, 0
        for (where, r), [rejected] in zip(rows, answers, strict=True):
            rejected = rejected.strip()
            correct = None
            if r.answer is not None:
                correct = score_completion(rejected, r.answer, cfg.labeling.equivalence)
                known += 1
                right += correct
            pairs.append(
                {
                    "id": r.id,
                    "split": where,
                    "prompt": r.prompt,
                    "chosen": r.response,
                    "rejected": rejected,
                    "answer": r.answer,
                    "rejected_boxed": extract_boxed(rejected),
                    "rejected_correct": correct,
                    "identical": rejected == r.response,
                }
            )
        write_jsonl_atomic(self.rundir.iter_dir(k) / "pairs.jsonl", pairs)
        train = [p for p in pairs if p["split"] == "train"]
        identical_train = sum(p["identical"] for p in train)
        warning = fixed_point_warning(identical_train, len(train), k)
        return {
            "opponent": self.rundir.relative(opponent),
            "warnings": [warning] if warning else [],
            "metrics": {
                "pairs": len(train),
                "heldout": len(pairs) - len(train),
                "identical": sum(p["identical"] for p in pairs),
                "identical_train": identical_train,
                "opponent_correct_rate": right / known if known else None,
                "opponent_boxed_rate": mean([p["rejected_boxed"] is not None for p in pairs]),
                "mean_rejected_chars": mean([len(p["rejected"]) for p in pairs]),
            },
        }

    def train_phase(self, k: int, opponent: str) -> dict:
        """θ_k from θ_{k−1} on the merged pairs: SPIN (DPOTrainer) or the SFT control."""
        s, cfg, it = self.cfg.spin, self.cfg, self.rundir.iter_dir(k)
        by_iteration = {
            j: [p for p in self.rundir.rows(j, "pairs") if p["split"] == "train"]
            for j in range(1, k + 1)
            if self.rundir.marker(j, "generate")
        }
        merged = merge_pairs(by_iteration, s.pair_weights, k)
        lam = lambda_for(k, s.lambdas)
        model, tokenizer = self.load(opponent)
        out, work = it / "model", it / ".trainer_spin"
        prompts = [p["prompt"] for p in merged]
        chosen = [p["chosen"] for p in merged]
        common = dict(
            seed=cfg.run.seed + k,
            model_cfg=cfg.model,
            report_to=cfg.run.report_to,
            save_to=out,
            save_steps=cfg.run.save_steps,
        )
        if s.objective == "spin":
            result = train_pairs(
                model,
                tokenizer,
                prompts,
                chosen,
                [p["rejected"] for p in merged],
                s,
                work,
                lam=lam,
                desc=f"iter {k} spin",
                **common,
            )
        else:
            result = train_sft(
                model,
                tokenizer,
                prompts,
                chosen,
                s,
                work,
                updates=updates_for(len(merged), s),
                desc=f"iter {k} sft",
                **common,
            )
        shutil.rmtree(work, ignore_errors=True)
        log = result["train_log"]
        last = log[-LAST_UPDATES:]
        metrics = {
            "pairs": len(merged),
            "updates": result["updates"],
            "lambda": lam,
            "train_seconds": round(result["seconds"], 3),
            "final_loss": mean([r["loss"] for r in last], empty=None),
        }
        for key in ("rewards/accuracies", "rewards/margins"):
            if last and key in last[0]:
                metrics[f"train_{key.split('/')[1]}"] = mean([r[key] for r in last])
        return {
            "checkpoint": self.rundir.relative(out),
            "start": self.rundir.relative(opponent),
            "objective": s.objective,
            "lambda": lam,
            "from_iterations": {
                str(j): sum(p["generated_by"] == j for p in merged) for j in sorted(by_iteration)
            },
            "train_log": [
                {
                    "step": r["step"],
                    "loss": r["loss"],
                    **{
                        key: r[key]
                        for key in ("rewards/accuracies", "rewards/margins", "logps/chosen")
                        if key in r
                    },
                }
                for r in log
            ],
            "metrics": metrics,
        }

    def dynamics_phase(
        self, k: int, opponent: str, trained: str, discriminator: str | None
    ) -> dict:
        """Held-out pairs of iteration k scored by θ_k, θ_{k−1} and the frozen discriminator."""
        held = [p for p in self.rundir.rows(k, "pairs") if p["split"] == "heldout"]
        prompts = [p["prompt"] for p in held]
        models = {"policy": trained, "opponent": opponent} | (
            {"disc": discriminator} if discriminator else {}
        )
        scores = self.known_chosen(k, held)
        for name, checkpoint in models.items():
            sides = [
                side for side in ("chosen", "rejected") if side not in scores.setdefault(name, {})
            ]
            scored = self.logprobs(
                checkpoint, prompts, *([p[side] for p in held] for side in sides)
            )
            scores[name].update(zip(sides, scored, strict=True))
        rows = []
        for i, p in enumerate(held):
            row = {
                "id": p["id"],
                "identical": p["identical"],
                "chosen_tokens": scores["policy"]["chosen"][i][1],
                "rejected_tokens": scores["policy"]["rejected"][i][1],
            }
            for name in models:
                row[f"{name}_chosen"] = scores[name]["chosen"][i][0]
                row[f"{name}_rejected"] = scores[name]["rejected"][i][0]
            rows.append(row)
        write_jsonl_atomic(self.rundir.iter_dir(k) / "heldout.jsonl", rows)
        lam = lambda_for(k, self.cfg.spin.lambdas)
        dyn = heldout_dynamics(rows, lam)
        metrics = {
            "disc_accuracy": dyn["main"]["accuracy"],
            "margin": dyn["main"]["margin"],
            "heldout_loss": dyn["loss"],
            "loglik_per_token": dyn["loglik"]["per_token"],
            "pairs": len(rows),
        }
        if "discriminator" in dyn:
            metrics["frozen_disc_accuracy"] = dyn["discriminator"]["accuracy"]
        if self.rundir.marker(k - 1, "dynamics") is not None:
            dyn["loglik_change"] = loglik_change(self.rundir.rows(k - 1, "heldout"), rows)
            if dyn["loglik_change"]:
                metrics["loglik_change"] = dyn["loglik_change"]["delta"]
        warnings = [
            w for w in (stall_warning(dyn, k), drift_warning(dyn.get("loglik_change"), k)) if w
        ]
        return {"dynamics": dyn, "metrics": metrics, "warnings": warnings}

    def known_chosen(self, k: int, held: list[dict]) -> dict[str, dict[str, list[tuple]]]:
        """The held-out data answers' scores iteration k − 1 already computed: the opponent
        θ_{k−1} was that iteration's policy, and the frozen discriminator and the data
        answers do not change. Scored again they give the same numbers (same model, same
        batches), so iteration k scores only what is new: θ_k, and the opponent's answers."""
        if self.rundir.marker(k - 1, "dynamics") is None:
            return {}
        before = {r["id"]: r for r in self.rundir.rows(k - 1, "heldout")}
        if any(p["id"] not in before for p in held):
            return {}
        rows = [before[p["id"]] for p in held]
        known = {"opponent": {"chosen": [(r["policy_chosen"], r["chosen_tokens"]) for r in rows]}}
        if all("disc_chosen" in r for r in rows):
            known["disc"] = {"chosen": [(r["disc_chosen"], r["chosen_tokens"]) for r in rows]}
        return known

    # ------------------------------------------------------------ the algorithm

    def iterate(self) -> None:
        cfg, run_phase = self.cfg, self.phases.run
        start = self.base  # θ_0
        if cfg.spin.plateau_updates:
            start = run_phase(0, "plateau", self.plateau_phase)["checkpoint"]
        if cfg.eval.enabled:
            run_phase(0, "eval", self.eval_phase, start)
        run_phase(0, "dynamics", self.base_dynamics_phase, start)
        discriminator = None
        if cfg.spin.discriminator_steps:
            discriminator = run_phase(0, "discriminator", self.discriminator_phase, start)[
                "checkpoint"
            ]
        opponent = start
        for k in range(1, cfg.run.iterations + 1):
            run_phase(k, "generate", self.generate_phase, opponent)
            trained = run_phase(k, "train", self.train_phase, opponent)["checkpoint"]
            run_phase(k, "dynamics", self.dynamics_phase, opponent, trained, discriminator)
            if cfg.eval.enabled:
                run_phase(k, "eval", self.eval_phase, trained)
            opponent = trained  # the next iteration's opponent


def run_spin(cfg: RZeroConfig, run_dir: str | Path, *, fresh: bool = False) -> SpinRun:
    """`rzero iterate` for SPIN; returns the finished run."""
    run = SpinRun(cfg, run_dir, fresh=fresh)
    run.run()
    return run
