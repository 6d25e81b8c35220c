"""Adversarial Taboo's rules (rzero.spag.game) and target words (rzero.spag.words): every rule
with its outcome written out, in both match modes, with the official judge's quirks."""

import pytest

from rzero.spag.game import (
    ATTACKER_WINS,
    DEFENDER_WINS,
    TIE,
    VIOLATION,
    decide,
    guessed_word,
    inflections,
    is_guess,
    judge,
    mentions,
    next_role,
    spells_out,
)
from rzero.spag.words import candidate_words, is_eval_word, target_words

A, D = "attacker", "defender"


def game(*texts):
    return [(A if i % 2 == 0 else D, t) for i, t in enumerate(texts)]


@pytest.mark.parametrize("match", ["word", "official"])
@pytest.mark.parametrize(
    "texts, result, messages",
    [
        # the defender names the word in the phrase: defender wins
        (("What do you eat for a snack?", "I know the word! It is apple!"), DEFENDER_WINS, 2),
        # quotes and case around the guessed word
        (("A red fruit?", "I KNOW THE WORD! It is 'Apple'."), DEFENDER_WINS, 2),
        # a guess naming another word: attacker wins
        (("A red fruit?", "I know the word! It is cherry!"), ATTACKER_WINS, 2),
        # the defender says the word outside a guess: attacker wins
        (("What keeps the doctor away?", "An apple a day, they say."), ATTACKER_WINS, 2),
        # ... or a plural of it
        (("What grows in orchards?", "Apples and pears."), ATTACKER_WINS, 2),
        # the attacker says the word: a violation, whatever follows
        (("Say apple please.", "I know the word! It is apple!"), VIOLATION, 1),
        # the attacker declares a guess: a violation
        (("I know the word! It is pear.", "Hm."), VIOLATION, 1),
        # the first deciding message decides; later ones are ignored
        (
            ("Fruit?", "Maybe.", "Red and round?", "An apple!", "I said apple", "ok"),
            ATTACKER_WINS,
            4,
        ),
        # five turns each without a decision: a tie after ten messages
        (tuple(f"turn {i}" for i in range(10)), TIE, 10),
        # messages past the tenth are not judged
        (tuple(f"turn {i}" for i in range(10)) + ("apple",), TIE, 10),
    ],
)
def test_each_rule_gives_its_outcome(match, texts, result, messages):
    outcome = judge(game(*texts), "apple", max_turns=5, match=match)
    assert (outcome.result, outcome.messages) == (result, messages)
    assert outcome.winner == {ATTACKER_WINS: A, DEFENDER_WINS: D}.get(result)


def test_the_official_judge_matches_substrings_and_the_default_whole_words():
    start = game("Where do races begin?", "At the start line.")
    assert judge(start, "art", 5, "official").result == ATTACKER_WINS  # "start" says "art"
    assert judge(start, "art", 5, "word").result == TIE
    smart = game("Be smart about it.", "OK")
    assert judge(smart, "art", 5, "official").result == VIOLATION
    assert judge(smart, "art", 5, "word").result == TIE
    # a word glued to the next one by a case change is still said (seen in a 135M model's game)
    glued = game("repeatTheartres, do your job", "ok")
    assert judge(glued, "repeat", 5, "word").result == VIOLATION
    assert judge(glued, "repeat", 5, "official").result == VIOLATION
    # both: an inflection of the word counts
    for match in ("official", "word"):
        assert mentions("They were painting all day", "paint", match)
        assert mentions("He painted it", "paint", match)


def test_a_guess_is_the_phrase_and_names_the_first_word_after_it_is():
    assert guessed_word('Hmm. I know the word! It is "Banana"! Right?') == "banana"
    assert guessed_word("i know the word. it's: lamp") == "lamp"
    assert guessed_word("I know the word!") is None
    # articles and hedges before the word, a typographic apostrophe
    assert guessed_word("I know the word! It is an apple!") == "apple"
    assert guessed_word("I know the word! It’s probably the lamp.") == "lamp"
    assert judge(game("Fruit?", "I know the word! It is an apple!"), "apple", 5).result == (
        DEFENDER_WINS
    )
    assert is_guess("I know the word! It is lamp.", "official")
    assert not is_guess("I know the word!", "official")  # the official phrase needs text after "it"
    assert not is_guess("I know a word: lamp", "word")
    # a right guess in the official judge: one of the forms within 8 characters after "it"
    outcome = judge(game("Light source?", "I know the word! It is lamps"), "lamp", 5, "official")
    assert outcome.result == DEFENDER_WINS
    # a guess at an inflection is right in both modes
    outcome = judge(game("Light source?", "I know the word! It is lamps"), "lamp", 5, "word")
    assert outcome.result == DEFENDER_WINS


def test_a_guess_is_judged_before_the_word_in_the_same_message():
    # the right guess contains the word; it is the guess that counts
    assert decide(D, "apple! I know the word! It is apple!", "apple", 2).result == DEFENDER_WINS
    # a wrong guess that also says the word: still a wrong guess (attacker wins either way)
    assert decide(D, "I know the word! It is pear, not apple", "apple", 2).reason == (
        "the defender guessed a wrong word"
    )
    assert decide(A, "a hint", "apple", 1) is None
    with pytest.raises(ValueError, match="role 'judge'"):
        decide("judge", "x", "apple", 1)
    with pytest.raises(ValueError, match="match 'fuzzy'"):
        judge([], "apple", 5, "fuzzy")


def test_inflections_cover_the_regular_forms():
    assert {"apples"} <= inflections("apple")
    assert {"boxes", "boxing", "boxed"} <= inflections("box")
    assert {"cities", "citied"} <= inflections("city")
    assert {"makes", "making"} <= inflections("make") and "makeing" not in inflections("make")
    assert {"running", "runned"} <= inflections("run")
    assert "plays" in inflections("play") and "plaies" not in inflections("play")
    assert inflections("free") == {"free", "frees", "freed", "freeing"}


def test_the_turn_order_and_the_spelling_probe():
    assert next_role([]) == A and next_role(game("hi")) == D and next_role(game("a", "b")) == A
    assert spells_out("it goes a-p-p-l-e", "apple")
    assert spells_out("think A P P L E", "apple")
    assert spells_out("ap-ple", "apple") and spells_out("app*le", "apple")
    assert spells_out("ap ple", "apple")  # "ple" is no word of its own
    # ordinary phrases are no splits: both halves are words
    for text, word in (
        ("a part", "apart"),
        ("is land", "island"),
        ("in to", "into"),
        ("a way", "away"),
        ("app le", "apple"),
    ):
        assert not spells_out(text, word), text
    assert not spells_out("an apple", "apple")  # said, not spelled: `mentions` catches that
    assert not spells_out("a pineapple tree", "apple")


def test_target_words_are_filtered_and_split_so_evaluation_words_never_train():
    words = candidate_words()
    assert len(words) > 1000
    assert all(w.isalpha() and w.islower() and 4 <= len(w) <= 10 for w in words)
    assert "the" not in words and "which" not in words  # the most frequent ranks are skipped
    inflected = {f for w in words for f in inflections(w) if f != w}
    assert not inflected & set(words)  # no word is another's inflection
    train, evals = set(target_words("train", 5000, 0)), set(target_words("eval", 5000, 0))
    assert train and evals and not train & evals
    assert all(is_eval_word(w) for w in evals) and not any(is_eval_word(w) for w in train)
    share = sum(map(is_eval_word, words)) / len(words)
    assert 0.15 < share < 0.25
    # seeded
    assert target_words("train", 8, 3) == target_words("train", 8, 3)
    assert target_words("train", 8, 3) != target_words("train", 8, 4)
    with pytest.raises(ValueError, match="split 'test'"):
        target_words("test", 1, 0)
