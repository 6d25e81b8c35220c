"""The GRPOTrainer rzero runs (`trainer_class`): TRL's, with the rollout buffer in its step
checkpoints (`rzero.training.steps`), and on CPU with faster per-token log-probabilities and
micro-batches of completions of similar length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rzero.engine import distributed
from rzero.engine.models import quiet_save

# TRL loss types whose update does not depend on how one update's rows are grouped into
# equal micro-batches: dapo normalises by the rollout's token count, grpo and dr_grpo sum
# per-sequence terms (bnpo normalises by each micro-batch's own tokens, so grouping matters)
SORTABLE_LOSSES = ("dapo", "grpo", "dr_grpo")


def by_completion_length(rows: dict[str, Any]) -> dict[str, Any]:
    """A rollout's per-row values (tensors and lists, as TRL's `shuffle_sequence_dict` takes
    them) reordered by completion length, shortest first."""
    order = torch.argsort(rows["completion_mask"].sum(dim=1), stable=True)

    def permute(v):
        if v is None or (isinstance(v, torch.Tensor) and v.ndim == 0):
            return v
        if isinstance(v, torch.Tensor):
            return v[order]
        return [v[i] for i in order.tolist()]

    return {key: permute(v) for key, v in rows.items()}


def trainer_class(cpu_logps: bool):
    """TRL's GRPOTrainer with the rollout buffer in its step checkpoints, and with `cpu_logps`
    a subclass of it whose per-token log-probabilities
    come from `rzero.training.logprobs.completion_logps` (the prompts' shared prefix run once,
    one log-softmax over the completion positions, each micro-batch cut to its longest
    completion: TRL's numbers, faster on a CPU) where the model and inputs allow it (a plain
    decoder on CPU in one process, text only; anything else goes through TRL's own
    forward), and whose micro-batches hold completions of similar length."""
    from trl import GRPOTrainer

    class ResumableGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose step checkpoints also hold the rollout buffer and the position in
        it (`rollout-rank{R}.pt`, one per process), so a resume in the middle of a rollout
        trains on the same completions instead of sampling new ones
        (`rzero.training.steps`)."""

        def _save_checkpoint(self, model, trial):
            with quiet_save():
                super()._save_checkpoint(model, trial)
            folder = (
                Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
            )
            folder.mkdir(parents=True, exist_ok=True)
            torch.save(
                {"step": self._step, "buffer": self._buffered_inputs},
                folder / f"rollout-rank{distributed.rank()}.pt",
            )

        def _load_optimizer_and_scheduler(self, checkpoint):
            super()._load_optimizer_and_scheduler(checkpoint)
            if checkpoint is not None:
                saved = torch.load(
                    Path(checkpoint) / f"rollout-rank{distributed.rank()}.pt", weights_only=False
                )
                self._step, self._buffered_inputs = saved["step"], saved["buffer"]

        def _issue_warnings_after_load(self, load_result):
            """Transformers' warning about keys missing from a resumed checkpoint, without the
            tied ones (an output layer that is the input embedding is saved once)."""
            names = {n for n, _ in self.model.named_parameters(remove_duplicate=False)}
            tied = names - {n for n, _ in self.model.named_parameters()}
            missing = [k for k in load_result.missing_keys if k not in tied]
            super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))

    if not cpu_logps:
        return ResumableGRPOTrainer
    from rzero.training.logprobs import completion_logps, supports_cpu_logps

    class CpuLogpsGRPOTrainer(ResumableGRPOTrainer):
        def _prepare_inputs(self, generation_batch):
            """With one update per rollout, the rollout's rows go to the micro-batches
            sorted by completion length instead of shuffled, so each micro-batch's forward
            is cut to its own longest completion (`completion_logps`). The update is the
            same: every micro-batch has as many rows and is part of the one update, and
            the loss is normalised over the whole rollout (`SORTABLE_LOSSES`)."""
            args = self.args
            if (
                not self.model.training
                or self.num_iterations != 1
                or args.steps_per_generation != args.gradient_accumulation_steps
                or self.loss_type not in SORTABLE_LOSSES
            ):
                return super()._prepare_inputs(generation_batch)
            import trl.trainer.grpo_trainer as trl_grpo

            shuffle = trl_grpo.shuffle_sequence_dict
            trl_grpo.shuffle_sequence_dict = by_completion_length
            try:
                return super()._prepare_inputs(generation_batch)
            finally:
                trl_grpo.shuffle_sequence_dict = shuffle

        def _get_per_token_logps_and_entropies(
            self,
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=None,
            compute_entropy=False,
            compute_aux_loss=False,
            **media,
        ):
            if (
                compute_aux_loss
                or any(v is not None for v in media.values())
                or distributed.world_size() > 1
                or not supports_cpu_logps(model)
            ):
                return super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size,
                    compute_entropy,
                    compute_aux_loss,
                    **media,
                )
            batch_size = batch_size or input_ids.size(0)
            logps, entropies = [], []
            for start in range(0, input_ids.size(0), batch_size):
                with self.accelerator.autocast():
                    lp, ent = completion_logps(
                        model,
                        input_ids[start : start + batch_size],
                        attention_mask[start : start + batch_size],
                        logits_to_keep,
                        temperature=self.temperature,
                        compute_entropy=compute_entropy,
                    )
                logps.append(lp)
                entropies.append(ent)
            return (
                torch.cat(logps, dim=0),
                torch.cat(entropies, dim=0) if compute_entropy else None,
                None,
            )

    return CpuLogpsGRPOTrainer
