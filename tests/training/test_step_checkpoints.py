"""Step checkpoints inside a GRPO phase (`rzero.training.steps`): SIGTERM finishes the update
in progress, writes a checkpoint and raises `Preempted`; the same call again resumes there
and ends with the weights, log and reward state of a run that was never stopped."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from transformers import TrainerCallback

from rzero.config import SolverConfig
from rzero.engine.models import load_model, load_tokenizer
from rzero.training.grpo import train_grpo
from rzero.training.steps import STATE_FILE, Preempted, StepState, latest_checkpoint


class SeededReward(StepState):
    """A reward that depends on how many times it was called (as the challenger's frozen
    solver votes are seeded by the step): a resume that lost the count scores differently."""

    __name__ = "seeded"
    checkpointed = ("step", "summaries")

    def __init__(self, on_step=None):
        self.step = 0
        self.summaries: list[dict] = []
        self.on_step = on_step

    def __call__(self, prompts, completions, **kwargs):
        self.step += 1
        g = torch.Generator().manual_seed(self.step)
        noise = torch.rand(len(completions), generator=g).tolist()
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        self.summaries.append({"step": self.step, "n": len(texts)})
        if self.on_step is not None:
            self.on_step(self.summaries[-1])
        return [(len(t) % 5) / 5.0 + n for t, n in zip(texts, noise, strict=True)]


class SigtermDuring(TrainerCallback):
    """Sends this process SIGTERM as update `update` begins (so it arrives mid-update)."""

    def __init__(self, update: int):
        self.update = update

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.update:
            os.kill(os.getpid(), signal.SIGTERM)


ROLE = SolverConfig(
    steps=3,
    group_size=2,
    prompts_per_step=4,
    prompts_per_update=2,  # 2 updates per rollout: update 3 is the first half of rollout 2
    learning_rate=1e-3,
    max_completion_length=8,
    micro_batch_size=2,
)


def train(checkpoint, work, callbacks=(), save_steps=0):
    model = load_model(str(checkpoint), dtype="float32", device="cpu")
    tokenizer = load_tokenizer(str(checkpoint))
    rows = [{"prompt": [{"role": "user", "content": f"Count to {i}."}]} for i in range(6)]
    summaries: list[dict] = []
    reward = SeededReward(on_step=summaries.append)
    try:
        stats = train_grpo(
            model,
            tokenizer,
            rows,
            [reward],
            ROLE,
            work,
            seed=7,
            callbacks=callbacks,
            save_steps=save_steps,
        )
    except Preempted as exc:
        return exc, model, reward, summaries
    return stats, model, reward, summaries


def weights(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_sigterm_mid_rollout_saves_and_the_rerun_ends_where_an_uninterrupted_run_does(
    tiny_checkpoint, tmp_path
):
    handler = signal.getsignal(signal.SIGTERM)
    whole, model, reward, summaries = train(tiny_checkpoint, tmp_path / "whole")
    expected = weights(model)
    assert reward.step == 3 and [r["update"] for r in whole.log] == [1, 3, 5]  # a rollout each

    work = tmp_path / "stopped"
    stopped, _, _, _ = train(tiny_checkpoint, work, callbacks=[SigtermDuring(3)])
    assert isinstance(stopped, Preempted)
    assert (stopped.update, stopped.total) == (3, 6)  # the update in progress finished
    assert stopped.checkpoint == latest_checkpoint(work) == work / "checkpoint-3"
    assert (work / "checkpoint-3" / STATE_FILE).is_file()
    assert (work / "checkpoint-3" / "rollout-rank0.pt").is_file()
    assert "stopped by SIGTERM" in str(stopped) and "rerun the same command" in str(stopped)
    # outside the phase SIGTERM is what it was before
    assert signal.getsignal(signal.SIGTERM) is handler

    resumed, model, reward, replayed = train(tiny_checkpoint, work)
    assert not isinstance(resumed, Preempted)
    assert resumed.steps == 3  # updates 4-6: the rerun resumed, it did not start over
    got = weights(model)
    assert all(torch.equal(got[n], expected[n]) for n in expected)
    assert reward.step == 3  # rollout 2 was not sampled again
    assert replayed == summaries  # the summaries before the stop reached on_step again
    assert [r["update"] for r in resumed.log] == [r["update"] for r in whole.log]
    assert [r["loss"] for r in resumed.log] == [r["loss"] for r in whole.log]


def test_every_save_steps_keeps_only_the_latest_complete_checkpoint(tiny_checkpoint, tmp_path):
    work = tmp_path / "work"
    stats, _, _, _ = train(tiny_checkpoint, work, save_steps=2)
    assert sorted(p.name for p in work.glob("checkpoint-*")) == ["checkpoint-6"]
    # an incomplete checkpoint (no state file: the save was cut short) is never resumed
    (work / "checkpoint-8").mkdir()
    assert latest_checkpoint(work) == work / "checkpoint-6"
    assert len(stats.log) == 3


@pytest.mark.parametrize("update", [2, 5])
def test_a_stop_at_a_rollout_boundary_or_late_resumes_to_the_same_weights(
    tiny_checkpoint, tmp_path, update
):
    _, model, _, _ = train(tiny_checkpoint, tmp_path / "whole")
    expected = weights(model)
    work = tmp_path / "stopped"
    stopped, _, _, _ = train(tiny_checkpoint, work, callbacks=[SigtermDuring(update)])
    assert isinstance(stopped, Preempted) and stopped.update == update
    resumed, model, _, _ = train(tiny_checkpoint, work)
    assert resumed.steps == 6 - update
    got = weights(model)
    assert all(torch.equal(got[n], expected[n]) for n in expected)


class CountUpdates(TrainerCallback):
    updates = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.updates += 1


# SPIN's DPO and SFT updates and SPAG's offline one (`run_trainer`): the same mechanism
PAIRS = [
    [{"role": "user", "content": f"What is {a} + {b}?"}]
    for a, b in [(2, 3), (10, 7), (4, 4), (31, 9), (6, 1), (12, 12), (5, 5), (8, 1)]
]
CHOSEN = [f"The answer is \\boxed{{{i}}}." for i in range(8)]
REJECTED = [f"{i} maybe" for i in range(8)]


def offline(kind: str, checkpoint, work, callbacks=()):
    """One of the three preference-style updates (4 updates of 2 rows), with `callbacks`
    added to its trainer; (result or Preempted, the model)."""
    from transformers import AutoModelForCausalLM

    from rzero.config import SpagConfig, SpinConfig
    from rzero.training import preference
    from rzero.training.offline import train_weighted

    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    tokenizer = load_tokenizer(str(checkpoint))
    spin = SpinConfig(
        batch_size=2,
        micro_batch_size=1,
        epochs=1.0,
        learning_rate=1e-3,
        optimizer="adamw_torch",
        warmup_ratio=0.0,
        max_length=64,
    )
    original = preference.run_trainer

    def with_callbacks(cls, *args, **kw):  # the test's SIGTERM sender rides along
        class Sending(cls):
            def __init__(self, *a, callbacks=(), **k):
                super().__init__(*a, callbacks=[*callbacks, *extra], **k)

        return original(Sending, *args, **kw)

    extra = list(callbacks)
    preference.run_trainer = with_callbacks
    try:
        if kind == "dpo":
            out = preference.train_pairs(
                model, tokenizer, PAIRS, CHOSEN, REJECTED, spin, work, lam=0.5
            )
        elif kind == "sft":
            out = preference.train_sft(model, tokenizer, PAIRS, CHOSEN, spin, work, updates=4)
        else:
            import rzero.training.offline as off

            off.run_trainer = with_callbacks
            spag = SpagConfig(batch_size=2, micro_batch_size=1, learning_rate=1e-3, max_length=64)

            def loss(token, mask, c):
                return -(token * mask).sum() / mask.sum() * c["weight"].mean()

            out = train_weighted(
                model, tokenizer, PAIRS, CHOSEN, {"weight": [1.0] * 8}, loss, spag, work, updates=4
            )
    except Preempted as exc:
        out = exc
    finally:
        preference.run_trainer = original
        import rzero.training.offline as off

        off.run_trainer = original
    return out, model


@pytest.mark.parametrize("kind", ["dpo", "sft", "offline"])
def test_spin_and_spag_updates_resume_inside_the_phase_to_the_same_weights(
    tiny_checkpoint, tmp_path, kind
):
    whole, model = offline(kind, tiny_checkpoint, tmp_path / "whole")
    expected = weights(model)
    work = tmp_path / "stopped"
    stopped, _ = offline(kind, tiny_checkpoint, work, callbacks=[SigtermDuring(2)])
    assert isinstance(stopped, Preempted) and (stopped.update, stopped.total) == (2, 4)
    assert latest_checkpoint(work) == work / "checkpoint-2"
    counted = CountUpdates()
    resumed, model = offline(kind, tiny_checkpoint, work, callbacks=[counted])
    assert counted.updates == 2  # updates 3 and 4: the rerun resumed, it did not start over
    got = weights(model)
    assert all(torch.equal(got[n], expected[n]) for n in expected)
    assert [r["loss"] for r in resumed["train_log"]] == [r["loss"] for r in whole["train_log"]]


def test_the_development_curve_does_not_rescore_its_start_on_a_resume():
    from types import SimpleNamespace

    from rzero.selfplay.curve import DevCurve

    curve = DevCurve.__new__(DevCurve)  # no generator: a resumed curve must not evaluate
    curve.load_state_dict(
        {"points": [{"update": 0, "dev_pass@1": 0.1}, {"update": 64, "dev_pass@1": 0.4}]}
    )
    curve.every = 16
    curve.on_train_begin(None, SimpleNamespace(global_step=64), None)
    assert [p["update"] for p in curve.points] == [0, 64]
    curve.on_train_begin(None, SimpleNamespace(global_step=70), None)  # between two scores
    assert [p["update"] for p in curve.points] == [0, 64]
