"""R-Zero's rewards for your own TRL script: reward functions with TRL's signature
``(prompts, completions, **kwargs) -> list[float]`` for ``reward_funcs=[...]`` of a plain
`trl.GRPOTrainer`, built on the functions rzero's own loop calls (docs/trl.md has a whole
script). Neither TRL nor veRL ships a majority-vote or uncertainty reward.

    frozen_solver(model)     the solver that votes: a model path or hub id (sampled in this
                             process with transformers) or any `Generator` (a vLLM engine,
                             OpenAI-compatible servers, rzero.generation.backends)
    ChallengerReward(solver) R-Zero's challenger reward, whole: max(0, r_unc − λ·r_rep) for
                             a well-formed question, 0 otherwise (`challenger_rewards`)
    UncertaintyReward(solver) its first part alone: 1 − 2·|p̂ − ½| from the solver's m votes
                             (`uncertainty_reward`; other forms by `form`)
    RepetitionPenalty()      its second part alone, as a reward: −|C_k| / B, the share of
                             the batch in the question's BLEU cluster (`repetition_penalties`)
    FormatGate()             1 for a completion with a question and its own boxed answer
    vote_labels(solver, qs)  the solver's majority vote on your questions: label, p̂ and
                             whether p̂ lies in R-Zero's band, as rows for a solver dataset
    VoteLabelReward()        the solver's reward: 1 when its boxed answer is equivalent to
                             the row's `label` column (`solver_reward`; TTRL's with vote labels)

TRL adds the reward functions' outputs (weighted by `reward_weights`), so listing
UncertaintyReward and RepetitionPenalty gives r_unc − r_rep without R-Zero's clip at 0 and
without its gate; ChallengerReward is the paper's reward in one function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rzero.challenger.repetition import repetition_penalties
from rzero.challenger.rewards import challenger_rewards, format_gate, uncertainty_reward
from rzero.config import LabelingConfig
from rzero.generation.interface import Generator
from rzero.labeling.answers import extract_boxed, extract_question
from rzero.labeling.filtering import in_band
from rzero.labeling.voting import FrozenSolver
from rzero.prompts.chat import Prompt, completion_text
from rzero.prompts.solver import solver_chat
from rzero.solver.rewards import SolverReward

__all__ = [
    "ChallengerReward",
    "FormatGate",
    "RepetitionPenalty",
    "UncertaintyReward",
    "VoteLabelReward",
    "frozen_solver",
    "vote_labels",
]


def frozen_solver(
    model: str | Generator,
    *,
    num_votes: int = 10,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 40,
    max_new_tokens: int = 256,
    prompt: Callable[[str], Prompt] | None = None,
    device: str = "auto",
    dtype: str = "float32",
    batch_size: int = 40,
) -> FrozenSolver:
    """The solver whose `num_votes` sampled answers vote on each question (paper: m = 10 at
    temperature 1.0, top_k 40). `model` is a checkpoint path or hub id, sampled in this
    process with transformers, or any Generator. `prompt` turns a question into the
    solver's chat (default: rzero's solver prompt, an answer in \\boxed{})."""
    if isinstance(model, str):
        from rzero.generation.backends import HFGenerator

        model = HFGenerator.from_spec(model, batch_size=batch_size, dtype=dtype, device=device)
    labeling = LabelingConfig(
        num_votes=num_votes,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_new_tokens=max_new_tokens,
    )
    return FrozenSolver(model, prompt or solver_chat, labeling)


def _questions(completions: list, *, need_answer: bool = True) -> list[str | None]:
    """The question of each challenger completion, None where the format gate fails (no
    ``<question>``, or, with `need_answer`, no boxed answer of its own)."""
    out = []
    for c in completions:
        text = completion_text(c)
        q = extract_question(text)
        ok = format_gate(q, extract_boxed(text), need_answer=need_answer) and q.strip() != ""
        out.append(q if ok else None)
    return out


class _Voting:
    """What the rewards that ask the frozen solver share: a seed that moves every call, the
    last batch's votes (`rows`: question, label, p̂, the m answers) and every batch's
    (`history`), for the caller to read or keep."""

    def __init__(self, solver: FrozenSolver, seed: int):
        self.solver, self.seed, self.calls = solver, seed, 0
        self.rows: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []

    def p_hats(self, questions: list[str | None]) -> list[float | None]:
        idx = [i for i, q in enumerate(questions) if q is not None]
        answers, votes = self.solver.vote(
            [questions[i] for i in idx], self.seed * 100_003 + self.calls
        )
        self.calls += 1
        p_hats: list[float | None] = [None] * len(questions)
        self.rows = [
            {"question": q, "label": None, "p_hat": None, "answers": []} for q in questions
        ]
        for k, i in enumerate(idx):
            p_hats[i] = votes[k].p_hat
            self.rows[i].update(label=votes[k].label, p_hat=votes[k].p_hat, answers=answers[k])
        self.history += self.rows
        return p_hats


class ChallengerReward(_Voting):
    """R-Zero's challenger reward (seed 000 §4.1), the function rzero's loop calls
    (`rzero.challenger.rewards.challenger_rewards`): for a well-formed question
    max(0, r_unc(p̂) − λ·|C_k|/B), where p̂ is the frozen solver's majority share and C_k
    the question's BLEU cluster in the batch; `invalid_reward` (paper: 0) otherwise."""

    __name__ = "rzero_challenger"

    def __init__(
        self,
        solver: FrozenSolver,
        *,
        lam: float = 1.0,
        tau: float = 0.5,
        form: str = "paper",
        clip: bool = True,
        invalid_reward: float = 0.0,
        need_answer: bool = True,
        seed: int = 0,
    ):
        super().__init__(solver, seed)
        self.lam, self.tau, self.form, self.clip = lam, tau, form, clip
        self.invalid_reward, self.need_answer = invalid_reward, need_answer

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        questions = _questions(completions, need_answer=self.need_answer)
        p_hats = self.p_hats(questions)
        parts = challenger_rewards(
            [q if p is not None else None for q, p in zip(questions, p_hats, strict=True)],
            p_hats,
            tau=self.tau,
            form=self.form,
            lam=self.lam,
            clip=self.clip,
            invalid_reward=self.invalid_reward,
            num_votes=self.solver.labeling.num_votes,
        )
        for row, part in zip(self.rows, parts, strict=True):
            row.update(r_unc=part.uncertainty, r_rep=part.repetition, reward=part.reward)
        return [p.reward for p in parts]


class UncertaintyReward(_Voting):
    """r_unc alone (`uncertainty_reward`): 1 − 2·|p̂ − ½| in the paper's form, from the frozen
    solver's votes on each well-formed question; 0 for a malformed completion."""

    __name__ = "rzero_uncertainty"

    def __init__(
        self, solver: FrozenSolver, *, form: str = "paper", need_answer: bool = True, seed: int = 0
    ):
        super().__init__(solver, seed)
        self.form, self.need_answer = form, need_answer

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        p_hats = self.p_hats(_questions(completions, need_answer=self.need_answer))
        m = self.solver.labeling.num_votes
        return [0.0 if p is None else uncertainty_reward(p, self.form, num_votes=m) for p in p_hats]


class RepetitionPenalty:
    """The repetition penalty as a reward: −|C_k| / B for a well-formed question in cluster
    C_k of the batch's questions (BLEU distance, agglomerative at `tau`), B the batch size;
    0 for a malformed completion (`repetition_penalties`)."""

    __name__ = "rzero_repetition"

    def __init__(self, *, tau: float = 0.5, need_answer: bool = True):
        self.tau, self.need_answer = tau, need_answer

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        questions = _questions(completions, need_answer=self.need_answer)
        kept = [i for i, q in enumerate(questions) if q is not None]
        shares = repetition_penalties(
            [questions[i] for i in kept], self.tau, batch_size=len(questions)
        )
        out = [0.0] * len(questions)
        for i, share in zip(kept, shares, strict=True):
            out[i] = -share
        return out


class FormatGate:
    """1 for a completion with a ``<question>…</question>`` and, with `need_answer`, its own
    boxed answer (R-Zero's format check); 0 otherwise."""

    __name__ = "rzero_format"

    def __init__(self, *, need_answer: bool = True):
        self.need_answer = need_answer

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        return [float(q is not None) for q in _questions(completions, need_answer=self.need_answer)]


class VoteLabelReward(SolverReward):
    """The solver's reward against its dataset's `label` column (`solver_reward`): 1 when the
    completion's last boxed answer is equivalent to the label (math-verify), else 0; with
    labels from `vote_labels` this is R-Zero's solver phase and TTRL's reward."""

    __name__ = "rzero_vote_label"


def vote_labels(
    solver: FrozenSolver, questions: Sequence[str], *, delta: float = 0.25, seed: int = 0
) -> list[dict[str, Any]]:
    """The solver's majority vote on each question, as rows of a GRPO dataset: ``prompt``
    (the solver's chat), ``question``, ``label`` (None when no vote parsed), ``p_hat`` and
    ``in_band`` (|p̂ − ½| ≤ `delta`, R-Zero's filter; keep those rows to train on)."""
    answers, votes = solver.vote(list(questions), seed)
    return [
        {
            "prompt": solver.prompt(q),
            "question": q,
            "label": v.label,
            "p_hat": v.p_hat,
            "answers": a,
            "in_band": v.label is not None and in_band(v.p_hat, delta),
        }
        for q, a, v in zip(questions, answers, votes, strict=True)
    ]
