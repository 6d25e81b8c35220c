"""The run folder of SPIN (`rzero.rundir.Layout`)."""

from __future__ import annotations

from rzero.rundir.folder import Layout

# the frozen discriminator once (iteration 0), then per iteration the opponent's answers,
# the training, the held-out dynamics and the evaluation
LAYOUT = Layout(
    name="spin",
    phases=("discriminator", "generate", "train", "dynamics", "eval"),
    outputs={
        "discriminator": ("discriminator",),
        "generate": ("pairs.jsonl",),
        "train": ("model",),
        "dynamics": ("heldout.jsonl",),
        "eval": ("eval",),
    },
    rows=("pairs", "heldout"),
    pushed=("discriminator", "train"),
)
