"""The run folder of R-Zero's math loop (`rzero.rundir.Layout`)."""

from __future__ import annotations

from rzero.rundir.folder import Layout

# in run order; coerror and crossplay are the self-play audit's (rzero.selfplay.watch), and
# crossplay is committed under the last iteration, once, at the end of the run; anchors.jsonl
# and mixture.jsonl are guided self-play's (`rzero.math.guidance`): the anchors' curriculum and
# the solver's prompt draws
LAYOUT = Layout(
    name="math",
    phases=("challenger", "pool", "labelling", "solver", "eval", "audit", "coerror", "crossplay"),
    outputs={
        "challenger": ("challenger", "challenger_steps.jsonl"),
        "pool": ("pool.jsonl",),
        "labelling": ("labelled.jsonl", "anchors.jsonl"),
        "solver": ("solver", "mixture.jsonl"),
        "eval": ("eval",),
        "audit": (),
        "coerror": ("coerror.json",),
        "crossplay": ("crossplay.json",),
    },
    rows=("challenger_steps", "pool", "labelled", "anchors", "mixture"),
    training=("challenger", "solver"),
    pushed=("challenger", "solver"),
    torn_tail=("challenger_steps",),
)
