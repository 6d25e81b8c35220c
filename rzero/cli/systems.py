"""The one place a task name becomes a system: `run.task` -> what runs it. Each system's
package declares its `System` (layout, iterate, plan, report, ablation variants) in its
`__init__`, which loads no model or trainer."""

from __future__ import annotations

import rzero.code
import rzero.math
import rzero.solver_task
import rzero.spag
import rzero.spin
from rzero.config import RZeroConfig
from rzero.rundir.run import System

SYSTEMS: dict[str, System] = {
    "math": rzero.math.SYSTEM,
    "rzero_code": rzero.code.RZERO_CODE_SYSTEM,
    "azr": rzero.code.AZR_SYSTEM,
    "spin": rzero.spin.SYSTEM,
    "spag": rzero.spag.SYSTEM,
    "solver": rzero.solver_task.SYSTEM,
}


def system_of(cfg: RZeroConfig) -> System:
    """The system that runs `cfg` (its `run.task`, checked by the config's schema)."""
    return SYSTEMS[cfg.run.task]
