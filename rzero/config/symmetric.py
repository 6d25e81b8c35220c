"""The sections of the seed's two symmetric systems, SPIN (`spin:`, run.task spin) and SPAG
(`spag:`, run.task spag); the rest are in `rzero.config.sections`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rzero.config.fields import ConfigError, Section, option


@dataclass(frozen=True)
class SpinConfig(Section):
    """SPIN (run.task spin; seed 000 §1.3): self-play fine-tuning on an SFT set."""

    section: ClassVar[str] = "spin"

    data: str = option(
        "embedded:easy-worked",
        "The SFT set: 'embedded:easy-worked' (worked "
        "solutions of the easy templates in one fixed style, none of whose "
        "problems is an evaluation item), a JSONL file of {prompt, response} "
        "rows, or a hub dataset id with 'prompt'/'response' or 'messages' "
        "columns (e.g. HuggingFaceH4/ultrachat_200k:train_sft).",
    )
    prompts: int = option(
        64,
        "Training prompts per iteration, each answered once by the opponent (paper: 50,000).",
        min=1,
    )
    heldout: int = option(32, "Held-out pairs for the dynamics (never trained on).", min=1)
    lambdas: list[float] = option(
        [0.1],
        "λ per iteration (TRL's β), the last one repeated "
        "(paper: 0.1 early, 5.0 near convergence, e.g. "
        "[0.1, 0.1, 0.1, 5.0]).",
        min=0.0,
        min_exclusive=True,
    )
    pair_weights: list[float] = option(
        [1.0, 1.0],
        "Weight of this iteration's pairs, the "
        "previous iteration's, ...: w keeps round(w·n) of that "
        "iteration's n pairs (paper: [1.0, 1.0]).",
        min=0.0,
    )
    objective: str = option(
        "spin",
        "spin (TRL DPOTrainer, sigmoid loss = SPIN's logistic ℓ, "
        "reference = the opponent) or sft (the control: the same "
        "updates of plain SFT on the data answers, TRL SFTTrainer).",
        choices=("spin", "sft"),
    )
    epochs: float = option(
        2.0,
        "Epochs over an iteration's pairs (paper: 2; official scripts: 6).",
        min=0.0,
        min_exclusive=True,
    )
    learning_rate: float = option(
        5.0e-7, "Peak learning rate (official: 5e-7, then 1e-7).", min=0.0, min_exclusive=True
    )
    optimizer: str = option(
        "rmsprop", "Optimizer (official: rmsprop).", choices=("rmsprop", "adamw_torch")
    )
    lr_scheduler: str = option(
        "linear",
        "Learning-rate schedule (official: linear).",
        choices=("linear", "constant", "cosine"),
    )
    warmup_ratio: float = option(
        0.1, "Warm-up share of the updates (official: 0.1).", min=0.0, max=1.0
    )
    batch_size: int = option(64, "Pairs per optimiser update (official: 8 per GPU x 8).", min=1)
    micro_batch_size: int = option(
        8, "Pairs per forward pass; batch_size must be a multiple.", min=1
    )
    max_length: int = option(
        1024,
        "Prompt + response tokens kept, the end cut (TRL's "
        "keep_start; official: 1024, prompts cut to 512 from "
        "their start).",
        min=16,
    )
    max_new_tokens: int = option(256, "Tokens of an opponent answer (official: 256).", min=1)
    temperature: float = option(
        0.0,
        "Sampling temperature of the opponent's answers (0: greedy, as the official generate.py).",
        min=0.0,
    )
    discriminator_steps: int = option(
        0,
        "Updates of plain SFT on the data that make the "
        "frozen stronger discriminator (trained once, from "
        "the base): its held-out accuracy tells a stall of "
        "the optimiser from a reached target; 0: none.",
        min=0,
    )
    plateau_updates: int = option(
        0,
        "The most updates of plain SFT on the training rows before the first "
        "iteration: θ_0 is then the checkpoint where the development draw's "
        "pass@1 stopped rising (the paper starts SPIN from its SFT model); "
        "0: θ_0 is the base.",
        min=0,
    )
    plateau_every: int = option(
        8, "Score the development draw every this many of those SFT updates.", min=1
    )
    plateau_patience: int = option(
        2,
        "Stop the SFT once this many scores in a row bring no new best (ties do not count).",
        min=1,
    )
    plateau_dev: str = option(
        "easy:7",
        "The development draw of the plateau's curve (never the held-out easy).",
    )
    plateau_dev_items: int = option(
        64, "Items of the development draw scored at each point of the curve.", min=1
    )

    def check(self) -> None:
        if self.plateau_dev == "easy":
            raise ConfigError(
                "spin.plateau_dev='easy': the held-out evaluation items; give a "
                "development draw such as easy:7"
            )
        if self.batch_size % self.micro_batch_size:
            raise ConfigError(
                f"spin.batch_size={self.batch_size}: not a multiple of "
                f"spin.micro_batch_size={self.micro_batch_size}"
            )
        if not self.lambdas:
            raise ConfigError("spin.lambdas: give at least one λ")
        if not self.pair_weights or self.pair_weights[0] <= 0:
            raise ConfigError(
                f"spin.pair_weights={self.pair_weights!r}: the first weight "
                f"(this iteration's pairs) must be > 0"
            )


@dataclass(frozen=True)
class SpagConfig(Section):
    """SPAG (run.task spag; seed 000 §2): self-play of Adversarial Taboo, trained offline."""

    section: ClassVar[str] = "spag"

    games: int = option(64, "Self-play games per epoch, each on a training target word.", min=1)
    max_turns: int = option(5, "Turns each side before a tie (paper: 5).", min=1)
    match: str = option(
        "word",
        "How a word is matched: word (whole words and their regular "
        "inflections) or official (the official judge's substring "
        "test: 'start' says 'art').",
        choices=("word", "official"),
    )
    vocabulary: int = option(
        3000,
        "Frequency ranks of wordfreq's English list the target "
        "words are drawn from (after the first 400).",
        min=100,
    )
    eval_share: float = option(
        0.2,
        "Share of the words held out for evaluation games (by "
        "hash: no evaluation word is ever a training target).",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )
    temperature: float = option(1.2, "Sampling temperature of the games (paper: 1.2).", min=0.0)
    max_new_tokens: int = option(256, "Tokens of one turn (paper: 256).", min=1)
    decay: float = option(
        0.8,
        "Reward discount per turn away from the end (paper: 0.8).",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )
    clip: float = option(0.2, "Importance-ratio clip ε (official: 0.2).", min=0.0)
    kl_coef: float = option(
        0.2, "KL coefficient β toward the collecting policy (paper: 0.2).", min=0.0
    )
    sft_coef: float = option(0.5, "Weight α of the SFT loss (paper: 0.5).", min=0.0)
    roles: str = option(
        "shared",
        "shared (one model plays both roles, the paper) or "
        "separate (an attacker model and a defender model from the "
        "same start, each trained on its own role's winner turns "
        "and the SFT rows: the seed's role-independence question; "
        "the math evaluation then scores the defender, and the "
        "roles' gradient cosine is not taken, no weight being "
        "shared).",
        choices=("shared", "separate"),
    )
    objective: str = option(
        "spag",
        "spag (the offline self-play loss on the winners' turns "
        "plus α SFT) or sft (the control: the same updates spent "
        "on the SFT rows alone; the games are still played and "
        "stored, and train nothing).",
        choices=("spag", "sft"),
    )
    sft_data: str = option(
        "embedded:easy-worked",
        "Instruction data mixed into every update: "
        "the SFT sets spin.data takes ('embedded:easy-worked', a JSONL "
        "file of {prompt, response}, a hub dataset id).",
    )
    sft_rows: int = option(
        64,
        "SFT rows mixed into each epoch's update (official: all of Alpaca's 52k; 0: no SFT term).",
        min=0,
    )
    epochs: float = option(
        1.0, "Passes over an epoch's rows (official: 1).", min=0.0, min_exclusive=True
    )
    learning_rate: float = option(
        2.0e-6, "Peak learning rate (official: 2e-6).", min=0.0, min_exclusive=True
    )
    optimizer: str = option(
        "adamw_torch", "Optimizer (official: AdamW).", choices=("adamw_torch", "rmsprop")
    )
    lr_scheduler: str = option(
        "cosine",
        "Learning-rate schedule (official: cosine).",
        choices=("constant", "linear", "cosine"),
    )
    warmup_ratio: float = option(
        0.03, "Warm-up share of the updates (official: 0.03).", min=0.0, max=1.0
    )
    batch_size: int = option(
        128, "Rows per optimiser update (official: 2 per GPU x 8 accumulation x 8 GPUs).", min=1
    )
    micro_batch_size: int = option(
        2, "Rows per forward pass; batch_size must be a multiple.", min=1
    )
    max_length: int = option(
        2048,
        "Prompt + turn tokens kept, the start cut (official: 2048, truncation side left).",
        min=16,
    )
    tournament_games: int = option(
        16,
        "Evaluation games per ordered pair of players (each "
        "plays both roles that often), on held-out words.",
        min=0,
    )
    teacher_url: str = option(
        "",
        "OpenAI-compatible endpoint of a stronger model that plays "
        "both roles for the imitation step (paper: GPT-4); empty: "
        "no imitation.",
    )
    teacher_model: str = option("", "The teacher's model name at teacher_url.")
    teacher_key_env: str = option(
        "", "Environment variable holding the teacher's API key (read, never written)."
    )
    imitation_games: int = option(64, "Teacher games for the imitation step.", min=1)
    imitation_kl: float = option(
        0.1, "KL coefficient of the imitation loss toward the base (official: 0.1).", min=0.0
    )
    imitation_lr: float = option(
        5.0e-6,
        "Peak learning rate of the imitation step (official: 5e-6).",
        min=0.0,
        min_exclusive=True,
    )

    def check(self) -> None:
        if self.batch_size % self.micro_batch_size:
            raise ConfigError(
                f"spag.batch_size={self.batch_size}: not a multiple of "
                f"spag.micro_batch_size={self.micro_batch_size}"
            )
        if bool(self.teacher_url) != bool(self.teacher_model):
            raise ConfigError(
                "spag.teacher_url and spag.teacher_model: set both (imitation "
                "of a teacher's games) or neither"
            )
