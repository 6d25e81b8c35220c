"""A training phase's learning curve on a development draw, and where it stops rising.

DevCurve   a transformers TrainerCallback: greedy pass@1 and the well-formed rate on the
           development draw before the first update, every `every` updates and after the
           last, sampled from the weights as they are (the run's generator over the
           training model, its bf16 copy refreshed at each call). With `patience`, it ends the training once that many scores in
           a row bring no new best (`plateaued`), and with `keep_best` it saves the weights
           of each new best there: the plateau's checkpoint.

The solver task draws it as its curve; SPIN's plateau phase (`spin.plateau_updates`) trains
SFT until it stops rising.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rzero.engine import distributed
from rzero.evaluation import evaluate
from rzero.training.steps import StepState


def plateaued(scores: list[float], patience: int) -> bool:
    """True when the last `patience` scores are none of them above the best before them: the
    curve stopped rising (ties do not count as rising)."""
    if patience <= 0 or len(scores) <= patience:
        return False
    return max(scores[-patience:]) <= max(scores[:-patience])


def best_point(points: list[dict[str, float]]) -> dict[str, float] | None:
    """The earliest point with the highest development pass@1."""
    best = None
    for p in points:
        if best is None or p["dev_pass@1"] > best["dev_pass@1"]:
            best = p
    return best


class DevCurve(TrainerCallback, StepState):
    """Greedy pass@1 on `items` (the development draw) at update 0 and every `every`
    updates, and after the last; `points` holds {update, dev_pass@1, dev_well_formed, dev_n}.
    With `patience` > 0 it stops the training at the plateau (`plateaued`); with
    `keep_best` it saves the model and tokenizer of each new best there."""

    checkpointed = ("points",)

    def __init__(
        self,
        generator,
        name: str,
        items: list[dict[str, Any]],
        cfg,
        every: int,
        *,
        patience: int = 0,
        keep_best: str | Path | None = None,
        tokenizer=None,
        prompt_path: str | None = None,
    ):
        self.generator, self.name, self.items = generator, name, items
        self.cfg, self.every = cfg, every
        self.patience, self.tokenizer = patience, tokenizer
        self.prompt_path = prompt_path  # the solver prompt the evaluation uses; None: default
        self.keep_best = Path(keep_best) if keep_best is not None else None
        self.points: list[dict[str, float]] = []

    def score(self, update: int, model=None) -> None:
        if self.points and self.points[-1]["update"] == update:
            return
        cfg = self.cfg
        result = evaluate(
            self.generator,
            {self.name: self.items},
            max_new_tokens=cfg.eval.max_new_tokens,
            seed=cfg.run.seed,
            prompt_path=self.prompt_path,
            direction=cfg.labeling.equivalence,
        )
        items = result["items"]
        self.points.append(
            {
                "update": update,
                "dev_pass@1": result["average"],
                "dev_well_formed": sum(r["predictions"][0] is not None for r in items) / len(items),
                "dev_n": len(items),
            }
        )
        newest_best = best_point(self.points) is self.points[-1]
        if distributed.is_main():
            # one line per point, so the curve can be read while it is drawn
            logging.getLogger("rzero").info(
                "%s after update %d: pass@1 %.3f on %d items%s",
                self.name,
                update,
                result["average"],
                len(items),
                " (best so far)" if newest_best and len(self.points) > 1 else "",
            )
        if self.keep_best is not None and model is not None and newest_best:
            self.save(model)

    def save(self, model) -> None:
        """The weights (and tokenizer) at `keep_best`, written beside it and renamed: the
        folder holds one whole checkpoint or none."""
        target = self.keep_best
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)

    def stop_here(self) -> bool:
        return plateaued([p["dev_pass@1"] for p in self.points], self.patience)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        # the phase's start; a resume after a scored update finds it scored, and one
        # between two scores adds no point off the grid (the patience counts grid points)
        if state.global_step % self.every == 0:
            self.score(state.global_step, model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0:
            self.score(state.global_step, model)
            if self.stop_here():
                control.should_training_stop = True

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.score(state.global_step, model)
