"""Adversarial Taboo, the game SPAG plays (Cheng et al. 2024; seed 000 §2.1), as pure code.

The attacker knows a target word, the defender does not. They speak in turns, the attacker
first. The defender may declare "I know the word! It is X!" once, at any of its turns.

    the defender guesses the word      defender wins
    the defender guesses another word  attacker wins
    the defender says the word         attacker wins (it was led into saying it)
    the attacker says the word         a violation: the episode is dropped from training
    the attacker declares a guess      a violation, likewise
    max_turns turns each, none of the  a tie
    above

`judge` applies these rules to a dialogue and returns the outcome with the reason and the
number of messages that decided it; `decide` applies them to one message, which is how the
collection (`rzero.spag.play.collect`) stops a game as soon as it is decided.

Matching a word has two modes (`spag.match`):

    official  the official judge (Linear95/SPAG tools/assign_rewards.py): a lower-cased
              substring test against the word, word+"ing", word+"ed" and its plural, and
              their quoted forms, so "start" counts as saying "art" and "apples" as saying
              "apple". A guess is the phrase "i know the word! it" followed by 1 to 8
              characters and then one of those forms, anywhere in the message.
    word      (the default) whole words only: the message is split into words and a word
              counts when it is the target or one of its inflections (`inflections`:
              plural, -ing, -ed, the consonant doubled, y -> ies/ied). "start" no longer
              says "art"; "apples" still says "apple". A guess is the same phrase,
              punctuation and quotes around the word allowed, and the guessed word is the
              first word after "it is" / "it's" other than an article or a hedge ("It is
              an apple", "It's probably apple"); it is right when it is the target or one
              of its inflections.

The plural of the official judge is TextBlob's; here it is the rule-based `inflections`,
which agrees on regular nouns (apple -> apples, box -> boxes, city -> cities) and differs
where TextBlob applies more rules: irregular plurals (mouse -> mice), -f/-fe -> -ves
(knife -> knives), -sis -> -ses (crisis -> crises).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

ATTACKER, DEFENDER = "attacker", "defender"
ROLES = (ATTACKER, DEFENDER)
MATCH_MODES = ("word", "official")

# outcomes
ATTACKER_WINS, DEFENDER_WINS, TIE, VIOLATION = "attacker_wins", "defender_wins", "tie", "violation"
OUTCOMES = (ATTACKER_WINS, DEFENDER_WINS, TIE, VIOLATION)

_GUESS = re.compile(r"i\s+know\s+the\s+word\s*[!.,:]*\s*it(?:\s+is|'s|\s*:)?", re.I)
_OFFICIAL_GUESS = r"i know the word! it.{1,8}"
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_VOWELS = set("aeiou")
# words skipped before the guessed word: "It is an apple", "It's probably apple"
_FILLER = frozenset(
    {
        "a",
        "an",
        "the",
        "probably",
        "maybe",
        "perhaps",
        "definitely",
        "surely",
        "clearly",
        "obviously",
        "actually",
        "certainly",
        "called",
        "word",
    }
)


@dataclass(frozen=True)
class Outcome:
    """The result of a game: who won (`OUTCOMES`), why, and after how many messages."""

    result: str
    reason: str
    messages: int

    @property
    def winner(self) -> str | None:
        return {ATTACKER_WINS: ATTACKER, DEFENDER_WINS: DEFENDER}.get(self.result)


def inflections(word: str) -> frozenset[str]:
    """The word and its regular inflections, lower-cased: plural (-s, -es, y -> ies), -ing
    and -ed (a final e dropped, y -> ied, a final consonant doubled after one vowel)."""
    w = word.lower()
    if w.endswith("ee"):
        forms = {w, w + "s", w + "d", w + "ing"}
    elif w.endswith("e"):
        forms = {w, w + "s", w + "d", w[:-1] + "ing"}
    elif len(w) > 1 and w.endswith("y") and w[-2] not in _VOWELS:
        forms = {w, w[:-1] + "ies", w[:-1] + "ied", w + "ing"}
    elif w.endswith(("s", "x", "z", "ch", "sh")):
        forms = {w, w + "es", w + "ed", w + "ing"}
    else:
        forms = {w, w + "s", w + "ed", w + "ing"}
    if (
        len(w) >= 3
        and w[-1] not in _VOWELS | {"w", "x", "y"}
        and w[-2] in _VOWELS
        and w[-3] not in _VOWELS
    ):
        forms |= {w + w[-1] + "ing", w + w[-1] + "ed"}
    return frozenset(forms)


def _official_forms(word: str) -> list[str]:
    """The official judge's derivative words: word, +ing, +ed, the plural, and each of these
    in double, single and back quotes."""
    w = word.lower()
    plural = (
        w[:-1] + "ies"
        if w.endswith("y") and w[-2:-1] not in _VOWELS
        else (w + "es" if w.endswith(("s", "x", "z", "ch", "sh")) else w + "s")
    )
    forms = [w, w + "ing", w + "ed", plural]
    return forms + [q.format(f) for q in ('"{}"', "'{}'", "`{}`") for f in forms]


_CASE_JOIN = re.compile(r"(?<=[a-z])(?=[A-Z])")


def words_of(text: str) -> list[str]:
    """The lower-cased words of `text`, a lower-to-upper case change splitting words that a
    model glued together ("repeatTheartres" is "repeat" and "theartres")."""
    return _WORD.findall(_CASE_JOIN.sub(" ", text).lower().replace("’", "'"))


def mentions(text: str, target: str, match: str = "word") -> bool:
    """Whether `text` says `target` (or one of its forms), in match mode `match`."""
    if match == "official":
        low = text.lower()
        return any(f in low for f in _official_forms(target))
    forms = inflections(target)
    return any(w in forms or w.split("'")[0] in forms for w in words_of(text))


def is_guess(text: str, match: str = "word") -> bool:
    """Whether `text` declares a guess ("I know the word! It is X!")."""
    if match == "official":
        return re.search(_OFFICIAL_GUESS, text.lower()) is not None
    return _GUESS.search(text.replace("’", "'")) is not None


def guessed_word(text: str) -> str | None:
    """The word named by a guess ("I know the word! It is 'apple'!" -> "apple"), or None."""
    text = text.replace("’", "'")
    m = _GUESS.search(text)
    if m is None:
        return None
    after = [w for w in words_of(text[m.end() :]) if w not in _FILLER]
    return after[0] if after else None


def is_right_guess(text: str, target: str, match: str = "word") -> bool:
    """Whether a guess in `text` names `target`."""
    if match == "official":
        low = text.lower()
        return any(re.search(_OFFICIAL_GUESS + re.escape(f), low) for f in _official_forms(target))
    word = guessed_word(text)
    return word is not None and word in inflections(target)


def decide(role: str, text: str, target: str, messages: int, match: str = "word") -> Outcome | None:
    """The outcome that message number `messages` (1-based) of `role` decides, or None when
    the game goes on. The order of the checks is the official judge's: a defender's guess is
    looked at before the word (a right guess contains the word)."""
    if role == DEFENDER:
        if is_guess(text, match):
            if is_right_guess(text, target, match):
                return Outcome(DEFENDER_WINS, "the defender guessed the word", messages)
            return Outcome(ATTACKER_WINS, "the defender guessed a wrong word", messages)
        if mentions(text, target, match):
            return Outcome(ATTACKER_WINS, "the defender said the word", messages)
        return None
    if role != ATTACKER:
        raise ValueError(f"role {role!r}: expected {ATTACKER!r} or {DEFENDER!r}")
    if mentions(text, target, match):
        return Outcome(VIOLATION, "the attacker said the word", messages)
    if is_guess(text, match):
        return Outcome(VIOLATION, "the attacker declared a guess", messages)
    return None


def judge(
    turns: Sequence[tuple[str, str]], target: str, max_turns: int, match: str = "word"
) -> Outcome:
    """The outcome of a dialogue of (role, text) messages under the rules above: the first
    message that decides the game does, and messages after it are ignored; with none, a tie
    once both sides had `max_turns` turns (messages past 2 * max_turns are ignored)."""
    if match not in MATCH_MODES:
        raise ValueError(f"match {match!r}: expected one of {', '.join(MATCH_MODES)}")
    for n, (role, text) in enumerate(turns[: 2 * max_turns], start=1):
        outcome = decide(role, text, target, n, match)
        if outcome is not None:
            return outcome
    return Outcome(TIE, f"no decision in {max_turns} turns each", min(len(turns), 2 * max_turns))


def next_role(turns: Sequence[tuple[str, str]]) -> str:
    """Whose turn it is: the attacker opens, then they alternate."""
    return ATTACKER if len(turns) % 2 == 0 else DEFENDER


# ---------------------------------------------------------------- the cheating probes


def spells_out(text: str, target: str) -> bool:
    """Whether `text` spells `target` letter by letter ("a-p-p-l-e", "a p p l e") or splits
    it with a joiner ("ap-ple", "app*le", "app_le"), or with a space where the halves are
    not both words of their own ("a part", "is land" are ordinary phrases): the word
    reaching the defender without being said."""
    w, low = target.lower(), text.lower()
    letters = r"[\s\-_.,*'\"]+".join(map(re.escape, w))
    if re.search(rf"(?<![a-z]){letters}(?![a-z])", low):
        return True
    for cut in range(2, len(w) - 1):  # both halves at least 2 letters
        head, tail = w[:cut], w[cut:]
        if re.search(rf"(?<![a-z]){re.escape(head)}[\-_.*]+{re.escape(tail)}(?![a-z])", low):
            return True
        if re.search(rf"(?<![a-z]){re.escape(head)}\s+{re.escape(tail)}(?![a-z])", low) and not (
            _is_word(head) and _is_word(tail)
        ):
            return True
    return False


def _is_word(w: str) -> bool:
    """A word of its own in English (wordfreq's Zipf frequency 3 or more: once per million
    words), so a space before it is no split."""
    from wordfreq import zipf_frequency

    return zipf_frequency(w, "en") >= 3.0
