"""One config object for a whole R-Zero run: `RZeroConfig`, loaded by `load_config`.

Every field carries its help text and its allowed values in the dataclass metadata, so the
validator, the `rzero config` listing and the error messages all read from one place.
YAML recipes in `configs/` use exactly these section and field names; `--set a.b=v`
overrides one field (the value is parsed as YAML, so `--set run.iterations=3` is an int), a
mapping merges into the recipe's (`--set challenger.trl.weight_decay=0.02` sets one entry,
`--set 'challenger.trl={top_p: 1.0}'` adds to the rest) and `a.b:=v` replaces it whole.
Anything unknown, mistyped or out of range fails before any work starts, with one line that
names the key, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rzero.config.code import CodeConfig
from rzero.config.fields import ConfigError, Section, type_name
from rzero.config.guidance import GuidanceConfig
from rzero.config.roles import (
    ChallengerConfig,
    GRPOSection,
    LabelingConfig,
    RolesConfig,
    SolverConfig,
)
from rzero.config.schedule import role_schedule
from rzero.config.sections import (
    AuditConfig,
    EvalConfig,
    GenerationConfig,
    ModelConfig,
    RunConfig,
    WatchConfig,
)
from rzero.config.solver_task import SolverTaskConfig
from rzero.config.symmetric import SpagConfig, SpinConfig

__all__ = [
    "AuditConfig",
    "ChallengerConfig",
    "CodeConfig",
    "ConfigError",
    "EvalConfig",
    "GRPOSection",
    "GenerationConfig",
    "LabelingConfig",
    "ModelConfig",
    "RZeroConfig",
    "RolesConfig",
    "RunConfig",
    "Section",
    "SolverConfig",
    "SpagConfig",
    "SpinConfig",
    "WatchConfig",
    "config_from_dict",
    "describe_fields",
    "load_config",
]


NOT_FINGERPRINTED = (
    "run.output_dir",
    "run.verify",
    "run.save_steps",  # a resumed run ends with the weights of an uninterrupted one
    "run.stop_on",
    "run.report_to",
    "run.push_to_hub",
    "run.hub_model_id",
    "run.hub_private",
    "watch.*",
)
# fields that are gone, and the value that is now what every run does: a recipe or a run
# folder's config.yaml may still name one at that value; any other is one line saying why
REMOVED_FIELDS = {
    "generation.solver_data_parallel": (
        True,
        "the frozen solver is one server per machine (`vllm serve "
        "--data-parallel-size N`); N servers on N ports are no longer run",
    ),
}
# fields added after run directories existed: hashed only when set away from their default,
# so a run made before a field existed still resumes (its fingerprint is unchanged)
FINGERPRINTED_WHEN_SET = (
    "generation.kv_cache_gib",
    "generation.enforce_eager",
    "generation.max_model_len",
    "run.cpu_processes",
    "challenger.lora",
    "solver.lora",
    "spin.plateau_updates",
    "spin.plateau_every",
    "spin.plateau_patience",
    "spin.plateau_dev",
    "spin.plateau_dev_items",
    "solver_task.label_accuracy",
)
# sections added after run directories existed: hashed only when some field is set away from
# its default, so a run of the same task made before the section existed still resumes
SECTIONS_FINGERPRINTED_WHEN_SET = ("guidance",)


def fingerprinted(key: str) -> bool:
    """Whether `section.key` is part of `RZeroConfig.fingerprint`."""
    return key not in NOT_FINGERPRINTED and f"{key.split('.')[0]}.*" not in NOT_FINGERPRINTED


# the sections every system reads (the grader's settings are labeling's), then each task's
# own: a recipe holds only its task's (`run.task`), and `rzero config --fields --task T`
# lists them
SHARED_SECTIONS = ("model", "generation", "labeling", "eval", "watch", "run")
TASK_SECTIONS = {
    "math": ("roles", "challenger", "solver", "guidance", "audit"),
    "rzero_code": ("roles", "challenger", "solver", "audit", "code"),
    "azr": ("roles", "challenger", "solver", "code"),
    "solver": ("solver", "solver_task"),
    "spin": ("spin",),
    "spag": ("spag",),
}
# each section's defaults (the roles' default budgets are the tiny loop's)
SECTION_DEFAULTS: dict[str, Any] = {
    "model": ModelConfig,
    "roles": RolesConfig,
    "challenger": lambda: ChallengerConfig(steps=5, group_size=4),
    "solver": lambda: SolverConfig(steps=15, group_size=5),
    "guidance": GuidanceConfig,
    "labeling": LabelingConfig,
    "generation": GenerationConfig,
    "audit": AuditConfig,
    "eval": EvalConfig,
    "watch": WatchConfig,
    "code": CodeConfig,
    "spin": SpinConfig,
    "spag": SpagConfig,
    "solver_task": SolverTaskConfig,
    "run": RunConfig,
}


@dataclass(frozen=True)
class RZeroConfig:
    """One run's config: the shared sections, and the sections of its task (`run.task`,
    `TASK_SECTIONS`); another task's section is None, and one given is an error naming the
    task. A task's section left out takes its defaults."""

    model: ModelConfig = field(default_factory=ModelConfig)
    roles: RolesConfig | None = None
    challenger: ChallengerConfig | None = None
    solver: SolverConfig | None = None
    guidance: GuidanceConfig | None = None
    labeling: LabelingConfig = field(default_factory=LabelingConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    audit: AuditConfig | None = None
    eval: EvalConfig = field(default_factory=EvalConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    code: CodeConfig | None = None
    spin: SpinConfig | None = None
    spag: SpagConfig | None = None
    solver_task: SolverTaskConfig | None = None
    run: RunConfig = field(default_factory=RunConfig)

    @property
    def sections(self) -> tuple[str, ...]:
        """The names of the sections this run has, in the config's order."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None)

    def to_dict(self) -> dict[str, Any]:
        return {name: dataclasses.asdict(getattr(self, name)) for name in self.sections}

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def fingerprint(self, ignore: tuple[str, ...] = NOT_FINGERPRINTED) -> str:
        """Hash of everything that changes what a run computes (not where it is written,
        how it is checked or watched, or where its metrics go): the sections the run has.
        `ignore`: `section.key` or `section.*`."""
        return _hash(self.to_dict(), ignore)

    def legacy_fingerprint(self, ignore: tuple[str, ...] = NOT_FINGERPRINTED) -> str:
        """The fingerprint a run folder's markers hold when an earlier rzero, whose configs
        carried every section, wrote them: the sections of the math loop and the code tier
        at their defaults where this task has none (with the audit off, which those tasks
        had to set), and the run's own of spin, spag and solver_task. `RunDir.prepare`
        accepts either, so such a folder resumes."""
        d = self.to_dict()
        for name in ("roles", "challenger", "solver", "audit", "code"):
            if name not in d:
                d[name] = dataclasses.asdict(SECTION_DEFAULTS[name]())
                if name == "audit":
                    d[name]["enabled"] = False
        for key, (value, _) in REMOVED_FIELDS.items():
            section, field_name = key.split(".")
            d[section][field_name] = value
        return _hash(d, ignore)

    def __post_init__(self) -> None:
        task = self.run.task if isinstance(self.run, RunConfig) else None
        own = set(SHARED_SECTIONS) | set(TASK_SECTIONS.get(task, ()))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.name in own:
                object.__setattr__(self, f.name, value := SECTION_DEFAULTS[f.name]())
            if value is None:
                continue
            if f.name not in own:
                raise ConfigError(foreign_section(f.name, task))
            if not isinstance(value, _sections()[f.name]):
                raise ConfigError(f"{f.name}: expected a {_sections()[f.name].__name__}")
        shared = set(self.run.train_gpus) & set(self.generation.solver_gpus)
        if shared and self.generation.solver_replicas > 0:
            raise ConfigError(
                f"run.train_gpus={self.run.train_gpus!r}: GPUs {sorted(shared)} "
                f"also serve the solver (generation.solver_gpus="
                f"{self.generation.solver_gpus!r}); give each GPU one job"
            )
        if len(set(self.run.train_gpus)) != len(self.run.train_gpus):
            raise ConfigError(f"run.train_gpus={self.run.train_gpus!r}: a GPU is listed twice")
        if self.generation.backend == "openai" and not self.generation.base_urls:
            raise ConfigError(
                "generation.backend='openai': set generation.base_urls to the "
                "servers' .../v1 addresses"
            )
        check_code_tier(self)
        for role in (self.challenger, self.solver):
            if role is None:
                continue
            try:
                role_schedule(role, self.run.training_processes)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None


def foreign_section(name: str, task: str | None) -> str:
    """The error for a section `name` in a recipe of `task`, which has none."""
    own = ", ".join(sections_for(task)) if task in TASK_SECTIONS else "?"
    return (
        f"{name}: a run.task={task!r} recipe has no {name} section (its sections: {own}); "
        f"remove it, or set run.task to a task that reads it"
    )


def _hash(d: dict[str, Any], ignore: tuple[str, ...]) -> str:
    """The fingerprint of a config's mapping `d` (changed in place): the fields added after
    run folders existed only where set away from their default, less `ignore`."""
    for key in FINGERPRINTED_WHEN_SET:
        section, name = key.split(".")
        if section in d and d[section][name] == getattr(SECTION_DEFAULTS[section](), name):
            d[section].pop(name)
    for section in SECTIONS_FINGERPRINTED_WHEN_SET:
        if d.get(section) == dataclasses.asdict(SECTION_DEFAULTS[section]()):
            d.pop(section)
    for key in ignore:
        section, name = key.split(".")
        if name == "*":
            d.pop(section, None)
        elif section in d:
            d[section].pop(name, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


@functools.cache
def _sections() -> dict[str, type]:
    hints = typing.get_type_hints(RZeroConfig)
    return {
        f.name: next(
            t for t in typing.get_args(hints[f.name]) or (hints[f.name],) if t is not type(None)
        )
        for f in dataclasses.fields(RZeroConfig)
    }


def _build(raw: dict[str, Any], run_folder: bool = False) -> RZeroConfig:
    """The config of a recipe's mapping `raw`. `run_folder`: `raw` is a run folder's config.yaml,
    where an earlier rzero wrote every section: another task's are dropped there."""
    sections = _sections()
    if not isinstance(raw, dict):
        raise ConfigError(f"config: expected a mapping of sections, got {type(raw).__name__}")
    task = (
        (raw.get("run") or {}).get("task", RunConfig().task)
        if isinstance(raw.get("run") or {}, dict)
        else None
    )
    built = {}
    for name, value in raw.items():
        if name not in sections:
            raise ConfigError(
                f"{name}: unknown section; allowed sections are {', '.join(sections)}"
            )
        if run_folder and task in TASK_SECTIONS and name not in sections_for(task):
            continue
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ConfigError(f"{name}={value!r}: expected a mapping of fields")
        allowed = [f.name for f in dataclasses.fields(sections[name])]
        value = _without_removed(name, value, run_folder)
        for key in value:
            if key not in allowed:
                raise ConfigError(
                    f"{name}.{key}: unknown key; allowed keys in '{name}' are {', '.join(allowed)}"
                )
        defaults = SECTION_DEFAULTS[name]().__dict__
        built[name] = sections[name](**{**defaults, **value})
    return RZeroConfig(**built)


def _without_removed(section: str, fields: dict[str, Any], run_folder: bool) -> dict[str, Any]:
    """`fields` of `section` less the REMOVED_FIELDS set to what every run now does;
    ConfigError for one set otherwise, except in a run folder's config.yaml (`run_folder`),
    which stays readable (its fingerprint no longer matches, so it does not resume)."""
    kept = dict(fields)
    for key, (now, why) in REMOVED_FIELDS.items():
        owner, name = key.split(".")
        if owner == section and name in kept:
            if kept.pop(name) != now and not run_folder:
                raise ConfigError(f"{key}={fields[name]!r}: {why}; remove it")
    return kept


def _parse_override(text: str) -> tuple[list[str], Any, bool]:
    """`section.key[.sub...]=value` (merge) or `section.key[.sub...]:=value` (replace) →
    (the key's parts, the value read as YAML, whether it replaces)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    key, _, value = text.partition("=")
    replace = key.endswith(":")
    parts = key.removesuffix(":").strip().split(".")
    if len(parts) < 2 or not all(parts):
        raise ConfigError(
            f"--set {text!r}: the key must be section.key (or section.key.sub "
            f"for a mapping field), e.g. run.iterations"
        )
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return parts, parsed, replace


def merge_mappings(old: Any, new: Any) -> Any:
    """`new` laid over `old`: where both are mappings, key by key and recursively (a key
    only `old` has is kept); anywhere else `new` itself."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    merged = dict(old)
    for key, value in new.items():
        merged[key] = merge_mappings(old.get(key), value)
    return merged


def apply_override(raw: dict[str, Any], text: str) -> None:
    """One `--set` into the recipe's raw mapping `raw`. A mapping value merges into the
    mapping it replaces (the recipe's, or the field's default), a dotted key below a field
    (`challenger.trl.weight_decay`) sets one entry of that mapping, and `:=` replaces
    instead of merging."""
    (section, key, *path), value, replace = _parse_override(text)
    if raw.get(section) is None:
        raw[section] = {}
    fields = raw[section]
    if not isinstance(fields, dict):
        raise ConfigError(f"{section}: expected a mapping of fields")
    defaults = SECTION_DEFAULTS[section]() if section in SECTION_DEFAULTS else None
    current = fields[key] if key in fields else getattr(defaults, key, None)
    if path:
        fields[key] = _set_below(current, path, value, replace, [section, key], text)
    else:
        fields[key] = value if replace else merge_mappings(current, value)


def _set_below(
    mapping: Any, path: list[str], value: Any, replace: bool, where: list[str], text: str
) -> dict[str, Any]:
    """A copy of `mapping` (at config key `where`) with the entry at `path` below it set to
    `value`, merged unless `replace`."""
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, dict):
        name = ".".join(where)
        raise ConfigError(
            f"--set {text!r}: {name}={mapping!r} is not a mapping; set it whole with {name}=value"
        )
    head, *rest = path
    if rest:
        entry = _set_below(mapping.get(head), rest, value, replace, [*where, head], text)
    else:
        entry = value if replace else merge_mappings(mapping.get(head), value)
    return {**mapping, head: entry}


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    run_folder: bool = False,
) -> RZeroConfig:
    """Read a YAML recipe (or the defaults), apply `--set` overrides (`apply_override`: a
    mapping merges into the recipe's, `:=` replaces), validate. `run_folder`: `path` is a
    run folder's config.yaml (`_build`)."""
    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r}: not found")
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {str(path)!r}: not valid YAML ({exc})") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config file {str(path)!r}: expected a mapping of sections")
    for text in overrides or []:
        apply_override(raw, text)
    return _build(raw, run_folder)


def config_from_dict(raw: dict[str, Any], run_folder: bool = False) -> RZeroConfig:
    """The config of a mapping of sections; `run_folder`: a run folder's config.yaml
    (`_build`)."""
    return _build(raw, run_folder)


def sections_for(task: str) -> tuple[str, ...]:
    """The sections a run of `task` reads, in the config's order."""
    if task not in TASK_SECTIONS:
        raise ConfigError(f"--task {task!r}: the tasks are {', '.join(TASK_SECTIONS)}")
    wanted = set(SHARED_SECTIONS) | set(TASK_SECTIONS[task])
    return tuple(name for name in _sections() if name in wanted)


def describe_fields(task: str | None = None) -> list[tuple[str, str, Any, str]]:
    """(key, type, default, help) for every field, or for those a run of `task` reads, for
    `rzero config --fields [--task T]`."""
    rows = []
    names = sections_for(task) if task is not None else tuple(_sections())
    for name, cls in _sections().items():
        if name not in names:
            continue
        hints = typing.get_type_hints(cls)
        default = SECTION_DEFAULTS[name]()
        for f in dataclasses.fields(cls):
            rows.append(
                (
                    f"{name}.{f.name}",
                    type_name(hints[f.name]),
                    getattr(default, f.name),
                    f.metadata["help"],
                )
            )
    return rows


def check_code_tier(cfg) -> None:
    """What `run.task` allows of the other sections of a run config `cfg` (rzero.code);
    ConfigError naming the field and the fix otherwise."""
    task = cfg.run.task
    if cfg.audit is not None and (cfg.audit.judge == "executor") != (task == "rzero_code"):
        fix = "executor" if task == "rzero_code" else "model"
        raise ConfigError(
            f"audit.judge={cfg.audit.judge!r} with run.task={task!r}: only "
            f"rzero_code labels can be (and are) checked by the executor; "
            f"set audit.judge={fix}"
        )
    if task == "math":
        return
    if cfg.run.training_processes > 1:
        raise ConfigError(
            f"run.train_gpus={cfg.run.train_gpus!r}, run.cpu_processes="
            f"{cfg.run.cpu_processes}: run.task={task!r} trains in one process; "
            f"leave run.train_gpus empty, cpu_processes and num_machines 1"
        )
    for role in ("challenger", "solver") if task in ("rzero_code", "azr") else ():
        if getattr(cfg, role).prompt_file is not None:
            raise ConfigError(
                f"{role}.prompt_file: run.task={task!r} uses the code "
                f"prompts of rzero/executor/prompts.py; leave it unset"
            )
    if task == "azr" and not cfg.roles.train_challenger:
        raise ConfigError(
            "roles.train_challenger=false: AZR's tasks are the proposer "
            "phase's own rollouts; set it to true"
        )
