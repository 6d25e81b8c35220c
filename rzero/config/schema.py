"""One config object for a whole R-Zero run: `RZeroConfig`, loaded by `load_config`.

Every field carries its help text and its allowed values in the dataclass metadata, so the
validator, the `rzero config` listing and the error messages all read from one place.
YAML recipes in `configs/` use exactly these section and field names; `--set a.b=v`
overrides one field (the value is parsed as YAML, so `--set run.iterations=3` is an int).
Anything unknown, mistyped or out of range fails before any work starts, with one line that
names the key, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from rzero.config.fields import (
    ConfigError,
    Section,
    option,
    type_name,
)
from rzero.config.schedule import role_schedule
from rzero.config.sections import (
    AuditConfig,
    CodeConfig,
    EvalConfig,
    GenerationConfig,
    RunConfig,
    WatchConfig,
    check_code_tier,
)

__all__ = ["AuditConfig", "ChallengerConfig", "CodeConfig", "ConfigError", "EvalConfig",
           "GRPOSection",
           "GenerationConfig", "LabelingConfig", "ModelConfig", "RZeroConfig", "RolesConfig",
           "RunConfig", "Section", "SolverConfig", "WatchConfig", "config_from_dict",
           "describe_fields", "load_config"]


@dataclass(frozen=True)
class ModelConfig(Section):
    section: ClassVar[str] = "model"

    name: str = option("embedded:smollm2-135m-instruct",
                   "Base model spec: 'embedded:smollm2-135m-instruct', a local checkpoint "
                   "directory, or a Hugging Face hub id.")
    dtype: str = option("float32", "Weights dtype (training keeps these as master weights).",
                        choices=("float32", "bfloat16", "float16"))
    generation_dtype: str = option("auto", "Dtype in-process sampling computes in (votes, pool, "
                                   "evaluation, CPU rollouts); 'auto': bfloat16 where the "
                                   "hardware has bf16 matrix instructions, else float32.",
                                   choices=("auto", "float32", "bfloat16"))
    train_compute: str = option("auto", "Dtype GRPO computes in: 'bfloat16' is autocast over "
                                "the weights (float32 masters on CPU); 'auto': bfloat16 where "
                                "the hardware has bf16 matrix instructions or the weights are "
                                "bfloat16, else float32.",
                                choices=("auto", "float32", "bfloat16"))
    device: str = option("auto", "Device for in-process models: 'auto' picks cuda when present.",
                     choices=("auto", "cpu", "cuda"))
    gradient_checkpointing: bool = option(False, "Recompute activations in the backward pass "
                                             "(saves memory on GPU).")
    attn_implementation: str = option("sdpa", "Attention kernel for in-process models.",
                                  choices=("eager", "sdpa", "flash_attention_2"))


@dataclass(frozen=True)
class RolesConfig(Section):
    section: ClassVar[str] = "roles"

    shared: bool = option(False, "One model plays both roles, so both phases update the same "
                             "weights (Single-R-Zero ablation). False: separate weights (R-Zero).")
    train_challenger: bool = option(True, "Train the challenger. False keeps the base challenger "
                                      "(the 'untrained challenger' ablation).")


@dataclass(frozen=True)
class GRPOSection(Section):
    """The GRPO settings of one role; `ChallengerConfig` and `SolverConfig` extend it."""

    steps: int = option(5, "GRPO steps per iteration (paper: challenger 5, solver 15).", min=1)
    group_size: int = option(4, "Completions per prompt, G (paper: challenger 4, solver 5).", min=2)
    prompts_per_step: int = option(2, "Prompts sampled per GRPO step (the rollout); the step "
                                  "generates prompts x G completions once (for the challenger, "
                                  "the B of the repetition penalty).", min=1)
    prompts_per_update: int = option(0, "Prompts per optimiser update: a step's rollout is split "
                                    "into prompts_per_step / prompts_per_update mini-batches, "
                                    "one update each, all on the rollout sampled before the "
                                    "first (official code: challenger 16 of 512, solver 128 of "
                                    "512). 0 or prompts_per_step: one update per step.", min=0)
    learning_rate: float = option(1e-6, "Adam learning rate (paper: 1e-6).", min=0.0)
    beta: float = option(0.01, "KL coefficient against the reference model (paper: 1e-2).", min=0.0)
    epsilon: float = option(0.2, "Lower PPO clip range (paper: 0.2).", min=0.0)
    epsilon_high: float = option(0.3, "Upper PPO clip range (paper: 0.3, clip-higher).", min=0.0)
    max_completion_length: int = option(256, "Max new tokens of a completion.", min=1)
    micro_batch_size: int = option(0, "Sequences per forward/backward pass on each training "
                                  "process. An update's prompts_per_update x G sequences are "
                                  "accumulated over micro-batches: the same update with less "
                                  "memory. 0: the process's whole share of an update in one "
                                  "pass.", min=0)
    temperature: float = option(1.0, "Rollout sampling temperature.", min=0.0, min_exclusive=True)
    prompt_file: str | None = option(None, "Text file replacing the role's prompt (format: "
                                       "rzero/prompts/templates.py).")
    trl: dict[str, Any] = option({}, "Further TRL GRPOConfig options, passed straight through "
                                 "(e.g. {weight_decay: 0.01}); options this section sets "
                                 "itself are refused.")

    @property
    def update_prompts(self) -> int:
        """Prompts per optimiser update (`prompts_per_update`, 0 meaning the whole rollout)."""
        return self.prompts_per_update or self.prompts_per_step

    @property
    def updates_per_step(self) -> int:
        """Optimiser updates one GRPO step makes over its rollout."""
        return self.prompts_per_step // self.update_prompts

    def check(self) -> None:
        s = self.section
        if self.prompts_per_step % self.update_prompts:
            raise ConfigError(
                f"{s}.prompts_per_update={self.prompts_per_update!r}: must divide "
                f"{s}.prompts_per_step ({self.prompts_per_step}), so every update gets the same "
                f"number of the rollout's prompts; pick a divisor of {self.prompts_per_step}, "
                f"or 0 for one update per step")
        batch = self.update_prompts * self.group_size
        if self.micro_batch_size and batch % self.micro_batch_size:
            what = "prompts_per_update" if self.prompts_per_update else "prompts_per_step"
            raise ConfigError(
                f"{s}.micro_batch_size={self.micro_batch_size!r}: must divide the update "
                f"batch {s}.{what} x {s}.group_size = {batch}; pick a divisor of {batch}, "
                f"or 0")
        if self.trl:
            _check_trl_options(self.section, self.trl)


@dataclass(frozen=True)
class ChallengerConfig(GRPOSection):
    section: ClassVar[str] = "challenger"

    reward_form: str = option("paper", "Uncertainty reward: paper 1-2|p-1/2|; reference "
                                   "min(p,1-p) (official code); learnability 1-p (Absolute Zero); "
                                   "variance 4p(1-p); beta_learnability 1-(k+1)/(m+2) with "
                                   "k = p*m votes (Beta(1,1) posterior mean).",
                          choices=("paper", "reference", "learnability", "variance",
                                   "beta_learnability"))
    clip_reward: bool = option(True, "r = max(0, r_unc - lambda*r_rep) (paper). False: unclipped "
                                 "(official code).")
    repetition_lambda: float = option(1.0, "Weight lambda of the repetition penalty; 0 disables it.",
                                  min=0.0)
    tau: float = option(0.5, "Distance threshold of the BLEU clustering (paper: 0.5).",
                    min=0.0, max=1.0)
    bleu_variant: str = option("sacrebleu", "BLEU for the repetition penalty: sacrebleu "
                                        "(13a tokens, exp smoothing) or reference (official "
                                        "code: whitespace tokens, smoothing method 1).",
                           choices=("sacrebleu", "reference"))
    format_gate: str = option("tags_and_answer", "What makes a completion well-formed: "
                                              "tags_and_answer (this project: a non-empty "
                                              "<question> and a boxed answer) or tags (paper and "
                                              "official code: the <question> tags only).",
                          choices=("tags_and_answer", "tags"))
    invalid_reward: float = option(0.0, "Reward of a completion with no <question> or no boxed "
                                    "answer (paper: 0; official code: -1).", min=-1.0, max=0.0)
    pool_size: int = option(8000, "Questions N the trained challenger writes for the pool "
                              "(paper: 8000).", min=1)
    pool_temperature: float = option(1.0, "Sampling temperature for the pool.", min=0.0,
                                 min_exclusive=True)
    pool_top_p: float = option(0.95, "Nucleus top_p for the pool.", min=0.0, max=1.0,
                           min_exclusive=True)


@dataclass(frozen=True)
class SolverConfig(GRPOSection):
    section: ClassVar[str] = "solver"

    reward: str = option("accuracy", "accuracy: 1 if the boxed answer matches the pseudo-label; "
                                 "reference: 0.9*accuracy + 0.1*format (official code).",
                     choices=("accuracy", "reference"))


@dataclass(frozen=True)
class LabelingConfig(Section):
    section: ClassVar[str] = "labeling"

    num_votes: int = option(10, "Solver samples m per question for the majority vote (paper: 10).",
                        min=1)
    temperature: float = option(1.0, "Sampling temperature of the votes.", min=0.0,
                            min_exclusive=True)
    top_p: float = option(1.0, "Nucleus top_p of the votes.", min=0.0, max=1.0,
                      min_exclusive=True)
    top_k: int = option(40, "top_k of the votes (paper: 40; 0 disables).", min=0)
    max_new_tokens: int = option(256, "Max new tokens of one vote.", min=1)
    delta: float = option(0.25, "Band half-width: keep |p_hat - 1/2| <= delta (paper: 0.25).",
                      min=0.0, max=0.5)
    band_low: float | None = option(None, "Explicit lower band edge (official code: 0.3); "
                                      "set with band_high to replace delta.", min=0.0, max=1.0)
    band_high: float | None = option(None, "Explicit upper band edge (official code: 0.8).",
                                 min=0.0, max=1.0)
    filter: bool = option(True, "Apply the band filter; False keeps every labelled question "
                            "(the 'no band filter' ablation).")
    cap_label_share: float | None = option(None, "Most share of the questions in the band that "
                                             "may carry one pseudo-label; the rest of that "
                                             "label's questions, farthest from p_hat 1/2, are "
                                             "dropped (not in the paper). None: no cap.",
                                           min=0.0, max=1.0, min_exclusive=True)
    equivalence: str = option("both", "Answer grader of the votes, the solver reward and "
                                  "evaluation: math-verify must hold in both directions "
                                  "(paper) or either (official code).",
                          choices=("both", "either"))
    equivalence_timeout: float = option(5.0, "Hard wall-clock limit of one equivalence check (s).",
                                    min=0.0, min_exclusive=True)
    vote_budget_s: float | None = option(None, "Most math-verify seconds one question's vote may "
                                           "spend; past it, its remaining checks count as "
                                           "different answers. None: no cap.",
                                     min=0.0, min_exclusive=True)

    def check(self) -> None:
        if (self.band_low is None) != (self.band_high is None):
            raise ConfigError(f"labeling.band_low={self.band_low!r}, labeling.band_high="
                              f"{self.band_high!r}: set both or neither")
        if self.band_low is not None and self.band_low > self.band_high:
            raise ConfigError(f"labeling.band_low={self.band_low!r}: must be <= "
                              f"labeling.band_high ({self.band_high!r})")


# Fields that do not change what a run computes, so a run directory resumes across changes
# to them: where it is written, how resume checks files, the collapse watch (thresholds, the
# audit's own measurements, what stops the run) and the trackers.
NOT_FINGERPRINTED = ("run.output_dir", "run.verify", "run.stop_on", "run.report_to", "watch.*")
# fields added after run directories existed: hashed only when set away from their default,
# so a run made before a field existed still resumes (its fingerprint is unchanged)
FINGERPRINTED_WHEN_SET = ("generation.kv_cache_gib", "generation.enforce_eager",
                          "generation.max_model_len", "run.cpu_processes")


def fingerprinted(key: str) -> bool:
    """Whether `section.key` is part of `RZeroConfig.fingerprint`."""
    return key not in NOT_FINGERPRINTED and f"{key.split('.')[0]}.*" not in NOT_FINGERPRINTED


@dataclass(frozen=True)
class RZeroConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    roles: RolesConfig = field(default_factory=RolesConfig)
    challenger: ChallengerConfig = field(default_factory=lambda: ChallengerConfig(
        steps=5, group_size=4))
    solver: SolverConfig = field(default_factory=lambda: SolverConfig(steps=15, group_size=5))
    labeling: LabelingConfig = field(default_factory=LabelingConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    code: CodeConfig = field(default_factory=CodeConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def fingerprint(self, ignore: tuple[str, ...] = NOT_FINGERPRINTED) -> str:
        """Hash of everything that changes what a run computes (not where it is written,
        how it is checked or watched, or where its metrics go). `ignore`: `section.key` or
        `section.*`."""
        d = self.to_dict()
        defaults = RZeroConfig().to_dict()
        for key in FINGERPRINTED_WHEN_SET:
            section, name = key.split(".")
            if d[section][name] == defaults[section][name]:
                d[section].pop(name)
        for key in ignore:
            section, name = key.split(".")
            if name == "*":
                d.pop(section, None)
            else:
                d[section].pop(name, None)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if not isinstance(getattr(self, f.name), _sections()[f.name]):
                raise ConfigError(f"{f.name}: expected a {_sections()[f.name].__name__}")
        shared = set(self.run.train_gpus) & set(self.generation.solver_gpus)
        if shared and self.generation.solver_replicas > 0:
            raise ConfigError(f"run.train_gpus={self.run.train_gpus!r}: GPUs {sorted(shared)} "
                              f"also serve the solver (generation.solver_gpus="
                              f"{self.generation.solver_gpus!r}); give each GPU one job")
        if len(set(self.run.train_gpus)) != len(self.run.train_gpus):
            raise ConfigError(f"run.train_gpus={self.run.train_gpus!r}: a GPU is listed twice")
        if self.generation.backend == "openai" and not self.generation.base_urls:
            raise ConfigError("generation.backend='openai': set generation.base_urls to the "
                              "servers' .../v1 addresses")
        check_code_tier(self)
        for role in (self.challenger, self.solver):
            try:
                role_schedule(role, self.run.training_processes)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None


def _sections() -> dict[str, type]:
    hints = typing.get_type_hints(RZeroConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(RZeroConfig)}


def _build(raw: dict[str, Any]) -> RZeroConfig:
    sections = _sections()
    if not isinstance(raw, dict):
        raise ConfigError(f"config: expected a mapping of sections, got {type(raw).__name__}")
    built = {}
    for name, value in raw.items():
        if name not in sections:
            raise ConfigError(f"{name}: unknown section; allowed sections are "
                              f"{', '.join(sections)}")
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ConfigError(f"{name}={value!r}: expected a mapping of fields")
        allowed = [f.name for f in dataclasses.fields(sections[name])]
        for key in value:
            if key not in allowed:
                raise ConfigError(f"{name}.{key}: unknown key; allowed keys in '{name}' are "
                                  f"{', '.join(allowed)}")
        defaults = {f.name: getattr(_DEFAULTS, name).__dict__[f.name]
                    for f in dataclasses.fields(sections[name])}
        built[name] = sections[name](**{**defaults, **value})
    return RZeroConfig(**built)


# What `grpo.grpo_config` sets from a role's own fields (or from the run) and so a `trl:`
# mapping may not: one value, one place.
TRL_MANAGED = frozenset({
    "output_dir", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps",
    "steps_per_generation", "generation_batch_size", "num_iterations", "num_generations",
    "learning_rate", "beta", "epsilon", "epsilon_high", "max_completion_length", "temperature",
    "seed", "data_seed", "bf16", "fp16", "use_cpu", "gradient_checkpointing",
    "activation_checkpointing", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization",
    "deepspeed", "report_to", "logging_steps", "save_strategy", "disable_tqdm"})


def _check_trl_options(section: str, options: dict[str, Any]) -> None:
    from rzero.engine.grpo import trl_option_names  # only when a recipe sets TRL options

    known, version = trl_option_names()
    for key in options:
        if key in TRL_MANAGED:
            raise ConfigError(f"{section}.trl.{key}: set by rzero itself; use the "
                              f"'{section}' field of that meaning instead (rzero config --fields)")
        if key not in known:
            raise ConfigError(f"{section}.trl.{key}: not an option of TRL's GRPOConfig "
                              f"(trl {version}); check the spelling")


def _parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    key, _, value = text.partition("=")
    parts = key.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--set {text!r}: the key must be section.key, e.g. run.iterations")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return parts, parsed


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RZeroConfig:
    """Read a YAML recipe (or the defaults), apply `section.key=value` overrides, validate."""
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
        (section, key), value = _parse_override(text)
        sec = raw.setdefault(section, {})
        if not isinstance(sec, dict):
            raise ConfigError(f"{section}: expected a mapping of fields")
        sec[key] = value
    return _build(raw)


def config_from_dict(raw: dict[str, Any]) -> RZeroConfig:
    return _build(raw)


def describe_fields() -> list[tuple[str, str, Any, str]]:
    """(key, type, default, help) for every field, for `rzero config --fields`."""
    rows = []
    for name, cls in _sections().items():
        hints = typing.get_type_hints(cls)
        default = getattr(_DEFAULTS, name)
        for f in dataclasses.fields(cls):
            rows.append((f"{name}.{f.name}", type_name(hints[f.name]),
                         getattr(default, f.name), f.metadata["help"]))
    return rows


_DEFAULTS = RZeroConfig()
