"""R-Zero's roles in the config: which weights they share (`roles:`), the GRPO options both
roles train with (`GRPOSection`) and each role's own (`challenger:`, `solver:`), the frozen
solver's vote and band (`labeling:`), and the LoRA adapters either role may train. The
math loop, the code tier and the solver task read them; SPIN and SPAG do not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rzero.config.fields import ConfigError, Section, option

# a role's `lora:` keys, each with its check (peft's LoraConfig names: alpha is lora_alpha,
# dropout lora_dropout)
LORA_KEYS = {
    "r": ("an integer >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
    "alpha": (
        "a number > 0",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
    ),
    "dropout": (
        "a number in [0, 1)",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
    ),
    "target_modules": (
        "all-linear or a list of module names",
        lambda v: (
            v == "all-linear"
            or (isinstance(v, list) and bool(v) and all(isinstance(x, str) and x for x in v))
        ),
    ),
    "use_rslora": ("true or false", lambda v: isinstance(v, bool)),
}


def check_lora(key: str, spec: dict[str, Any]) -> None:
    """ConfigError for a role's `lora:` mapping with an unknown key, a bad value, or no r
    (an empty mapping is full fine-tuning)."""
    if not spec:
        return
    for name, value in spec.items():
        if name not in LORA_KEYS:
            raise ConfigError(
                f"{key}.{name}: not a LoRA setting; the keys are {', '.join(LORA_KEYS)}"
            )
        what, ok = LORA_KEYS[name]
        if not ok(value):
            raise ConfigError(f"{key}.{name}={value!r}: expected {what}")
    if "r" not in spec:
        raise ConfigError(f"{key}={spec!r}: needs r, the adapters' rank (e.g. {key}.r=16)")


@dataclass(frozen=True)
class RolesConfig(Section):
    section: ClassVar[str] = "roles"

    shared: bool = option(
        False,
        "One model plays both roles, so both phases update the same "
        "weights (Single-R-Zero ablation). False: separate weights (R-Zero).",
    )
    train_challenger: bool = option(
        True,
        "Train the challenger. False keeps the base challenger "
        "(the 'untrained challenger' ablation).",
    )


@dataclass(frozen=True)
class GRPOSection(Section):
    """The GRPO settings of one role; `ChallengerConfig` and `SolverConfig` extend it."""

    steps: int = option(5, "GRPO steps per iteration (paper: challenger 5, solver 15).", min=1)
    group_size: int = option(4, "Completions per prompt, G (paper: challenger 4, solver 5).", min=2)
    prompts_per_step: int = option(
        2,
        "Prompts sampled per GRPO step (the rollout); the step "
        "generates prompts x G completions once (for the challenger, "
        "the B of the repetition penalty).",
        min=1,
    )
    prompts_per_update: int = option(
        0,
        "Prompts per optimiser update: a step's rollout is split "
        "into prompts_per_step / prompts_per_update mini-batches, "
        "one update each, all on the rollout sampled before the "
        "first (official code: challenger 16 of 512, solver 128 of "
        "512). 0 or prompts_per_step: one update per step.",
        min=0,
    )
    learning_rate: float = option(1e-6, "Adam learning rate (paper: 1e-6).", min=0.0)
    beta: float = option(0.01, "KL coefficient against the reference model (paper: 1e-2).", min=0.0)
    epsilon: float = option(0.2, "Lower PPO clip range (paper: 0.2).", min=0.0)
    epsilon_high: float = option(0.3, "Upper PPO clip range (paper: 0.3, clip-higher).", min=0.0)
    max_completion_length: int = option(256, "Max new tokens of a completion.", min=1)
    micro_batch_size: int = option(
        0,
        "Sequences per forward/backward pass on each training "
        "process. An update's prompts_per_update x G sequences are "
        "accumulated over micro-batches: the same update with less "
        "memory. 0: the process's whole share of an update in one "
        "pass.",
        min=0,
    )
    temperature: float = option(1.0, "Rollout sampling temperature.", min=0.0, min_exclusive=True)
    prompt_file: str | None = option(
        None, "Text file replacing the role's prompt (format: rzero/prompts/templates.py)."
    )
    trl: dict[str, Any] = option(
        {},
        "Further TRL GRPOConfig options, passed straight through "
        "(e.g. {weight_decay: 0.01}); options this section sets "
        "itself are refused.",
    )
    lora: dict[str, Any] = option(
        {},
        "LoRA adapters instead of full fine-tuning, through TRL's "
        "peft_config (the peft extra): {r: 16, alpha: 32, dropout: "
        "0.05, target_modules: [q_proj, v_proj]}; r is required, "
        "alpha defaults to 2r, target_modules to all-linear, "
        "use_rslora to false. The phase's checkpoint is saved "
        "merged, the adapter beside it in adapter/. Empty: full "
        "fine-tuning.",
    )

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
        check_lora(f"{s}.lora", self.lora)
        if self.prompts_per_step % self.update_prompts:
            raise ConfigError(
                f"{s}.prompts_per_update={self.prompts_per_update!r}: must divide "
                f"{s}.prompts_per_step ({self.prompts_per_step}), so every update gets the same "
                f"number of the rollout's prompts; pick a divisor of {self.prompts_per_step}, "
                f"or 0 for one update per step"
            )
        batch = self.update_prompts * self.group_size
        if self.micro_batch_size and batch % self.micro_batch_size:
            what = "prompts_per_update" if self.prompts_per_update else "prompts_per_step"
            raise ConfigError(
                f"{s}.micro_batch_size={self.micro_batch_size!r}: must divide the update "
                f"batch {s}.{what} x {s}.group_size = {batch}; pick a divisor of {batch}, "
                f"or 0"
            )


@dataclass(frozen=True)
class ChallengerConfig(GRPOSection):
    section: ClassVar[str] = "challenger"

    reward_form: str = option(
        "paper",
        "Uncertainty reward: paper 1-2|p-1/2|; reference "
        "min(p,1-p) (official code); learnability 1-p (Absolute Zero); "
        "variance 4p(1-p); beta_learnability 1-(k+1)/(m+2) with "
        "k = p*m votes (Beta(1,1) posterior mean).",
        choices=("paper", "reference", "learnability", "variance", "beta_learnability"),
    )
    clip_reward: bool = option(
        True, "r = max(0, r_unc - lambda*r_rep) (paper). False: unclipped (official code)."
    )
    repetition_lambda: float = option(
        1.0, "Weight lambda of the repetition penalty; 0 disables it.", min=0.0
    )
    tau: float = option(
        0.5, "Distance threshold of the BLEU clustering (paper: 0.5).", min=0.0, max=1.0
    )
    bleu_variant: str = option(
        "sacrebleu",
        "BLEU for the repetition penalty: sacrebleu "
        "(13a tokens, exp smoothing) or reference (official "
        "code: whitespace tokens, smoothing method 1).",
        choices=("sacrebleu", "reference"),
    )
    format_gate: str = option(
        "tags_and_answer",
        "What makes a completion well-formed: "
        "tags_and_answer (this project: a non-empty "
        "<question> and a boxed answer) or tags (paper and "
        "official code: the <question> tags only).",
        choices=("tags_and_answer", "tags"),
    )
    invalid_reward: float = option(
        0.0,
        "Reward of a completion with no <question> or no boxed "
        "answer (paper: 0; official code: -1).",
        min=-1.0,
        max=0.0,
    )
    pool_size: int = option(
        8000, "Questions N the trained challenger writes for the pool (paper: 8000).", min=1
    )
    pool_temperature: float = option(
        1.0, "Sampling temperature for the pool.", min=0.0, min_exclusive=True
    )
    pool_top_p: float = option(
        0.95, "Nucleus top_p for the pool.", min=0.0, max=1.0, min_exclusive=True
    )


@dataclass(frozen=True)
class SolverConfig(GRPOSection):
    section: ClassVar[str] = "solver"

    reward: str = option(
        "accuracy",
        "accuracy: 1 if the boxed answer matches the pseudo-label; "
        "reference: 0.9*accuracy + 0.1*format (official code).",
        choices=("accuracy", "reference"),
    )


@dataclass(frozen=True)
class LabelingConfig(Section):
    section: ClassVar[str] = "labeling"

    num_votes: int = option(
        10, "Solver samples m per question for the majority vote (paper: 10).", min=1
    )
    temperature: float = option(
        1.0, "Sampling temperature of the votes.", min=0.0, min_exclusive=True
    )
    top_p: float = option(1.0, "Nucleus top_p of the votes.", min=0.0, max=1.0, min_exclusive=True)
    top_k: int = option(40, "top_k of the votes (paper: 40; 0 disables).", min=0)
    max_new_tokens: int = option(256, "Max new tokens of one vote.", min=1)
    delta: float = option(
        0.25, "Band half-width: keep |p_hat - 1/2| <= delta (paper: 0.25).", min=0.0, max=0.5
    )
    band_low: float | None = option(
        None,
        "Explicit lower band edge (official code: 0.3); set with band_high to replace delta.",
        min=0.0,
        max=1.0,
    )
    band_high: float | None = option(
        None, "Explicit upper band edge (official code: 0.8).", min=0.0, max=1.0
    )
    filter: bool = option(
        True,
        "Apply the band filter; False keeps every labelled question "
        "(the 'no band filter' ablation).",
    )
    cap_label_share: float | None = option(
        None,
        "Most share of the questions in the band that "
        "may carry one pseudo-label; the rest of that "
        "label's questions, farthest from p_hat 1/2, are "
        "dropped (not in the paper). None: no cap.",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )
    equivalence: str = option(
        "both",
        "Answer grader of the votes, the solver reward and "
        "evaluation: math-verify must hold in both directions "
        "(paper) or either (official code).",
        choices=("both", "either"),
    )
    equivalence_timeout: float = option(
        5.0, "Hard wall-clock limit of one equivalence check (s).", min=0.0, min_exclusive=True
    )
    vote_budget_s: float | None = option(
        None,
        "Most math-verify seconds one question's vote may "
        "spend; past it, its remaining checks count as "
        "different answers. None: no cap.",
        min=0.0,
        min_exclusive=True,
    )

    def check(self) -> None:
        if (self.band_low is None) != (self.band_high is None):
            raise ConfigError(
                f"labeling.band_low={self.band_low!r}, labeling.band_high="
                f"{self.band_high!r}: set both or neither"
            )
        if self.band_low is not None and self.band_low > self.band_high:
            raise ConfigError(
                f"labeling.band_low={self.band_low!r}: must be <= "
                f"labeling.band_high ({self.band_high!r})"
            )


# Fields that do not change what a run computes, so a run directory resumes across changes
# to them: where it is written, how resume checks files, the collapse watch (thresholds, the
# audit's own measurements, what stops the run) and the trackers.
