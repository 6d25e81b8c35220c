"""The run folder of the solver task (`rzero.rundir.Layout`)."""

from __future__ import annotations

from rzero.rundir.folder import Layout

# the base's evaluation once (iteration 0), then per iteration the fixed questions' labels,
# the solver's GRPO phase and the evaluation
LAYOUT = Layout(
    name="solver",
    phases=("labelling", "solver", "eval"),
    outputs={"labelling": ("labelled.jsonl",), "solver": ("solver",), "eval": ("eval",)},
    rows=("labelled",),
    training=("solver",),
    pushed=("solver",),
)
