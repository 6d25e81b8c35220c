"""`rzero plan` for a code recipe: both code loops are R-Zero's alternation of GRPO roles, so
their schedule is counted as the math loop's (`rzero.math.plan`), then where each process
runs."""

from __future__ import annotations

from rzero.config import RZeroConfig
from rzero.engine.launch import placement_markdown
from rzero.math.plan import plan_markdown


def code_plan_markdown(cfg: RZeroConfig, source: str | None = None) -> str:
    return plan_markdown(cfg, source) + "\n" + placement_markdown(cfg, source)
