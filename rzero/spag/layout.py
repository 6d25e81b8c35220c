"""The run folder of SPAG (`rzero.rundir.Layout`)."""

from __future__ import annotations

from rzero.rundir.folder import Layout

# the imitation of a teacher's games once (iteration 0), then per epoch the self-play games,
# the offline update, the tournament and the evaluation
LAYOUT = Layout(
    name="spag",
    phases=("imitation", "games", "train", "tournament", "eval"),
    outputs={
        "imitation": ("teacher_games.jsonl", "imitation"),
        "games": ("games.jsonl",),
        "train": ("model",),
        "tournament": ("tournament.jsonl",),
        "eval": ("eval",),
    },
    rows=("games", "tournament", "teacher_games"),
    pushed=("imitation", "train"),
)
