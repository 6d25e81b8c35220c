"""The run folder of SPIN (`rzero.rundir.Layout`)."""

from __future__ import annotations

from rzero.rundir.folder import Layout

# the SFT plateau θ_0 and the frozen discriminator once (iteration 0), then per iteration the opponent's answers,
# the training, the held-out dynamics and the evaluation
LAYOUT = Layout(
    name="spin",
    phases=("plateau", "discriminator", "generate", "train", "dynamics", "eval"),
    outputs={
        "plateau": ("plateau",),
        "discriminator": ("discriminator",),
        "generate": ("pairs.jsonl",),
        "train": ("model",),
        "dynamics": ("heldout.jsonl",),
        "eval": ("eval",),
    },
    rows=("pairs", "heldout"),
    pushed=("plateau", "discriminator", "train"),
)
