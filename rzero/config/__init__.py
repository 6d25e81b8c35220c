"""The run's configuration: one YAML recipe, validated into `RZeroConfig` (SPEC §6).

    fields.py    ConfigError; `option` (a field's default, help, choices, range); `Section`
    sections.py  the sections every system shares: model, generation, audit, eval, watch,
                 run (with the trackers run.report_to names)
    roles.py     R-Zero's roles: roles, challenger, solver (GRPO options, LoRA), labeling
    schedule.py  one role's GRPO phase in TRL's batch arithmetic
    code.py      the section of the code tier (run.task rzero_code, azr)
    symmetric.py the sections of SPIN and SPAG
    solver_task.py the section of the solver-only task (run.task solver)
    guidance.py  the section of guided self-play (R-Few) on the math loop
    schema.py    RZeroConfig (the sections together and their cross-section checks), the
                 fingerprint that guards resume, loading with --set overrides (merged into a mapping,
                 or replacing it with :=), --fields

This package imports nothing else of rzero, so a recipe loads without torch or TRL.
`from rzero.config import ...` is the public face; the names below are all it offers.
"""

from rzero.config.code import CodeConfig
from rzero.config.fields import ConfigError, Section, option
from rzero.config.guidance import GuidanceConfig
from rzero.config.roles import (
    ChallengerConfig,
    GRPOSection,
    LabelingConfig,
    RolesConfig,
    SolverConfig,
)
from rzero.config.schema import (
    FINGERPRINTED_WHEN_SET,
    NOT_FINGERPRINTED,
    RZeroConfig,
    apply_override,
    config_from_dict,
    describe_fields,
    fingerprinted,
    load_config,
)
from rzero.config.sections import (
    TRACKERS,
    AuditConfig,
    EvalConfig,
    GenerationConfig,
    ModelConfig,
    RunConfig,
    WatchConfig,
    installed_trackers,
)
from rzero.config.solver_task import LABEL_SOURCES, SolverTaskConfig
from rzero.config.symmetric import SpagConfig, SpinConfig

__all__ = [
    "FINGERPRINTED_WHEN_SET",
    "NOT_FINGERPRINTED",
    "TRACKERS",
    "AuditConfig",
    "ChallengerConfig",
    "CodeConfig",
    "ConfigError",
    "EvalConfig",
    "GRPOSection",
    "GenerationConfig",
    "GuidanceConfig",
    "LabelingConfig",
    "ModelConfig",
    "RZeroConfig",
    "RolesConfig",
    "LABEL_SOURCES",
    "RunConfig",
    "Section",
    "SolverConfig",
    "SolverTaskConfig",
    "SpagConfig",
    "SpinConfig",
    "WatchConfig",
    "apply_override",
    "config_from_dict",
    "describe_fields",
    "fingerprinted",
    "installed_trackers",
    "load_config",
    "option",
]
