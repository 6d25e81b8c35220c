"""The code tier's run folders: both loops use the math loop's phase names."""

from __future__ import annotations

import dataclasses

from rzero.rundir.folder import Layout

# the math loop's phase names, so the layout is the same: challenger (the proposer's GRPO
# phase), pool, labelling, solver, eval, audit
RZERO_CODE = Layout(
    name="rzero_code",
    phases=("challenger", "pool", "labelling", "solver", "eval", "audit"),
    outputs={
        "challenger": ("challenger", "challenger_steps.jsonl"),
        "pool": ("pool.jsonl",),
        "labelling": ("labelled.jsonl",),
        "solver": ("solver",),
        "eval": ("eval",),
        "audit": (),
    },
    rows=("challenger_steps", "pool", "labelled"),
    training=("challenger", "solver"),
    pushed=("challenger", "solver"),
    torn_tail=("challenger_steps",),
)
AZR = dataclasses.replace(RZERO_CODE, name="azr")
