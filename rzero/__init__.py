"""rzero: R-Zero self-evolving reasoning (Challenger / Solver self-play with GRPO)."""

import warnings

__version__ = "0.1.0"

# The one place where third-party deprecation warnings are filtered, so a run's log shows the
# run. Each is raised inside a library on every step, with nothing a user of rzero can change:
# TRL 1.16 reads `model.is_gradient_checkpointing` at every rollout, a name transformers 5
# deprecates.
warnings.filterwarnings(
    "ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning
)
