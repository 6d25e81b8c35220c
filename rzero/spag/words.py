"""The target words of Adversarial Taboo: frequent English words from `wordfreq` (offline,
its bundled frequency lists), filtered and split so that evaluation games use words that
training games never saw.

The filter keeps lower-case ASCII words of 4 to 10 letters between frequency ranks `skip`
and `skip + size` (the most frequent ranks are function words: "the", "which", "about"), and
drops a word that is an inflection (`rzero.spag.game.inflections`) of another listed word,
so neither "apples" nor "needs" is a target (the rule-based inflections catch regular forms
only). wordfreq has no parts of speech: a few names ("steve") and verbs stay in the list.
The official SPAG draws its targets from a list of frequent words in the same way.

The split is by the word itself: a word is an evaluation word when the first byte of its
SHA-256 falls below `eval_share` of 256, so the split does not depend on the list's order,
its size or the seed, and no word is ever on both sides.
"""

from __future__ import annotations

import hashlib
import random

from rzero.spag.game import inflections

SPLITS = ("train", "eval")


def is_eval_word(word: str, eval_share: float = 0.2) -> bool:
    return hashlib.sha256(word.encode()).digest()[0] < round(256 * eval_share)


def candidate_words(size: int = 3000, skip: int = 400) -> list[str]:
    """Frequent English words, filtered as described above, most frequent first."""
    from wordfreq import top_n_list

    ranked = top_n_list("en", skip + size)
    # every regular inflection of a listed word other than itself ("needs" of "need")
    # (bases of 3 letters or more: "k" would take "king", "th" "thing")
    inflected = {f for b in ranked if b.isalpha() and len(b) >= 3 for f in inflections(b) if f != b}
    return [
        w
        for w in ranked[skip:]
        if w.isascii() and w.isalpha() and w.islower() and 4 <= len(w) <= 10 and w not in inflected
    ]


def target_words(
    split: str, n: int, seed: int, *, size: int = 3000, skip: int = 400, eval_share: float = 0.2
) -> list[str]:
    """`n` target words of `split` ("train" or "eval"), drawn without replacement with
    `seed` (with replacement once the split's words run out)."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    pool = [
        w for w in candidate_words(size, skip) if is_eval_word(w, eval_share) == (split == "eval")
    ]
    rng = random.Random(f"{split}:{seed}")
    if n <= len(pool):
        return rng.sample(pool, n)
    return [rng.choice(pool) for _ in range(n)]
