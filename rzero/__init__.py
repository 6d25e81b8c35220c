"""rzero: competitive self-play of LLMs, built around R-Zero (Challenger / Solver self-play
with GRPO), with the code tier, Absolute Zero, SPIN, SPAG and the solver task on one run
engine.

The systems, one package each (run.py, report.py, plan.py, layout.py): math (R-Zero), code
(R-Zero on code, Absolute Zero), spin, spag, solver_task. What they run on: rundir (the run
engine: folder, phases, the `Run` base), generation and training (sampling and the
trainers), engine (models, servers, launch, trackers). The roles and their tools:
challenger, solver, labeling, executor, evaluation, audit, selfplay, data, prompts, config;
reports (what every report shares); cli (`rzero`).

Modules at the root:

    ablation.py   `rzero ablate`: a recipe's variants as resumable runs, compared
    rewards.py    R-Zero's rewards as TRL reward functions, for your own GRPOTrainer
    preflight.py  what a run reads from outside its config, checked before anything is written
    render.py     Markdown and HTML tables and pages, figures: written once
    stats.py      the interval arithmetic every report uses
    io.py         atomic writes and strict JSONL reads
    faults.py     crash points for the resume tests
"""

import warnings

__version__ = "0.1.0"

# The one place where third-party deprecation warnings are filtered, so a run's log shows the
# run. Each is raised inside a library on every step, with nothing a user of rzero can change:
# TRL 1.16 reads `model.is_gradient_checkpointing` at every rollout, a name transformers 5
# deprecates.
warnings.filterwarnings(
    "ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning
)
# DeepSpeed ZeRO-2 gathers with a torch.distributed name torch 2.13 deprecates, once per rank
warnings.filterwarnings(
    "ignore",
    message=r"`torch\.distributed\.all_gather_into_tensor` is deprecated",
    category=FutureWarning,
)
