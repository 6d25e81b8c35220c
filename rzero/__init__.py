"""rzero: R-Zero self-evolving reasoning (Challenger / Solver self-play with GRPO)."""

__version__ = "0.1.0"
