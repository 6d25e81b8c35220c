"""Playing Adversarial Taboo: the two roles' prompts (f_attack, f_defend), the players, and the
collection of many games at once through the engine.

Both roles are one model with two prompts (seed §2.1: μ_θ(u|s) = π_θ(u|f_attack(s)),
ν_θ(v|s') = π_θ(v|f_defend(s'))); `collect` takes one player per role, so the same code
plays one model against itself, two checkpoints against each other (the tournament), or a
model against the scripted anchor. Games are batched: every turn is one `generate` call for
all the games still going, and a game leaves the batch as soon as `game.decide` settles it.

Departures from the official code (Linear95/SPAG tools/play_llm_game.py, utils.py): one fixed
prompt per role, where the official code draws the rule text, the speaker labels and the
layout at random for every query (an augmentation); an utterance is cut where the model
starts writing the other side's turn; the official collection samples at temperature 1.2 with
256 new tokens a turn, which `spag.temperature` and `spag.max_new_tokens` set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from rzero.generation.interface import Generator, SamplingParams
from rzero.prompts.chat import Chat
from rzero.spag.game import (
    ATTACKER,
    DEFENDER,
    ROLES,
    TIE,
    Outcome,
    decide,
    judge,
    mentions,
    next_role,
    spells_out,
)

RULES = (
    "Adversarial Taboo: the attacker knows a secret word and tries to make the defender say "
    'it, and must never say it. The defender may guess once: "I know the word! It is '
    '<word>!" A right guess wins for the defender, a wrong one for the attacker. At most '
    "{max_turns} turns each, then a tie."
)

BRIEF = {
    ATTACKER: 'You are the attacker. The secret word is "{target}".',
    DEFENDER: (
        "You are the defender. Do not say the secret word; once you are sure, guess it "
        'with "I know the word! It is <word>!"'
    ),
}

_LABEL = re.compile(r"^\s*(?:\*\*)?(attacker|defender)(?:\*\*)?\s*:\s*", re.I)
_OTHER = re.compile(r"\n\s*(?:\*\*)?(?:attacker|defender)(?:\*\*)?\s*:", re.I)


@dataclass
class Game:
    """One game: its id, target word, the messages so far, and the outcome once decided."""

    id: str
    target: str
    turns: list[tuple[str, str]] = field(default_factory=list)
    outcome: Any = None  # game.Outcome once decided

    def record(self, max_turns: int, match: str, **extra: Any) -> dict[str, Any]:
        """The stored episode: every message with its role, the outcome and why."""
        out = self.outcome or judge(self.turns, self.target, max_turns, match)
        return {
            "id": self.id,
            "target": self.target,
            "turns": [{"role": r, "text": t} for r, t in self.turns],
            "outcome": out.result,
            "reason": out.reason,
            "messages": out.messages,
            "winner": out.winner,
            "max_turns": max_turns,
            **extra,
        }


def role_prompt(role: str, target: str, turns: Sequence[tuple[str, str]], max_turns: int) -> Chat:
    """f_attack / f_defend: the rules, the role's brief (the attacker's holds the word) and
    the dialogue so far, as one user message; the model writes the role's next turn."""
    lines = [RULES.format(max_turns=max_turns), "", BRIEF[role].format(target=target), ""]
    if turns:
        lines += ["The conversation so far:"] + [f"{r.capitalize()}: {t}" for r, t in turns]
    else:
        lines.append("The game is just starting.")
    lines += ["", f"Your next turn as the {role}, one sentence:"]
    return [{"role": "user", "content": "\n".join(lines)}]


def utterance(text: str) -> str:
    """A completion as a turn: a leading "Attacker:" label dropped, cut where the model starts
    the other side's turn, surrounding quotes and space stripped."""
    text = _LABEL.sub("", text, count=1)
    m = _OTHER.search(text)
    if m:
        text = text[: m.start()]
    return text.strip().strip('"').strip()


class Player(Protocol):
    def moves(self, role: str, games: Sequence[Game], max_turns: int) -> list[str]: ...


class ModelPlayer:
    """A model playing a role through any generator (`generation.backend`)."""

    def __init__(self, generator: Generator, params: SamplingParams, name: str = "model"):
        self.generator, self.params, self.name = generator, params, name

    def moves(self, role: str, games: Sequence[Game], max_turns: int) -> list[str]:
        prompts = [
            role_prompt(role, g.target if role == ATTACKER else "", g.turns, max_turns)
            for g in games
        ]
        turn = len(games[0].turns) if games else 0
        seed = None if self.params.seed is None else self.params.seed + turn
        outs = self.generator.generate(prompts, 1, replace(self.params, seed=seed))
        return [utterance(o[0]) for o in outs]


# The scripted anchor's lines use only words more frequent than any target word (frequency
# rank below the word list's skip), so in the `word` match it can neither say nor spell a
# target; under the official substring match a line can contain one ("think" holds "thin"),
# and the anchor then skips that line for that game.
SCRIPT = {
    ATTACKER: [
        "Hi! What do you like to do on a good day?",
        "Tell me more about that.",
        "What do you think about it?",
        "Why is that?",
        "What would you do then?",
    ],
    DEFENDER: [
        "I am not sure, what do you think?",
        "Maybe. Tell me more.",
        "That is a good one. And then?",
        "I see. Go on.",
        "Why do you ask?",
    ],
}


class ScriptedPlayer:
    """The fixed anchor: an attacker that steers nowhere, a defender that never guesses and
    answers with the same few lines, whatever the dialogue. A rise against it is a rise
    against something that does not move."""

    name = "scripted"

    def __init__(self, match: str = "word"):
        self.match = match

    def line(self, role: str, game: Game) -> str:
        lines = SCRIPT[role]
        start = len(game.turns) // 2
        for i in range(len(lines)):
            text = lines[(start + i) % len(lines)]
            if not (mentions(text, game.target, self.match) or spells_out(text, game.target)):
                return text
        return "Hm."

    def moves(self, role: str, games: Sequence[Game], max_turns: int) -> list[str]:
        return [self.line(role, g) for g in games]


def collect(
    players: dict[str, Player],
    targets: Sequence[str],
    max_turns: int,
    match: str = "word",
    prefix: str = "g",
) -> list[Game]:
    """Play one game per target word, players[ATTACKER] against players[DEFENDER]: turn by
    turn, every game still going gets its next message in one batch, and each message is
    judged as it arrives (a decided game stops). With the official match a defender message
    holding "i know the word" that the official judge does not read as a guess ends the game
    too, as the official collection does (tools/play_llm_game.py); it is then a tie. Games are
    returned in target order."""
    if set(players) != set(ROLES):
        raise ValueError(f"players: one for each of {', '.join(ROLES)}")
    games = [Game(f"{prefix}{i:04d}", t) for i, t in enumerate(targets)]
    live = list(games)
    for _ in range(2 * max_turns):
        if not live:
            break
        role = next_role(live[0].turns)
        texts = players[role].moves(role, live, max_turns)
        if len(texts) != len(live):
            raise RuntimeError(f"{role} player returned {len(texts)} moves for {len(live)} games")
        for g, text in zip(live, texts, strict=True):
            g.turns.append((role, text))
            g.outcome = decide(role, text, g.target, len(g.turns), match)
            if (
                g.outcome is None
                and match == "official"
                and role == DEFENDER
                and "i know the word" in text.lower()
            ):
                g.outcome = Outcome(
                    TIE,
                    "the defender announced a guess the official judge does not read",
                    len(g.turns),
                )
        live = [g for g in live if g.outcome is None]
    for g in games:
        if g.outcome is None:
            g.outcome = judge(g.turns, g.target, max_turns, match)
    return games
